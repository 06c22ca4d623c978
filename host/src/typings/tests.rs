use std::path::PathBuf;
use std::process::Command;

use indexmap::IndexMap;

use super::*;
use crate::datasource::{FieldSchema, PrimitiveType};

fn column(t: PrimitiveType) -> FieldSchema {
    FieldSchema::Column(ColumnSchema::new(t))
}

fn key() -> FieldSchema {
    let mut c = ColumnSchema::new(PrimitiveType::Number);
    c.is_primary_key = true;
    c.allow_null = false;
    FieldSchema::Column(c)
}

fn many_to_one(to: &str, key: &str) -> FieldSchema {
    FieldSchema::Relation(RelationSchema::ManyToOne {
        foreign_collection: to.into(),
        foreign_key: key.into(),
        foreign_key_target: "id".into(),
    })
}

fn collection(name: &str, fields: Vec<(&str, FieldSchema)>) -> CollectionSchema {
    let mut c = CollectionSchema::new(name);
    c.fields = fields.into_iter().map(|(n, f)| (n.to_owned(), f)).collect();
    c
}

/// A shop with every naming hazard: camelCase and snake_case twins, an accent, a leading digit,
/// a keyword collection, a to-one cycle (customer ↔ address) and a to-many relation.
fn shop(reverse: bool) -> DataSourceSchema {
    let mut status = ColumnSchema::new(PrimitiveType::Enum);
    status.enum_values = vec!["paid".into(), "cancelled".into()];
    let mut collections = vec![
        collection(
            "customers",
            vec![
                ("id", key()),
                ("first_name", column(PrimitiveType::String)),
                ("firstName", column(PrimitiveType::String)),
                ("prénom", column(PrimitiveType::String)),
                ("2fa", column(PrimitiveType::Boolean)),
                ("full name", column(PrimitiveType::String)),
                (
                    "orders",
                    FieldSchema::Relation(RelationSchema::OneToMany {
                        foreign_collection: "orders".into(),
                        origin_key: "customer_id".into(),
                        origin_key_target: "id".into(),
                    }),
                ),
                (
                    "address",
                    FieldSchema::Relation(RelationSchema::OneToOne {
                        foreign_collection: "addresses".into(),
                        origin_key: "customer_id".into(),
                        origin_key_target: "id".into(),
                    }),
                ),
            ],
        ),
        collection(
            "orders",
            vec![
                ("id", key()),
                ("customer_id", column(PrimitiveType::Number)),
                ("status", FieldSchema::Column(status)),
                ("customer", many_to_one("customers", "customer_id")),
            ],
        ),
        collection(
            "addresses",
            vec![
                ("id", key()),
                ("customer_id", column(PrimitiveType::Number)),
                ("city", column(PrimitiveType::String)),
                ("customer", many_to_one("customers", "customer_id")),
            ],
        ),
        collection("type", vec![("id", key())]),
        collection("order-items", vec![("id", key())]),
        collection("OrderItems", vec![("id", key())]),
    ];
    if reverse {
        collections.reverse();
        for c in &mut collections {
            c.fields.reverse();
        }
    }
    DataSourceSchema {
        collections: collections
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect::<IndexMap<_, _>>(),
        charts: Vec::new(),
    }
}

/// The `pub const` lines of one submodule of one collection module, as (ident, value).
fn consts(source: &str, module: &str, sub: &str) -> Vec<(String, String)> {
    let start = source
        .find(&format!("pub mod {module} {{"))
        .unwrap_or_else(|| panic!("no module {module}"));
    let rest = &source[start..];
    let rest = &rest[rest
        .find(&format!("pub mod {sub} {{"))
        .unwrap_or_else(|| panic!("no {module}::{sub}"))..];
    let body = &rest[..rest.find("\n    }").unwrap()];
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .map(|l| {
            let (ident, value) = l.split_once(": &str = ").unwrap();
            (ident.to_owned(), value.trim_end_matches(';').to_owned())
        })
        .collect()
}

