//! Makes the store equal to a checked file, in one transaction: the store is read inside it
//! (under an advisory lock on PostgreSQL, so that instances starting together apply once), the
//! differences are written with one admin log entry each, and a problem found against the store
//! (a user's role that exists nowhere) rolls everything back.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};
use sqlx::AnyConnection;
use sqlx::{Connection as _, Row as _};

use super::Checked;
use super::check::{Desired, DesiredTeam, DesiredUser, Problem};
use super::file::Mode;
use super::managed::Part;
use crate::datasource::PermissionLevel;
use crate::platform::documents::{EnvironmentPermissions, IpWhitelist};
use crate::platform::store::{
    Actor, Dialect, RenderingBody, Role, Store, Team, User, now_ms, parse_level, user_value,
};
use crate::platform::{Error, Result};

/// What applying a file did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Whether the file was applied (a seed file is not, on a store that is not empty).
    pub applied: bool,
    /// One line per effective change ("role Support added").
    pub changes: Vec<String>,
    /// Why nothing was applied, when it was not.
    pub skipped: Option<String>,
}

/// A key of PostgreSQL's advisory locks: one apply at a time per database.
const APPLY_LOCK: i64 = 0x0063_616e_6f70_7901;

/// Applies `checked` to `store` (see the module's doc). A seed file is applied only to a store
/// without roles, teams or users; a managed one becomes the truth of its sections.
pub async fn apply(store: &Store, checked: &Checked) -> Result<Outcome> {
    let mut conn = store.pool().acquire().await?;
    let mut tx = conn.begin().await?;
    match store.dialect() {
        Dialect::Postgres => {
            sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock($1)) AS l")
                .bind(APPLY_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        // A write first: SQLite then holds the write lock from the snapshot on.
        Dialect::Sqlite => {
            sqlx::query("DELETE FROM declarative_state WHERE 1 = 0")
                .execute(&mut *tx)
                .await?;
        }
    }
    let before = Snapshot::read(store, &mut tx).await?;
    if checked.mode == Mode::Seed && !before.is_empty() {
        tx.rollback().await?;
        return Ok(Outcome {
            applied: false,
            changes: Vec::new(),
            skipped: Some(format!(
                "{} (mode = \"seed\") was not applied: the store already has roles, teams or \
                 users",
                checked.path.display()
            )),
        });
    }
    let problems = before.check_references(&checked.desired);
    if !problems.is_empty() {
        tx.rollback().await?;
        let lines: Vec<String> = problems.iter().map(|p| format!("  - {p}")).collect();
        return Err(Error::Invalid(format!(
            "{} does not fit the store, nothing was applied:\n{}",
            checked.path.display(),
            lines.join("\n")
        )));
    }
    let mut run = Run {
        store,
        tx: &mut tx,
        changes: Vec::new(),
        actor: Actor::System,
    };
    if checked.mode == Mode::Managed && before.state_path.is_none() {
        run.log(
            "environment",
            "initial",
            store.environment(),
            Some(before.baseline(store.environment())),
            Some(json!({
                "name": store.environment(),
                "permissionsFile": checked.path.display().to_string(),
                "digest": checked.digest,
                "parts": parts(&checked.desired),
            })),
        )
        .await?;
    }
    run.apply(&before, checked).await?;
    let changes = run.changes;
    tx.commit().await?;
    drop(conn);
    store.changed();
    Ok(Outcome {
        applied: true,
        changes,
        skipped: None,
    })
}

/// The parts a file manages: the sections it has.
fn parts(desired: &Desired) -> Vec<&'static str> {
    let mut parts = Vec::new();
    if desired.roles.is_some() {
        parts.push(Part::Roles.as_str());
    }
    if desired.teams.is_some() {
        parts.push(Part::Teams.as_str());
    }
    if desired.users.is_some() {
        parts.push(Part::Users.as_str());
    }
    if desired.ip_whitelist.is_some() {
        parts.push(Part::IpWhitelist.as_str());
    }
    parts
}

/// A user as stored.
#[derive(Debug, Clone)]
struct StoredUser {
    id: i64,
    email: String,
    first_name: String,
    last_name: String,
    level: PermissionLevel,
    role_id: Option<i64>,
    team_ids: Vec<i64>,
    tags: BTreeMap<String, String>,
    password_hash: Option<String>,
    disabled: bool,
}

