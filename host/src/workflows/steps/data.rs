//! `get-data`, `update-data` and `load-related`: the run's record read or written as the run's
//! user, with the collection's right (`read`, `edit`; `read` on the related collection) and
//! within their scope. A record outside the scope is not found, as on the agent's routes.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use super::{Given, Outcome, StepCtx, StepError, StepResult, collection, template};
use crate::agent::body::parse_update;
use crate::agent::query_string::{CompositeId, match_ids};
use crate::auth::CollectionRight;
use crate::datasource::{
    CollectionSchema, ConditionTree, Filter, Operator, Page, Projection, Record, RelationSchema,
    Sort, Value, pack_id, unpack_id,
};
use crate::workflows::engine::store::StepWait;

/// The run's record id, typed for its collection; an id that is not one of the collection's
/// fails the run (a webhook's `record_id` is not checked when the run is created).
pub(super) fn record_id(ctx: &StepCtx<'_>, schema: &CollectionSchema) -> StepResult<CompositeId> {
    unpack_id(schema, &ctx.run.record_id).map_err(|e| {
        StepError::not_found(format!(
            "the run's record id {:?} is not an id of {}: {e}",
            ctx.run.record_id, schema.name
        ))
    })
}

/// The filter of the run's record within the user's scope on its collection.
pub(super) async fn scoped_record(
    ctx: &StepCtx<'_>,
    schema: &CollectionSchema,
) -> StepResult<Filter> {
    let id = record_id(ctx, schema)?;
    let tree = match_ids(schema, std::slice::from_ref(&id))
        .map_err(|e| StepError::not_found(format!("the run's record cannot be addressed: {e}")))?;
    let scope = ctx
        .state
        .permissions
        .scope(ctx.caller, schema, ctx.state.datasource.schema())
        .await?;
    Ok(Filter::new(Some(tree)).and(scope))
}

/// The first record of `filter` with `projection`, if any.
pub(super) async fn first(
    ctx: &StepCtx<'_>,
    schema: &CollectionSchema,
    filter: Filter,
    projection: &Projection,
) -> StepResult<Option<Record>> {
    let filter = filter.with_page(Page::new(0, 1));
    let records = ctx
        .state
        .datasource
        .collection(&schema.name)?
        .list(ctx.caller, &filter, projection)
        .await?;
    Ok(records.into_iter().next())
}

/// The run's record (within the scope), or the step fails the run: it does not exist, or the
/// user may not see it.
pub(super) async fn the_record(
    ctx: &StepCtx<'_>,
    schema: &CollectionSchema,
    projection: &Projection,
) -> StepResult<Record> {
    let filter = scoped_record(ctx, schema).await?;
    first(ctx, schema, filter, projection)
        .await?
        .ok_or_else(|| not_found(ctx, schema))
}

fn not_found(ctx: &StepCtx<'_>, schema: &CollectionSchema) -> StepError {
    StepError::not_found(format!(
        "record {} of {} not found (or outside the scope of the run's user)",
        ctx.run.record_id, schema.name
    ))
}

/// The primary keys of a collection as a projection.
fn keys(schema: &CollectionSchema) -> Projection {
    Projection::new(schema.primary_keys().into_iter().map(str::to_owned))
}

/// The value at a projection path (`customer:email` reads the nested record).
fn value_at<'a>(record: &'a Record, path: &str) -> Option<&'a Value> {
    match path.split_once(':') {
        None => record.get(path),
        Some((relation, rest)) => match record.get(relation)? {
            Value::Record(nested) => value_at(nested, rest),
            _ => None,
        },
    }
}

/// `fields` of `record` as a JSON object (a missing one is null).
fn fields_json(record: &Record, fields: &[String]) -> Map<String, Json> {
    fields
        .iter()
        .map(|field| {
            let value = value_at(record, field)
                .map(|v| serde_json::to_value(v).unwrap_or(Json::Null))
                .unwrap_or(Json::Null);
            (field.clone(), value)
        })
        .collect()
}

/// Checks `fields` against the collection (paths through to-one relations allowed) and the
/// user's relation reads; their projection.
async fn readable(
    ctx: &StepCtx<'_>,
    schema: &CollectionSchema,
    fields: &[String],
) -> StepResult<Projection> {
    let projection = Projection::new(fields.iter().cloned());
    let served = ctx.state.datasource.schema();
    projection
        .validate(schema, served)
        .map_err(|e| StepError::definition(format!("fields of {}: {e}", schema.name)))?;
    ctx.state
        .permissions
        .can_read_through(
            ctx.caller,
            served,
            schema,
            fields.iter().map(String::as_str).collect(),
        )
        .await?;
    Ok(projection)
}

/// `get-data`: the fields of the record into the context.
pub(super) async fn get(ctx: &StepCtx<'_>, fields: &[String]) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    ctx.state
        .permissions
        .can(ctx.caller, &schema.name, CollectionRight::Read)
        .await?;
    let projection = readable(ctx, schema, fields).await?;
    let record = the_record(ctx, schema, &projection).await?;
    Ok(Outcome::done(Json::Object(fields_json(&record, fields))))
}

