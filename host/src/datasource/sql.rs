//! The SQL datasource over sqlx: SQLite, PostgreSQL and MySQL/MariaDB. This is the only code
//! that writes SQL for user data: values are bound (past a statement's bind budget, written as
//! typed literals), identifiers come only from the introspected model and are quoted per dialect.
//!
//! Pipeline: `introspect` reads the catalog into a [`model::Table`] list, `collections` turns it
//! into collection schemas (types, flags, relations and their names, as the Node agent's SQL
//! datasource does), options (`include`, `exclude`, `rename`) are applied here, and
//! `collection::SqlCollection` answers the data operations with `build` (SQL text and binds) and
//! `decode` (rows to values).

mod build;
mod collection;
pub mod collections;
mod decode;
pub mod dialect;
pub mod introspect;
pub mod model;
pub mod naming;
mod native;
pub mod operators;
pub mod types;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use indexmap::IndexMap;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

pub use collection::SqlCollection;
pub use dialect::Dialect;

use super::error::{Error, Result};
use super::record::{Record, Value};
use super::schema::{DataSourceSchema, FieldSchema, RelationSchema};
use super::{Caller, Collection, DataSource};
use model::Table;

/// A connection pool of one of the supported drivers.
#[derive(Debug, Clone)]
pub enum Pool {
    Postgres(PgPool),
    MySql(MySqlPool),
    Sqlite(SqlitePool),
}

/// Pool settings shared by every driver. sqlx pings a connection before every checkout by
/// default: one extra round trip per request, a third of a short list's cost. Like HikariCP, only a
/// connection that sat idle for a while is pinged; a connection that died since is discarded by the
/// pool when its next query fails.
fn pool_options<DB: sqlx::Database>(max_connections: u32) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .max_connections(max_connections)
        .test_before_acquire(false)
        .before_acquire(|connection, meta| {
            Box::pin(async move {
                if meta.idle_for > IDLE_BEFORE_PING {
                    sqlx::Connection::ping(connection).await?;
                }
                Ok(true)
            })
        })
}

/// How long a pooled connection may sit unused before it is pinged at checkout.
const IDLE_BEFORE_PING: std::time::Duration = std::time::Duration::from_secs(30);

impl Pool {
    /// The driver's name, as `/metrics` labels a pool without a connection name.
    pub fn driver(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::MySql(_) => "mysql",
            Self::Sqlite(_) => "sqlite",
        }
    }

    /// Connections open now, idle among them, and the most the pool opens.
    pub fn usage(&self) -> (u32, usize, u32) {
        match self {
            Self::Postgres(p) => (p.size(), p.num_idle(), p.options().get_max_connections()),
            Self::MySql(p) => (p.size(), p.num_idle(), p.options().get_max_connections()),
            Self::Sqlite(p) => (p.size(), p.num_idle(), p.options().get_max_connections()),
        }
    }

    /// One round trip (`SELECT 1`) on a pooled connection: the database answers.
    pub async fn ping(&self) -> std::result::Result<(), sqlx::Error> {
        match self {
            Self::Postgres(p) => sqlx::query("SELECT 1").execute(p).await.map(drop),
            Self::MySql(p) => sqlx::query("SELECT 1").execute(p).await.map(drop),
            Self::Sqlite(p) => sqlx::query("SELECT 1").execute(p).await.map(drop),
        }
    }

    /// Opens a pool from a URL: `postgres://`, `postgresql://`, `mysql://`, `mariadb://`,
    /// `sqlite:` (a file path; `?mode=rwc` creates it).
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        // Every session runs in UTC so that timestamps are read and written as UTC, as the agent
        // (Sequelize `timezone: '+00:00'`) does; the caller's timezone only shapes bounds.
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)?.options([("timezone", "UTC")]);
            let pool = pool_options::<sqlx::Postgres>(max_connections)
                .connect_with(options)
                .await?;
            Ok(Self::Postgres(pool))
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            let url = url.replacen("mariadb://", "mysql://", 1);
            let options = MySqlConnectOptions::from_str(&url)?.timezone(Some("+00:00".to_owned()));
            let pool = pool_options::<sqlx::MySql>(max_connections)
                .connect_with(options)
                .await?;
            Ok(Self::MySql(pool))
        } else if url.starts_with("sqlite:") {
            // `with_regexp` registers `REGEXP` (Rust regex): `Match`, and the case-insensitive string
            // operators (SQLite's LOWER folds ASCII only), are written with it on SQLite. A pool
            // built without it cannot answer them.
            let options = SqliteConnectOptions::from_str(url)?
                .foreign_keys(true)
                .with_regexp();
            let pool = pool_options::<sqlx::Sqlite>(max_connections)
                .connect_with(options)
                .await?;
            Ok(Self::Sqlite(pool))
        } else {
            Err(Error::validation(format!(
                "Unsupported database URL '{}': expected postgres://, mysql://, mariadb:// or sqlite:",
                redact_url(url)
            )))
        }
    }

    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::MySql(_) => Dialect::MySql,
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    pub async fn close(&self) {
        match self {
            Self::Postgres(p) => p.close().await,
            Self::MySql(p) => p.close().await,
            Self::Sqlite(p) => p.close().await,
        }
    }
}

