//! Which parts of the permission model a managed file holds, and the refusal of the CLI and API
//! writes to them. Roles, teams and users belong to the project, so a file managing them in any
//! environment of the project manages them for all; the documents (permissions, renderings, IP
//! rules) belong to one environment.

use std::collections::BTreeSet;

use sqlx::Row as _;

use crate::platform::store::Store;
use crate::platform::{Error, Result};

/// A part of the permission model a file may manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// Roles (project) and the environment's rights of each role.
    Roles,
    /// Teams (project) and their renderings in the environment.
    Teams,
    Users,
    IpWhitelist,
}

impl Part {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Roles => "roles",
            Self::Teams => "teams",
            Self::Users => "users",
            Self::IpWhitelist => "ip_whitelist",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Self::Roles, Self::Teams, Self::Users, Self::IpWhitelist]
            .into_iter()
            .find(|p| p.as_str() == s)
    }

    /// What a refused write is about, for the message.
    fn what(self) -> &'static str {
        match self {
            Self::Roles => "roles and their rights are",
            Self::Teams => "teams and their scopes, segments and charts are",
            Self::Users => "users are",
            Self::IpWhitelist => "IP whitelist rules are",
        }
    }
}

/// One managing file as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedBy {
    pub environment: String,
    pub path: String,
    pub digest: String,
    pub parts: BTreeSet<Part>,
    /// Emails whose password the file gives (the others may change theirs).
    pub passwords: BTreeSet<String>,
    pub applied_at: i64,
}

/// What is managed for this store's environment.
#[derive(Debug, Clone, Default)]
pub struct Managed {
    project_environment: String,
    files: Vec<ManagedBy>,
}

impl Managed {
    /// The file managing `part` for this environment, if any.
    pub fn by(&self, part: Part) -> Option<&ManagedBy> {
        let project_wide = matches!(part, Part::Roles | Part::Teams | Part::Users);
        self.files.iter().find(|file| {
            file.parts.contains(&part)
                && (project_wide || file.environment == self.project_environment)
        })
    }

    /// The file of this environment, if one manages anything here.
    pub fn this_environment(&self) -> Option<&ManagedBy> {
        self.files
            .iter()
            .find(|f| f.environment == self.project_environment)
    }

    /// `Conflict` naming the file when `part` is managed.
    pub fn check(&self, part: Part) -> Result<()> {
        match self.by(part) {
            Some(file) => Err(Error::Conflict(format!(
                "{} managed by {} (mode = \"managed\", environment {}): change the file and \
                 run `canopy permissions apply {}`",
                part.what(),
                file.path,
                file.environment,
                file.path
            ))),
            None => Ok(()),
        }
    }

    /// A password change alone is allowed when the managing file gives no hash for that user.
    pub fn check_password(&self, email: &str) -> Result<()> {
        match self.by(Part::Users) {
            Some(file) if file.passwords.contains(&email.to_lowercase()) => {
                Err(Error::Conflict(format!(
                    "the password of {email} is managed by {} (password_hash): change the file \
                     and run `canopy permissions apply {}`",
                    file.path, file.path
                )))
            }
            _ => Ok(()),
        }
    }
}

/// What managed files hold for `store`'s project and environment.
pub async fn managed(store: &Store) -> Result<Managed> {
    let rows = sqlx::query(
        "SELECT environment, path, digest, parts, document, applied_at FROM declarative_state \
         WHERE project = $1 ORDER BY environment",
    )
    .bind(store.project())
    .fetch_all(store.pool())
    .await?;
    let mut files = Vec::new();
    for row in rows {
        let parts: Vec<String> =
            serde_json::from_str(&row.try_get::<String, _>(3)?).unwrap_or_default();
        let document: serde_json::Value =
            serde_json::from_str(&row.try_get::<String, _>(4)?).unwrap_or_default();
        files.push(ManagedBy {
            environment: row.try_get(0)?,
            path: row.try_get(1)?,
            digest: row.try_get(2)?,
            parts: parts.iter().filter_map(|p| Part::parse(p)).collect(),
            passwords: document
                .get("passwords")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .map(str::to_lowercase)
                .collect(),
            applied_at: row.try_get(5)?,
        });
    }
    Ok(Managed {
        project_environment: store.environment().to_owned(),
        files,
    })
}

/// Refuses a write to `part` when a managed file holds it.
pub async fn guard(store: &Store, part: Part) -> Result<()> {
    managed(store).await?.check(part)
}

/// Forgets this environment's managing file (the file was removed from the settings or turned
/// to seed mode): the CLI and API may write again. Returns the path it was, if any.
pub async fn release(store: &Store) -> Result<Option<String>> {
    let managed = managed(store).await?;
    let Some(file) = managed.this_environment() else {
        return Ok(None);
    };
    sqlx::query("DELETE FROM declarative_state WHERE project = $1 AND environment = $2")
        .bind(store.project())
        .bind(store.environment())
        .execute(store.pool())
        .await?;
    Ok(Some(file.path.clone()))
}
