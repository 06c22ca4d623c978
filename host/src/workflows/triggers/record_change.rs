//! Record-change triggers (`triggers.recordChanges` of a definition): after a create or an
//! update of the workflow's collection, a run on each written record that matches the trigger's
//! `when` (a condition tree), as the user who wrote.
//!
//! They are After hooks added to the customizer stack when a generation is built
//! (`app::reload`), one per collection and operation that an active workflow names; so a
//! definition that adds a record-change trigger takes effect at the next reload (as the
//! workflows folder is reloaded). At each write the workflow is read again: a workflow made
//! inactive since starts nothing, and runs start on its latest version. A failure to start a run
//! never fails the write that caused it: it is logged.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Triggers, WorkflowRef, matching_ids, parse_tree};
use crate::customizer::{
    Context, Customization, HookData, HookHandler, HookOperation, HookPosition, Kind,
};
use crate::datasource::{
    Caller, CollectionSchema, ConditionTree, Operator, Result, Value, pack_id, unpack_id,
};
use crate::platform::activity::{Action, Actor, Entry, Origin};
use crate::workflows::definition::ChangeKind;
use crate::workflows::{NewRun, Queued, TriggerKind};

/// The most records one update starts runs on (an update of a whole table starts no flood).
pub const MAX_RECORDS: u64 = 1_000;
/// What `Customization::origin` says of these hooks.
pub const ORIGIN: &str = "workflows";

/// One workflow's trigger on one collection and operation.
#[derive(Debug, Clone)]
struct Watch {
    workflow: WorkflowRef,
    when: Option<serde_json::Value>,
}

/// The hook customizations of every active workflow's record-change triggers.
pub async fn customizations(
    triggers: &Arc<Triggers>,
) -> crate::workflows::Result<Vec<Customization>> {
    // Few entries: a list keeps the order workflows were read in.
    let mut watched: Vec<((String, HookOperation), Vec<Watch>)> = Vec::new();
    for (workflow, definition) in triggers.store().declared_triggers().await? {
        for change in &definition.triggers.record_changes {
            for on in &change.on {
                let operation = match on {
                    ChangeKind::Create => HookOperation::Create,
                    ChangeKind::Update => HookOperation::Update,
                };
                let key = (definition.collection.clone(), operation);
                let watch = Watch {
                    workflow: workflow.clone(),
                    when: change.when.clone(),
                };
                match watched.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, watches)) => watches.push(watch),
                    None => watched.push((key, vec![watch])),
                }
            }
        }
    }
    Ok(watched
        .into_iter()
        .map(|((collection, operation), watches)| {
            Customization::collection(
                ORIGIN,
                collection,
                Kind::Hook {
                    position: HookPosition::After,
                    operation,
                    handler: Arc::new(RecordChangeHook {
                        triggers: Arc::clone(triggers),
                        watches,
                    }),
                },
            )
        })
        .collect())
}

struct RecordChangeHook {
    triggers: Arc<Triggers>,
    watches: Vec<Watch>,
}

#[async_trait]
impl HookHandler for RecordChangeHook {
    async fn run(
        &self,
        caller: &Caller,
        ctx: &Context,
        position: HookPosition,
        data: &mut HookData,
    ) -> Result<()> {
        if position != HookPosition::After {
            return Ok(());
        }
        let Some(collection) = ctx.collection.as_deref() else {
            return Ok(());
        };
        if let Err(error) = self.start_runs(caller, ctx, collection, data).await {
            tracing::warn!(
                collection,
                user = caller.id,
                %error,
                "a record-change trigger could not start its runs"
            );
        }
        Ok(())
    }
}