/// The store's permission model for this environment, read inside the transaction.
#[derive(Debug, Default)]
struct Snapshot {
    roles: BTreeMap<String, i64>,
    teams: BTreeMap<String, i64>,
    users: Vec<StoredUser>,
    document: Option<EnvironmentPermissions>,
    /// Team id → its rendering's document.
    renderings: BTreeMap<i64, Json>,
    ip_whitelist: Option<IpWhitelist>,
    /// The file that managed this environment so far.
    state_path: Option<String>,
}

impl Snapshot {
    async fn read(store: &Store, conn: &mut AnyConnection) -> Result<Self> {
        let (project, environment) = (store.project(), store.environment());
        let mut snapshot = Self::default();
        for (table, map) in [
            ("roles", &mut snapshot.roles),
            ("teams", &mut snapshot.teams),
        ] {
            let rows = sqlx::query(&format!(
                "SELECT id, name FROM {table} WHERE project = $1 ORDER BY id"
            ))
            .bind(project)
            .fetch_all(&mut *conn)
            .await?;
            for row in rows {
                map.insert(row.try_get(1)?, row.try_get(0)?);
            }
        }
        let members = sqlx::query(
            "SELECT m.user_id, m.team_id FROM team_members m JOIN users u ON u.id = m.user_id \
             WHERE u.project = $1 ORDER BY m.user_id, m.position, m.team_id",
        )
        .bind(project)
        .fetch_all(&mut *conn)
        .await?;
        let mut teams_of: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for row in members {
            teams_of
                .entry(row.try_get(0)?)
                .or_default()
                .push(row.try_get(1)?);
        }
        let rows = sqlx::query(
            "SELECT id, email, first_name, last_name, permission_level, role_id, tags, \
             password_hash, disabled FROM users WHERE project = $1 ORDER BY id",
        )
        .bind(project)
        .fetch_all(&mut *conn)
        .await?;
        for row in rows {
            let id: i64 = row.try_get(0)?;
            let level: String = row.try_get(4)?;
            let tags: String = row.try_get(6)?;
            snapshot.users.push(StoredUser {
                id,
                email: row.try_get(1)?,
                first_name: row.try_get(2)?,
                last_name: row.try_get(3)?,
                level: parse_level(&level)?,
                role_id: row.try_get(5)?,
                team_ids: teams_of.remove(&id).unwrap_or_default(),
                tags: serde_json::from_str(&tags).unwrap_or_default(),
                password_hash: row.try_get(7)?,
                disabled: row.try_get::<i64, _>(8)? != 0,
            });
        }
        let environment_doc =
            "SELECT document FROM environment_permissions WHERE project = $1 AND environment = $2";
        if let Some(row) = sqlx::query(environment_doc)
            .bind(project)
            .bind(environment)
            .fetch_optional(&mut *conn)
            .await?
        {
            snapshot.document = serde_json::from_str(&row.try_get::<String, _>(0)?).ok();
        }
        let ip_doc = "SELECT document FROM ip_whitelists WHERE project = $1 AND environment = $2";
        if let Some(row) = sqlx::query(ip_doc)
            .bind(project)
            .bind(environment)
            .fetch_optional(&mut *conn)
            .await?
        {
            snapshot.ip_whitelist = serde_json::from_str(&row.try_get::<String, _>(0)?).ok();
        }
        let rows = sqlx::query(
            "SELECT team_id, document FROM renderings WHERE project = $1 AND environment = $2",
        )
        .bind(project)
        .bind(environment)
        .fetch_all(&mut *conn)
        .await?;
        for row in rows {
            let body: RenderingBody =
                serde_json::from_str(&row.try_get::<String, _>(1)?).unwrap_or_default();
            snapshot.renderings.insert(
                row.try_get(0)?,
                rendering_json(&body.collections, &body.stats),
            );
        }
        snapshot.state_path = sqlx::query(
            "SELECT path FROM declarative_state WHERE project = $1 AND environment = $2",
        )
        .bind(project)
        .bind(environment)
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
        Ok(snapshot)
    }

    fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.teams.is_empty() && self.users.is_empty()
    }

    /// The admin log's baseline of a managed file taking over.
    fn baseline(&self, environment: &str) -> Json {
        json!({
            "name": environment,
            "roles": self.roles.keys().collect::<Vec<_>>(),
            "teams": self.teams.keys().collect::<Vec<_>>(),
            "users": self.users.iter().map(|u| &u.email).collect::<Vec<_>>(),
        })
    }

    /// What the file names that must already be in the store (the sections it leaves out), and
    /// what removing its sections' extra entries would break.
    fn check_references(&self, desired: &Desired) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut problem = |table: &str, key: String, message: String| {
            problems.push(Problem {
                table: table.to_owned(),
                key,
                message,
            });
        };
        if let Some(users) = &desired.users {
            for (index, user) in users.iter().enumerate() {
                let key = format!("users[{index}] ({})", user.email);
                if desired.roles.is_none()
                    && let Some(role) = &user.role
                    && !self.roles.contains_key(role)
                {
                    problem(
                        "users",
                        key.clone(),
                        format!(
                            "role {role:?} exists neither under [roles] nor in the store \
                             (canopy roles add)"
                        ),
                    );
                }
                if desired.teams.is_none() {
                    for team in &user.teams {
                        if !self.teams.contains_key(team) {
                            problem(
                                "users",
                                key.clone(),
                                format!(
                                    "team {team:?} exists neither under [teams] nor in the \
                                     store (canopy teams add)"
                                ),
                            );
                        }
                    }
                }
            }
        } else if let Some(roles) = &desired.roles {
            // Users are not managed: a role removed under them would silently take their rights.
            for user in &self.users {
                if let Some(role_id) = user.role_id
                    && let Some((name, _)) = self.roles.iter().find(|(_, id)| **id == role_id)
                    && !roles.contains_key(name)
                {
                    problem(
                        "roles",
                        format!("{name:?}"),
                        format!(
                            "is held by {} but not in the file, which would remove it: add the \
                             role, or give the user another role first",
                            user.email
                        ),
                    );
                }
            }
        }
        problems
    }

    fn user_by_email(&self, email: &str) -> Option<&StoredUser> {
        self.users
            .iter()
            .find(|u| u.email.eq_ignore_ascii_case(email))
    }
}

fn rendering_json(
    collections: &BTreeMap<String, crate::platform::documents::RenderingCollection>,
    stats: &[Json],
) -> Json {
    json!({"collections": collections, "stats": stats})
}

/// One application: the transaction, who logs, what was done.
struct Run<'a, 'c> {
    store: &'a Store,
    tx: &'a mut sqlx::Transaction<'c, sqlx::Any>,
    changes: Vec<String>,
    actor: Actor,
}

impl Run<'_, '_> {
    async fn log(
        &mut self,
        resource: &str,
        kind: &str,
        target: &str,
        previous: Option<Json>,
        new: Option<Json>,
    ) -> Result<()> {
        self.store
            .admin_log_on(
                &mut **self.tx,
                &self.actor,
                kind,
                resource,
                target,
                previous,
                new,
            )
            .await
    }

