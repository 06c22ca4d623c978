//! Default search: turns a search string into a condition tree over the collection's columns,
//! following the agent's per-type rules (§8.7).
//!
//! The query language (the agent's `Query.g4`, parsed here by hand): tokens separated by spaces
//! are AND-ed (an `AND` keyword is optional), upper-case `OR` separates alternatives (AND binds
//! tighter), parentheses group, `-token` negates, `"…"`/`'…'` are phrases, `field:value` targets a
//! field (fuzzy name: case-insensitive, `-` and `_` ignored, `.` crossing a relation). Input that
//! does not parse is searched as plain text. Groups nest at most [`MAX_SEARCH_DEPTH`] deep: the
//! parser and every walk of the tree it yields recurse once per level, and a few thousand levels
//! overflow a worker's stack, so deeper input is a validation error rather than a crash.
//!
//! Deliberate differences from the Node agent:
//! - A single token in parentheses (`(foo)`) parses; the agent's grammar rejects it and falls back
//!   to searching the text `(foo)`.
//! - Negated comparisons are exact complements: `-!=5` is `Equal 5` (the agent adds `Missing`,
//!   though `NotEqual` already matches NULL rows) and `->2020` on a date is "before 2021 or
//!   NULL" (the agent answers "before 2020-01-01, on it, or NULL").
//! - A number search needs digits: `>` alone is not `> 0` as JavaScript's `Number("")` makes it.

use chrono::{Datelike, NaiveDate, Utc};
use chrono_tz::Tz;

use super::condition_tree::ConditionTree;
use super::equivalence::start_of_day;
use super::operator::Operator;
use crate::datasource::error::{Error, Result};
use crate::datasource::record::{Value, parse_number};
use crate::datasource::schema::{
    CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, FieldSchema, PrimitiveType,
};

/// How deep parentheses may nest in a search. Far beyond what a person types, far below what
/// overflows a stack.
pub const MAX_SEARCH_DEPTH: usize = 32;

/// The condition tree for `search`; with `extended`, first-level to-one relations' columns are
/// searched too. A search that can match nothing yields a tree that matches nothing.
pub fn build_tree(
    search: &str,
    extended: bool,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    tz: Tz,
) -> Result<ConditionTree> {
    let text = search.trim();
    if text.is_empty() {
        return Ok(match_all());
    }
    let parsed = parse(text)?;
    let mut fields = default_fields(collection, schema, extended);
    if let Some(query) = &parsed {
        // Fields named in `field:value` are searchable even when not in the default set
        // (a relation's column without `extended`).
        let mut named = Vec::new();
        query.field_names(&mut named);
        for name in named {
            if let Some((path, column)) = lenient_field(collection, schema, &name.replace('.', ":"))
                && !fields.iter().any(|(p, _)| *p == path)
            {
                fields.push((path, column));
            }
        }
    }
    let builder = Builder {
        fields,
        tz,
        max_year: Utc::now().with_timezone(&tz).year() + 100,
    };
    Ok(match parsed {
        Some(query) => builder.query(&query),
        None => builder.term(&Term {
            negated: false,
            field: None,
            text: text.to_owned(),
        }),
    })
}

/// The search tree of `replaceSearch` with a field selection (spec search rules 1–4, the
/// customizer's `generateSearchFilter`): `only` replaces the default fields and the fields named
/// in `field:value` terms, `include` adds to them, `exclude` removes from them. Paths cross to-one
/// relations with `:` and are matched leniently; unknown paths are dropped.
pub fn build_tree_with_fields(
    search: &str,
    extended: bool,
    selection: (Option<&[String]>, &[String], &[String]),
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    tz: Tz,
) -> Result<ConditionTree> {
    let (only, include, exclude) = selection;
    let text = search.trim();
    if text.is_empty() {
        return Ok(match_all());
    }
    let parsed = parse(text)?;
    let mut named: Vec<String> = Vec::new();
    let mut fields = Vec::new();
    if only.is_none() {
        fields = default_fields(collection, schema, extended);
        if let Some(query) = &parsed {
            query.field_names(&mut named);
        }
    }
    let wanted = named
        .iter()
        .map(|n| n.replace('.', ":"))
        .chain(only.unwrap_or_default().iter().cloned())
        .chain(include.iter().cloned());
    for path in wanted {
        if let Some((path, column)) = lenient_field(collection, schema, &path)
            && !fields.iter().any(|(p, _)| *p == path)
        {
            fields.push((path, column));
        }
    }
    fields.retain(|(path, _)| !exclude.contains(path));
    let builder = Builder {
        fields,
        tz,
        max_year: Utc::now().with_timezone(&tz).year() + 100,
    };
    Ok(match parsed {
        Some(query) => builder.query(&query),
        None => builder.term(&Term {
            negated: false,
            field: None,
            text: text.to_owned(),
        }),
    })
}

/// A tree that matches every record (an empty AND).
fn match_all() -> ConditionTree {
    ConditionTree::and(Vec::new())
}

/// A tree that matches no record (an empty OR).
fn match_none() -> ConditionTree {
    ConditionTree::or(Vec::new())
}

fn is_match_all(tree: &ConditionTree) -> bool {
    *tree == match_all()
}

fn is_match_none(tree: &ConditionTree) -> bool {
    *tree == match_none()
}

