//! The datasource layer's one error type. The HTTP layer maps each variant to a status and the
//! agent's public error name; nothing here knows about HTTP.

use std::fmt;

/// Everything a datasource call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed for this schema: unknown field, operator not allowed for the
    /// column type, value of the wrong type, unsortable field, bad id. (agent: `ValidationError`, 400)
    #[error("{0}")]
    Validation(String),
    /// A field name that the collection does not have, with the agent's message listing the
    /// available fields ([`Error::missing_field`]). (agent: `MissingFieldError`, 400)
    #[error("{0}")]
    MissingField(String),
    /// A relation name that the collection does not have, with the agent's message listing the
    /// available relations ([`Error::missing_relation`]). (agent: `MissingRelationError`, 400)
    #[error("{0}")]
    MissingRelation(String),
    /// A collection name that the datasource does not serve. (agent: `MissingCollectionError`, 400)
    #[error("Collection '{0}' not found.")]
    MissingCollection(String),
    /// The operation is refused by the data itself: a write to a view or to a table without a
    /// primary key, a native query that is not a single SELECT. (agent: `UnprocessableError`, 422)
    #[error("{0}")]
    Unprocessable(String),
    /// A customization refused the caller (`throwForbiddenError`, extended search on a collection
    /// with a search handler). (agent: `ForbiddenError`, 403)
    #[error("{0}")]
    Forbidden(String),
    /// The collection has no primary key, so records cannot be addressed. (agent: `NoPrimaryKeyError`, 422)
    #[error("This collection has no primary key")]
    NoPrimaryKey,
    /// A write broke a database constraint; mapped by `DatabaseError::kind()`, never by message.
    #[error("{0}")]
    Constraint(ConstraintViolation),
    /// Connection, introspection or query failure that the caller cannot fix. Its details are
    /// logged, never sent to clients.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A plugin failed (trap: time or memory limit, panic; or malformed output). Answered as a
    /// 500 whose message names the plugin, so the admin knows which one to fix.
    #[error("{0}")]
    Plugin(String),
    /// A programming error inside Canopy; logged, answered as a 500.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The kinds of constraint failures the agent reports with a dedicated message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintViolation {
    Unique,
    ForeignKeyOnWrite,
    ForeignKeyOnDelete,
    NotNull,
    Check,
}

impl fmt::Display for ConstraintViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The agent's wording (datasource-sequelize `error-handler.ts`), kept so clients see the same text.
        f.write_str(match self {
            Self::Unique => {
                "The query violates a unicity constraint in the database. Please ensure that you are not duplicating information across records."
            }
            Self::ForeignKeyOnWrite => {
                "The query violates a foreign key constraint in the database. Please ensure that you are not linking to a relation which was deleted."
            }
            Self::ForeignKeyOnDelete => {
                "The query violates a foreign key constraint in the database. Please ensure that no records are linked to the one that you wish to delete."
            }
            Self::NotNull => "The query violates a not-null constraint in the database.",
            Self::Check => "The query violates a check constraint in the database.",
        })
    }
}

impl Error {
    /// Shorthand for a validation error with a formatted message.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::Validation(message.into())
    }

    /// `field` is not a field of `collection`, which has `available` (the agent's wording, its
    /// list written as JavaScript prints an array).
    pub fn missing_field<'a>(
        collection: &str,
        field: &str,
        available: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self::MissingField(missing_element("field", collection, field, available))
    }

    /// `relation` is not a relation of `collection`, which has `available`.
    pub fn missing_relation<'a>(
        collection: &str,
        relation: &str,
        available: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self::MissingRelation(missing_element("relation", collection, relation, available))
    }
}

/// The agent's `buildMessageMissingElement`.
fn missing_element<'a>(
    kind: &str,
    collection: &str,
    name: &str,
    available: impl IntoIterator<Item = &'a str>,
) -> String {
    let available: Vec<&str> = available.into_iter().collect();
    format!(
        "The '{collection}.{name}' {kind} was not found. Available {kind}s are: [{}]. \
         Please check if the {kind} name is correct.",
        available.join(",")
    )
}

/// Result alias of the datasource layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
