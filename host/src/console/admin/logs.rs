//! The activity log and the admin log (admins), filtered by user, collection (activity) or
//! resource (admin log), action or change, and a date range, newest first, a page at a time.
//! The filters are a plain GET form: a filtered page is a link to share.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{NaiveDate, TimeZone as _};
use chrono_tz::Tz;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use super::{Tab, admin_layout, tabs, when};
use crate::console::Result;
use crate::console::pages::{Layout, page};
use crate::console::session::{Session, first, form_pairs};
use crate::ops;
use crate::platform::activity::{Action, ActivityFilter};
use crate::platform::listing::DateRange;
use crate::platform::store::AdminLogFilter;
use crate::state::SharedState;

/// Entries per page.
const PAGE: i64 = 25;
/// The admin log's resources, as the store writes them.
const RESOURCES: [&str; 7] = [
    "user-project",
    "role",
    "team",
    "environment",
    crate::platform::tokens::ADMIN_LOG_RESOURCE,
    "workflow",
    crate::platform::charts::ADMIN_LOG_RESOURCE,
];

/// The filters as typed (kept in the form), and what is wrong with them.
#[derive(Default)]
struct Filters {
    /// `activity` or `admin`.
    log: String,
    user: String,
    collection: String,
    action: String,
    resource: String,
    from: String,
    to: String,
    /// The activity log's keyset cursor: entries after this id.
    after: String,
    /// The admin log's cursor: entries before this time (ms).
    before: String,
    error: Option<String>,
}

struct Entry {
    at: String,
    user: String,
    what: String,
    target: String,
    detail: String,
}

#[derive(Template)]
#[template(path = "admin_logs.html")]
struct LogsPage {
    layout: Layout,
    tabs: Vec<Tab>,
    filters: Filters,
    collections: Vec<String>,
    actions: &'static [&'static str],
    resources: [&'static str; 7],
    entries: Vec<Entry>,
    /// The link to the next (older) page, when there is one.
    older: Option<String>,
}

/// `yyyy-mm-dd` at `hour:59:59.999` or `00:00` in `tz`, in ms.
fn day_bound(text: &str, tz: Tz, end: bool) -> Option<i64> {
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    let time = if end {
        day.and_hms_milli_opt(23, 59, 59, 999)?
    } else {
        day.and_hms_opt(0, 0, 0)?
    };
    Some(tz.from_local_datetime(&time).earliest()?.timestamp_millis())
}

fn range(filters: &mut Filters, tz: Tz) -> DateRange {
    let mut range = DateRange::default();
    if !filters.from.is_empty() {
        range.gte = day_bound(&filters.from, tz, false);
        if range.gte.is_none() {
            filters.error = Some("The start date must be a date (YYYY-MM-DD).".to_owned());
        }
    }
    if !filters.to.is_empty() {
        range.lte = day_bound(&filters.to, tz, true);
        if range.lte.is_none() {
            filters.error = Some("The end date must be a date (YYYY-MM-DD).".to_owned());
        }
    }
    if let (Some(from), Some(to)) = (range.gte, range.lte)
        && from > to
    {
        filters.error = Some("The start date is after the end date.".to_owned());
    }
    range
}

fn some(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

/// This page's link with `filters` and one cursor.
fn link(base: &str, filters: &Filters, cursor: (&str, &str)) -> String {
    let pairs = [
        ("log", filters.log.as_str()),
        ("user", &filters.user),
        ("collection", &filters.collection),
        ("action", &filters.action),
        ("resource", &filters.resource),
        ("from", &filters.from),
        ("to", &filters.to),
        cursor,
    ];
    let query: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, NON_ALPHANUMERIC)))
        .collect();
    format!("{base}/admin/logs?{}", query.join("&"))
}

/// `GET /console/admin/logs?log=activity|admin&user=…&collection=…&action=…&resource=…&from=…&to=…`.
pub async fn logs(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let layout = admin_layout(&state, &session, "logs", "Logs".to_owned()).await?;
    let pairs = form_pairs(query.unwrap_or_default().as_bytes());
    let text = |key: &str| first(&pairs, key).unwrap_or("").trim().to_owned();
    let mut filters = Filters {
        log: if text("log") == "admin" {
            "admin".to_owned()
        } else {
            "activity".to_owned()
        },
        user: text("user"),
        collection: text("collection"),
        action: text("action"),
        resource: text("resource"),
        from: text("from"),
        to: text("to"),
        after: text("after"),
        before: text("before"),
        error: None,
    };
    let tz = session.caller.timezone;
    let created_at = range(&mut filters, tz);
    let mut entries = Vec::new();
    let mut older = None;
    if filters.error.is_none() && filters.log == "activity" {
        let action = match filters.action.as_str() {
            "" => None,
            name => match name.parse::<Action>() {
                Ok(action) => Some(action),
                Err(_) => {
                    filters.error = Some(format!("There is no action \"{name}\"."));
                    None
                }
            },
        };
        if filters.error.is_none() {
            let filter = ActivityFilter {
                limit: PAGE + 1,
                user_email: some(&filters.user),
                user_id: None,
                team_name: None,
                collection_name: some(&filters.collection),
                record_id: None,
                action,
                kind: None,
                created_at,
                starting_after: some(&filters.after),
            };
            let mut rows = ops::logs::activity(&state.ops, &session.caller, &filter).await?;
            if rows.len() as i64 > PAGE {
                rows.truncate(PAGE as usize);
                older = rows
                    .last()
                    .map(|last| link(&session.base, &filters, ("after", &last.id)));
            }
            entries = rows
                .into_iter()
                .map(|row| Entry {
                    at: when(row.created_at, tz),
                    user: row.user_email,
                    what: row.action,
                    target: row.collection_name.unwrap_or_default(),
                    detail: row.record_ids.join(", "),
                })
                .collect();
        }
    } else if filters.error.is_none() {
        let mut created_at = created_at;
        if let Ok(before) = filters.before.parse::<i64>() {
            created_at.lt = Some(before);
        }
        let resource = if RESOURCES.contains(&filters.resource.as_str()) {
            some(&filters.resource)
        } else {
            None
        };
        let filter = AdminLogFilter {
            limit: PAGE + 1,
            user_email: some(&filters.user),
            user_id: None,
            r#type: None,
            initiator: None,
            resource,
            created_at,
        };
        let mut rows = ops::logs::admin(&state.ops, &session.caller, &filter).await?;
        if rows.len() as i64 > PAGE {
            rows.truncate(PAGE as usize);
            older = rows.last().map(|last| {
                link(
                    &session.base,
                    &filters,
                    ("before", &last.created_at.to_string()),
                )
            });
        }
        entries = rows
            .into_iter()
            .map(|log| Entry {
                at: when(log.created_at, tz),
                user: log.actor_email.unwrap_or_else(|| log.initiator.clone()),
                what: log.r#type,
                target: log.resource,
                // The new value names what changed (a token's name, a user's email): never a
                // secret, which the store does not log.
                detail: log
                    .new_value
                    .or(log.previous_value)
                    .as_ref()
                    .and_then(|v| v.get("name").or_else(|| v.get("email")))
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect();
    }
    let status = if filters.error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &LogsPage {
            tabs: tabs(&session.base, "logs"),
            collections: state.ops.schema().collections.keys().cloned().collect(),
            actions: Action::NAMES,
            resources: RESOURCES,
            filters,
            entries,
            older,
            layout,
        },
    )
}
