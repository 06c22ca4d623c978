//! SQL type strings → (SqlKind, ColumnType): the ordered converter of the agent's SQL datasource
//! (§14.3), ported rule by rule with its quirks, because they are observable in the schema
//! (`interval` is a Number, `bit(1)` a Boolean, MariaDB `json` a String, `timetz` is skipped…).

use std::sync::LazyLock;

use regex::Regex;

use super::dialect::Dialect;
use super::model::SqlKind;
use crate::datasource::schema::{ColumnType, PrimitiveType, Wire};

/// The converter's intermediate "sub-type" (a Sequelize data type in the reference), kept as a
/// separate step so that each rule of the table maps to exactly one line below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubType {
    Json,
    Boolean,
    Text,
    String,
    Blob,
    Uuid,
    Jsonb,
    Integer,
    /// `SERIAL`, `BIGSERIAL` as declared types.
    Number,
    BigInt,
    Float,
    Real,
    Decimal,
    Double,
    DateOnly,
    Date,
    Time,
    /// PostgreSQL `inet`: kept by the reference's introspection, dropped later.
    Inet,
}

/// Why a column is left out of the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// No rule matches the type string.
    Unsupported,
    /// PostgreSQL `inet` (the reference drops it one step later, with another message).
    Inet,
}

/// Applies the ordered rules (first match wins, case-insensitive) to a scalar type string.
/// `ARRAY` and enums are handled by the callers before this, as rule 0 of the table.
pub fn sub_type(type_string: &str) -> Option<SubType> {
    let u = type_string.trim().to_ascii_uppercase();
    let u = u.as_str();
    let sub = match u {
        "JSON" => SubType::Json,
        "BIT(1)" | "TINYINT(1)" | "BIT" | "BOOLEAN" => SubType::Boolean,
        "TEXT" => SubType::Text,
        "CHARACTER VARYING" | "NTEXT" | "NVARCHAR" => SubType::String,
        _ if u.contains("TEXT") || u.contains("VARCHAR") || u.contains("CHAR") => SubType::String,
        "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" | "BYTEA" => SubType::Blob,
        _ if u.starts_with("VARBINARY") || u.starts_with("BINARY") => SubType::Blob,
        "UNIQUEIDENTIFIER" | "UUID" => SubType::Uuid,
        "JSONB" => SubType::Jsonb,
        "INTEGER" => SubType::Integer,
        // `INT` also catches PostgreSQL `interval`: the reference exposes it as a Number.
        _ if ["INT", "SMALLINT", "TINYINT", "MEDIUMINT"]
            .iter()
            .any(|p| u.starts_with(p)) =>
        {
            SubType::Integer
        }
        "SERIAL" | "BIGSERIAL" => SubType::Number,
        _ if u.starts_with("BIGINT") => SubType::BigInt,
        _ if u.contains("FLOAT") => SubType::Float,
        "REAL" => SubType::Real,
        _ if u.starts_with("NUMERIC") || u.contains("DECIMAL") => SubType::Decimal,
        "DOUBLE" | "DOUBLE PRECISION" => SubType::Double,
        "DATE" => SubType::DateOnly,
        _ if u.starts_with("DATETIME") || u.starts_with("TIMESTAMP") => SubType::Date,
        "TIME" | "TIME WITHOUT TIME ZONE" => SubType::Time,
        "INET" => SubType::Inet,
        _ => return None,
    };
    Some(sub)
}

