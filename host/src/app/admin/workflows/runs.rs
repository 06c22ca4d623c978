//! `canopy workflows runs list|show|abort`: workflow runs from the command line. `abort` acts
//! as the user named (`--user`), who must be allowed to (the run's user, its assignee or an
//! admin), and leaves the activity log entry the API would (origin `api`).

use anyhow::Context as _;
use clap::Subcommand;

use super::super::{print_json, table};
use crate::http::workflows::runs::{run_json, step_json};
use crate::platform::activity::Origin;
use crate::platform::listing::DateRange;
use crate::platform::{ActivityLog, Store};
use crate::workflows::engine::{Controller, RunFilter, Wakeup};
use crate::workflows::runs::RunState;

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// The newest runs, optionally of one workflow, one record or one state.
    List {
        /// Only the runs of this workflow (its id).
        #[arg(long, value_name = "ID")]
        workflow: Option<String>,
        /// Only the runs in this state: queued, running, awaiting_input, succeeded, failed or
        /// cancelled.
        #[arg(long, value_name = "STATE")]
        state: Option<String>,
        /// Only the runs on this collection's records.
        #[arg(long, value_name = "NAME")]
        collection: Option<String>,
        /// Only the runs on this record (with --collection).
        #[arg(long, value_name = "ID", requires = "collection")]
        record: Option<String>,
        /// How many runs at most.
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// One run with its steps (and their values: this is the store's operator).
    Show { id: String },
    /// Abort an ongoing run (and its sub-workflows' runs).
    Abort {
        id: String,
        /// Who aborts it (an admin, the run's user or its assignee).
        #[arg(long, value_name = "EMAIL")]
        user: String,
    },
}

pub(super) async fn run(store: &Store, command: RunsCommand, json: bool) -> anyhow::Result<()> {
    match command {
        RunsCommand::List {
            workflow,
            state,
            collection,
            record,
            limit,
        } => {
            let state = match state {
                Some(name) => Some(RunState::parse(&name).with_context(|| {
                    format!(
                        "no run state {name:?} (queued, running, awaiting_input, succeeded, \
                         failed or cancelled)"
                    )
                })?),
                None => None,
            };
            if !(1..=1000).contains(&limit) {
                anyhow::bail!("--limit must be from 1 to 1000");
            }
            let filter = RunFilter {
                workflow_id: workflow,
                collection_name: collection,
                record_id: record,
                state,
                trigger: None,
                created_at: DateRange::default(),
                visible_to: None,
            };
            let runs = store.workflow_runs(&filter, limit).await?;
            if json {
                let out: Vec<_> = runs.iter().map(|r| run_json(r, false, None)).collect();
                return print_json(&out);
            }
            let rows: Vec<Vec<String>> = runs
                .iter()
                .map(|r| {
                    vec![
                        r.id.clone(),
                        r.workflow_id.clone(),
                        format!("{} {}", r.collection_name, r.record_id),
                        r.state.as_str().to_owned(),
                        r.waiting_reason
                            .map_or_else(|| "-".to_owned(), |w| w.as_str().to_owned()),
                        r.trigger_kind.as_str().to_owned(),
                        iso(r.created_at),
                    ]
                })
                .collect();
            crate::out!(
                "{}",
                table::render(
                    &[
                        "ID", "WORKFLOW", "RECORD", "STATE", "WAITING", "TRIGGER", "CREATED"
                    ],
                    &rows
                )
            );
            Ok(())
        }
        RunsCommand::Show { id } => {
            let run = store.workflow_run(&id).await?.with_context(|| {
                format!("no workflow run {id} (see `canopy workflows runs list`)")
            })?;
            let steps = store.workflow_run_steps(&id).await?;
            if json {
                return print_json(&run_json(&run, true, Some((&steps, true))));
            }
            crate::outln!(
                "Run {} of workflow {} on {} {}: {}{}",
                run.id,
                run.workflow_id,
                run.collection_name,
                run.record_id,
                run.state.as_str(),
                run.waiting_reason
                    .map(|w| format!(" ({})", w.as_str()))
                    .unwrap_or_default()
            );
            if let Some(message) = &run.error_message {
                crate::outln!("Error: {message}");
            }
            let rows: Vec<Vec<String>> = steps
                .iter()
                .map(|s| {
                    let shown = step_json(s, false);
                    vec![
                        s.index.to_string(),
                        s.key.clone(),
                        s.kind.clone(),
                        s.mode.clone(),
                        s.status.as_str().to_owned(),
                        shown["phase"].as_str().unwrap_or("-").to_owned(),
                        s.error_message.clone().unwrap_or_else(|| "-".to_owned()),
                    ]
                })
                .collect();
            crate::out!(
                "{}",
                table::render(
                    &["INDEX", "KEY", "TYPE", "MODE", "STATUS", "PHASE", "ERROR"],
                    &rows
                )
            );
            Ok(())
        }
        RunsCommand::Abort { id, user } => {
            let user = store
                .user_by_email(&user)
                .await?
                .with_context(|| format!("no user {user:?} (see `canopy users list`)"))?;
            let activity = ActivityLog::start(store.clone());
            let wakeup = Wakeup::new();
            wakeup.announce(store);
            let controller = Controller {
                store,
                wakeup: &wakeup,
                activity: &activity,
                user: &user,
                token_id: None,
                origin: Origin::Api,
            };
            let aborted = controller.abort(&id).await;
            activity.flush().await;
            let run = aborted.map_err(|e| anyhow::anyhow!("{e}"))?;
            if json {
                return print_json(&run_json(&run, false, None));
            }
            crate::outln!("Aborted run {} ({}).", run.id, run.state.as_str());
            Ok(())
        }
    }
}

/// A stored time (unix ms) as the API prints it.
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
