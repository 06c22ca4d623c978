//! The workflows folder (`workflowsDir`): one workflow per `*.toml`, `*.yaml` or `*.yml` file,
//! named after its file stem unless it says `name`. Loaded at start once the customized stack
//! is built, and again at each reload: every file is read and checked first, and only a folder
//! without a problem is applied, in one transaction (so a reload with a bad file keeps the
//! definitions as they were). A changed file makes a new version, an unchanged one nothing; a
//! workflow whose file is gone is deactivated and handed back to the API (its runs go on).
//!
//! Parse errors keep the parser's line and column and the field's path, and name the step when
//! the path goes through one: `workflows/refund.toml: line 12, column 1: step "check":
//! options[1]: missing field `next``.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::validate::{self, Known};
use super::versions::{Change, Origin, Source};
use super::{Definition, Error, Result};
use crate::platform::declarative::SchemaView;
use crate::platform::{Actor, Store};

/// The languages a definition is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Yaml,
    Json,
}

impl Format {
    /// The format of a file, by its extension; `None` for a file the folder ignores.
    pub fn of(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "toml" => Some(Self::Toml),
            "yaml" | "yml" => Some(Self::Yaml),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// A definition read from a file.
#[derive(Debug, Clone)]
pub struct FileDefinition {
    pub path: PathBuf,
    /// The path as people read it in messages (`workflows/refund.toml`).
    pub shown: String,
    /// Its name filled in from the file stem when the file gives none.
    pub definition: Definition,
}

/// Reads one definition written in `format`. An error says where (line and column when the
/// parser knows them), the step and the field.
pub fn parse(format: Format, text: &str) -> Result<Definition, String> {
    let (result, position) = match format {
        Format::Toml => match toml::Deserializer::parse(text) {
            Ok(deserializer) => {
                let result = serde_path_to_error::deserialize::<_, Definition>(deserializer);
                let position = result
                    .as_ref()
                    .err()
                    .and_then(|e| e.inner().span())
                    .map(|span| line_column(text, span.start));
                (
                    result.map_err(|e| (e.path().to_string(), e.into_inner().message().to_owned())),
                    position,
                )
            }
            Err(error) => {
                let position = error.span().map(|span| line_column(text, span.start));
                return Err(located(position, error.message()));
            }
        },
        Format::Yaml => {
            let deserializer = yaml_serde::Deserializer::from_str(text);
            let result = serde_path_to_error::deserialize::<_, Definition>(deserializer);
            let position = result
                .as_ref()
                .err()
                .and_then(|e| e.inner().location())
                .map(|l| (l.line(), l.column()));
            (
                result.map_err(|e| (e.path().to_string(), yaml_message(e.inner()))),
                position,
            )
        }
        Format::Json => {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            let result = serde_path_to_error::deserialize::<_, Definition>(&mut deserializer);
            let position = result
                .as_ref()
                .err()
                .map(|e| (e.inner().line(), e.inner().column()))
                .filter(|(line, _)| *line > 0);
            (
                result.map_err(|e| (e.path().to_string(), json_message(e.inner()))),
                position,
            )
        }
    };
    match result {
        Ok(definition) => Ok(definition),
        Err((path, message)) => {
            let generic = generic(format, text);
            let at = at_step(&path, generic.as_ref());
            Err(located(position, &format!("{at}{message}")))
        }
    }
}

/// A definition sent as JSON (the API's body), with the field's path and step in its error.
pub fn from_json(value: Json) -> Result<Definition, String> {
    let generic = value.clone();
    serde_path_to_error::deserialize::<_, Definition>(value).map_err(|e| {
        let path = e.path().to_string();
        format!("{}{}", at_step(&path, Some(&generic)), e.into_inner())
    })
}

/// `line L, column C: message` when the position is known.
fn located(position: Option<(usize, usize)>, message: &str) -> String {
    match position {
        Some((line, column)) => format!("line {line}, column {column}: {message}"),
        None => message.to_owned(),
    }
}

/// The 1-based line and column of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The document as plain JSON, when it reads as one (to name the step of an error's path).
fn generic(format: Format, text: &str) -> Option<Json> {
    match format {
        Format::Toml => toml::from_str(text).ok(),
        Format::Yaml => yaml_serde::from_str(text).ok(),
        Format::Json => serde_json::from_str(text).ok(),
    }
}

/// `step "check": options[1]: ` for a path `steps[3].options[1]` when steps[3] has a key, else
/// the path as it is (`steps[3].type: `, `name: `); nothing for the root.
fn at_step(path: &str, document: Option<&Json>) -> String {
    if path.is_empty() || path == "." {
        return String::new();
    }
    let step = path.strip_prefix("steps[").and_then(|rest| {
        let (index, rest) = rest.split_once(']')?;
        let index: usize = index.parse().ok()?;
        let key = document?.get("steps")?.get(index)?.get("key")?.as_str()?;
        Some((
            key.to_owned(),
            rest.strip_prefix('.').unwrap_or(rest).to_owned(),
        ))
    });
    match step {
        Some((key, rest)) if rest.is_empty() => format!("step {key:?}: "),
        Some((key, rest)) => format!("step {key:?}: {rest}: "),
        None => format!("{path}: "),
    }
}

/// The YAML reader's message without its own position (given first).
fn yaml_message(error: &yaml_serde::Error) -> String {
    let text = error.to_string();
    match text.find(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// serde_json's message without its own ` at line L column C` (the position is given first).
fn json_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Reads `dir`: every definition file, parsed, each named (its stem by default). Every file's
/// problem is reported, one per line; two files of one name are refused.
pub fn read_folder(dir: &Path) -> Result<Vec<FileDefinition>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::Invalid(format!(
            "cannot read the workflows folder {}: {e}",
            dir.display()
        ))
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.is_file()
                && matches!(Format::of(path), Some(Format::Toml | Format::Yaml))
                && !path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    paths.sort();
    let mut problems = Vec::new();
    let mut files: Vec<FileDefinition> = Vec::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        let shown = path.display().to_string();
        match read_file(&path) {
            Ok(definition) => {
                if let Some(first) = names.insert(definition.name.clone(), shown.clone()) {
                    problems.push(format!(
                        "{shown}: name: workflow {:?} is already defined by {first}",
                        definition.name
                    ));
                    continue;
                }
                files.push(FileDefinition {
                    path,
                    shown,
                    definition,
                });
            }
            Err(message) => problems.push(format!("{shown}: {message}")),
        }
    }
    if problems.is_empty() {
        Ok(files)
    } else {
        Err(Error::Invalid(problems.join("\n")))
    }
}

/// One definition file, its name defaulting to the file stem.
pub fn read_file(path: &Path) -> Result<Definition, String> {
    let format = Format::of(path).ok_or_else(|| {
        "not a definition file: use .toml, .yaml or .yml (or .json for `canopy workflows apply`)"
            .to_owned()
    })?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut definition = parse(format, &text)?;
    if definition.name.trim().is_empty() {
        definition.name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
    }
    Ok(definition)
}

/// What the store knows that definitions name: the environment's workflows (with `also`, the
/// ones about to be saved, which win), users and teams.
pub async fn known_from_store<'a>(
    store: &Store,
    schema: Option<&'a SchemaView>,
    plugins: Option<BTreeSet<String>>,
    also: impl IntoIterator<Item = &Definition>,
) -> Result<Known<'a>> {
    let mut workflows: BTreeMap<String, String> = store
        .all_workflows()
        .await?
        .into_iter()
        .map(|w| (w.name, w.collection_name))
        .collect();
    for definition in also {
        workflows.insert(definition.name.clone(), definition.collection.clone());
    }
    let users = store
        .users()
        .await?
        .into_iter()
        .map(|u| u.email.to_lowercase())
        .collect();
    let teams = store.teams().await?.into_iter().map(|t| t.name).collect();
    Ok(Known {
        schema,
        workflows,
        users: Some(users),
        teams: Some(teams),
        plugins,
    })
}

