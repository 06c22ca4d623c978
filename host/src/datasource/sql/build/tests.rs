//! Statement shapes per dialect, on a hand-made model (orders → customers → countries).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

use super::condition::{escape_like, like_to_glob};
use super::write::{Target, needs_joins};
use super::*;
use crate::datasource::Error;
use crate::datasource::query::{
    Aggregation, AggregationOperation, ConditionTree, DateOperation, Operator, Page, Projection,
    Sort,
};
use crate::datasource::record::{Record, Value};
use crate::datasource::schema::{
    CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, FieldSchema, PrimitiveType,
    RelationSchema,
};
use crate::datasource::sql::decode::{Expect, Slot};

fn column(name: &str, kind: SqlKind, ty: PrimitiveType, pk: bool) -> Column {
    Column {
        name: name.to_owned(),
        raw_type: if kind == SqlKind::Text {
            "text".into()
        } else {
            String::new()
        },
        kind,
        column_type: ColumnType::Primitive(ty),
        nullable: !pk,
        default: None,
        auto_increment: pk,
        is_primary_key: pk,
        enum_values: Vec::new(),
        pg_cast: None,
        wire: Default::default(),
    }
}

fn table(name: &str, columns: Vec<Column>) -> Table {
    let primary_key = columns
        .iter()
        .filter(|c| c.is_primary_key)
        .map(|c| c.name.clone())
        .collect();
    Table {
        name: name.to_owned(),
        schema: None,
        is_view: false,
        columns,
        primary_key,
        unique: Vec::new(),
        foreign_keys: Vec::new(),
    }
}

fn schema_of(table: &Table, relations: Vec<(&str, RelationSchema)>) -> CollectionSchema {
    let mut schema = CollectionSchema::new(table.name.clone());
    for c in &table.columns {
        let mut cs = ColumnSchema::new(c.column_type.clone());
        cs.is_primary_key = c.is_primary_key;
        cs.filter_operators = crate::datasource::sql::operators::supported(&c.column_type);
        schema
            .fields
            .insert(c.name.clone(), FieldSchema::Column(cs));
    }
    for (name, relation) in relations {
        schema
            .fields
            .insert(name.to_owned(), FieldSchema::Relation(relation));
    }
    schema
}

struct Model {
    schema: DataSourceSchema,
    tables: HashMap<String, Arc<Table>>,
}

fn model(pg_schema: Option<&str>) -> Model {
    use PrimitiveType::*;
    let mut tables = vec![
        table(
            "countries",
            vec![
                column("id", SqlKind::Int, Number, true),
                column("name", SqlKind::Text, String, false),
            ],
        ),
        table(
            "customers",
            vec![
                column("id", SqlKind::Int, Number, true),
                column("name", SqlKind::Text, String, false),
                column("country_id", SqlKind::Int, Number, false),
            ],
        ),
        table(
            "orders",
            vec![
                column("id", SqlKind::Int, Number, true),
                column("amount", SqlKind::Decimal, Number, false),
                column("created_at", SqlKind::Timestamp, Date, false),
                column("day", SqlKind::Date, Dateonly, false),
                column("customer_id", SqlKind::Int, Number, false),
                column(
                    "tags",
                    SqlKind::Array(Box::new(SqlKind::Text)),
                    String,
                    false,
                ),
            ],
        ),
    ];
    tables[2].columns[5].column_type = ColumnType::Array(Box::new(ColumnType::Primitive(String)));
    tables[2].columns[5].pg_cast = Some("text[]".into());
    for t in &mut tables {
        t.schema = pg_schema.map(str::to_owned);
    }
    let m2o = |fc: &str, fk: &str| RelationSchema::ManyToOne {
        foreign_collection: fc.into(),
        foreign_key: fk.into(),
        foreign_key_target: "id".into(),
    };
    let schemas = vec![
        schema_of(&tables[0], vec![]),
        schema_of(
            &tables[1],
            vec![
                ("country", m2o("countries", "country_id")),
                (
                    "orders",
                    RelationSchema::OneToMany {
                        foreign_collection: "orders".into(),
                        origin_key: "customer_id".into(),
                        origin_key_target: "id".into(),
                    },
                ),
            ],
        ),
        schema_of(
            &tables[2],
            vec![("customer", m2o("customers", "customer_id"))],
        ),
    ];
    let mut schema = DataSourceSchema::default();
    for s in schemas {
        schema.collections.insert(s.name.clone(), s);
    }
    let tables = tables
        .into_iter()
        .map(|t| (t.name.clone(), Arc::new(t)))
        .collect();
    Model { schema, tables }
}

