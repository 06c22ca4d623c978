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

/// Quotes an identifier for the backend (for mixed-case or reserved names in DDL).
fn q(backend: Backend, name: &str) -> String {
    match backend {
        Backend::MySql => format!("`{name}`"),
        Backend::Sqlite | Backend::Postgres => format!("\"{name}\""),
    }
}

async fn composite_keys_and_junctions(backend: Backend) {
    let ddl = "
        CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(50));
        CREATE TABLE user_groups_parent (id INT PRIMARY KEY);
        CREATE TABLE groups_t (id INT PRIMARY KEY);
        CREATE TABLE user_groups (
            user_id INT NOT NULL REFERENCES users(id),
            group_id INT NOT NULL REFERENCES groups_t(id),
            since DATE,
            PRIMARY KEY (user_id, group_id)
        );
        CREATE TABLE memberships (
            user_id INT NOT NULL REFERENCES users(id),
            group_id INT NOT NULL REFERENCES groups_t(id),
            role VARCHAR(20) NOT NULL,
            PRIMARY KEY (user_id, group_id, role)
        );
        CREATE TABLE follows (
            follower_id INT NOT NULL REFERENCES users(id),
            followee_id INT NOT NULL REFERENCES users(id),
            PRIMARY KEY (follower_id, followee_id)
        );
        CREATE TABLE user_groups_nopk (
            user_id INT NOT NULL REFERENCES users(id),
            group_id INT NOT NULL REFERENCES groups_t(id)
        );";
    let (_db, ds) = served(backend, ddl).await;

    let junction = collection(&ds, "user_groups");
    assert_eq!(junction.primary_keys(), ["user_id", "group_id"]);
    assert!(!junction.is_read_only);
    // Key columns without auto-increment are writable and required.
    assert!(column(&ds, "user_groups", "user_id").is_required());
    assert!(!column(&ds, "user_groups", "user_id").is_read_only);
    assert_eq!(
        relations(&ds, "user_groups"),
        strings(&["group:ManyToOne", "user:ManyToOne"])
    );
    assert_eq!(
        relations(&ds, "memberships"),
        strings(&["group:ManyToOne", "user:ManyToOne"])
    );
    assert_eq!(
        relations(&ds, "follows"),
        strings(&["followee:ManyToOne", "follower:ManyToOne"])
    );
    // `user_groups` and `memberships` both give `groups`: a conflict, so both take the long form
    // (the plural of the target table `groups_t`, through the junction).
    assert_eq!(
        relations(&ds, "users"),
        strings(&[
            "followees:ManyToMany",
            "followers:ManyToMany",
            "groups_ts_through_memberships:ManyToMany",
            "groups_ts_through_user_groups:ManyToMany",
            "user_groups_nopks:OneToMany",
        ])
    );
    assert_eq!(
        relations(&ds, "groups_t"),
        strings(&[
            "user_groups_nopks:OneToMany",
            "users_through_memberships:ManyToMany",
            "users_through_user_groups:ManyToMany",
        ])
    );
    assert_eq!(
        collection(&ds, "users").relation("followees"),
        Some(&RelationSchema::ManyToMany {
            foreign_collection: "users".to_owned(),
            through_collection: "follows".to_owned(),
            origin_key: "follower_id".to_owned(),
            origin_key_target: "id".to_owned(),
            foreign_key: "followee_id".to_owned(),
            foreign_key_target: "id".to_owned(),
        })
    );
    assert_eq!(
        collection(&ds, "groups_t").relation("users_through_user_groups"),
        Some(&RelationSchema::ManyToMany {
            foreign_collection: "users".to_owned(),
            through_collection: "user_groups".to_owned(),
            origin_key: "group_id".to_owned(),
            origin_key_target: "id".to_owned(),
            foreign_key: "user_id".to_owned(),
            foreign_key_target: "id".to_owned(),
        })
    );
    // Without a declared key, the two foreign-key columns are the guessed key, but the table
    // is not a junction.
    let nopk = collection(&ds, "user_groups_nopk");
    assert_eq!(nopk.primary_keys(), ["user_id", "group_id"]);
    assert!(!nopk.is_read_only);
    assert_eq!(
        relations(&ds, "user_groups_nopk"),
        strings(&["group:ManyToOne", "user:ManyToOne"])
    );
}