    async fn apply(&mut self, before: &Snapshot, checked: &Checked) -> Result<()> {
        let desired = &checked.desired;
        let project = self.store.project().to_owned();
        let environment = self.store.environment().to_owned();
        let now = now_ms();

        // Roles and teams first: users refer to them.
        let mut roles = before.roles.clone();
        let mut teams = before.teams.clone();
        for (table, wanted, ids, what) in [
            (
                "roles",
                desired.roles.as_ref().map(|r| r.keys().cloned().collect()),
                &mut roles,
                "role",
            ),
            (
                "teams",
                desired.teams.as_ref().map(|t| t.keys().cloned().collect()),
                &mut teams,
                "team",
            ),
        ] {
            let wanted: Option<BTreeSet<String>> = wanted;
            for name in wanted.iter().flatten() {
                if ids.contains_key(name) {
                    continue;
                }
                let id: i64 = sqlx::query(&format!(
                    "INSERT INTO {table} (project, name, created_at) VALUES ($1, $2, $3) \
                     RETURNING id"
                ))
                .bind(&project)
                .bind(name)
                .bind(now)
                .fetch_one(&mut **self.tx)
                .await?
                .try_get(0)?;
                if table == "teams" {
                    super::super::store::add_rendering(self.tx, &project, &environment, id).await?;
                }
                ids.insert(name.clone(), id);
                self.log(
                    what_resource(what),
                    "add",
                    &id.to_string(),
                    None,
                    Some(json!({"name": name})),
                )
                .await?;
                self.changes.push(format!("{what} {name:?} added"));
            }
        }

        if let Some(users) = &desired.users {
            self.apply_users(before, users, &roles, &teams).await?;
        }

        for (table, wanted, ids, what) in [
            (
                "roles",
                desired.roles.as_ref().map(|r| r.keys().cloned().collect()),
                &mut roles,
                "role",
            ),
            (
                "teams",
                desired.teams.as_ref().map(|t| t.keys().cloned().collect()),
                &mut teams,
                "team",
            ),
        ] {
            let Some(wanted): Option<BTreeSet<String>> = wanted else {
                continue;
            };
            let extra: Vec<(String, i64)> = ids
                .iter()
                .filter(|(name, _)| !wanted.contains(*name))
                .map(|(name, id)| (name.clone(), *id))
                .collect();
            for (name, id) in extra {
                sqlx::query(&format!(
                    "DELETE FROM {table} WHERE project = $1 AND id = $2"
                ))
                .bind(&project)
                .bind(id)
                .execute(&mut **self.tx)
                .await?;
                ids.remove(&name);
                self.log(
                    what_resource(what),
                    "remove",
                    &id.to_string(),
                    Some(json!({"name": name})),
                    None,
                )
                .await?;
                self.changes.push(format!("{what} {name:?} removed"));
            }
        }

        if let Some(rights) = &desired.roles {
            let document = Desired::document(rights, &roles);
            let previous = before.document.clone();
            if previous.as_ref() != Some(&document) {
                self.upsert_document("environment_permissions", &document)
                    .await?;
                self.log(
                    "environment",
                    "update",
                    &environment,
                    Some(json!({"name": environment, "permissions": previous})),
                    Some(json!({"name": environment, "permissions": document})),
                )
                .await?;
                self.changes.push(format!(
                    "permissions of environment {environment:?} updated"
                ));
            }
        }

        if let Some(wanted) = &desired.teams {
            for (name, team) in wanted {
                let Some(&team_id) = teams.get(name) else {
                    continue;
                };
                self.apply_rendering(before, name, team_id, team).await?;
            }
        }

        if let Some(whitelist) = &desired.ip_whitelist {
            let previous = before.ip_whitelist.clone().unwrap_or_default();
            if &previous != whitelist {
                self.upsert_document("ip_whitelists", whitelist).await?;
                self.log(
                    "environment",
                    "update",
                    &environment,
                    Some(json!({"name": environment, "ipWhitelist": previous})),
                    Some(json!({"name": environment, "ipWhitelist": whitelist})),
                )
                .await?;
                self.changes.push("IP whitelist updated".to_owned());
            }
        }

        match checked.mode {
            Mode::Managed => {
                let passwords: Vec<String> = desired
                    .users
                    .iter()
                    .flatten()
                    .filter(|u| u.password_hash.is_some())
                    .map(|u| u.email.to_lowercase())
                    .collect();
                sqlx::query(
                    "INSERT INTO declarative_state (project, environment, path, digest, parts, \
                     document, applied_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (project, environment) DO UPDATE SET path = excluded.path, \
                     digest = excluded.digest, parts = excluded.parts, \
                     document = excluded.document, applied_at = excluded.applied_at",
                )
                .bind(&project)
                .bind(&environment)
                .bind(checked.path.display().to_string())
                .bind(&checked.digest)
                .bind(json!(parts(desired)).to_string())
                .bind(json!({"passwords": passwords}).to_string())
                .bind(now)
                .execute(&mut **self.tx)
                .await?;
            }
            // A seed file leaves nothing managed; one that managed before gives its parts back.
            Mode::Seed => {
                sqlx::query(
                    "DELETE FROM declarative_state WHERE project = $1 AND environment = $2",
                )
                .bind(&project)
                .bind(&environment)
                .execute(&mut **self.tx)
                .await?;
            }
        }
        Ok(())
    }