impl Model {
    fn ctx(&self, dialect: Dialect) -> Ctx<'_> {
        Ctx {
            dialect,
            schema: &self.schema,
            tables: &self.tables,
        }
    }
}

fn leaf(field: &str, op: Operator, value: impl Into<Value>) -> ConditionTree {
    ConditionTree::leaf(field, op, value)
}

/// The WHERE clause (and its binds) of a list of orders filtered by `tree`.
fn where_of(dialect: Dialect, tree: &ConditionTree) -> (String, Vec<Bind>) {
    let m = model(None);
    let (statement, _) = list(
        m.ctx(dialect),
        "orders",
        Some(tree),
        &Sort::default(),
        None,
        &Projection::new(["id"]),
    )
    .expect("builds");
    let sql = statement.sql;
    let at = sql.find(" WHERE ").expect("has WHERE");
    (sql[at + 7..].to_owned(), statement.binds)
}

#[test]
fn list_with_a_join_selects_the_foreign_columns_and_marker() {
    let m = model(Some("public"));
    let projection = Projection::new(["id", "amount", "customer:name"]);
    let (statement, layout) = list(
        m.ctx(Dialect::Postgres),
        "orders",
        Some(&leaf("customer:name", Operator::Equal, "Ann")),
        &Sort::desc("id"),
        Some(Page::new(10, 5)),
        &projection,
    )
    .expect("builds");
    assert_eq!(
        statement.sql,
        "SELECT \"orders\".\"id\", \"orders\".\"amount\", \"customer\".\"name\", \"customer\".\"id\" \
         FROM \"public\".\"orders\" AS \"orders\" \
         LEFT JOIN \"public\".\"customers\" AS \"customer\" ON \"orders\".\"customer_id\" = \"customer\".\"id\" \
         WHERE \"customer\".\"name\" = $1 ORDER BY \"orders\".\"id\" DESC LIMIT $2 OFFSET $3"
    );
    assert_eq!(
        statement.binds,
        vec![Bind::Text("Ann".into()), Bind::Int(5), Bind::Int(10)]
    );
    assert_eq!(layout.columns.len(), 4);
    assert!(
        matches!(&layout.shape.fields[2], (name, Slot::Relation { marker: 3, .. }) if name == "customer")
    );
}

#[test]
fn a_many_to_one_read_for_its_key_only_needs_no_join() {
    let m = model(None);
    let (statement, layout) = list(
        m.ctx(Dialect::Sqlite),
        "orders",
        None,
        &Sort::default(),
        None,
        &Projection::new(["id", "customer:id"]),
    )
    .expect("builds");
    assert_eq!(
        statement.sql,
        "SELECT \"orders\".\"id\", \"orders\".\"customer_id\" FROM \"orders\" AS \"orders\""
    );
    assert_eq!(
        layout.shape.fields[1].1,
        Slot::ForeignKey {
            index: 1,
            field: "id".into()
        }
    );
}

#[test]
fn nested_relations_are_aliased_by_path() {
    let m = model(None);
    let (statement, _) = list(
        m.ctx(Dialect::MySql),
        "orders",
        None,
        &Sort::asc("customer:country:name"),
        None,
        &Projection::new(["customer:country:name"]),
    )
    .expect("builds");
    assert_eq!(
        statement.sql,
        "SELECT `customer->country`.`name`, `customer->country`.`id`, `customer`.`id` FROM `orders` AS `orders` \
         LEFT JOIN `customers` AS `customer` ON `orders`.`customer_id` = `customer`.`id` \
         LEFT JOIN `countries` AS `customer->country` ON `customer`.`country_id` = `customer->country`.`id` \
         ORDER BY `customer->country`.`name` ASC"
    );
}

#[test]
fn postgres_sorts_nulls_first_on_nullable_columns_only() {
    let m = model(None);
    let sort = Sort(vec![
        crate::datasource::query::SortClause {
            field: "id".into(),
            ascending: true,
        },
        crate::datasource::query::SortClause {
            field: "amount".into(),
            ascending: true,
        },
        crate::datasource::query::SortClause {
            field: "customer:name".into(),
            ascending: false,
        },
    ]);
    let (statement, _) = list(
        m.ctx(Dialect::Postgres),
        "orders",
        None,
        &sort,
        None,
        &Projection::new(["id"]),
    )
    .expect("builds");
    assert!(statement.sql.ends_with(
        "ORDER BY \"orders\".\"id\" ASC, \"orders\".\"amount\" ASC NULLS FIRST, \"customer\".\"name\" DESC NULLS LAST"
    ));
}

#[test]
fn to_many_paths_are_validation_errors() {
    let m = model(None);
    let result = list(
        m.ctx(Dialect::Sqlite),
        "customers",
        Some(&leaf("orders:id", Operator::Equal, 1)),
        &Sort::default(),
        None,
        &Projection::new(["id"]),
    );
    assert!(matches!(result, Err(Error::Validation(_))), "{result:?}");
}

