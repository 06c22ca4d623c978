//! The audit trail's layer (the Node agent's `internalHook`, position 16): every create, update
//! and delete that reaches the datasource through the stack — from the routes, from the hooks
//! above, and from actions, whose context writes through the layer just below `action` — leaves
//! one audit entry per record with the values before and after, the user and the request's
//! correlation id.
//!
//! Each write is recorded in two phases, as the agent does: a `pending` entry is written
//! *before* the change runs (with the values before it), then confirmed `done` with the values
//! the change produced. Recording first is what lets a broken audit store refuse the change
//! (`critical`, Canopy's default) instead of failing after it committed; an entry left `pending`
//! is the evidence of a change attempted and never confirmed. The audit store is another
//! database than the data (or another connection of it), so the entry and the change can never
//! share a transaction: this order is the guarantee instead.
//!
//! The layer only exists when the trail is on (`StackOptions::audit`); reading the values
//! before an update or delete costs one list on the same filter, which nothing pays otherwise.
//! Where the entries go is the `AuditRecorder`'s business (`platform::audit` implements it).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use super::stack::{Decorator, Layer, decorated};
use crate::agent::wire;
use crate::datasource::{
    Caller, Collection, CollectionSchema, ConditionTree, DataSource, Error, Filter, Operator, Page,
    Projection, Record, Result, Value,
};

/// The most records one update or delete may audit, as in the agent: a bulk change past it is
/// refused when the trail is critical, else audited for its first records with a warning.
pub const MAX_SNAPSHOT_RECORDS: usize = 1000;

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOperation {
    Create,
    Update,
    Delete,
    /// An action ran on the record (`action_audit`): the entry names it and holds its form.
    Action,
}

impl AuditOperation {
    /// The stored and served name (`create`, `update`, `delete`, `action`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Action => "action",
        }
    }
}

/// An audit entry as known before the change runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEntry {
    /// Finds the entry again to confirm it (a UUID v7: unique without a round trip).
    pub key: Uuid,
    /// Unix milliseconds.
    pub timestamp: i64,
    pub operation: AuditOperation,
    pub collection: String,
    /// The packed id; `None` for a create, whose id the datasource has not given yet.
    pub record_id: Option<String>,
    pub user_id: i64,
    pub user_first_name: String,
    pub user_last_name: String,
    pub user_email: String,
    /// The request's correlation id (`x-forest-correlation-id`).
    pub correlation_key: String,
    /// The action's name, for an [`AuditOperation::Action`] entry.
    pub action_name: Option<String>,
    pub previous_values: Map<String, Json>,
}

/// What confirming an entry sets, once the change resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    pub record_id: String,
    pub previous_values: Map<String, Json>,
    pub new_values: Map<String, Json>,
}

/// Where audit entries are written.
#[async_trait]
pub trait AuditRecorder: Send + Sync + 'static {
    /// Writes `entries` as `pending`, all or none.
    async fn insert_pending(&self, entries: &[PendingEntry]) -> Result<()>;
    /// Marks the entry `key` `done` with what the change produced.
    async fn confirm(&self, key: Uuid, confirmation: &Confirmation) -> Result<()>;
}

/// The audit trail as the stack applies it.
#[derive(Clone)]
pub struct AuditTrail {
    pub recorder: Arc<dyn AuditRecorder>,
    /// Refuse a change whose pending entry cannot be written (and a bulk change past
    /// [`MAX_SNAPSHOT_RECORDS`]), rather than letting it through unaudited with an error logged.
    pub critical: bool,
}

impl fmt::Debug for AuditTrail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditTrail")
            .field("critical", &self.critical)
            .finish_non_exhaustive()
    }
}

impl PartialEq for AuditTrail {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.recorder, &other.recorder) && self.critical == other.critical
    }
}

impl Eq for AuditTrail {}

/// The audit layer over `child`: every collection with a primary key is audited (an entry needs
/// an id; the others are served as they are, with a warning).
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    trail: &AuditTrail,
) -> Result<Arc<dyn DataSource>> {
    let layer = Layer::new(Arc::clone(child), |collection| {
        let schema = collection.schema();
        if schema.primary_keys().is_empty() {
            tracing::warn!(
                collection = %schema.name,
                "audit trail: the collection has no primary key, its changes are not recorded"
            );
            return Ok(None);
        }
        let audited = audited_columns(schema);
        Ok(Some(decorated(AuditCollection {
            projection: Projection(audited.clone()),
            audited,
            trail: trail.clone(),
            child: collection,
        })))
    })?;
    Ok(Arc::new(layer))
}

