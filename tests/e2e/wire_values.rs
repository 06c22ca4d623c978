//! Values on the wire, per database, as the Node agent emits and accepts them (protocol §14.4,
//! §8.12): bigint as a string on PostgreSQL and MariaDB (a number on SQLite), numeric/decimal as
//! a string keeping its scale on PostgreSQL and as a number on MariaDB and SQLite, binary columns
//! as sniffed data URIs and binary keys as hex, in lists, get, create, update, relationships,
//! included records and CSV; and the same forms read back from write bodies and filters.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use canopy::datasource::sql::Options;
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{encode, ids, serve, with_body};
use crate::http::{get, send};

/// The first bytes of a PNG file: served as `data:image/png;base64,…`.
const PNG: &str = "89504e470d0a1a0a";
const PNG_URI: &str = "data:image/png;base64,iVBORw0KGgo=";
/// 2^53 + 1: a JavaScript number cannot hold it.
const BIG: &str = "9007199254740993";

/// accounts ← payments (account), blobs (binary key) ← blob_tags (blob).
pub(crate) async fn bank(backend: Backend) -> (TestDb, Router) {
    let db = TestDb::new(backend).await;
    let (bigpk, money, bytes, key) = match backend {
        Backend::Postgres => ("BIGSERIAL PRIMARY KEY", "NUMERIC(10,2)", "BYTEA", "BYTEA"),
        Backend::MySql => (
            "BIGINT AUTO_INCREMENT PRIMARY KEY",
            "DECIMAL(10,2)",
            "BLOB",
            "VARBINARY(16)",
        ),
        Backend::Sqlite => (
            "INTEGER PRIMARY KEY AUTOINCREMENT",
            "DECIMAL(10,2)",
            "BLOB",
            "BLOB",
        ),
    };
    let ddl = format!(
        "CREATE TABLE accounts (id {bigpk}, balance {money}, big BIGINT, avatar {bytes});
         CREATE TABLE payments (id {bigpk}, account_id BIGINT, amount {money},
            FOREIGN KEY (account_id) REFERENCES accounts(id));
         CREATE TABLE blobs (id {key} NOT NULL PRIMARY KEY, body {bytes});
         CREATE TABLE blob_tags (id {bigpk}, blob_id {key}, label VARCHAR(20),
            FOREIGN KEY (blob_id) REFERENCES blobs(id));"
    );
    db.execute(&ddl).await;
    let (png, cafe) = match backend {
        Backend::Postgres => (format!("'\\x{PNG}'"), "'\\xcafe'".to_owned()),
        Backend::MySql | Backend::Sqlite => (format!("X'{PNG}'"), "X'cafe'".to_owned()),
    };
    db.execute(&format!(
        "INSERT INTO accounts (balance, big, avatar) VALUES (12.30, {BIG}, {png});
         INSERT INTO payments (account_id, amount) VALUES (1, 0.50);
         INSERT INTO blobs (id, body) VALUES ({cafe}, {png});
         INSERT INTO blob_tags (blob_id, label) VALUES ({cafe}, 'x');"
    ))
    .await;
    let app = app_over(&db).await;
    (db, app)
}

/// The router over the database's tables as they are now.
async fn app_over(db: &TestDb) -> Router {
    let datasource = db.datasource(Options::default()).await;
    serve(Arc::new(datasource))
}

/// The wire forms of one backend.
struct Forms {
    /// A bigint (ids, foreign keys, `big`).
    bigint: fn(&str) -> Json,
    /// A numeric(10,2) value, given as written with its scale.
    decimal: fn(&str) -> Json,
}

fn forms(backend: Backend) -> Forms {
    fn string(s: &str) -> Json {
        Json::String(s.to_owned())
    }
    fn number(s: &str) -> Json {
        serde_json::from_str(s).unwrap()
    }
    /// A JavaScript number: integral values have no fraction (`5.00` → `5`).
    fn float(s: &str) -> Json {
        let f = s.parse::<f64>().unwrap();
        if f.fract() == 0.0 {
            json!(f as i64)
        } else {
            json!(f)
        }
    }
    match backend {
        Backend::Postgres => Forms {
            bigint: string,
            decimal: string,
        },
        // The suite's server is MariaDB: its driver returns decimals as numbers.
        Backend::MySql => Forms {
            bigint: string,
            decimal: float,
        },
        Backend::Sqlite => Forms {
            bigint: number,
            decimal: float,
        },
    }
}

async fn ok(app: &Router, request: Request<Body>) -> Json {
    let (status, _, body) = send(app, request).await;
    assert!(status.is_success(), "{status}: {body}");
    body
}

