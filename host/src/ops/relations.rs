//! Relations of a record (protocol §1.3): list, count and export the records of a to-many
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

use serde_json::Value as Json;

use super::activity::Recorded;
use super::permission::{self, browse, scoped};
use super::records::{
    Counted, Export, ExportRequest, FilterRequest, ListRequest, Listed, count_of, plan_count,
    plan_list, read_page, resolve,
};
use super::{Error, Ops, Result};
use crate::agent;
use crate::agent::body::FieldUpdate;
use crate::agent::query_string::{CompositeId, match_ids};
use crate::auth::CollectionRight;
use crate::datasource::{
    Caller, CollectionSchema, ConditionTree, Filter, Operator, Projection, Record, RelationSchema,
    Value, unpack_id,
};
use crate::platform::activity::Action;

/// A relation of one record: the parent collection, the parent's id as the client packed it,
/// and the relation's name.
#[derive(Debug, Clone)]
pub struct Parent {
    pub collection: String,
    pub packed_id: String,
    pub relation: String,
}

/// A relation of `collection` of this kind (to-one or to-many); any other name is
/// [`Error::NotFound`] (the agent registers relation routes per relation and kind).
pub fn relation<'a>(
    collection: &'a CollectionSchema,
    name: &str,
    to_one: bool,
) -> Result<&'a RelationSchema> {
    collection
        .relation(name)
        .filter(|r| r.is_to_one() == to_one)
        .ok_or(Error::NotFound)
}

/// The parent's collection, its relation (of this kind) and the relation's foreign collection.
pub fn locate<'a>(
    ops: &'a Ops,
    parent: &Parent,
    to_one: bool,
) -> Result<(
    &'a CollectionSchema,
    &'a RelationSchema,
    &'a CollectionSchema,
)> {
    let collection = ops.collection(&parent.collection)?;
    let relation = relation(collection, &parent.relation, to_one)?;
    let foreign = ops.schema().collection(relation.foreign_collection())?;
    Ok((collection, relation, foreign))
}

/// A field of a record, `Null` when absent.
pub fn column_value(record: &Record, field: &str) -> Value {
    record.get(field).cloned().unwrap_or(Value::Null)
}

/// One column of the record `id` of `collection`, `None` when there is no such record.
pub async fn read_column(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    id: &CompositeId,
    column: &str,
) -> Result<Option<Value>> {
    let filter = Filter::new(Some(match_ids(collection, std::slice::from_ref(id))?));
    let records = ops
        .datasource
        .collection(&collection.name)?
        .list(caller, &filter, &Projection::new([column]))
        .await?;
    Ok(records.first().map(|r| column_value(r, column)))
}