async fn relation_naming_examples(backend: Backend) {
    let reviewer = q(backend, "reviewerId");
    let user = q(backend, "user");
    let ddl = format!(
        "CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(100) UNIQUE);
        CREATE TABLE posts (
            id INT PRIMARY KEY,
            author_id INT REFERENCES users(id),
            editor_id INT REFERENCES users(id),
            {reviewer} INT REFERENCES users(id)
        );
        CREATE TABLE comments (id INT PRIMARY KEY, owner INT REFERENCES users(id), post INT REFERENCES posts(id));
        CREATE TABLE messages (id INT PRIMARY KEY, sender INT REFERENCES users(id), receiver INT REFERENCES users(id));
        CREATE TABLE employees (id INT PRIMARY KEY, manager_id INT REFERENCES employees(id));
        CREATE TABLE {user} (id INT PRIMARY KEY, user_id INT REFERENCES {user}(id));
        CREATE TABLE profiles (user_id INT PRIMARY KEY REFERENCES users(id), bio TEXT);
        CREATE TABLE passports (id INT PRIMARY KEY, user_id INT UNIQUE REFERENCES users(id));
        CREATE TABLE people (id INT PRIMARY KEY);
        CREATE TABLE status (id INT PRIMARY KEY, people_id INT REFERENCES people(id));
        CREATE TABLE data (id INT PRIMARY KEY, status_id INT REFERENCES status(id));
        CREATE TABLE uuid_pk (id INT PRIMARY KEY);
        CREATE TABLE uuid_child (id INT PRIMARY KEY, parent_id INT REFERENCES uuid_pk(id));
        CREATE TABLE by_email (id INT PRIMARY KEY, user_email VARCHAR(100) REFERENCES users(email));
        CREATE TABLE with_id (k INT PRIMARY KEY, {id} INT REFERENCES users(id));",
        id = q(backend, "Id"),
    );
    let (_db, ds) = served(backend, &ddl).await;
    assert_eq!(
        relations(&ds, "posts"),
        strings(&[
            "author:ManyToOne",
            "comments:OneToMany",
            "editor:ManyToOne",
            "reviewer:ManyToOne"
        ])
    );
    assert_eq!(
        relations(&ds, "users"),
        strings(&[
            "by_emails:OneToMany",
            "comments:OneToMany",
            "messages_through_users_receiver:OneToMany",
            "messages_through_users_sender:OneToMany",
            "passport:OneToOne",
            "posts_through_users_author_id:OneToMany",
            "posts_through_users_editor_id:OneToMany",
            "posts_through_users_reviewerId:OneToMany",
            "profile:OneToOne",
            "with_ids:OneToMany",
        ])
    );
    assert_eq!(
        relations(&ds, "comments"),
        strings(&["post_through_post:ManyToOne", "user:ManyToOne"])
    );
    assert_eq!(
        relations(&ds, "messages"),
        strings(&[
            "user_through_receiver:ManyToOne",
            "user_through_sender:ManyToOne"
        ])
    );
    assert_eq!(
        relations(&ds, "employees"),
        strings(&[
            "employees_through_employees_manager_id:OneToMany",
            "manager:ManyToOne"
        ])
    );
    assert_eq!(
        relations(&ds, "user"),
        strings(&["user_through_user_id:ManyToOne", "users:OneToMany"])
    );
    assert_eq!(relations(&ds, "profiles"), strings(&["user:ManyToOne"]));
    assert_eq!(relations(&ds, "passports"), strings(&["user:ManyToOne"]));
    assert_eq!(
        relations(&ds, "status"),
        strings(&["data:OneToMany", "person:ManyToOne"])
    );
    assert_eq!(relations(&ds, "people"), strings(&["statuses:OneToMany"]));
    assert_eq!(relations(&ds, "data"), strings(&["status:ManyToOne"]));
    assert_eq!(
        relations(&ds, "uuid_pk"),
        strings(&["uuid_children:OneToMany"])
    );
    assert_eq!(relations(&ds, "uuid_child"), strings(&["parent:ManyToOne"]));
    assert_eq!(relations(&ds, "by_email"), strings(&["user:ManyToOne"]));
    assert_eq!(relations(&ds, "with_id"), strings(&["user:ManyToOne"]));
    assert_eq!(
        collection(&ds, "users").relation("profile"),
        Some(&RelationSchema::OneToOne {
            foreign_collection: "profiles".to_owned(),
            origin_key: "user_id".to_owned(),
            origin_key_target: "id".to_owned(),
        })
    );
    assert_eq!(
        collection(&ds, "by_email").relation("user"),
        Some(&RelationSchema::ManyToOne {
            foreign_collection: "users".to_owned(),
            foreign_key: "user_email".to_owned(),
            foreign_key_target: "email".to_owned(),
        })
    );
    assert_eq!(
        collection(&ds, "users").relation("by_emails"),
        Some(&RelationSchema::OneToMany {
            foreign_collection: "by_email".to_owned(),
            origin_key: "user_email".to_owned(),
            origin_key_target: "email".to_owned(),
        })
    );
}

