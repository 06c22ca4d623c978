use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use crate::datasource::PrimitiveType as P;

fn ops(list: &[Operator]) -> BTreeSet<Operator> {
    list.iter().copied().collect()
}

fn column(ty: impl Into<ColumnType>) -> ColumnSchema {
    let mut c = ColumnSchema::new(ty);
    c.filter_operators = ops(&[Operator::Equal, Operator::Present]);
    c
}

fn pk() -> ColumnSchema {
    let mut c = column(P::Number);
    c.is_primary_key = true;
    c.is_read_only = true;
    c.allow_null = false;
    c
}

fn required(mut c: ColumnSchema) -> ColumnSchema {
    c.allow_null = false;
    c.validation.push(ValidationRule {
        operator: Operator::Present,
        value: None,
    });
    c
}

fn add(c: &mut CollectionSchema, name: &str, field: FieldSchema) {
    c.fields.insert(name.to_owned(), field);
}

fn many_to_one(fc: &str, fk: &str) -> FieldSchema {
    FieldSchema::Relation(RelationSchema::ManyToOne {
        foreign_collection: fc.into(),
        foreign_key: fk.into(),
        foreign_key_target: "id".into(),
    })
}

/// customers 1-n orders (FK omitted), products n-n tags through product_tags (composite PK of
/// two FKs, kept), an enum with a default, a read-only view.
fn shop() -> DataSourceSchema {
    let mut customers = CollectionSchema::new("customers");
    add(&mut customers, "id", FieldSchema::Column(pk()));
    add(
        &mut customers,
        "name",
        FieldSchema::Column(required(column(P::String))),
    );
    let mut mood = column(P::Enum);
    mood.enum_values = vec!["sad".into(), "happy".into(), "Zen".into()];
    mood.default_value = Some(Value::String("happy".into()));
    add(&mut customers, "mood", FieldSchema::Column(mood));
    add(
        &mut customers,
        "orders",
        FieldSchema::Relation(RelationSchema::OneToMany {
            foreign_collection: "orders".into(),
            origin_key: "customer_id".into(),
            origin_key_target: "id".into(),
        }),
    );

    let mut orders = CollectionSchema::new("orders");
    orders.segments = vec!["pending".into(), "Late".into()];
    add(&mut orders, "id", FieldSchema::Column(pk()));
    add(
        &mut orders,
        "customer_id",
        FieldSchema::Column(required(column(P::Number))),
    );
    add(
        &mut orders,
        "customer",
        many_to_one("customers", "customer_id"),
    );

    let mut products = CollectionSchema::new("products");
    add(&mut products, "id", FieldSchema::Column(pk()));
    add(
        &mut products,
        "tags",
        FieldSchema::Relation(RelationSchema::ManyToMany {
            foreign_collection: "tags".into(),
            through_collection: "product_tags".into(),
            origin_key: "product_id".into(),
            origin_key_target: "id".into(),
            foreign_key: "tag_id".into(),
            foreign_key_target: "id".into(),
        }),
    );

    let mut tags = CollectionSchema::new("tags");
    let mut tag_id = column(P::Uuid);
    tag_id.is_primary_key = true;
    add(&mut tags, "id", FieldSchema::Column(tag_id));
    add(
        &mut tags,
        "products",
        FieldSchema::Relation(RelationSchema::ManyToMany {
            foreign_collection: "products".into(),
            through_collection: "product_tags".into(),
            origin_key: "tag_id".into(),
            origin_key_target: "id".into(),
            foreign_key: "product_id".into(),
            foreign_key_target: "id".into(),
        }),
    );

    let mut product_tags = CollectionSchema::new("product_tags");
    let mut product_id = required(column(P::Number));
    product_id.is_primary_key = true;
    let mut tag_fk = required(column(P::Uuid));
    tag_fk.is_primary_key = true;
    add(
        &mut product_tags,
        "product_id",
        FieldSchema::Column(product_id),
    );
    add(&mut product_tags, "tag_id", FieldSchema::Column(tag_fk));
    add(
        &mut product_tags,
        "product",
        many_to_one("products", "product_id"),
    );
    let mut tag_rel = many_to_one("tags", "tag_id");
    if let FieldSchema::Relation(RelationSchema::ManyToOne {
        foreign_key_target, ..
    }) = &mut tag_rel
    {
        *foreign_key_target = "id".into();
    }
    add(&mut product_tags, "tag", tag_rel);

    let mut totals = CollectionSchema::new("order_totals");
    totals.searchable = false;
    totals.is_read_only = true;
    for (name, ty) in [
        ("customer", ColumnType::from(P::String)),
        ("codes", ColumnType::Array(Box::new(P::String.into()))),
    ] {
        let mut c = ColumnSchema::new(ty);
        c.is_read_only = true;
        c.is_primary_key = name == "customer";
        add(&mut totals, name, FieldSchema::Column(c));
    }

    let mut ds = DataSourceSchema::default();
    for c in [tags, products, orders, customers, totals, product_tags] {
        ds.collections.insert(c.name.clone(), c);
    }
    ds
}

