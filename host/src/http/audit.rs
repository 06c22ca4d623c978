//! The record-history routes of the audit trail (`routes/access/audit-trail.ts` and
//! `audit-trail-correlation.ts`), served only when `auditTrail` is on:
//!
//! - `GET /_audit-trail/{collection}/{id}`: one record's history, newest first by default,
//!   paged (`page[number]`, `page[size]` ≤ 100), filtered by `userIds`, `startDate`, `endDate`,
//!   `fields` and `search`; `{data, meta: {count, availableUsers (first page only)}}`.
//! - `GET /_audit-trail/{collection}/{id}/state?at=`: the record's audited values at an instant,
//!   reverted from its values now through the newer entries; `{data}`.
//! - `GET /_audit-trail/correlation/{key}?collection=&recordId=` and
//!   `GET|POST /_audit-trail/correlations` (`correlationKeys`): a record's entries recorded under
//!   correlation ids, oldest first; `{data}`.
//!
//! Each asks `read` on the collection. With a scope, a record that still exists outside it is a
//! 404, as in the agent; a record gone entirely has no values left to check the scope against,
//! so its history is served, but with the recorded values withheld (the agent withholds only
//! those that fail the scope: see docs/compatibility.md).

use std::sync::LazyLock;

use axum::Router;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone as _, Utc};
use chrono_tz::Tz;
use regex::Regex;
use serde_json::{Value as Json, json};
use uuid::Uuid;

use super::caller::Authenticated;
use super::error::{ApiError, ApiResult};
use super::middleware::RequestId;
use super::{JsonBody, SharedState};
use crate::agent;
use crate::agent::query_string::{QueryString, match_ids};
use crate::auth::CollectionRight;
use crate::customizer::audit::{audited_columns, values_of};
use crate::datasource::{Caller, ConditionTree, Filter, Projection, unpack_id};
use crate::ops::{audit, permission};
use crate::platform::audit::{AuditRecord, AuditStore, HistoryQuery, Order, revert};

/// `page[size]` when absent or unreadable, and its cap (the agent's).
const DEFAULT_PAGE_SIZE: u64 = 20;
const MAX_PAGE_SIZE: u64 = 100;

/// The most correlation ids one lookup may name.
const MAX_CORRELATION_KEYS: usize = 1000;

const NOT_AT_TIMESTAMP: &str = "Record did not exist at this timestamp";

/// The routes, or none when the trail is off (the paths then answer 404, as in the agent).
pub fn router(state: &SharedState) -> Router<SharedState> {
    if state.audit.is_none() {
        return Router::new();
    }
    Router::new()
        .route("/_audit-trail/correlation/{key}", get(correlation))
        .route(
            "/_audit-trail/correlations",
            get(correlations).post(correlations),
        )
        .route("/_audit-trail/{collection}/{id}", get(history))
        .route("/_audit-trail/{collection}/{id}/state", get(state_at))
}

/// The caller of an audit route: authenticated, in `?timezone=` when given, else UTC (the agent
/// parses these routes' caller with a default timezone).
struct AuditContext {
    caller: Caller,
    query: QueryString,
}

impl FromRequestParts<SharedState> for AuditContext {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        let Authenticated(claims) = Authenticated::from_request_parts(parts, state).await?;
        let query = QueryString::parse(parts.uri.query().unwrap_or(""));
        let timezone = match query.get("timezone").filter(|t| !t.is_empty()) {
            Some(name) => Caller::parse_timezone(&name)?,
            None => chrono_tz::UTC,
        };
        let request_id = match parts.extensions.get::<RequestId>() {
            Some(request_id) => {
                request_id.mark_used();
                request_id.id
            }
            None => Uuid::new_v4(),
        };
        Ok(Self {
            caller: claims.into_caller(timezone, request_id),
            query,
        })
    }
}

fn store(state: &SharedState) -> ApiResult<&AuditStore> {
    Ok(audit::store(state)?)
}

/// A failure of the audit database: a 500 whose detail is only logged.
fn storage(error: &crate::platform::Error) -> ApiError {
    audit::storage(error).into()
}

