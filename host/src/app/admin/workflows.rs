//! `canopy workflows …`: workflow definitions from the command line, over the same store as
//! `canopy serve` — list them, show one (its latest definition or a version), apply a
//! definition file (a new workflow, or a new version when it changed), list versions, turn a
//! workflow on or off. A definition is checked as the server checks it, against the schema file
//! (`canopy schema` writes it) instead of the served schema; workflows of the workflows folder
//! are the folder's and refuse these changes.
//!
//! Runs and webhook triggers add their own subcommands here: one variant of
//! [`WorkflowsCommand`] and one arm of [`run`] each.

mod runs;
pub(crate) mod triggers;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value as Json, json};

use super::{print_json, table};
use crate::config::{StoreArgs, StoreConfig};
use crate::platform::Store;
use crate::workflows::files::{self, known_from_store};
use crate::workflows::validate;
use crate::workflows::versions::{Change, Origin, Version, Workflow};

pub use runs::RunsCommand;
pub use triggers::WebhookArgs;

/// `canopy workflows …`.
#[derive(Debug, Args)]
pub struct WorkflowsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of tables and text (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: WorkflowsCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// List the environment's workflows: name, collection, whether active, latest version,
    /// where each is defined.
    List {
        /// Only the workflows of this collection.
        #[arg(long)]
        collection: Option<String>,
    },
    /// Show a workflow (by name or id) with its latest definition, or with one version's.
    Show {
        /// The workflow's name or id.
        workflow: String,
        /// A version number (`canopy workflows versions NAME` lists them). [default: latest]
        #[arg(long)]
        version: Option<i64>,
    },
    /// Check a definition file (TOML, YAML or JSON) and save it: a new workflow, or a new
    /// version of the workflow of its name when the definition changed. The name defaults to
    /// the file's stem.
    Apply {
        /// The definition file.
        file: PathBuf,
        /// Check only: print the problems, or that it is fine, and save nothing.
        #[arg(long)]
        check: bool,
    },
    /// List a workflow's versions, newest first.
    Versions {
        /// The workflow's name or id.
        workflow: String,
    },
    /// Turn a workflow on: new runs start on its latest version.
    Activate {
        /// The workflow's name or id.
        workflow: String,
    },
    /// Turn a workflow off: runs under way go on, no new one starts.
    Deactivate {
        /// The workflow's name or id.
        workflow: String,
    },
    /// The runs of workflows: list them, show one with its steps, abort one.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// A workflow's webhook trigger: print its URL, enable, disable or regenerate it.
    Webhook(WebhookArgs),
}

pub(super) async fn run(
    store: &Store,
    config: &StoreConfig,
    command: WorkflowsCommand,
    json: bool,
) -> anyhow::Result<()> {
    match command {
        WorkflowsCommand::List { collection } => {
            let workflows: Vec<Workflow> = store
                .all_workflows()
                .await?
                .into_iter()
                .filter(|w| collection.as_ref().is_none_or(|c| *c == w.collection_name))
                .collect();
            if json {
                return print_json(&workflows.iter().map(workflow_json).collect::<Vec<_>>());
            }
            let rows: Vec<Vec<String>> = workflows
                .iter()
                .map(|w| {
                    vec![
                        w.name.clone(),
                        w.collection_name.clone(),
                        if w.active { "yes" } else { "no" }.to_owned(),
                        w.latest_version.to_string(),
                        source_text(w),
                        iso(w.updated_at),
                        w.id.clone(),
                    ]
                })
                .collect();
            super::emit(&table::render(
                &[
                    "NAME",
                    "COLLECTION",
                    "ACTIVE",
                    "VERSION",
                    "DEFINED BY",
                    "UPDATED",
                    "ID",
                ],
                &rows,
            ));
        }
        WorkflowsCommand::Show { workflow, version } => {
            let workflow = find(store, &workflow).await?;
            let number = version.unwrap_or(workflow.latest_version);
            let version = store
                .workflow_version(&workflow.id, number)
                .await?
                .with_context(|| {
                    format!(
                        "workflow {:?} has no version {number} (it has 1 to {})",
                        workflow.name, workflow.latest_version
                    )
                })?;
            let definition: Json =
                serde_json::from_str(&version.definition.canonical_json()).unwrap_or(Json::Null);
            if json {
                let mut out = workflow_json(&workflow);
                out["version"] = version_json(&version);
                out["definition"] = definition;
                return print_json(&out);
            }
            crate::outln!(
                "Workflow {:?} on {}",
                workflow.name,
                workflow.collection_name
            );
            crate::outln!("  id:          {}", workflow.id);
            crate::outln!(
                "  active:      {}",
                if workflow.active { "yes" } else { "no" }
            );
            crate::outln!("  defined by:  {}", source_text(&workflow));
            crate::outln!(
                "  version:     {} of {} ({}, sha256 {})",
                version.version,
                workflow.latest_version,
                iso(version.created_at),
                &version.definition_hash
            );
            if let Some(description) = &workflow.description {
                crate::outln!("  description: {description}");
            }
            crate::outln!("{}", serde_json::to_string_pretty(&definition)?);
        }
        WorkflowsCommand::Apply { file, check } => {
            return apply(store, config, &file, check, json).await;
        }
        WorkflowsCommand::Versions { workflow } => {
            let workflow = find(store, &workflow).await?;
            let versions = store
                .workflow_versions(&workflow.id, i64::MAX, &Default::default())
                .await?;
            if json {
                return print_json(&versions.iter().map(version_json).collect::<Vec<_>>());
            }
            let users = store.users().await?;
            let by = |id: Option<i64>| match id {
                None => "-".to_owned(),
                Some(id) => users
                    .iter()
                    .find(|u| u.id == id)
                    .map_or_else(|| id.to_string(), |u| u.email.clone()),
            };
            let rows: Vec<Vec<String>> = versions
                .iter()
                .map(|v| {
                    vec![
                        v.version.to_string(),
                        iso(v.created_at),
                        by(v.created_by_user_id),
                        v.definition_hash.chars().take(12).collect(),
                        v.definition.steps.len().to_string(),
                    ]
                })
                .collect();
            super::emit(&table::render(
                &["VERSION", "CREATED", "BY", "HASH", "STEPS"],
                &rows,
            ));
        }
        WorkflowsCommand::Activate { workflow } => set_active(store, &workflow, true, json).await?,
        WorkflowsCommand::Deactivate { workflow } => {
            set_active(store, &workflow, false, json).await?;
        }
        WorkflowsCommand::Runs { command } => runs::run(store, command, json).await?,
        WorkflowsCommand::Webhook(webhook) => {
            triggers::run(store, webhook, &config.server, json).await?;
        }
    }
    Ok(())
}

