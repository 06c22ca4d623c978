//! Application tokens: "My tokens" (any signed-in user: their own, as `/v1/…/tokens` allows)
//! and the administration's list of every token (admins). Both create tokens acting for the
//! signed-in user; the secret is shown once, in the answer to the creation, never again.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{NaiveDate, TimeZone as _};

use super::{Tab, admin_layout, tabs, when};
use crate::console::data::Data;
use crate::console::pages::{Layout, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first};
use crate::console::{Error, Result};
use crate::ops;
use crate::platform::{NewToken, Scope, Token};
use crate::state::SharedState;

/// A token as a row of the list.
struct Row {
    id: String,
    name: String,
    owner: String,
    scopes: String,
    hint: String,
    created: String,
    last_used: String,
    expires: String,
}

fn row(token: &Token, owner: String, tz: chrono_tz::Tz) -> Row {
    let scopes: Vec<&str> = token.scopes.iter().map(|s| s.as_str()).collect();
    Row {
        id: token.id.clone(),
        name: token.name.clone(),
        owner,
        scopes: scopes.join(", "),
        hint: token.hint.clone(),
        created: when(token.created_at, tz),
        last_used: token
            .last_used_at
            .map_or_else(|| "never".to_owned(), |at| when(at, tz)),
        expires: token
            .expires_at
            .map_or_else(|| "never".to_owned(), |at| when(at, tz)),
    }
}

/// The creation form's values and its refusals, field by field.
#[derive(Default)]
struct Draft {
    name: String,
    scopes: Vec<String>,
    expires: String,
    name_error: Option<String>,
    scopes_error: Option<String>,
    expires_error: Option<String>,
    error: Option<String>,
}

/// A token just made: its name and, this once, its secret.
struct Created {
    name: String,
    secret: String,
}

