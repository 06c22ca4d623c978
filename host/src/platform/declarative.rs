//! The declarative permissions file (`permissions.toml`, or `permissionsFile`): roles with their
//! collection and action rights, teams with their scopes, segments and charts, users, and IP
//! rules, kept in git by teams that review permission changes like code.
//!
//! Two modes. `seed` fills an empty store once. `managed` makes the file the truth: every start
//! (and `canopy permissions apply`) makes the store equal to the sections the file has, and the
//! CLI and the admin API refuse writes to those sections (`managed`).
//!
//! A file is read (`file`), checked whole against itself and against the served schema when
//! there is one (`check`, `schema`), and only then applied, in one transaction with one admin log
//! entry per effective change (`apply`): a bad file changes nothing.

mod apply;
mod check;
mod file;
mod managed;
mod schema;

use std::path::{Path, PathBuf};

pub use apply::{Outcome, apply};
pub use check::{
    Desired, DesiredTeam, DesiredUser, Problem, Right, RoleRights, check, check_ip_rules,
    check_sql, ip_rule_text, parse_ip_rule,
};
pub use file::{Mode, PermissionsFile};
pub use managed::{Managed, ManagedBy, Part, guard, managed, release};
pub use schema::{FieldView, SchemaView, check_tree};

use super::{Error, Result};

/// A permissions file read and checked: what applying it would make the store hold.
#[derive(Debug, Clone)]
pub struct Checked {
    pub path: PathBuf,
    pub mode: Mode,
    /// Hex SHA-1 of the file's text: which version of the file the store follows.
    pub digest: String,
    pub desired: Desired,
    /// Accepted, but worth saying (a managed file that leaves nobody admin).
    pub warnings: Vec<String>,
}

/// Reads and checks the file at `path` against `schema` (the served schema, or the schema file;
/// `None` checks names only against the file itself). Every problem is reported at once, each
/// naming the file, the table and the key.
pub fn load(path: &Path, schema: Option<&SchemaView>) -> Result<Checked> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", path.display())))?;
    parse(path, &text, schema)
}

/// [`load`] on text already read (`path` names it in messages).
pub fn parse(path: &Path, text: &str, schema: Option<&SchemaView>) -> Result<Checked> {
    let file: PermissionsFile = toml::from_str(text).map_err(|e| {
        Error::Invalid(format!(
            "{} is not a valid permissions file, nothing was applied: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })?;
    let (desired, warnings) = check(&file, schema).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| format!("  - {p}")).collect();
        Error::Invalid(format!(
            "{} is invalid, nothing was applied:\n{}",
            path.display(),
            lines.join("\n")
        ))
    })?;
    Ok(Checked {
        path: path.to_owned(),
        mode: file.mode,
        digest: digest(text),
        desired,
        warnings,
    })
}

fn digest(text: &str) -> String {
    use sha1::Digest as _;
    hex::encode(sha1::Sha1::digest(text.as_bytes()))
}