/// AND of trees, flattened; any match-nothing part makes the whole match nothing.
fn all(trees: Vec<ConditionTree>) -> ConditionTree {
    if trees.iter().any(is_match_none) {
        return match_none();
    }
    ConditionTree::intersect(trees.into_iter().map(Some)).unwrap_or_else(match_all)
}

/// OR of trees, flattened; any match-everything part makes the whole match everything.
fn any(trees: Vec<ConditionTree>) -> ConditionTree {
    if trees.iter().any(is_match_all) {
        return match_all();
    }
    ConditionTree::union(trees.into_iter().map(Some)).unwrap_or_else(match_none)
}

// ------------------------------------------------------------------------------------------------
// Parsing

/// A parsed search query.
#[derive(Debug, Clone, PartialEq)]
enum Query {
    And(Vec<Query>),
    Or(Vec<Query>),
    Term(Term),
}

/// One searched value: a word or a phrase, maybe negated, maybe aimed at a field.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    negated: bool,
    /// The field name as typed (`author.name`), for `field:value`.
    field: Option<String>,
    text: String,
}

impl Query {
    fn field_names(&self, out: &mut Vec<String>) {
        match self {
            Query::And(items) | Query::Or(items) => items.iter().for_each(|q| q.field_names(out)),
            Query::Term(Term { field: Some(f), .. }) => out.push(f.clone()),
            Query::Term(_) => {}
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Space,
    Open,
    Close,
    Minus,
    Colon,
    Or,
    And,
    Word(String),
    Quoted(String),
}

/// Splits the query into tokens as the agent's lexer does: a word cannot start with `-`, `(` or
/// `:` nor end with `)`, and never holds a space or `:`; a quote opens a phrase only when it is
/// closed later.
fn lex(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            out.push(Token::Space);
            continue;
        }
        match c {
            '(' => {
                out.push(Token::Open);
                i += 1;
                continue;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
                continue;
            }
            '-' => {
                out.push(Token::Minus);
                i += 1;
                continue;
            }
            ':' => {
                out.push(Token::Colon);
                i += 1;
                continue;
            }
            '"' | '\'' => {
                if let Some(len) = chars[i + 1..].iter().position(|x| *x == c) {
                    out.push(Token::Quoted(chars[i + 1..i + 1 + len].iter().collect()));
                    i += len + 2;
                    continue;
                }
            }
            _ => {}
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != ':' {
            i += 1;
        }
        // A closing parenthesis ends a group rather than a word.
        while i > start + 1 && chars[i - 1] == ')' {
            i -= 1;
        }
        let word: String = chars[start..i].iter().collect();
        out.push(match word.as_str() {
            "OR" => Token::Or,
            "AND" => Token::And,
            _ => Token::Word(word),
        });
    }
    out
}

/// Recursive-descent parser over the tokens; `None` on any syntax error.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Groups open at the current position.
    depth: usize,
    /// Set when a group opens beyond [`MAX_SEARCH_DEPTH`]; parsing then stops.
    too_deep: bool,
}

/// The parsed query, `None` when the input does not parse (it is then searched as text), or a
/// validation error when its groups nest too deep.
fn parse(input: &str) -> Result<Option<Query>> {
    let mut parser = Parser {
        tokens: lex(input),
        at: 0,
        depth: 0,
        too_deep: false,
    };
    parser.skip_space();
    let query = parser.or();
    if parser.too_deep {
        return Err(Error::validation(format!(
            "The search nests parentheses more than {MAX_SEARCH_DEPTH} levels deep"
        )));
    }
    parser.skip_space();
    Ok(query.filter(|_| parser.at == parser.tokens.len()))
}

impl Parser {
    fn peek(&self, offset: usize) -> Option<&Token> {
        self.tokens.get(self.at + offset)
    }

    fn skip_space(&mut self) {
        while self.peek(0) == Some(&Token::Space) {
            self.at += 1;
        }
    }

    fn expect(&mut self, token: &Token) -> Option<()> {
        (self.peek(0) == Some(token)).then(|| self.at += 1)
    }

    /// `and (SPACE OR SPACE and)*`
    fn or(&mut self) -> Option<Query> {
        let mut items = vec![self.and()?];
        while self.peek(0) == Some(&Token::Space)
            && self.peek(1) == Some(&Token::Or)
            && self.peek(2) == Some(&Token::Space)
        {
            self.at += 3;
            items.push(self.and()?);
        }
        Some(if items.len() == 1 {
            items.remove(0)
        } else {
            Query::Or(items)
        })
    }

    /// `unit (SPACE [AND SPACE] unit)*`
    fn and(&mut self) -> Option<Query> {
        let mut items = vec![self.unit()?];
        while self.peek(0) == Some(&Token::Space)
            && !matches!(self.peek(1), None | Some(Token::Or | Token::Close))
        {
            self.at += 1;
            if self.peek(0) == Some(&Token::And) {
                self.at += 1;
                self.expect(&Token::Space)?;
            }
            items.push(self.unit()?);
        }
        Some(if items.len() == 1 {
            items.remove(0)
        } else {
            Query::And(items)
        })
    }