#[test]
fn null_handling_of_equality_and_lists() {
    use Operator::*;
    let d = Dialect::Sqlite;
    let id = "\"orders\".\"id\"";
    assert_eq!(
        where_of(d, &leaf("id", Equal, Value::Null)).0,
        format!("{id} IS NULL")
    );
    assert_eq!(
        where_of(d, &leaf("id", NotEqual, 3)).0,
        format!("({id} <> ? OR {id} IS NULL)")
    );
    let list = |items: Vec<Value>| Value::Array(items);
    assert_eq!(where_of(d, &leaf("id", In, list(vec![]))).0, "1 = 0");
    assert_eq!(where_of(d, &leaf("id", NotIn, list(vec![]))).0, "1 = 1");
    assert_eq!(
        where_of(d, &leaf("id", In, list(vec![1.into(), 2.into()]))).0,
        format!("{id} IN (?, ?)")
    );
    assert_eq!(
        where_of(d, &leaf("id", In, list(vec![1.into(), Value::Null]))).0,
        format!("({id} IN (?) OR {id} IS NULL)")
    );
    assert_eq!(
        where_of(d, &leaf("id", NotIn, list(vec![1.into()]))).0,
        format!("({id} NOT IN (?) OR {id} IS NULL)")
    );
    assert_eq!(
        where_of(d, &leaf("id", NotIn, list(vec![1.into(), Value::Null]))).0,
        format!("({id} IS NOT NULL AND {id} NOT IN (?))")
    );
    assert_eq!(
        where_of(d, &leaf("id", NotIn, list(vec![Value::Null]))).0,
        format!("{id} IS NOT NULL")
    );
    assert_eq!(where_of(d, &leaf("id", LessThan, Value::Null)).0, "1 = 0");
}

#[test]
fn blank_and_present_treat_empty_strings_as_blank() {
    let d = Dialect::Postgres;
    let name = "\"customer\".\"name\"";
    assert_eq!(
        where_of(d, &leaf("customer:name", Operator::Blank, Value::Null)).0,
        format!("({name} = '' OR {name} IS NULL)")
    );
    assert_eq!(
        where_of(d, &leaf("customer:name", Operator::Present, Value::Null)).0,
        format!("({name} <> '' AND {name} IS NOT NULL)")
    );
    assert_eq!(
        where_of(d, &leaf("id", Operator::Blank, Value::Null)).0,
        "\"orders\".\"id\" IS NULL"
    );
}

#[test]
fn patterns_per_dialect() {
    use Operator::*;
    let name = |d: Dialect| match d {
        Dialect::MySql => "`customer`.`name`".to_owned(),
        _ => "\"customer\".\"name\"".to_owned(),
    };
    let cases: Vec<(Dialect, Operator, &str, String, &str)> = vec![
        (
            Dialect::Postgres,
            Like,
            "a%",
            format!("{} LIKE $1", name(Dialect::Postgres)),
            "a%",
        ),
        (
            Dialect::Postgres,
            ILike,
            "a%",
            format!("{} ILIKE $1", name(Dialect::Postgres)),
            "a%",
        ),
        (
            Dialect::MySql,
            Like,
            "a%",
            format!(
                "CONVERT({} USING utf8mb4) COLLATE utf8mb4_bin LIKE ?",
                name(Dialect::MySql)
            ),
            "a%",
        ),
        (
            Dialect::MySql,
            ILike,
            "a%",
            format!(
                "LOWER(CONVERT({} USING utf8mb4)) COLLATE utf8mb4_bin LIKE LOWER(?)",
                name(Dialect::MySql)
            ),
            "a%",
        ),
        (
            Dialect::Sqlite,
            Like,
            "a%_*",
            format!("{} GLOB ?", name(Dialect::Sqlite)),
            "a*?[*]",
        ),
        (
            Dialect::Sqlite,
            ILike,
            "a%",
            format!("{} REGEXP ?", name(Dialect::Sqlite)),
            "(?s)\\A[aA].*\\z",
        ),
        (
            Dialect::Postgres,
            Contains,
            "50%_",
            format!("{} LIKE $1", name(Dialect::Postgres)),
            "%50\\%\\_%",
        ),
        (
            Dialect::Postgres,
            IStartsWith,
            "ab",
            format!("{} ILIKE $1", name(Dialect::Postgres)),
            "ab%",
        ),
        (
            Dialect::Sqlite,
            EndsWith,
            "a*",
            format!("{} GLOB ?", name(Dialect::Sqlite)),
            "*a[*]",
        ),
        (
            Dialect::Postgres,
            NotContains,
            "x",
            format!("(NOT {0} LIKE $1 OR {0} IS NULL)", name(Dialect::Postgres)),
            "%x%",
        ),
        (
            Dialect::MySql,
            NotIContains,
            "x",
            format!(
                "(NOT LOWER(CONVERT({0} USING utf8mb4)) COLLATE utf8mb4_bin LIKE LOWER(?) \
                 OR {0} IS NULL)",
                name(Dialect::MySql)
            ),
            "%x%",
        ),
        (
            Dialect::Postgres,
            Match,
            "^a.c$",
            format!("{} ~ $1", name(Dialect::Postgres)),
            "^a.c$",
        ),
        (
            Dialect::MySql,
            Match,
            "^a",
            format!("{} REGEXP ?", name(Dialect::MySql)),
            "(?-i)^a",
        ),
        (
            Dialect::Sqlite,
            Match,
            "(?i)^a",
            format!("{} REGEXP ?", name(Dialect::Sqlite)),
            "(?i)^a",
        ),
    ];
    for (dialect, op, value, sql, bound) in cases {
        let (clause, binds) = where_of(dialect, &leaf("customer:name", op, value));
        assert_eq!(clause, sql, "{dialect:?} {op}");
        assert_eq!(binds, vec![Bind::Text(bound.into())], "{dialect:?} {op}");
    }
}