/// `update-data`: sets the fields (templates resolved; a person's values over the definition's)
/// under the write-ahead marker: done once, never twice.
pub(super) async fn update(
    ctx: &StepCtx<'_>,
    values: &BTreeMap<String, Json>,
    given: Option<&Given<'_>>,
) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    ctx.state
        .permissions
        .can(ctx.caller, &schema.name, CollectionRight::Edit)
        .await?;
    let mut values = template::resolve_map(values, &ctx.run.context)?;
    if let Some(given) = given {
        values.extend(given.values());
    }
    if values.is_empty() {
        return Err(StepError::refused("update-data has no value to set"));
    }
    let patch = parse_update(
        &json!({"data": {"attributes": Json::Object(values.clone())}}),
        schema,
    )
    .map_err(|e| StepError::refused(format!("the values do not fit {}: {e}", schema.name)))?;
    let filter = scoped_record(ctx, schema).await?;
    // Outside the scope (or gone): not found, and nothing is written.
    first(ctx, schema, filter.clone(), &keys(schema))
        .await?
        .ok_or_else(|| not_found(ctx, schema))?;
    let written = super::action::once(ctx, async {
        ctx.state
            .datasource
            .collection(&schema.name)?
            .update(ctx.caller, &filter, &patch)
            .await
            .map_err(StepError::from)
    })
    .await?;
    Ok(match written {
        Some(()) => Outcome::done(Json::Object(values)),
        None => uncertain(),
    })
}

/// The step's write may have happened before (its marker was set): it waits for a person.
pub(super) fn uncertain() -> Outcome {
    Outcome::Wait(
        crate::workflows::engine::WaitingReason::Uncertain,
        StepWait {
            failed: None,
            ..StepWait::default()
        },
    )
}

/// `load-related`: the first related record (matching `filter`) visible to the user, its id
/// and `fields` into the context (`id` null when there is none).
pub(super) async fn load_related(
    ctx: &StepCtx<'_>,
    relation_name: &str,
    filter: Option<&Json>,
    fields: &[String],
) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    let served = ctx.state.datasource.schema();
    let relation = schema.relation(relation_name).ok_or_else(|| {
        StepError::definition(format!("{} has no relation {relation_name:?}", schema.name))
    })?;
    let foreign_name = relation.foreign_collection();
    let foreign = served
        .collections
        .get(foreign_name)
        .ok_or_else(|| StepError::definition(format!("{foreign_name:?} is not served")))?;
    ctx.state
        .permissions
        .can(ctx.caller, &schema.name, CollectionRight::Read)
        .await?;
    ctx.state
        .permissions
        .can(ctx.caller, foreign_name, CollectionRight::Read)
        .await?;
    let tree = match relation {
        RelationSchema::ManyToOne {
            foreign_key,
            foreign_key_target,
            ..
        } => {
            let parent = the_record(ctx, schema, &Projection::new([foreign_key.clone()])).await?;
            match parent.get(foreign_key) {
                Some(value) if !value.is_null() => {
                    ConditionTree::leaf(foreign_key_target, Operator::Equal, value.clone())
                }
                _ => ConditionTree::or(Vec::new()),
            }
        }
        _ => {
            // The run's record must be visible first; then the relation's condition.
            the_record(ctx, schema, &keys(schema)).await?;
            let id = record_id(ctx, schema)?;
            crate::ops::relations::related_tree(ctx.state, ctx.caller, schema, &id, relation)
                .await?
        }
    };
    let condition = match filter {
        Some(json) => Some(
            ConditionTree::parse(json, foreign, served)
                .map_err(|e| StepError::definition(format!("the filter on {foreign_name}: {e}")))?,
        ),
        None => None,
    };
    let scope = ctx
        .state
        .permissions
        .scope(ctx.caller, foreign, served)
        .await?;
    let mut projection = readable(ctx, foreign, fields).await?;
    for key in foreign.primary_keys() {
        if !projection.iter().any(|p| p == key) {
            projection.push(key.to_owned());
        }
    }
    let sort = Sort(
        foreign
            .primary_keys()
            .into_iter()
            .map(|k| crate::datasource::SortClause {
                field: k.to_owned(),
                ascending: true,
            })
            .collect(),
    );
    let filter = Filter::new(Some(tree))
        .and(condition)
        .and(scope)
        .with_sort(sort);
    let found = first(ctx, foreign, filter, &projection).await?;
    let mut output = Map::new();
    output.insert("collection".to_owned(), json!(foreign_name));
    match found {
        Some(record) => {
            let id = pack_id(foreign, &record)
                .map_err(|e| StepError::refused(format!("the related record's id: {e}")))?;
            output.insert("id".to_owned(), json!(id));
            output.extend(fields_json(&record, fields));
        }
        None => {
            output.insert("id".to_owned(), Json::Null);
        }
    }
    Ok(Outcome::done(Json::Object(output)))
}