/// What loading the folder changed, one line each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    pub files: usize,
    pub changes: Vec<String>,
}

/// Reads and checks every file of `dir` against the served schema and the store, then saves the
/// folder in one transaction: new workflows, new versions of changed ones, deactivation of
/// those whose file is gone. Nothing is saved when any file has a problem.
pub async fn load(
    store: &Store,
    dir: &Path,
    schema: &SchemaView,
    plugins: Option<BTreeSet<String>>,
) -> Result<Loaded> {
    let files = read_folder(dir)?;
    let known = known_from_store(
        store,
        Some(schema),
        plugins,
        files.iter().map(|f| &f.definition),
    )
    .await?;
    let mut problems = Vec::new();
    for file in &files {
        if let Err(found) = validate::check(&file.definition, &known) {
            problems.push(validate::describe(Some(&file.shown), &found));
        }
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems.join("\n")));
    }
    sync(store, &files).await
}

/// Saves checked `files` as the folder's workflows (see [`load`]).
pub async fn sync(store: &Store, files: &[FileDefinition]) -> Result<Loaded> {
    let actor = Actor::System;
    let mut tx = store.begin_sync().await?;
    let existing: BTreeMap<String, super::versions::Workflow> = store
        .workflows_on(&mut tx)
        .await?
        .into_iter()
        .map(|w| (w.name.clone(), w))
        .collect();
    let mut changes = Vec::new();
    for file in files {
        let origin = Origin::File(&file.shown);
        let name = &file.definition.name;
        match existing.get(name) {
            None => {
                let saved = store
                    .create_on(&mut tx, &actor, &file.definition, origin)
                    .await?;
                changes.push(format!(
                    "workflow {name:?} created from {} (version 1{})",
                    file.shown,
                    if saved.workflow.active {
                        ""
                    } else {
                        ", inactive"
                    }
                ));
            }
            Some(workflow) => {
                let saved = store
                    .save_on(&mut tx, &actor, &workflow.id, &file.definition, origin)
                    .await
                    .map_err(|e| match e {
                        Error::Invalid(message) => {
                            Error::Invalid(format!("{}: {message}", file.shown))
                        }
                        other => other,
                    })?;
                let taken = workflow.source == Source::Api;
                match saved.change {
                    Change::Unchanged => {}
                    Change::NewVersion => changes.push(format!(
                        "workflow {name:?} changed in {}: version {}{}",
                        file.shown,
                        saved.workflow.latest_version,
                        if taken {
                            " (the file now defines it)"
                        } else {
                            ""
                        }
                    )),
                    Change::Settings | Change::Created => changes.push(format!(
                        "workflow {name:?} {} by {}",
                        if taken {
                            "is now defined"
                        } else if saved.workflow.active {
                            "activated"
                        } else {
                            "deactivated"
                        },
                        file.shown
                    )),
                }
            }
        }
    }
    let names: BTreeSet<&str> = files.iter().map(|f| f.definition.name.as_str()).collect();
    for workflow in existing.values() {
        if workflow.source == Source::File && !names.contains(workflow.name.as_str()) {
            store.release_on(&mut tx, &actor, workflow).await?;
            changes.push(format!(
                "workflow {:?} deactivated: {} is gone (its runs go on)",
                workflow.name,
                workflow.source_file.as_deref().unwrap_or("its file")
            ));
        }
    }
    tx.commit().await?;
    Ok(Loaded {
        files: files.len(),
        changes,
    })
}
