//! The `Caller`: who is asking, and in which timezone. Every data method takes it first.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use regex::Regex;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::{Error, Result};

/// The end user (or token, or assistant) on whose behalf a data call runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    pub id: i64,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    /// The name of the user's first team.
    pub team: String,
    /// The id of that team (`currentUser.team.id`), when the token says it.
    pub team_id: Option<i64>,
    /// The role's name.
    pub role: String,
    /// The role's id (`currentUser.roleId`), when the token says it.
    pub role_id: Option<i64>,
    pub permission_level: PermissionLevel,
    /// Rendering (team × environment) that scopes and charts are looked up for.
    pub rendering_id: i64,
    pub tags: BTreeMap<String, String>,
    /// Date operators, date groups and chart periods are computed in this timezone.
    pub timezone: Tz,
    /// The request's correlation id (`x-forest-correlation-id`).
    pub request_id: Uuid,
    /// Project and environment names from the `Forest-Context-Url` header, when it has them.
    pub project: Option<String>,
    pub environment: Option<String>,
}

/// The user's level in the Forest project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionLevel {
    Admin,
    Developer,
    Editor,
    /// The default when the claim is absent: the least privileged level.
    #[default]
    User,
}

impl PermissionLevel {
    /// The wire name (`admin`, …), as `currentUser.permissionLevel` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Developer => "developer",
            Self::Editor => "editor",
            Self::User => "user",
        }
    }
}

/// The agent's pattern for `Forest-Context-Url` (`https://<host>/<project>/<environment>…`),
/// unanchored as its `exec` is.
static CONTEXT_URL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"https://([^/]*)/([^/]*)/([^/]*)").ok());

impl Caller {
    /// A caller for internal work (startup, tests, benchmarks) in the given timezone.
    pub fn system(timezone: Tz) -> Self {
        Self {
            id: 0,
            email: "system@canopy.local".to_owned(),
            first_name: "Canopy".to_owned(),
            last_name: "System".to_owned(),
            team: String::new(),
            team_id: None,
            role: String::new(),
            role_id: None,
            permission_level: PermissionLevel::Admin,
            rendering_id: 0,
            tags: BTreeMap::new(),
            timezone,
            request_id: Uuid::new_v4(),
            project: None,
            environment: None,
        }
    }

    /// Parses an IANA timezone name the way the agent validates `?timezone=`: through
    /// `Intl.DateTimeFormat`, which matches names in any case (`europe/paris`, `utc`).
    pub fn parse_timezone(name: &str) -> Result<Tz> {
        Tz::from_str_insensitive(name)
            .map_err(|_| Error::validation(format!("Invalid timezone: \"{name}\"")))
    }

    /// Sets `project` and `environment` from a `Forest-Context-Url` header value. As in the
    /// agent, a header that is absent or does not match leaves both unset, silently.
    #[must_use]
    pub fn with_context_url(mut self, header: Option<&str>) -> Self {
        let captures = header.and_then(|url| CONTEXT_URL.as_ref()?.captures(url));
        let part = |i| {
            captures
                .as_ref()
                .and_then(|c| c.get(i))
                .map(|m| m.as_str().to_owned())
        };
        self.project = part(2);
        self.environment = part(3);
        self
    }

    /// The current instant. One place, so that time operators share one clock per call.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timezone_names_match_in_any_case_as_intl_does() {
        let paris = Caller::parse_timezone("Europe/Paris").expect("valid");
        assert_eq!(Caller::parse_timezone("europe/paris").ok(), Some(paris));
        assert_eq!(Caller::parse_timezone("EUROPE/PARIS").ok(), Some(paris));
        assert_eq!(
            Caller::parse_timezone("america/argentina/buenos_aires").ok(),
            Some(chrono_tz::America::Argentina::Buenos_Aires)
        );
        assert_eq!(Caller::parse_timezone("utc").ok(), Some(chrono_tz::UTC));
        let err = Caller::parse_timezone("europe/pariss").expect_err("unknown zone");
        assert_eq!(err.to_string(), "Invalid timezone: \"europe/pariss\"");
        assert!(Caller::parse_timezone(" Europe/Paris").is_err());
    }

    #[test]
    fn the_context_url_gives_project_and_environment() {
        let caller = Caller::system(chrono_tz::UTC).with_context_url(Some(
            "https://app.forestadmin.com/Shop/Production/Operations/data/orders/index",
        ));
        assert_eq!(caller.project.as_deref(), Some("Shop"));
        assert_eq!(caller.environment.as_deref(), Some("Production"));
        // The last part runs to the next slash or the end, whatever it holds.
        let caller = Caller::system(chrono_tz::UTC).with_context_url(Some("https://h/p/e?x=1"));
        assert_eq!(caller.environment.as_deref(), Some("e?x=1"));
    }

    #[test]
    fn a_missing_or_unmatched_context_url_leaves_them_unset() {
        for header in [
            None,
            Some(""),
            Some("http://app.forestadmin.com/Shop/Production"),
            Some("https://app.forestadmin.com/Shop"),
        ] {
            let caller = Caller::system(chrono_tz::UTC).with_context_url(header);
            assert_eq!(
                (caller.project, caller.environment),
                (None, None),
                "{header:?}"
            );
        }
    }
}
