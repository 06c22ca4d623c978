//! `SELECT` statements: lists (projection, joins, filter, sort, page) and aggregations (with
//! groups and date periods in the caller's timezone).

use chrono_tz::Tz;

use super::joins::Joins;
use super::{Bind, ColumnRef, Ctx, Statement, Writer, condition};
use crate::datasource::error::{Error, Result};
use crate::datasource::query::{
    Aggregation, AggregationOperation, ConditionTree, DateOperation, Page, Projection, Sort,
};
use crate::datasource::schema::{PrimitiveType, RelationSchema};
use crate::datasource::sql::decode::{Expect, Layout, Shape, Slot};
use crate::datasource::sql::dialect::Dialect;
use crate::datasource::sql::model::{Column, SqlKind};

/// The statement of `list` and how to decode its rows into records.
pub(crate) fn list(
    ctx: Ctx<'_>,
    collection: &str,
    tree: Option<&ConditionTree>,
    sort: &Sort,
    page: Option<Page>,
    projection: &Projection,
) -> Result<(Statement, Layout)> {
    let mut joins = Joins::new(ctx, collection)?;
    if let Some(tree) = tree {
        condition::prepare(&mut joins, tree)?;
    }
    for clause in &sort.0 {
        joins.resolve(&clause.field)?;
    }
    let mut selected = Selected::default();
    let shape = project(&mut joins, &mut selected, 0, "", projection)?;

    let mut w = Writer::new(ctx.dialect);
    w.push("SELECT ");
    if selected.items.is_empty() {
        w.push("1");
    }
    for (i, (source, column)) in selected.items.iter().enumerate() {
        if i > 0 {
            w.push(", ");
        }
        joins.reference(*source, column).write_select(&mut w);
    }
    joins.write_from(&mut w);
    write_where(&mut w, &joins, tree)?;
    write_order(&mut w, &joins, sort)?;
    if let Some(page) = page {
        write_page(&mut w, page);
    }
    let columns = selected
        .items
        .iter()
        .map(|(_, c)| Expect::Column(c.kind.clone()))
        .collect();
    Ok((w.finish(), Layout { columns, shape }))
}

/// Columns selected so far, as (source index, column), without duplicates.
#[derive(Default)]
struct Selected<'a> {
    items: Vec<(usize, &'a Column)>,
}

impl<'a> Selected<'a> {
    fn index(&mut self, source: usize, column: &'a Column) -> usize {
        if let Some(i) = self
            .items
            .iter()
            .position(|(s, c)| *s == source && c.name == column.name)
        {
            return i;
        }
        self.items.push((source, column));
        self.items.len() - 1
    }
}

/// Paths of a projection grouped by their first segment, in first-seen order.
fn split_projection<'p>(paths: impl Iterator<Item = &'p str>) -> Vec<(&'p str, Vec<&'p str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for path in paths {
        let (head, rest) = match path.split_once(':') {
            Some((head, rest)) => (head, Some(rest)),
            None => (path, None),
        };
        let index = match out.iter().position(|(h, _)| *h == head) {
            Some(i) => i,
            None => {
                out.push((head, Vec::new()));
                out.len() - 1
            }
        };
        if let Some(rest) = rest {
            out[index].1.push(rest);
        }
    }
    out
}

/// Builds the record shape of `source` for the given paths (relative to it), selecting columns
/// and joining to-one relations as needed.
fn project<'a>(
    joins: &mut Joins<'a>,
    selected: &mut Selected<'a>,
    source: usize,
    source_path: &str,
    projection: &Projection,
) -> Result<Shape> {
    project_paths(
        joins,
        selected,
        source,
        source_path,
        projection.iter().collect(),
    )
}

