//! `POST /_internal/capabilities` (§3.6): what the frontend may ask of the agent and of each
//! requested collection — native query connections, agent features, filter operators per
//! column and aggregation capabilities.

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value as Json, json};

use super::caller::Authenticated;
use super::error::ApiResult;
use super::{JsonBody, SharedState};
use crate::agent::wire::served_type;
use crate::datasource::schema::AggregationCapabilities;
use crate::datasource::{
    CollectionSchema, ColumnType, DateOperation, FieldSchema, Operator, RelationSchema,
};

pub fn router() -> Router<SharedState> {
    Router::new().route("/_internal/capabilities", post(capabilities))
}

/// Authenticated, but without `?timezone=`: the agent builds no caller for this route.
async fn capabilities(
    State(state): State<SharedState>,
    _session: Authenticated,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    // Unknown names and a missing list are ignored, as the agent filters its collections by it.
    let requested: Vec<&str> = body
        .get("collectionNames")
        .and_then(Json::as_array)
        .map(|names| names.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let schema = state.datasource.schema();
    let collections: Vec<Json> = schema
        .collections
        .values()
        .filter(|c| requested.contains(&c.name.as_str()))
        .map(collection_capabilities)
        .collect();
    let connections: Vec<Json> = state
        .datasource
        .native_query_connections()
        .into_iter()
        .map(|name| json!({ "name": name }))
        .collect();
    let body = json!({
        "nativeQueryConnections": connections,
        "agentCapabilities": {
            "canUseProjectionOnGetOne": true,
            "canUseProjectionViaHeader": true,
            "canUseProjectionViaHeaderOnList": true,
            "canUseMultipleFieldsProjectionOnRelation": true,
            // The history routes are served only when the trail is on.
            "canUseAuditTrail": state.audit.is_some(),
        },
        "collections": collections,
    });
    Ok(super::json(&body))
}

/// One collection: its filterable columns, its ManyToOne relations, its aggregation support.
fn collection_capabilities(collection: &CollectionSchema) -> Json {
    let fields: Vec<Json> = collection
        .fields
        .iter()
        .filter_map(|(name, field)| match field {
            FieldSchema::Column(column) if is_listed(&column.column_type) => Some(json!({
                "name": name,
                // As served: binary columns are strings (§8.12).
                "type": served_type(&column.column_type).to_json(),
                // In the agent's order, which clients may show as is.
                "operators": Operator::in_agent_order(&column.filter_operators)
                    .into_iter()
                    .map(Operator::snake_case)
                    .collect::<Vec<_>>(),
                "isGroupable": column.is_groupable,
            })),
            FieldSchema::Relation(RelationSchema::ManyToOne { foreign_key, .. }) => Some(json!({
                "name": name,
                "type": "ManyToOne",
                // The relation groups by its foreign key column.
                "isGroupable": collection
                    .column(foreign_key)
                    .is_some_and(|fk| fk.is_groupable),
            })),
            _ => None,
        })
        .collect();
    json!({
        "name": collection.name,
        "fields": fields,
        "aggregationCapabilities": aggregation_capabilities(&collection.aggregation),
    })
}

/// Only primitive and array-of-primitive columns are listed (no composites).
fn is_listed(column_type: &ColumnType) -> bool {
    match column_type {
        ColumnType::Primitive(_) => true,
        ColumnType::Array(inner) => matches!(inner.as_ref(), ColumnType::Primitive(_)),
        ColumnType::Composite(_) => false,
    }
}

fn aggregation_capabilities(capabilities: &AggregationCapabilities) -> Json {
    let operations: Vec<&str> = capabilities
        .supported_date_operations
        .iter()
        .map(|op| match op {
            DateOperation::Day => "Day",
            DateOperation::Week => "Week",
            DateOperation::Month => "Month",
            DateOperation::Quarter => "Quarter",
            DateOperation::Year => "Year",
        })
        .collect();
    json!({
        "supportGroups": capabilities.support_groups,
        "supportedDateOperations": operations,
    })
}
