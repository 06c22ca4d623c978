//! The run operations every surface calls: the runs a user may see (of a record), one run with
//! its steps, starting a run by hand, and completing the step a run waits on. `/v1`
//! (`http::workflows`) and the console call these; MCP may too.
//!
//! They live beside the engine rather than in `ops`, which knows nothing of the layers above it
//! (`host/tests/layers.rs`: `ops` never names `workflows`); like `ops`, they know nothing of
//! HTTP. Who may see a run: its user, starter, assignee and admins, and those who may browse
//! its collection; its context and steps' values only for the former and for those who may
//! read the record (the collection's `read` right, the record within their scope). Who may
//! control it (complete a step): its user, starter, assignee and admins.

use crate::agent::query_string::match_ids;
use crate::auth::CollectionRight;
use crate::datasource::{Caller, Filter, Page, PermissionLevel, Projection, unpack_id};
use crate::ops::Ops;
use crate::platform::activity::{Action, Actor, Entry, Origin, origin_or};
use crate::platform::{Store, User};

use super::engine::control::may_control;
use super::engine::{Completion, Controller, Run, RunFilter, StepRow, Viewer, Wakeup};
use super::triggers::{Triggers, WorkflowRef};
use super::versions::WorkflowFilter;
use super::{Definition, Error, NewRun, Queued, Result, TriggerKind, Workflow};

/// Most runs a record's list shows, newest first.
const RECORD_RUNS: i64 = 20;

/// A refusal or failure of the permission layer, met while deciding what a user may see.
fn permission(error: impl std::fmt::Display) -> Error {
    Error::Store(crate::platform::Error::Remote(error.to_string()))
}

fn datasource(error: impl std::fmt::Display) -> Error {
    Error::Store(crate::platform::Error::Remote(error.to_string()))
}

