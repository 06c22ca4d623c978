//! The query strings of the public API's list endpoints (notes, activity logs, admin logs,
//! platform-api.md §1.1): `limit` (1 to 100, default 10), string, id and enum filters, the
//! `.eq .lt .lte .gt .gte` date filters, and the envelope `{hasMore, parameters, data}` whose
//! `parameters` echoes the path parameters, the limit and every filter given, under the same keys.
//!
//! Unknown parameters are ignored (as the platform does, and so that a newer client's extra
//! filters do not break on an older server); a known one with a bad value is a 400 naming it.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde_json::{Map, Value as Json};

use super::{Error, Result};
use crate::platform::listing::DateRange;

pub const DEFAULT_LIMIT: i64 = 10;
pub const MAX_LIMIT: i64 = 100;

/// A parsed list query. Each typed getter reads one parameter, checks it, and records it for the
/// `parameters` echo.
#[derive(Debug)]
pub struct ListQuery {
    pub limit: i64,
    values: HashMap<String, String>,
    echo: Map<String, Json>,
}

impl ListQuery {
    /// Parses the raw query string; `path` are the path parameters to echo first
    /// (`projectName`, `environmentName`). A parameter given twice is refused: which of the two
    /// applies would be a guess.
    pub fn parse(raw: Option<&str>, path: &[(&str, &str)]) -> Result<Self> {
        let mut values = HashMap::new();
        for (key, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            if values.insert(key.to_string(), value.to_string()).is_some() {
                return Err(Error::field(&key, "is given more than once"));
            }
        }
        let mut echo = Map::new();
        for (name, value) in path {
            echo.insert((*name).to_owned(), Json::from(*value));
        }
        let limit = match values.get("limit") {
            None => DEFAULT_LIMIT,
            Some(raw) => raw
                .parse::<i64>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| {
                    Error::field("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
                })?,
        };
        echo.insert("limit".into(), limit.into());
        Ok(Self {
            limit,
            values,
            echo,
        })
    }

    /// A free-text filter (`teamName`, `collectionName`, `recordId`); an empty value is refused.
    pub fn text(&mut self, name: &str) -> Result<Option<String>> {
        let Some(value) = self.values.get(name).cloned() else {
            return Ok(None);
        };
        if value.is_empty() {
            return Err(Error::field(name, "must not be empty"));
        }
        self.echo.insert(name.to_owned(), value.clone().into());
        Ok(Some(value))
    }

    /// An e-mail filter (`userEmail`): compared as given, but it must look like an address.
    pub fn email(&mut self, name: &str) -> Result<Option<String>> {
        let value = self.text(name)?;
        if let Some(email) = &value {
            let valid = email
                .split_once('@')
                .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty());
            if !valid {
                return Err(Error::field(
                    name,
                    format!("{email:?} is not an e-mail address"),
                ));
            }
        }
        Ok(value)
    }

    /// A positive integer id (`userId`).
    pub fn id(&mut self, name: &str) -> Result<Option<i64>> {
        let Some(raw) = self.values.get(name) else {
            return Ok(None);
        };
        let id = raw
            .parse::<i64>()
            .ok()
            .filter(|id| *id >= 1)
            .ok_or_else(|| Error::field(name, format!("{raw:?} is not a positive integer")))?;
        self.echo.insert(name.to_owned(), id.into());
        Ok(Some(id))
    }

    /// One of a closed set of values (`action`, `type`, `resource`, `initiator`).
    pub fn one_of(&mut self, name: &str, allowed: &[&str]) -> Result<Option<String>> {
        let Some(value) = self.values.get(name).cloned() else {
            return Ok(None);
        };
        if !allowed.contains(&value.as_str()) {
            return Err(Error::field(
                name,
                format!("{value:?} is not one of {}", allowed.join(", ")),
            ));
        }
        self.echo.insert(name.to_owned(), value.clone().into());
        Ok(Some(value))
    }

    /// The date filters on `field` (`createdAt.gte`, …), each bound in unix milliseconds.
    pub fn dates(&mut self, field: &str) -> Result<DateRange> {
        let mut range = DateRange::default();
        for (suffix, slot) in [
            ("eq", &mut range.eq),
            ("lt", &mut range.lt),
            ("lte", &mut range.lte),
            ("gt", &mut range.gt),
            ("gte", &mut range.gte),
        ] {
            let name = format!("{field}.{suffix}");
            if let Some(raw) = self.values.get(&name) {
                let at = parse_date(raw).ok_or_else(|| {
                    Error::field(
                        &name,
                        format!(
                            "{raw:?} is not an ISO 8601 date-time (e.g. 2026-01-31T09:30:00.000Z)"
                        ),
                    )
                })?;
                *slot = Some(at.timestamp_millis());
                self.echo.insert(name, raw.clone().into());
            }
        }
        Ok(range)
    }

    /// The list envelope. `rows` holds up to `limit + 1` items (fetch one more than asked: its
    /// presence is `hasMore`); the extra one is dropped.
    pub fn envelope(self, mut rows: Vec<Json>) -> Json {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        serde_json::json!({
            "hasMore": has_more,
            "parameters": Json::Object(self.echo),
            "data": rows,
        })
    }
}

