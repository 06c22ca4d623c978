//! What a team's rendering allows beyond collection rights (§5.5): charts (by permission level,
//! else by hash among the rendering's `stats`) and SQL (query charts and live-query segments:
//! the agent's `verify-sql-query.ts`, `is-segment-query-authorized.ts` and
//! `is-segment-query-allowed-on-connection.ts`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value as Json;

use super::Permissions;
use super::object_hash::chart_hash;
use crate::auth::{Error, Result};
use crate::datasource::{Caller, PermissionLevel};
use crate::platform::documents::{Rendering, RenderingCollection};

/// The separator the frontend puts between several segment queries it runs at once.
const UNION: &str = "/*MULTI-SEGMENTS-QUERIES-UNION*/ UNION ";

/// `verifySQLQuery`: a single `SELECT … FROM …` (case-insensitive), a `;` only at the end.
/// The errors carry the agent's messages.
pub fn verify_sql_query(query: &str) -> std::result::Result<(), &'static str> {
    let query = query.trim();
    if query.is_empty() {
        return Err("You cannot execute an empty SQL query.");
    }
    if let Some(index) = query.find(';')
        && index < query.len() - 1
    {
        return Err("You cannot chain SQL queries.");
    }
    if !is_select(query) {
        return Err("Only SELECT queries are allowed.");
    }
    Ok(())
}

/// `/^SELECT\s[^]*FROM\s[^]*$/i`: `SELECT` and a whitespace first, then anywhere after it
/// `FROM` and a whitespace.
fn is_select(query: &str) -> bool {
    let Some(head) = query.get(..6).filter(|h| h.eq_ignore_ascii_case("SELECT")) else {
        return false;
    };
    let mut rest = query[head.len()..].chars();
    if !is_js_space(rest.next()) {
        return false;
    }
    let rest = rest.as_str();
    let upper = rest.to_ascii_uppercase();
    upper
        .match_indices("FROM")
        .any(|(i, _)| is_js_space(rest[i + 4..].chars().next()))
}

/// JavaScript's `\s` (the ASCII and Unicode white space it matches).
fn is_js_space(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_whitespace() || c == '\u{feff}')
}

/// The queries of a UNION the frontend sent, or `None` for a single query.
fn union_parts(query: &str) -> Option<Vec<&str>> {
    let parts: Vec<&str> = query.split(UNION).collect();
    (parts.len() > 1).then_some(parts)
}

/// An allowed query as a UNION part is compared: its first `;` (and the blanks after it)
/// removed, then trimmed (the agent's `replace(/;\s*/i, '').trim()`).
fn union_form(query: &str) -> String {
    match query.find(';') {
        Some(i) => {
            let after = query[i + 1..].trim_start();
            format!("{}{after}", &query[..i]).trim().to_owned()
        }
        None => query.trim().to_owned(),
    }
}

/// `isSegmentQueryAllowed`: the query is one of the allowed segments, or a UNION whose every
/// part is.
pub fn is_segment_query_allowed(query: &str, allowed: &[String]) -> bool {
    match union_parts(query) {
        Some(parts) => {
            let allowed: HashSet<String> = allowed.iter().map(|q| union_form(q)).collect();
            parts.iter().all(|part| allowed.contains(part.trim()))
        }
        None => allowed.iter().any(|q| q == query),
    }
}

/// `isSegmentQueryAllowedOnConnection`: the same among the live-query segments of `connection`.
pub fn is_segment_query_allowed_on_connection(
    collection: &RenderingCollection,
    query: &str,
    connection: &str,
) -> bool {
    if connection.is_empty() {
        return false;
    }
    let queries: Vec<String> = collection
        .live_query_segments
        .iter()
        .filter(|s| s.connection_name == connection)
        .map(|s| s.query.clone())
        .collect();
    match union_parts(query) {
        Some(_) => is_segment_query_allowed(query, &queries),
        None => queries.iter().any(|q| q == query),
    }
}

/// The hashes of each rendering's `stats`, computed once per fetched rendering document.
#[derive(Default)]
pub(super) struct ChartHashes {
    by_rendering: Mutex<HashMap<i64, (Arc<Rendering>, Arc<HashSet<String>>)>>,
}

impl ChartHashes {
    fn of(&self, rendering_id: i64, rendering: &Arc<Rendering>) -> Arc<HashSet<String>> {
        let mut map = self
            .by_rendering
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((doc, hashes)) = map.get(&rendering_id)
            && Arc::ptr_eq(doc, rendering)
        {
            return Arc::clone(hashes);
        }
        let hashes: Arc<HashSet<String>> =
            Arc::new(rendering.stats.iter().map(chart_hash).collect());
        map.insert(rendering_id, (Arc::clone(rendering), Arc::clone(&hashes)));
        hashes
    }
}

/// Levels that may run any chart and any SQL segment.
fn is_editor_or_above(level: PermissionLevel) -> bool {
    matches!(
        level,
        PermissionLevel::Admin | PermissionLevel::Developer | PermissionLevel::Editor
    )
}

impl Permissions {
    /// `assertCanExecuteChart` (§5.5) for a chart body of `POST /stats/{c}` or a query chart of
    /// `/_internal/native_query`: users at editor level and above may run any chart, the others
    /// only one whose hash is among their rendering's charts (403 `Forbidden` else). An allowed
    /// query chart (a body with `query`) must then be a single SELECT: 422 with the agent's
    /// message otherwise.
    pub async fn can_execute_chart(&self, caller: &Caller, chart: &Json) -> Result<()> {
        if !self.enforced() {
            return Ok(());
        }
        let hash = chart_hash(chart);
        let mut allowed = self.chart_allowed(caller, &hash).await?;
        if !allowed && self.policy.refetch_on_denial() {
            self.invalidate_rendering(caller.rendering_id);
            self.users.clear();
            allowed = self.chart_allowed(caller, &hash).await?;
        }
        if !allowed {
            tracing::debug!(user = caller.id, %hash, "chart not allowed");
            return Err(Error::forbidden());
        }
        if let Some(query) = chart.as_object().and_then(|c| c.get("query")) {
            let query = query.as_str().unwrap_or("");
            verify_sql_query(query).map_err(|m| Error::Unprocessable(m.to_owned()))?;
        }
        Ok(())
    }