fn not_found(message: &str) -> ApiError {
    agent::Error::NotFound(message.to_owned()).into()
}

/// `GET /_audit-trail/{collection}/{id}`.
async fn history(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    context: AuditContext,
) -> ApiResult<Response> {
    let caller = &context.caller;
    let trail = audit::open(&state, caller, &name, &id).await?;
    let query = &context.query;
    let (skip, limit) = pagination(query);
    let order = match query.get("sort").as_deref() {
        Some("timestamp") => Order::OldestFirst,
        _ => Order::NewestFirst,
    };
    let filters = HistoryQuery {
        user_ids: user_ids(query),
        start: boundary(query, "startDate", caller.timezone, Bound::Start)?,
        end: boundary(query, "endDate", caller.timezone, Bound::End)?,
        fields: list(query.get("fields").as_deref()),
        search: query
            .get("search")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()),
        ..HistoryQuery::default()
    };
    // The authors only on the first fetch: later pages keep the list the client already has.
    let first = query.get("page[number]").is_none();
    let page = audit::history(&trail, filters, order, skip, limit, first).await?;
    let mut meta = json!({ "count": page.count });
    if let Some(authors) = page.authors {
        meta["availableUsers"] = serde_json::to_value(authors).unwrap_or_default();
    }
    Ok(super::json(&json!({ "data": page.entries, "meta": meta })))
}

/// `GET /_audit-trail/{collection}/{id}/state?at=`.
async fn state_at(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    context: AuditContext,
) -> ApiResult<Response> {
    let audit = store(&state)?;
    let caller = &context.caller;
    let schema = audit::readable(&state, caller, &name).await?;
    let at = boundary(&context.query, "at", caller.timezone, Bound::Start)?
        .ok_or_else(|| agent::Error::validation("Missing \"at\" query parameter"))?;
    let scope = permission::scope(&state, caller, schema).await?;
    let columns = audited_columns(schema);
    let filter = Filter::new(ConditionTree::intersect([
        Some(match_ids(schema, &[unpack_id(schema, &id)?])?),
        scope.clone(),
    ]));
    let current = state
        .datasource
        .collection(&name)?
        .list(caller, &filter, &Projection(columns.clone()))
        .await?
        .first()
        .map(|record| values_of(schema, &columns, record));
    // Missing within the scope but present outside it: out of scope, not gone.
    if current.is_none()
        && scope.is_some()
        && audit::exists(&state, caller, schema, &id, None).await?
    {
        return Err(not_found(NOT_AT_TIMESTAMP));
    }
    let newer = audit
        .history(
            &HistoryQuery {
                collection: name,
                record_id: id,
                start: Some(at),
                ..HistoryQuery::default()
            },
            Order::NewestFirst,
            0,
            None,
        )
        .await
        .map_err(|e| storage(&e))?;
    // An entry at `at` itself is already part of the state at `at`; a pending entry's change may
    // never have happened.
    let newer: Vec<AuditRecord> = newer
        .into_iter()
        .filter(|e| e.timestamp_ms != at && e.status == "done")
        .collect();
    let values = revert(current, &newer).ok_or_else(|| not_found(NOT_AT_TIMESTAMP))?;
    Ok(super::json(&json!({ "data": values })))
}

/// `GET /_audit-trail/correlation/{key}`.
async fn correlation(
    State(state): State<SharedState>,
    Path(key): Path<String>,
    context: AuditContext,
) -> ApiResult<Response> {
    let audit = store(&state)?;
    let (collection, record_id) = target(&state, &context, None).await?;
    let data = audit
        .by_correlation(&collection, &record_id, &[key])
        .await
        .map_err(|e| storage(&e))?;
    Ok(super::json(&json!({ "data": data })))
}