#[test]
fn a_trailing_lone_escape_is_a_literal_backslash() {
    use Operator::*;
    let text = |s: &str| vec![Bind::Text(s.into())];
    assert_eq!(
        where_of(Dialect::Postgres, &leaf("customer:name", Like, "Aa\\")).1,
        text("Aa\\\\")
    );
    assert_eq!(
        where_of(Dialect::MySql, &leaf("customer:name", ILike, "a\\\\\\")).1,
        text("a\\\\\\\\")
    );
    // An escaped backslash stays as it is.
    assert_eq!(
        where_of(Dialect::Postgres, &leaf("customer:name", ILike, "a\\\\")).1,
        text("a\\\\")
    );
    assert_eq!(
        where_of(Dialect::Sqlite, &leaf("customer:name", Like, "a\\")).1,
        text("a\\")
    );
    assert_eq!(
        where_of(Dialect::Sqlite, &leaf("customer:name", ILike, "a\\")).1,
        text("(?s)\\A[aA]\\\\\\z")
    );
}

#[test]
fn sqlite_folds_case_as_the_evaluator() {
    use super::condition::folded_regex;
    let matches = |like: &str, text: &str| {
        regex::Regex::new(&folded_regex(like))
            .expect("valid regex")
            .is_match(text)
    };
    assert_eq!(folded_regex("É%"), "(?s)\\A[éÉ].*\\z");
    assert!(matches("É", "é") && matches("é", "É") && matches("%É_", "xée"));
    assert!(matches("k", "\u{212A}"), "the Kelvin sign lowercases to k");
    assert!(!matches("s", "ſ"), "the long s lowercases to itself");
    assert!(!matches("É", "e") && !matches("_", "") && !matches("a", "ab"));
    assert!(matches("a\\%", "A%") && !matches("a\\%", "Ab"));
    assert!(matches("a\\_b", "A_B") && !matches("a\\_b", "axb"));
    assert!(matches("%", "line\nbreak") && matches("_", "\n"));
    assert!(matches("a.b*", "A.B*") && !matches("a.b", "axb"));
    assert!(matches("[a]", "[A]"));
}

#[test]
fn mysql_compares_strings_exactly() {
    use Operator::*;
    let d = Dialect::MySql;
    let name = "`customer`.`name`";
    let exact = format!("CAST(CONVERT({name} USING utf8mb4) AS BINARY)");
    let (clause, binds) = where_of(d, &leaf("customer:name", Equal, "a"));
    assert_eq!(
        clause,
        format!("({name} = ? AND {exact} = CAST(? AS BINARY))")
    );
    assert_eq!(binds, vec![Bind::Text("a".into()), Bind::Text("a".into())]);
    assert_eq!(
        where_of(d, &leaf("customer:name", NotEqual, "a")).0,
        format!("({exact} <> CAST(? AS BINARY) OR {name} IS NULL)")
    );
    let list = |items: Vec<Value>| Value::Array(items);
    assert_eq!(
        where_of(
            d,
            &leaf("customer:name", In, list(vec!["a".into(), "b".into()]))
        )
        .0,
        format!("({name} IN (?, ?) AND {exact} IN (CAST(? AS BINARY), CAST(? AS BINARY)))")
    );
    assert_eq!(
        where_of(d, &leaf("customer:name", NotIn, list(vec!["a".into()]))).0,
        format!("({exact} NOT IN (CAST(? AS BINARY)) OR {name} IS NULL)")
    );
    assert_eq!(
        where_of(
            d,
            &leaf("customer:name", NotIn, list(vec!["a".into(), Value::Null]))
        )
        .0,
        format!("({name} IS NOT NULL AND {exact} NOT IN (CAST(? AS BINARY)))")
    );
    assert_eq!(
        where_of(d, &leaf("customer:name", Blank, Value::Null)).0,
        format!("(({name} = '' AND {exact} = '') OR {name} IS NULL)")
    );
    assert_eq!(
        where_of(d, &leaf("customer:name", Present, Value::Null)).0,
        format!("({exact} <> '' AND {name} IS NOT NULL)")
    );
    // Numbers compare as before.
    assert_eq!(where_of(d, &leaf("id", Equal, 1)).0, "`orders`.`id` = ?");
}

