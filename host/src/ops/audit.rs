//! A record's history in the audit trail (`auditTrail`): who changed what, with the values
//! before and after. `/_audit-trail/{collection}/{id}` and the console's History tab read it
//! here, through the same checks.
//!
//! Reading a record's trail asks `read` on the collection. With a scope, a record that still
//! exists outside it is a 404, as in the agent; a record gone entirely has no values left to
//! check the scope against, so its history is served, but with the recorded values withheld
//! (docs/compatibility.md). [`open`] makes those checks once and hands back a [`Trail`], the
//! only way to [`history`].

use serde_json::Map;

use crate::agent;
use crate::agent::query_string::match_ids;
use crate::auth::CollectionRight;
use crate::datasource::{Caller, CollectionSchema, ConditionTree, Filter, Projection, unpack_id};
use crate::platform::audit::{AuditRecord, AuditStore, AuditUser, HistoryQuery, Order};

use super::{Error, Ops, Result, permission, served};

/// The agent's message for a record out of the caller's reach.
pub const NOT_FOUND: &str = "Record does not exists";

/// One record's trail, opened for a caller who may read it.
pub struct Trail<'a> {
    store: &'a AuditStore,
    collection: String,
    record_id: String,
    /// The record is gone and a scope applies: its recorded values are not shown.
    withheld: bool,
}

/// A page of a record's history.
pub struct History {
    pub entries: Vec<AuditRecord>,
    /// How many entries match, all pages.
    pub count: i64,
    /// The entries' authors, when asked for.
    pub authors: Option<Vec<AuditUser>>,
}

/// The audit trail's store; `NotFound` when the trail is off (its routes are not served).
pub fn store(ops: &Ops) -> Result<&AuditStore> {
    ops.audit.as_deref().ok_or(Error::NotFound)
}

/// A failure of the audit database: a 500 whose detail is only logged.
pub fn storage(error: &crate::platform::Error) -> Error {
    crate::datasource::Error::Internal(format!("audit trail: {error}")).into()
}

/// Opens the trail of `collection`'s record `id` for `caller`: the trail is on, the caller has
/// `read` on the collection, and the record is within their scope (or gone).
pub async fn open<'a>(
    ops: &'a Ops,
    caller: &Caller,
    collection: &str,
    id: &str,
) -> Result<Trail<'a>> {
    let store = store(ops)?;
    let schema = readable(ops, caller, collection).await?;
    let scope = permission::scope(ops, caller, schema).await?;
    let withheld = visibility(ops, caller, schema, id, &scope).await?;
    Ok(Trail {
        store,
        collection: collection.to_owned(),
        record_id: id.to_owned(),
        withheld,
    })
}

/// A page of the trail's history: `filters` narrow it (their collection and record are the
/// trail's), `skip` and `limit` page it, `authors` adds the list of the entries' authors.
pub async fn history(
    trail: &Trail<'_>,
    mut filters: HistoryQuery,
    order: Order,
    skip: u64,
    limit: u64,
    authors: bool,
) -> Result<History> {
    filters.collection.clone_from(&trail.collection);
    filters.record_id.clone_from(&trail.record_id);
    let mut entries = trail
        .store
        .history(&filters, order, skip, Some(limit))
        .await
        .map_err(|e| storage(&e))?;
    let count = trail.store.count(&filters).await.map_err(|e| storage(&e))?;
    if trail.withheld {
        for entry in &mut entries {
            withhold(entry);
        }
    }
    let authors = if authors {
        Some(
            trail
                .store
                .authors(&filters)
                .await
                .map_err(|e| storage(&e))?,
        )
    } else {
        None
    };
    Ok(History {
        entries,
        count,
        authors,
    })
}

/// The values of an entry of a record that no longer exists, for a caller with a scope: the
/// scope cannot be checked against a record that is gone, so the values are not shown; that the
/// change happened, by whom and when, is.
fn withhold(entry: &mut AuditRecord) {
    if matches!(entry.operation.as_str(), "create" | "update" | "delete") {
        entry.previous_values = Map::new();
        entry.new_values = Map::new();
    }
}

/// The collection `name`, with `read` asked on it.
pub async fn readable<'a>(
    ops: &'a Ops,
    caller: &Caller,
    name: &str,
) -> Result<&'a CollectionSchema> {
    let schema = served(ops.schema(), name)?;
    ops.permissions
        .can(caller, name, CollectionRight::Read)
        .await?;
    Ok(schema)
}

/// Whether the record `id` exists within `scope` (any record when `None`).
pub async fn exists(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    id: &str,
    scope: Option<ConditionTree>,
) -> Result<bool> {
    let filter = Filter::new(ConditionTree::intersect([
        Some(match_ids(schema, &[unpack_id(schema, id)?])?),
        scope,
    ]));
    let keys = Projection::new(schema.primary_keys());
    let records = ops
        .datasource
        .collection(&schema.name)?
        .list(caller, &filter, &keys)
        .await?;
    Ok(!records.is_empty())
}

/// What a caller may see of a record's trail (`checkRecordVisibility`): `Err` 404 when the
/// record exists outside the caller's scope; `Ok(true)` when it exists nowhere any more while a
/// scope applies (its recorded values are then withheld).
pub async fn visibility(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    id: &str,
    scope: &Option<ConditionTree>,
) -> Result<bool> {
    let Some(scope) = scope else { return Ok(false) };
    if exists(ops, caller, schema, id, Some(scope.clone())).await? {
        return Ok(false);
    }
    if exists(ops, caller, schema, id, None).await? {
        return Err(agent::Error::NotFound(NOT_FOUND.to_owned()).into());
    }
    Ok(true)
}
