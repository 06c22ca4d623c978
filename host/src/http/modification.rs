//! Record writes (protocol §1.2, bodies §2.3 and §2.4): `POST /{c}` creates a record and applies
//! its to-one links, `PUT /{c}/{id}` patches one record and answers it re-read.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{post, put};

use super::activity::Recorded;
use super::collection::served;
use super::error::ApiResult;
use super::permission::{IncludedScopes, scoped};
use super::related::{self, column_value, to_one_target};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::body::{parse_create, parse_update};
use crate::agent::query_string::{CompositeId, match_ids, with_primary_keys};
use crate::agent::serialize;
use crate::auth::CollectionRight;
use crate::datasource::{self, Filter, Projection, Record, RelationSchema, Value, unpack_id};
use crate::platform::activity::Action;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/{collection}", post(create))
        .route("/{collection}/{id}", put(update))
}

/// A `OneToOne` link of a create body, applied once the record exists (it holds no key of ours).
struct OneToOneLink<'a> {
    foreign_collection: &'a str,
    origin_key: &'a str,
    origin_key_target: &'a str,
    target_id: Option<CompositeId>,
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
    let mut activity = Recorded::start(&state, Action::Create, &context.caller, &name);
    state
        .permissions
        .can(&context.caller, &name, CollectionRight::Add)
        .await?;
    let plan = parse_create(&body, schema, collection_schema)?;
    // Edit on the target of every linked OneToOne, all checked before anything is written.
    for link in &plan.to_one {
        if let Some(RelationSchema::OneToOne {
            foreign_collection, ..
        }) = collection_schema.relation(&link.relation)
        {
            state
                .permissions
                .can(&context.caller, foreign_collection, CollectionRight::Edit)
                .await?;
        }
    }
    let mut record = plan.record;
    let mut links = Record::new();
    let mut one_to_one = Vec::new();
    for link in plan.to_one {
        let Some(relation) = collection_schema.relation(&link.relation) else {
            // parse_create only returns the collection's to-one relations.
            continue;
        };
        let foreign = schema.collection(relation.foreign_collection())?;
        let linked = match &link.target_id {
            Some(id) => Value::Record(Box::new(id_record(id))),
            None => Value::Null,
        };
        match relation {
            RelationSchema::ManyToOne {
                foreign_collection,
                foreign_key,
                foreign_key_target,
            } => {
                // The key may target a non-primary column: read it from the linked record.
                let value = match &link.target_id {
                    Some(id) => {
                        to_one_target(
                            &state,
                            &context.caller,
                            foreign_collection,
                            foreign,
                            id,
                            foreign_key_target,
                        )
                        .await?
                    }
                    None => Value::Null,
                };
                record.insert(foreign_key.as_str(), value);
            }
            RelationSchema::OneToOne {
                foreign_collection,
                origin_key,
                origin_key_target,
            } => {
                one_to_one.push(OneToOneLink {
                    foreign_collection,
                    origin_key,
                    origin_key_target,
                    target_id: link.target_id,
                });
            }
            RelationSchema::OneToMany { .. } | RelationSchema::ManyToMany { .. } => continue,
        }
        links.insert(link.relation.as_str(), linked);
    }
    let created = state
        .datasource
        .collection(&name)?
        .create(&context.caller, vec![record])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| datasource::Error::Internal("create returned no record".to_owned()))?;
    if let Ok(id) = datasource::pack_id(collection_schema, &created) {
        activity.records([id]);
    }
    for link in &one_to_one {
        let origin_value = column_value(&created, link.origin_key_target);
        related::link_one_to_one(
            &state,
            &context.caller,
            link.foreign_collection,
            link.origin_key,
            &origin_value,
            link.target_id.as_ref(),
        )
        .await?;
    }
    let mut response = created;
    for (relation, value) in links.iter() {
        response.insert(relation, value.clone());
    }
    let body = serialize::serialize_one(schema, &name, &response)?;
    let response = super::json_bytes(body.to_bytes()?);
    activity.done();
    Ok(response)
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
    let mut activity = Recorded::start(&state, Action::Update, &context.caller, &name);
    activity.records([id.as_str()]);
    state
        .permissions
        .can(&context.caller, &name, CollectionRight::Edit)
        .await?;
    let id = unpack_id(collection_schema, &id)?;
    let patch = parse_update(&body, collection_schema)?;
    let collection = state.datasource.collection(&name)?;
    let filter = Filter::new(Some(match_ids(
        collection_schema,
        std::slice::from_ref(&id),
    )?));
    let filter = scoped(&state, &context.caller, collection_schema, filter).await?;
    collection.update(&context.caller, &filter, &patch).await?;
    // A patch that changes the primary key moves the record: re-read it under its new id.
    let new_id: CompositeId = id
        .into_iter()
        .map(|(pk, value)| {
            let value = patch.get(&pk).cloned().unwrap_or(value);
            (pk, value)
        })
        .collect();
    let filter = Filter::new(Some(match_ids(collection_schema, &[new_id])?));
    let filter = scoped(&state, &context.caller, collection_schema, filter).await?;
    let projection = with_primary_keys(
        &Projection::with_to_one_relations(collection_schema, schema),
        schema,
        collection_schema,
    );
    let included =
        IncludedScopes::new(&state, &context.caller, collection_schema, &projection).await?;
    let mut records = collection
        .list(&context.caller, &filter, &projection)
        .await?;
    included.apply(&context.caller, &mut records).await?;
    // A record the filter does not find (there was none, or the patch moved it out of sight):
    // `data: null`, as the agent serializes the missing row it re-reads.
    let body = match records.first() {
        Some(record) => serialize::serialize_one(schema, &name, record)?,
        None => serialize::serialize_none(),
    };
    let response = super::json_bytes(body.to_bytes()?);
    activity.done();
    Ok(response)
}

/// A to-one link as the serializer expects it: the target's primary keys as a nested record.
fn id_record(id: &CompositeId) -> Record {
    let mut record = Record::with_capacity(id.len());
    for (pk, value) in id {
        record.insert(pk.as_str(), value.clone());
    }
    record
}