/// The columns an entry records: the primary keys and every writable column (computed and
/// read-only fields are not the record's own values), in schema order.
pub fn audited_columns(schema: &CollectionSchema) -> Vec<String> {
    schema
        .columns()
        .filter(|(_, c)| c.is_primary_key || !c.is_read_only)
        .map(|(name, _)| name.clone())
        .collect()
}

/// The audited values of `record` as JSON, in each column's wire form (what the routes serve).
pub fn values_of(
    schema: &CollectionSchema,
    columns: &[String],
    record: &Record,
) -> Map<String, Json> {
    let mut out = Map::new();
    for name in columns {
        let Some(column) = schema.column(name) else {
            continue;
        };
        let value = record.get(name).unwrap_or(&Value::Null);
        // A value serde cannot write (a NaN float) is recorded as null rather than failing the
        // change it describes.
        let json = wire::to_json(value, column.wire).unwrap_or(Json::Null);
        out.insert(name.clone(), json);
    }
    out
}

/// `filter` paged to one record more than [`MAX_SNAPSHOT_RECORDS`]: what a change past the cap
/// reads to tell that it is past it.
pub(super) fn past_the_cap(filter: &Filter) -> Filter {
    let cap = MAX_SNAPSHOT_RECORDS as u64 + 1;
    let mut bounded = filter.clone();
    bounded.page = Some(match filter.page {
        Some(page) => Page::new(page.skip, page.limit.min(cap)),
        None => Page::new(0, cap),
    });
    bounded
}

/// A new entry of `caller`'s change to a record of `collection`, before the change runs.
pub(super) fn pending(
    caller: &Caller,
    collection: &str,
    operation: AuditOperation,
    record_id: Option<String>,
    previous_values: Map<String, Json>,
) -> PendingEntry {
    PendingEntry {
        key: Uuid::now_v7(),
        timestamp: caller.now().timestamp_millis(),
        operation,
        collection: collection.to_owned(),
        record_id,
        user_id: caller.id,
        user_first_name: caller.first_name.clone(),
        user_last_name: caller.last_name.clone(),
        user_email: caller.email.clone(),
        correlation_key: caller.request_id.to_string(),
        action_name: None,
        previous_values,
    }
}

/// Writes the pending entries of a change to `collection`. `Ok(true)` when they are written
/// (and so must be confirmed); `Ok(false)` when they are not but the trail lets the change run
/// anyway (logged).
pub(super) async fn record(
    trail: &AuditTrail,
    collection: &str,
    entries: &[PendingEntry],
) -> Result<bool> {
    if entries.is_empty() {
        return Ok(false);
    }
    match trail.recorder.insert_pending(entries).await {
        Ok(()) => Ok(true),
        Err(error) if trail.critical => {
            tracing::error!(
                collection,
                %error,
                "audit trail: the entries could not be written, the change is refused"
            );
            Err(Error::Internal(format!(
                "the audit trail could not record this change, so it was not made: {error}"
            )))
        }
        Err(error) => {
            tracing::error!(
                collection,
                %error,
                "audit trail: the entries could not be written, the change runs unaudited"
            );
            Ok(false)
        }
    }
}

/// Confirms one entry. The change has happened: a failure cannot undo it, so it is logged as
/// an error and the entry stays `pending`, which is how the trail shows an unconfirmed change.
pub(super) async fn confirm(
    trail: &AuditTrail,
    collection: &str,
    key: Uuid,
    confirmation: &Confirmation,
) {
    if let Err(error) = trail.recorder.confirm(key, confirmation).await {
        tracing::error!(
            collection,
            record_id = %confirmation.record_id,
            entry = %key,
            %error,
            "audit trail: the change was made but its entry could not be confirmed (left pending)"
        );
    }
}

struct AuditCollection {
    child: Arc<dyn Collection>,
    trail: AuditTrail,
    audited: Vec<String>,
    projection: Projection,
}

impl AuditCollection {
    fn schema(&self) -> &CollectionSchema {
        self.child.schema()
    }

    fn pending(
        &self,
        caller: &Caller,
        operation: AuditOperation,
        record_id: Option<String>,
        previous_values: Map<String, Json>,
    ) -> PendingEntry {
        pending(
            caller,
            &self.schema().name,
            operation,
            record_id,
            previous_values,
        )
    }

    async fn record(&self, entries: &[PendingEntry]) -> Result<bool> {
        record(&self.trail, &self.schema().name, entries).await
    }

