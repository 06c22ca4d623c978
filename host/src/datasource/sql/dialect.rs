//! SQL dialects: identifier quoting and parameter placeholders.

/// The SQL flavours Canopy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    Postgres,
    /// MySQL and MariaDB.
    MySql,
    Sqlite,
}

impl Dialect {
    /// Quotes an identifier. Identifiers only ever come from the introspected schema; quoting
    /// doubles the quote character so that even a hostile table name cannot end the identifier.
    pub fn quote(self, identifier: &str) -> String {
        let q = match self {
            Self::Postgres | Self::Sqlite => '"',
            Self::MySql => '`',
        };
        let mut out = String::with_capacity(identifier.len() + 2);
        out.push(q);
        for c in identifier.chars() {
            if c == q {
                out.push(q);
            }
            out.push(c);
        }
        out.push(q);
        out
    }

    /// The placeholder for the n-th bound parameter (1-based).
    pub fn placeholder(self, n: usize) -> String {
        match self {
            Self::Postgres => format!("${n}"),
            Self::MySql | Self::Sqlite => "?".to_owned(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::MySql => "mysql",
            Self::Sqlite => "sqlite",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_the_quote_character() {
        assert_eq!(Dialect::Postgres.quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(Dialect::MySql.quote("a`b"), "`a``b`");
        assert_eq!(Dialect::Sqlite.quote("with space"), "\"with space\"");
    }
}