/// `base` with the keys of `extra` replaced in place (key order is kept).
fn overlay(mut base: Json, extra: Json) -> Json {
    if let (Json::Object(b), Json::Object(e)) = (&mut base, extra) {
        for (k, v) in e {
            *b.get_mut(&k).expect("known key") = v;
        }
    }
    base
}

fn col(field: &str, ty: Json, extra: Json) -> Json {
    let mut base = json!({
        "defaultValue": null, "enums": [], "field": field, "integration": null,
        "inverseOf": null, "isFilterable": true, "isPrimaryKey": false, "isReadOnly": false,
        "isRequired": false, "isSortable": true, "isVirtual": false, "reference": null,
        "type": null, "validations": []
    });
    base["type"] = ty;
    overlay(base, extra)
}

fn id_col() -> Json {
    col(
        "id",
        json!("Number"),
        json!({"isPrimaryKey": true, "isReadOnly": true}),
    )
}

fn rel(field: &str, relationship: &str, ty: Json, reference: &str, extra: Json) -> Json {
    let mut base = json!({
        "defaultValue": null, "enums": null, "field": field, "integration": null,
        "inverseOf": null, "isFilterable": false, "isPrimaryKey": false, "isReadOnly": false,
        "isRequired": false, "isSortable": true, "isVirtual": false, "reference": reference,
        "relationship": relationship, "type": null, "validations": []
    });
    base["type"] = ty;
    overlay(base, extra)
}

fn coll(name: &str, fields: Vec<Json>, extra: Json) -> Json {
    let mut base = json!({
        "actions": [], "fields": [], "icon": null, "integration": null,
        "isReadOnly": false, "isSearchable": true, "isVirtual": false, "name": name,
        "onlyForRelationships": false, "paginationType": "page", "segments": []
    });
    base["fields"] = Json::Array(fields);
    overlay(base, extra)
}

fn meta() -> Meta {
    Meta {
        liana: "forest-nodejs-agent".into(),
        liana_version: "1.96.0".into(),
        liana_features: None,
        engine: "canopy".into(),
        engine_version: "0.1.0".into(),
    }
}

const PRESENT: &str = r#"{"type": "is present", "message": "Field is required"}"#;

fn present() -> Json {
    json!([{"type": "is present", "message": "Field is required"}])
}

