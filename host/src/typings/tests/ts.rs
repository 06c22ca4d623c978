//! `canopy typings --lang ts`, on the Rust tests' shop with every naming hazard.

use super::*;
use crate::typings::ts::{ts_string, type_ident};

fn ts(reverse: bool) -> String {
    generate_in(Language::Ts, &shop(reverse), 5).source
}

#[test]
fn each_collection_gets_plain_nested_and_flat_types_and_a_customizer_alias() {
    let source = ts(false);
    // No Json column in this schema: only the customizer type is imported.
    assert!(source.contains("\nimport type { CollectionCustomizer } from 'canopy-sdk';\n"));
    assert!(source.contains(
        "export type CollectionName =\n  | 'OrderItems'\n  | 'addresses'\n  | 'customers'\n  | 'order-items'\n  | 'orders'\n  | 'type';\n"
    ));
    assert!(source.contains(
        "export type CustomersCustomizer = CollectionCustomizer<Schema, 'customers'>;\n"
    ));
    // `order-items` and `OrderItems` share one identifier: the second gets a suffix.
    assert!(source.contains("export type OrderItemsCustomizer = "));
    assert!(source.contains("export type OrderItems_2Customizer = "));
    assert!(source.contains("  /** Collection `orders`. */\n  'orders': {\n    plain: {\n"));
    assert!(source.contains(
        "      /** `status`: `Enum` (`cancelled`, `paid`), nullable. */\n      'status': 'cancelled' | 'paid';\n"
    ));
    assert!(source.contains("      'id': number;\n"));
    assert!(source.contains("      'prénom': string;\n"));
    assert!(source.contains("      '2fa': boolean;\n"));
    // To-one relations only, as the agent's `nested`; the to-many `orders` of customers is not.
    assert!(source.contains(
        "      'customer': Schema['customers']['plain'] & Schema['customers']['nested'];\n"
    ));
    assert!(!source.contains("'orders': Schema["));
    assert!(source.contains("      'customer:first_name': string;\n"));
    assert!(source.contains("      'customer:address:city': string;\n"));
}

#[test]
fn the_same_schema_in_another_order_gives_the_same_ts_file() {
    assert_eq!(ts(false), ts(true));
}

#[test]
fn a_ts_path_gets_typescript() {
    for path in ["p/typings.ts", "p/typings.d.ts"] {
        assert_eq!(Language::of_path(std::path::Path::new(path)), Language::Ts);
    }
    let dir = temp_dir();
    let path = dir.join("typings.d.ts");
    assert!(update(&path, &shop(false), 5).unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), ts(false));
    assert!(!update(&path, &shop(false), 5).unwrap());
    std::fs::remove_dir_all(dir).unwrap();
    assert_eq!(type_ident("order-items"), "OrderItems");
    assert_eq!(type_ident("2fa"), "_2fa");
    assert_eq!(ts_string("a'b\\c\nd"), "'a\\'b\\\\c\\x0ad'");
}

/// `tsc` from the TypeScript SDK's toolchain (`sdk/ts`, installed by `npm ci` there).
fn toolchain() -> PathBuf {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/ts");
    assert!(
        sdk.join("node_modules/.bin/tsc").is_file(),
        "this test type-checks with the TypeScript SDK's tsc: `(cd sdk/ts && npm ci)` (what .ci/run does)"
    );
    sdk.canonicalize().unwrap()
}

/// Type-checks `plugin` (a module beside `typings.ts` in `dir`) against the SDK; the compiler's
/// output on failure.
fn type_check(dir: &Path, sdk: &Path, plugin: &str) -> Result<(), String> {
    std::fs::write(dir.join("plugin.ts"), plugin).unwrap();
    let generated = dir.join("generated");
    if !generated.is_dir() {
        let status = Command::new(sdk.join("node_modules/.bin/jco"))
            .current_dir(sdk.join("../../wit"))
            .args([
                "guest-types",
                "plugin@0.3.0",
                "--world-name",
                "customization",
                "-q",
                "-o",
            ])
            .arg(&generated)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let config = serde_json::json!({
        "extends": sdk.join("tsconfig.json"),
        "compilerOptions": { "paths": { "canopy-sdk": [sdk.join("src/index.ts")] } },
        "include": [dir.join("*.ts"), sdk.join("src"), generated],
    });
    std::fs::write(dir.join("tsconfig.json"), config.to_string()).unwrap();
    let out = Command::new(sdk.join("node_modules/.bin/tsc"))
        .args(["-p"])
        .arg(dir)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[test]
fn the_generated_schema_types_a_plugin_and_refuses_a_misspelt_dependency() {
    let sdk = toolchain();
    let dir = temp_dir();
    let mut schema = shop(false);
    // Names that would end a string or a comment.
    let odd = collection(
        "odd*/",
        vec![
            ("id", key()),
            ("quote'back\\slash", column(PrimitiveType::String)),
            ("line\nbreak", column(PrimitiveType::Point)),
            ("data", column(PrimitiveType::Json)),
        ],
    );
    schema.collections.insert(odd.name.clone(), odd);
    std::fs::write(
        dir.join("typings.ts"),
        generate_in(Language::Ts, &schema, 5).source,
    )
    .unwrap();
    let plugin = |dependency: &str| {
        format!(
            "import {{ type DataSource, exportPlugin }} from 'canopy-sdk';\n\
             import type {{ Schema, OrdersCustomizer }} from './typings';\n\
             function customize(ds: DataSource<Schema>): void {{\n\
               const orders: OrdersCustomizer = ds.collection('orders');\n\
               orders.addField('customer_first_name', {{ columnType: 'String', dependencies: ['{dependency}'], getValues: (rows) => rows.text('{dependency}') }});\n\
               ds.collection('odd*/').importField('x', {{ path: 'quote\\'back\\\\slash' }});\n\
             }}\n\
             export const {{ customizer, workflow }} = exportPlugin(customize as (ds: DataSource) => void);\n"
        )
    };
    type_check(&dir, &sdk, &plugin("customer:first_name")).unwrap_or_else(|e| panic!("{e}"));
    let typo = type_check(&dir, &sdk, &plugin("customer:frist_name")).unwrap_err();
    assert!(typo.contains("customer:frist_name"), "{typo}");
    std::fs::remove_dir_all(dir).unwrap();
}