    /// `( or )` or a term.
    fn unit(&mut self) -> Option<Query> {
        if self.peek(0) == Some(&Token::Open) {
            if self.depth == MAX_SEARCH_DEPTH {
                self.too_deep = true;
                return None;
            }
            self.at += 1;
            self.depth += 1;
            self.skip_space();
            let inner = self.or()?;
            self.skip_space();
            self.expect(&Token::Close)?;
            self.depth -= 1;
            return Some(inner);
        }
        self.term().map(Query::Term)
    }

    /// `"phrase"`, `-word`, `-"phrase"`, `-field:value`, `field:value` or `word`.
    fn term(&mut self) -> Option<Term> {
        let negated = self.peek(0) == Some(&Token::Minus);
        if negated {
            self.at += 1;
        }
        match self.peek(0)?.clone() {
            Token::Quoted(text) => {
                self.at += 1;
                Some(Term {
                    negated,
                    field: None,
                    text,
                })
            }
            Token::Word(word) => {
                self.at += 1;
                if self.peek(0) == Some(&Token::Colon) {
                    self.at += 1;
                    let (Token::Word(text) | Token::Quoted(text)) = self.peek(0)?.clone() else {
                        return None;
                    };
                    self.at += 1;
                    return Some(Term {
                        negated,
                        field: Some(word),
                        text,
                    });
                }
                // `-5` is the number minus five, not "not 5".
                if negated && parse_number(&format!("-{word}")).is_some() {
                    return Some(Term {
                        negated: false,
                        field: None,
                        text: format!("-{word}"),
                    });
                }
                Some(Term {
                    negated,
                    field: None,
                    text: word,
                })
            }
            _ => None,
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Fields

/// The agent's fuzzy field name: lower case, without `-` and `_`.
fn normalize(name: &str) -> String {
    name.to_lowercase()
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .collect()
}

/// Every column, plus with `extended` every column of each first-level to-one relation.
fn default_fields<'a>(
    collection: &'a CollectionSchema,
    schema: &'a DataSourceSchema,
    extended: bool,
) -> Vec<(String, &'a ColumnSchema)> {
    let mut out = Vec::new();
    for (name, field) in &collection.fields {
        match field {
            FieldSchema::Column(column) => out.push((name.clone(), column)),
            FieldSchema::Relation(relation) if extended && relation.is_to_one() => {
                if let Ok(foreign) = schema.collection(relation.foreign_collection()) {
                    for (sub, column) in foreign.columns() {
                        out.push((format!("{name}:{sub}"), column));
                    }
                }
            }
            FieldSchema::Relation(_) => {}
        }
    }
    out
}

/// Resolves a typed `a:b` path with fuzzy names through to-one relations to a column.
fn lenient_field<'a>(
    collection: &'a CollectionSchema,
    schema: &'a DataSourceSchema,
    path: &str,
) -> Option<(String, &'a ColumnSchema)> {
    let (prefix, suffix) = match path.split_once(':') {
        Some((p, s)) => (p, Some(s)),
        None => (path, None),
    };
    let wanted = normalize(prefix);
    for (name, field) in &collection.fields {
        if normalize(name) != wanted {
            continue;
        }
        match (field, suffix) {
            (FieldSchema::Column(column), None) => return Some((name.clone(), column)),
            (FieldSchema::Relation(relation), Some(rest)) if relation.is_to_one() => {
                let foreign = schema.collection(relation.foreign_collection()).ok()?;
                if let Some((sub, column)) = lenient_field(foreign, schema, rest) {
                    return Some((format!("{name}:{sub}"), column));
                }
            }
            _ => {}
        }
    }
    None
}

// ------------------------------------------------------------------------------------------------
// Conditions

struct Builder<'a> {
    fields: Vec<(String, &'a ColumnSchema)>,
    tz: Tz,
    /// Four digits above this are not years (the agent: current year + 100).
    max_year: i32,
}

impl Builder<'_> {
    fn query(&self, query: &Query) -> ConditionTree {
        match query {
            Query::And(items) => all(items.iter().map(|q| self.query(q)).collect()),
            Query::Or(items) => any(items.iter().map(|q| self.query(q)).collect()),
            Query::Term(term) => self.term(term),
        }
    }

    /// One term: OR over the searched fields (AND of the negated conditions when negated).
    fn term(&self, term: &Term) -> ConditionTree {
        let targeted: Vec<&(String, &ColumnSchema)> = match &term.field {
            Some(field) => {
                let wanted = normalize(&field.replace('.', ":"));
                self.fields
                    .iter()
                    .filter(|(path, _)| normalize(path) == wanted)
                    .collect()
            }
            None => Vec::new(),
        };
        let (fields, text) = if targeted.is_empty() {
            // An unknown field name: the whole `field:value` is searched as text.
            let text = match &term.field {
                Some(field) => format!("{field}:{}", term.text),
                None => term.text.clone(),
            };
            (self.fields.iter().collect(), text)
        } else {
            (targeted, term.text.clone())
        };
        let conditions = fields
            .into_iter()
            .map(|(path, column)| self.field(path, column, &text, term.negated))
            .collect();
        if term.negated {
            all(conditions)
        } else {
            any(conditions)
        }
    }