#[test]
fn builds_the_document_as_the_agent_does() {
    let file = SchemaFile::build(&shop(), &NoActions, meta()).expect("build");
    let expected = json!({
        "collections": [
            coll("customers", vec![
                id_col(),
                col("mood", json!("Enum"), json!({
                    "defaultValue": "happy", "enums": ["Zen", "happy", "sad"]
                })),
                col("name", json!("String"), json!({
                    "isRequired": true, "validations": present()
                })),
                rel("orders", "HasMany", json!(["Number"]), "orders.id", json!({
                    "inverseOf": "customer"
                })),
            ], json!({})),
            coll("order_totals", vec![
                col("codes", json!(["String"]), json!({
                    "isFilterable": false, "isReadOnly": true
                })),
                col("customer", json!("String"), json!({
                    "isFilterable": false, "isPrimaryKey": true, "isReadOnly": true
                })),
            ], json!({"isReadOnly": true, "isSearchable": false})),
            coll("orders", vec![
                rel("customer", "BelongsTo", json!("Number"), "customers.id", json!({
                    "inverseOf": "orders", "isFilterable": true, "isRequired": true,
                    "validations": present()
                })),
                id_col(),
            ], json!({"segments": [
                {"id": "orders.Late", "name": "Late"},
                {"id": "orders.pending", "name": "pending"}
            ]})),
            coll("product_tags", vec![
                rel("product", "BelongsTo", json!("Number"), "products.id", json!({
                    "isFilterable": true, "isRequired": true, "validations": present()
                })),
                col("product_id", json!("Number"), json!({
                    "isPrimaryKey": true, "isReadOnly": true, "isRequired": true,
                    "validations": present()
                })),
                rel("tag", "BelongsTo", json!("Uuid"), "tags.id", json!({
                    "isFilterable": true, "isRequired": true, "validations": present()
                })),
                col("tag_id", json!("Uuid"), json!({
                    "isPrimaryKey": true, "isReadOnly": true, "isRequired": true,
                    "validations": present()
                })),
            ], json!({})),
            // Its only column is a read-only key, so the whole collection is read-only.
            coll("products", vec![
                id_col(),
                rel("tags", "BelongsToMany", json!(["Uuid"]), "tags.id", json!({
                    "inverseOf": "products"
                })),
            ], json!({"isReadOnly": true})),
            coll("tags", vec![
                col("id", json!("Uuid"), json!({"isPrimaryKey": true})),
                rel("products", "BelongsToMany", json!(["Number"]), "products.id", json!({
                    "inverseOf": "tags"
                })),
            ], json!({})),
        ],
        "meta": {
            "liana": "forest-nodejs-agent", "liana_version": "1.96.0", "liana_features": null,
            "stack": {"engine": "canopy", "engine_version": "0.1.0"}
        }
    });
    // Compare the text, not the values: with `preserve_order`, map equality ignores key order,
    // and key order is part of the format (and of the hash).
    assert_eq!(
        stringify_compact(&file.to_json()),
        serde_json::to_string(&expected).expect("serialize")
    );
}

#[test]
fn one_to_one_and_composite_types() {
    let mut ds = shop();
    let customers = ds.collections.get_mut("customers").expect("customers");
    customers.fields.insert(
        "last_order".into(),
        FieldSchema::Relation(RelationSchema::OneToOne {
            foreign_collection: "orders".into(),
            origin_key: "customer_id".into(),
            origin_key_target: "id".into(),
        }),
    );
    let mut address = IndexMap::new();
    address.insert("city".to_owned(), ColumnType::from(P::String));
    address.insert("zip".to_owned(), ColumnType::from(P::Number));
    customers.fields.insert(
        "address".into(),
        FieldSchema::Column(ColumnSchema::new(ColumnType::Composite(address))),
    );
    let file = SchemaFile::build(&ds, &NoActions, meta()).expect("build");
    let fields = &file.collections[0]["fields"];
    assert_eq!(
        stringify_compact(&fields[0]),
        serde_json::to_string(&col(
            "address",
            json!({"fields": [{"field": "city", "type": "String"}, {"field": "zip", "type": "Number"}]}),
            json!({"isFilterable": false})
        ))
        .expect("serialize")
    );
    assert_eq!(
        fields[2],
        rel(
            "last_order",
            "HasOne",
            json!("Number"),
            "orders.id",
            json!({"isFilterable": true, "inverseOf": "customer"})
        )
    );
    // `orders.customer` stays the inverse of the first matching relation, `orders` (field order).
    assert_eq!(file.collections[2]["fields"][0]["inverseOf"], "orders");
}

struct TwoActions;

impl ActionSchemas for TwoActions {
    fn actions(&self, collection: &CollectionSchema) -> Result<Vec<Json>> {
        Ok(if collection.name == "orders" {
            vec![
                json!({"id": "orders-0-ship", "name": "ship"}),
                json!({"id": "orders-1-cancel", "name": "Cancel"}),
            ]
        } else {
            Vec::new()
        })
    }
}

