//! Relation routes (protocol §1.3, bodies §2.5): list and count the records of a to-many
//! relation, associate and dissociate (or delete) them, set a to-one relation, and replace one
//! element of an array column ("embedded" update). The requests are parsed here; the rights,
//! scopes and writes are `ops::relations`'.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, put};

use super::collection::{
    count_response, csv, filter_request, parsed_labelled, parsed_on, projection_header,
    selection_request, served,
};
use super::error::{ApiError, ApiResult};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::body::{parse_associate, parse_update_field, parse_update_to_one};
use crate::agent::query_string::parse_delete_flag;
use crate::agent::serialize;
use crate::auth::CollectionRight;
use crate::ops::records::ListRequest;
use crate::ops::relations::{self, DissociateRequest, Parent};
use crate::platform::activity::Action;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route(
            "/{collection}/{id}/relationships/{relation}",
            get(list_related)
                .post(associate)
                .delete(dissociate)
                .put(update_to_one),
        )
        .route(
            "/{collection}/{id}/relationships/{relation}/count",
            get(count_related),
        )
        .route(
            "/{collection}/{id}/relationships/{relation}/{index}",
            put(update_field),
        )
}

/// `GET /{c}/{id}/relationships/{r}`: the related records as a JSON:API list.
async fn list_related(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let parent_schema = served(schema, &name)?;
    if parent_schema.relation(&relation_name).is_none()
        && let Some(csv_name) = relation_name.strip_suffix(".csv")
    {
        let parent = Parent {
            collection: name,
            packed_id: id,
            relation: csv_name.to_owned(),
        };
        let (_, relation, _) = relations::locate(&state, &parent, false)?;
        return csv(
            &state,
            relation.foreign_collection(),
            &context,
            &headers,
            Some(&parent),
        )
        .await;
    }
    let parent = Parent {
        collection: name,
        packed_id: id,
        relation: relation_name,
    };
    let (_, _, foreign) = relations::locate(&state, &parent, false)?;
    let request = ListRequest::parse(
        &state,
        &foreign.name,
        &context.query,
        projection_header(&headers),
    );
    let request = browse_refusal_first(&state, &context, &foreign.name, request).await;
    let request = parsed_labelled(
        &state,
        Action::ListRelatedData,
        &context,
        &parent.collection,
        Some(parent.packed_id.as_str()),
        Some(parent.relation.clone()),
        request,
    )
    .await?;
    let listed = relations::list_related(&state, &context.caller, &parent, request).await?;
    let body = serialize::serialize_list(
        schema,
        &foreign.name,
        &listed.records,
        listed.search.as_deref(),
    )?;
    Ok(super::json_bytes(body.to_bytes()?))
}

/// A related list whose query cannot be parsed: the browse right on the foreign collection is
/// checked first, as the agent checks it before reading the query (see
/// `collection::parsed_labelled`), so that a parse error never tells a user without the right
/// which fields the collection has.
async fn browse_refusal_first<T>(
    state: &SharedState,
    context: &CallerContext,
    foreign: &str,
    request: Result<T, impl Into<ApiError>>,
) -> ApiResult<T> {
    match request {
        Ok(request) => Ok(request),
        Err(error) => {
            state
                .permissions
                .can(&context.caller, foreign, CollectionRight::Browse)
                .await?;
            Err(error.into())
        }
    }
}

/// `GET /{c}/{id}/relationships/{r}/count`: `{"count": n}`, or the deactivated body.
async fn count_related(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
) -> ApiResult<Response> {
    let parent = Parent {
        collection: name,
        packed_id: id,
        relation: relation_name,
    };
    let (_, _, foreign) = relations::locate(&state, &parent, false)?;
    let request = filter_request(&state, &context, foreign);
    let request = browse_refusal_first(&state, &context, &foreign.name, request).await?;
    let counted = relations::count_related(&state, &context.caller, &parent, request).await?;
    Ok(count_response(counted))
}

/// `POST /{c}/{id}/relationships/{r}` (associate): links the first record of the body. 204.
async fn associate(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let parent = Parent {
        collection: name,
        packed_id: id,
        relation: relation_name,
    };
    let (_, _, foreign) = relations::locate(&state, &parent, false)?;
    let target = parse_associate(&body, foreign);
    let target = parsed_labelled(
        &state,
        Action::Update,
        &context,
        &parent.collection,
        Some(parent.packed_id.as_str()),
        Some(format!("associated to {}", parent.relation)),
        target,
    )
    .await?;
    relations::associate(&state, &context.caller, &parent, target).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /{c}/{id}/relationships/{r}[?delete=true]`: unlinks the selected related records, or
/// deletes them. 204.
async fn dissociate(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let parent = Parent {
        collection: name,
        packed_id: id,
        relation: relation_name,
    };
    let (_, _, foreign) = relations::locate(&state, &parent, false)?;
    let delete = parse_delete_flag(&context.query);
    let selection = selection_request(&state, &context, foreign, &body).and_then(|selection| {
        if selection.ids.is_empty() && !selection.all_records {
            return Err(crate::agent::Error::validation("Expected no empty id list").into());
        }
        Ok(selection)
    });
    let selection = if delete {
        let label = format!(
            "deleted from {} of {} {}",
            parent.relation, parent.collection, parent.packed_id
        );
        parsed_labelled(
            &state,
            Action::Delete,
            &context,
            &foreign.name,
            None,
            Some(label),
            selection,
        )
        .await?
    } else {
        parsed_labelled(
            &state,
            Action::Update,
            &context,
            &parent.collection,
            Some(parent.packed_id.as_str()),
            Some(format!("dissociated from {}", parent.relation)),
            selection,
        )
        .await?
    };
    let request = DissociateRequest { delete, selection };
    relations::dissociate(&state, &context.caller, &parent, request).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /{c}/{id}/relationships/{r}` on a to-one relation: links the body's record, or unlinks
/// with `{"data": null}`. 204.
async fn update_to_one(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let parent = Parent {
        collection: name,
        packed_id: id,
        relation: relation_name,
    };
    let (_, _, foreign) = relations::locate(&state, &parent, true)?;
    let target = parse_update_to_one(&body, foreign);
    let target = parsed_labelled(
        &state,
        Action::Update,
        &context,
        &parent.collection,
        Some(parent.packed_id.as_str()),
        Some(format!("changed {}", parent.relation)),
        target,
    )
    .await?;
    relations::update_to_one(&state, &context.caller, &parent, target).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /{c}/{id}/relationships/{field}/{index}`: replaces element `index` of the array column
/// `field` with the body's sub-record (an index equal to the length appends). 204.
async fn update_field(
    State(state): State<SharedState>,
    Path((name, id, field, index)): Path<(String, String, String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let collection_schema = served(state.datasource.schema(), &name)?;
    let update = parse_update_field(&body, collection_schema, &field, &index);
    let update = parsed_on(
        &state,
        Action::Update,
        &context,
        &name,
        Some(id.as_str()),
        update,
    )
    .await?;
    relations::update_field(&state, &context.caller, &name, &id, &field, update).await?;
    Ok(StatusCode::NO_CONTENT)
}