    async fn chart_allowed(&self, caller: &Caller, hash: &str) -> Result<bool> {
        if is_editor_or_above(self.permission_level(caller).await?) {
            return Ok(true);
        }
        let rendering = self.rendering(caller.rendering_id).await?;
        Ok(self
            .chart_hashes
            .of(caller.rendering_id, &rendering)
            .contains(hash))
    }

    /// `canExecuteSegmentQuery` (§5.5): editors and above may run any live-query segment; the
    /// others one of their rendering's `segments` on this collection, also among its
    /// `liveQuerySegments` of `connection` when one is given (a UNION of allowed queries
    /// counts). The query must also be a single SELECT, for everyone:
    /// `Error::InvalidSegmentQuery` otherwise.
    pub async fn can_execute_segment_query(
        &self,
        caller: &Caller,
        collection: &str,
        query: &str,
        connection: Option<&str>,
    ) -> Result<bool> {
        let allowed = if self.enforced() {
            let mut allowed = self
                .segment_allowed(caller, collection, query, connection)
                .await?;
            if !allowed && self.policy.refetch_on_denial() {
                self.invalidate_rendering(caller.rendering_id);
                allowed = self
                    .segment_allowed(caller, collection, query, connection)
                    .await?;
            }
            allowed
        } else {
            true
        };
        if !allowed {
            tracing::debug!(
                user = caller.id,
                collection,
                "live-query segment not allowed"
            );
            return Ok(false);
        }
        verify_sql_query(query).map_err(|m| Error::InvalidSegmentQuery(m.to_owned()))?;
        Ok(true)
    }

    async fn segment_allowed(
        &self,
        caller: &Caller,
        collection: &str,
        query: &str,
        connection: Option<&str>,
    ) -> Result<bool> {
        if is_editor_or_above(self.permission_level(caller).await?) {
            return Ok(true);
        }
        let rendering = self.rendering(caller.rendering_id).await?;
        let Some(permissions) = rendering.collections.get(collection) else {
            return Ok(false);
        };
        if let Some(connection) = connection.filter(|c| !c.is_empty())
            && !is_segment_query_allowed_on_connection(permissions, query, connection)
        {
            return Ok(false);
        }
        Ok(is_segment_query_allowed(query, &permissions.segments))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::documents::LiveQuerySegment;

    #[test]
    fn sql_must_be_one_select() {
        assert_eq!(verify_sql_query("SELECT id FROM t"), Ok(()));
        assert_eq!(verify_sql_query("  select id\nfrom t;  "), Ok(()));
        assert_eq!(
            verify_sql_query("SELECT\tcount(*) AS value FROM\nt"),
            Ok(())
        );
        assert_eq!(
            verify_sql_query("   "),
            Err("You cannot execute an empty SQL query.")
        );
        assert_eq!(
            verify_sql_query("SELECT 1 FROM t; DROP TABLE t"),
            Err("You cannot chain SQL queries.")
        );
        assert_eq!(
            verify_sql_query("DELETE FROM t"),
            Err("Only SELECT queries are allowed.")
        );
        assert_eq!(
            verify_sql_query("SELECT 1"),
            Err("Only SELECT queries are allowed.")
        );
        assert_eq!(
            verify_sql_query("SELECTid FROM t"),
            Err("Only SELECT queries are allowed.")
        );
        assert_eq!(
            verify_sql_query("SELECT id FROMt"),
            Err("Only SELECT queries are allowed.")
        );
        // FROM only needs to appear somewhere after SELECT, as the agent's regex reads.
        assert_eq!(verify_sql_query("SELECT fromage, x FROM t"), Ok(()));
    }

    #[test]
    fn segments_match_exactly_or_as_a_union_of_allowed_ones() {
        let allowed = vec![
            "SELECT id FROM orders WHERE status = 'paid';".to_owned(),
            "SELECT id FROM orders WHERE total > 10".to_owned(),
        ];
        assert!(is_segment_query_allowed(
            "SELECT id FROM orders WHERE total > 10",
            &allowed
        ));
        assert!(!is_segment_query_allowed(
            "SELECT id FROM orders WHERE total > 10 ",
            &allowed
        ));
        let union = format!(
            "SELECT id FROM orders WHERE status = 'paid'{UNION}SELECT id FROM orders WHERE total > 10"
        );
        assert!(is_segment_query_allowed(&union, &allowed));
        let bad_union =
            format!("SELECT id FROM orders WHERE total > 10{UNION}SELECT id FROM users");
        assert!(!is_segment_query_allowed(&bad_union, &allowed));
        let collection = RenderingCollection {
            scope: None,
            segments: allowed.clone(),
            live_query_segments: vec![LiveQuerySegment {
                connection_name: "main".into(),
                query: "SELECT id FROM orders WHERE total > 10".into(),
            }],
        };
        assert!(is_segment_query_allowed_on_connection(
            &collection,
            "SELECT id FROM orders WHERE total > 10",
            "main"
        ));
        assert!(!is_segment_query_allowed_on_connection(
            &collection,
            "SELECT id FROM orders WHERE total > 10",
            "other"
        ));
        assert!(!is_segment_query_allowed_on_connection(
            &collection,
            "SELECT id FROM orders WHERE status = 'paid';",
            "main"
        ));
    }
}