#[test]
fn actions_come_from_the_hook_sorted_by_name() {
    let file = SchemaFile::build(&shop(), &TwoActions, meta()).expect("build");
    let orders = &file.collections[2];
    assert_eq!(orders["name"], "orders");
    assert_eq!(
        orders["actions"],
        json!([
            {"id": "orders-1-cancel", "name": "Cancel"},
            {"id": "orders-0-ship", "name": "ship"}
        ])
    );
}

#[test]
fn a_relation_to_a_missing_collection_is_an_error() {
    let mut ds = shop();
    ds.collections.shift_remove("customers");
    let err = SchemaFile::build(&ds, &NoActions, meta()).expect_err("dangling relation");
    assert!(err.to_string().contains("customers"), "{err}");
}

#[test]
fn validations_are_converted_and_merged() {
    let rule = |operator, value: Option<Value>| ValidationRule { operator, value };
    let rules = vec![
        rule(Operator::GreaterThan, Some(Value::Int(1))),
        rule(Operator::Today, None),
        rule(Operator::Present, None),
        rule(Operator::GreaterThan, Some(Value::Float(2.5))),
        rule(Operator::LessThan, Some(Value::Int(10))),
        rule(Operator::LessThan, Some(Value::Int(5))),
        rule(Operator::Match, Some(Value::String("a".into()))),
        rule(Operator::Match, Some(Value::String("b".into()))),
        rule(Operator::Contains, Some(Value::String("x".into()))),
    ];
    assert_eq!(
        stringify_compact(&validations_json(&rules)),
        serde_json::to_string(&json!([
            {"type": "is greater than", "value": 2.5, "message": "Value must be greater than 2.5"},
            {"type": "is present", "message": "Field is required"},
            {"type": "is less than", "value": 5, "message": "Value must be lower than 5"},
            {"type": "is like", "value": "^(?=a)(?=b).*$", "message": "Value must match ^(?=a)(?=b).*$"},
            {"type": "contains", "value": "x", "message": "Value must contain 'x'"}
        ]))
        .expect("serialize")
    );
    assert_eq!(
        stringify_compact(&validations_json(&rules[2..3])),
        format!("[{}]", PRESENT.replace(": ", ":").replace(", ", ","))
    );
}

#[test]
fn collections_sort_like_locale_compare() {
    let mut names = vec!["b", "B", "a_b", "a1", "A", "Zed", "a-b", "a b"];
    names.sort_by(|a, b| locale_compare(a, b));
    assert_eq!(names, ["A", "a b", "a_b", "a-b", "a1", "b", "B", "Zed"]);
    // Fields sort by UTF-16 code unit, as `Array.prototype.sort`: uppercase first, and a
    // character above U+FFFF (surrogates 0xD8xx) before U+FFFD.
    let mut fields = vec!["b", "a", "B", "\u{FFFD}", "\u{1F600}"];
    fields.sort_by(|a, b| utf16_compare(a, b));
    assert_eq!(fields, ["B", "a", "b", "\u{1F600}", "\u{FFFD}"]);
}