async fn list_and_get_follow_the_driver_forms(backend: Backend) {
    let (_db, app) = bank(backend).await;
    let f = forms(backend);
    let account = json!({
        "type": "accounts",
        "id": "1",
        "attributes": {
            "id": (f.bigint)("1"),
            "balance": (f.decimal)("12.30"),
            "big": (f.bigint)(BIG),
            "avatar": PNG_URI,
        },
        "relationships": { "payments": { "links": { "related": {
            "href": "/forest/accounts/1/relationships/payments"
        } } } }
    });
    let list = ok(&app, get("/forest/accounts?timezone=UTC")).await;
    assert_eq!(
        list,
        json!({ "data": [account.clone()], "jsonapi": { "version": "1.0" } })
    );
    let one = ok(&app, get("/forest/accounts/1?timezone=UTC")).await;
    assert_eq!(
        one,
        json!({ "data": account, "jsonapi": { "version": "1.0" } })
    );

    // A filter takes the bigint as a string or as a number.
    for value in [json!(BIG), json!(9_007_199_254_740_993_i64)] {
        let filter = json!({ "field": "big", "operator": "Equal", "value": value }).to_string();
        let uri = format!(
            "/forest/accounts?timezone=UTC&fields[accounts]=id&filters={}",
            encode(&filter)
        );
        let body = ok(&app, get(&uri)).await;
        assert_eq!(body["data"].as_array().unwrap().len(), 1, "{value}");
    }
}

/// Foreign key columns are attributes (the agent's serializer only leaves out relation names),
/// in their wire form; the relationship and the included record carry the same ids.
async fn foreign_keys_are_attributes(backend: Backend) {
    let (_db, app) = bank(backend).await;
    let f = forms(backend);
    let body = ok(&app, get("/forest/payments?timezone=UTC")).await;
    assert_eq!(
        body["data"][0],
        json!({
            "type": "payments",
            "id": "1",
            "attributes": {
                "id": (f.bigint)("1"),
                "account_id": (f.bigint)("1"),
                "amount": (f.decimal)("0.50"),
            },
            "relationships": { "account": { "data": { "type": "accounts", "id": "1" } } }
        })
    );
    assert_eq!(body["included"][0]["attributes"]["big"], (f.bigint)(BIG));
    assert_eq!(body["included"][0]["attributes"]["avatar"], json!(PNG_URI));

    // Binary keys: hex in the id, the key column, the foreign key and the linkage.
    let body = ok(&app, get("/forest/blob_tags?timezone=UTC")).await;
    let tag = &body["data"][0];
    assert_eq!(tag["attributes"]["blob_id"], json!("cafe"), "{body}");
    assert_eq!(
        tag["relationships"]["blob"],
        json!({ "data": { "type": "blobs", "id": "cafe" } })
    );
    assert_eq!(
        body["included"][0]["attributes"],
        json!({ "id": "cafe", "body": PNG_URI })
    );
}

