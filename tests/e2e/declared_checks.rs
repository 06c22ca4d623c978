//! Types declared by a CHECK: one schema gives one answer on every database. The same table is
//! created on the three servers in each one's own words for an enum (a PostgreSQL enum type,
//! MariaDB's `ENUM(…)`, SQLite's `TEXT CHECK (col IN (…))`) and for JSON (PostgreSQL
//! `jsonb`/`json`, MariaDB's `JSON`, which is `LONGTEXT CHECK (json_valid(…))`, SQLite's
//! declared `JSON` and `TEXT CHECK (json_valid(…))`), and the schema file, lists, sorts,
//! filters, CSV, search and writes are compared through HTTP.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::datasource::DataSource;
use canopy::datasource::sql::Options;
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::harness::{attribute, filters, get_ok, ids, post, schema_field, schema_file, serve};
use crate::http::{get, send};

fn ddl(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => {
            "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
             CREATE TYPE size AS ENUM ('S', 'M', 'L');
             CREATE TABLE notes (id INT PRIMARY KEY, title TEXT NOT NULL, mood mood,
                size size, meta JSONB, extra JSON);"
        }
        Backend::MySql => {
            "CREATE TABLE notes (id INT PRIMARY KEY, title TEXT NOT NULL,
                mood ENUM('sad', 'ok', 'happy'), size ENUM('S', 'M', 'L'), meta JSON,
                extra LONGTEXT CHECK (json_valid(extra)));"
        }
        // Two spellings of the enum check: a column constraint, and a named table constraint
        // with double quotes and `IS NULL OR`.
        Backend::Sqlite => {
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                mood TEXT CHECK (mood in ('sad','ok','happy')), \"size\" TEXT, meta JSON,
                extra TEXT CHECK (json_valid(extra)),
                CONSTRAINT size_ok CHECK (\"size\" IS NULL OR \"size\" IN (\"S\", \"M\", \"L\")));"
        }
    }
}

/// Ids deliberately not in mood order, so that a text sort and a declaration-order sort differ.
/// `meta`'s object keys are written in the order PostgreSQL's `jsonb` stores them (shorter keys
/// first): `jsonb` reorders keys where a JSON text column keeps them, which is the storage's
/// doing, not a type Canopy declares, and would show in the CSV text.
const SEED: &str = "INSERT INTO notes (id, title, mood, size, meta, extra) VALUES
    (1, 'one', 'ok', 'L', '{\"n\": 1, \"tag\": \"findme\"}', '[1, 2]'),
    (2, 'two', 'happy', 'S', '[\"findme\"]', '{\"a\": \"b\"}'),
    (3, 'three', 'sad', NULL, NULL, NULL),
    (4, 'four', NULL, 'M', '{\"nested\": {\"x\": [true, null]}}', '\"text\"');";

async fn app(backend: Backend) -> (TestDb, Arc<dyn DataSource>, Router) {
    let db = TestDb::new(backend).await;
    db.execute(ddl(backend)).await;
    db.execute(SEED).await;
    let stack: Arc<dyn DataSource> = Arc::new(db.datasource(Options::default()).await);
    let router = serve(stack.clone());
    (db, stack, router)
}