#[test]
fn numbers_are_written_as_javascript_writes_them() {
    let cases: [(f64, &str); 12] = [
        (1.0, "1"),
        (-0.0, "0"),
        (2.5, "2.5"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012.5, "123456789012.5"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (-1.25e30, "-1.25e+30"),
        (f64::NAN, "null"),
    ];
    for (f, expected) in cases {
        assert_eq!(js_number(f), expected, "{f}");
    }
    assert_eq!(
        stringify_compact(&json!(9007199254740993_u64)),
        "9007199254740992"
    );
    assert_eq!(stringify_compact(&json!(-42)), "-42");
    assert_eq!(
        stringify_compact(&json!({"s": "a\"b\\c\n\u{1}/é"})),
        r#"{"s":"a\"b\\c\n\u0001/é"}"#
    );
}

#[test]
fn pretty_compact_keeps_what_fits_on_one_line() {
    let value = json!({
        "bool": true,
        "short array": [1, 2, 3],
        "long array": [
            {"x": 1, "y": 2}, {"x": 2, "y": 1}, {"x": 1, "y": 1}, {"x": 2, "y": 2}
        ],
        "empty": {},
        "nested": {"a": [], "b": {"c": [[1, 2], [3]]}}
    });
    assert_eq!(
        stringify_pretty_compact(&value, 30),
        r#"{
  "bool": true,
  "short array": [1, 2, 3],
  "long array": [
    {"x": 1, "y": 2},
    {"x": 2, "y": 1},
    {"x": 1, "y": 1},
    {"x": 2, "y": 2}
  ],
  "empty": {},
  "nested": {
    "a": [],
    "b": {"c": [[1, 2], [3]]}
  }
}"#
    );
    // Everything fits in 100 columns: one line.
    assert_eq!(
        stringify_pretty_compact(&json!({"a": [1, {"b": null}], "c": "d"}), 100),
        r#"{"a": [1, {"b": null}], "c": "d"}"#
    );
    // A scalar longer than the limit stays whole; an empty container never breaks.
    let long = "x".repeat(120);
    assert_eq!(
        stringify_pretty_compact(&json!({"k": long, "e": []}), 100),
        format!("{{\n  \"k\": \"{long}\",\n  \"e\": []\n}}")
    );
}

#[test]
fn pretty_compact_counts_key_comma_and_utf16_width() {
    // `  "ab": [1, 2],` is 15 columns: fits in 15, not in 14 (the trailing comma counts).
    let value = json!({"ab": [1, 2], "c": 0});
    assert_eq!(
        stringify_pretty_compact(&value, 15),
        "{\n  \"ab\": [1, 2],\n  \"c\": 0\n}"
    );
    assert_eq!(
        stringify_pretty_compact(&value, 14),
        "{\n  \"ab\": [\n    1,\n    2\n  ],\n  \"c\": 0\n}"
    );
    // "😀" is two UTF-16 units: `["😀"]` is 6 wide.
    assert_eq!(stringify_pretty_compact(&json!(["😀"]), 6), "[\"😀\"]");
    assert_eq!(
        stringify_pretty_compact(&json!(["😀"]), 5),
        "[\n  \"😀\"\n]"
    );
    // The compact form fits but the spaced one does not: expanded.
    assert_eq!(
        stringify_pretty_compact(&json!([1, 2]), 5),
        "[\n  1,\n  2\n]"
    );
}

#[test]
fn file_lines_fit_in_100_columns() {
    let file = SchemaFile::build(&shop(), &NoActions, meta()).expect("build");
    let text = file.to_pretty_string();
    assert!(!text.ends_with('\n'));
    assert!(text.starts_with("{\n  \"collections\": [\n    {\n      \"actions\": [],"));
    assert!(text.lines().all(|l| l.len() <= MAX_LINE_LENGTH), "{text}");
    assert!(text.contains("\n          \"enums\": [\"Zen\", \"happy\", \"sad\"],\n"));
    let reparsed: Json = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(
        stringify_compact(&reparsed),
        stringify_compact(&file.to_json())
    );
}

#[test]
fn hash_is_sha1_of_the_compact_document_and_stable() {
    let empty = SchemaFile {
        collections: Vec::new(),
        meta: meta(),
    };
    // sha1 of the exact string, computed independently (`printf %s ... | sha1sum`).
    assert_eq!(
        stringify_compact(&empty.to_json()),
        r#"{"collections":[],"meta":{"liana":"forest-nodejs-agent","liana_version":"1.96.0","liana_features":null,"stack":{"engine":"canopy","engine_version":"0.1.0"}}}"#
    );
    assert_eq!(empty.hash(), "2707e5c379b3820f2fa20e8b8b6c1c91be08f403");

    let a = SchemaFile::build(&shop(), &NoActions, meta()).expect("build");
    // Insertion order of the datasource does not matter.
    let mut reversed = shop();
    reversed.collections.reverse();
    let b = SchemaFile::build(&reversed, &NoActions, meta()).expect("build");
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 40);
    // Any change to the meta changes it.
    let mut other = meta();
    other.liana_features = Some(IndexMap::from([(
        "webhook-custom-actions".to_owned(),
        "1.0.0".to_owned(),
    )]));
    let c = SchemaFile::build(&shop(), &NoActions, other).expect("build");
    assert_ne!(a.hash(), c.hash());
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "canopy-schema-file-{}-{name}.json",
        std::process::id()
    ))
}