/// The value a link to the record `id` of `foreign` stores: its `target` column (a key may target
/// a non-primary column, so it is read rather than taken from the id). A missing record is a
/// body error: the link names a record that does not exist.
pub async fn to_one_target(
    ops: &Ops,
    caller: &Caller,
    foreign_name: &str,
    foreign: &CollectionSchema,
    id: &CompositeId,
    target: &str,
) -> Result<Value> {
    read_column(ops, caller, foreign, id, target)
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
pub async fn parent_value(
    ops: &Ops,
    caller: &Caller,
    parent: &CollectionSchema,
    id: &CompositeId,
    column: &str,
) -> Result<Value> {
    read_column(ops, caller, parent, id, column)
        .await?
        .ok_or_else(|| agent::Error::NotFound("Record does not exists".to_owned()).into())
}

/// Links the record `target` of a `OneToOne` to the origin value: whoever held it is unlinked
/// first, since the key is unique. `None` only unlinks.
/// Both updates keep to the caller's scope on the foreign collection, as the agent's do.
pub async fn link_one_to_one(
    ops: &Ops,
    caller: &Caller,
    foreign_name: &str,
    origin_key: &str,
    origin_value: &Value,
    target: Option<&CompositeId>,
) -> Result<()> {
    let foreign_schema = ops.datasource.schema().collection(foreign_name)?;
    let foreign = ops.datasource.collection(foreign_name)?;
    let scope = permission::scope(ops, caller, foreign_schema).await?;
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
pub async fn related_tree(
    ops: &Ops,
    caller: &Caller,
    parent: &CollectionSchema,
    parent_id: &CompositeId,
    relation: &RelationSchema,
) -> Result<ConditionTree> {
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
            let value = read_column(ops, caller, parent, parent_id, origin_key_target).await?;
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
            let value = read_column(ops, caller, parent, parent_id, origin_key_target).await?;
            let Some(value) = value.filter(|v| !v.is_null()) else {
                return Ok(nothing());
            };
            let through = Filter::new(Some(ConditionTree::leaf(
                origin_key,
                Operator::Equal,
                value,
            )));
            let rows = ops
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
        RelationSchema::ManyToOne { .. } => Err(Error::NotFound),
    }
}

/// Lists a page of the records related to the parent: browse on the foreign collection, page
/// size, relation reads, segment and scope, restricted to the parent's records.
pub async fn list_related(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    request: ListRequest,
) -> Result<Listed> {
    let (parent_schema, relation, foreign) = locate(ops, parent, false)?;
    let mut activity = Recorded::start(ops, Action::ListRelatedData, caller, &parent.collection);
    activity.records([parent.packed_id.as_str()]);
    activity.label(parent.relation.as_str());
    let mut planned = plan_list(ops, caller, foreign, request).await?;
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    let tree = related_tree(ops, caller, parent_schema, &parent_id, relation).await?;
    planned.filter = planned.filter.and(Some(tree));
    let listed = read_page(ops, caller, foreign, planned).await?;
    activity.done();
    Ok(listed)
}

/// Starts the export of the records related to the parent (the foreign collection's export,
/// restricted to the parent's records).
pub async fn export_related(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    mut request: ExportRequest,
) -> Result<Export> {
    let (parent_schema, relation, _) = locate(ops, parent, false)?;
    let foreign_name = relation.foreign_collection();
    // Checked before the parent is read; the export asks again (cached lookups) with the scope.
    browse(ops, caller, foreign_name, request.segment_query.as_ref()).await?;
    ops.permissions
        .can(caller, foreign_name, CollectionRight::Export)
        .await?;
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    let tree = related_tree(ops, caller, parent_schema, &parent_id, relation).await?;
    request.restrict = Some(tree);
    super::records::export(ops, caller, request).await
}

/// Counts the records related to the parent, or none where the foreign collection's count is
/// deactivated.
pub async fn count_related(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    request: FilterRequest,
) -> Result<Counted> {
    let (parent_schema, relation, foreign) = locate(ops, parent, false)?;
    let Some(filter) = plan_count(ops, caller, foreign, request).await? else {
        return Ok(Counted::Deactivated);
    };
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    let tree = related_tree(ops, caller, parent_schema, &parent_id, relation).await?;
    count_of(ops, caller, foreign, &filter.and(Some(tree))).await
}

/// The rights to link or unlink records of a to-many relation of `parent`: `edit` on the parent,
/// whose relation changes (the agent 1.78's associate, so that a user who may edit products can
/// tag them without editing tags). A one-to-many link is written in the foreign records (their
/// foreign key moves, possibly away from another parent), so it needs `edit` on the foreign
/// collection as well, as the current agent requires (forestadmin/agent-nodejs#1820). A
/// many-to-many link only writes the through collection.
async fn link_rights(
    ops: &Ops,
    caller: &Caller,
    parent: &str,
    relation: &RelationSchema,
) -> Result<()> {
    ops.permissions
        .can(caller, parent, CollectionRight::Edit)
        .await?;
    if let RelationSchema::OneToMany {
        foreign_collection, ..
    } = relation
    {
        ops.permissions
            .can(caller, foreign_collection, CollectionRight::Edit)
            .await?;
    }
    Ok(())
}

/// Whether the caller may link and unlink records of the to-many relation `relation` of
/// `parent` ([`link_rights`] as a yes or no), so that an interface shows its buttons only to
/// those who may use them.
pub async fn may_link(
    ops: &Ops,
    caller: &Caller,
    parent: &str,
    relation: &RelationSchema,
) -> Result<bool> {
    match link_rights(ops, caller, parent, relation).await {
        Ok(()) => Ok(true),
        Err(Error::Auth(crate::auth::Error::Forbidden(_))) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Links the record `target` of the foreign collection to the parent (associate). A record
/// outside the caller's scope is left as it is.
pub async fn associate(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    target: CompositeId,
) -> Result<()> {
    let (parent_schema, relation, foreign) = locate(ops, parent, false)?;
    // The parent's relation changes: an update of the parent, as the UI shows it.
    let mut activity = Recorded::start(ops, Action::Update, caller, &parent.collection);
    activity.records([parent.packed_id.as_str()]);
    activity.label(format!("associated to {}", parent.relation));
    let foreign_name = relation.foreign_collection();
    link_rights(ops, caller, &parent.collection, relation).await?;
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    let scope = permission::scope(ops, caller, foreign).await?;
    match relation {
        RelationSchema::OneToMany {
            origin_key,
            origin_key_target,
            ..
        } => {
            let value =
                parent_value(ops, caller, parent_schema, &parent_id, origin_key_target).await?;
            let mut patch = Record::new();
            patch.insert(origin_key.as_str(), value);
            // A record outside the caller's scope is left as it is.
            let filter = Filter::new(Some(match_ids(foreign, &[target])?)).and(scope);
            ops.datasource
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
                parent_value(ops, caller, parent_schema, &parent_id, origin_key_target).await?;
            let linked = match scope {
                None => {
                    to_one_target(
                        ops,
                        caller,
                        foreign_name,
                        foreign,
                        &target,
                        foreign_key_target,
                    )
                    .await?
                }
                // As the agent: a record outside the caller's scope is not linked.
                Some(scope) => {
                    let filter = Filter::new(Some(match_ids(foreign, &[target])?)).and(Some(scope));
                    let records = ops
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
                            return Ok(());
                        }
                    }
                }
            };
            let mut row = Record::new();
            row.insert(origin_key.as_str(), origin);
            row.insert(foreign_key.as_str(), linked);
            ops.datasource
                .collection(through_collection)?
                .create(caller, vec![row])
                .await?;
        }
        RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. } => {
            return Err(Error::NotFound);
        }
    }
    activity.done();
    Ok(())
}