#[derive(Template)]
#[template(path = "admin_tokens.html")]
struct TokensPage {
    layout: Layout,
    /// The administration's tabs; empty on "My tokens".
    tabs: Vec<Tab>,
    heading: &'static str,
    /// Whether the list shows each token's owner (the administration's list).
    owners: bool,
    rows: Vec<Row>,
    /// Where the creation form posts.
    action: String,
    scopes: Vec<(&'static str, bool)>,
    draft: Draft,
    created: Option<Created>,
    notice: Option<&'static str>,
    /// The project's name, for the `/v1/project/{project}/…` paths a token calls.
    project: String,
}

/// `GET /console/tokens`: the user's own tokens and the creation form.
pub async fn mine(
    State(state): State<SharedState>,
    session: Session,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<Response> {
    let notice = revoked_notice(query.as_deref());
    render(&state, &session, false, Draft::default(), None, notice).await
}

/// `GET /console/admin/tokens`: every token of the project (admins).
pub async fn all(
    State(state): State<SharedState>,
    session: Session,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<Response> {
    let notice = revoked_notice(query.as_deref());
    render(&state, &session, true, Draft::default(), None, notice).await
}

fn revoked_notice(query: Option<&str>) -> Option<&'static str> {
    query
        .is_some_and(|q| q.split('&').any(|p| p == "revoked=1"))
        .then_some("The token was revoked: it no longer works.")
}

async fn render(
    state: &SharedState,
    session: &Session,
    admin: bool,
    draft: Draft,
    created: Option<Created>,
    notice: Option<&'static str>,
) -> Result<Response> {
    let tz = session.caller.timezone;
    let (layout, rows) = if admin {
        let layout =
            admin_layout(state, session, "tokens", "Application tokens".to_owned()).await?;
        let rows = ops::tokens::all(&state.ops, &session.caller)
            .await?
            .into_iter()
            .map(|owned| row(&owned.token, owned.owner, tz))
            .collect();
        (layout, rows)
    } else {
        let data = Data::new(state, &session.caller);
        let layout = Layout::new(session, &data, "tokens", "My tokens".to_owned()).await?;
        let rows = ops::tokens::mine(&state.ops, &session.caller)
            .await?
            .iter()
            .map(|token| row(token, session.caller.email.clone(), tz))
            .collect();
        (layout, rows)
    };
    let scopes = Scope::ALL
        .iter()
        .map(|s| (s.as_str(), draft.scopes.iter().any(|c| c == s.as_str())))
        .collect();
    let status = if draft.error.is_some()
        || draft.name_error.is_some()
        || draft.scopes_error.is_some()
        || draft.expires_error.is_some()
    {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &TokensPage {
            tabs: if admin {
                tabs(&session.base, "tokens")
            } else {
                Vec::new()
            },
            heading: if admin {
                "Application tokens"
            } else {
                "My tokens"
            },
            owners: admin,
            rows,
            action: if admin {
                format!("{}/admin/tokens", session.base)
            } else {
                format!("{}/tokens", session.base)
            },
            scopes,
            draft,
            created,
            notice,
            project: state
                .store
                .as_ref()
                .map(|store| store.project().to_owned())
                .unwrap_or_default(),
            layout,
        },
    )
}

/// `POST /console/tokens`: makes a token acting for the user.
pub async fn create(
    State(state): State<SharedState>,
    session: Session,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    create_in(&state, &session, false, &headers, &body).await
}

/// `POST /console/admin/tokens`: the same, from the administration's page.
pub async fn create_admin(
    State(state): State<SharedState>,
    session: Session,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    ops::tokens::require_admin(&state.ops, &session.caller).await?;
    create_in(&state, &session, true, &headers, &body).await
}

async fn create_in(
    state: &SharedState,
    session: &Session,
    admin: bool,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response> {
    let pairs = session.form(headers, body)?;
    let mut draft = Draft {
        name: first(&pairs, "name").unwrap_or("").trim().to_owned(),
        scopes: pairs
            .iter()
            .filter(|(k, _)| k == "scope")
            .map(|(_, v)| v.clone())
            .collect(),
        expires: first(&pairs, "expires").unwrap_or("").trim().to_owned(),
        ..Draft::default()
    };
    if draft.name.is_empty() {
        draft.name_error = Some("Give the token a name, to recognise it later.".to_owned());
    }
    let scopes = match crate::platform::tokens::parse_scopes(&draft.scopes) {
        Ok(scopes) => scopes,
        Err(error) => {
            draft.scopes_error = Some(error.to_string());
            Vec::new()
        }
    };
    let expires_at = if draft.expires.is_empty() {
        None
    } else {
        match end_of_day(&draft.expires, session.caller.timezone) {
            Some(at) => Some(at),
            None => {
                draft.expires_error = Some("Pick a date (YYYY-MM-DD).".to_owned());
                None
            }
        }
    };
    if draft.name_error.is_some() || draft.scopes_error.is_some() || draft.expires_error.is_some() {
        return render(state, session, admin, draft, None, None).await;
    }
    let new = NewToken {
        name: draft.name.clone(),
        scopes,
        expires_at,
    };
    match ops::tokens::create(&state.ops, &session.caller, new).await {
        Ok((token, secret)) => {
            let created = Created {
                name: token.name.clone(),
                secret: secret.expose().to_owned(),
            };
            render(state, session, admin, Draft::default(), Some(created), None).await
        }
        // The store's refusals name what is wrong: the name, the expiry.
        Err(ops::Error::Platform(crate::platform::Error::Invalid(message))) => {
            if message.contains("expir") {
                draft.expires_error = Some("The expiry must be in the future.".to_owned());
            } else if message.contains("name") {
                draft.name_error = Some(message);
            } else {
                draft.error = Some(message);
            }
            render(state, session, admin, draft, None, None).await
        }
        Err(other) => Err(other.into()),
    }
}

/// The last millisecond of the day `date` (`YYYY-MM-DD`) in `tz`.
fn end_of_day(date: &str, tz: chrono_tz::Tz) -> Option<i64> {
    let day = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    let last = day.and_hms_milli_opt(23, 59, 59, 999)?;
    Some(tz.from_local_datetime(&last).earliest()?.timestamp_millis())
}

#[derive(Template)]
#[template(path = "admin_revoke.html")]
struct RevokePage {
    layout: Layout,
    name: String,
    owner: String,
    action: String,
    back: String,
    from_admin: bool,
}

/// Where a revocation goes back to: the administration's list if it came from there.
fn back(session: &Session, from_admin: bool) -> String {
    if from_admin {
        format!("{}/admin/tokens", session.base)
    } else {
        format!("{}/tokens", session.base)
    }
}

/// `GET /console/tokens/{id}/revoke`: which token, and a confirmation.
pub async fn revoke_confirm(
    State(state): State<SharedState>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response> {
    // A user sees their own tokens; an admin everyone's.
    let own = ops::tokens::mine(&state.ops, &session.caller).await?;
    let (token, owner, from_admin) = if let Some(token) = own.into_iter().find(|t| t.id == id) {
        let admin = ops::tokens::require_admin(&state.ops, &session.caller)
            .await
            .is_ok();
        (token, session.caller.email.clone(), admin)
    } else {
        // Someone else's token is not a non-admin's business, not even its existence.
        let listed = ops::tokens::all(&state.ops, &session.caller)
            .await
            .unwrap_or_default();
        let found = listed.into_iter().find(|o| o.token.id == id);
        let owned = found.ok_or_else(|| Error::NotFound("There is no such token.".to_owned()))?;
        (owned.token, owned.owner, true)
    };
    let data = Data::new(&state, &session.caller);
    let current = if from_admin { "admin:tokens" } else { "tokens" };
    let layout = Layout::new(
        &session,
        &data,
        current,
        format!("Revoke the token {}", token.name),
    )
    .await?;
    page(
        StatusCode::OK,
        &RevokePage {
            layout,
            name: token.name,
            owner,
            action: format!("{}/tokens/{}/revoke", session.base, token.id),
            back: back(&session, from_admin),
            from_admin,
        },
    )
}

/// `POST /console/tokens/{id}/revoke`: revokes it; it stops working at once.
pub async fn revoke(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let verifier = state.tokens.as_deref();
    ops::tokens::revoke(&state.ops, &session.caller, &id, verifier).await?;
    let from_admin = first(&pairs, "back") == Some("admin");
    Ok(Redirect::to(&format!("{}?revoked=1", back(&session, from_admin))).into_response())
}
