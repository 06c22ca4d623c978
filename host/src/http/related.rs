//! Relation routes (protocol §1.3, bodies §2.5): list and count the records of a to-many
//! relation, associate and dissociate (or delete) them, set a to-one relation, and replace one
//! element of an array column ("embedded" update).
//!
//! The records related to a parent are found the way the agent's `makeForeignFilter` finds
//! them: `OneToMany` by the foreign `originKey`, `ManyToMany` by reading the through rows first
//! and then matching the foreign `foreignKeyTarget` with `In`.
//!
//! Rights and scopes are the foreign collection's (§1.3), except the links: associating and
//! unlinking need `edit` on the parent (and on the foreign collection too for a one-to-many, whose
//! foreign keys are written; see `link_rights`), and a ManyToOne link edits the parent. The parent
//! itself is read without its scope, as the agent reads it.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, put};
use serde_json::Value as Json;

use super::activity::Recorded;
use super::collection::{csv, projection_header, resolve, served};
use super::error::{ApiError, ApiResult};
use super::permission::{self, IncludedScopes, browse, scoped};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::body::{parse_associate, parse_update_field, parse_update_to_one};
use crate::agent::query_string::{
    CompositeId, Params, match_ids, parse_delete_flag, parse_filter, parse_paginated_filter,
    parse_projection, parse_selection,
};
use crate::agent::{self, serialize};
use crate::auth::CollectionRight;
use crate::datasource::{
    Aggregation, Caller, CollectionSchema, ConditionTree, Filter, Operator, Projection, Record,
    RelationSchema, Value, unpack_id,
};
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

/// A relation of the collection whose kind has this route; the agent registers relation routes
/// per relation and kind, so any other name is a path without a route (404).
fn relation<'a>(
    collection: &'a CollectionSchema,
    name: &str,
    to_one: bool,
) -> ApiResult<&'a RelationSchema> {
    collection
        .relation(name)
        .filter(|r| r.is_to_one() == to_one)
        .ok_or(ApiError::RouteNotFound)
}

/// A field of a record, `Null` when absent.
pub(super) fn column_value(record: &Record, field: &str) -> Value {
    record.get(field).cloned().unwrap_or(Value::Null)
}

/// One column of the record `id` of `collection`, `None` when there is no such record.
async fn read_column(
    state: &SharedState,
    caller: &Caller,
    collection: &CollectionSchema,
    id: &CompositeId,
    column: &str,
) -> ApiResult<Option<Value>> {
    let filter = Filter::new(Some(match_ids(collection, std::slice::from_ref(id))?));
    let records = state
        .datasource
        .collection(&collection.name)?
        .list(caller, &filter, &Projection::new([column]))
        .await?;
    Ok(records.first().map(|r| column_value(r, column)))
}

/// The value a link to the record `id` of `foreign` stores: its `target` column (a key may target
/// a non-primary column, so it is read rather than taken from the id). A missing record is a
/// body error: the link names a record that does not exist.
pub(super) async fn to_one_target(
    state: &SharedState,
    caller: &Caller,
    foreign_name: &str,
    foreign: &CollectionSchema,
    id: &CompositeId,
    target: &str,
) -> ApiResult<Value> {
    read_column(state, caller, foreign, id, target)
        .await?
        .ok_or_else(|| {
            // The id as the client wrote it: each key in its wire form.
            let packed: Vec<String> = id
                .iter()
                .map(|(key, v)| {
                    let wire = foreign.column(key).map(|c| c.wire).unwrap_or_default();
                    agent::wire::id_string(v, wire)
                })
                .collect();
            agent::Error::Validation(format!(
                "The record '{}' of '{foreign_name}' does not exist",
                packed.join("|")
            ))
            .into()
        })
}