async fn defaults_and_required_flags(backend: Backend) {
    let ts = timestamp(backend);
    let now = match backend {
        Backend::Postgres => "now()",
        Backend::Sqlite | Backend::MySql => "CURRENT_TIMESTAMP",
    };
    let ddl = format!(
        "CREATE TABLE things (
            id INT PRIMARY KEY,
            qty INT NOT NULL DEFAULT 5,
            neg INT DEFAULT -3,
            label VARCHAR(20) DEFAULT 'it''s',
            empty_label VARCHAR(20) NOT NULL DEFAULT '',
            price DECIMAL(10,2) DEFAULT 1.50,
            day DATE DEFAULT '2024-02-29',
            stamped {ts} DEFAULT {now},
            plain INT,
            required_text VARCHAR(10) NOT NULL
        );
        CREATE TABLE audited (
            id INT PRIMARY KEY,
            created_at {ts} NOT NULL,
            updated_at {ts} NOT NULL,
            deleted_at {ts}
        );
        CREATE TABLE half_audited (id INT PRIMARY KEY, created_at {ts} NOT NULL);"
    );
    let (_db, ds) = served(backend, &ddl).await;
    let c = |name: &str| column(&ds, "things", name);
    assert_eq!(c("qty").default_value, Some(Value::Int(5)));
    assert!(c("qty").is_required());
    assert_eq!(c("neg").default_value, Some(Value::Int(-3)));
    assert!(!c("neg").is_required());
    assert_eq!(
        c("label").default_value,
        Some(Value::String("it's".to_owned()))
    );
    assert_eq!(
        c("empty_label").default_value,
        Some(Value::String(String::new()))
    );
    assert!(c("empty_label").is_required());
    assert_eq!(c("price").default_value, Some(Value::Float(1.5)));
    assert_eq!(c("day").column_type, primitive(PrimitiveType::Dateonly));
    assert_eq!(
        c("day").default_value,
        Some(Value::Dateonly(
            chrono::NaiveDate::from_ymd_opt(2024, 2, 29).unwrap()
        ))
    );
    // SQL-expression defaults are never shown.
    assert_eq!(c("stamped").default_value, None);
    assert_eq!(c("plain").default_value, None);
    assert!(c("plain").allow_null && !c("plain").is_required());
    assert!(c("required_text").is_required() && !c("required_text").allow_null);
    // A key without auto-increment is writable and required.
    assert!(c("id").is_required() && !c("id").is_read_only);

    // Sequelize manages created/updated timestamps: never required, no default.
    for name in ["created_at", "updated_at", "deleted_at"] {
        let col = column(&ds, "audited", name);
        assert!(!col.is_required() && !col.is_read_only, "{name}");
    }
    // `created_at` alone is a plain column.
    assert!(column(&ds, "half_audited", "created_at").is_required());
}

async fn tables_without_primary_key(backend: Backend) {
    let ddl = "
        CREATE TABLE logs (msg VARCHAR(100), level INT);
        CREATE TABLE codes (code VARCHAR(10) NOT NULL UNIQUE, label VARCHAR(10));
        CREATE TABLE legacy (ID INT, name VARCHAR(10));";
    let (_db, ds) = served(backend, ddl).await;
    let logs = collection(&ds, "logs");
    assert!(logs.is_read_only);
    assert!(logs.primary_keys().is_empty());
    // The guesses: a unique index, then a column named `id` (any case).
    let codes = collection(&ds, "codes");
    assert_eq!(codes.primary_keys(), ["code"]);
    assert!(!codes.is_read_only);
    let legacy = collection(&ds, "legacy");
    let id = if backend == Backend::Postgres {
        "id"
    } else {
        "ID"
    };
    assert_eq!(legacy.primary_keys(), [id]);
    assert!(!legacy.is_read_only);
}

async fn views_are_read_only(backend: Backend) {
    let ddl = format!(
        "CREATE TABLE staff (id {serial}, name VARCHAR(20) NOT NULL, boss_id INT REFERENCES staff(id));
        CREATE VIEW people_v AS SELECT id, name FROM staff;
        CREATE VIEW names_v AS SELECT name FROM staff;",
        serial = serial(backend)
    );
    let (_db, ds) = served(backend, &ddl).await;
    let view = collection(&ds, "people_v");
    assert!(view.is_read_only);
    assert!(
        view.columns()
            .all(|(_, c)| c.is_read_only && !c.is_required())
    );
    assert_eq!(view.primary_keys(), ["id"]);
    assert_eq!(view.relations().count(), 0);
    // Without an `id`, a view's first column is its key.
    assert_eq!(collection(&ds, "names_v").primary_keys(), ["name"]);
    // `staff` is uncountable: its OneToMany would be named like the table, hence the long form.
    assert_eq!(
        relations(&ds, "staff"),
        strings(&["boss:ManyToOne", "staff_through_staff_boss_id:OneToMany"])
    );
}

