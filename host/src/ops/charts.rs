//! Charts (§2.8, §8.10, §1.1): a built-in chart over one collection and a query chart on a
//! native query connection. The chart body is the request: its permission is the chart's (level,
//! else the chart's hash among the rendering's), so it is checked as the client sent it.
//!
//! Permissions (§5.5): the chart permission, then for a collection chart the caller's scope on
//! it and, unless `skipRelationReadPermissions`, `read` on the collections its relation paths
//! reach and `browse` on the collection a Count leaderboard counts. The agent checks no
//! collection right on charts.

use serde_json::Value as Json;

use super::activity::Recorded;
use super::permission::{self, scope};
use super::{Ops, Result};
use crate::agent::chart::{self, ChartRequest, ChartType};
use crate::auth::CollectionRight;
use crate::datasource::chart::{ChartRequest as ApiChartRequest, ChartResult};
use crate::datasource::{AggregationOperation, Caller, CollectionSchema};
use crate::platform::activity::Action;

/// The value of a chart body evaluated on `collection`, within the caller's scope (the `value`
/// of the stats document).
pub async fn collection_chart(ops: &Ops, caller: &Caller, name: &str, body: &Json) -> Result<Json> {
    let schema = ops.schema();
    let collection = ops.collection(name)?;
    let mut activity = Recorded::start(ops, Action::Dashboard, caller, name);
    activity.label("chart");
    ops.permissions.can_execute_chart(caller, body).await?;
    let variables = permission::context_variables(
        ops,
        caller,
        body.get("contextVariables").and_then(Json::as_object),
    )
    .await?;
    let request = ChartRequest::parse_with(body, schema, name, &variables)?;
    relation_reads(ops, caller, collection, &request).await?;
    let scope = scope(ops, caller, collection).await?;
    let value = chart::evaluate(ops.datasource.as_ref(), caller, name, &request, scope).await?;
    activity.done();
    Ok(value)
}

/// The relation reads of a chart: its filter's paths, its grouped and aggregated fields; a
/// leaderboard reads the related collection (browse to count it, read to sum its field).
async fn relation_reads(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    request: &ChartRequest,
) -> Result<()> {
    let permissions = &ops.permissions;
    if !permissions.checks_relation_reads() {
        return Ok(());
    }
    let schema = ops.schema();
    let mut paths: Vec<&str> = Vec::new();
    if let Some(tree) = &request.filter {
        for leaf in tree.leaves() {
            paths.push(&leaf.field);
        }
    }
    if request.chart_type != ChartType::Leaderboard {
        paths.extend(request.group_by_field.as_deref());
        paths.extend(request.aggregate_field.as_deref());
    }
    permissions
        .can_read_through(caller, schema, collection, paths)
        .await?;
    if request.chart_type == ChartType::Leaderboard
        && let Some(relation) = request
            .relationship_field
            .as_deref()
            .and_then(|r| collection.relation(r))
    {
        let right = if request.aggregator == AggregationOperation::Count {
            CollectionRight::Browse
        } else {
            CollectionRight::Read
        };
        permissions
            .can(caller, relation.foreign_collection(), right)
            .await?;
    }
    Ok(())
}

/// The value of a query chart `{type, query, connectionName, contextVariables}`. The body is
/// checked first, then the chart permission, as the agent does.
pub async fn native_query(ops: &Ops, caller: &Caller, body: &Json) -> Result<Json> {
    let mut activity = Recorded::start_on(ops, Action::Dashboard, caller, None);
    activity.label("native query chart");
    chart::check_native(ops.datasource.as_ref(), body)?;
    ops.permissions.can_execute_chart(caller, body).await?;
    let user = ops.permissions.current_user(caller).await?;
    let value = chart::evaluate_native_with(ops.datasource.as_ref(), caller, body, |request| {
        let mut variables = chart::ContextVariables::new(caller, request);
        if let Some(user) = user {
            variables.set_user(user.properties());
        }
        variables
    })
    .await?;
    activity.done();
    Ok(value)
}

/// A plugin's chart (`addChart`, §1.2, §1.4): the datasource chart `chart`, or with a
/// `collection` the chart of the record `request.record_id`. No right is checked, as in the
/// agent: only the session. An unknown chart is [`super::Error::NotFound`] and records nothing.
pub async fn api_chart(
    ops: &Ops,
    caller: &Caller,
    collection: Option<&str>,
    chart: &str,
    request: &ApiChartRequest,
) -> Result<ChartResult> {
    let start = || {
        let mut activity = Recorded::start_on(ops, Action::Dashboard, caller, collection);
        activity.label(format!("chart {chart}"));
        activity
    };
    let (result, activity) = match collection {
        Some(name) => {
            let collection = ops.datasource.collection(name)?;
            if !collection.schema().charts.iter().any(|c| c == chart) {
                return Err(super::Error::NotFound);
            }
            let activity = start();
            (
                collection.render_chart(caller, chart, request).await?,
                activity,
            )
        }
        None => {
            if !ops.schema().charts.iter().any(|c| c == chart) {
                return Err(super::Error::NotFound);
            }
            let activity = start();
            (
                ops.datasource.render_chart(caller, chart, request).await?,
                activity,
            )
        }
    };
    activity.done();
    Ok(result)
}