fn project_paths<'a>(
    joins: &mut Joins<'a>,
    selected: &mut Selected<'a>,
    source: usize,
    source_path: &str,
    paths: Vec<&str>,
) -> Result<Shape> {
    let mut fields = Vec::new();
    for (head, sub_paths) in split_projection(paths.into_iter()) {
        if sub_paths.is_empty() {
            let column = joins.column_of(source, head)?;
            let index = selected.index(source, column);
            fields.push((head.to_owned(), Slot::Column(index)));
            continue;
        }
        let collection = joins.source(source).collection;
        let relation = collection
            .relation(head)
            .ok_or_else(|| collection.missing_relation(head))?;
        let relation_path = match source_path {
            "" => head.to_owned(),
            parent => format!("{parent}:{head}"),
        };
        // A ManyToOne read only for its target key is answered from the foreign key: no join.
        if let RelationSchema::ManyToOne {
            foreign_key,
            foreign_key_target,
            ..
        } = relation
            && sub_paths.iter().all(|p| p == foreign_key_target)
            && !joins.is_joined(&relation_path)
        {
            let column = super::joins::table_column(joins.source(source).table, foreign_key)?;
            let index = selected.index(source, column);
            fields.push((
                head.to_owned(),
                Slot::ForeignKey {
                    index,
                    field: foreign_key_target.clone(),
                },
            ));
            continue;
        }
        let child = joins.source_for(&relation_path.split(':').collect::<Vec<_>>())?;
        let marker_column = joins
            .source(child)
            .join
            .as_ref()
            .map(|j| j.child_column)
            .ok_or_else(|| Error::Internal(format!("'{relation_path}' is not a join")))?;
        let shape = project_paths(joins, selected, child, &relation_path, sub_paths)?;
        // A column of the related table that cannot be NULL in a matched row is NULL exactly when
        // no row matched: then the relation is null. A NOT NULL column already selected serves
        // (one column less per row); otherwise the join key (the foreign target) is selected.
        let marker = match selected.items.iter().position(|(s, c)| {
            *s == child && (!c.nullable || c.is_primary_key || c.name == marker_column.name)
        }) {
            Some(index) => index,
            None => selected.index(child, marker_column),
        };
        fields.push((head.to_owned(), Slot::Relation { marker, shape }));
    }
    Ok(Shape { fields })
}

fn write_where(w: &mut Writer, joins: &Joins<'_>, tree: Option<&ConditionTree>) -> Result<()> {
    if let Some(tree) = tree {
        w.push(" WHERE ");
        condition::write(w, joins, tree)?;
    }
    Ok(())
}

/// `ORDER BY` only when a sort is given. NULL sorts as the smallest value on every database
/// (MySQL and SQLite do so already; PostgreSQL is told, for nullable columns only so that
/// indexes on NOT NULL columns still serve the sort).
fn write_order(w: &mut Writer, joins: &Joins<'_>, sort: &Sort) -> Result<()> {
    for (i, clause) in sort.0.iter().enumerate() {
        w.push(if i == 0 { " ORDER BY " } else { ", " });
        let column = joins.lookup(&clause.field)?;
        if w.dialect == Dialect::Sqlite
            && column.column.kind == SqlKind::Enum
            && !column.column.enum_values.is_empty()
        {
            write_enum_position(w, &column);
        } else {
            column.write_compared(w);
        }
        w.push(if clause.ascending { " ASC" } else { " DESC" });
        // A column read through a LEFT JOIN is NULL whenever its relation is.
        let nullable = column.column.nullable || column.alias != Some(joins.root().alias.as_str());
        if w.dialect == Dialect::Postgres && nullable {
            w.push(if clause.ascending {
                " NULLS FIRST"
            } else {
                " NULLS LAST"
            });
        }
    }
    Ok(())
}

/// A SQLite enum (a text column with `CHECK (col IN (…))`) sorts in declaration order, as
/// PostgreSQL and MySQL enum types do: by the position of its value in the list. A value outside
/// it (the check was added after the row) sorts with NULL.
fn write_enum_position(w: &mut Writer, column: &ColumnRef<'_>) {
    w.push("CASE ");
    column.write_raw(w);
    for (position, value) in column.column.enum_values.iter().enumerate() {
        w.push(" WHEN ");
        w.bind(Bind::Text(value.clone()));
        w.push(" THEN ");
        w.push(&position.to_string());
    }
    w.push(" END");
}