    /// The condition for one field, or match-nothing (match-everything when negated) when the
    /// text means nothing for the field's type or the operators are not supported.
    fn field(&self, path: &str, column: &ColumnSchema, text: &str, negated: bool) -> ConditionTree {
        let default = || if negated { match_all() } else { match_none() };
        let has = |op: Operator| column.filter_operators.contains(&op);
        if text == "NULL" {
            return match (negated, has(Operator::Missing), has(Operator::Present)) {
                (false, true, _) => leaf(path, Operator::Missing, Value::Null),
                (true, _, true) => leaf(path, Operator::Present, Value::Null),
                _ => default(),
            };
        }
        let built = match &column.column_type {
            ColumnType::Primitive(p) => match p {
                PrimitiveType::String => string_condition(path, column, text, negated),
                PrimitiveType::Number => number_condition(path, column, text, negated),
                PrimitiveType::Uuid => ::uuid::Uuid::parse_str(text)
                    .ok()
                    .and_then(|u| equality(path, column, Value::Uuid(u), negated)),
                PrimitiveType::Boolean => match text.to_lowercase().as_str() {
                    "true" | "1" => equality(path, column, Value::Bool(true), negated),
                    "false" | "0" => equality(path, column, Value::Bool(false), negated),
                    _ => None,
                },
                PrimitiveType::Enum => enum_value(column, text)
                    .and_then(|v| equality(path, column, Value::String(v), negated)),
                PrimitiveType::Date | PrimitiveType::Dateonly => {
                    self.date_condition(path, column, *p == PrimitiveType::Dateonly, text, negated)
                }
                // Json, Time, Binary, Point are never searched.
                _ => None,
            },
            ColumnType::Array(inner) => {
                let item = match inner.primitive() {
                    Some(PrimitiveType::String) => Some(Value::String(text.to_owned())),
                    Some(PrimitiveType::Number) => parse_number(text),
                    Some(PrimitiveType::Enum) => enum_value(column, text).map(Value::String),
                    _ => None,
                };
                item.and_then(|item| {
                    let items = Value::Array(vec![item]);
                    if !negated {
                        has(Operator::IncludesAll).then(|| leaf(path, Operator::IncludesAll, items))
                    } else {
                        has(Operator::IncludesNone).then(|| {
                            with_missing(
                                path,
                                column,
                                vec![leaf(path, Operator::IncludesNone, items)],
                            )
                        })
                    }
                })
            }
            ColumnType::Composite(_) => None,
        };
        built.unwrap_or_else(default)
    }

    /// `YYYY`, `YYYY-MM` or `YYYY-MM-DD` (optionally after `>`, `>=`, `≥`, `<`, `<=`, `≤`): the
    /// period from its first day (included) to the next period's first day (excluded), in the
    /// caller's timezone for Date columns.
    fn date_condition(
        &self,
        path: &str,
        column: &ColumnSchema,
        dateonly: bool,
        text: &str,
        negated: bool,
    ) -> Option<ConditionTree> {
        use Operator::*;
        let needed = [Equal, Before, After];
        if !needed.iter().all(|op| column.filter_operators.contains(op)) {
            return None;
        }
        let bound = |d: NaiveDate| {
            if dateonly {
                Value::Dateonly(d)
            } else {
                Value::Date(start_of_day(d, self.tz))
            }
        };
        let prefixes = [">=", "≥", "<=", "≤", ">", "<", ""];
        let (prefix, (start, end)) = prefixes
            .iter()
            .find_map(|p| Some((*p, self.period(text.strip_prefix(p)?)?)))?;
        let (start, end) = (bound(start), bound(end));
        let l = |op: Operator, v: &Value| leaf(path, op, v.clone());
        // `from` = at or after, `until` = strictly before.
        let from = |v: &Value| any(vec![l(Equal, v), l(After, v)]);
        Some(match (prefix, negated) {
            ("", false) => all(vec![from(&start), l(Before, &end)]),
            ("", true) => with_missing(path, column, vec![l(Before, &start), from(&end)]),
            (">", false) => from(&end),
            (">", true) => with_missing(path, column, vec![l(Before, &end)]),
            (">=" | "≥", false) => from(&start),
            (">=" | "≥", true) => with_missing(path, column, vec![l(Before, &start)]),
            ("<", false) => l(Before, &start),
            ("<", true) => with_missing(path, column, vec![from(&start)]),
            (_, false) => l(Before, &end),
            (_, true) => with_missing(path, column, vec![from(&end)]),
        })
    }

    /// The first day of the period a date text names, and the first day after it.
    fn period(&self, text: &str) -> Option<(NaiveDate, NaiveDate)> {
        let parts: Vec<&str> = text.split('-').collect();
        let digits = |s: &str, lens: &[usize]| {
            lens.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
        };
        match parts.as_slice() {
            [y] if digits(y, &[4]) => {
                let year: i32 = y.parse().ok()?;
                if !(1800..=self.max_year).contains(&year) {
                    return None;
                }
                Some((
                    NaiveDate::from_ymd_opt(year, 1, 1)?,
                    NaiveDate::from_ymd_opt(year + 1, 1, 1)?,
                ))
            }
            [y, m] if digits(y, &[4]) && digits(m, &[1, 2]) => {
                let (year, month): (i32, u32) = (y.parse().ok()?, m.parse().ok()?);
                let start = NaiveDate::from_ymd_opt(year, month, 1)?;
                let end = if month == 12 {
                    NaiveDate::from_ymd_opt(year + 1, 1, 1)?
                } else {
                    NaiveDate::from_ymd_opt(year, month + 1, 1)?
                };
                Some((start, end))
            }
            [y, m, d] if digits(y, &[4]) && digits(m, &[2]) && digits(d, &[2]) => {
                let start = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
                Some((start, start.succ_opt()?))
            }
            _ => None,
        }
    }
}