/// The parent's value of `column`; a missing parent is 404 as for `GET /{c}/{id}`.
async fn parent_value(
    state: &SharedState,
    caller: &Caller,
    parent: &CollectionSchema,
    id: &CompositeId,
    column: &str,
) -> ApiResult<Value> {
    read_column(state, caller, parent, id, column)
        .await?
        .ok_or_else(|| agent::Error::NotFound("Record does not exists".to_owned()).into())
}

/// Links the record `target` of a `OneToOne` to the origin value: whoever held it is unlinked
/// first, since the key is unique. `None` only unlinks.
/// Both updates keep to the caller's scope on the foreign collection, as the agent's do.
pub(super) async fn link_one_to_one(
    state: &SharedState,
    caller: &Caller,
    foreign_name: &str,
    origin_key: &str,
    origin_value: &Value,
    target: Option<&CompositeId>,
) -> ApiResult<()> {
    let foreign_schema = state.datasource.schema().collection(foreign_name)?;
    let foreign = state.datasource.collection(foreign_name)?;
    let scope = permission::scope(state, caller, foreign_schema).await?;
    let mut unset = Record::new();
    unset.insert(origin_key, Value::Null);
    if !origin_value.is_null() {
        let holders = Filter::new(Some(ConditionTree::leaf(
            origin_key,
            Operator::Equal,
            origin_value.clone(),
        )))
        .and(scope.clone());
        foreign.update(caller, &holders, &unset).await?;
    }
    if let Some(id) = target {
        let mut set = Record::new();
        set.insert(origin_key, origin_value.clone());
        let filter =
            Filter::new(Some(match_ids(foreign_schema, std::slice::from_ref(id))?)).and(scope);
        foreign.update(caller, &filter, &set).await?;
    }
    Ok(())
}

/// A condition that no record matches (a parent without a key has no related records).
fn nothing() -> ConditionTree {
    ConditionTree::or(Vec::new())
}