/// `LIMIT n OFFSET m`, bound like every value (the same text serves every page).
fn write_page(w: &mut Writer, page: Page) {
    w.push(" LIMIT ");
    w.bind(Bind::Int(i64::try_from(page.limit).unwrap_or(i64::MAX)));
    w.push(" OFFSET ");
    w.bind(Bind::Int(i64::try_from(page.skip).unwrap_or(i64::MAX)));
}

/// How an aggregate's value columns are read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AggregateValue {
    /// One numeric column (Count, Sum, Avg computed by the database).
    Number,
    /// Avg to be merged in Rust: `SUM(x)` then `COUNT(x)`.
    SumAndCount,
    /// Min or Max of a column, decoded as that column.
    Column(Expect),
}

/// How a group column is read and turned into the group value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GroupKind {
    /// The value itself (or a PostgreSQL period start, already a date).
    Value,
    /// MySQL/SQLite timestamps: a 15-minute UTC bucket number, re-bucketed in the caller's
    /// timezone.
    Bucket(DateOperation),
    /// MySQL/SQLite dates: the date, re-bucketed to the period start (no timezone involved).
    Day(DateOperation),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupColumn {
    pub field: String,
    pub kind: GroupKind,
}

/// The statement of `aggregate` and how to read it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AggregatePlan {
    pub statement: Statement,
    pub operation: AggregationOperation,
    pub value: AggregateValue,
    pub groups: Vec<GroupColumn>,
    /// Column expectations: value column(s) first, then one per group.
    pub columns: Vec<Expect>,
    /// Rows must be merged in Rust (re-bucketed dates), then ordered and limited there.
    pub merge: bool,
}

/// Seconds per UTC bucket when dates are re-bucketed in Rust: every timezone offset in use is
/// a multiple of 15 minutes, so a bucket never straddles a local midnight.
pub(crate) const BUCKET_SECONDS: i64 = 900;