    async fn confirm(&self, key: Uuid, confirmation: &Confirmation) {
        confirm(&self.trail, &self.schema().name, key, confirmation).await;
    }

    /// The records `filter` matches, with their audited values, before an update or delete.
    async fn before(&self, caller: &Caller, filter: &Filter, what: &str) -> Result<Vec<Record>> {
        let mut records = self
            .child
            .list(caller, &past_the_cap(filter), &self.projection)
            .await?;
        if records.len() > MAX_SNAPSHOT_RECORDS {
            if self.trail.critical {
                return Err(Error::validation(format!(
                    "This {what} touches more than {MAX_SNAPSHOT_RECORDS} records of '{}', more than \
                     the audit trail records for one change: it was not made",
                    self.schema().name
                )));
            }
            tracing::warn!(
                collection = %self.schema().name,
                "audit trail: a {what} touches more than {MAX_SNAPSHOT_RECORDS} records, only the \
                 first {MAX_SNAPSHOT_RECORDS} are recorded"
            );
            records.truncate(MAX_SNAPSHOT_RECORDS);
        }
        Ok(records)
    }

    fn packed(&self, record: &Record) -> Result<String> {
        wire::pack_id(self.schema(), record)
    }

    /// A tree matching the records whose primary keys are those of `records`.
    fn match_records(&self, records: &[Record]) -> Option<ConditionTree> {
        let pks = self.schema().primary_keys();
        let key = |record: &Record, pk: &str| record.get(pk).cloned().unwrap_or(Value::Null);
        if let [pk] = pks.as_slice() {
            let values = records.iter().map(|r| key(r, pk)).collect();
            return Some(ConditionTree::leaf(*pk, Operator::In, Value::Array(values)));
        }
        ConditionTree::union(records.iter().map(|record| {
            ConditionTree::intersect(
                pks.iter()
                    .map(|pk| Some(ConditionTree::leaf(*pk, Operator::Equal, key(record, pk)))),
            )
        }))
    }
}