/// Converts a scalar type string of `dialect` into the driver kind and the Forest column type.
pub fn scalar(dialect: Dialect, type_string: &str) -> Result<(SqlKind, ColumnType), Skip> {
    use PrimitiveType as P;
    let sub = sub_type(type_string).ok_or(Skip::Unsupported)?;
    let u = type_string.trim().to_ascii_uppercase();
    let postgres = dialect == Dialect::Postgres;
    let (kind, primitive) = match sub {
        SubType::Json => (SqlKind::Json, P::Json),
        SubType::Jsonb => (SqlKind::Jsonb, P::Json),
        // PostgreSQL bit(1) travels as text '0'/'1'; MySQL bit(1)/tinyint(1) as integers.
        SubType::Boolean if postgres && u.starts_with("BIT") => (SqlKind::Bit, P::Boolean),
        SubType::Boolean => (SqlKind::Bool, P::Boolean),
        SubType::Text | SubType::String => (SqlKind::Text, P::String),
        SubType::Blob => (SqlKind::Binary, P::Binary),
        SubType::Uuid => (SqlKind::Uuid, P::Uuid),
        SubType::Integer if postgres && u.starts_with("INTERVAL") => (SqlKind::Interval, P::Number),
        SubType::Integer | SubType::Number | SubType::BigInt => (SqlKind::Int, P::Number),
        SubType::Float | SubType::Real | SubType::Double => (SqlKind::Float, P::Number),
        SubType::Decimal => (SqlKind::Decimal, P::Number),
        SubType::DateOnly => (SqlKind::Date, P::Dateonly),
        SubType::Date if postgres && !u.contains("WITH TIME ZONE") => {
            (SqlKind::NaiveTimestamp, P::Date)
        }
        SubType::Date => (SqlKind::Timestamp, P::Date),
        SubType::Time => (SqlKind::Time, P::Time),
        SubType::Inet => return Err(Skip::Inet),
    };
    Ok((kind, ColumnType::Primitive(primitive)))
}

/// The database server behind a connection. MySQL and MariaDB share a dialect, but the Node
/// agent reaches them through different drivers, which return decimals differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Postgres,
    MySql,
    MariaDb,
    Sqlite,
}

/// The wire form of a column's values from its kind and scalar type string (an array's element
/// type), as the Node agent's drivers return them (§14.4): bigint as a string on PostgreSQL,
/// MySQL and MariaDB; decimal as a string keeping its scale on PostgreSQL and MySQL, as a number
/// on MariaDB; binary as a data URI. SQLite returns numbers.
pub fn wire(server: Server, kind: &SqlKind, type_string: &str) -> Wire {
    match (kind, server) {
        (SqlKind::Array(element), _) => wire(server, element, type_string),
        (SqlKind::Binary, _) => Wire::DataUri,
        (_, Server::Sqlite) => Wire::Plain,
        (SqlKind::Int, _) if sub_type(type_string) == Some(SubType::BigInt) => Wire::NumberString,
        (SqlKind::Decimal, Server::Postgres | Server::MySql) => Wire::NumberString,
        (SqlKind::Decimal, Server::MariaDb) => Wire::Number,
        _ => Wire::Plain,
    }
}

/// The kind and type of an enum column (PostgreSQL enum type, MySQL `enum(...)`).
pub fn enumeration() -> (SqlKind, ColumnType) {
    (SqlKind::Enum, ColumnType::Primitive(PrimitiveType::Enum))
}

/// The kind and type of a PostgreSQL array of `element`.
pub fn array((kind, column_type): (SqlKind, ColumnType)) -> (SqlKind, ColumnType) {
    (
        SqlKind::Array(Box::new(kind)),
        ColumnType::Array(Box::new(column_type)),
    )
}

/// Logs a skipped column the way the reference does, so operators recognise the message.
pub fn warn_skipped(table: &str, column: &str, type_string: &str, skip: Skip) {
    match skip {
        Skip::Unsupported => {
            tracing::warn!("Skipping column {table}.{column} (Unsupported type: {type_string})");
        }
        Skip::Inet => tracing::warn!(
            "Skipping column '{table}.{column}' (Unsupported data type: \"{}\")",
            type_string.to_ascii_uppercase()
        ),
    }
}

/// Whether a type string is an enum declaration (`enum('a','b')`, any case).
pub fn is_enum_declaration(type_string: &str) -> bool {
    static ENUM: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?is)^\s*enum\s*\(.*\)\s*$").ok());
    ENUM.as_ref().is_some_and(|re| re.is_match(type_string))
}

