//! Several datasources served at once: collections of a SQLite and a PostgreSQL database side by
//! side, renames to resolve a clash, and native queries routed by connection name.

use std::sync::Arc;

use canopy::datasource::sql::Options;
use canopy::datasource::{
    CompositeDataSource, DataSource, Error, Filter, Projection, Record, Value,
};
use canopy_e2e::{Backend, TestDb, caller};
use indexmap::IndexMap;

async fn two_databases() -> (TestDb, TestDb) {
    let sqlite = TestDb::new(Backend::Sqlite).await;
    sqlite
        .execute(
            "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
             INSERT INTO books (title) VALUES ('Dune'), ('Emma');
             CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);",
        )
        .await;
    let postgres = TestDb::new(Backend::Postgres).await;
    postgres
        .execute(
            "CREATE TABLE authors (id SERIAL PRIMARY KEY, name TEXT NOT NULL);
             INSERT INTO authors (name) VALUES ('Frank Herbert');
             CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT);",
        )
        .await;
    (sqlite, postgres)
}

fn named(connection: &str) -> Options {
    Options {
        connection_name: Some(connection.to_owned()),
        ..Options::default()
    }
}

#[tokio::test]
async fn collections_of_two_databases_are_served_together() {
    let (sqlite, postgres) = two_databases().await;
    let books: Arc<dyn DataSource> = Arc::new(sqlite.datasource(named("library")).await);
    let mut renamed = named("warehouse");
    renamed
        .rename
        .insert("notes".to_owned(), "author_notes".to_owned());
    let authors: Arc<dyn DataSource> = Arc::new(postgres.datasource(renamed).await);

    let composite = CompositeDataSource::new(vec![books, authors]).expect("no clash after rename");
    let names: Vec<&String> = composite.schema().collections.keys().collect();
    assert_eq!(names, ["author_notes", "authors", "books", "notes"]);

    let titles = composite
        .collection("books")
        .unwrap()
        .list(&caller(), &Filter::default(), &Projection::new(["title"]))
        .await
        .unwrap();
    assert_eq!(titles.len(), 2);
    let authors = composite
        .collection("authors")
        .unwrap()
        .list(&caller(), &Filter::default(), &Projection::new(["name"]))
        .await
        .unwrap();
    assert_eq!(authors[0].get("name"), Some(&Value::from("Frank Herbert")));

    // Native queries go to the datasource that declared the connection.
    assert_eq!(
        composite.native_query_connections(),
        ["library", "warehouse"]
    );
    let rows = composite
        .native_query(
            &caller(),
            "warehouse",
            "SELECT COUNT(*) AS value FROM authors",
            &IndexMap::new(),
        )
        .await
        .unwrap();
    assert_eq!(rows[0].get("value"), Some(&Value::Int(1)));
    let unknown = composite
        .native_query(&caller(), "nope", "SELECT 1", &Record::new().into())
        .await;
    assert!(
        matches!(unknown, Err(Error::Unprocessable(_))),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn a_collection_name_served_twice_is_refused_with_its_name() {
    let (sqlite, postgres) = two_databases().await;
    let a: Arc<dyn DataSource> = Arc::new(sqlite.datasource(Options::default()).await);
    let b: Arc<dyn DataSource> = Arc::new(postgres.datasource(Options::default()).await);
    let Err(error) = CompositeDataSource::new(vec![a, b]) else {
        panic!("two `notes` collections must be refused")
    };
    assert!(error.to_string().contains("'notes'"), "{error}");
}

#[tokio::test]
async fn without_a_connection_name_native_queries_are_refused() {
    let (sqlite, _postgres) = two_databases().await;
    let ds = sqlite.datasource(Options::default()).await;
    assert!(ds.native_query_connections().is_empty());
    let refused = ds
        .native_query(&caller(), "main", "SELECT 1", &IndexMap::new())
        .await;
    assert!(
        matches!(refused, Err(Error::Unprocessable(_))),
        "{refused:?}"
    );
}