    async fn apply_users(
        &mut self,
        before: &Snapshot,
        users: &[DesiredUser],
        roles: &BTreeMap<String, i64>,
        teams: &BTreeMap<String, i64>,
    ) -> Result<()> {
        let project = self.store.project().to_owned();
        let now = now_ms();
        let named = |user: &StoredUser| -> User {
            User {
                id: user.id,
                email: user.email.clone(),
                first_name: user.first_name.clone(),
                last_name: user.last_name.clone(),
                permission_level: user.level,
                role: user.role_id.and_then(|id| {
                    roles
                        .iter()
                        .chain(before.roles.iter())
                        .find(|(_, rid)| **rid == id)
                        .map(|(name, _)| Role {
                            id,
                            name: name.clone(),
                        })
                }),
                teams: user
                    .team_ids
                    .iter()
                    .filter_map(|tid| {
                        teams
                            .iter()
                            .chain(before.teams.iter())
                            .find(|(_, id)| *id == tid)
                            .map(|(name, _)| Team {
                                id: *tid,
                                name: name.clone(),
                            })
                    })
                    .collect(),
                tags: user.tags.clone(),
                disabled: user.disabled,
                has_password: user.password_hash.is_some(),
            }
        };
        let mut kept = BTreeSet::new();
        for wanted in users {
            let role_id = wanted.role.as_ref().and_then(|r| roles.get(r).copied());
            let team_ids: Vec<i64> = wanted
                .teams
                .iter()
                .filter_map(|t| teams.get(t).copied())
                .collect();
            let existing = before.user_by_email(&wanted.email);
            let after = StoredUser {
                id: existing.map_or(0, |u| u.id),
                email: wanted.email.clone(),
                first_name: wanted.first_name.clone(),
                last_name: wanted.last_name.clone(),
                level: wanted.level,
                role_id,
                team_ids: team_ids.clone(),
                tags: wanted.tags.clone(),
                password_hash: wanted
                    .password_hash
                    .clone()
                    .or_else(|| existing.and_then(|u| u.password_hash.clone())),
                disabled: wanted.disabled,
            };
            let id = match existing {
                Some(existing) => {
                    kept.insert(existing.id);
                    let same = existing.email == after.email
                        && existing.first_name == after.first_name
                        && existing.last_name == after.last_name
                        && existing.level == after.level
                        && existing.role_id == after.role_id
                        && existing.team_ids == after.team_ids
                        && existing.tags == after.tags
                        && existing.disabled == after.disabled
                        && existing.password_hash == after.password_hash;
                    if same {
                        continue;
                    }
                    sqlx::query(
                        "UPDATE users SET email = $1, first_name = $2, last_name = $3, \
                         permission_level = $4, role_id = $5, tags = $6, password_hash = $7, \
                         disabled = $8, updated_at = $9 WHERE project = $10 AND id = $11",
                    )
                    .bind(&after.email)
                    .bind(&after.first_name)
                    .bind(&after.last_name)
                    .bind(after.level.as_str())
                    .bind(after.role_id)
                    .bind(serde_json::to_string(&after.tags).unwrap_or_else(|_| "{}".into()))
                    .bind(&after.password_hash)
                    .bind(i64::from(after.disabled))
                    .bind(now)
                    .bind(&project)
                    .bind(existing.id)
                    .execute(&mut **self.tx)
                    .await?;
                    if existing.team_ids != after.team_ids {
                        sqlx::query("DELETE FROM team_members WHERE user_id = $1")
                            .bind(existing.id)
                            .execute(&mut **self.tx)
                            .await?;
                        self.insert_members(existing.id, &team_ids).await?;
                    }
                    let after = StoredUser {
                        id: existing.id,
                        ..after
                    };
                    self.log(
                        "user-project",
                        "update",
                        &existing.id.to_string(),
                        Some(user_value(&named(existing))),
                        Some(user_value(&named(&after))),
                    )
                    .await?;
                    self.changes.push(format!("user {} updated", after.email));
                    continue;
                }
                None => sqlx::query(
                    "INSERT INTO users (project, email, first_name, last_name, \
                         permission_level, role_id, tags, password_hash, disabled, created_at, \
                         updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                         RETURNING id",
                )
                .bind(&project)
                .bind(&after.email)
                .bind(&after.first_name)
                .bind(&after.last_name)
                .bind(after.level.as_str())
                .bind(after.role_id)
                .bind(serde_json::to_string(&after.tags).unwrap_or_else(|_| "{}".into()))
                .bind(&after.password_hash)
                .bind(i64::from(after.disabled))
                .bind(now)
                .fetch_one(&mut **self.tx)
                .await?
                .try_get::<i64, _>(0)?,
            };
            self.insert_members(id, &team_ids).await?;
            let after = StoredUser { id, ..after };
            self.log(
                "user-project",
                "add",
                &id.to_string(),
                None,
                Some(user_value(&named(&after))),
            )
            .await?;
            self.changes.push(format!("user {} added", after.email));
        }
        for user in &before.users {
            if kept.contains(&user.id) {
                continue;
            }
            sqlx::query("DELETE FROM users WHERE project = $1 AND id = $2")
                .bind(&project)
                .bind(user.id)
                .execute(&mut **self.tx)
                .await?;
            self.log(
                "user-project",
                "remove",
                &user.id.to_string(),
                Some(user_value(&named(user))),
                None,
            )
            .await?;
            self.changes.push(format!("user {} removed", user.email));
        }
        Ok(())
    }