/// The statement of an aggregation, grouped and ordered by value (descending, NULL last).
pub(crate) fn aggregate(
    ctx: Ctx<'_>,
    collection: &str,
    tree: Option<&ConditionTree>,
    aggregation: &Aggregation,
    limit: Option<u64>,
    timezone: Tz,
) -> Result<AggregatePlan> {
    let dialect = ctx.dialect;
    let mut joins = Joins::new(ctx, collection)?;
    if let Some(tree) = tree {
        condition::prepare(&mut joins, tree)?;
    }
    if let Some(field) = &aggregation.field {
        joins.resolve(field)?;
    }
    for group in &aggregation.groups {
        joins.resolve(&group.field)?;
    }
    let merge =
        dialect != Dialect::Postgres && aggregation.groups.iter().any(|g| g.operation.is_some());

    let mut w = Writer::new(dialect);
    let mut columns = Vec::new();
    w.push("SELECT ");
    let field = aggregation
        .field
        .as_deref()
        .map(|f| joins.lookup(f))
        .transpose()?;
    let value = match (aggregation.operation, &field) {
        (AggregationOperation::Count, None) => {
            w.push("COUNT(*)");
            AggregateValue::Number
        }
        (AggregationOperation::Count, Some(column)) => {
            w.push("COUNT(");
            column.write_raw(&mut w);
            w.push(")");
            AggregateValue::Number
        }
        (AggregationOperation::Sum, Some(column)) => {
            function(&mut w, "SUM", column);
            AggregateValue::Number
        }
        (AggregationOperation::Avg, Some(column)) if merge => {
            function(&mut w, "SUM", column);
            w.push(", ");
            w.push("COUNT(");
            column.write_raw(&mut w);
            w.push(")");
            AggregateValue::SumAndCount
        }
        (AggregationOperation::Avg, Some(column)) if dialect == Dialect::MySql => {
            // MySQL/MariaDB answer `AVG` of integers and decimals as a DECIMAL with only
            // `div_precision_increment` (4) more digits (0.5833 for 7/12); the evaluator's
            // average is the exact quotient as a double. The exact DECIMAL sum, made a double,
            // divided by the count, keeps double precision.
            w.push("SUM(");
            column.write_compared(&mut w);
            w.push(") * 1.0e0 / COUNT(");
            column.write_compared(&mut w);
            w.push(")");
            AggregateValue::Number
        }
        (AggregationOperation::Avg, Some(column)) => {
            function(&mut w, "AVG", column);
            AggregateValue::Number
        }
        (op @ (AggregationOperation::Min | AggregationOperation::Max), Some(column)) => {
            check_orderable(column, op)?;
            let name = if op == AggregationOperation::Min {
                "MIN"
            } else {
                "MAX"
            };
            function(&mut w, name, column);
            if dialect == Dialect::Postgres
                && let Some(cast) = super::pg_select_cast(column.column)
            {
                w.push(cast);
            }
            if is_number(column) {
                AggregateValue::Number
            } else {
                AggregateValue::Column(Expect::Column(column.column.kind.clone()))
            }
        }
        (op, None) => return Err(Error::validation(format!("{op:?} needs a field"))),
    };
    match value {
        AggregateValue::Number => columns.push(Expect::Number),
        AggregateValue::SumAndCount => columns.extend([Expect::Number, Expect::Number]),
        AggregateValue::Column(ref expect) => columns.push(expect.clone()),
    }

    let mut groups = Vec::new();
    for group in &aggregation.groups {
        w.push(", ");
        let column = joins.lookup(&group.field)?;
        let kind = match group.operation {
            None => {
                column.write_compared(&mut w);
                if dialect == Dialect::Postgres
                    && let Some(cast) = super::pg_select_cast(column.column)
                {
                    w.push(cast);
                }
                columns.push(Expect::Column(column.column.kind.clone()));
                GroupKind::Value
            }
            Some(period) => date_group(&mut w, &column, period, timezone, &mut columns)?,
        };
        groups.push(GroupColumn {
            field: group.field.clone(),
            kind,
        });
    }
    joins.write_from(&mut w);
    write_where(&mut w, &joins, tree)?;
    let value_columns = if value == AggregateValue::SumAndCount {
        2
    } else {
        1
    };
    if !groups.is_empty() {
        w.push(" GROUP BY ");
        for i in 0..groups.len() {
            if i > 0 {
                w.push(", ");
            }
            // Ordinals, so expressions with bound parameters (timezones) are not repeated.
            w.push(&(value_columns + i + 1).to_string());
        }
        if dialect == Dialect::MySql {
            // MySQL/MariaDB group strings by collation, which pads (`'b'` and `'b '` are one
            // group, even in `utf8mb4_bin`) and often ignores case (`_ci`): grouping also by
            // the bytes keeps the groups of the evaluator, which compares code points. Each
            // group then holds one spelling, the selected one.
            for group in aggregation.groups.iter().filter(|g| g.operation.is_none()) {
                let column = joins.lookup(&group.field)?;
                if matches!(
                    column.column.column_type.primitive(),
                    Some(PrimitiveType::String | PrimitiveType::Enum)
                ) {
                    w.push(", CAST(CONVERT(");
                    column.write_compared(&mut w);
                    w.push(" USING utf8mb4) AS BINARY)");
                }
            }
        }
        if !merge {
            w.push(" ORDER BY 1 DESC");
            if dialect == Dialect::Postgres {
                w.push(" NULLS LAST");
            }
            if let Some(limit) = limit {
                w.push(" LIMIT ");
                w.bind(Bind::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
            }
        }
    }
    Ok(AggregatePlan {
        statement: w.finish(),
        operation: aggregation.operation,
        value,
        groups,
        columns,
        merge,
    })
}

fn function(w: &mut Writer, name: &str, column: &ColumnRef<'_>) {
    w.push(name);
    w.push("(");
    column.write_compared(w);
    w.push(")");
}

fn is_number(column: &ColumnRef<'_>) -> bool {
    column.column.column_type.primitive() == Some(PrimitiveType::Number)
}

/// Min and Max need an ordered type; booleans, uuids, json and bytes are refused up front
/// rather than failing in the database.
fn check_orderable(column: &ColumnRef<'_>, op: AggregationOperation) -> Result<()> {
    let ok = matches!(
        column.column.column_type.primitive(),
        Some(
            PrimitiveType::Number
                | PrimitiveType::String
                | PrimitiveType::Date
                | PrimitiveType::Dateonly
                | PrimitiveType::Time
                | PrimitiveType::Enum
        )
    );
    if ok {
        Ok(())
    } else {
        Err(Error::validation(format!(
            "Cannot aggregate '{}' with {op:?}: the field is not orderable",
            column.column.name
        )))
    }
}

/// A date period group. PostgreSQL truncates in the caller's timezone (bound as a parameter);
/// MySQL and SQLite have no reliable timezone data, so they group by UTC 15-minute buckets (or
/// by day for dates) and the rows are re-bucketed in Rust with chrono-tz.
fn date_group(
    w: &mut Writer,
    column: &ColumnRef<'_>,
    period: DateOperation,
    timezone: Tz,
    columns: &mut Vec<Expect>,
) -> Result<GroupKind> {
    let is_date = column.column.kind == SqlKind::Date;
    let is_instant = matches!(
        column.column.kind,
        SqlKind::Timestamp | SqlKind::NaiveTimestamp
    );
    if !is_date && !is_instant {
        return Err(Error::validation(format!(
            "Cannot group '{}' by {period:?}: the field is not a date",
            column.column.name
        )));
    }
    match w.dialect {
        Dialect::Postgres => {
            let unit = match period {
                DateOperation::Day => "'day'",
                DateOperation::Week => "'week'",
                DateOperation::Month => "'month'",
                DateOperation::Quarter => "'quarter'",
                DateOperation::Year => "'year'",
            };
            w.push("date_trunc(");
            w.push(unit);
            w.push(", ");
            match column.column.kind {
                SqlKind::Timestamp => {
                    column.write_raw(w);
                    w.push(" AT TIME ZONE ");
                    w.bind(Bind::Text(timezone.name().to_owned()));
                }
                SqlKind::NaiveTimestamp => {
                    // A UTC wall clock: make it an instant first, then take the local time.
                    w.push("(");
                    column.write_raw(w);
                    w.push(" AT TIME ZONE 'UTC') AT TIME ZONE ");
                    w.bind(Bind::Text(timezone.name().to_owned()));
                }
                _ => {
                    column.write_raw(w);
                    w.push("::timestamp");
                }
            }
            w.push(")::date");
            columns.push(Expect::Column(SqlKind::Date));
            Ok(GroupKind::Value)
        }
        Dialect::MySql if is_instant => {
            w.push("FLOOR(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', ");
            column.write_raw(w);
            w.push(&format!(") / {BUCKET_SECONDS})"));
            columns.push(Expect::Number);
            Ok(GroupKind::Bucket(period))
        }
        Dialect::Sqlite if is_instant => {
            // Floor division that is also right before 1970 (SQLite's `/` truncates).
            let mut seconds = Writer::new(Dialect::Sqlite);
            seconds.push("CAST(strftime('%s', ");
            column.write_raw(&mut seconds);
            seconds.push(") AS INTEGER)");
            let s = seconds.sql;
            w.push(&format!(
                "(({s}) - ((({s}) % {BUCKET_SECONDS}) + {BUCKET_SECONDS}) % {BUCKET_SECONDS}) / {BUCKET_SECONDS}"
            ));
            columns.push(Expect::Number);
            Ok(GroupKind::Bucket(period))
        }
        Dialect::MySql | Dialect::Sqlite => {
            if w.dialect == Dialect::Sqlite {
                w.push("date(");
                column.write_raw(w);
                w.push(")");
            } else {
                column.write_raw(w);
            }
            columns.push(Expect::Column(SqlKind::Date));
            Ok(GroupKind::Day(period))
        }
    }
}