/// `GET|POST /_audit-trail/correlations`: the keys from the body's `correlationKeys` array,
/// else from the comma-separated query parameter.
async fn correlations(
    State(state): State<SharedState>,
    context: AuditContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let audit = store(&state)?;
    let (collection, record_id) = target(&state, &context, Some(&body)).await?;
    let keys: Vec<String> = match body.get("correlationKeys").and_then(Json::as_array) {
        Some(keys) => keys
            .iter()
            .map(|key| match key {
                Json::String(s) => s.trim().to_owned(),
                other => other.to_string(),
            })
            .filter(|key| !key.is_empty())
            .collect(),
        None => list(context.query.get("correlationKeys").as_deref()),
    };
    if keys.len() > MAX_CORRELATION_KEYS {
        return Err(agent::Error::validation(format!(
            "Invalid correlationKeys: at most {MAX_CORRELATION_KEYS} keys, not {}",
            keys.len()
        ))
        .into());
    }
    let data = audit
        .by_correlation(&collection, &record_id, &keys)
        .await
        .map_err(|e| storage(&e))?;
    Ok(super::json(&json!({ "data": data })))
}

/// The record a correlation lookup is about (`collection`, `recordId` from the query, else the
/// body), readable by the caller.
async fn target(
    state: &SharedState,
    context: &AuditContext,
    body: Option<&Json>,
) -> ApiResult<(String, String)> {
    let param = |key: &str| -> Option<String> {
        context
            .query
            .get(key)
            .map(|v| v.into_owned())
            .or_else(|| match body?.get(key)? {
                Json::String(s) => Some(s.clone()),
                Json::Null => None,
                other => Some(other.to_string()),
            })
            .filter(|v| !v.is_empty())
    };
    let collection =
        param("collection").ok_or_else(|| agent::Error::validation("Missing collection"))?;
    let record_id =
        param("recordId").ok_or_else(|| agent::Error::validation("Missing recordId"))?;
    let caller = &context.caller;
    let schema = state
        .datasource
        .schema()
        .collections
        .get(&collection)
        .ok_or_else(|| crate::datasource::Error::MissingCollection(collection.clone()))?;
    state
        .permissions
        .can(caller, &collection, CollectionRight::Read)
        .await?;
    let scope = permission::scope(state, caller, schema).await?;
    audit::visibility(state, caller, schema, &record_id, &scope).await?;
    Ok((collection, record_id))
}

/// `page[number]` (1-based) and `page[size]` as skip and limit; unreadable values fall back to
/// the defaults, as in the agent.
fn pagination(query: &QueryString) -> (u64, u64) {
    let read = |key: &str| {
        query
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&n| n >= 1)
    };
    let size = read("page[size]").map_or(DEFAULT_PAGE_SIZE, |s| s.min(MAX_PAGE_SIZE));
    let number = read("page[number]").unwrap_or(1);
    (number.saturating_sub(1).saturating_mul(size), size)
}

/// `userIds`: comma-separated integers; other tokens are dropped, as in the agent.
fn user_ids(query: &QueryString) -> Vec<i64> {
    list(query.get("userIds").as_deref())
        .iter()
        .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// A comma-separated list, trimmed, blanks dropped.
fn list(raw: Option<&str>) -> Vec<String> {
    raw.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Which end of a period a date bound is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Start,
    End,
}

/// A date bound of the query in unix milliseconds (`None` when absent or empty): a day
/// (`YYYY-MM-DD`, its first or last millisecond), a wall-clock time (`YYYY-MM-DD[T ]HH:mm[:ss]`,
/// minutes alone ending at `:59.999`) in the request's timezone, or an instant with its own
/// offset. Anything else is a 400 naming the value.
fn boundary(query: &QueryString, key: &str, tz: Tz, bound: Bound) -> ApiResult<Option<i64>> {
    let Some(raw) = query.get(key).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    parse_boundary(&raw, tz, bound)
        .map(|instant| Some(instant.timestamp_millis()))
        .ok_or_else(|| {
            agent::Error::validation(format!(
                "Invalid date: \"{raw}\" (expected YYYY-MM-DD, YYYY-MM-DDTHH:mm, or an ISO 8601 \
                 instant)"
            ))
            .into()
        })
}

fn parse_boundary(raw: &str, tz: Tz, bound: Bound) -> Option<DateTime<Utc>> {
    if has_offset(raw) {
        return crate::datasource::parse_datetime(raw).or_else(|| {
            DateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M%#z")
                .ok()
                .map(|d| d.to_utc())
        });
    }
    let local = |naive: NaiveDateTime| {
        tz.from_local_datetime(&naive)
            .earliest()
            .map(|d| d.with_timezone(&Utc))
    };
    if raw.len() == 10 {
        let day = NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok()?;
        return match bound {
            Bound::Start => local(day.and_hms_opt(0, 0, 0)?),
            Bound::End => local(day.and_hms_milli_opt(23, 59, 59, 999)?),
        };
    }
    let text = raw.replacen(' ', "T", 1);
    if let Ok(naive) = NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S") {
        return local(naive);
    }
    let naive = NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M").ok()?;
    match bound {
        Bound::Start => local(naive),
        // Checked: the last minute of chrono's range has no 59.999 s after it.
        Bound::End => local(naive.checked_add_signed(chrono::Duration::milliseconds(59_999))?),
    }
}

