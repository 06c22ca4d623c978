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

/// A self-referencing relation can be followed 10 times in one path, not 11: a URL of a few
/// kilobytes must not ask for a thousand joins.
async fn relation_paths_are_capped_at_ten_relations(backend: Backend) {
    let ddl =
        "CREATE TABLE employees (id INT PRIMARY KEY, manager_id INT REFERENCES employees(id));
        INSERT INTO employees (id, manager_id) VALUES (1, NULL);
        INSERT INTO employees (id, manager_id) VALUES (2, 1);";
    let (_db, ds) = served(backend, ddl).await;
    let employees = ds.collection("employees").unwrap();
    let path = |relations: usize| format!("{}id", "manager:".repeat(relations));
    let list = |field: String| {
        let employees = std::sync::Arc::clone(&employees);
        async move {
            employees
                .list(
                    &canopy_e2e::caller(),
                    &canopy::datasource::Filter::default()
                        .with_sort(canopy::datasource::Sort::asc(field.as_str())),
                    &canopy::datasource::Projection::new(["id", field.as_str()]),
                )
                .await
        }
    };
    let ten = list(path(10)).await.expect("10 relations are served");
    assert_eq!(ten.len(), 2);
    let error = list(path(11)).await.expect_err("11 relations are refused");
    // Checked where the projection is read, before any SQL.
    assert_eq!(
        error.to_string(),
        "Invalid projection: The field path goes through 11 relations; at most 10 are allowed"
    );
}

on_all_backends!(
    relation_paths_are_capped_at_ten_relations,
    composite_keys_and_junctions,
    relation_naming_examples,
    defaults_and_required_flags,
    tables_without_primary_key,
    views_are_read_only,
    composite_foreign_keys_are_ignored,
    include_exclude_and_rename,
);

// ----- PostgreSQL -----

use canopy::datasource::sql::model::{DefaultValue, SqlKind, Table};

async fn tables_of(db: &TestDb) -> Vec<Table> {
    canopy::datasource::sql::introspect::introspect(&db.pool().await)
        .await
        .expect("introspect")
}