/// The collections `caller` may browse (none without a caller: a user in no team).
pub async fn browsable(ops: &Ops, caller: Option<&Caller>) -> Result<Vec<String>> {
    let Some(caller) = caller else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for name in ops.schema().collections.keys() {
        if ops
            .permissions
            .has(caller, name, CollectionRight::Browse)
            .await
            .map_err(permission)?
        {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// Whether `caller` may read the run's record: the collection's `read` right and the record
/// within their scope.
pub async fn may_read_record(ops: &Ops, caller: &Caller, run: &Run) -> Result<bool> {
    let schema = ops.schema();
    let Some(collection) = schema.collections.get(&run.collection_name) else {
        return Ok(false);
    };
    if !ops
        .permissions
        .has(caller, &collection.name, CollectionRight::Read)
        .await
        .map_err(permission)?
    {
        return Ok(false);
    }
    let Ok(id) = unpack_id(collection, &run.record_id) else {
        return Ok(false);
    };
    let Ok(tree) = match_ids(collection, &[id]) else {
        return Ok(false);
    };
    let scope = ops
        .permissions
        .scope(caller, collection, schema)
        .await
        .map_err(permission)?;
    let filter = Filter::new(Some(tree))
        .and(scope)
        .with_page(Page::new(0, 1));
    let keys = Projection::new(collection.primary_keys().into_iter().map(str::to_owned));
    let found = ops
        .datasource
        .collection(&collection.name)
        .map_err(datasource)?
        .list(caller, &filter, &keys)
        .await
        .map_err(datasource)?;
    Ok(!found.is_empty())
}

/// The user as the permission layer sees them; `None` when they cannot act (no team).
async fn caller_of(store: &Store, user: &User) -> Option<Caller> {
    super::engine::acting_caller(store, user.id).await.ok()
}

/// The run `id` as `user` may see it, and whether they may see its values: not found when they
/// may not see it at all.
pub async fn visible(ops: &Ops, store: &Store, user: &User, id: &str) -> Result<(Run, bool)> {
    let not_found = || Error::NotFound(format!("workflow run {id}"));
    let run = store.workflow_run(id).await?.ok_or_else(not_found)?;
    if may_control(user, &run) {
        return Ok((run, true));
    }
    let Some(caller) = caller_of(store, user).await else {
        return Err(not_found());
    };
    if !ops
        .permissions
        .has(&caller, &run.collection_name, CollectionRight::Browse)
        .await
        .map_err(permission)?
    {
        return Err(not_found());
    }
    let details = may_read_record(ops, &caller, &run).await?;
    Ok((run, details))
}

/// The newest runs matching `filter` that `user` may see (`limit` at most).
pub async fn list(
    ops: &Ops,
    store: &Store,
    user: &User,
    mut filter: RunFilter,
    limit: i64,
) -> Result<Vec<Run>> {
    if user.permission_level != PermissionLevel::Admin {
        let caller = caller_of(store, user).await;
        filter.visible_to = Some(Viewer {
            user_id: user.id,
            teams: user.teams.iter().map(|t| t.name.clone()).collect(),
            browsable: browsable(ops, caller.as_ref()).await?,
        });
    }
    Ok(store.workflow_runs(&filter, limit).await?)
}

/// The newest workflows matching `filter` that `user` may read (`filter.limit` at most): all
/// for an admin, else those of the collections they may browse.
pub async fn readable_workflows(
    ops: &Ops,
    store: &Store,
    user: &User,
    mut filter: WorkflowFilter,
) -> Result<Vec<Workflow>> {
    if user.permission_level != PermissionLevel::Admin {
        let caller = caller_of(store, user).await;
        filter.collections = Some(browsable(ops, caller.as_ref()).await?);
    }
    store.workflows(&filter).await
}

/// Who acts on runs: a user of the store, through a surface.
pub struct Acting<'a> {
    pub user: &'a User,
    /// The application token they present, if any (kept on the activity entries).
    pub token_id: Option<&'a str>,
    pub origin: Origin,
}

/// Completes step `index` of the run `id`, which `acting` may see and control.
pub async fn complete(
    ops: &Ops,
    store: &Store,
    wakeup: &Wakeup,
    acting: &Acting<'_>,
    id: &str,
    index: i64,
    completion: &Completion,
) -> Result<Run> {
    visible(ops, store, acting.user, id).await?;
    Controller {
        store,
        wakeup,
        activity: &ops.activity,
        user: acting.user,
        token_id: acting.token_id,
        origin: acting.origin,
    }
    .complete(id, index, completion)
    .await
}

/// Queues a run of `workflow` (its version `version_id`) on `record_id` started by hand by
/// `acting`, who acts as `runner`; records the `triggerWorkflow` entry when a run was created
/// (none when one is already ongoing on the record).
#[allow(clippy::too_many_arguments, reason = "what a manual start is made of")]
pub async fn queue_manual(
    ops: &Ops,
    triggers: &Triggers,
    acting: &Acting<'_>,
    runner: &Caller,
    workflow: &WorkflowRef,
    version_id: &str,
    record_id: &str,
    request_id: uuid::Uuid,
) -> Result<Queued> {
    let run = NewRun {
        token_id: acting.token_id.map(str::to_owned),
        ..NewRun::new(
            &workflow.id,
            version_id,
            &workflow.collection,
            record_id,
            TriggerKind::Manual,
            acting.user.id,
        )
    };
    let queued = triggers.queue(run).await?;
    if matches!(queued, Queued::Created(_)) {
        let mut entry = Entry::new(
            Action::TriggerWorkflow,
            Actor::of(runner),
            origin_or(acting.origin),
        )
        .with_collection(workflow.collection.clone())
        .with_records([record_id.to_owned()])
        .with_label(workflow.name.clone())
        .with_request_id(request_id.to_string());
        if let Some(token) = acting.token_id {
            entry = entry.with_token(token);
        }
        ops.activity.record(entry);
    }
    Ok(queued)
}

// ----- as a caller (the console) -----------------------------------------------------------

/// The run services, for a signed-in [`Caller`]: the operations above with the user read from
/// the store by the caller's id.
pub struct Runs<'a> {
    pub ops: &'a Ops,
    pub triggers: &'a Triggers,
    pub wakeup: &'a Wakeup,
}

/// One run as a caller sees it.
pub struct RunView {
    pub run: Run,
    pub steps: Vec<StepRow>,
    /// Whether the caller may see its values (the steps' input and output, the context).
    pub details: bool,
    /// Whether the caller may control it (complete the step it waits on).
    pub controls: bool,
    /// The definition of the version it runs (the steps it may still take), when readable.
    pub definition: Option<Definition>,
}

impl Runs<'_> {
    fn store(&self) -> &Store {
        self.triggers.store()
    }

    async fn user(&self, caller: &Caller) -> Result<User> {
        self.store()
            .user(caller.id)
            .await?
            .ok_or_else(|| Error::Forbidden("the user no longer exists".to_owned()))
    }

    fn acting<'u>(user: &'u User) -> Acting<'u> {
        Acting {
            user,
            token_id: None,
            origin: Origin::Ui,
        }
    }

    /// The newest runs on one record that the caller may see.
    pub async fn of_record(
        &self,
        caller: &Caller,
        collection: &str,
        record_id: &str,
    ) -> Result<Vec<Run>> {
        let user = self.user(caller).await?;
        let filter = RunFilter {
            collection_name: Some(collection.to_owned()),
            record_id: Some(record_id.to_owned()),
            ..RunFilter::default()
        };
        list(self.ops, self.store(), &user, filter, RECORD_RUNS).await
    }

    /// The active workflows of `collection` that the caller may start (they may browse it).
    pub async fn startable(&self, caller: &Caller, collection: &str) -> Result<Vec<Workflow>> {
        if !self
            .ops
            .permissions
            .has(caller, collection, CollectionRight::Browse)
            .await
            .map_err(permission)?
        {
            return Ok(Vec::new());
        }
        let filter = WorkflowFilter {
            limit: 100,
            collection: Some(collection.to_owned()),
            active: Some(true),
            ..WorkflowFilter::default()
        };
        self.store().workflows(&filter).await
    }

    /// Starts the workflow `workflow` (id or name) on `record_id`, as the caller: a workflow of
    /// another collection, inactive, or out of the caller's rights is refused.
    pub async fn start(
        &self,
        caller: &Caller,
        workflow: &str,
        collection: &str,
        record_id: &str,
    ) -> Result<Queued> {
        let store = self.store();
        let found = store
            .workflow_ref(workflow)
            .await?
            .filter(|w| w.collection == collection)
            .ok_or_else(|| Error::NotFound(format!("workflow {workflow:?}")))?;
        let version_id = found
            .startable_version()
            .ok_or_else(|| Error::Conflict(format!("the workflow {:?} is turned off", found.name)))?
            .to_owned();
        let user = self.user(caller).await?;
        let runner = self
            .triggers
            .runner(&self.ops.permissions, &user, collection, caller.request_id)
            .await?;
        queue_manual(
            self.ops,
            self.triggers,
            &Self::acting(&user),
            &runner,
            &found,
            &version_id,
            record_id,
            caller.request_id,
        )
        .await
    }

    /// The run `id` with its steps, as the caller may see it.
    pub async fn read(&self, caller: &Caller, id: &str) -> Result<RunView> {
        let store = self.store();
        let user = self.user(caller).await?;
        let (run, details) = visible(self.ops, store, &user, id).await?;
        let steps = store.workflow_run_steps(&run.id).await?;
        let definition = store
            .workflow_version_by_id(&run.version_id)
            .await?
            .map(|v| v.definition);
        Ok(RunView {
            controls: may_control(&user, &run),
            run,
            steps,
            details,
            definition,
        })
    }

    /// Completes step `index` of the run `id` as the caller.
    pub async fn complete(
        &self,
        caller: &Caller,
        id: &str,
        index: i64,
        completion: &Completion,
    ) -> Result<Run> {
        let user = self.user(caller).await?;
        complete(
            self.ops,
            self.store(),
            self.wakeup,
            &Self::acting(&user),
            id,
            index,
            completion,
        )
        .await
    }
}
