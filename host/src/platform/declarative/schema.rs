//! What permission rules are checked against: the served schema when Canopy serves (every field,
//! operator and value type), or the schema file `.forestadmin-schema.json` for the CLI, which
//! runs without the user's database (collection, field, relation and action names).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value as Json;

use crate::datasource::query::{ConditionTree, Operator};
use crate::datasource::{DataSourceSchema, FieldSchema};

/// The collections, fields and actions rules may name.
#[derive(Debug, Clone)]
pub struct SchemaView {
    collections: BTreeMap<String, CollectionView>,
    /// The served schema itself, for full condition-tree checks.
    served: Option<DataSourceSchema>,
    /// Where the names come from, for messages.
    pub source: String,
}

#[derive(Debug, Clone, Default)]
struct CollectionView {
    /// Field → the collection a to-one relation leads to (`None` for a column or a to-many).
    fields: BTreeMap<String, FieldView>,
    actions: BTreeSet<String>,
}

/// What a field of a collection is, as far as names go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldView {
    /// A column; `read_only` when it cannot be written (workflow `update-data` steps check it).
    Column { read_only: bool },
    /// A to-one relation, to this collection.
    ToOne(String),
    /// A to-many relation, to this collection.
    ToMany(String),
}

impl SchemaView {
    /// The schema Canopy serves (after the plugins).
    pub fn served(schema: &DataSourceSchema) -> Self {
        let collections = schema
            .collections
            .iter()
            .map(|(name, collection)| {
                let fields = collection
                    .fields
                    .iter()
                    .map(|(field, schema)| {
                        let view = match schema {
                            FieldSchema::Column(column) => FieldView::Column {
                                read_only: column.is_read_only,
                            },
                            FieldSchema::Relation(r) if r.is_to_one() => {
                                FieldView::ToOne(r.foreign_collection().to_owned())
                            }
                            FieldSchema::Relation(r) => {
                                FieldView::ToMany(r.foreign_collection().to_owned())
                            }
                        };
                        (field.clone(), view)
                    })
                    .collect();
                let actions = collection.actions.keys().cloned().collect();
                (name.clone(), CollectionView { fields, actions })
            })
            .collect();
        Self {
            collections,
            served: Some(schema.clone()),
            source: "the served schema".to_owned(),
        }
    }

    /// The schema file the agent writes (`canopy schema`, or any start outside production);
    /// `Ok(None)` when there is no file at `path`.
    pub fn from_schema_file(path: &Path) -> Result<Option<Self>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let doc: Json = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a schema file: {e}", path.display()))?;
        let list = doc
            .get("collections")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("{} has no `collections` array", path.display()))?;
        Ok(Some(Self {
            collections: collection_views(list),
            served: None,
            source: path.display().to_string(),
        }))
    }

    /// Adds the collections, fields and actions of the schema the environment's other agents
    /// uploaded (`POST /forest/apimaps`, a JSON:API document), so that rules may name them: a
    /// Node agent whose permission server is this Canopy has actions of its own. What this view
    /// already has keeps its description.
    pub fn with_agents(mut self, apimap: Option<&Json>) -> Self {
        let list = apimap.map(crate::platform::server::apimap_collections);
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            return self;
        };
        for (name, view) in collection_views(&list) {
            let mine = self.collections.entry(name).or_default();
            mine.actions.extend(view.actions);
            for (field, kind) in view.fields {
                mine.fields.entry(field).or_insert(kind);
            }
        }
        self.source = format!("{} or the schema uploaded by the agents", self.source);
        self
    }

    pub fn collection_names(&self) -> impl Iterator<Item = &str> {
        self.collections.keys().map(String::as_str)
    }

    pub fn has_collection(&self, name: &str) -> bool {
        self.collections.contains_key(name)
    }

    /// The actions of a collection, `None` for an unknown collection.
    pub fn actions(&self, collection: &str) -> Option<impl Iterator<Item = &str>> {
        self.collections
            .get(collection)
            .map(|c| c.actions.iter().map(String::as_str))
    }

    pub fn has_action(&self, collection: &str, action: &str) -> bool {
        self.collections
            .get(collection)
            .is_some_and(|c| c.actions.contains(action))
    }

    /// What `field` of `collection` is, when both exist.
    pub fn field(&self, collection: &str, field: &str) -> Option<&FieldView> {
        self.collections.get(collection)?.fields.get(field)
    }

    /// The served schema, when the names come from it (not from the schema file).
    pub fn served_schema(&self) -> Option<&DataSourceSchema> {
        self.served.as_ref()
    }

    /// Checks that `path` (`a:b:c`) leads from `collection` through to-one relations to a column.
    pub fn check_path(&self, collection: &str, path: &str) -> Result<(), String> {
        let mut current = collection;
        let mut segments = path.split(':').peekable();
        while let Some(segment) = segments.next() {
            let view = self
                .collections
                .get(current)
                .ok_or_else(|| format!("unknown collection {current:?}"))?;
            let last = segments.peek().is_none();
            match (view.fields.get(segment), last) {
                (None, _) => {
                    return Err(format!("{current:?} has no field {segment:?}"));
                }
                (Some(FieldView::Column { .. }), true) => return Ok(()),
                (Some(FieldView::Column { .. }), false) => {
                    return Err(format!(
                        "{current}.{segment} is a column: it has no fields to go on to"
                    ));
                }
                (Some(FieldView::ToOne(_) | FieldView::ToMany(_)), true) => {
                    return Err(format!(
                        "{current}.{segment} is a relation: name one of its fields (`{segment}:field`)"
                    ));
                }
                (Some(FieldView::ToMany(_)), false) => {
                    return Err(format!(
                        "{current}.{segment} is a to-many relation: a condition can only go \
                         through to-one relations"
                    ));
                }
                (Some(FieldView::ToOne(target)), false) => current = target,
            }
        }
        Ok(())
    }
}

