//! `canopy typings --lang python`, on the Rust tests' shop with every naming hazard.

use super::*;
use crate::typings::python::{class_ident, py_string};

fn python(reverse: bool) -> String {
    generate_in(Language::Python, &shop(reverse), 5).source
}

/// The `NAME: Final = "value"` lines of one nested class of one collection class, as (ident,
/// value).
fn constants(source: &str, class: &str, sub: &str) -> Vec<(String, String)> {
    let start = source
        .find(&format!("\nclass {class}:\n"))
        .unwrap_or_else(|| panic!("no class {class}"));
    let rest = &source[start + 1..];
    let rest = &rest[..rest[1..].find("\nclass ").map_or(rest.len(), |end| end + 1)];
    let rest = &rest[rest
        .find(&format!("    class {sub}:\n"))
        .unwrap_or_else(|| panic!("no {class}.{sub}"))..];
    let body = &rest[..rest[1..]
        .find("\n    class ")
        .map_or(rest.len(), |end| end + 1)];
    body.lines()
        .filter_map(|l| l.strip_prefix("        "))
        .filter_map(|l| l.split_once(": Final = "))
        .map(|(ident, value)| (ident.to_owned(), value.to_owned()))
        .collect()
}

#[test]
fn each_collection_gets_a_class_with_its_name_fields_relations_and_paths() {
    let source = python(false);
    assert!(source.contains("\nfrom typing import Final\n"));
    assert!(source.contains(
        "COLLECTIONS: Final = (\n    \"OrderItems\",\n    \"addresses\",\n    \"customers\",\n    \"order-items\",\n    \"orders\",\n    \"type\",\n)\n"
    ));
    assert!(source.contains(
        "\n\nclass customers:\n    \"Collection `customers`.\"\n\n    NAME: Final = \"customers\"\n"
    ));
    assert_eq!(
        constants(&source, "orders", "fields"),
        [
            ("CUSTOMER_ID", "\"customer_id\""),
            ("ID", "\"id\""),
            ("STATUS", "\"status\"")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(
        constants(&source, "customers", "relations"),
        [("ADDRESS", "\"address\""), ("ORDERS", "\"orders\"")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert!(source.contains(
        "        #: `status`: `Enum` (`cancelled`, `paid`), nullable.\n        STATUS: Final = \"status\"\n"
    ));
    assert!(source.contains(
        "        #: `customer:first_name`: `String`, nullable (in `customers`).\n        CUSTOMER__FIRST_NAME: Final = \"customer:first_name\"\n"
    ));
    assert!(source.contains("        #: `customer`: ManyToOne to `customers`.\n"));
    // A class without constants still has a body: its docstring.
    assert!(source.contains("    class relations:\n        \"Relations of `type`.\"\n"));
}

#[test]
fn identifiers_are_the_rust_modules_valid_in_python_and_distinct() {
    let source = python(false);
    let rust = generate(&shop(false), 5).source;
    for (class, module) in [("customers", "customers"), ("orders", "orders")] {
        for sub in ["fields", "relations", "paths"] {
            assert_eq!(
                constants(&source, class, sub),
                consts(&rust, module, sub),
                "{class}.{sub}"
            );
        }
    }
    let idents: Vec<String> = constants(&source, "customers", "fields")
        .into_iter()
        .map(|(i, _)| i)
        .collect();
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
    assert!(source.contains("\"pr\u{e9}nom\""));
    // `type` is no keyword in Python; `order-items` and `OrderItems` share one identifier.
    assert!(source.contains("\nclass type:\n"));
    assert!(
        source.contains("\nclass order_items:\n") && source.contains("\nclass order_items_2:\n")
    );
    assert_eq!(class_ident("class"), "class_");
    assert_eq!(class_ident("Import"), "import_");
    assert_eq!(class_ident("2fa"), "_2fa");
    assert_eq!(class_ident("None"), "none");
    assert_eq!(py_string("a\"b\\c\nd\u{85}"), "\"a\\\"b\\\\c\\x0ad\\x85\"");
}

#[test]
fn the_same_schema_in_another_order_gives_the_same_python_file() {
    assert_eq!(python(false), python(true));
}

#[test]
fn a_py_path_gets_python_and_anything_else_rust() {
    assert_eq!(
        Language::of_path(std::path::Path::new("p/typings.py")),
        Language::Python
    );
    assert_eq!(
        Language::of_path(std::path::Path::new("p/typings.rs")),
        Language::Rust
    );
    assert_eq!(
        Language::of_path(std::path::Path::new("typings")),
        Language::Rust
    );
    let dir = temp_dir();
    let path = dir.join("typings.py");
    assert!(update(&path, &shop(false), 5).unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), python(false));
    assert!(!update(&path, &shop(false), 5).unwrap());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Runs `python3` on `script` in `dir` (where `typings.py` is); stderr on failure.
fn run_python(dir: &std::path::Path, script: &str) -> Result<String, String> {
    let out = Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned()))
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .args(["-c", script])
        .output()
        .expect("run python3 (needed by this test: install Python 3, or set PYTHON)");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_generated_module_imports_and_names_what_the_schema_names() {
    let dir = temp_dir();
    let mut schema = shop(false);
    // Names that would end a string or a comment, and a keyword.
    let odd = collection(
        "class",
        vec![
            ("id", key()),
            ("quote\"back\\slash", column(PrimitiveType::String)),
            ("line\nbreak", column(PrimitiveType::String)),
        ],
    );
    schema.collections.insert(odd.name.clone(), odd);
    std::fs::write(
        dir.join("typings.py"),
        generate_in(Language::Python, &schema, 5).source,
    )
    .unwrap();
    let script = "import typings\n\
        print(typings.customers.NAME, typings.customers.fields.PR_U00E9_NOM,\n\
              typings.orders.paths.CUSTOMER__ADDRESS__CITY, typings.type.NAME,\n\
              typings.class_.NAME, repr(typings.class_.fields.QUOTE_BACK_SLASH),\n\
              repr(typings.class_.fields.LINE_BREAK), len(typings.COLLECTIONS))\n";
    let printed = run_python(&dir, script).unwrap_or_else(|stderr| panic!("{stderr}"));
    assert_eq!(
        printed.trim_end(),
        "customers pr\u{e9}nom customer:address:city type class 'quote\"back\\\\slash' \
         'line\\nbreak' 7"
    );
    let typo = run_python(
        &dir,
        "import typings\ntypings.customers.fields.FRIST_NAME\n",
    )
    .unwrap_err();
    assert!(typo.contains("FRIST_NAME"), "{typo}");
    std::fs::remove_dir_all(dir).unwrap();
}
