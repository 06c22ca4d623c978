//! Values on the wire, per database, as the Node agent emits and accepts them (protocol §14.4,
//! §8.12): bigint as a string on PostgreSQL and MariaDB (a number on SQLite), numeric/decimal as
//! a string keeping its scale on PostgreSQL and as a number on MariaDB and SQLite, binary columns
//! as sniffed data URIs and binary keys as hex, in lists, get, create, update, relationships,
//! included records and CSV; and the same forms read back from write bodies and filters.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::auth::SessionKey;
use canopy::config::HttpConfig;
use canopy::datasource::sql::Options;
use canopy::http::{AppState, router};
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::http::{get, send, token};

/// The first bytes of a PNG file: served as `data:image/png;base64,…`.
const PNG: &str = "89504e470d0a1a0a";
const PNG_URI: &str = "data:image/png;base64,iVBORw0KGgo=";
/// 2^53 + 1: a JavaScript number cannot hold it.
const BIG: &str = "9007199254740993";

/// accounts ← payments (account), blobs (binary key) ← blob_tags (blob).
async fn bank(backend: Backend) -> (TestDb, Router) {
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
    let http = HttpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        prefix: String::new(),
        json_limit: 1 << 20,
        enable_raw_checking: false,
        limit_export_size: None,
        customize_error_message: None,
    };
    let state = AppState::new(
        Arc::new(datasource),
        SessionKey::new("a-test-auth-secret"),
        &http,
    );
    router(Arc::new(state))
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

fn with_body(method: &str, uri: &str, body: &Json) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
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
            urlencode(&filter)
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
            urlencode(&filter)
        );
        let body = ok(&app, get(&uri)).await;
        let ids: Vec<&str> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let expected = if collection == "blobs" { "cafe" } else { "1" };
        assert_eq!(ids, [expected], "{field}");
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

/// Percent-encodes everything but ASCII letters and digits.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

on_all_backends!(
    list_and_get_follow_the_driver_forms,
    foreign_keys_are_attributes,
    writes_round_trip_exactly,
    binary_keys_are_hex_in_writes_and_filters,
    csv_cells_use_the_wire_forms,
);

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