#[test]
fn postgres_compares_char_columns_with_their_padding() {
    use Operator::*;
    let mut m = model(None);
    let customers = m.tables.get_mut("customers").expect("customers");
    Arc::get_mut(customers).expect("unique").columns[1].raw_type = "character(3)".into();
    let where_in = |tree: &ConditionTree| {
        let (statement, _) = list(
            m.ctx(Dialect::Postgres),
            "orders",
            Some(tree),
            &Sort::default(),
            None,
            &Projection::new(["id"]),
        )
        .expect("builds");
        let at = statement.sql.find(" WHERE ").expect("has WHERE");
        (statement.sql[at + 7..].to_owned(), statement.binds)
    };
    let name = "\"customer\".\"name\"";
    let padded = format!("textin(bpcharout({name}))");
    let (clause, binds) = where_in(&leaf("customer:name", Equal, "b  "));
    assert_eq!(clause, format!("({name} = $1::bpchar AND {padded} = $2)"));
    assert_eq!(
        binds,
        vec![Bind::Text("b  ".into()), Bind::Text("b  ".into())]
    );
    assert_eq!(
        where_in(&leaf("customer:name", NotEqual, "b")).0,
        format!("({padded} <> $1 OR {name} IS NULL)")
    );
    assert_eq!(
        where_in(&leaf("customer:name", Blank, Value::Null)).0,
        format!("({padded} = '' OR {name} IS NULL)")
    );
    assert_eq!(
        where_in(&leaf("customer:name", LongerThan, 2)).0,
        format!("CHAR_LENGTH({padded}) > $1")
    );
}

#[test]
fn mysql_averages_in_double_precision_and_groups_strings_by_bytes() {
    let m = model(None);
    let aggregation =
        Aggregation::new(AggregationOperation::Avg, Some("amount")).group_by("customer:name", None);
    let plan = aggregate(
        m.ctx(Dialect::MySql),
        "orders",
        None,
        &aggregation,
        None,
        Tz::UTC,
    )
    .expect("builds");
    assert_eq!(
        plan.statement.sql,
        "SELECT SUM(`orders`.`amount`) * 1.0e0 / COUNT(`orders`.`amount`), `customer`.`name` \
         FROM `orders` AS `orders` \
         LEFT JOIN `customers` AS `customer` ON `orders`.`customer_id` = `customer`.`id` \
         GROUP BY 2, CAST(CONVERT(`customer`.`name` USING utf8mb4) AS BINARY) ORDER BY 1 DESC"
    );
    assert_eq!(plan.value, AggregateValue::Number);
}

#[test]
fn lengths_and_bad_regexes() {
    let (clause, binds) = where_of(
        Dialect::Sqlite,
        &leaf("customer:name", Operator::LongerThan, 3),
    );
    assert_eq!(clause, "LENGTH(\"customer\".\"name\") > ?");
    assert_eq!(binds, vec![Bind::Int(3)]);
    let (clause, _) = where_of(
        Dialect::MySql,
        &leaf("customer:name", Operator::ShorterThan, 3),
    );
    assert_eq!(clause, "CHAR_LENGTH(`customer`.`name`) < ?");
    let m = model(None);
    let result = list(
        m.ctx(Dialect::Postgres),
        "orders",
        Some(&leaf("customer:name", Operator::Match, "(unclosed")),
        &Sort::default(),
        None,
        &Projection::new(["id"]),
    );
    assert!(matches!(result, Err(Error::Validation(_))));
}

#[test]
fn like_helpers_escape_metacharacters() {
    assert_eq!(escape_like("50%_\\"), "50\\%\\_\\\\");
    assert_eq!(like_to_glob("a\\%b%c_[d"), "a%b*c?[[]d");
    assert_eq!(like_to_glob("?*"), "[?][*]");
}