#[test]
fn written_file_reads_back_with_fresh_meta() {
    let path = temp_path("roundtrip");
    let file = SchemaFile::build(&shop(), &NoActions, meta()).expect("build");
    file.write(&path).expect("write");
    let mut fresh = meta();
    fresh.engine_version = "9.9.9".into();
    let read = SchemaFile::read(&path, fresh.clone()).expect("read");
    let _ = std::fs::remove_file(&path);
    assert_eq!(read.collections, file.collections);
    assert_eq!(read.meta, fresh);
    assert_eq!(
        stringify_compact(&Json::Array(read.collections)),
        stringify_compact(&Json::Array(file.collections))
    );
}

#[test]
fn reader_errors_name_the_path() {
    let missing = temp_path("missing");
    let err = SchemaFile::read(&missing, meta()).expect_err("missing");
    assert!(matches!(err, FileError::Read { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "Can't load {}. Providing a schema is mandatory in production.",
            missing.display()
        )
    );

    for (name, text, reason) in [
        ("garbage", "{not json", "key must be a string"),
        ("array", "[]", "no `collections` array"),
        (
            "wrong",
            r#"{"collections": {}}"#,
            "`collections` is not an array",
        ),
        (
            "nameless",
            r#"{"collections": [{}]}"#,
            "collection #0 has no name",
        ),
    ] {
        let path = temp_path(name);
        std::fs::write(&path, text).expect("write");
        let err = SchemaFile::read(&path, meta()).expect_err(name);
        let _ = std::fs::remove_file(&path);
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("Can't load {}: ", path.display())),
            "{message}"
        );
        assert!(message.contains(reason), "{message}");
    }
}