#[async_trait]
impl Decorator for AuditCollection {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        let entries: Vec<PendingEntry> = records
            .iter()
            .map(|_| self.pending(caller, AuditOperation::Create, None, Map::new()))
            .collect();
        let recorded = self.record(&entries).await?;
        let created = self.child.create(caller, records).await?;
        if recorded {
            for (entry, record) in entries.iter().zip(&created) {
                let record_id = self.packed(record)?;
                let new_values = values_of(self.schema(), &self.audited, record);
                self.confirm(
                    entry.key,
                    &Confirmation {
                        record_id,
                        previous_values: Map::new(),
                        new_values,
                    },
                )
                .await;
            }
        }
        Ok(created)
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        let before = self.before(caller, filter, "update").await?;
        let entries = before
            .iter()
            .map(|record| {
                Ok(self.pending(
                    caller,
                    AuditOperation::Update,
                    Some(self.packed(record)?),
                    values_of(self.schema(), &self.audited, record),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let recorded = self.record(&entries).await?;
        self.child.update(caller, filter, patch).await?;
        if !recorded {
            return Ok(());
        }
        // Re-read by each record's own identity after the patch (which may change a key, or a
        // field the filter matched on), not by the filter: the entry is filed under the id the
        // record has now.
        let expected: Vec<Record> = before
            .iter()
            .map(|record| {
                let mut merged = record.clone();
                for (field, value) in patch.iter() {
                    merged.insert(field, value.clone());
                }
                merged
            })
            .collect();
        let after = self
            .child
            .list(
                caller,
                &Filter::new(self.match_records(&expected)),
                &self.projection,
            )
            .await?;
        let mut by_id: HashMap<String, &Record> = HashMap::new();
        for record in &after {
            by_id.insert(self.packed(record)?, record);
        }
        for ((entry, old), expected) in entries.iter().zip(&before).zip(&expected) {
            let Some(new) = by_id.get(&self.packed(expected)?) else {
                // The record no longer matches its own keys (a trigger deleted it): nothing to
                // compare, and the entry stays pending as the trace of the attempt.
                continue;
            };
            let (previous_values, new_values) = changed_values(
                &values_of(self.schema(), &self.audited, old),
                &values_of(self.schema(), &self.audited, new),
            );
            self.confirm(
                entry.key,
                &Confirmation {
                    record_id: self.packed(new)?,
                    previous_values,
                    new_values,
                },
            )
            .await;
        }
        Ok(())
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        let before = self.before(caller, filter, "delete").await?;
        let entries = before
            .iter()
            .map(|record| {
                Ok(self.pending(
                    caller,
                    AuditOperation::Delete,
                    Some(self.packed(record)?),
                    values_of(self.schema(), &self.audited, record),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let recorded = self.record(&entries).await?;
        self.child.delete(caller, filter).await?;
        if recorded {
            for entry in entries {
                let record_id = entry.record_id.clone().unwrap_or_default();
                self.confirm(
                    entry.key,
                    &Confirmation {
                        record_id,
                        previous_values: entry.previous_values,
                        new_values: Map::new(),
                    },
                )
                .await;
            }
        }
        Ok(())
    }
}

/// The parts of two records' values that differ: objects are compared key by key and arrays of
/// objects index by index, so a change deep in a JSON column records that leaf only. A key on
/// one side only is left out of the other side (never written as a placeholder): its absence
/// says it did not exist.
pub fn changed_values(
    before: &Map<String, Json>,
    after: &Map<String, Json>,
) -> (Map<String, Json>, Map<String, Json>) {
    let mut previous = Map::new();
    let mut next = Map::new();
    let keys = before
        .keys()
        .chain(after.keys().filter(|k| !before.contains_key(*k)));
    for key in keys {
        if let Some((p, n)) = diff(before.get(key), after.get(key)) {
            if let Some(p) = p {
                previous.insert(key.clone(), p);
            }
            if let Some(n) = n {
                next.insert(key.clone(), n);
            }
        }
    }
    (previous, next)
}

/// One side's part of a change: `None` where the value was absent on that side.
type Delta = (Option<Json>, Option<Json>);

fn diff(before: Option<&Json>, after: Option<&Json>) -> Option<Delta> {
    if before == after {
        return None;
    }
    match (before, after) {
        (Some(Json::Object(b)), Some(Json::Object(a))) => {
            let (p, n) = changed_values(b, a);
            Some((Some(Json::Object(p)), Some(Json::Object(n))))
        }
        (Some(Json::Array(b)), Some(Json::Array(a))) if objects(b) && objects(a) => {
            let mut p = Map::new();
            let mut n = Map::new();
            for i in 0..b.len().max(a.len()) {
                if let Some((bp, an)) = diff(b.get(i), a.get(i)) {
                    if let Some(bp) = bp {
                        p.insert(i.to_string(), bp);
                    }
                    if let Some(an) = an {
                        n.insert(i.to_string(), an);
                    }
                }
            }
            Some((Some(Json::Object(p)), Some(Json::Object(n))))
        }
        _ => Some((before.cloned(), after.cloned())),
    }
}

/// A non-empty array of objects (diffed by index); any other array is one value.
fn objects(items: &[Json]) -> bool {
    !items.is_empty() && items.iter().all(Json::is_object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(value: Json) -> Map<String, Json> {
        match value {
            Json::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn only_changed_columns_and_leaves_are_kept() {
        let before =
            map(json!({"id": 1, "status": "new", "meta": {"a": 1, "b": {"c": 2}}, "n": null}));
        let after = map(
            json!({"id": 1, "status": "paid", "meta": {"a": 1, "b": {"c": 3}, "d": 4}, "n": null}),
        );
        let (previous, next) = changed_values(&before, &after);
        assert_eq!(
            Json::Object(previous),
            json!({"status": "new", "meta": {"b": {"c": 2}}})
        );
        assert_eq!(
            Json::Object(next),
            json!({"status": "paid", "meta": {"b": {"c": 3}, "d": 4}})
        );
    }

    #[test]
    fn arrays_of_objects_are_diffed_by_index_and_others_whole() {
        let before = map(json!({"lines": [{"q": 1}, {"q": 2}], "tags": ["a"]}));
        let after = map(json!({"lines": [{"q": 1}, {"q": 5}, {"q": 6}], "tags": ["a", "b"]}));
        let (previous, next) = changed_values(&before, &after);
        assert_eq!(
            Json::Object(previous),
            json!({"lines": {"1": {"q": 2}}, "tags": ["a"]})
        );
        assert_eq!(
            Json::Object(next),
            json!({"lines": {"1": {"q": 5}, "2": {"q": 6}}, "tags": ["a", "b"]})
        );
    }

    #[test]
    fn no_change_gives_two_empty_sides() {
        let values = map(json!({"id": 1, "status": "new"}));
        let (previous, next) = changed_values(&values, &values);
        assert!(previous.is_empty() && next.is_empty());
    }
}