impl RecordChangeHook {
    async fn start_runs(
        &self,
        caller: &Caller,
        ctx: &Context,
        collection: &str,
        data: &HookData,
    ) -> std::result::Result<(), String> {
        let datasource = ctx.datasource.as_ref();
        // The written records, as packed ids.
        let written: Vec<String> = match data {
            HookData::Create {
                created: Some(records),
                ..
            } => {
                let schema = datasource
                    .collection(collection)
                    .map_err(|e| e.to_string())?;
                records
                    .iter()
                    .map(|r| pack_id(schema.schema(), r))
                    .collect::<Result<_>>()
                    .map_err(|e| e.to_string())?
            }
            HookData::Update { filter, .. } => matching_ids(
                datasource,
                caller,
                collection,
                filter.condition_tree.clone(),
                MAX_RECORDS,
            )
            .await
            .map_err(|e| e.to_string())?,
            _ => return Ok(()),
        };
        if written.is_empty() {
            return Ok(());
        }
        let schema = datasource.schema();
        let collection_schema = schema
            .collections
            .get(collection)
            .ok_or_else(|| format!("no collection {collection}"))?;
        for watch in &self.watches {
            let Some(current) = self
                .triggers
                .store()
                .workflow_ref(&watch.workflow.id)
                .await
                .map_err(|e| e.to_string())?
            else {
                continue;
            };
            let Some(version_id) = current.startable_version() else {
                continue;
            };
            let ids = match parse_tree(datasource, collection, watch.when.as_ref())
                .map_err(|e| format!("workflow {}: `when`: {e}", current.name))?
            {
                None => written.clone(),
                Some(when) => {
                    let only = ids_tree(collection_schema, &written).map_err(|e| e.to_string())?;
                    let tree = ConditionTree::intersect([Some(only), Some(when)]);
                    matching_ids(datasource, caller, collection, tree, MAX_RECORDS)
                        .await
                        .map_err(|e| e.to_string())?
                }
            };
            self.queue(caller, &current, version_id, collection, ids)
                .await;
        }
        Ok(())
    }

    async fn queue(
        &self,
        caller: &Caller,
        workflow: &WorkflowRef,
        version_id: &str,
        collection: &str,
        ids: Vec<String>,
    ) {
        let runs = ids.iter().map(|record_id| {
            self.triggers.queue(NewRun::new(
                &workflow.id,
                version_id,
                collection,
                record_id,
                TriggerKind::RecordChange,
                caller.id,
            ))
        });
        let outcomes = futures::future::join_all(runs).await;
        let started: Vec<String> = ids
            .into_iter()
            .zip(outcomes)
            .filter_map(|(id, outcome)| match outcome {
                Ok(Queued::Created(_)) => Some(id),
                Ok(Queued::Ongoing(_)) => None,
                Err(error) => {
                    tracing::warn!(workflow = %workflow.id, %error, "a record-change run was not queued");
                    None
                }
            })
            .collect();
        if !started.is_empty() {
            self.triggers.activity().record(
                Entry::new(Action::TriggerWorkflow, Actor::of(caller), Origin::Executor)
                    .with_collection(collection)
                    .with_records(started)
                    .with_label(format!("{} (record change)", workflow.name))
                    .with_request_id(caller.request_id.to_string()),
            );
        }
    }
}

/// The records whose primary key is one of `ids` (packed): `In` on a single key, an `Or` of
/// `And`s of `Equal` per key for composite keys.
fn ids_tree(collection: &CollectionSchema, ids: &[String]) -> Result<ConditionTree> {
    let unpacked = ids
        .iter()
        .map(|id| unpack_id(collection, id))
        .collect::<Result<Vec<_>>>()?;
    Ok(match collection.primary_keys().as_slice() {
        [key] => ConditionTree::leaf(
            *key,
            Operator::In,
            Value::Array(
                unpacked
                    .into_iter()
                    .filter_map(|mut values| values.pop().map(|(_, v)| v))
                    .collect(),
            ),
        ),
        _ => ConditionTree::or(
            unpacked
                .into_iter()
                .map(|values| {
                    ConditionTree::and(
                        values
                            .into_iter()
                            .map(|(key, value)| ConditionTree::leaf(key, Operator::Equal, value))
                            .collect(),
                    )
                })
                .collect(),
        ),
    })
}