fn table<'a>(tables: &'a [Table], name: &str) -> &'a Table {
    tables
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("table {name} missing"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_types_and_flags() {
    let db = TestDb::new(Backend::Postgres).await;
    db.execute(
        "CREATE EXTENSION citext;
        CREATE EXTENSION hstore;
        CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
        CREATE TYPE pair AS (a int, b text);
        CREATE DOMAIN short_text AS varchar(10);
        CREATE TABLE types_pg (
            id bigserial PRIMARY KEY,
            c_smallint smallint, c_int integer, c_bigint bigint, c_numeric numeric(10,2),
            c_real real, c_double double precision, c_interval interval,
            c_bool boolean, c_bool_true boolean DEFAULT true, c_bit bit(1), c_bits bit(3), c_varbit bit varying(5),
            c_text text, c_varchar varchar(20), c_char char(2), c_citext citext, c_domain short_text,
            c_mood mood DEFAULT 'ok', c_pair pair,
            c_uuid uuid DEFAULT gen_random_uuid(), c_json json, c_jsonb jsonb DEFAULT '[]'::jsonb,
            c_date date DEFAULT CURRENT_DATE, c_ts timestamp, c_tstz timestamptz, c_time time, c_timetz timetz,
            c_bytea bytea,
            c_ints integer[], c_texts varchar(5)[] DEFAULT '{}', c_moods mood[],
            c_money money, c_inet inet, c_cidr cidr, c_macaddr macaddr, c_point point, c_xml xml,
            c_tsvector tsvector, c_hstore hstore,
            c_big_default bigint DEFAULT 9007199254740993,
            c_identity int GENERATED ALWAYS AS IDENTITY
        );
        CREATE TABLE ident (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n int);
        CREATE TABLE uuid_keyed (id uuid PRIMARY KEY DEFAULT gen_random_uuid());",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    let ty = |name: &str| column(&ds, "types_pg", name).column_type.clone();
    use PrimitiveType as P;
    for (name, expected) in [
        ("id", P::Number),
        ("c_smallint", P::Number),
        ("c_int", P::Number),
        ("c_bigint", P::Number),
        ("c_numeric", P::Number),
        ("c_real", P::Number),
        ("c_double", P::Number),
        ("c_interval", P::Number),
        ("c_bool", P::Boolean),
        ("c_bit", P::Boolean),
        ("c_text", P::String),
        ("c_varchar", P::String),
        ("c_char", P::String),
        ("c_citext", P::String),
        ("c_domain", P::String),
        ("c_mood", P::Enum),
        ("c_pair", P::String),
        ("c_uuid", P::Uuid),
        ("c_json", P::Json),
        ("c_jsonb", P::Json),
        ("c_date", P::Dateonly),
        ("c_ts", P::Date),
        ("c_tstz", P::Date),
        ("c_time", P::Time),
        ("c_bytea", P::Binary),
    ] {
        assert_eq!(ty(name), primitive(expected), "{name}");
    }
    assert_eq!(
        ty("c_ints"),
        ColumnType::Array(Box::new(primitive(P::Number)))
    );
    assert_eq!(
        ty("c_texts"),
        ColumnType::Array(Box::new(primitive(P::String)))
    );
    assert_eq!(
        ty("c_moods"),
        ColumnType::Array(Box::new(primitive(P::Enum)))
    );
    for skipped in [
        "c_bits",
        "c_varbit",
        "c_timetz",
        "c_money",
        "c_inet",
        "c_cidr",
        "c_macaddr",
        "c_point",
        "c_xml",
        "c_tsvector",
        "c_hstore",
    ] {
        assert!(
            collection(&ds, "types_pg").column(skipped).is_none(),
            "{skipped} should be skipped"
        );
    }
    // Enum labels in declaration order, on scalars and arrays.
    assert_eq!(
        column(&ds, "types_pg", "c_mood").enum_values,
        ["sad", "ok", "happy"]
    );
    assert_eq!(
        column(&ds, "types_pg", "c_moods").enum_values,
        ["sad", "ok", "happy"]
    );
    // Defaults: booleans without one default to false; constants are typed; expressions hidden.
    assert_eq!(
        column(&ds, "types_pg", "c_bool").default_value,
        Some(Value::Bool(false))
    );
    assert_eq!(
        column(&ds, "types_pg", "c_bool_true").default_value,
        Some(Value::Bool(true))
    );
    assert_eq!(
        column(&ds, "types_pg", "c_mood").default_value,
        Some(Value::String("ok".to_owned()))
    );
    assert_eq!(
        column(&ds, "types_pg", "c_jsonb").default_value,
        Some(Value::Json(serde_json::json!([])))
    );
    assert_eq!(column(&ds, "types_pg", "c_uuid").default_value, None);
    assert_eq!(column(&ds, "types_pg", "c_date").default_value, None);
    assert_eq!(column(&ds, "types_pg", "c_texts").default_value, None);
    // parseFloat semantics: a bigint default beyond 2^53 is rounded, as the reference shows it.
    assert_eq!(
        column(&ds, "types_pg", "c_big_default").default_value,
        Some(Value::Int(9_007_199_254_740_992))
    );
    // Keys: serial and identity primary keys are read-only; a non-key identity column is a
    // plain (required) column; a uuid key with a default is required.
    let id = column(&ds, "types_pg", "id");
    assert!(id.is_read_only && id.is_primary_key);
    assert!(column(&ds, "ident", "id").is_read_only);
    let identity = column(&ds, "types_pg", "c_identity");
    assert!(!identity.is_read_only && identity.is_required());
    let uuid_key = column(&ds, "uuid_keyed", "id");
    assert!(!uuid_key.is_read_only && uuid_key.is_required());

    // The model keeps what the query builder and decoder need.
    let tables = tables_of(&db).await;
    let t = table(&tables, "types_pg");
    assert_eq!(t.schema.as_deref(), Some("public"));
    let col = |name: &str| t.column(name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(col("c_interval").kind, SqlKind::Interval);
    assert_eq!(col("c_bit").kind, SqlKind::Bit);
    assert_eq!(col("c_ts").kind, SqlKind::NaiveTimestamp);
    assert_eq!(col("c_tstz").kind, SqlKind::Timestamp);
    assert_eq!(col("c_json").kind, SqlKind::Json);
    assert_eq!(col("c_jsonb").kind, SqlKind::Jsonb);
    assert_eq!(col("c_numeric").kind, SqlKind::Decimal);
    assert_eq!(col("c_mood").kind, SqlKind::Enum);
    assert_eq!(
        col("c_mood").pg_cast.as_deref(),
        Some("\"public\".\"mood\"")
    );
    assert_eq!(col("c_moods").kind, SqlKind::Array(Box::new(SqlKind::Enum)));
    assert_eq!(
        col("c_moods").pg_cast.as_deref(),
        Some("\"public\".\"mood\"[]")
    );
    assert_eq!(col("c_ints").kind, SqlKind::Array(Box::new(SqlKind::Int)));
    assert_eq!(col("c_ints").pg_cast.as_deref(), Some("integer[]"));
    assert_eq!(
        col("c_texts").pg_cast.as_deref(),
        Some("character varying(5)[]")
    );
    assert_eq!(col("c_varchar").raw_type, "character varying(20)");
    assert_eq!(
        col("c_bool").default,
        Some(DefaultValue::Constant(Value::Bool(false)))
    );
    assert!(
        matches!(&col("c_uuid").default, Some(DefaultValue::Expression(e)) if e == "gen_random_uuid()")
    );
    assert!(
        matches!(&col("id").default, Some(DefaultValue::Expression(e)) if e.starts_with("nextval("))
    );
    assert!(col("id").auto_increment && !col("c_identity").auto_increment);
    assert_eq!(t.primary_key, ["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_catalog_sets() {
    let db = TestDb::new(Backend::Postgres).await;
    db.execute(
        "CREATE TABLE measures (id int, at date, v int, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
        CREATE TABLE measures_2024 PARTITION OF measures FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
        CREATE TABLE sensors (id int PRIMARY KEY);
        CREATE TABLE readings (id int PRIMARY KEY, sensor_id int REFERENCES sensors(id));
        CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY);
        CREATE TABLE spatial_ref_sys (srid int PRIMARY KEY);
        CREATE VIEW sensor_ids AS SELECT id FROM sensors;
        CREATE MATERIALIZED VIEW mv_sensors AS SELECT id FROM sensors;
        CREATE SCHEMA other;
        CREATE TABLE other.devices (id int PRIMARY KEY);
        CREATE TABLE linked (id int PRIMARY KEY, device_id int REFERENCES other.devices(id));",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    let names: Vec<&String> = ds.collection_names().collect();
    assert_eq!(
        names,
        [
            "linked",
            "measures",
            "measures_2024",
            "readings",
            "scratch",
            "sensor_ids",
            "sensors"
        ]
    );
    assert!(collection(&ds, "sensor_ids").is_read_only);
    assert_eq!(
        collection(&ds, "measures_2024").primary_keys(),
        ["id", "at"]
    );
    // A foreign key to another schema is ignored; the column stays.
    assert_eq!(relations(&ds, "linked"), Vec::<String>::new());
    assert!(collection(&ds, "linked").column("device_id").is_some());
    assert_eq!(relations(&ds, "sensors"), strings(&["readings:OneToMany"]));

    // A schema other than `public` is served when it is the connection's current schema.
    let other = TestDb::new(Backend::Postgres).await;
    other
        .execute(
            "CREATE SCHEMA shop;
            CREATE TABLE shop.items (id int PRIMARY KEY, parent_id int REFERENCES shop.items(id));
            CREATE TABLE public.ignored (id int PRIMARY KEY);
            DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path TO shop', current_database()); END $$;",
        )
        .await;
    let tables = tables_of(&other).await;
    assert_eq!(
        tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["items"]
    );
    assert_eq!(tables[0].schema.as_deref(), Some("shop"));
    assert_eq!(tables[0].foreign_keys.len(), 1);
}

// ----- MySQL / MariaDB -----

async fn is_mariadb(db: &TestDb) -> bool {
    use sqlx::Connection;
    let mut conn = sqlx::MySqlConnection::connect(&db.url)
        .await
        .expect("connect");
    let version: String = sqlx::query_scalar("SELECT CAST(VERSION() AS CHAR)")
        .fetch_one(&mut conn)
        .await
        .expect("version");
    version.to_ascii_lowercase().contains("mariadb")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_types_and_flags() {
    let db = TestDb::new(Backend::MySql).await;
    db.execute(
        "CREATE TABLE types_my (
            id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
            c_tinyint1 TINYINT(1), c_bool BOOLEAN DEFAULT TRUE, c_bit1 BIT(1), c_tinyint TINYINT,
            c_smallint SMALLINT, c_mediumint MEDIUMINT, c_int INT UNSIGNED, c_bigint BIGINT,
            c_decimal DECIMAL(10,2) DEFAULT 12.30, c_float FLOAT, c_double DOUBLE,
            c_char CHAR(36), c_varchar VARCHAR(20) DEFAULT 'it''s', c_text TEXT, c_longtext LONGTEXT,
            c_enum ENUM('small', 'Medium', 'it''s') NOT NULL DEFAULT 'Medium',
            c_json JSON, c_date DATE, c_datetime DATETIME(3), c_timestamp TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP,
            c_time TIME, c_blob BLOB, c_binary BINARY(16), c_varbinary VARBINARY(10),
            c_double_unsigned DOUBLE UNSIGNED, c_set SET('a', 'b'), c_year YEAR, c_time3 TIME(3),
            c_bit8 BIT(8), c_point POINT
        );
        CREATE VIEW types_v AS SELECT id, c_varchar FROM types_my;",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    let ty = |name: &str| column(&ds, "types_my", name).column_type.clone();
    use PrimitiveType as P;
    for (name, expected) in [
        ("id", P::Number),
        ("c_tinyint1", P::Boolean),
        ("c_bool", P::Boolean),
        ("c_bit1", P::Boolean),
        ("c_tinyint", P::Number),
        ("c_smallint", P::Number),
        ("c_mediumint", P::Number),
        ("c_int", P::Number),
        ("c_bigint", P::Number),
        ("c_decimal", P::Number),
        ("c_float", P::Number),
        ("c_double", P::Number),
        ("c_char", P::String),
        ("c_varchar", P::String),
        ("c_text", P::String),
        ("c_longtext", P::String),
        ("c_enum", P::Enum),
        // MariaDB's json is longtext with `CHECK (json_valid(…))`: Json on both servers (the
        // reference serves a String on MariaDB; see docs/compatibility.md).
        ("c_json", P::Json),
        ("c_date", P::Dateonly),
        ("c_datetime", P::Date),
        ("c_timestamp", P::Date),
        ("c_time", P::Time),
        ("c_blob", P::Binary),
        ("c_binary", P::Binary),
        ("c_varbinary", P::Binary),
    ] {
        assert_eq!(ty(name), primitive(expected), "{name}");
    }
    for skipped in [
        "c_double_unsigned",
        "c_set",
        "c_year",
        "c_time3",
        "c_bit8",
        "c_point",
    ] {
        assert!(
            collection(&ds, "types_my").column(skipped).is_none(),
            "{skipped} should be skipped"
        );
    }
    let c = |name: &str| column(&ds, "types_my", name);
    assert_eq!(c("c_enum").enum_values, ["small", "Medium", "it's"]);
    assert_eq!(
        c("c_enum").default_value,
        Some(Value::String("Medium".to_owned()))
    );
    assert!(c("c_enum").is_required());
    assert_eq!(c("c_bool").default_value, Some(Value::Bool(true)));
    assert_eq!(c("c_decimal").default_value, Some(Value::Float(12.3)));
    assert_eq!(
        c("c_varchar").default_value,
        Some(Value::String("it's".to_owned()))
    );
    assert_eq!(c("c_timestamp").default_value, None);
    assert!(c("id").is_read_only && c("id").is_primary_key);
    // Only PostgreSQL booleans get an implicit `false` default.
    assert_eq!(c("c_tinyint1").default_value, None);

    let view = collection(&ds, "types_v");
    assert!(view.is_read_only && view.columns().all(|(_, c)| c.is_read_only));
    assert_eq!(view.primary_keys(), ["id"]);

    let tables = tables_of(&db).await;
    let t = table(&tables, "types_my");
    assert_eq!(t.schema, None);
    let col = |name: &str| t.column(name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(col("c_datetime").kind, SqlKind::Timestamp);
    assert_eq!(col("c_decimal").kind, SqlKind::Decimal);
    assert_eq!(col("c_enum").kind, SqlKind::Enum);
    assert_eq!(col("c_enum").raw_type, "enum('small','Medium','it''s')");
    assert_eq!(col("c_tinyint1").raw_type, "TINYINT(1)");
    assert!(matches!(
        &col("c_timestamp").default,
        Some(DefaultValue::Expression(_))
    ));
    assert!(col("id").auto_increment);
}

// ----- SQLite -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_types_and_flags() {
    let db = TestDb::new(Backend::Sqlite).await;
    db.execute(
        "CREATE TABLE types_lite (
            id INTEGER PRIMARY KEY,
            c_int INT, c_bigint BIGINT, c_real REAL, c_double DOUBLE, c_numeric NUMERIC, c_decimal DECIMAL(10,2),
            c_float FLOAT, c_bool BOOLEAN, c_tinyint1 TINYINT(1), c_date DATE, c_datetime DATETIME,
            c_timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, c_time TIME, c_blob BLOB, c_json JSON, c_uuid UUID,
            c_text TEXT DEFAULT 'x', c_varchar VARCHAR(20),
            c_checked TEXT CHECK (c_checked IN ('a', 'b')),
            c_untyped, c_clob CLOB
        );
        CREATE TABLE auto (id INTEGER PRIMARY KEY AUTOINCREMENT, n INT);",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    let ty = |name: &str| column(&ds, "types_lite", name).column_type.clone();
    use PrimitiveType as P;
    for (name, expected) in [
        ("id", P::Number),
        ("c_int", P::Number),
        ("c_bigint", P::Number),
        ("c_real", P::Number),
        ("c_double", P::Number),
        ("c_numeric", P::Number),
        ("c_decimal", P::Number),
        ("c_float", P::Number),
        ("c_bool", P::Boolean),
        ("c_tinyint1", P::Boolean),
        ("c_date", P::Dateonly),
        ("c_datetime", P::Date),
        ("c_timestamp", P::Date),
        ("c_time", P::Time),
        ("c_blob", P::Binary),
        ("c_json", P::Json),
        ("c_uuid", P::Uuid),
        ("c_text", P::String),
        ("c_varchar", P::String),
        // A CHECK list declares an enum (the reference keeps a String; see
        // docs/compatibility.md).
        ("c_checked", P::Enum),
    ] {
        assert_eq!(ty(name), primitive(expected), "{name}");
    }
    assert_eq!(
        column(&ds, "types_lite", "c_checked").enum_values,
        ["a", "b"]
    );
    assert!(collection(&ds, "types_lite").column("c_untyped").is_none());
    assert!(collection(&ds, "types_lite").column("c_clob").is_none());
    // A bare INTEGER PRIMARY KEY is writable and required; AUTOINCREMENT makes it read-only.
    let id = column(&ds, "types_lite", "id");
    assert!(id.is_primary_key && !id.is_read_only && id.is_required() && !id.allow_null);
    let auto = column(&ds, "auto", "id");
    assert!(auto.is_primary_key && auto.is_read_only && !auto.is_required());
    assert_eq!(
        column(&ds, "types_lite", "c_text").default_value,
        Some(Value::String("x".to_owned()))
    );
    assert_eq!(column(&ds, "types_lite", "c_timestamp").default_value, None);
    assert_eq!(column(&ds, "types_lite", "c_bool").default_value, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_foreign_key_to_the_implicit_primary_key() {
    let db = TestDb::new(Backend::Sqlite).await;
    db.execute(
        "CREATE TABLE authors (code TEXT PRIMARY KEY, name TEXT);
        CREATE TABLE books (id INTEGER PRIMARY KEY, author TEXT REFERENCES authors, title TEXT);
        CREATE VIEW book_titles AS SELECT title, id FROM books;",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    assert_eq!(
        collection(&ds, "books").relation("author_through_author"),
        Some(&RelationSchema::ManyToOne {
            foreign_collection: "authors".to_owned(),
            foreign_key: "author".to_owned(),
            foreign_key_target: "code".to_owned(),
        })
    );
    assert_eq!(relations(&ds, "authors"), strings(&["books:OneToMany"]));
    // A view's key is its `id` column wherever it is.
    assert_eq!(collection(&ds, "book_titles").primary_keys(), ["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_foreign_key_to_another_database_is_ignored() {
    let other = TestDb::new(Backend::MySql).await;
    other
        .execute("CREATE TABLE targets (id INT PRIMARY KEY);")
        .await;
    let other_name = other.url.rsplit('/').next().expect("database name");
    let db = TestDb::new(Backend::MySql).await;
    db.execute(&format!(
        "CREATE TABLE targets (id INT PRIMARY KEY);
        CREATE TABLE links (id INT PRIMARY KEY, target_id INT, FOREIGN KEY (target_id) REFERENCES {other_name}.targets(id));"
    ))
    .await;
    let ds = db.datasource(Options::default()).await;
    assert_eq!(relations(&ds, "links"), Vec::<String>::new());
    assert_eq!(relations(&ds, "targets"), Vec::<String>::new());
    assert!(collection(&ds, "links").column("target_id").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_uuid_type() {
    let db = TestDb::new(Backend::MySql).await;
    if !is_mariadb(&db).await {
        return;
    }
    db.execute(
        "CREATE TABLE tokens (id UUID PRIMARY KEY DEFAULT uuid(), c_char CHAR(36), c_inet INET6);",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    let id = column(&ds, "tokens", "id");
    assert_eq!(id.column_type, primitive(PrimitiveType::Uuid));
    assert!(id.is_required() && id.default_value.is_none());
    assert_eq!(
        column(&ds, "tokens", "c_char").column_type,
        primitive(PrimitiveType::String)
    );
    assert!(collection(&ds, "tokens").column("c_inet").is_none());
}