#[test]
fn sqlite_timestamps_compare_normalised() {
    let instant = Utc
        .with_ymd_and_hms(2024, 3, 1, 10, 0, 0)
        .single()
        .expect("valid");
    let (clause, binds) = where_of(
        Dialect::Sqlite,
        &leaf("created_at", Operator::GreaterThan, Value::Date(instant)),
    );
    assert_eq!(
        clause,
        "strftime('%Y-%m-%d %H:%M:%f', \"orders\".\"created_at\") > ?"
    );
    assert_eq!(binds, vec![Bind::Text("2024-03-01 10:00:00.000".into())]);
    let (_, binds) = where_of(
        Dialect::MySql,
        &leaf("created_at", Operator::GreaterThan, Value::Date(instant)),
    );
    assert_eq!(binds, vec![Bind::Timestamp(instant.naive_utc())]);
}

#[test]
fn postgres_arrays_bind_text_arrays_with_casts() {
    let tags = Value::Array(vec!["a".into(), "b".into()]);
    let (clause, binds) = where_of(
        Dialect::Postgres,
        &leaf("tags", Operator::IncludesAll, tags.clone()),
    );
    assert_eq!(clause, "\"orders\".\"tags\" @> $1::text[]");
    assert_eq!(
        binds,
        vec![Bind::TextArray(vec![Some("a".into()), Some("b".into())])]
    );
    let (clause, _) = where_of(
        Dialect::Postgres,
        &leaf("tags", Operator::IncludesNone, tags.clone()),
    );
    assert_eq!(
        clause,
        "(\"orders\".\"tags\" IS NULL OR NOT (\"orders\".\"tags\" && $1::text[]))"
    );
    let m = model(None);
    let result = list(
        m.ctx(Dialect::Sqlite),
        "orders",
        Some(&leaf("tags", Operator::IncludesAll, tags)),
        &Sort::default(),
        None,
        &Projection::new(["id"]),
    );
    assert!(matches!(result, Err(Error::Validation(_))));
}

#[test]
fn branches_and_constants() {
    let tree = ConditionTree::or(vec![
        leaf("id", Operator::Equal, 1),
        ConditionTree::and(vec![
            leaf("id", Operator::GreaterThan, 5),
            leaf("id", Operator::LessThan, 9),
        ]),
    ]);
    let (clause, _) = where_of(Dialect::Postgres, &tree);
    assert_eq!(
        clause,
        "(\"orders\".\"id\" = $1 OR (\"orders\".\"id\" > $2 AND \"orders\".\"id\" < $3))"
    );
    assert_eq!(
        where_of(Dialect::Postgres, &ConditionTree::or(vec![])).0,
        "1 = 0"
    );
    assert_eq!(
        where_of(Dialect::Postgres, &ConditionTree::and(vec![])).0,
        "1 = 1"
    );
}

#[test]
fn unlowered_time_operators_are_internal_errors() {
    let m = model(None);
    let result = list(
        m.ctx(Dialect::Postgres),
        "orders",
        Some(&leaf("created_at", Operator::Today, Value::Null)),
        &Sort::default(),
        None,
        &Projection::new(["id"]),
    );
    assert!(matches!(result, Err(Error::Internal(_))));
}

#[test]
fn aggregate_on_postgres_groups_in_the_caller_timezone() {
    let m = model(None);
    let aggregation = Aggregation::new(AggregationOperation::Sum, Some("amount"))
        .group_by("created_at", Some(DateOperation::Week))
        .group_by("customer:name", None);
    let plan = aggregate(
        m.ctx(Dialect::Postgres),
        "orders",
        None,
        &aggregation,
        Some(10),
        Tz::Europe__Paris,
    )
    .expect("builds");
    assert_eq!(
        plan.statement.sql,
        "SELECT SUM(\"orders\".\"amount\"), date_trunc('week', \"orders\".\"created_at\" AT TIME ZONE $1)::date, \
         \"customer\".\"name\" FROM \"orders\" AS \"orders\" \
         LEFT JOIN \"customers\" AS \"customer\" ON \"orders\".\"customer_id\" = \"customer\".\"id\" \
         GROUP BY 2, 3 ORDER BY 1 DESC NULLS LAST LIMIT $2"
    );
    assert_eq!(
        plan.statement.binds,
        vec![Bind::Text("Europe/Paris".into()), Bind::Int(10)]
    );
    assert!(!plan.merge);
}

