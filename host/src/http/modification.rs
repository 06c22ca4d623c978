//! Record writes (protocol §1.2, bodies §2.3 and §2.4): `POST /{c}` creates a record and applies
//! its to-one links, `PUT /{c}/{id}` patches one record and answers it re-read. The bodies are
//! parsed here (`agent::body`); `ops::records` authorizes and writes.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{post, put};

use super::collection::{parsed, parsed_on, served};
use super::error::ApiResult;
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::body::{parse_create, parse_update};
use crate::agent::serialize;
use crate::ops::records;
use crate::platform::activity::Action;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/{collection}", post(create))
        .route("/{collection}/{id}", put(update))
}

/// `POST /{c}`: 200 with the created record, merged with the to-one links the body gave so that
/// they show in `relationships` and `included` as the agent answers.
async fn create(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, &name)?;
    let plan = parse_create(&body, schema, collection_schema);
    let plan = parsed(&state, Action::Create, &context, &name, plan).await?;
    let created = records::create(&state, &context.caller, &name, plan).await?;
    let body = serialize::serialize_one(schema, &name, &created)?;
    Ok(super::json_bytes(body.to_bytes()?))
}

/// `PUT /{c}/{id}`: 200 with the record re-read with every column and every to-one relation's
/// columns (the agent's `ProjectionFactory.all`), or `data: null` when there is none.
async fn update(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, &name)?;
    let patch = parse_update(&body, collection_schema);
    let patch = parsed_on(
        &state,
        Action::Update,
        &context,
        &name,
        Some(id.as_str()),
        patch,
    )
    .await?;
    let updated = records::update(&state, &context.caller, &name, &id, patch).await?;
    // A record the filter does not find (there was none, or the patch moved it out of sight):
    // `data: null`, as the agent serializes the missing row it re-reads.
    let body = match &updated {
        Some(record) => serialize::serialize_one(schema, &name, record)?,
        None => serialize::serialize_none(),
    };
    Ok(super::json_bytes(body.to_bytes()?))
}