/// Hides the password of a database URL for logs and error messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// `addDataSource` options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Only these collections (by their original table names) are served, when set.
    pub include: Option<Vec<String>>,
    /// These collections (by original table names) are not served.
    pub exclude: Vec<String>,
    /// Original table name → served collection name.
    pub rename: IndexMap<String, String>,
    /// Name under which native queries (live-query segments, query charts) may run on this
    /// database (`connectionName`). None, the default, allows none, as the agent's
    /// `liveQueryConnections` option does.
    pub connection_name: Option<String>,
    /// How long a native query may run before the database cancels it; `None` for
    /// [`DEFAULT_NATIVE_QUERY_TIMEOUT`].
    pub native_query_timeout: Option<std::time::Duration>,
}

/// `nativeQueryTimeoutInSeconds`' default: long enough for a heavy chart over a large table,
/// short enough that a runaway query does not hold a pooled connection for long.
pub const DEFAULT_NATIVE_QUERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What every collection of one SQL datasource shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub pool: Pool,
    pub dialect: Dialect,
    pub schema: DataSourceSchema,
    /// Served collection name → its table.
    pub tables: HashMap<String, Arc<Table>>,
    /// Reads run a second time because their connection was lost (`collection::exec::read`).
    pub retried_reads: AtomicU64,
}

impl Shared {
    pub fn table(&self, collection: &str) -> Result<&Arc<Table>> {
        self.tables
            .get(collection)
            .ok_or_else(|| Error::MissingCollection(collection.to_owned()))
    }
}

/// A datasource serving the tables (and PostgreSQL views) of one database.
pub struct SqlDataSource {
    shared: Arc<Shared>,
    collections: IndexMap<String, Arc<dyn Collection>>,
    connection_name: Option<String>,
    native: native::Settings,
}