/// Checks a condition tree in the agent's plain JSON form (`{field, operator, value}` leaves,
/// `{aggregator, conditions}` branches) on `collection`: every field path exists, every operator
/// exists and, against the served schema, is supported by its column with a value of the right
/// type. Values holding `{{…}}` context variables are only known per request, and leaves with
/// `source: "input"` name action form fields: both are checked for shape only.
pub fn check_tree(tree: &Json, collection: &str, schema: &SchemaView) -> Result<(), String> {
    if !schema.has_collection(collection) {
        return Err(format!(
            "unknown collection {collection:?} (not in {})",
            schema.source
        ));
    }
    check_node(tree, collection, schema)
}

fn check_node(node: &Json, collection: &str, schema: &SchemaView) -> Result<(), String> {
    let object = node
        .as_object()
        .ok_or_else(|| "a condition must be a table (an object)".to_owned())?;
    if let Some(aggregator) = object.get("aggregator") {
        let known = aggregator
            .as_str()
            .is_some_and(|a| a.eq_ignore_ascii_case("and") || a.eq_ignore_ascii_case("or"));
        if !known {
            return Err(format!(
                "unknown aggregator {aggregator}: expected \"And\" or \"Or\""
            ));
        }
        let conditions = object
            .get("conditions")
            .and_then(Json::as_array)
            .ok_or_else(|| "a branch needs a `conditions` array".to_owned())?;
        if conditions.is_empty() {
            return Err("a branch needs at least one condition".to_owned());
        }
        for condition in conditions {
            check_node(condition, collection, schema)?;
        }
        return Ok(());
    }
    let field = object
        .get("field")
        .and_then(Json::as_str)
        .ok_or_else(|| "a condition needs a `field` (or an `aggregator`)".to_owned())?;
    let operator = object
        .get("operator")
        .and_then(Json::as_str)
        .ok_or_else(|| format!("the condition on {field:?} needs an `operator`"))?;
    let parsed: Operator = operator
        .parse()
        .map_err(|_| format!("unknown operator {operator:?} on {field:?}"))?;
    match object.get("source").and_then(Json::as_str) {
        // An action form's field: only known when the form is filled.
        Some("input") => return Ok(()),
        None | Some("data") => {}
        Some(other) => {
            return Err(format!(
                "unknown source {other:?} on {field:?}: expected \"data\" or \"input\""
            ));
        }
    }
    schema.check_path(collection, field)?;
    let Some(served) = &schema.served else {
        return Ok(());
    };
    let Ok(collection_schema) = served.collection(collection) else {
        return Ok(());
    };
    let value = object.get("value").unwrap_or(&Json::Null);
    if value.to_string().contains("{{") {
        // The value is a context variable: the column and operator can still be checked.
        let (_, column) = served
            .resolve_column(collection_schema, field)
            .map_err(|e| e.to_string())?;
        if !column.filter_operators.contains(&parsed) {
            return Err(format!(
                "{collection}.{field} does not support the operator {operator:?}"
            ));
        }
        return Ok(());
    }
    let mut leaf = serde_json::Map::new();
    leaf.insert("field".into(), field.into());
    leaf.insert("operator".into(), operator.into());
    leaf.insert("value".into(), value.clone());
    ConditionTree::parse(&Json::Object(leaf), collection_schema, served)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The views of a schema file's `collections` list (the agent's own keys: `name`, `fields` with
/// `field`/`relationship`/`reference`/`isReadOnly`, `actions` with `name`).
fn collection_views(list: &[Json]) -> BTreeMap<String, CollectionView> {
    let mut collections = BTreeMap::new();
    for collection in list {
        let Some(name) = collection.get("name").and_then(Json::as_str) else {
            continue;
        };
        let mut view = CollectionView::default();
        for field in collection
            .get("fields")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let Some(field_name) = field.get("field").and_then(Json::as_str) else {
                continue;
            };
            let relationship = field.get("relationship").and_then(Json::as_str);
            let reference = field
                .get("reference")
                .and_then(Json::as_str)
                .and_then(|r| r.split('.').next())
                .map(str::to_owned);
            let kind = match (relationship, reference) {
                (Some("BelongsTo" | "HasOne"), Some(target)) => FieldView::ToOne(target),
                (Some(_), target) => FieldView::ToMany(target.unwrap_or_default()),
                _ => FieldView::Column {
                    read_only: field
                        .get("isReadOnly")
                        .and_then(Json::as_bool)
                        .unwrap_or(false),
                },
            };
            view.fields.insert(field_name.to_owned(), kind);
        }
        for action in collection
            .get("actions")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(action) = action.get("name").and_then(Json::as_str) {
                view.actions.insert(action.to_owned());
            }
        }
        collections.insert(name.to_owned(), view);
    }
    collections
}