fn leaf(path: &str, operator: Operator, value: Value) -> ConditionTree {
    ConditionTree::leaf(path, operator, value)
}

/// OR of the conditions, plus `Missing` when the column supports it: negated searches also
/// return rows where the field is empty.
fn with_missing(
    path: &str,
    column: &ColumnSchema,
    mut conditions: Vec<ConditionTree>,
) -> ConditionTree {
    if column.filter_operators.contains(&Operator::Missing) {
        conditions.push(leaf(path, Operator::Missing, Value::Null));
    }
    any(conditions)
}

/// `Equal v`, or `NotEqual v OR Missing` when negated.
fn equality(
    path: &str,
    column: &ColumnSchema,
    value: Value,
    negated: bool,
) -> Option<ConditionTree> {
    if negated {
        column
            .filter_operators
            .contains(&Operator::NotEqual)
            .then(|| with_missing(path, column, vec![leaf(path, Operator::NotEqual, value)]))
    } else {
        column
            .filter_operators
            .contains(&Operator::Equal)
            .then(|| leaf(path, Operator::Equal, value))
    }
}

/// The enum value equal to the text, ignoring case and surrounding spaces.
fn enum_value(column: &ColumnSchema, text: &str) -> Option<String> {
    let needle = text.trim().to_lowercase();
    column
        .enum_values
        .iter()
        .find(|v| v.trim().to_lowercase() == needle)
        .cloned()
}

/// First supported of `IContains`, `Contains`, `Equal` (negated: `NotIContains`, `NotContains`,
/// `NotEqual`, each OR `Missing`); an empty phrase is `Equal ""`.
fn string_condition(
    path: &str,
    column: &ColumnSchema,
    text: &str,
    negated: bool,
) -> Option<ConditionTree> {
    use Operator::*;
    let value = || Value::String(text.to_owned());
    if text.is_empty() {
        return equality(path, column, value(), negated);
    }
    let stack = [
        (IContains, NotIContains),
        (Contains, NotContains),
        (Equal, NotEqual),
    ];
    stack.iter().find_map(|(positive, negative)| {
        let op = if negated { *negative } else { *positive };
        column.filter_operators.contains(&op).then(|| {
            if negated {
                with_missing(path, column, vec![leaf(path, op, value())])
            } else {
                leaf(path, op, value())
            }
        })
    })
}