/// The `createdAt` filters every list endpoint takes, for the OpenAPI document (`params(…,
/// CreatedAtQuery)`); [`ListQuery::dates`] reads them.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, reason = "documentation only: ListQuery::dates reads them")]
pub struct CreatedAtQuery {
    #[param(rename = "createdAt.eq", nullable = false, format = DateTime)]
    created_at_eq: Option<String>,
    /// Before this date; page with the last item's `createdAt`.
    #[param(rename = "createdAt.lt", nullable = false, format = DateTime)]
    created_at_lt: Option<String>,
    #[param(rename = "createdAt.lte", nullable = false, format = DateTime)]
    created_at_lte: Option<String>,
    #[param(rename = "createdAt.gt", nullable = false, format = DateTime)]
    created_at_gt: Option<String>,
    #[param(rename = "createdAt.gte", nullable = false, format = DateTime)]
    created_at_gte: Option<String>,
}

/// A lenient ISO 8601 date-time, as the platform accepts: seconds and fraction optional, `Z` or
/// an offset, UTC when the zone is absent; a bare date is its midnight UTC.
pub fn parse_date(raw: &str) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        return Some(at.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M%#z", "%Y-%m-%dT%H:%M%:z"] {
        if let Ok(at) = DateTime::parse_from_str(raw, format) {
            return Some(at.with_timezone(&Utc));
        }
    }
    let naive = raw.strip_suffix('Z').unwrap_or(raw);
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(naive, format) {
            return Some(at.and_utc());
        }
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc())
}

/// Unix milliseconds as ISO 8601 with milliseconds and `Z`, as every date of the API is printed.
pub fn iso(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(raw: &str) -> Option<String> {
        parse_date(raw).map(|d| iso(d.timestamp_millis()))
    }

    #[test]
    fn dates_are_read_leniently_and_in_utc_when_no_zone_is_given() {
        assert_eq!(
            at("2026-03-01T10:20:30.159Z").unwrap(),
            "2026-03-01T10:20:30.159Z"
        );
        assert_eq!(
            at("2026-03-01T10:20:30+02:00").unwrap(),
            "2026-03-01T08:20:30.000Z"
        );
        assert_eq!(at("2026-03-01T10:20").unwrap(), "2026-03-01T10:20:00.000Z");
        assert_eq!(at("2026-03-01T10:20Z").unwrap(), "2026-03-01T10:20:00.000Z");
        assert_eq!(
            at("2026-03-01T10:20:30").unwrap(),
            "2026-03-01T10:20:30.000Z"
        );
        assert_eq!(at("2026-03-01").unwrap(), "2026-03-01T00:00:00.000Z");
        assert_eq!(at("yesterday"), None);
        assert_eq!(at("2026-13-01"), None);
    }

    #[test]
    fn limit_defaults_to_ten_and_is_checked() {
        assert_eq!(ListQuery::parse(None, &[]).unwrap().limit, 10);
        assert_eq!(ListQuery::parse(Some("limit=100"), &[]).unwrap().limit, 100);
        for bad in ["limit=0", "limit=101", "limit=ten", "limit=1&limit=2"] {
            let error = ListQuery::parse(Some(bad), &[]).unwrap_err();
            assert!(error.to_string().starts_with("limit"), "{bad}: {error}");
        }
    }

    #[test]
    fn filters_are_checked_and_echoed_under_their_own_keys() {
        let mut query = ListQuery::parse(
            Some("userId=7&createdAt.gte=2026-01-01&teamName=Ops&unknown=1"),
            &[("projectName", "acme")],
        )
        .unwrap();
        assert_eq!(query.id("userId").unwrap(), Some(7));
        assert_eq!(query.text("teamName").unwrap().as_deref(), Some("Ops"));
        assert_eq!(query.text("recordId").unwrap(), None);
        let range = query.dates("createdAt").unwrap();
        assert_eq!(range.gte, Some(1_767_225_600_000));
        let body = query.envelope(vec![Json::from(1), Json::from(2)]);
        assert_eq!(
            body["parameters"],
            serde_json::json!({"projectName": "acme", "limit": 10, "userId": 7,
                "teamName": "Ops", "createdAt.gte": "2026-01-01"})
        );
        assert_eq!(body["hasMore"], false);

        let mut bad = ListQuery::parse(Some("userId=0&createdAt.lt=soon"), &[]).unwrap();
        assert!(bad.id("userId").unwrap_err().to_string().contains("userId"));
        let error = bad.dates("createdAt").unwrap_err().to_string();
        assert!(error.contains("createdAt.lt"), "{error}");
    }

    #[test]
    fn one_more_row_than_the_limit_means_more() {
        let query = ListQuery::parse(Some("limit=2"), &[]).unwrap();
        let body = query.envelope((0..3).map(Json::from).collect());
        assert_eq!(body["hasMore"], true);
        assert_eq!(body["data"], serde_json::json!([0, 1]));
    }
}
