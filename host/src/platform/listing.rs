//! What the public API's list endpoints (notes, activity logs, admin logs) share in the store: a
//! date range from the `.eq .lt .lte .gt .gte` filters, and positional arguments for the dynamic
//! `WHERE` they build. Times are unix milliseconds (BIGINT) in both dialects, so one SQL text
//! serves SQLite and PostgreSQL, with `$n` placeholders that both accept.

use sqlx::Any;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

/// The bounds one date filter sets, each in unix milliseconds. Several bounds combine with AND.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DateRange {
    pub eq: Option<i64>,
    pub lt: Option<i64>,
    pub lte: Option<i64>,
    pub gt: Option<i64>,
    pub gte: Option<i64>,
}

impl DateRange {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The SQL conditions on `column` (a trusted column name, never input), their values pushed
    /// onto `args`.
    pub fn conditions(&self, column: &str, args: &mut Args) -> Vec<String> {
        [
            ("=", self.eq),
            ("<", self.lt),
            ("<=", self.lte),
            (">", self.gt),
            (">=", self.gte),
        ]
        .into_iter()
        .filter_map(|(op, bound)| bound.map(|ms| format!("{column} {op} {}", args.int(ms))))
        .collect()
    }
}

/// One positional argument of a dynamic query.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Int(i64),
    Text(String),
}

/// The arguments of a query built at run time, numbered `$1, $2, …` in push order.
#[derive(Debug, Default, Clone)]
pub struct Args {
    values: Vec<Arg>,
}

impl Args {
    /// Pushes an integer; returns its placeholder.
    pub fn int(&mut self, value: i64) -> String {
        self.values.push(Arg::Int(value));
        format!("${}", self.values.len())
    }

    /// Pushes a string; returns its placeholder.
    pub fn text(&mut self, value: impl Into<String>) -> String {
        self.values.push(Arg::Text(value.into()));
        format!("${}", self.values.len())
    }

    /// Binds every argument, in order, to `query` (whose text used the placeholders returned).
    pub fn bind<'q>(
        self,
        mut query: Query<'q, Any, AnyArguments<'q>>,
    ) -> Query<'q, Any, AnyArguments<'q>> {
        for value in self.values {
            query = match value {
                Arg::Int(i) => query.bind(i),
                Arg::Text(s) => query.bind(s),
            };
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_becomes_one_condition_per_bound_with_numbered_placeholders() {
        let mut args = Args::default();
        let first = args.text("production");
        let range = DateRange {
            gte: Some(10),
            lt: Some(20),
            ..DateRange::default()
        };
        assert_eq!(first, "$1");
        assert_eq!(
            range.conditions("created_at", &mut args),
            ["created_at < $2", "created_at >= $3"]
        );
        assert_eq!(
            args.values,
            [Arg::Text("production".into()), Arg::Int(20), Arg::Int(10)]
        );
        assert!(DateRange::default().is_empty());
        assert!(!range.is_empty());
    }
}