/// What to dissociate: a selection of the related records, unlinked or (`delete`) deleted.
#[derive(Debug, Clone)]
pub struct DissociateRequest {
    /// Delete the selected records rather than unlinking them.
    pub delete: bool,
    /// The selection on the foreign collection (not empty).
    pub selection: super::records::SelectionRequest,
}

/// Unlinks the selected related records, or deletes them. Only records linked to this parent
/// are touched, whatever the selection says.
pub async fn dissociate(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    request: DissociateRequest,
) -> Result<()> {
    let (parent_schema, relation, foreign) = locate(ops, parent, false)?;
    let foreign_name = relation.foreign_collection();
    let delete = request.delete;
    // Unlinking updates the parent; `delete` deletes the selected related records.
    let mut activity = if delete {
        let mut deleted = Recorded::start(ops, Action::Delete, caller, foreign_name);
        deleted.label(format!(
            "deleted from {} of {} {}",
            parent.relation, parent.collection, parent.packed_id
        ));
        deleted
    } else {
        let mut updated = Recorded::start(ops, Action::Update, caller, &parent.collection);
        updated.records([parent.packed_id.as_str()]);
        updated.label(format!("dissociated from {}", parent.relation));
        updated
    };
    if delete {
        // Deleting the related records is a delete on their collection, as in the agent.
        ops.permissions
            .can(caller, foreign_name, CollectionRight::Delete)
            .await?;
    } else {
        link_rights(ops, caller, &parent.collection, relation).await?;
    }
    let selection = request.selection;
    if delete && !selection.all_records {
        activity.ids(&selection.ids);
    }
    let filter = resolve(ops, caller, foreign, selection.filter).await?;
    let filter = scoped(ops, caller, foreign, filter).await?;
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    let tree = related_tree(ops, caller, parent_schema, &parent_id, relation).await?;
    let filter = filter.and(Some(tree));
    let foreign_collection = ops.datasource.collection(foreign_name)?;
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
                return Ok(());
            }
            let origin =
                parent_value(ops, caller, parent_schema, &parent_id, origin_key_target).await?;
            let through = Filter::new(Some(ConditionTree::and(vec![
                ConditionTree::leaf(origin_key, Operator::Equal, origin),
                ConditionTree::leaf(foreign_key, Operator::In, Value::Array(keys.clone())),
            ])));
            ops.datasource
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
            return Err(Error::NotFound);
        }
    }
    activity.done();
    Ok(())
}