#[test]
fn aggregate_on_sqlite_and_mysql_buckets_for_rust() {
    let m = model(None);
    let aggregation = Aggregation::new(AggregationOperation::Avg, Some("amount"))
        .group_by("created_at", Some(DateOperation::Day))
        .group_by("day", Some(DateOperation::Month));
    let plan = aggregate(
        m.ctx(Dialect::Sqlite),
        "orders",
        None,
        &aggregation,
        Some(3),
        Tz::UTC,
    )
    .expect("builds");
    assert!(plan.merge);
    assert_eq!(plan.value, AggregateValue::SumAndCount);
    assert_eq!(
        plan.columns[..3],
        [Expect::Number, Expect::Number, Expect::Number]
    );
    let s = "CAST(strftime('%s', \"orders\".\"created_at\") AS INTEGER)";
    assert_eq!(
        plan.statement.sql,
        format!(
            "SELECT SUM(\"orders\".\"amount\"), COUNT(\"orders\".\"amount\"), \
             (({s}) - ((({s}) % 900) + 900) % 900) / 900, date(\"orders\".\"day\") \
             FROM \"orders\" AS \"orders\" GROUP BY 3, 4"
        )
    );
    let plan = aggregate(
        m.ctx(Dialect::MySql),
        "orders",
        None,
        &Aggregation::count(),
        None,
        Tz::UTC,
    )
    .expect("builds");
    assert_eq!(
        plan.statement.sql,
        "SELECT COUNT(*) FROM `orders` AS `orders`"
    );
    let count = Aggregation::count().group_by("created_at", Some(DateOperation::Year));
    let plan =
        aggregate(m.ctx(Dialect::MySql), "orders", None, &count, None, Tz::UTC).expect("builds");
    assert_eq!(
        plan.statement.sql,
        "SELECT COUNT(*), FLOOR(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', `orders`.`created_at`) / 900) \
         FROM `orders` AS `orders` GROUP BY 2"
    );
}

#[test]
fn writes_target_rows_directly_or_through_a_key_subquery() {
    let m = model(None);
    let mut patch = Record::new();
    patch.insert("amount", Value::Int(3));
    let direct = leaf("amount", Operator::GreaterThan, 1);
    let statement = update(
        m.ctx(Dialect::MySql),
        "orders",
        &patch,
        &Target::Tree(Some(&direct)),
    )
    .expect("builds");
    assert_eq!(
        statement.sql,
        "UPDATE `orders` SET `amount` = ? WHERE `amount` > ?"
    );
    let through = leaf("customer:name", Operator::Equal, "Ann");
    assert!(needs_joins(m.ctx(Dialect::MySql), "orders", Some(&through)).expect("resolves"));
    let statement = delete(
        m.ctx(Dialect::Postgres),
        "orders",
        &Target::Tree(Some(&through)),
    )
    .expect("builds");
    assert_eq!(
        statement.sql,
        "DELETE FROM \"orders\" WHERE \"id\" IN (SELECT \"orders\".\"id\" FROM \"orders\" AS \"orders\" \
         LEFT JOIN \"customers\" AS \"customer\" ON \"orders\".\"customer_id\" = \"customer\".\"id\" \
         WHERE \"customer\".\"name\" = $1)"
    );
    assert!(matches!(
        delete(
            m.ctx(Dialect::MySql),
            "orders",
            &Target::Tree(Some(&through))
        ),
        Err(Error::Internal(_))
    ));
    let keys = vec![vec![Value::Int(1)], vec![Value::Int(2)]];
    let statement = delete(m.ctx(Dialect::MySql), "orders", &Target::Keys(&keys)).expect("builds");
    assert_eq!(statement.sql, "DELETE FROM `orders` WHERE `id` IN (?, ?)");
}

#[test]
fn inserts_return_every_column_and_write_null_as_a_keyword() {
    let m = model(Some("public"));
    let mut record = Record::new();
    record.insert("amount", Value::Float(2.5));
    record.insert("customer_id", Value::Null);
    record.insert(
        "day",
        Value::Dateonly(NaiveDate::from_ymd_opt(2024, 2, 29).expect("valid")),
    );
    let (statement, layout) =
        insert(m.ctx(Dialect::Postgres), "orders", &record, true).expect("builds");
    assert_eq!(
        statement.sql,
        "INSERT INTO \"public\".\"orders\" (\"amount\", \"customer_id\", \"day\") VALUES ($1, NULL, $2) \
         RETURNING \"id\", \"amount\", \"created_at\", \"day\", \"customer_id\", \"tags\"::text[]"
    );
    assert_eq!(layout.expect("returning").columns.len(), 6);
    let m = model(None);
    let (statement, _) =
        insert(m.ctx(Dialect::MySql), "orders", &Record::new(), false).expect("builds");
    assert_eq!(statement.sql, "INSERT INTO `orders` () VALUES ()");
    let mut wrong = Record::new();
    wrong.insert("amount", Value::from("x"));
    assert!(matches!(
        insert(m.ctx(Dialect::Sqlite), "orders", &wrong, true),
        Err(Error::Validation(_))
    ));
}