#[test]
fn write_errors_name_the_path() {
    let path = temp_path("no-such-dir").join("schema.json");
    let file = SchemaFile::build(&shop(), &NoActions, meta()).expect("build");
    let err = file.write(&path).expect_err("no directory");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn canopy_meta_keeps_the_agent_keys() {
    let m = Meta::default();
    assert_eq!(
        m.to_json(),
        json!({
            "liana": "forest-nodejs-agent",
            "liana_version": LIANA_VERSION,
            "liana_features": null,
            "stack": {"engine": "canopy", "engine_version": env!("CARGO_PKG_VERSION")}
        })
    );
}

#[test]
fn liana_features_list_the_enabled_experimental_features_in_the_agents_order() {
    let features = |webhook, update| {
        Meta::with_experimental(webhook, update).to_json()["liana_features"].clone()
    };
    assert_eq!(features(false, false), Json::Null);
    assert_eq!(
        features(true, false),
        json!({"webhook-custom-actions": "1.0.0"})
    );
    assert_eq!(
        features(false, true),
        json!({"update-record-actions": "1.0.0"})
    );
    let both = Meta::with_experimental(true, true);
    assert_eq!(
        both.liana_features
            .as_ref()
            .map(|f| f.keys().cloned().collect::<Vec<_>>()),
        Some(vec![
            "webhook-custom-actions".to_owned(),
            "update-record-actions".to_owned()
        ])
    );
    // The rest of the meta is Canopy's usual identification.
    assert_eq!(
        Meta {
            liana_features: None,
            ..both
        },
        Meta::default()
    );
}

/// files (binary key with byte lengths, data URI body, arrays and composites of bytes) ← file_tags
/// (binary foreign key), served as the Node agent's binary decorator serves them.
fn files() -> DataSourceSchema {
    use crate::datasource::schema::Wire;
    let rule = |operator, value: Option<Value>| ValidationRule { operator, value };
    let mut files = CollectionSchema::new("files");
    let mut id = required(column(P::Binary));
    id.is_primary_key = true;
    id.wire = Wire::Hex;
    id.validation
        .push(rule(Operator::LongerThan, Some(Value::Int(1))));
    id.validation
        .push(rule(Operator::ShorterThan, Some(Value::Int(16))));
    add(&mut files, "id", FieldSchema::Column(id));
    let mut body = required(column(P::Binary));
    // Rules of the bytes give way to the data URI pattern.
    body.validation
        .push(rule(Operator::LongerThan, Some(Value::Int(4))));
    add(&mut files, "body", FieldSchema::Column(body));
    add(
        &mut files,
        "thumbs",
        FieldSchema::Column(column(ColumnType::Array(Box::new(P::Binary.into())))),
    );
    let mut parts = IndexMap::new();
    parts.insert("raw".to_owned(), ColumnType::from(P::Binary));
    parts.insert("size".to_owned(), ColumnType::from(P::Number));
    add(
        &mut files,
        "parts",
        FieldSchema::Column(column(ColumnType::Composite(parts))),
    );
    let mut tags = CollectionSchema::new("file_tags");
    add(&mut tags, "id", FieldSchema::Column(pk()));
    let mut fk = column(P::Binary);
    fk.wire = Wire::Hex;
    add(&mut tags, "file_id", FieldSchema::Column(fk));
    add(&mut tags, "file", many_to_one("files", "file_id"));
    let mut ds = DataSourceSchema::default();
    for c in [files, tags] {
        ds.collections.insert(c.name.clone(), c);
    }
    ds
}

fn like(pattern: &str) -> Json {
    json!({"type": "is like", "value": pattern, "message": format!("Value must match {pattern}")})
}

#[test]
fn binary_columns_are_served_as_strings_with_the_binary_decorators_rules() {
    let file = SchemaFile::build(&files(), &NoActions, meta()).expect("build");
    let [tags, files] = &file.collections[..] else {
        panic!("two collections: {:?}", file.collections);
    };
    let present = json!({"type": "is present", "message": "Field is required"});
    let hex = like("/^[0-9a-f]+$/");
    assert_eq!(
        files["fields"],
        json!([
            col(
                "body",
                json!("String"),
                json!({
                    "isRequired": true,
                    "validations": [like("/^data:.*;base64,.*/"), present.clone()]
                })
            ),
            col(
                "id",
                json!("String"),
                json!({
                    "isPrimaryKey": true,
                    "isRequired": true,
                    // 1 to 16 bytes: 3 to 31 hex digits, as the decorator computes them.
                    "validations": [
                        hex.clone(),
                        {"type": "is longer than", "value": 3, "message": "Value must be longer than 3 characters"},
                        {"type": "is shorter than", "value": 31, "message": "Value must be shorter than 31 characters"},
                        present
                    ]
                })
            ),
            col(
                "parts",
                json!({"fields": [{"field": "raw", "type": "String"}, {"field": "size", "type": "Number"}]}),
                json!({})
            ),
            // Arrays of bytes are strings too, with their rules kept.
            col("thumbs", json!(["String"]), json!({})),
        ])
    );
    // The relation takes the served type and rules of its foreign key: hex, not required.
    assert_eq!(
        tags["fields"][0],
        rel(
            "file",
            "BelongsTo",
            json!("String"),
            "files.id",
            json!({"isFilterable": true, "validations": [hex]})
        )
    );
}

#[test]
fn binary_length_rules_follow_javascript_arithmetic() {
    use crate::datasource::schema::Wire;
    let rule = |operator, value: Option<Value>| ValidationRule { operator, value };
    let mut key = column(P::Binary);
    key.wire = Wire::Hex;
    // A zero bound is falsy in the decorator: no rule; a fractional one keeps its fraction.
    key.validation = vec![
        rule(Operator::LongerThan, Some(Value::Int(0))),
        rule(Operator::ShorterThan, Some(Value::Float(2.25))),
    ];
    assert_eq!(
        validations_json(&served_validation(&key)),
        json!([
            like("/^[0-9a-f]+$/"),
            {"type": "is shorter than", "value": 3.5, "message": "Value must be shorter than 3.5 characters"}
        ])
    );
    // Not a binary column: the rules are the column's own.
    let text = required(column(P::String));
    assert_eq!(
        served_validation(&text).as_ref(),
        text.validation.as_slice()
    );
}