impl std::fmt::Debug for SqlDataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlDataSource")
            .field("dialect", &self.shared.dialect)
            .field("collections", &self.collections.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SqlDataSource {
    /// How many reads ran a second time because the server cut their connection. Writes are
    /// never run again, so they never count.
    pub fn retried_reads(&self) -> u64 {
        self.shared.retried_reads.load(Ordering::Relaxed)
    }

    /// Connects, introspects and builds the collections.
    pub async fn connect(url: &str, options: Options) -> Result<Self> {
        let pool = Pool::connect(url, 10).await?;
        Self::from_pool(pool, options).await
    }

    /// Introspects an open pool and builds the collections.
    pub async fn from_pool(pool: Pool, options: Options) -> Result<Self> {
        let dialect = pool.dialect();
        let tables = introspect::introspect(&pool).await?;
        let schemas = collections::build(&tables, dialect);
        let (schema, tables) = apply_options(schemas, tables, &options)?;
        let shared = Arc::new(Shared {
            pool,
            dialect,
            schema,
            tables,
            retried_reads: AtomicU64::new(0),
        });
        let collections = shared
            .schema
            .collections
            .keys()
            .map(|name| {
                let collection: Arc<dyn Collection> =
                    Arc::new(SqlCollection::new(shared.clone(), name.clone()));
                (name.clone(), collection)
            })
            .collect();
        Ok(Self {
            shared,
            collections,
            connection_name: options.connection_name,
            native: native::Settings::new(
                options
                    .native_query_timeout
                    .unwrap_or(DEFAULT_NATIVE_QUERY_TIMEOUT),
            ),
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.shared.dialect
    }

    pub fn pool(&self) -> &Pool {
        &self.shared.pool
    }

    pub fn collection_names(&self) -> impl Iterator<Item = &String> {
        self.collections.keys()
    }
}

/// Applies include/exclude (by table name) and rename, and drops relations whose other side is
/// no longer served.
fn apply_options(
    schemas: Vec<super::schema::CollectionSchema>,
    tables: Vec<Table>,
    options: &Options,
) -> Result<(DataSourceSchema, HashMap<String, Arc<Table>>)> {
    let known: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    let names = options
        .include
        .iter()
        .flatten()
        .chain(&options.exclude)
        .chain(options.rename.keys());
    for name in names {
        if !known.contains(&name.as_str()) {
            return Err(Error::MissingCollection(name.clone()));
        }
    }
    let served = |table: &str| {
        options
            .include
            .as_ref()
            .is_none_or(|inc| inc.iter().any(|i| i == table))
            && !options.exclude.iter().any(|e| e == table)
    };
    let rename = |table: &str| {
        options
            .rename
            .get(table)
            .cloned()
            .unwrap_or_else(|| table.to_owned())
    };

    let mut out = DataSourceSchema::default();
    let mut by_collection = HashMap::new();
    for (mut schema, table) in schemas.into_iter().zip(tables) {
        if !served(&table.name) {
            continue;
        }
        schema.name = rename(&table.name);
        schema.fields.retain(|_, field| match field {
            FieldSchema::Relation(r) => {
                served(r.foreign_collection())
                    && match r {
                        RelationSchema::ManyToMany {
                            through_collection, ..
                        } => served(through_collection),
                        _ => true,
                    }
            }
            FieldSchema::Column(_) => true,
        });
        for field in schema.fields.values_mut() {
            if let FieldSchema::Relation(r) = field {
                match r {
                    RelationSchema::ManyToOne {
                        foreign_collection, ..
                    }
                    | RelationSchema::OneToMany {
                        foreign_collection, ..
                    }
                    | RelationSchema::OneToOne {
                        foreign_collection, ..
                    } => {
                        *foreign_collection = rename(foreign_collection);
                    }
                    RelationSchema::ManyToMany {
                        foreign_collection,
                        through_collection,
                        ..
                    } => {
                        *foreign_collection = rename(foreign_collection);
                        *through_collection = rename(through_collection);
                    }
                }
            }
        }
        if out.collections.contains_key(&schema.name) {
            return Err(Error::validation(format!(
                "Two collections would be named '{}' after rename",
                schema.name
            )));
        }
        by_collection.insert(schema.name.clone(), Arc::new(table));
        out.collections.insert(schema.name.clone(), schema);
    }
    // Collections are served sorted by name, as the agent does.
    out.collections.sort_keys();
    Ok((out, by_collection))
}

#[async_trait]
impl DataSource for SqlDataSource {
    fn schema(&self) -> &DataSourceSchema {
        &self.shared.schema
    }

    fn collection(&self, name: &str) -> Result<Arc<dyn Collection>> {
        self.collections
            .get(name)
            .cloned()
            .ok_or_else(|| Error::MissingCollection(name.to_owned()))
    }

    fn native_query_connections(&self) -> Vec<String> {
        self.connection_name.iter().cloned().collect()
    }

    async fn native_query(
        &self,
        _caller: &Caller,
        connection: &str,
        query: &str,
        variables: &IndexMap<String, Value>,
    ) -> Result<Vec<Record>> {
        if self.connection_name.as_deref() != Some(connection) {
            return Err(Error::Unprocessable(format!(
                "Native query connection '{connection}' is unknown"
            )));
        }
        native::run(&self.shared, &self.native, query, variables).await
    }

    fn pools(&self) -> Vec<super::NamedPool> {
        let pool = self.shared.pool.clone();
        vec![super::NamedPool {
            name: self
                .connection_name
                .clone()
                .unwrap_or_else(|| pool.driver().to_owned()),
            pool,
        }]
    }
}