/// Whether a date carries its own offset (`Z`, `+02:00`, `-0500`), as the agent tells.
fn has_offset(raw: &str) -> bool {
    static OFFSET: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"[Zz]$|[+-]\d{2}:?\d{2}$").ok());
    OFFSET.as_ref().is_some_and(|re| re.is_match(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(raw: &str, tz: Tz, bound: Bound) -> Option<String> {
        parse_boundary(raw, tz, bound)
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    }

    #[test]
    fn date_bounds_follow_the_agent() {
        let paris: Tz = "Europe/Paris".parse().unwrap();
        assert_eq!(
            ms("2024-03-01", paris, Bound::Start).unwrap(),
            "2024-02-29T23:00:00.000Z"
        );
        assert_eq!(
            ms("2024-03-01", paris, Bound::End).unwrap(),
            "2024-03-01T22:59:59.999Z"
        );
        assert_eq!(
            ms("2024-03-01T10:15", chrono_tz::UTC, Bound::End).unwrap(),
            "2024-03-01T10:15:59.999Z"
        );
        assert_eq!(
            ms("2024-03-01 10:15", chrono_tz::UTC, Bound::Start).unwrap(),
            "2024-03-01T10:15:00.000Z"
        );
        assert_eq!(
            ms("2024-03-01T10:15:30", chrono_tz::UTC, Bound::End).unwrap(),
            "2024-03-01T10:15:30.000Z"
        );
        assert_eq!(
            ms("2024-03-01T10:15:30.250Z", paris, Bound::Start).unwrap(),
            "2024-03-01T10:15:30.250Z"
        );
        assert_eq!(
            ms("2024-03-01T10:15:30+02:00", paris, Bound::Start).unwrap(),
            "2024-03-01T08:15:30.000Z"
        );
        assert_eq!(
            ms("2024-03-01T10:15:30-0500", paris, Bound::Start).unwrap(),
            "2024-03-01T15:15:30.000Z"
        );
        for bad in [
            "yesterday",
            "2024-13-01",
            "2024-03-01T25:00",
            "1",
            "2024-03-01Tnoon",
        ] {
            assert_eq!(ms(bad, paris, Bound::Start), None, "{bad}");
        }
    }

    #[test]
    fn pages_and_ids_fall_back_like_the_agent() {
        let q = |s: &str| QueryString::parse(s);
        assert_eq!(pagination(&q("")), (0, 20));
        assert_eq!(
            pagination(&q("page%5Bnumber%5D=3&page%5Bsize%5D=500")),
            (200, 100)
        );
        assert_eq!(
            pagination(&q("page%5Bnumber%5D=x&page%5Bsize%5D=0")),
            (0, 20)
        );
        assert_eq!(user_ids(&q("userIds=12,abc,%2045,-3")), [12, 45]);
        assert_eq!(list(Some(" a, ,b ")), ["a", "b"]);
    }
}