/// Values of `column` over the records, nulls and duplicates left out.
fn distinct_values(records: &[Record], column: &str) -> Vec<Value> {
    let mut values: Vec<Value> = Vec::new();
    for record in records {
        let value = column_value(record, column);
        if !value.is_null() && !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// The foreign records related to the parent, as a condition on the foreign collection.
pub(crate) async fn related_tree(
    state: &SharedState,
    caller: &Caller,
    parent: &CollectionSchema,
    parent_id: &CompositeId,
    relation: &RelationSchema,
) -> ApiResult<ConditionTree> {
    match relation {
        RelationSchema::OneToMany {
            origin_key,
            origin_key_target,
            ..
        }
        | RelationSchema::OneToOne {
            origin_key,
            origin_key_target,
            ..
        } => {
            let value = read_column(state, caller, parent, parent_id, origin_key_target).await?;
            Ok(match value {
                Some(value) if !value.is_null() => {
                    ConditionTree::leaf(origin_key, Operator::Equal, value)
                }
                _ => nothing(),
            })
        }
        RelationSchema::ManyToMany {
            through_collection,
            origin_key,
            origin_key_target,
            foreign_key,
            foreign_key_target,
            ..
        } => {
            let value = read_column(state, caller, parent, parent_id, origin_key_target).await?;
            let Some(value) = value.filter(|v| !v.is_null()) else {
                return Ok(nothing());
            };
            let through = Filter::new(Some(ConditionTree::leaf(
                origin_key,
                Operator::Equal,
                value,
            )));
            let rows = state
                .datasource
                .collection(through_collection)?
                .list(caller, &through, &Projection::new([foreign_key.as_str()]))
                .await?;
            let keys = distinct_values(&rows, foreign_key);
            Ok(if keys.is_empty() {
                nothing()
            } else {
                ConditionTree::leaf(foreign_key_target, Operator::In, Value::Array(keys))
            })
        }
        RelationSchema::ManyToOne { .. } => Err(ApiError::RouteNotFound),
    }
}

/// `GET /{c}/{id}/relationships/{r}`: the related records as a JSON:API list.
async fn list_related(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let parent = served(schema, &name)?;
    if parent.relation(&relation_name).is_none()
        && let Some(csv_name) = relation_name.strip_suffix(".csv")
    {
        return csv_related(&state, parent, &id, csv_name, &context, &headers).await;
    }
    let relation = relation(parent, &relation_name, false)?;
    let mut activity = Recorded::start(&state, Action::ListRelatedData, &context.caller, &name);
    activity.records([id.as_str()]);
    activity.label(relation_name.as_str());
    let foreign_name = relation.foreign_collection();
    let foreign = schema.collection(foreign_name)?;
    browse(&state, &context, foreign_name).await?;
    let params = Params::new(&context.query);
    let request = parse_paginated_filter(&params, schema, foreign)?;
    state.check_page_size(&request)?;
    let mut projection =
        parse_projection(&context.query, projection_header(&headers), schema, foreign)?;
    permission::relation_reads(
        &state,
        &context,
        Some(&headers),
        foreign,
        &request.filter,
        Some(&mut projection),
    )
    .await?;
    let filter = resolve(&state, &context.caller, foreign, request).await?;
    let filter = scoped(&state, &context.caller, foreign, filter).await?;
    let parent_id = unpack_id(parent, &id)?;
    let tree = related_tree(&state, &context.caller, parent, &parent_id, relation).await?;
    let filter = filter.and(Some(tree));
    let included = IncludedScopes::new(&state, &context.caller, foreign, &projection).await?;
    let mut records = state
        .datasource
        .collection(foreign_name)?
        .list(&context.caller, &filter, &projection)
        .await?;
    included.apply(&context.caller, &mut records).await?;
    let body = serialize::serialize_list(schema, foreign_name, &records, filter.search.as_deref())?;
    let response = super::json_bytes(body.to_bytes()?);
    activity.done();
    Ok(response)
}

/// `GET /{c}/{id}/relationships/{r}.csv` (a path segment cannot be split by the router): the
/// collection export of the foreign records, restricted to the parent's.
async fn csv_related(
    state: &SharedState,
    parent: &CollectionSchema,
    id: &str,
    relation_name: &str,
    context: &CallerContext,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let relation = relation(parent, relation_name, false)?;
    let foreign_name = relation.foreign_collection();
    // Checked before the parent is read; `csv` asks again (cached lookups) with the scope.
    browse(state, context, foreign_name).await?;
    state
        .permissions
        .can(&context.caller, foreign_name, CollectionRight::Export)
        .await?;
    let parent_id = unpack_id(parent, id)?;
    let tree = related_tree(state, &context.caller, parent, &parent_id, relation).await?;
    csv(state, foreign_name, context, headers, Some(tree)).await
}

/// `GET /{c}/{id}/relationships/{r}/count`: `{"count": n}`, or the deactivated body.
async fn count_related(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let parent = served(schema, &name)?;
    let relation = relation(parent, &relation_name, false)?;
    let foreign_name = relation.foreign_collection();
    let foreign = schema.collection(foreign_name)?;
    browse(&state, &context, foreign_name).await?;
    if !foreign.countable {
        return Ok(super::json(&serialize::count_deactivated_body()));
    }
    let request = parse_filter(&Params::new(&context.query), schema, foreign)?;
    permission::relation_reads(&state, &context, None, foreign, &request.filter, None).await?;
    let filter = resolve(&state, &context.caller, foreign, request).await?;
    let filter = scoped(&state, &context.caller, foreign, filter).await?;
    let parent_id = unpack_id(parent, &id)?;
    let tree = related_tree(&state, &context.caller, parent, &parent_id, relation).await?;
    let rows = state
        .datasource
        .collection(foreign_name)?
        .aggregate(
            &context.caller,
            &filter.and(Some(tree)),
            &Aggregation::count(),
            None,
        )
        .await?;
    // A count is a non-negative integer; `as` saturates, and no row means 0.
    let count = rows
        .first()
        .and_then(|row| row.value.as_f64())
        .map_or(0, |n| n as u64);
    Ok(super::json(&serialize::count_body(count)))
}

/// The rights to link or unlink records of a to-many relation of `parent`: `edit` on the parent,
/// whose relation changes (the agent 1.78's associate, so that a user who may edit products can
/// tag them without editing tags). A one-to-many link is written in the foreign records (their
/// foreign key moves, possibly away from another parent), so it needs `edit` on the foreign
/// collection as well, as the current agent requires (forestadmin/agent-nodejs#1820). A
/// many-to-many link only writes the through collection.
async fn link_rights(
    state: &SharedState,
    caller: &Caller,
    parent: &str,
    relation: &RelationSchema,
) -> ApiResult<()> {
    state
        .permissions
        .can(caller, parent, CollectionRight::Edit)
        .await?;
    if let RelationSchema::OneToMany {
        foreign_collection, ..
    } = relation
    {
        state
            .permissions
            .can(caller, foreign_collection, CollectionRight::Edit)
            .await?;
    }
    Ok(())
}

/// `POST /{c}/{id}/relationships/{r}` (associate): links the first record of the body. 204.
async fn associate(
    State(state): State<SharedState>,
    Path((name, id, relation_name)): Path<(String, String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let schema = state.datasource.schema();
    let parent = served(schema, &name)?;
    let relation = relation(parent, &relation_name, false)?;
    // The parent's relation changes: an update of the parent, as the UI shows it.
    let mut activity = Recorded::start(&state, Action::Update, &context.caller, &name);
    activity.records([id.as_str()]);
    activity.label(format!("associated to {relation_name}"));
    let foreign_name = relation.foreign_collection();
    let foreign = schema.collection(foreign_name)?;
    link_rights(&state, &context.caller, &name, relation).await?;
    let target = parse_associate(&body, foreign)?;
    let parent_id = unpack_id(parent, &id)?;
    let caller = &context.caller;
    let scope = permission::scope(&state, caller, foreign).await?;
    match relation {
        RelationSchema::OneToMany {
            origin_key,
            origin_key_target,
            ..
        } => {
            let value = parent_value(&state, caller, parent, &parent_id, origin_key_target).await?;
            let mut patch = Record::new();
            patch.insert(origin_key.as_str(), value);
            // A record outside the caller's scope is left as it is.
            let filter = Filter::new(Some(match_ids(foreign, &[target])?)).and(scope);
            state
                .datasource
                .collection(foreign_name)?
                .update(caller, &filter, &patch)
                .await?;
        }
        RelationSchema::ManyToMany {
            through_collection,
            origin_key,
            origin_key_target,
            foreign_key,
            foreign_key_target,
            ..
        } => {
            let origin =
                parent_value(&state, caller, parent, &parent_id, origin_key_target).await?;
            let linked = match scope {
                None => {
                    to_one_target(
                        &state,
                        caller,
                        foreign_name,
                        foreign,
                        &target,
                        foreign_key_target,
                    )
                    .await?
                }
                // As the agent: a record outside the caller's scope is not linked (204).
                Some(scope) => {
                    let filter = Filter::new(Some(match_ids(foreign, &[target])?)).and(Some(scope));
                    let records = state
                        .datasource
                        .collection(foreign_name)?
                        .list(
                            caller,
                            &filter,
                            &Projection::new([foreign_key_target.as_str()]),
                        )
                        .await?;
                    match records.first() {
                        Some(record) => column_value(record, foreign_key_target),
                        None => {
                            activity.label("not associated: the record is outside the scope");
                            return Ok(StatusCode::NO_CONTENT);
                        }
                    }
                }
            };
            let mut row = Record::new();
            row.insert(origin_key.as_str(), origin);
            row.insert(foreign_key.as_str(), linked);
            state
                .datasource
                .collection(through_collection)?
                .create(caller, vec![row])
                .await?;
        }
        RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. } => {
            return Err(ApiError::RouteNotFound);
        }
    }
    activity.done();
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
    let schema = state.datasource.schema();
    let parent = served(schema, &name)?;
    let relation = relation(parent, &relation_name, false)?;
    let foreign_name = relation.foreign_collection();
    let foreign = schema.collection(foreign_name)?;
    let delete = parse_delete_flag(&context.query);
    // Unlinking updates the parent; `?delete=true` deletes the selected related records.
    let mut activity = if delete {
        let mut deleted = Recorded::start(&state, Action::Delete, &context.caller, foreign_name);
        deleted.label(format!("deleted from {relation_name} of {name} {id}"));
        deleted
    } else {
        let mut updated = Recorded::start(&state, Action::Update, &context.caller, &name);
        updated.records([id.as_str()]);
        updated.label(format!("dissociated from {relation_name}"));
        updated
    };
    if delete {
        // Deleting the related records is a delete on their collection, as in the agent.
        state
            .permissions
            .can(&context.caller, foreign_name, CollectionRight::Delete)
            .await?;
    } else {
        link_rights(&state, &context.caller, &name, relation).await?;
    }
    let selection = parse_selection(&body, foreign)?;
    selection.ensure_not_empty()?;
    if delete && !selection.all_records {
        activity.ids(&selection.ids);
    }
    let request = selection.filter(&context.query, schema, foreign)?;
    let filter = resolve(&state, &context.caller, foreign, request).await?;
    let filter = scoped(&state, &context.caller, foreign, filter).await?;
    let parent_id = unpack_id(parent, &id)?;
    let caller = &context.caller;
    // Only records linked to this parent are touched, whatever the selection says.
    let tree = related_tree(&state, caller, parent, &parent_id, relation).await?;
    let filter = filter.and(Some(tree));
    let foreign_collection = state.datasource.collection(foreign_name)?;
    match relation {
        RelationSchema::OneToMany { origin_key, .. } => {
            if delete {
                foreign_collection.delete(caller, &filter).await?;
            } else {
                let mut unset = Record::new();
                unset.insert(origin_key.as_str(), Value::Null);
                foreign_collection.update(caller, &filter, &unset).await?;
            }
        }
        RelationSchema::ManyToMany {
            through_collection,
            origin_key,
            origin_key_target,
            foreign_key,
            foreign_key_target,
            ..
        } => {
            // Read before deleting the through rows: afterwards the selection matches nothing.
            let selected = foreign_collection
                .list(
                    caller,
                    &filter,
                    &Projection::new([foreign_key_target.as_str()]),
                )
                .await?;
            let keys = distinct_values(&selected, foreign_key_target);
            if keys.is_empty() {
                // Nothing selected is linked: done, with nothing changed.
                activity.done();
                return Ok(StatusCode::NO_CONTENT);
            }
            let origin =
                parent_value(&state, caller, parent, &parent_id, origin_key_target).await?;
            let through = Filter::new(Some(ConditionTree::and(vec![
                ConditionTree::leaf(origin_key, Operator::Equal, origin),
                ConditionTree::leaf(foreign_key, Operator::In, Value::Array(keys.clone())),
            ])));
            state
                .datasource
                .collection(through_collection)?
                .delete(caller, &through)
                .await?;
            if delete {
                let records = Filter::new(Some(ConditionTree::leaf(
                    foreign_key_target,
                    Operator::In,
                    Value::Array(keys),
                )));
                foreign_collection.delete(caller, &records).await?;
            }
        }
        RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. } => {
            return Err(ApiError::RouteNotFound);
        }
    }
    activity.done();
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
    let schema = state.datasource.schema();
    let parent = served(schema, &name)?;
    let relation = relation(parent, &relation_name, true)?;
    let mut activity = Recorded::start(&state, Action::Update, &context.caller, &name);
    activity.records([id.as_str()]);
    activity.label(format!("changed {relation_name}"));
    let foreign_name = relation.foreign_collection();
    let foreign = schema.collection(foreign_name)?;
    let caller = &context.caller;
    let parent_id = unpack_id(parent, &id)?;
    match relation {
        RelationSchema::ManyToOne {
            foreign_key,
            foreign_key_target,
            ..
        } => {
            // The parent holds the key: editing the link edits the parent.
            state
                .permissions
                .can(caller, &name, CollectionRight::Edit)
                .await?;
            let value = match parse_update_to_one(&body, foreign)? {
                Some(target) => {
                    to_one_target(
                        &state,
                        caller,
                        foreign_name,
                        foreign,
                        &target,
                        foreign_key_target,
                    )
                    .await?
                }
                None => Value::Null,
            };
            let mut patch = Record::new();
            patch.insert(foreign_key.as_str(), value);
            let filter = Filter::new(Some(match_ids(parent, &[parent_id])?));
            let filter = scoped(&state, caller, parent, filter).await?;
            state
                .datasource
                .collection(&name)?
                .update(caller, &filter, &patch)
                .await?;
        }
        RelationSchema::OneToOne {
            origin_key,
            origin_key_target,
            ..
        } => {
            state
                .permissions
                .can(caller, foreign_name, CollectionRight::Edit)
                .await?;
            let target = parse_update_to_one(&body, foreign)?;
            let origin =
                parent_value(&state, caller, parent, &parent_id, origin_key_target).await?;
            link_one_to_one(
                &state,
                caller,
                foreign_name,
                origin_key,
                &origin,
                target.as_ref(),
            )
            .await?;
        }
        RelationSchema::OneToMany { .. } | RelationSchema::ManyToMany { .. } => {
            return Err(ApiError::RouteNotFound);
        }
    }
    activity.done();
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /{c}/{id}/relationships/{field}/{index}`: replaces element `index` of the array column
/// `field` with the body's sub-record (an index equal to the length appends, as the agent's
/// array assignment does). 204.
async fn update_field(
    State(state): State<SharedState>,
    Path((name, id, field, index)): Path<(String, String, String, String)>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, &name)?;
    let mut activity = Recorded::start(&state, Action::Update, &context.caller, &name);
    activity.records([id.as_str()]);
    state
        .permissions
        .can(&context.caller, &name, CollectionRight::Edit)
        .await?;
    let update = parse_update_field(&body, collection_schema, &field, &index)?;
    let record_id = unpack_id(collection_schema, &id)?;
    let scope = permission::scope(&state, &context.caller, collection_schema).await?;
    // The record is read and written within the caller's scope: outside it, 404.
    let filter = Filter::new(Some(match_ids(
        collection_schema,
        std::slice::from_ref(&record_id),
    )?))
    .and(scope);
    let current = state
        .datasource
        .collection(&name)?
        .list(&context.caller, &filter, &Projection::new([field.as_str()]))
        .await?
        .first()
        .map(|record| column_value(record, &field))
        .ok_or_else(|| agent::Error::NotFound("Record does not exists".to_owned()))?;
    let mut items = match current {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        // An array column always reads as an array; anything else is the datasource's bug.
        other => {
            return Err(agent::Error::Validation(format!(
                "Field '{field}' is not an array (found {other:?})"
            ))
            .into());
        }
    };
    if update.index > items.len() {
        return Err(agent::Error::Validation(format!("Field '{field}' is too short")).into());
    }
    let element = Value::Json(Json::Object(update.sub_record));
    if update.index == items.len() {
        items.push(element);
    } else {
        items[update.index] = element;
    }
    let mut patch = Record::new();
    patch.insert(field.as_str(), Value::Array(items));
    state
        .datasource
        .collection(&name)?
        .update(&context.caller, &filter, &patch)
        .await?;
    activity.done();
    Ok(StatusCode::NO_CONTENT)
}