#[test]
fn each_collection_gets_a_module_with_its_name_fields_relations_and_paths() {
    let source = generate(&shop(false), 5).source;
    assert!(source.contains(
        "pub mod customers {\n    /// `customers`\n    pub const NAME: &str = \"customers\";"
    ));
    assert!(source.contains(
        "pub const COLLECTIONS: &[&str] = &[\n    \"OrderItems\",\n    \"addresses\",\n    \"customers\",\n    \"order-items\",\n    \"orders\",\n    \"type\",\n];"
    ));
    assert_eq!(
        consts(&source, "orders", "fields"),
        [
            ("CUSTOMER_ID", "\"customer_id\""),
            ("ID", "\"id\""),
            ("STATUS", "\"status\""),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(
        consts(&source, "orders", "relations"),
        [("CUSTOMER".to_owned(), "\"customer\"".to_owned())]
    );
    assert_eq!(
        consts(&source, "customers", "relations"),
        [
            ("ADDRESS".to_owned(), "\"address\"".to_owned()),
            ("ORDERS".to_owned(), "\"orders\"".to_owned())
        ]
    );
    // Rustdoc says the type: enum values sorted, nullable unless required, keys flagged.
    assert!(source.contains(
        "        /// `status`: `Enum` (`cancelled`, `paid`), nullable.\n        pub const STATUS: &str = \"status\";"
    ));
    assert!(source.contains("        /// `id`: `Number`, primary key.\n"));
    assert!(source.contains(
        "        /// `customer:first_name`: `String`, nullable (in `customers`).\n        pub const CUSTOMER__FIRST_NAME: &str = \"customer:first_name\";"
    ));
    assert!(source.contains("        /// `customer`: ManyToOne to `customers`.\n"));
}

#[test]
fn paths_follow_to_one_relations_up_to_the_depth_and_never_straight_back() {
    let schema = shop(false);
    let paths_of = |depth, module| -> Vec<String> {
        consts(&generate(&schema, depth).source, module, "paths")
            .into_iter()
            .map(|(_, v)| v.trim_matches('"').to_owned())
            .collect()
    };
    let depth_one = paths_of(1, "orders");
    assert!(depth_one.contains(&"customer:first_name".to_owned()));
    assert!(!depth_one.iter().any(|p| p.starts_with("customer:address:")));
    let depth_two = paths_of(2, "orders");
    assert!(depth_two.contains(&"customer:address:city".to_owned()));
    // address.customer is customer.address walked backwards: not expanded from there.
    assert!(
        !depth_two
            .iter()
            .any(|p| p.starts_with("customer:address:customer:"))
    );
    let customers = paths_of(5, "customers");
    assert!(customers.contains(&"address:city".to_owned()));
    assert!(!customers.iter().any(|p| p.starts_with("address:customer:")));
    // One-to-many relations cannot be projected through: no `orders:…` path.
    assert!(!customers.iter().any(|p| p.starts_with("orders:")));
    assert!(paths_of(0, "orders").is_empty());
}

#[test]
fn identifiers_are_valid_rust_and_distinct_whatever_the_names() {
    let source = generate(&shop(false), 5).source;
    let fields = consts(&source, "customers", "fields");
    let idents: Vec<&str> = fields.iter().map(|(i, _)| i.as_str()).collect();
    // Sorted by name (`firstName` before `first_name`), but `first_name` is written as its
    // identifier, so it keeps it.
    assert_eq!(
        idents,
        [
            "_2FA",
            "FIRST_NAME_2",
            "FIRST_NAME",
            "FULL_NAME",
            "ID",
            "PR_U00E9_NOM"
        ]
    );
    assert!(source.contains("pub mod type_ {"));
    assert!(source.contains("pub mod order_items {") && source.contains("pub mod order_items_2 {"));
    assert_eq!(const_ident("HTTPServer2Url"), "HTTP_SERVER2_URL");
    assert_eq!(const_ident("@@@"), "UNNAMED");
    assert_eq!(module_ident("self"), "self_");
    assert_eq!(module_ident("std"), "std_");
    assert_eq!(path_ident("a:b_c"), "A__B_C");
    // Names written as their identifier keep it; the others take the next free suffix.
    let ids = unique(["a b", "a_b", "A_B_2", "a-b"].into_iter(), const_ident);
    assert_eq!(ids["a_b"], "A_B");
    assert_eq!(ids["A_B_2"], "A_B_2");
    assert_eq!(ids["a b"], "A_B_3");
    assert_eq!(ids["a-b"], "A_B_4");
    let paths = unique(
        ["customer:firstName", "customer:first_name"].into_iter(),
        path_ident,
    );
    assert_eq!(paths["customer:first_name"], "CUSTOMER__FIRST_NAME");
    assert_eq!(paths["customer:firstName"], "CUSTOMER__FIRST_NAME_2");
}

#[test]
fn the_same_schema_in_another_order_gives_the_same_file() {
    assert_eq!(
        generate(&shop(false), 5).source,
        generate(&shop(true), 5).source
    );
}

#[test]
fn a_collection_past_the_path_limit_is_cut_with_a_warning() {
    // t0 → t1 → t2, 6,000 columns each: t0 reaches 12,000 paths, t1 6,000.
    let collections = (0..3)
        .map(|i| {
            let mut fields: Vec<(String, FieldSchema)> = (0..6_000)
                .map(|f| (format!("c{f}"), column(PrimitiveType::Number)))
                .collect();
            fields.push(("next".to_owned(), many_to_one(&format!("t{}", i + 1), "c0")));
            let mut c = CollectionSchema::new(format!("t{i}"));
            c.fields = fields.into_iter().collect();
            (c.name.clone(), c)
        })
        .collect();
    let schema = DataSourceSchema {
        collections,
        charts: Vec::new(),
    };
    let typings = generate(&schema, 5);
    assert_eq!(typings.warnings.len(), 1, "{:?}", typings.warnings);
    assert!(typings.warnings[0].contains("`t0`"));
    assert_eq!(
        consts(&typings.source, "t0", "paths").len(),
        MAX_PATHS_PER_COLLECTION
    );
    assert_eq!(consts(&typings.source, "t1", "paths").len(), 6_000);
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("canopy-typings-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_file_is_written_only_when_its_content_changes() {
    let dir = temp_dir();
    let path = dir.join("nested").join("typings.rs");
    let schema = shop(false);
    assert!(update(&path, &schema, 2).unwrap());
    let first = std::fs::metadata(&path).unwrap().modified().unwrap();
    assert!(!update(&path, &schema, 2).unwrap());
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), first);
    assert!(update(&path, &schema, 1).unwrap());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        generate(&schema, 1).source
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Compiles `lib` (a crate root) beside the generated `typings.rs` with `rustc`; stderr on
/// failure.
fn compile(dir: &std::path::Path, lib: &str) -> Result<(), String> {
    std::fs::write(dir.join("lib.rs"), lib).unwrap();
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned()))
        .current_dir(dir)
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "lib",
            "--emit",
            "metadata",
        ])
        .args(["--crate-name", "typings_check", "lib.rs"])
        .output()
        .expect("run rustc");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_generated_module_compiles_without_warnings_is_left_alone_by_rustfmt_and_a_typo_does_not() {
    let dir = temp_dir();
    std::fs::write(dir.join("typings.rs"), generate(&shop(false), 5).source).unwrap();
    // As a plugin uses it: a private module, only some names used, every warning an error
    // (dead code, naming lints, rustdoc-unfriendly attributes).
    let used = "#![deny(warnings)]\nmod typings;\n\
                pub fn names() -> [&'static str; 5] {\n\
                [typings::customers::NAME, typings::customers::fields::FIRST_NAME,\n\
                 typings::orders::paths::CUSTOMER__ADDRESS__CITY, typings::type_::NAME,\n\
                 typings::customers::fields::PR_U00E9_NOM]\n}\n";
    compile(&dir, used).unwrap_or_else(|stderr| panic!("{stderr}"));
    // And included at a crate's root, next to code that uses `std`.
    compile(
        &dir,
        "#![deny(warnings)]\ninclude!(\"typings.rs\");\npub fn n() -> usize { std::mem::size_of::<u8>() + COLLECTIONS.len() }\n",
    )
    .unwrap_or_else(|stderr| panic!("{stderr}"));
    // `cargo fmt --check` in the plugin crate leaves the generated file alone.
    let fmt = Command::new("rustfmt")
        .current_dir(&dir)
        .args(["--edition", "2024", "--check", "typings.rs"])
        .output()
        .expect("run rustfmt");
    assert!(
        fmt.status.success(),
        "{}",
        String::from_utf8_lossy(&fmt.stdout)
    );
    let typo =
        "mod typings;\npub fn name() -> &'static str { typings::customers::fields::FRIST_NAME }\n";
    let stderr = compile(&dir, typo).unwrap_err();
    assert!(stderr.contains("FRIST_NAME"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

mod python;
mod ts;
