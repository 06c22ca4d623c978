//! `SqlCollection`: the `Collection` operations over one table or view. Every call validates its
//! input against the schema first (so bad input is a validation error, never a SQL error), then
//! builds one statement with `build` and decodes the rows with `decode`.

mod aggregate;
mod exec;
mod validate;

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument as _;

use super::build::{self, Ctx, Statement, Target};
use super::decode::{self, Expect, Layout};
use super::{Pool, Shared};
use crate::datasource::query::{equivalence, search};
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, CollectionSchema, ConditionTree, Error,
    Filter, Operator, Projection, Record, Result, Sort, Value,
};
pub(crate) use exec::{
    Operation, connection_lost, db_error, live_connection, mysql_args, pg_args, sqlite_args,
};

/// Keys per statement when MySQL writes through relations by primary key.
const KEY_CHUNK: usize = 500;

/// One served table or view.
pub struct SqlCollection {
    shared: Arc<Shared>,
    name: String,
}

impl SqlCollection {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        Self { shared, name }
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            dialect: self.shared.dialect,
            schema: &self.shared.schema,
            tables: &self.shared.tables,
        }
    }

    /// The condition tree a call applies: the filter's tree (validated), AND the search tree,
    /// with time operators lowered to comparisons in the caller's timezone.
    fn effective_tree(&self, caller: &Caller, filter: &Filter) -> Result<Option<ConditionTree>> {
        let schema = self.schema();
        let datasource = &self.shared.schema;
        if let Some(tree) = &filter.condition_tree {
            tree.validate(schema, datasource)?;
        }
        if let Some(segment) = &filter.segment {
            // SQL collections define no segment trees; decorators above apply theirs and pass
            // the name through, so only an unknown name is an error here.
            if !schema.segments.iter().any(|s| s == segment) {
                return Err(Error::Validation(format!("Invalid segment: \"{segment}\"")));
            }
        }
        let search = match filter.search_text() {
            Some(text) => Some(search::build_tree(
                text,
                filter.search_extended,
                schema,
                datasource,
                caller.timezone,
            )?),
            None => None,
        };
        let tree = ConditionTree::intersect([filter.condition_tree.clone(), search]);
        tree.map(|t| {
            equivalence::lower_time_operators(&t, schema, datasource, caller.timezone, caller.now())
        })
        .transpose()
    }

    fn check_writable(&self) -> Result<()> {
        let table = self.shared.table(&self.name)?;
        if table.is_view {
            return Err(Error::Unprocessable("View is read-only".into()));
        }
        if self.schema().is_read_only || self.schema().primary_keys().is_empty() {
            return Err(Error::Unprocessable(format!(
                "Collection '{}' is read-only: it has no primary key",
                self.name
            )));
        }
        Ok(())
    }

    /// Runs a SELECT and decodes its rows column by column.
    async fn fetch(
        &self,
        statement: Statement,
        expects: &[Expect],
        needs: &[bool],
    ) -> Result<Vec<Vec<Value>>> {
        let mut rows = Vec::new();
        self.fetch_each(statement, expects, needs, |values| {
            rows.push(std::mem::take(values));
        })
        .await?;
        Ok(rows)
    }

    /// Runs a SELECT built with a layout and shapes each row into a record as it is decoded
    /// (one reused buffer of values, values moved into the record).
    async fn fetch_records(&self, statement: Statement, layout: &Layout) -> Result<Vec<Record>> {
        let assembler = decode::Assembler::new(layout);
        let needs = assembler.needs();
        let mut records = Vec::new();
        self.fetch_each(statement, &layout.columns, &needs, |values| {
            records.push(assembler.record(values));
        })
        .await?;
        Ok(records)
    }

    /// The one driver dispatch of reads: runs the SELECT and hands each decoded row to `each`
    /// (a reused buffer it may take from).
    async fn fetch_each(
        &self,
        statement: Statement,
        expects: &[Expect],
        needs: &[bool],
        each: impl FnMut(&mut Vec<Value>) + Send,
    ) -> Result<()> {
        let Statement {
            sql,
            binds,
            inlined,
        } = statement;
        // Off unless asked for (`canopy::sql=trace`): the binds are the caller's filter values.
        // `bench/load.sh` reads these lines to replay each scenario's SQL with pgbench.
        tracing::trace!(target: "canopy::sql", sql = %sql, binds = ?binds, "read");
        // Each attempt builds its own arguments: a retried read binds the same values again.
        let retries = &self.shared.retried_reads;
        let span = self.read_span(&sql, inlined);
        async {
            match &self.shared.pool {
                Pool::Postgres(pool) => {
                    let rows =
                        exec::read(pool, &sql, || pg_args(&binds), !inlined, retries).await?;
                    decode::pg_each(&rows, expects, needs, each)
                }
                Pool::MySql(pool) => {
                    let rows =
                        exec::read(pool, &sql, || mysql_args(&binds), !inlined, retries).await?;
                    decode::mysql_each(&rows, expects, needs, each)
                }
                Pool::Sqlite(pool) => {
                    let rows =
                        exec::read(pool, &sql, || sqlite_args(&binds), !inlined, retries).await?;
                    decode::sqlite_each(&rows, expects, needs, each)
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The span of one read for the trace export (`logging::spans`); none otherwise. The
    /// statement's text goes with it unless values were inlined into it (a filter's values are
    /// the caller's data and stay out of traces).
    fn read_span(&self, sql: &str, inlined: bool) -> tracing::Span {
        if !crate::logging::spans() {
            return tracing::Span::none();
        }
        let system = match &self.shared.pool {
            Pool::Postgres(_) => "postgresql",
            Pool::MySql(_) => "mysql",
            Pool::Sqlite(_) => "sqlite",
        };
        tracing::info_span!(
            target: "canopy::sql",
            "read",
            otel.name = %format_args!("SELECT {}", self.schema().name),
            otel.kind = "client",
            db.system.name = system,
            db.collection.name = %self.schema().name,
            db.query.text = (!inlined).then_some(sql),
        )
    }

    /// A tree selecting one row by its primary key values.
    fn primary_key_tree(&self, record: &Record) -> Option<ConditionTree> {
        let leaves: Option<Vec<ConditionTree>> = self
            .schema()
            .primary_keys()
            .into_iter()
            .map(|pk| {
                let value = record.get(pk).filter(|v| !v.is_null())?.clone();
                Some(ConditionTree::leaf(pk, Operator::Equal, value))
            })
            .collect();
        ConditionTree::intersect(leaves?.into_iter().map(Some))
    }

    /// Inserts one record on MySQL (no RETURNING): the key is the given one or
    /// `LAST_INSERT_ID()`, then the row is read back by it.
    async fn create_mysql(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
        record: Record,
    ) -> Result<Record> {
        let ctx = self.ctx();
        let (statement, _) = build::insert(ctx, &self.name, &record, false)?;
        let Statement {
            sql,
            binds,
            inlined,
        } = statement;
        let done = sqlx::query_with(&sql, mysql_args(&binds)?)
            .persistent(!inlined)
            .execute(&mut **tx)
            .await
            .map_err(|e| db_error(e, Operation::Write))?;
        let mut keys = record.clone();
        let table = self.shared.table(&self.name)?;
        for column in table.columns.iter().filter(|c| c.auto_increment) {
            if keys.get(&column.name).is_none_or(Value::is_null) {
                let id = i64::try_from(done.last_insert_id()).unwrap_or(i64::MAX);
                keys.insert(column.name.clone(), Value::Int(id));
            }
        }
        let Some(tree) = self.primary_key_tree(&keys) else {
            return Ok(record);
        };
        let projection = Projection::columns(self.schema());
        let (statement, layout) = build::list(
            ctx,
            &self.name,
            Some(&tree),
            &Sort::default(),
            None,
            &projection,
        )?;
        let Statement {
            sql,
            binds,
            inlined,
        } = statement;
        let rows = sqlx::query_with(&sql, mysql_args(&binds)?)
            .persistent(!inlined)
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| db_error(e, Operation::Read))?;
        let needs = decode::needs_value(&layout);
        let values = decode::mysql_rows(&rows, &layout.columns, &needs)?;
        Ok(decode::into_records(values, &layout)
            .into_iter()
            .next()
            .unwrap_or(record))
    }

    /// UPDATE or DELETE. Through relations on MySQL, the keys are selected first (MySQL cannot
    /// read the written table in a subquery), inside the same transaction.
    async fn write_filtered(
        &self,
        tree: Option<&ConditionTree>,
        operation: Operation,
        statement_for: impl Fn(&Target<'_>) -> Result<Statement>,
    ) -> Result<()> {
        let ctx = self.ctx();
        match &self.shared.pool {
            Pool::Postgres(pool) => {
                let Statement {
                    sql,
                    binds,
                    inlined,
                } = statement_for(&Target::Tree(tree))?;
                sqlx::query_with(&sql, pg_args(&binds)?)
                    .persistent(!inlined)
                    .execute(pool)
                    .await
                    .map_err(|e| db_error(e, operation))?;
            }
            Pool::Sqlite(pool) => {
                let Statement {
                    sql,
                    binds,
                    inlined,
                } = statement_for(&Target::Tree(tree))?;
                sqlx::query_with(&sql, sqlite_args(&binds)?)
                    .persistent(!inlined)
                    .execute(pool)
                    .await
                    .map_err(|e| db_error(e, operation))?;
            }
            Pool::MySql(pool) => {
                if !build::needs_joins(ctx, &self.name, tree)? {
                    let Statement {
                        sql,
                        binds,
                        inlined,
                    } = statement_for(&Target::Tree(tree))?;
                    sqlx::query_with(&sql, mysql_args(&binds)?)
                        .persistent(!inlined)
                        .execute(pool)
                        .await
                        .map_err(|e| db_error(e, operation))?;
                    return Ok(());
                }
                let mut tx = pool.begin().await.map_err(|e| db_error(e, operation))?;
                let (select, layout) = build::select_primary_keys(ctx, &self.name, tree)?;
                let Statement {
                    sql,
                    binds,
                    inlined,
                } = select;
                let rows = sqlx::query_with(&sql, mysql_args(&binds)?)
                    .persistent(!inlined)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(|e| db_error(e, Operation::Read))?;
                let needs = vec![true; layout.columns.len()];
                let keys = decode::mysql_rows(&rows, &layout.columns, &needs)?;
                for chunk in keys.chunks(KEY_CHUNK) {
                    let Statement {
                        sql,
                        binds,
                        inlined,
                    } = statement_for(&Target::Keys(chunk))?;
                    sqlx::query_with(&sql, mysql_args(&binds)?)
                        .persistent(!inlined)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| db_error(e, operation))?;
                }
                tx.commit().await.map_err(|e| db_error(e, operation))?;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Collection for SqlCollection {
    fn schema(&self) -> &CollectionSchema {
        &self.shared.schema.collections[&self.name]
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        let schema = self.schema();
        projection.validate(schema, &self.shared.schema)?;
        filter.sort.validate(schema, &self.shared.schema)?;
        let tree = self.effective_tree(caller, filter)?;
        let (statement, layout) = build::list(
            self.ctx(),
            &self.name,
            tree.as_ref(),
            &filter.sort,
            filter.page,
            projection,
        )?;
        self.fetch_records(statement, &layout).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        aggregation.validate(self.schema(), &self.shared.schema)?;
        let tree = self.effective_tree(caller, filter)?;
        let plan = build::aggregate(
            self.ctx(),
            &self.name,
            tree.as_ref(),
            aggregation,
            limit,
            caller.timezone,
        )?;
        let needs = vec![true; plan.columns.len()];
        let rows = self
            .fetch(plan.statement.clone(), &plan.columns, &needs)
            .await?;
        Ok(aggregate::results(&plan, rows, limit, caller.timezone))
    }

    async fn create(&self, _caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        self.check_writable()?;
        let schema = self.schema();
        let table = self.shared.table(&self.name)?;
        let records = records
            .into_iter()
            .map(|record| {
                validate::record(schema, &record, true)?;
                Ok(validate::with_defaults(
                    schema,
                    table,
                    self.shared.dialect,
                    record,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let ctx = self.ctx();
        let mut created = Vec::with_capacity(records.len());
        match &self.shared.pool {
            Pool::Postgres(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(|e| db_error(e, Operation::Write))?;
                for record in &records {
                    let (statement, layout) = build::insert(ctx, &self.name, record, true)?;
                    let layout =
                        layout.ok_or_else(|| Error::Internal("insert without RETURNING".into()))?;
                    let Statement {
                        sql,
                        binds,
                        inlined,
                    } = statement;
                    let rows = sqlx::query_with(&sql, pg_args(&binds)?)
                        .persistent(!inlined)
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(|e| db_error(e, Operation::Write))?;
                    let values =
                        decode::pg_rows(&rows, &layout.columns, &decode::needs_value(&layout))?;
                    created.extend(decode::into_records(values, &layout));
                }
                tx.commit()
                    .await
                    .map_err(|e| db_error(e, Operation::Write))?;
            }
            Pool::Sqlite(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(|e| db_error(e, Operation::Write))?;
                for record in &records {
                    let (statement, layout) = build::insert(ctx, &self.name, record, true)?;
                    let layout =
                        layout.ok_or_else(|| Error::Internal("insert without RETURNING".into()))?;
                    let Statement {
                        sql,
                        binds,
                        inlined,
                    } = statement;
                    let rows = sqlx::query_with(&sql, sqlite_args(&binds)?)
                        .persistent(!inlined)
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(|e| db_error(e, Operation::Write))?;
                    let values =
                        decode::sqlite_rows(&rows, &layout.columns, &decode::needs_value(&layout))?;
                    created.extend(decode::into_records(values, &layout));
                }
                tx.commit()
                    .await
                    .map_err(|e| db_error(e, Operation::Write))?;
            }
            Pool::MySql(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(|e| db_error(e, Operation::Write))?;
                for record in records {
                    created.push(self.create_mysql(&mut tx, record).await?);
                }
                tx.commit()
                    .await
                    .map_err(|e| db_error(e, Operation::Write))?;
            }
        }
        Ok(created)
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        self.check_writable()?;
        validate::record(self.schema(), patch, false)?;
        let tree = self.effective_tree(caller, filter)?;
        if patch.is_empty() {
            return Ok(());
        }
        let ctx = self.ctx();
        self.write_filtered(tree.as_ref(), Operation::Write, |target| {
            build::update(ctx, &self.name, patch, target)
        })
        .await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        self.check_writable()?;
        let tree = self.effective_tree(caller, filter)?;
        let ctx = self.ctx();
        self.write_filtered(tree.as_ref(), Operation::Delete, |target| {
            build::delete(ctx, &self.name, target)
        })
        .await
    }
}