/// Sets a to-one relation of the parent to the record `target` of the foreign collection, or
/// unlinks it (`None`).
pub async fn update_to_one(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    target: Option<CompositeId>,
) -> Result<()> {
    let (parent_schema, relation, foreign) = locate(ops, parent, true)?;
    let name = &parent.collection;
    let mut activity = Recorded::start(ops, Action::Update, caller, name);
    activity.records([parent.packed_id.as_str()]);
    activity.label(format!("changed {}", parent.relation));
    let foreign_name = relation.foreign_collection();
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    match relation {
        RelationSchema::ManyToOne {
            foreign_key,
            foreign_key_target,
            ..
        } => {
            // The parent holds the key: editing the link edits the parent.
            ops.permissions
                .can(caller, name, CollectionRight::Edit)
                .await?;
            let value = match target {
                Some(target) => {
                    to_one_target(
                        ops,
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
            let filter = Filter::new(Some(match_ids(parent_schema, &[parent_id])?));
            let filter = scoped(ops, caller, parent_schema, filter).await?;
            ops.datasource
                .collection(name)?
                .update(caller, &filter, &patch)
                .await?;
        }
        RelationSchema::OneToOne {
            origin_key,
            origin_key_target,
            ..
        } => {
            ops.permissions
                .can(caller, foreign_name, CollectionRight::Edit)
                .await?;
            let origin =
                parent_value(ops, caller, parent_schema, &parent_id, origin_key_target).await?;
            link_one_to_one(
                ops,
                caller,
                foreign_name,
                origin_key,
                &origin,
                target.as_ref(),
            )
            .await?;
        }
        RelationSchema::OneToMany { .. } | RelationSchema::ManyToMany { .. } => {
            return Err(Error::NotFound);
        }
    }
    activity.done();
    Ok(())
}

/// Replaces element `update.index` of the array column `field` of one record with the update's
/// sub-record (an index equal to the length appends, as the agent's array assignment does).
/// The record is read and written within the caller's scope: outside it, `NotFound`.
pub async fn update_field(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    packed_id: &str,
    field: &str,
    update: FieldUpdate,
) -> Result<()> {
    let collection_schema = ops.collection(collection)?;
    let mut activity = Recorded::start(ops, Action::Update, caller, collection);
    activity.records([packed_id]);
    ops.permissions
        .can(caller, collection, CollectionRight::Edit)
        .await?;
    let record_id = unpack_id(collection_schema, packed_id)?;
    let scope = permission::scope(ops, caller, collection_schema).await?;
    let filter = Filter::new(Some(match_ids(
        collection_schema,
        std::slice::from_ref(&record_id),
    )?))
    .and(scope);
    let current = ops
        .datasource
        .collection(collection)?
        .list(caller, &filter, &Projection::new([field]))
        .await?
        .first()
        .map(|record| column_value(record, field))
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
    patch.insert(field, Value::Array(items));
    ops.datasource
        .collection(collection)?
        .update(caller, &filter, &patch)
        .await?;
    activity.done();
    Ok(())
}