async fn writes_round_trip_exactly(backend: Backend) {
    let (_db, app) = bank(backend).await;
    let f = forms(backend);
    let gif = "data:image/gif;base64,R0lGODlhAQ==";
    // Bigints beyond 2^53 as strings and as JSON numbers; a decimal as a number.
    for (i, big) in [json!(BIG), json!(9_007_199_254_740_993_i64)]
        .into_iter()
        .enumerate()
    {
        let body = json!({ "data": { "type": "accounts", "attributes": {
            "balance": 5, "big": big, "avatar": gif
        } } });
        let created = ok(
            &app,
            with_body("POST", "/forest/accounts?timezone=UTC", &body),
        )
        .await;
        let id = (i + 2).to_string();
        let expected = json!({
            "id": (f.bigint)(&id),
            "balance": (f.decimal)("5.00"),
            "big": (f.bigint)(BIG),
            "avatar": gif,
        });
        assert_eq!(created["data"]["id"], json!(id));
        assert_eq!(created["data"]["attributes"], expected, "{created}");
        let read = ok(&app, get(&format!("/forest/accounts/{id}?timezone=UTC"))).await;
        assert_eq!(read["data"]["attributes"], expected);
    }

    // Update answers the re-read record in the same forms.
    let patch = json!({ "data": { "type": "accounts", "attributes": { "big": "-42" } } });
    let updated = ok(
        &app,
        with_body("PUT", "/forest/accounts/1?timezone=UTC", &patch),
    )
    .await;
    assert_eq!(updated["data"]["attributes"]["big"], (f.bigint)("-42"));

    // Decimal strings are not integers: refused as the agent's type check does.
    let body = json!({ "data": { "type": "accounts", "attributes": { "big": "7.125" } } });
    let (status, _, error) = send(
        &app,
        with_body("POST", "/forest/accounts?timezone=UTC", &body),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    // An ordinary binary column takes a data URI, not hex.
    let body = json!({ "data": { "type": "accounts", "attributes": { "avatar": PNG } } });
    let (status, _, error) = send(
        &app,
        with_body("POST", "/forest/accounts?timezone=UTC", &body),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
}

async fn binary_keys_are_hex_in_writes_and_filters(backend: Backend) {
    let (_db, app) = bank(backend).await;
    // A binary key is given in hex, in the attributes and in relationship ids.
    let body = json!({ "data": { "type": "blobs", "attributes": {
        "id": "beef", "body": "data:text/plain;base64,aGk="
    } } });
    let created = ok(&app, with_body("POST", "/forest/blobs?timezone=UTC", &body)).await;
    assert_eq!(
        created["data"],
        json!({
            "type": "blobs", "id": "beef",
            "attributes": { "id": "beef", "body": "data:application/octet-stream;base64,aGk=" },
            "relationships": { "blob_tags": { "links": { "related": {
                "href": "/forest/blobs/beef/relationships/blob_tags"
            } } } }
        })
    );
    let body = json!({ "data": { "type": "blob_tags", "attributes": { "label": "y" },
        "relationships": { "blob": { "data": { "type": "blobs", "id": "beef" } } } } });
    let created = ok(
        &app,
        with_body("POST", "/forest/blob_tags?timezone=UTC", &body),
    )
    .await;
    assert_eq!(
        created["data"]["relationships"]["blob"]["data"]["id"],
        json!("beef")
    );
    let read = ok(&app, get("/forest/blobs/beef?timezone=UTC")).await;
    assert_eq!(read["data"]["attributes"]["id"], json!("beef"));
    // A data URI is not a key.
    let body = json!({ "data": { "type": "blobs", "attributes": { "id": PNG_URI } } });
    let (status, _, error) =
        send(&app, with_body("POST", "/forest/blobs?timezone=UTC", &body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");

    // Filters take the wire forms: hex for the key, a data URI for the body.
    for (field, value) in [("id", "cafe"), ("body", PNG_URI), ("blob:id", "cafe")] {
        let collection = if field.starts_with("blob:") {
            "blob_tags"
        } else {
            "blobs"
        };
        let filter = json!({ "field": field, "operator": "Equal", "value": value }).to_string();
        let uri = format!(
            "/forest/{collection}?timezone=UTC&filters={}",
            encode(&filter)
        );
        let body = ok(&app, get(&uri)).await;
        let expected = if collection == "blobs" { "cafe" } else { "1" };
        assert_eq!(ids(&body), [expected], "{field}");
    }
}

async fn csv_cells_use_the_wire_forms(backend: Backend) {
    let (_db, app) = bank(backend).await;
    let uri = "/forest/accounts.csv?timezone=UTC&fields[accounts]=id,balance,big,avatar\
               &header=id,balance,big,avatar";
    let (status, _, body) = send(&app, get(uri)).await;
    assert_eq!(status, StatusCode::OK);
    let balance = match backend {
        Backend::Postgres => "12.30",
        Backend::MySql | Backend::Sqlite => "12.3",
    };
    assert_eq!(
        body,
        json!(format!(
            "id,balance,big,avatar\n1,{balance},{BIG},\"{PNG_URI}\"\n"
        ))
    );
    let uri = "/forest/blob_tags.csv?timezone=UTC&fields[blob_tags]=id,blob_id,blob&fields[blob]=id,body\
               &header=id,a,b,c";
    let (status, _, body) = send(&app, get(uri)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!(format!("id,a,b,c\n1,cafe,cafe,\"{PNG_URI}\"\n"))
    );
}

/// Binary columns are served as strings, as the Node agent's binary decorator serves them: the
/// schema file says `String` with the rules of the served form (a data URI, or hex for keys),
/// and so do capabilities, whose operators stay those of the bytes.
async fn binary_columns_are_strings_in_the_schema_and_capabilities(backend: Backend) {
    use canopy::agent::schema_file::{Meta, NoActions, SchemaFile};
    use canopy::datasource::DataSource as _;
    let (db, app) = bank(backend).await;
    let datasource = db.datasource(Options::default()).await;
    let file = SchemaFile::build(datasource.schema(), &NoActions, Meta::default()).unwrap();
    let collection = |name: &str| {
        file.collections
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let field = |c: &str, f: &str| {
        collection(c)["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["field"] == f)
            .unwrap_or_else(|| panic!("{c}.{f}"))
            .clone()
    };
    let like = |pattern: &str| json!({"type": "is like", "value": pattern, "message": format!("Value must match {pattern}")});
    let present = json!({"type": "is present", "message": "Field is required"});
    let avatar = field("accounts", "avatar");
    assert_eq!(avatar["type"], "String");
    assert_eq!(avatar["validations"], json!([like("/^data:.*;base64,.*/")]));
    // The binary key: hex, required (NOT NULL, not generated).
    let id = field("blobs", "id");
    assert_eq!(
        (&id["type"], &id["isRequired"], &id["validations"]),
        (
            &json!("String"),
            &json!(true),
            &json!([like("/^[0-9a-f]+$/"), present])
        )
    );
    // The relation through the binary foreign key takes its served type and rules.
    let blob = field("blob_tags", "blob");
    assert_eq!(blob["type"], "String");
    assert_eq!(blob["validations"], json!([like("/^[0-9a-f]+$/")]));

    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/_internal/capabilities",
            &json!({"collectionNames": ["accounts", "blob_tags"]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let fields = |name: &str| {
        body["collections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["fields"]
            .as_array()
            .unwrap()
            .clone()
    };
    let capability = |c: &str, f: &str| {
        fields(c)
            .into_iter()
            .find(|x| x["name"] == f)
            .unwrap_or_else(|| panic!("{c}.{f}"))
    };
    let bytes_operators = json!([
        "blank",
        "equal",
        "in",
        "missing",
        "not_equal",
        "not_in",
        "present"
    ]);
    for (c, f) in [("accounts", "avatar"), ("blob_tags", "blob_id")] {
        let column = capability(c, f);
        assert_eq!(column["type"], "String", "{c}.{f}");
        let mut operators: Vec<String> = column["operators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap().to_owned())
            .collect();
        operators.sort();
        assert_eq!(json!(operators), bytes_operators, "{c}.{f}");
    }
    assert_eq!(capability("accounts", "balance")["type"], "Number");
}

/// prices (decimal key: 12.30 'a', 5.00 'b') ← quotes (price): quotes 1 → 12.30, 2 → 5.00.
pub(crate) async fn decimal_keys(db: &TestDb, backend: Backend) {
    let money = match backend {
        Backend::Postgres => "NUMERIC(10,2)",
        Backend::MySql | Backend::Sqlite => "DECIMAL(10,2)",
    };
    db.execute(&format!(
        "CREATE TABLE prices (code {money} NOT NULL PRIMARY KEY, label VARCHAR(10));
         CREATE TABLE quotes (id INTEGER NOT NULL PRIMARY KEY, price_code {money},
            FOREIGN KEY (price_code) REFERENCES prices(code));
         INSERT INTO prices (code, label) VALUES (12.30, 'a'), (5.00, 'b');
         INSERT INTO quotes (id, price_code) VALUES (1, 12.30), (2, 5.00);"
    ))
    .await;
}

/// A decimal primary key is packed as `String(value)` of what the Node agent's driver returns:
/// the text with its scale on PostgreSQL, a JavaScript number on MariaDB and SQLite. The id is
/// the same in the record, its to-many links, the linkage of records pointing at it and the
/// included record, and it reads the record back.
async fn decimal_keys_are_packed_as_the_driver_prints_them(backend: Backend) {
    let (db, app) = bank(backend).await;
    decimal_keys(&db, backend).await;
    drop(app);
    let app = app_over(&db).await;
    let (dozen, five) = match backend {
        Backend::Postgres => ("12.30", "5.00"),
        Backend::MySql | Backend::Sqlite => ("12.3", "5"),
    };
    let body = ok(&app, get("/forest/prices?timezone=UTC&sort=label")).await;
    let ids: Vec<&Json> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&json!(dozen), &json!(five)], "{body}");
    assert_eq!(
        body["data"][0]["relationships"]["quotes"]["links"]["related"]["href"],
        json!(format!("/forest/prices/{dozen}/relationships/quotes"))
    );
    for id in [dozen, five] {
        let one = ok(&app, get(&format!("/forest/prices/{id}?timezone=UTC"))).await;
        assert_eq!(one["data"]["id"], json!(id), "{one}");
    }
    // The linkage of a record pointing at the key, with and without the related record loaded.
    let body = ok(&app, get("/forest/quotes?timezone=UTC&sort=id")).await;
    assert_eq!(
        body["data"][0]["relationships"]["price"]["data"],
        json!({ "type": "prices", "id": dozen }),
        "{body}"
    );
    assert_eq!(body["included"][0]["id"], json!(dozen), "{body}");
    // Without the relation in the projection, the key is an attribute and no relationship is
    // written, as the agent's serializer does.
    let uri = "/forest/quotes?timezone=UTC&sort=id&fields[quotes]=id,price_code";
    let body = ok(&app, get(uri)).await;
    assert!(body["data"][1].get("relationships").is_none(), "{body}");
    assert!(
        body["data"][1]["attributes"].get("price_code").is_some(),
        "{body}"
    );
}

/// Chart group keys are values of their column and travel in its wire form: binary columns as
/// data URIs, binary keys as hex, in Pie and Leaderboard charts.
async fn binary_chart_keys_take_the_wire_form(backend: Backend) {
    let (_db, app) = bank(backend).await;
    let chart = |collection: &str, body: Json| {
        let app = app.clone();
        let uri = format!("/forest/stats/{collection}?timezone=UTC");
        async move {
            let body = ok(&app, with_body("POST", &uri, &body)).await;
            body["data"]["attributes"]["value"].clone()
        }
    };
    let pie = chart(
        "accounts",
        json!({"type": "Pie", "sourceCollectionName": "accounts", "aggregator": "Count",
            "groupByFieldName": "avatar"}),
    )
    .await;
    assert_eq!(pie, json!([{ "key": PNG_URI, "value": 1 }]));
    let pie = chart(
        "blob_tags",
        json!({"type": "Pie", "sourceCollectionName": "blob_tags", "aggregator": "Count",
            "groupByFieldName": "blob_id"}),
    )
    .await;
    assert_eq!(pie, json!([{ "key": "cafe", "value": 1 }]));
    for (label, key) in [("body", json!(PNG_URI)), ("id", json!("cafe"))] {
        let leaderboard = chart(
            "blobs",
            json!({"type": "Leaderboard", "sourceCollectionName": "blobs", "aggregator": "Count",
                "relationshipFieldName": "blob_tags", "labelFieldName": label, "limit": 5}),
        )
        .await;
        assert_eq!(leaderboard, json!([{ "key": key, "value": 1 }]), "{label}");
    }
}

on_all_backends!(
    list_and_get_follow_the_driver_forms,
    foreign_keys_are_attributes,
    writes_round_trip_exactly,
    binary_keys_are_hex_in_writes_and_filters,
    csv_cells_use_the_wire_forms,
    binary_columns_are_strings_in_the_schema_and_capabilities,
    decimal_keys_are_packed_as_the_driver_prints_them,
    binary_chart_keys_take_the_wire_form,
);

/// The elements of a PostgreSQL `numeric[]` keep their display scale, as the scalars do (the
/// driver gives the scale of the base-10000 digits: `12.3000`), and every numeric is written as
/// PostgreSQL prints it (`0.00`, `0.0000001`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_numeric_arrays_keep_their_scale() {
    let (db, app) = bank(Backend::Postgres).await;
    db.execute(
        "CREATE TABLE baskets (id SERIAL PRIMARY KEY, prices NUMERIC(10,2)[], raw NUMERIC[],
            total NUMERIC(10,2), tiny NUMERIC);
         INSERT INTO baskets (prices, raw, total, tiny) VALUES
            ('{12.30, 5, NULL, 10000}', '{1.50, 0.000, 10000, -2.5}', 0, 0.0000001);",
    )
    .await;
    drop(app);
    let app = app_over(&db).await;
    let body = ok(&app, get("/forest/baskets?timezone=UTC")).await;
    assert_eq!(
        body["data"][0]["attributes"],
        json!({
            "id": 1,
            "prices": ["12.30", "5.00", null, "10000.00"],
            "raw": ["1.50", "0.000", "10000", "-2.5"],
            // Zero keeps its scale and small values their digits, as PostgreSQL prints them.
            "total": "0.00",
            "tiny": "0.0000001",
        }),
        "{body}"
    );
}

/// PostgreSQL `bit(1)` is typed Boolean and served as one (the Node agent passes the driver's
/// `"1"`/`"0"` through: a deliberate difference, docs/compatibility.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_bit_is_a_boolean() {
    let (db, app) = bank(Backend::Postgres).await;
    db.execute("CREATE TABLE switches (id SERIAL PRIMARY KEY, f BIT(1)); INSERT INTO switches (f) VALUES (B'1'), (B'0');")
        .await;
    // The router was built before the table: serve a fresh one.
    drop(app);
    let app = app_over(&db).await;
    let body = ok(&app, get("/forest/switches?timezone=UTC&sort=id")).await;
    let flags: Vec<&Json> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["attributes"]["f"])
        .collect();
    assert_eq!(flags, [&json!(true), &json!(false)]);
}
