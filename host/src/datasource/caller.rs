//! The `Caller`: who is asking, and in which timezone. Every data method takes it first.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use uuid::Uuid;

use super::error::{Error, Result};

/// The end user (or token, or assistant) on whose behalf a data call runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    pub id: i64,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub team: String,
    pub role: String,
    pub tags: BTreeMap<String, String>,
    /// Date operators, date groups and chart periods are computed in this timezone.
    pub timezone: Tz,
    /// The request's correlation id (`x-forest-correlation-id`).
    pub request_id: Uuid,
}

impl Caller {
    /// A caller for internal work (startup, tests, benchmarks) in the given timezone.
    pub fn system(timezone: Tz) -> Self {
        Self {
            id: 0,
            email: "system@canopy.local".to_owned(),
            first_name: "Canopy".to_owned(),
            last_name: "System".to_owned(),
            team: String::new(),
            role: String::new(),
            tags: BTreeMap::new(),
            timezone,
            request_id: Uuid::new_v4(),
        }
    }

    /// Parses an IANA timezone name the way the agent validates `?timezone=`.
    pub fn parse_timezone(name: &str) -> Result<Tz> {
        name.parse::<Tz>()
            .map_err(|_| Error::validation(format!("Invalid timezone: \"{name}\"")))
    }

    /// The current instant. One place, so that time operators share one clock per call.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}