#[test]
fn hostile_identifiers_stay_quoted() {
    let mut m = model(None);
    let mut t = (*m.tables["countries"]).clone();
    t.columns[1].name = "na\"me".into();
    m.tables.insert("countries".into(), Arc::new(t));
    let schema = m.schema.collections.get_mut("countries").expect("exists");
    let field = schema.fields.shift_remove("name").expect("exists");
    schema.fields.insert("na\"me".into(), field);
    let (statement, _) = list(
        m.ctx(Dialect::Sqlite),
        "countries",
        None,
        &Sort::default(),
        None,
        &Projection::new(["na\"me"]),
    )
    .expect("builds");
    assert_eq!(
        statement.sql,
        "SELECT \"countries\".\"na\"\"me\" FROM \"countries\" AS \"countries\""
    );
}

/// Past the bind budget, values are literals and the statement says so (it runs unprepared).
#[test]
fn values_past_the_bind_budget_are_literals() {
    let m = model(None);
    let ids = (1..=literal::BIND_BUDGET as i64 + 3)
        .map(Value::Int)
        .collect();
    let tree = leaf("id", Operator::In, Value::Array(ids));
    for (dialect, tail) in [
        (
            Dialect::Postgres,
            "$10000, (10001::int8), (10002::int8), (10003::int8))",
        ),
        (Dialect::MySql, "?, 10001, 10002, 10003)"),
        (Dialect::Sqlite, "?, 10001, 10002, 10003)"),
    ] {
        let (statement, _) = list(
            m.ctx(dialect),
            "orders",
            Some(&tree),
            &Sort::default(),
            None,
            &Projection::new(["id"]),
        )
        .expect("builds");
        assert_eq!(statement.binds.len(), literal::BIND_BUDGET, "{dialect:?}");
        assert!(statement.inlined);
        assert!(
            statement.sql.ends_with(tail),
            "{dialect:?}: …{}",
            &statement.sql[statement.sql.len() - 80..]
        );
    }
    let (small, _) = list(
        m.ctx(Dialect::Postgres),
        "orders",
        Some(&leaf("id", Operator::In, Value::Array(vec![Value::Int(1)]))),
        &Sort::default(),
        None,
        &Projection::new(["id"]),
    )
    .expect("builds");
    assert!(!small.inlined);
}

/// The agent's composite id lists (`Or` of `And(=, =)`, `And` of `Or(<>, <>)`) beyond 64 records
/// are one row value against a `VALUES` list; other long branches nest as balanced halves.
#[test]
fn long_composite_key_lists_are_values_and_long_branches_nest() {
    let record = |i: i64, op: Operator, inner: fn(Vec<ConditionTree>) -> ConditionTree| {
        inner(vec![leaf("id", op, i), leaf("customer_id", op, i + 1)])
    };
    let ids: Vec<ConditionTree> = (0..65)
        .map(|i| record(i, Operator::Equal, ConditionTree::and))
        .collect();
    let (sql, binds) = where_of(Dialect::Postgres, &ConditionTree::or(ids));
    assert!(
        sql.starts_with(
            "(\"orders\".\"id\", \"orders\".\"customer_id\") IN (VALUES ($1, $2), ($3, $4)"
        ),
        "{sql}"
    );
    assert_eq!(binds.len(), 130);
    let excluded: Vec<ConditionTree> = (0..65)
        .map(|i| record(i, Operator::NotEqual, ConditionTree::or))
        .collect();
    let (sql, _) = where_of(Dialect::MySql, &ConditionTree::and(excluded));
    assert!(
        sql.starts_with(
            "(`orders`.`id` IS NULL OR `orders`.`customer_id` IS NULL OR \
             (`orders`.`id`, `orders`.`customer_id`) NOT IN ((?, ?), (?, ?)"
        ),
        "{sql}"
    );
    // 64 records stay as written; 65 conditions of another shape nest in halves.
    let few: Vec<ConditionTree> = (0..64)
        .map(|i| record(i, Operator::Equal, ConditionTree::and))
        .collect();
    assert!(
        !where_of(Dialect::Sqlite, &ConditionTree::or(few))
            .0
            .contains("VALUES")
    );
    let many: Vec<ConditionTree> = (0..65).map(|i| leaf("id", Operator::Equal, i)).collect();
    let (sql, _) = where_of(Dialect::Sqlite, &ConditionTree::or(many));
    assert!(sql.starts_with("((\"orders\".\"id\" = ?"), "{sql}");
    assert_eq!(sql.matches(") OR (").count(), 1, "{sql}");
}