/// Every answer the test compares, for one database.
async fn answers(backend: Backend) -> Json {
    let (_db, stack, router) = app(backend).await;
    let file = schema_file(&stack);
    let fields: Json = ["mood", "size", "meta", "extra"]
        .iter()
        .map(|f| ((*f).to_owned(), schema_field(&file, "notes", f).clone()))
        .collect::<serde_json::Map<_, _>>()
        .into();

    let list = get_ok(
        &router,
        "/forest/notes?fields%5Bnotes%5D=id,title,mood,size,meta,extra&sort=id&timezone=UTC",
    )
    .await;
    let by_mood = get_ok(
        &router,
        "/forest/notes?fields%5Bnotes%5D=id&sort=mood&timezone=UTC",
    )
    .await;
    let by_mood_desc = get_ok(
        &router,
        "/forest/notes?fields%5Bnotes%5D=id&sort=-size&timezone=UTC",
    )
    .await;
    let tree = json!({"aggregator": "And", "conditions": [
        {"field": "mood", "operator": "in", "value": ["ok", "happy"]},
        {"field": "meta", "operator": "present", "value": null},
    ]});
    let filtered = get_ok(
        &router,
        &format!(
            "/forest/notes?fields%5Bnotes%5D=id&sort=id&filters={}&timezone=UTC",
            filters(&tree)
        ),
    )
    .await;
    // Search does not look inside JSON on PostgreSQL; nor may it on MariaDB. `happy` finds the
    // enum value, as a PostgreSQL enum is searched.
    let findme = get_ok(
        &router,
        "/forest/notes?fields%5Bnotes%5D=id&sort=id&search=findme&timezone=UTC",
    )
    .await;
    let happy = get_ok(
        &router,
        "/forest/notes?fields%5Bnotes%5D=id&sort=id&search=happy&timezone=UTC",
    )
    .await;
    let (status, _, csv) = send(
        &router,
        get("/forest/notes.csv?fields%5Bnotes%5D=id,mood,size,meta,extra&header=id,mood,size,meta,extra&sort=id&timezone=UTC"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{backend:?} CSV: {csv}");

    let create = json!({"data": {"type": "notes", "attributes": {
        "id": 10, "title": "new", "mood": "happy", "size": "M",
        "meta": [1, {"k": "v"}], "extra": {"list": [1, 2]},
    }}});
    let (status, _, created) = send(&router, post("/forest/notes?timezone=UTC", &create)).await;
    assert_eq!(status, StatusCode::OK, "{backend:?} create: {created}");
    let read_back = get_ok(&router, "/forest/notes/10?timezone=UTC").await;
    let bad = json!({"data": {"type": "notes", "attributes": {
        "id": 11, "title": "bad", "mood": "angry",
    }}});
    let (bad_status, _, _) = send(&router, post("/forest/notes?timezone=UTC", &bad)).await;

    json!({
        "fields": fields,
        "list": list["data"].as_array().unwrap().iter().map(|r| r["attributes"].clone()).collect::<Vec<_>>(),
        "by_mood": ids(&by_mood),
        "by_size_desc": ids(&by_mood_desc),
        "filtered": ids(&filtered),
        "search_findme": ids(&findme),
        "search_happy": ids(&happy),
        "csv": csv,
        "created": created["data"]["attributes"],
        "read_back": read_back["data"]["attributes"],
        "refused_enum_value": bad_status.as_u16(),
        "meta_attribute": attribute(&list, "meta"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_declare_the_same_types_on_every_database() {
    let postgres = answers(Backend::Postgres).await;
    // The reference answers, spelled out so that a change on PostgreSQL shows too.
    let mood = &postgres["fields"]["mood"];
    assert_eq!(mood["type"], "Enum");
    // The schema file lists enum values sorted, as the agent's generator does; the declaration
    // order shows in the sorts below.
    assert_eq!(mood["enums"], json!(["happy", "ok", "sad"]));
    assert_eq!(postgres["fields"]["size"]["enums"], json!(["L", "M", "S"]));
    assert_eq!(postgres["fields"]["meta"]["type"], "Json");
    assert_eq!(postgres["fields"]["extra"]["type"], "Json");
    // NULL first, then declaration order (not text order: happy < ok < sad).
    assert_eq!(postgres["by_mood"], json!(["4", "3", "1", "2"]));
    assert_eq!(postgres["by_size_desc"], json!(["1", "4", "2", "3"]));
    assert_eq!(postgres["filtered"], json!(["1", "2"]));
    assert_eq!(postgres["search_findme"], json!([]));
    assert_eq!(postgres["search_happy"], json!(["2"]));
    assert_eq!(
        postgres["meta_attribute"],
        json!([{"tag": "findme", "n": 1}, ["findme"], null, {"nested": {"x": [true, null]}}])
    );
    assert_eq!(postgres["read_back"]["meta"], json!([1, {"k": "v"}]));
    assert_eq!(postgres["read_back"]["extra"], json!({"list": [1, 2]}));
    assert_eq!(postgres["refused_enum_value"], 400);

    for backend in [Backend::MySql, Backend::Sqlite] {
        let other = answers(backend).await;
        for (key, expected) in postgres.as_object().unwrap() {
            assert_eq!(
                &other[key], expected,
                "{backend:?}: {key} differs from PostgreSQL"
            );
        }
    }
}