/// The values of a MySQL `enum('a','b')` column type, in declaration order. Quotes are doubled
/// (`''`) or backslash-escaped (`\x` → `x`) inside a value.
pub fn mysql_enum_values(type_string: &str) -> Option<Vec<String>> {
    let open = type_string.find('(')?;
    let close = type_string.rfind(')')?;
    let inner = type_string.get(open + 1..close)?;
    let mut values = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        // Between values: spaces and commas.
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        match chars.next() {
            None => break,
            Some('\'') => {}
            Some(_) => return None,
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => value.push(chars.next()?),
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    value.push('\'');
                }
                '\'' => break,
                c => value.push(c),
            }
        }
        values.push(value);
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forest(dialect: Dialect, ty: &str) -> Option<String> {
        scalar(dialect, ty)
            .ok()
            .map(|(_, t)| t.to_json().to_string().trim_matches('"').to_owned())
    }

    #[test]
    fn postgres_types_follow_the_ordered_rules() {
        let pg = Dialect::Postgres;
        for (ty, expected) in [
            ("smallint", Some("Number")),
            ("integer", Some("Number")),
            ("bigint", Some("Number")),
            ("numeric", Some("Number")),
            ("real", Some("Number")),
            ("double precision", Some("Number")),
            ("interval", Some("Number")),
            ("boolean", Some("Boolean")),
            ("bit(1)", Some("Boolean")),
            ("bit(3)", None),
            ("bit varying(5)", None),
            ("text", Some("String")),
            ("character varying(255)", Some("String")),
            ("character varying", Some("String")),
            ("character(2)", Some("String")),
            ("uuid", Some("Uuid")),
            ("json", Some("Json")),
            ("jsonb", Some("Json")),
            ("date", Some("Dateonly")),
            ("timestamp without time zone", Some("Date")),
            ("timestamp with time zone", Some("Date")),
            ("time without time zone", Some("Time")),
            ("time with time zone", None),
            ("bytea", Some("Binary")),
            ("money", None),
            ("cidr", None),
            ("macaddr", None),
            ("point", None),
            ("xml", None),
            ("tsvector", None),
            ("hstore", None),
            ("inet", None),
        ] {
            assert_eq!(forest(pg, ty).as_deref(), expected, "{ty}");
        }
        assert_eq!(scalar(pg, "inet"), Err(Skip::Inet));
        assert_eq!(scalar(pg, "interval").map(|k| k.0), Ok(SqlKind::Interval));
        assert_eq!(scalar(pg, "bit(1)").map(|k| k.0), Ok(SqlKind::Bit));
        assert_eq!(
            scalar(pg, "timestamp without time zone").map(|k| k.0),
            Ok(SqlKind::NaiveTimestamp)
        );
        assert_eq!(
            scalar(pg, "timestamp with time zone").map(|k| k.0),
            Ok(SqlKind::Timestamp)
        );
        assert_eq!(scalar(pg, "jsonb").map(|k| k.0), Ok(SqlKind::Jsonb));
        assert_eq!(scalar(pg, "json").map(|k| k.0), Ok(SqlKind::Json));
        assert_eq!(scalar(pg, "numeric").map(|k| k.0), Ok(SqlKind::Decimal));
    }

    #[test]
    fn mysql_types_follow_the_ordered_rules() {
        let my = Dialect::MySql;
        for (ty, expected) in [
            ("TINYINT(1)", Some("Boolean")),
            ("BOOLEAN", Some("Boolean")),
            ("BIT(1)", Some("Boolean")),
            ("TINYINT(4)", Some("Number")),
            ("INT(11)", Some("Number")),
            ("INT UNSIGNED", Some("Number")),
            ("MEDIUMINT", Some("Number")),
            ("BIGINT(20) UNSIGNED", Some("Number")),
            ("DECIMAL(10,2)", Some("Number")),
            ("FLOAT", Some("Number")),
            ("DOUBLE", Some("Number")),
            ("DOUBLE UNSIGNED", None),
            ("CHAR(36)", Some("String")),
            ("VARCHAR(255)", Some("String")),
            ("MEDIUMTEXT", Some("String")),
            ("LONGTEXT", Some("String")),
            ("TEXT", Some("String")),
            ("JSON", Some("Json")),
            ("DATE", Some("Dateonly")),
            ("DATETIME", Some("Date")),
            ("DATETIME(3)", Some("Date")),
            ("TIMESTAMP", Some("Date")),
            ("TIME", Some("Time")),
            ("TIME(3)", None),
            ("BLOB", Some("Binary")),
            ("BINARY(16)", Some("Binary")),
            ("VARBINARY(10)", Some("Binary")),
            ("UUID", Some("Uuid")),
            ("YEAR", None),
            ("BIT(8)", None),
            ("POINT", None),
            ("GEOMETRY", None),
        ] {
            assert_eq!(forest(my, ty).as_deref(), expected, "{ty}");
        }
        assert_eq!(scalar(my, "DATETIME").map(|k| k.0), Ok(SqlKind::Timestamp));
        assert_eq!(scalar(my, "BIT(1)").map(|k| k.0), Ok(SqlKind::Bool));
    }

    #[test]
    fn sqlite_declared_types() {
        let lite = Dialect::Sqlite;
        for (ty, expected) in [
            ("INTEGER", Some("Number")),
            ("int", Some("Number")),
            ("BIGINT", Some("Number")),
            ("REAL", Some("Number")),
            ("DOUBLE", Some("Number")),
            ("NUMERIC", Some("Number")),
            ("DECIMAL(10,2)", Some("Number")),
            ("FLOAT", Some("Number")),
            ("BOOLEAN", Some("Boolean")),
            ("TINYINT(1)", Some("Boolean")),
            ("DATE", Some("Dateonly")),
            ("DATETIME", Some("Date")),
            ("TIMESTAMP", Some("Date")),
            ("TIME", Some("Time")),
            ("BLOB", Some("Binary")),
            ("JSON", Some("Json")),
            ("UUID", Some("Uuid")),
            ("TEXT", Some("String")),
            ("VARCHAR(20)", Some("String")),
            ("", None),
            ("CLOB", None),
        ] {
            assert_eq!(forest(lite, ty).as_deref(), expected, "{ty}");
        }
        assert_eq!(
            scalar(lite, "DATETIME").map(|k| k.0),
            Ok(SqlKind::Timestamp)
        );
    }

    #[test]
    fn mysql_enum_declarations() {
        assert!(is_enum_declaration("enum('a','b')"));
        assert!(is_enum_declaration("ENUM('a')"));
        assert!(!is_enum_declaration("varchar(3)"));
        assert_eq!(
            mysql_enum_values("enum('a','b c','it''s','back\\\\slash','q\\'x','')"),
            Some(vec![
                "a".to_owned(),
                "b c".to_owned(),
                "it's".to_owned(),
                "back\\slash".to_owned(),
                "q'x".to_owned(),
                String::new(),
            ])
        );
        assert_eq!(
            mysql_enum_values("enum('a,b','c)')"),
            Some(vec!["a,b".to_owned(), "c)".to_owned()])
        );
    }

    #[test]
    fn wire_forms_follow_the_node_drivers() {
        use Server::*;
        for (server, ty, expected) in [
            (Postgres, "bigint", Wire::NumberString),
            (Postgres, "numeric", Wire::NumberString),
            (Postgres, "numeric(10,2)", Wire::NumberString),
            (Postgres, "integer", Wire::Plain),
            (Postgres, "interval", Wire::Plain),
            (Postgres, "double precision", Wire::Plain),
            (Postgres, "bit(1)", Wire::Plain),
            (Postgres, "bytea", Wire::DataUri),
            (MySql, "BIGINT(20)", Wire::NumberString),
            (MySql, "BIGINT UNSIGNED", Wire::NumberString),
            (MySql, "DECIMAL(10,2)", Wire::NumberString),
            (MySql, "INT(11)", Wire::Plain),
            (MariaDb, "BIGINT(20)", Wire::NumberString),
            (MariaDb, "DECIMAL(10,2)", Wire::Number),
            (MariaDb, "VARBINARY(16)", Wire::DataUri),
            (MariaDb, "LONGBLOB", Wire::DataUri),
            (Sqlite, "BIGINT", Wire::Plain),
            (Sqlite, "DECIMAL(10,2)", Wire::Plain),
            (Sqlite, "BLOB", Wire::DataUri),
            (Sqlite, "TEXT", Wire::Plain),
        ] {
            let dialect = match server {
                Postgres => Dialect::Postgres,
                MySql | MariaDb => Dialect::MySql,
                Sqlite => Dialect::Sqlite,
            };
            let (kind, _) = scalar(dialect, ty).expect("a supported type");
            assert_eq!(wire(server, &kind, ty), expected, "{server:?} {ty}");
        }
        // Arrays take their element's form; enums never look like numbers.
        let (kind, _) = array(scalar(Dialect::Postgres, "bigint").expect("bigint"));
        assert_eq!(wire(Postgres, &kind, "bigint"), Wire::NumberString);
        let (kind, _) = enumeration();
        assert_eq!(wire(MySql, &kind, "enum('decimal')"), Wire::Plain);
    }
}