/// The workflow named `name_or_id` (a name first: ids are what people copy less often).
async fn find(store: &Store, name_or_id: &str) -> anyhow::Result<Workflow> {
    if let Some(workflow) = store.workflow_by_name(name_or_id).await? {
        return Ok(workflow);
    }
    store
        .workflow(name_or_id)
        .await?
        .with_context(|| format!("no workflow {name_or_id:?} (see `canopy workflows list`)"))
}

async fn apply(
    store: &Store,
    config: &StoreConfig,
    file: &std::path::Path,
    check: bool,
    json: bool,
) -> anyhow::Result<()> {
    let shown = file.display().to_string();
    let definition = files::read_file(file).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let view = super::schema_view(config)?;
    if view.is_none() {
        eprintln!(
            "Note: {} does not exist, so collection, field and action names are not checked \
             (`canopy schema` writes it).",
            config.schema_path.display()
        );
    }
    let known = known_from_store(store, view.as_ref(), None, []).await?;
    if let Err(problems) = validate::check(&definition, &known) {
        anyhow::bail!("{}", validate::describe(Some(&shown), &problems));
    }
    if check {
        if json {
            return print_json(&json!({ "file": shown, "valid": true }));
        }
        crate::outln!("{shown}: workflow {:?} is valid.", definition.name);
        return Ok(());
    }
    let saved = match store.workflow_by_name(&definition.name).await? {
        None => {
            store
                .create_workflow(&super::ACTOR, &definition, Origin::Api)
                .await?
        }
        Some(existing) => {
            store
                .save_workflow(&super::ACTOR, &existing.id, &definition, Origin::Api)
                .await?
        }
    };
    if json {
        let mut out = workflow_json(&saved.workflow);
        out["change"] = match saved.change {
            Change::Created => "created",
            Change::NewVersion => "new_version",
            Change::Settings => "settings",
            Change::Unchanged => "unchanged",
        }
        .into();
        return print_json(&out);
    }
    let workflow = &saved.workflow;
    match saved.change {
        Change::Created => crate::outln!(
            "Created workflow {:?} on {} (version 1, {}), id {}.",
            workflow.name,
            workflow.collection_name,
            if workflow.active {
                "active"
            } else {
                "inactive"
            },
            workflow.id
        ),
        Change::NewVersion => crate::outln!(
            "Saved version {} of workflow {:?}.",
            workflow.latest_version,
            workflow.name
        ),
        Change::Settings => crate::outln!(
            "Workflow {:?} is now {} (the definition is unchanged: still version {}).",
            workflow.name,
            if workflow.active {
                "active"
            } else {
                "inactive"
            },
            workflow.latest_version
        ),
        Change::Unchanged => crate::outln!(
            "Workflow {:?} is unchanged (version {}).",
            workflow.name,
            workflow.latest_version
        ),
    }
    Ok(())
}

async fn set_active(
    store: &Store,
    name_or_id: &str,
    active: bool,
    json: bool,
) -> anyhow::Result<()> {
    let workflow = find(store, name_or_id).await?;
    let after = store
        .set_workflow_active(&super::ACTOR, &workflow.id, active, Origin::Api)
        .await?;
    if json {
        return print_json(&workflow_json(&after));
    }
    let state = if active { "active" } else { "inactive" };
    if workflow.active == active {
        crate::outln!("Workflow {:?} was already {state}.", after.name);
    } else {
        crate::outln!("Workflow {:?} is now {state}.", after.name);
    }
    Ok(())
}

fn source_text(workflow: &Workflow) -> String {
    match &workflow.source_file {
        Some(file) => file.clone(),
        None => workflow.source.as_str().to_owned(),
    }
}

fn workflow_json(workflow: &Workflow) -> Json {
    json!({
        "id": workflow.id,
        "name": workflow.name,
        "collectionName": workflow.collection_name,
        "description": workflow.description,
        "active": workflow.active,
        "latestVersion": workflow.latest_version,
        "source": workflow.source.as_str(),
        "sourceFile": workflow.source_file,
        "createdAt": iso(workflow.created_at),
        "updatedAt": iso(workflow.updated_at),
    })
}

fn version_json(version: &Version) -> Json {
    json!({
        "version": version.version,
        "definitionHash": version.definition_hash,
        "createdByUserId": version.created_by_user_id,
        "createdAt": iso(version.created_at),
    })
}

/// A stored time (unix ms) as the API prints it.
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