/// A number, optionally after a comparison prefix; the negated form is the exact complement
/// (with `Missing` where NULL rows are not already included).
fn number_condition(
    path: &str,
    column: &ColumnSchema,
    text: &str,
    negated: bool,
) -> Option<ConditionTree> {
    use Operator::*;
    // (prefix, positive operators, negated operators); the positive ones are OR-ed.
    const PREFIXES: &[(&str, &[Operator], &[Operator])] = &[
        ("", &[Equal], &[NotEqual, Missing]),
        ("=", &[Equal], &[NotEqual, Missing]),
        ("!=", &[NotEqual], &[Equal]),
        ("<>", &[NotEqual], &[Equal]),
        (">", &[GreaterThan], &[LessThan, Equal, Missing]),
        (">=", &[GreaterThan, Equal], &[LessThan, Missing]),
        ("≥", &[GreaterThan, Equal], &[LessThan, Missing]),
        ("<", &[LessThan], &[GreaterThan, Equal, Missing]),
        ("<=", &[LessThan, Equal], &[GreaterThan, Missing]),
        ("≤", &[LessThan, Equal], &[GreaterThan, Missing]),
    ];
    PREFIXES.iter().find_map(|(prefix, positive, negative)| {
        let value = parse_number(text.strip_prefix(prefix)?)?;
        let ops = if negated { *negative } else { *positive };
        // Missing is optional: without it the condition is built anyway.
        if !ops
            .iter()
            .filter(|op| **op != Missing)
            .all(|op| column.filter_operators.contains(op))
        {
            return None;
        }
        Some(any(ops
            .iter()
            .filter(|op| column.filter_operators.contains(op))
            .map(|op| {
                let v = if *op == Missing {
                    Value::Null
                } else {
                    value.clone()
                };
                leaf(path, *op, v)
            })
            .collect()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::query::evaluate::matches;
    use crate::datasource::record::{Record, parse_datetime};
    use crate::datasource::schema::RelationSchema;
    use crate::datasource::sql::operators::supported;
    use Operator::*;

    fn column(ty: impl Into<ColumnType>) -> FieldSchema {
        let mut c = ColumnSchema::new(ty);
        c.filter_operators = supported(&c.column_type);
        FieldSchema::Column(c)
    }

    fn schema() -> (CollectionSchema, DataSourceSchema) {
        let mut books = CollectionSchema::new("books");
        books
            .fields
            .insert("id".into(), column(PrimitiveType::Number));
        books
            .fields
            .insert("title".into(), column(PrimitiveType::String));
        let mut status = ColumnSchema::new(PrimitiveType::Enum);
        status.filter_operators = supported(&status.column_type);
        status.enum_values = vec!["Active".into(), "Archived".into()];
        books
            .fields
            .insert("status".into(), FieldSchema::Column(status));
        books
            .fields
            .insert("ref".into(), column(PrimitiveType::Uuid));
        books
            .fields
            .insert("in_stock".into(), column(PrimitiveType::Boolean));
        books
            .fields
            .insert("created_at".into(), column(PrimitiveType::Date));
        books
            .fields
            .insert("day".into(), column(PrimitiveType::Dateonly));
        books
            .fields
            .insert("meta".into(), column(PrimitiveType::Json));
        books
            .fields
            .insert("at".into(), column(PrimitiveType::Time));
        books.fields.insert(
            "tags".into(),
            column(ColumnType::Array(Box::new(PrimitiveType::String.into()))),
        );
        books.fields.insert(
            "author".into(),
            FieldSchema::Relation(RelationSchema::ManyToOne {
                foreign_collection: "authors".into(),
                foreign_key: "author_id".into(),
                foreign_key_target: "id".into(),
            }),
        );
        let mut authors = CollectionSchema::new("authors");
        authors
            .fields
            .insert("id".into(), column(PrimitiveType::Number));
        authors
            .fields
            .insert("first_name".into(), column(PrimitiveType::String));
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("books".into(), books.clone());
        schema.collections.insert("authors".into(), authors);
        (books, schema)
    }

    fn search(text: &str) -> ConditionTree {
        search_ext(text, false)
    }

    fn search_ext(text: &str, extended: bool) -> ConditionTree {
        let (books, schema) = schema();
        let tree =
            build_tree(text, extended, &books, &schema, chrono_tz::Europe::Paris).expect("builds");
        // Whatever the search, the tree is valid for the collection.
        tree.validate(&books, &schema).expect("valid tree");
        tree
    }

    fn l(field: &str, op: Operator, value: impl Into<Value>) -> ConditionTree {
        ConditionTree::leaf(field, op, value)
    }

    fn s(v: &str) -> Value {
        Value::String(v.to_owned())
    }

    fn word(text: &str) -> ConditionTree {
        ConditionTree::or(vec![
            l("title", IContains, text),
            l("tags", IncludesAll, Value::Array(vec![s(text)])),
        ])
    }

    fn not_word(text: &str) -> ConditionTree {
        ConditionTree::and(vec![
            ConditionTree::or(vec![
                l("title", NotIContains, text),
                l("title", Missing, Value::Null),
            ]),
            ConditionTree::or(vec![
                l("tags", IncludesNone, Value::Array(vec![s(text)])),
                l("tags", Missing, Value::Null),
            ]),
        ])
    }

    #[test]
    fn a_word_searches_strings_and_string_arrays() {
        assert_eq!(search("foo"), word("foo"));
        assert_eq!(search("  foo  "), word("foo"));
    }

    #[test]
    fn tokens_are_and_ed_and_or_binds_looser() {
        assert_eq!(
            search("a b"),
            ConditionTree::and(
                vec![word("a"), word("b")]
                    .into_iter()
                    .flat_map(flatten_and)
                    .collect()
            )
        );
        assert_eq!(search("a AND b"), search("a b"));
        assert_eq!(
            search("a OR b"),
            ConditionTree::or(
                vec![word("a"), word("b")]
                    .into_iter()
                    .flat_map(flatten_or)
                    .collect()
            )
        );
        let a_b = search("a b");
        assert_eq!(
            search("a b OR c"),
            ConditionTree::or([vec![a_b.clone()], flatten_or(word("c"))].concat())
        );
        assert_eq!(search("(a b) OR c"), search("a b OR c"));
        assert_eq!(
            search("( a OR b ) c"),
            ConditionTree::and([vec![search("a OR b")], flatten_and(word("c"))].concat())
        );
        assert_eq!(search("(a)"), word("a"));
        // `or` in lower case is a word.
        assert_eq!(search("a or"), search("a AND or"));
    }

    fn flatten_and(tree: ConditionTree) -> Vec<ConditionTree> {
        match tree {
            ConditionTree::Branch {
                aggregator: crate::datasource::Aggregator::And,
                conditions,
            } => conditions,
            other => vec![other],
        }
    }

    fn flatten_or(tree: ConditionTree) -> Vec<ConditionTree> {
        match tree {
            ConditionTree::Branch {
                aggregator: crate::datasource::Aggregator::Or,
                conditions,
            } => conditions,
            other => vec![other],
        }
    }

    #[test]
    fn negation_and_phrases() {
        assert_eq!(search("-foo"), not_word("foo"));
        assert_eq!(search("\"hello world\""), word("hello world"));
        assert_eq!(search("'hello world'"), word("hello world"));
        assert_eq!(search("-\"a b\""), not_word("a b"));
        // An empty phrase is `Equal ""`; tags cannot hold it as a single-item search.
        assert_eq!(
            search("\"\""),
            ConditionTree::or(vec![
                l("title", Equal, ""),
                l("tags", IncludesAll, Value::Array(vec![s("")]))
            ])
        );
        // A quote that is never closed is part of a word.
        assert_eq!(search("don't"), word("don't"));
        assert_eq!(search("\"abc"), word("\"abc"));
    }

    #[test]
    fn numbers_with_and_without_prefixes() {
        assert_eq!(
            search("12"),
            ConditionTree::or(vec![
                l("id", Equal, Value::Int(12)),
                l("title", IContains, "12"),
                l("tags", IncludesAll, Value::Array(vec![s("12")])),
            ])
        );
        // `-5` is minus five, not a negation.
        assert_eq!(
            search("-5"),
            ConditionTree::or(vec![
                l("id", Equal, Value::Int(-5)),
                l("title", IContains, "-5"),
                l("tags", IncludesAll, Value::Array(vec![s("-5")])),
            ])
        );
        assert_eq!(
            search("id:>=5"),
            ConditionTree::or(vec![
                l("id", GreaterThan, Value::Int(5)),
                l("id", Equal, Value::Int(5))
            ])
        );
        assert_eq!(
            search("id:≤5"),
            ConditionTree::or(vec![
                l("id", LessThan, Value::Int(5)),
                l("id", Equal, Value::Int(5))
            ])
        );
        assert_eq!(search("id:<>5"), l("id", NotEqual, Value::Int(5)));
        assert_eq!(
            search("-id:5"),
            ConditionTree::or(vec![
                l("id", NotEqual, Value::Int(5)),
                l("id", Missing, Value::Null)
            ])
        );
        assert_eq!(
            search("-id:>5"),
            ConditionTree::or(vec![
                l("id", LessThan, Value::Int(5)),
                l("id", Equal, Value::Int(5)),
                l("id", Missing, Value::Null)
            ])
        );
        assert_eq!(search("-id:!=5"), l("id", Equal, Value::Int(5)));
        assert_eq!(search("id:2.5"), l("id", Equal, Value::Float(2.5)));
        // Not a number for the id: nothing matches through it, so the targeted search is empty.
        assert_eq!(search("id:abc"), ConditionTree::or(vec![]));
        assert_eq!(search("-id:abc"), ConditionTree::and(vec![]));
    }

    #[test]
    fn fields_are_fuzzy_and_may_cross_relations() {
        assert_eq!(search("title:foo"), l("title", IContains, "foo"));
        assert_eq!(search("TITLE:foo"), l("title", IContains, "foo"));
        assert_eq!(search("in-stock:true"), l("in_stock", Equal, true));
        assert_eq!(search("InStock:0"), l("in_stock", Equal, false));
        assert_eq!(
            search("author.first-name:bob"),
            l("author:first_name", IContains, "bob")
        );
        assert_eq!(search("title:\"a b\""), l("title", IContains, "a b"));
        // Unknown field: the whole `field:value` is searched as text.
        assert_eq!(search("nope:foo"), word("nope:foo"));
    }

    #[test]
    fn groups_nest_up_to_the_bound_and_deeper_input_is_a_validation_error() {
        let nested = |depth: usize| format!("{}a{}", "(".repeat(depth), ")".repeat(depth));
        assert_eq!(search(&nested(MAX_SEARCH_DEPTH)), word("a"));
        let (books, schema) = schema();
        // The probe: 3,000 levels overflowed a worker's stack and aborted the server.
        for depth in [MAX_SEARCH_DEPTH + 1, 3_000, 100_000] {
            let result = build_tree(&nested(depth), false, &books, &schema, chrono_tz::UTC);
            assert!(
                matches!(&result, Err(Error::Validation(m)) if m.contains("32 levels")),
                "{depth}: {result:?}"
            );
        }
        // Unbalanced too: the bound is checked as groups open.
        let open = "(".repeat(5_000);
        let result = build_tree(&open, false, &books, &schema, chrono_tz::UTC);
        assert!(matches!(result, Err(Error::Validation(_))), "{result:?}");
    }

    #[test]
    fn unparsable_input_is_searched_as_plain_text() {
        assert_eq!(search("foo:"), word("foo:"));
        assert_eq!(search("a OR"), word("a OR"));
        assert_eq!(search("(a b"), word("(a b"));
        assert_eq!(search("a:b:c"), word("a:b:c"));
        assert_eq!(search("- a"), word("- a"));
    }

    #[test]
    fn typed_columns() {
        assert_eq!(
            search("ARCHIVED"),
            ConditionTree::or(vec![
                l("title", IContains, "ARCHIVED"),
                l("status", Equal, "Archived"),
                l("tags", IncludesAll, Value::Array(vec![s("ARCHIVED")])),
            ])
        );
        assert_eq!(
            search("-status:active"),
            ConditionTree::or(vec![
                l("status", NotEqual, "Active"),
                l("status", Missing, Value::Null)
            ])
        );
        let id = "6f9619ff-8b86-d011-b42d-00c04fc964ff";
        assert_eq!(
            search(&format!("ref:{id}")),
            l(
                "ref",
                Equal,
                Value::Uuid(::uuid::Uuid::parse_str(id).expect("uuid"))
            )
        );
        assert_eq!(
            search("true"),
            ConditionTree::or(vec![
                l("title", IContains, "true"),
                l("in_stock", Equal, true),
                l("tags", IncludesAll, Value::Array(vec![s("true")])),
            ])
        );
        // Json and Time columns are never searched, even when targeted.
        assert_eq!(search("meta:x"), ConditionTree::or(vec![]));
        assert_eq!(search("at:10:00"), word("at:10:00"));
    }

    #[test]
    fn null_means_missing() {
        let tree = search("title:NULL");
        assert_eq!(tree, l("title", Missing, Value::Null));
        assert_eq!(search("-title:NULL"), l("title", Present, Value::Null));
        // Every column supports Missing, Json included.
        let ConditionTree::Branch { conditions, .. } = search("NULL") else {
            panic!("a branch")
        };
        assert_eq!(conditions.len(), 10);
    }

    #[test]
    fn dates_are_periods_in_the_callers_timezone() {
        let d = |s: &str| Value::Dateonly(NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date"));
        let t = |s: &str| Value::Date(parse_datetime(s).expect("date"));
        // Paris is UTC+1 in February.
        assert_eq!(
            search("created_at:2024-02"),
            ConditionTree::and(vec![
                ConditionTree::or(vec![
                    l("created_at", Equal, t("2024-01-31T23:00:00Z")),
                    l("created_at", After, t("2024-01-31T23:00:00Z"))
                ]),
                l("created_at", Before, t("2024-02-29T23:00:00Z")),
            ])
        );
        assert_eq!(
            search("day:2024"),
            ConditionTree::and(vec![
                ConditionTree::or(vec![
                    l("day", Equal, d("2024-01-01")),
                    l("day", After, d("2024-01-01"))
                ]),
                l("day", Before, d("2025-01-01")),
            ])
        );
        assert_eq!(
            search("-day:2024-02-28"),
            ConditionTree::or(vec![
                l("day", Before, d("2024-02-28")),
                l("day", Equal, d("2024-02-29")),
                l("day", After, d("2024-02-29")),
                l("day", Missing, Value::Null),
            ])
        );
        assert_eq!(search("day:<2024-3"), l("day", Before, d("2024-03-01")));
        assert_eq!(search("day:<=2024-3"), l("day", Before, d("2024-04-01")));
        assert_eq!(
            search("day:>2024"),
            ConditionTree::or(vec![
                l("day", Equal, d("2025-01-01")),
                l("day", After, d("2025-01-01"))
            ])
        );
        assert_eq!(
            search("-day:>2024"),
            ConditionTree::or(vec![
                l("day", Before, d("2025-01-01")),
                l("day", Missing, Value::Null)
            ])
        );
        // Not dates.
        assert_eq!(search("day:2024-13"), ConditionTree::or(vec![]));
        assert_eq!(search("day:1700"), ConditionTree::or(vec![]));
        assert_eq!(search("day:2024-02-30"), ConditionTree::or(vec![]));
        // A year is also a number and a string.
        let ConditionTree::Branch { conditions, .. } = search("2024") else {
            panic!("a branch")
        };
        assert_eq!(conditions.len(), 5);
    }

    #[test]
    fn extended_search_adds_to_one_relation_columns() {
        assert_eq!(
            search_ext("bob", true),
            ConditionTree::or(vec![
                l("title", IContains, "bob"),
                l("tags", IncludesAll, Value::Array(vec![s("bob")])),
                l("author:first_name", IContains, "bob"),
            ])
        );
    }

    #[test]
    fn nothing_searchable_matches_nothing() {
        let mut only_json = CollectionSchema::new("blobs");
        only_json
            .fields
            .insert("meta".into(), column(PrimitiveType::Json));
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("blobs".into(), only_json.clone());
        let tree = build_tree("x", false, &only_json, &schema, chrono_tz::UTC).expect("builds");
        assert_eq!(tree, ConditionTree::or(vec![]));
        let mut record = Record::new();
        record.insert("meta", Value::Json(serde_json::json!({"x": 1})));
        assert!(
            !matches(
                &tree,
                &record,
                &only_json,
                &schema,
                chrono_tz::UTC,
                Utc::now()
            )
            .expect("ok")
        );
        let tree = build_tree("-x", false, &only_json, &schema, chrono_tz::UTC).expect("builds");
        assert!(
            matches(
                &tree,
                &record,
                &only_json,
                &schema,
                chrono_tz::UTC,
                Utc::now()
            )
            .expect("ok")
        );
    }

    #[test]
    fn search_trees_evaluate_as_expected() {
        let (books, schema) = schema();
        let mut a = Record::new();
        a.insert("id", Value::Int(1));
        a.insert("title", s("Dune 50% off"));
        a.set_path("author:first_name", s("Frank"));
        let mut b = Record::new();
        b.insert("id", Value::Int(2));
        b.insert("title", Value::Null);
        let run = |text: &str, r: &Record| {
            let tree = build_tree(text, true, &books, &schema, chrono_tz::UTC).expect("builds");
            matches(&tree, r, &books, &schema, chrono_tz::UTC, Utc::now()).expect("evaluates")
        };
        assert!(run("dune", &a));
        assert!(!run("dune", &b));
        assert!(!run("-dune", &a));
        assert!(run("-dune", &b), "a NULL title is not 'dune'");
        assert!(run("50%", &a));
        assert!(!run("5%0", &a), "% is literal");
        assert!(run("frank OR nothing", &a));
        assert!(!run("frank nothing", &a));
        assert!(run("2", &b));
        assert!(run("id:<2", &a));
        assert!(!run("-id:<2", &a));
    }
}