async fn composite_foreign_keys_are_ignored(backend: Backend) {
    let ddl = "
        CREATE TABLE parents (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b));
        CREATE TABLE children (id INT PRIMARY KEY, pa INT, pb INT, FOREIGN KEY (pa, pb) REFERENCES parents(a, b));";
    let (_db, ds) = served(backend, ddl).await;
    assert_eq!(relations(&ds, "children"), Vec::<String>::new());
    assert_eq!(relations(&ds, "parents"), Vec::<String>::new());
    assert!(collection(&ds, "children").column("pa").is_some());
    assert_eq!(collection(&ds, "parents").primary_keys(), ["a", "b"]);
}

async fn include_exclude_and_rename(backend: Backend) {
    let ddl = "
        CREATE TABLE customers (id INT PRIMARY KEY);
        CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT REFERENCES customers(id));
        CREATE TABLE products (id INT PRIMARY KEY);
        CREATE TABLE order_items (
            order_id INT NOT NULL REFERENCES orders(id),
            product_id INT NOT NULL REFERENCES products(id),
            PRIMARY KEY (order_id, product_id)
        );";
    let db = TestDb::new(backend).await;
    db.execute(ddl).await;

    let all = db.datasource(Options::default()).await;
    assert_eq!(
        relations(&all, "orders"),
        strings(&["customer:ManyToOne", "products:ManyToMany"])
    );

    // Relations to collections that are not served disappear, on both sides.
    let include = db
        .datasource(Options {
            include: Some(vec!["orders".to_owned(), "products".to_owned()]),
            ..Options::default()
        })
        .await;
    let names: Vec<&String> = include.collection_names().collect();
    assert_eq!(names, ["orders", "products"]);
    assert_eq!(relations(&include, "orders"), Vec::<String>::new());
    assert_eq!(relations(&include, "products"), Vec::<String>::new());

    let exclude = db
        .datasource(Options {
            exclude: vec!["customers".to_owned()],
            ..Options::default()
        })
        .await;
    let names: Vec<&String> = exclude.collection_names().collect();
    assert_eq!(names, ["order_items", "orders", "products"]);
    assert_eq!(
        relations(&exclude, "orders"),
        strings(&["products:ManyToMany"])
    );

    // Renamed collections are served under their new name and relations follow, while the
    // relation names (derived from table names) stay.
    let rename = [("customers", "clients"), ("order_items", "lines")]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
    let renamed = db
        .datasource(Options {
            rename,
            ..Options::default()
        })
        .await;
    let names: Vec<&String> = renamed.collection_names().collect();
    assert_eq!(names, ["clients", "lines", "orders", "products"]);
    assert_eq!(
        collection(&renamed, "orders").relation("customer"),
        Some(&RelationSchema::ManyToOne {
            foreign_collection: "clients".to_owned(),
            foreign_key: "customer_id".to_owned(),
            foreign_key_target: "id".to_owned(),
        })
    );
    assert_eq!(
        collection(&renamed, "clients")
            .relation("orders")
            .map(RelationSchema::foreign_collection),
        Some("orders")
    );
    match collection(&renamed, "products").relation("orders") {
        Some(RelationSchema::ManyToMany {
            through_collection,
            foreign_collection,
            ..
        }) => {
            assert_eq!(through_collection, "lines");
            assert_eq!(foreign_collection, "orders");
        }
        other => panic!("products.orders: {other:?}"),
    }
    assert_eq!(collection(&renamed, "clients").name, "clients");

    // Unknown names and clashing renames are configuration errors.
    let pool = db.pool().await;
    let unknown = SqlDataSource::from_pool(
        pool,
        Options {
            exclude: vec!["nope".to_owned()],
            ..Options::default()
        },
    )
    .await;
    assert!(unknown.is_err());
    let clash = [("customers".to_owned(), "orders".to_owned())]
        .into_iter()
        .collect();
    let pool = db.pool().await;
    assert!(
        SqlDataSource::from_pool(
            pool,
            Options {
                rename: clash,
                ..Options::default()
            }
        )
        .await
        .is_err()
    );
}

on_all_backends!(
    composite_keys_and_junctions,
    relation_naming_examples,
    defaults_and_required_flags,
    tables_without_primary_key,
    views_are_read_only,
    composite_foreign_keys_are_ignored,
    include_exclude_and_rename,
);