    async fn insert_members(&mut self, user_id: i64, team_ids: &[i64]) -> Result<()> {
        for (position, team_id) in team_ids.iter().enumerate() {
            sqlx::query(
                "INSERT INTO team_members (team_id, user_id, position) VALUES ($1, $2, $3)",
            )
            .bind(team_id)
            .bind(user_id)
            .bind(i64::try_from(position).unwrap_or(i64::MAX))
            .execute(&mut **self.tx)
            .await?;
        }
        Ok(())
    }

    async fn apply_rendering(
        &mut self,
        before: &Snapshot,
        name: &str,
        team_id: i64,
        team: &DesiredTeam,
    ) -> Result<()> {
        let wanted = rendering_json(&team.collections, &team.stats);
        let previous = before.renderings.get(&team_id);
        let empty = rendering_json(&BTreeMap::new(), &[]);
        if previous.unwrap_or(&empty) == &wanted {
            // An absent rendering and an empty one mean the same: no scope, no segment.
            return Ok(());
        }
        let body = RenderingBody {
            collections: team.collections.clone(),
            stats: team.stats.clone(),
        };
        let text = serde_json::to_string(&body)
            .map_err(|e| Error::Invalid(format!("rendering of team {name:?}: {e}")))?;
        sqlx::query(
            "INSERT INTO renderings (project, environment, team_id, document, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, environment, team_id) \
             DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at",
        )
        .bind(self.store.project())
        .bind(self.store.environment())
        .bind(team_id)
        .bind(&text)
        .bind(now_ms())
        .execute(&mut **self.tx)
        .await?;
        self.log(
            "team",
            "update",
            &team_id.to_string(),
            previous.map(|p| json!({"name": name, "rendering": p})),
            Some(json!({"name": name, "rendering": wanted})),
        )
        .await?;
        self.changes.push(format!(
            "scopes, segments and charts of team {name:?} updated"
        ));
        Ok(())
    }

    async fn upsert_document(
        &mut self,
        table: &'static str,
        document: &impl serde::Serialize,
    ) -> Result<()> {
        let text =
            serde_json::to_string(document).map_err(|e| Error::Invalid(format!("{table}: {e}")))?;
        sqlx::query(&format!(
            "INSERT INTO {table} (project, environment, document, updated_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (project, environment) DO UPDATE SET \
             document = excluded.document, updated_at = excluded.updated_at"
        ))
        .bind(self.store.project())
        .bind(self.store.environment())
        .bind(text)
        .bind(now_ms())
        .execute(&mut **self.tx)
        .await?;
        Ok(())
    }
}

fn what_resource(what: &str) -> &'static str {
    if what == "role" { "role" } else { "team" }
}
