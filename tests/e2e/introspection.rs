//! Introspection and schema building on real databases: column types and flags per dialect,
//! keys, relations and their names (§14.5 examples), defaults, read-only collections, and the
//! include/exclude/rename options.

use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::datasource::{
    CollectionSchema, ColumnSchema, ColumnType, DataSource, PrimitiveType, RelationSchema, Value,
};
use canopy_e2e::{Backend, TestDb, on_all_backends};

/// An auto-increment integer primary key column, per backend.
fn serial(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "INTEGER PRIMARY KEY AUTOINCREMENT",
        Backend::Postgres => "SERIAL PRIMARY KEY",
        Backend::MySql => "INT AUTO_INCREMENT PRIMARY KEY",
    }
}

/// A timestamp column type, per backend.
fn timestamp(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite | Backend::MySql => "DATETIME",
        Backend::Postgres => "TIMESTAMPTZ",
    }
}

async fn served(backend: Backend, ddl: &str) -> (TestDb, SqlDataSource) {
    let db = TestDb::new(backend).await;
    db.execute(ddl).await;
    let ds = db.datasource(Options::default()).await;
    (db, ds)
}

fn collection<'a>(ds: &'a SqlDataSource, name: &str) -> &'a CollectionSchema {
    ds.schema()
        .collection(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn column<'a>(ds: &'a SqlDataSource, collection_name: &str, column_name: &str) -> &'a ColumnSchema {
    collection(ds, collection_name)
        .column(column_name)
        .unwrap_or_else(|| panic!("column {collection_name}.{column_name} missing"))
}

fn primitive(p: PrimitiveType) -> ColumnType {
    ColumnType::Primitive(p)
}

/// Relation names of a collection with their kind, sorted.
fn relations(ds: &SqlDataSource, name: &str) -> Vec<String> {
    let mut out: Vec<String> = collection(ds, name)
        .relations()
        .map(|(n, r)| format!("{n}:{}", r.kind_name()))
        .collect();
    out.sort();
    out
}

fn strings(items: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

async fn plain_tables_keys_and_relations(backend: Backend) {
    let ddl = format!(
        "CREATE TABLE customers (
            id {serial},
            name VARCHAR(100) NOT NULL,
            note TEXT,
            signed_up {ts},
            balance DECIMAL(10,2),
            vip BOOLEAN NOT NULL DEFAULT {yes},
            visits INT NOT NULL DEFAULT 0
        );
        CREATE TABLE orders (
            id {serial},
            customer_id INT NOT NULL REFERENCES customers(id),
            total DECIMAL(10,2) NOT NULL
        );",
        serial = serial(backend),
        ts = timestamp(backend),
        // SQLite keeps `TRUE` as an expression default (not shown, as in the reference).
        yes = if backend == Backend::Sqlite {
            "1"
        } else {
            "TRUE"
        },
    );
    let (_db, ds) = served(backend, &ddl).await;
    let names: Vec<&String> = ds.collection_names().collect();
    assert_eq!(names, ["customers", "orders"]);

    let id = column(&ds, "customers", "id");
    assert_eq!(id.column_type, primitive(PrimitiveType::Number));
    assert!(id.is_primary_key && id.is_read_only && !id.is_required());
    assert_eq!(id.default_value, None);

    let name = column(&ds, "customers", "name");
    assert_eq!(name.column_type, primitive(PrimitiveType::String));
    assert!(!name.is_primary_key && !name.is_read_only && name.is_required() && !name.allow_null);
    assert!(
        name.filter_operators
            .contains(&canopy::datasource::Operator::ILike)
    );

    assert_eq!(
        column(&ds, "customers", "note").column_type,
        primitive(PrimitiveType::String)
    );
    assert!(!column(&ds, "customers", "note").is_required());
    assert_eq!(
        column(&ds, "customers", "signed_up").column_type,
        primitive(PrimitiveType::Date)
    );
    assert_eq!(
        column(&ds, "customers", "balance").column_type,
        primitive(PrimitiveType::Number)
    );
    let vip = column(&ds, "customers", "vip");
    assert_eq!(vip.column_type, primitive(PrimitiveType::Boolean));
    // NOT NULL with a database default is still required (§14.3).
    assert!(vip.is_required());
    assert_eq!(vip.default_value, Some(Value::Bool(true)));
    assert_eq!(
        column(&ds, "customers", "visits").default_value,
        Some(Value::Int(0))
    );

    let customers = collection(&ds, "customers");
    assert!(!customers.is_read_only);
    assert!(customers.searchable);
    assert_eq!(customers.primary_keys(), ["id"]);
    assert_eq!(relations(&ds, "customers"), strings(&["orders:OneToMany"]));
    assert_eq!(relations(&ds, "orders"), strings(&["customer:ManyToOne"]));
    assert_eq!(
        collection(&ds, "orders").relation("customer"),
        Some(&RelationSchema::ManyToOne {
            foreign_collection: "customers".to_owned(),
            foreign_key: "customer_id".to_owned(),
            foreign_key_target: "id".to_owned(),
        })
    );
    assert_eq!(
        customers.relation("orders"),
        Some(&RelationSchema::OneToMany {
            foreign_collection: "orders".to_owned(),
            origin_key: "customer_id".to_owned(),
            origin_key_target: "id".to_owned(),
        })
    );
    // Columns come first, in table order, then relations.
    let fields: Vec<&String> = collection(&ds, "orders").fields.keys().collect();
    assert_eq!(fields, ["id", "customer_id", "total", "customer"]);
}

on_all_backends!(plain_tables_keys_and_relations);
