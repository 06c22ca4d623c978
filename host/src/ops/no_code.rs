//! The no-code actions as an admin manages them (the console's "No-code actions" page): those of
//! the config file, read-only, and those added from the console, which the store keeps
//! (`platform::no_code`). Adding one checks it as a load would (its type switched on, the
//! collection served, the name free, update values typed against the collection), so that what
//! is stored serves after the reload the caller then asks for.

use serde_json::Value as Json;

use super::{Error, Ops, Result};
use crate::config::NoCodeAction;
use crate::datasource::Caller;

/// A no-code action as the console lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The store's id; `None` for the config file's.
    pub id: Option<i64>,
    pub action: Option<NoCodeAction>,
    /// The stored definition with header values masked (the console's own only).
    pub definition: Json,
    /// Why it is not served, when it is not: its switch is off, or it does not fit the schema.
    pub problem: Option<String>,
}

/// Every no-code action, the config file's first.
pub async fn list(ops: &Ops, caller: &Caller) -> Result<Vec<Listed>> {
    super::tokens::require_admin(ops, caller).await?;
    let mut listed: Vec<Listed> = ops
        .no_code
        .actions
        .iter()
        .map(|action| Listed {
            id: None,
            action: Some(action.clone()),
            definition: Json::Null,
            problem: None,
        })
        .collect();
    for row in super::tokens::store(ops)?.no_code_actions().await? {
        let parsed = crate::config::parse_no_code_action(&row.definition);
        let problem = match &parsed {
            Err(problem) => Some(problem.clone()),
            Ok(action) => match ops.no_code.switch_for(action) {
                (false, switch) => Some(format!(
                    "not served: experimental.{switch} is off in the config file"
                )),
                (true, _) => served_problem(ops, action),
            },
        };
        listed.push(Listed {
            id: Some(row.id),
            action: parsed.ok(),
            definition: crate::platform::no_code::masked(&row.definition),
            problem,
        });
    }
    Ok(listed)
}

/// A served action is in the schema: only one that is not has a problem to show.
fn served_problem(ops: &Ops, action: &NoCodeAction) -> Option<String> {
    let served = ops
        .schema()
        .collections
        .get(&action.collection)
        .is_some_and(|c| c.actions.contains_key(&action.name));
    if served {
        return None;
    }
    Some(
        crate::no_code::problem(action, ops.schema())
            .unwrap_or_else(|| "not served yet: reload the plugins".to_owned()),
    )
}

/// Adds `definition` (a `[[noCodeActions]]` entry's keys in JSON) after checking it; answers its
/// id. The caller reloads the served generation for it to serve.
pub async fn add(ops: &Ops, caller: &Caller, definition: &Json) -> Result<i64> {
    super::tokens::require_admin(ops, caller).await?;
    let action = crate::config::parse_no_code_action(definition)
        .map_err(|problem| Error::field("definition", problem))?;
    if let (false, switch) = ops.no_code.switch_for(&action) {
        return Err(Error::field(
            "type",
            format!(
                "{} actions are off: set experimental.{switch} = true in the config file",
                action.type_name()
            ),
        ));
    }
    if let Some(problem) = crate::no_code::problem(&action, ops.schema()) {
        return Err(Error::field("definition", problem));
    }
    let store = super::tokens::store(ops)?;
    Ok(store
        .add_no_code_action(&super::tokens::actor(caller), definition)
        .await?)
}

/// Removes no-code action `id`, added from the console (the config file's are the file's).
pub async fn remove(ops: &Ops, caller: &Caller, id: i64) -> Result<()> {
    super::tokens::require_admin(ops, caller).await?;
    super::tokens::store(ops)?
        .remove_no_code_action(&super::tokens::actor(caller), id)
        .await?;
    Ok(())
}
