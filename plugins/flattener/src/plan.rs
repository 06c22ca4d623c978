//! From the options file and the datasource schema to a list of [`Step`]s: which fields to add,
//! which hooks, which fields to mark writable, import or remove. Every check of the Node plugin
//! happens here, so that a bad option refuses the load with a message naming the collection, the
//! function and the option. Pure, tested on the host target.
//!
//! Options shape (`[options]` of `flattener.toml`), keyed by collection then function, each
//! function a list of option tables (or one table):
//!
//! ```toml
//! [[options.customers.flattenJsonColumn]]
//! columnName = "address"
//! columnType = { street = "String", city = "String", zip = "String" }
//!
//! [[options.orders.flattenRelation]]
//! relationName = "customer"
//! include = ["email"]
//! ```

use canopy_sdk::{Value, json};
use serde_json::Map;

use crate::nested::{SEP, include_to_path};

/// The type of a generated field.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    /// A primitive (`String`, `Number`, …).
    Primitive(&'static str),
    /// `Enum` with its values (a `{"type": "Enum", "enumValues": [..]}` leaf).
    Enum(Vec<String>),
    /// A composite or array type (a sub-object below the flattening level), in the agent's JSON.
    Composite(Value),
}

/// One thing the plugin declares.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A computed field `name` reading the leaf `parts` of `column`.
    Field {
        /// The collection.
        collection: String,
        /// The generated name (`column@@@a@@@b`).
        name: String,
        /// The flattened column (the field's one dependency).
        column: String,
        /// The keys below the column.
        parts: Vec<String>,
        /// The field's type.
        field_type: FieldType,
    },
    /// Before Create: rebuild `column` from the flattened keys of `paths` in each record.
    CreateHook {
        /// The collection.
        collection: String,
        /// The generated names.
        paths: Vec<String>,
    },
    /// Before Update: rebuild, then merge into each matched record's current value.
    UpdateHook {
        /// The collection.
        collection: String,
        /// The flattened column.
        column: String,
        /// The generated names.
        paths: Vec<String>,
        /// The collection's primary keys (to re-read and to address groups of records).
        primary_keys: Vec<String>,
    },
    /// A write handler that is never called (the hooks consume the keys): marks `name` writable.
    Writable {
        /// The collection.
        collection: String,
        /// The generated name.
        name: String,
    },
    /// `importField(name, {path, readonly})`.
    Import {
        /// The collection.
        collection: String,
        /// The generated name (`relation@@@column`).
        name: String,
        /// The relation path (`relation:column`).
        path: String,
        /// `readonly` as given (`None`: writable unless the source is read-only).
        readonly: Option<bool>,
    },
    /// `removeField(name)`.
    Remove {
        /// The collection.
        collection: String,
        /// The removed field.
        name: String,
    },
}

/// The primitive type names of the agent, as `'static` names for the SDK.
const PRIMITIVES: [&str; 12] = [
    "String", "Number", "Boolean", "Date", "Dateonly", "Time", "Timeonly", "Enum", "Json", "Uuid",
    "Point", "File",
];

fn primitive(name: &str) -> Option<&'static str> {
    PRIMITIVES
        .iter()
        .find(|p| **p == name)
        .copied()
        .or_else(|| (name == "Binary").then_some("Binary"))
}

/// The datasource schema as the SDK gives it.
struct Schema<'a>(&'a Value);

impl<'a> Schema<'a> {
    fn collection(&self, name: &str) -> Option<&'a Value> {
        self.0
            .get("collections")?
            .as_array()?
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
    }

    fn fields(&self, collection: &str) -> impl Iterator<Item = &'a Value> {
        self.collection(collection)
            .and_then(|c| c.get("fields"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }

    fn field(&self, collection: &str, name: &str) -> Option<&'a Value> {
        self.fields(collection)
            .find(|f| f.get("name").and_then(Value::as_str) == Some(name))
    }

    fn primary_keys(&self, collection: &str) -> Vec<String> {
        self.fields(collection)
            .filter(|f| f.get("isPrimaryKey").and_then(Value::as_bool) == Some(true))
            .filter_map(|f| f.get("name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    fn column_names(&self, collection: &str) -> Vec<String> {
        self.fields(collection)
            .filter(|f| f.get("relation").is_none())
            .filter_map(|f| f.get("name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }
}

fn is_read_only(field: &Value) -> bool {
    field.get("isReadOnly").and_then(Value::as_bool) == Some(true)
}

/// Whether a type is an enum leaf (`{"type": "Enum", "enumValues": [..]}`).
fn enum_values(ty: &Value) -> Option<Vec<String>> {
    if ty.get("type").and_then(Value::as_str) != Some("Enum") {
        return None;
    }
    let values = ty.get("enumValues")?.as_array()?;
    Some(
        values
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
    )
}

/// Checks a declared type: objects of types, arrays of one type, enum leaves, primitive names.
fn check_type(ty: &Value, at: &str) -> Result<(), String> {
    match ty {
        Value::String(name) if primitive(name).is_some() => Ok(()),
        Value::String(name) => Err(format!("unknown column type '{name}' at '{at}'")),
        _ if enum_values(ty).is_some() => Ok(()),
        Value::Array(items) if items.len() == 1 => check_type(&items[0], at),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| check_type(v, &format!("{at}{SEP}{k}"))),
        other => Err(format!("invalid column type {other} at '{at}'")),
    }
}

/// The agent's JSON type of a composite leaf, with enum leaves as plain `Enum` (a composite type
/// has no place for enum values).
fn composite_json(ty: &Value) -> Value {
    if enum_values(ty).is_some() {
        return json!("Enum");
    }
    match ty {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), composite_json(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(composite_json).collect()),
        other => other.clone(),
    }
}

/// Every leaf name under `ty` down to `level` (the Node plugin's `listPaths`): an enum leaf, an
/// array or a primitive stops the recursion.
pub fn list_paths(name: &str, ty: &Value, level: i64) -> Vec<String> {
    match ty {
        Value::Object(map) if level > 0 && enum_values(ty).is_none() => map
            .iter()
            .flat_map(|(key, sub)| list_paths(&format!("{name}{SEP}{key}"), sub, level - 1))
            .collect(),
        _ => vec![name.to_owned()],
    }
}

/// The depth of a declared type (`{a: String}` is 1, `{a: {b: String}}` is 2): the default level
/// of `flattenJsonColumn`.
pub fn depth(ty: &Value) -> i64 {
    match ty {
        Value::Object(map) if enum_values(ty).is_none() => {
            1 + map.values().map(depth).max().unwrap_or(-1)
        }
        _ => 0,
    }
}

/// The type of the leaf named `path` (`column@@@a@@@b`) in the column's type.
fn field_type(column_type: &Value, parts: &[String]) -> Option<FieldType> {
    let mut ty = column_type;
    for part in parts {
        ty = ty.as_object()?.get(part)?;
    }
    if let Some(values) = enum_values(ty) {
        return Some(FieldType::Enum(values));
    }
    match ty {
        Value::String(name) => primitive(name).map(FieldType::Primitive),
        Value::Object(_) | Value::Array(_) => Some(FieldType::Composite(composite_json(ty))),
        _ => None,
    }
}

/// The options of one call, with the keys the function accepts; unknown keys are refused (a typo
/// such as `columname` would otherwise flatten nothing the user expects).
struct Options<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Options<'a> {
    fn new(value: &'a Value, allowed: &[&str]) -> Result<Self, String> {
        let map = value
            .as_object()
            .ok_or_else(|| format!("options must be a table, not {value}"))?;
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!(
                "unknown option '{unknown}' (expected one of: {})",
                allowed.join(", ")
            ));
        }
        Ok(Self { map })
    }

    fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("options.{key} must be a string, not {other}")),
        }
    }

    fn strings(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| format!("options.{key} must hold strings, not {i}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(format!(
                "options.{key} must be a list of strings, not {other}"
            )),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!("options.{key} must be a boolean, not {other}")),
        }
    }

    fn integer(&self, key: &str) -> Result<Option<i64>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_f64() {
                Some(f) if f.fract() == 0.0 => Ok(Some(f as i64)),
                _ => Err(format!("options.{key} must be an integer, not {v}")),
            },
        }
    }

    fn column_type(&self) -> Result<Option<Value>, String> {
        match self.map.get("columnType") {
            None | Some(Value::Null) => Ok(None),
            Some(ty @ Value::Object(_)) => {
                check_type(ty, "columnType")?;
                Ok(Some(ty.clone()))
            }
            Some(other) => Err(format!(
                "options.columnType must be a table of types (`{{ city = \"String\" }}`), not {other}"
            )),
        }
    }
}

/// Every step the options ask for, in the order of the options (collections, then functions, then
/// entries). `Err` names the collection, the function and the entry.
pub fn plan(schema: &Value, options: &Value) -> Result<Vec<Step>, String> {
    let schema = Schema(schema);
    let collections = match options {
        Value::Null => return Ok(Vec::new()),
        Value::Object(map) => map,
        other => return Err(format!("[options] must be a table, not {other}")),
    };
    let mut steps = Vec::new();
    for (collection, functions) in collections {
        if schema.collection(collection).is_none() {
            return Err(format!(
                "[options.{collection}]: collection '{collection}' not found"
            ));
        }
        let functions = functions.as_object().ok_or_else(|| {
            format!("[options.{collection}] must be a table of functions, not {functions}")
        })?;
        for (function, entries) in functions {
            let entries: Vec<&Value> = match entries {
                Value::Array(items) => items.iter().collect(),
                one => vec![one],
            };
            for (i, entry) in entries.into_iter().enumerate() {
                let at = format!("{collection}.{function}[{i}]");
                let result = match function.as_str() {
                    "flattenColumn" => flatten_column(&schema, collection, entry),
                    "flattenJsonColumn" => flatten_json_column(&schema, collection, entry),
                    "flattenRelation" => flatten_relation(&schema, collection, entry),
                    other => Err(format!(
                        "unknown function '{other}' (flattenColumn, flattenJsonColumn or \
                         flattenRelation)"
                    )),
                };
                steps.extend(result.map_err(|e| format!("{at}: {e}"))?);
            }
        }
    }
    Ok(steps)
}

/// `flattenColumn` as given in the options file.
fn flatten_column(
    schema: &Schema<'_>,
    collection: &str,
    entry: &Value,
) -> Result<Vec<Step>, String> {
    let o = Options::new(
        entry,
        &[
            "columnName",
            "include",
            "exclude",
            "level",
            "readonly",
            "columnType",
        ],
    )?;
    let column = o
        .string("columnName")?
        .ok_or("options.columnName is required.")?;
    let spec = ColumnSpec {
        column,
        include: o.strings("include")?.unwrap_or_default(),
        exclude: o.strings("exclude")?.unwrap_or_default(),
        level: o.integer("level")?,
        readonly: o.boolean("readonly")?.unwrap_or(false),
        column_type: o.column_type()?,
    };
    column_steps(schema, collection, &spec)
}

/// `flattenJsonColumn`: a Json column with a declared shape, flattened down to the shape's depth
/// by default; the original column is removed unless `keepOriginalColumn`.
fn flatten_json_column(
    schema: &Schema<'_>,
    collection: &str,
    entry: &Value,
) -> Result<Vec<Step>, String> {
    let o = Options::new(
        entry,
        &[
            "columnName",
            "columnType",
            "level",
            "readonly",
            "keepOriginalColumn",
        ],
    )?;
    let (Some(column), Some(column_type)) = (o.string("columnName")?, o.column_type()?) else {
        return Err("options.columnName and options.columnType are required.".to_owned());
    };
    let field = schema.field(collection, &column);
    if field.and_then(|f| f.get("type")) != Some(&json!("Json")) {
        return Err(format!(
            "'{collection}.{column}' cannot be flattened (only available on primitive JSON \
             columns, prefer flattenColumn otherwise)."
        ));
    }
    if column_type.as_object().is_none_or(Map::is_empty) {
        return Err(
            "options.columnType must be defined as a table representing a subset of the \
                    shape of the data in the json column."
                .to_owned(),
        );
    }
    let level = Some(o.integer("level")?.unwrap_or_else(|| depth(&column_type)));
    let spec = ColumnSpec {
        column: column.clone(),
        include: Vec::new(),
        exclude: Vec::new(),
        level,
        readonly: o.boolean("readonly")?.unwrap_or(false),
        column_type: Some(column_type),
    };
    let mut steps = column_steps(schema, collection, &spec)?;
    if !o.boolean("keepOriginalColumn")?.unwrap_or(false) {
        steps.push(Step::Remove {
            collection: collection.to_owned(),
            name: column,
        });
    }
    Ok(steps)
}

struct ColumnSpec {
    column: String,
    include: Vec<String>,
    exclude: Vec<String>,
    level: Option<i64>,
    readonly: bool,
    column_type: Option<Value>,
}

/// The generated names of a column flattening (the Node plugin's `optionsToPaths`).
fn column_paths(
    schema: &Schema<'_>,
    collection: &str,
    spec: &ColumnSpec,
) -> Result<(Vec<String>, Value, bool), String> {
    let column = &spec.column;
    let cannot = format!("'{collection}.{column}' cannot be flattened");
    let field = schema
        .field(collection, column)
        .ok_or_else(|| format!("{cannot} (not found)."))?;
    if field.get("relation").is_some() {
        return Err(format!("{cannot} (not a column)."));
    }
    let schema_type = field.get("type").cloned().unwrap_or(Value::Null);
    if schema_type.is_array() {
        return Err(format!("{cannot} (array not supported)."));
    }
    let column_type = match (&spec.column_type, &schema_type) {
        (Some(declared), _) => declared.clone(),
        (None, Value::String(p)) if p == "Json" => {
            return Err(format!(
                "{cannot} using flattenColumn without columnType: declare its shape with \
                 columnType, or use flattenJsonColumn."
            ));
        }
        (None, Value::String(p)) => {
            return Err(format!("{cannot} (primitive type '{p}' not supported)."));
        }
        (None, ty @ Value::Object(_)) => ty.clone(),
        (None, other) => return Err(format!("{cannot} (unknown type {other}).")),
    };
    let mut paths: Vec<String> = spec
        .include
        .iter()
        .map(|p| include_to_path(column, p))
        .collect();
    if paths.is_empty() {
        let level = spec.level.unwrap_or(1);
        if level < 1 {
            return Err("options.level must be greater than 0.".to_owned());
        }
        paths = list_paths(column, &column_type, level);
    }
    let excluded: Vec<String> = spec
        .exclude
        .iter()
        .map(|p| include_to_path(column, p))
        .collect();
    paths.retain(|p| !excluded.contains(p));
    // A column without sub-fields lists as itself: nothing to flatten.
    paths.retain(|p| p != column);
    if paths.is_empty() {
        return Err(format!("{cannot} (no fields match level/include/exclude)."));
    }
    Ok((paths, column_type, is_read_only(field)))
}

fn column_steps(
    schema: &Schema<'_>,
    collection: &str,
    spec: &ColumnSpec,
) -> Result<Vec<Step>, String> {
    let (paths, column_type, source_read_only) = column_paths(schema, collection, spec)?;
    let column = &spec.column;
    let mut steps = Vec::new();
    for path in &paths {
        let parts: Vec<String> = path.split(SEP).skip(1).map(str::to_owned).collect();
        let field_type = field_type(&column_type, &parts).ok_or_else(|| {
            format!("Cannot add field '{path}' (dependency not found in the column's type).")
        })?;
        steps.push(Step::Field {
            collection: collection.to_owned(),
            name: path.clone(),
            column: column.clone(),
            parts,
            field_type,
        });
    }
    if !source_read_only && !spec.readonly {
        steps.push(Step::CreateHook {
            collection: collection.to_owned(),
            paths: paths.clone(),
        });
        steps.push(Step::UpdateHook {
            collection: collection.to_owned(),
            column: column.clone(),
            paths: paths.clone(),
            primary_keys: schema.primary_keys(collection),
        });
        steps.extend(paths.into_iter().map(|name| Step::Writable {
            collection: collection.to_owned(),
            name,
        }));
    }
    Ok(steps)
}

/// `flattenRelation`: every column of the final collection of a chain of to-one relations
/// imported as `relation@@@column`.
fn flatten_relation(
    schema: &Schema<'_>,
    collection: &str,
    entry: &Value,
) -> Result<Vec<Step>, String> {
    let o = Options::new(entry, &["relationName", "include", "exclude", "readonly"])?;
    let relation_name = o
        .string("relationName")?
        .ok_or("options.relationName is required.")?;
    let mut current = collection.to_owned();
    for part in relation_name.split(':') {
        let name = format!("'{current}.{part}'");
        let field = schema
            .field(&current, part)
            .ok_or_else(|| format!("Relation {name} not found"))?;
        let kind = match field.get("relation").and_then(Value::as_str) {
            None => return Err(format!("{name} is a column, not a relation")),
            Some(kind @ ("ManyToOne" | "OneToOne")) => kind,
            Some(_) => return Err(format!("{name} is not a ManyToOne or OneToOne relation")),
        };
        current = field
            .get("foreignCollection")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{name} ({kind}) has no foreign collection"))?
            .to_owned();
    }
    let mut columns = match o.strings("include")? {
        Some(include) if !include.is_empty() => include,
        _ => schema.column_names(&current),
    };
    let exclude = o.strings("exclude")?.unwrap_or_default();
    columns.retain(|c| !exclude.contains(c));
    columns.dedup();
    let readonly = o.boolean("readonly")?;
    Ok(columns
        .into_iter()
        .map(|column| {
            let path = format!("{relation_name}:{column}");
            Step::Import {
                collection: collection.to_owned(),
                name: path.replace(':', SEP),
                path,
                readonly,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shop's schema as the host hands it to plugins (a few fields), plus a composite column.
    fn schema() -> Value {
        json!({"collections": [
            {"name": "customers", "fields": [
                {"name": "id", "type": "Number", "isPrimaryKey": true},
                {"name": "email", "type": "String", "isPrimaryKey": false},
                {"name": "address", "type": "Json", "isPrimaryKey": false},
                {"name": "tags", "type": ["String"], "isPrimaryKey": false},
                {"name": "geo", "type": {"lat": "Number", "lng": "Number",
                    "place": {"name": "String", "kind": {"type": "Enum", "enumValues": ["a", "b"]}}},
                    "isPrimaryKey": false},
                {"name": "locked", "type": {"a": "String"}, "isPrimaryKey": false, "isReadOnly": true},
                {"name": "orders", "relation": "OneToMany", "foreignCollection": "orders"},
            ]},
            {"name": "orders", "fields": [
                {"name": "id", "type": "Number", "isPrimaryKey": true},
                {"name": "customer_id", "type": "Number", "isPrimaryKey": false},
                {"name": "customer", "relation": "ManyToOne", "foreignCollection": "customers"},
            ]},
            {"name": "order_items", "fields": [
                {"name": "order_id", "type": "Number", "isPrimaryKey": true},
                {"name": "product_id", "type": "Number", "isPrimaryKey": true},
                {"name": "order", "relation": "ManyToOne", "foreignCollection": "orders"},
            ]},
        ]})
    }

    fn names(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Field { name, .. } | Step::Import { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    #[allow(clippy::needless_pass_by_value, reason = "called with json! literals")]
    fn err(options: Value) -> String {
        plan(&schema(), &options).unwrap_err()
    }

    const ADDRESS: &str = r#"{"street": "String", "city": "String", "zip": "String"}"#;

    fn address_type() -> Value {
        serde_json::from_str(ADDRESS).unwrap()
    }

    #[test]
    fn paths_stop_at_the_level_at_enums_and_at_primitives() {
        let ty = json!({"a": "String", "b": {"c": "Number", "d": {"e": "String"}},
            "k": {"type": "Enum", "enumValues": ["x"]}});
        assert_eq!(list_paths("col", &ty, 1), ["col@@@a", "col@@@b", "col@@@k"]);
        assert_eq!(
            list_paths("col", &ty, 2),
            ["col@@@a", "col@@@b@@@c", "col@@@b@@@d", "col@@@k"]
        );
        assert_eq!(
            list_paths("col", &ty, 9),
            ["col@@@a", "col@@@b@@@c", "col@@@b@@@d@@@e", "col@@@k"]
        );
        assert_eq!(depth(&ty), 3);
        assert_eq!(depth(&json!({"a": "String"})), 1);
        assert_eq!(depth(&json!("String")), 0);
    }

    #[test]
    fn flatten_json_column_adds_one_field_per_leaf_hooks_writers_and_removes_the_column() {
        let steps = plan(
            &schema(),
            &json!({"customers": {"flattenJsonColumn": [{"columnName": "address",
                "columnType": address_type()}]}}),
        )
        .unwrap();
        assert_eq!(
            names(&steps),
            ["address@@@street", "address@@@city", "address@@@zip"]
        );
        assert!(steps.contains(&Step::Field {
            collection: "customers".into(),
            name: "address@@@city".into(),
            column: "address".into(),
            parts: vec!["city".into()],
            field_type: FieldType::Primitive("String"),
        }));
        assert!(steps.contains(&Step::UpdateHook {
            collection: "customers".into(),
            column: "address".into(),
            paths: vec![
                "address@@@street".into(),
                "address@@@city".into(),
                "address@@@zip".into()
            ],
            primary_keys: vec!["id".into()],
        }));
        assert!(
            matches!(steps.iter().find(|s| matches!(s, Step::CreateHook { .. })),
            Some(Step::CreateHook { paths, .. }) if paths.len() == 3)
        );
        let writable = steps
            .iter()
            .filter(|s| matches!(s, Step::Writable { .. }))
            .count();
        assert_eq!(writable, 3);
        assert_eq!(
            steps.last(),
            Some(&Step::Remove {
                collection: "customers".into(),
                name: "address".into()
            })
        );
    }

    #[test]
    fn readonly_and_keep_original_column_leave_out_hooks_writers_and_removal() {
        let steps = plan(
            &schema(),
            &json!({"customers": {"flattenJsonColumn": {"columnName": "address",
                "columnType": address_type(), "readonly": true, "keepOriginalColumn": true}}}),
        )
        .unwrap();
        assert_eq!(steps.len(), 3);
        assert!(steps.iter().all(|s| matches!(s, Step::Field { .. })));
        // A read-only source column is flattened read-only.
        let steps = plan(
            &schema(),
            &json!({"customers": {"flattenColumn": {"columnName": "locked"}}}),
        )
        .unwrap();
        assert_eq!(names(&steps), ["locked@@@a"]);
        assert_eq!(steps.len(), 1);
    }

    #[test]
    fn flatten_column_on_a_composite_column_follows_level_include_and_exclude() {
        let at = |o: Value| {
            names(&plan(&schema(), &json!({"customers": {"flattenColumn": o}})).unwrap())
        };
        assert_eq!(
            at(json!({"columnName": "geo"})),
            ["geo@@@lat", "geo@@@lng", "geo@@@place"]
        );
        assert_eq!(
            at(json!({"columnName": "geo", "level": 2})),
            [
                "geo@@@lat",
                "geo@@@lng",
                "geo@@@place@@@name",
                "geo@@@place@@@kind"
            ]
        );
        assert_eq!(
            at(json!({"columnName": "geo", "include": ["place:name", "place.kind"]})),
            ["geo@@@place@@@name", "geo@@@place@@@kind"]
        );
        assert_eq!(
            at(json!({"columnName": "geo", "exclude": ["lng", "place"]})),
            ["geo@@@lat"]
        );
        let steps = plan(
            &schema(),
            &json!({"customers": {"flattenColumn": {"columnName": "geo", "level": 2}}}),
        )
        .unwrap();
        assert!(steps.iter().any(|s| matches!(s, Step::Field { name, field_type, .. }
            if name == "geo@@@place@@@kind" && *field_type == FieldType::Enum(vec!["a".into(), "b".into()]))));
        // Below the level, a sub-object is one composite field (enum leaves as plain Enum).
        let steps = plan(
            &schema(),
            &json!({"customers": {"flattenColumn": {"columnName": "geo"}}}),
        )
        .unwrap();
        assert!(steps.iter().any(|s| matches!(s, Step::Field { name, field_type, .. }
            if name == "geo@@@place" && *field_type == FieldType::Composite(json!({"name": "String", "kind": "Enum"})))));
        // No removal: flattenColumn keeps the column.
        assert!(!steps.iter().any(|s| matches!(s, Step::Remove { .. })));
    }

    #[test]
    fn flatten_column_on_a_json_column_needs_a_column_type() {
        assert!(
            err(json!({"customers": {"flattenColumn": {"columnName": "address"}}}))
                .contains("without columnType")
        );
        let steps = plan(
            &schema(),
            &json!({"customers": {"flattenColumn": {"columnName": "address",
                "columnType": address_type(), "include": ["city"]}}}),
        )
        .unwrap();
        assert_eq!(names(&steps), ["address@@@city"]);
    }

    #[test]
    fn bad_column_options_are_refused_with_the_entry_and_the_reason() {
        let e = err(json!({"customers": {"flattenColumn": [{}]}}));
        assert_eq!(
            e,
            "customers.flattenColumn[0]: options.columnName is required."
        );
        let e = err(json!({"customers": {"flattenColumn": {"columnName": "nope"}}}));
        assert!(
            e.contains("'customers.nope' cannot be flattened (not found)"),
            "{e}"
        );
        let e = err(json!({"customers": {"flattenColumn": {"columnName": "orders"}}}));
        assert!(e.contains("(not a column)"), "{e}");
        let e = err(json!({"customers": {"flattenColumn": {"columnName": "tags"}}}));
        assert!(e.contains("(array not supported)"), "{e}");
        let e = err(json!({"customers": {"flattenColumn": {"columnName": "email"}}}));
        assert!(e.contains("(primitive type 'String' not supported)"), "{e}");
        let e = err(json!({"customers": {"flattenColumn": {"columnName": "geo", "level": 0}}}));
        assert!(e.contains("options.level must be greater than 0."), "{e}");
        let e = err(json!({"customers": {"flattenColumn": {"columnName": "geo",
            "exclude": ["lat", "lng", "place"]}}}));
        assert!(e.contains("(no fields match level/include/exclude)"), "{e}");
        let e = err(
            json!({"customers": {"flattenColumn": {"columnName": "geo", "include": ["nope"]}}}),
        );
        assert!(e.contains("Cannot add field 'geo@@@nope'"), "{e}");
        let e = err(json!({"customers": {"flattenColumn": {"columName": "geo"}}}));
        assert!(e.contains("unknown option 'columName'"), "{e}");
        let e = err(json!({"customers": {"flattenColumn": {"columnName": 3}}}));
        assert!(e.contains("options.columnName must be a string"), "{e}");
    }

    #[test]
    fn bad_json_column_options_are_refused() {
        let e = err(json!({"customers": {"flattenJsonColumn": {"columnName": "address"}}}));
        assert!(
            e.contains("options.columnName and options.columnType are required."),
            "{e}"
        );
        let e = err(
            json!({"customers": {"flattenJsonColumn": {"columnName": "geo",
            "columnType": {"lat": "Number"}}}}),
        );
        assert!(
            e.contains("only available on primitive JSON columns"),
            "{e}"
        );
        let e = err(
            json!({"customers": {"flattenJsonColumn": {"columnName": "address",
            "columnType": {}}}}),
        );
        assert!(e.contains("options.columnType must be defined"), "{e}");
        let e = err(
            json!({"customers": {"flattenJsonColumn": {"columnName": "address",
            "columnType": {"city": "Text"}}}}),
        );
        assert!(
            e.contains("unknown column type 'Text' at 'columnType@@@city'"),
            "{e}"
        );
    }

    #[test]
    fn flatten_relation_imports_every_column_through_to_one_chains() {
        let steps = plan(
            &schema(),
            &json!({"order_items": {"flattenRelation": {"relationName": "order:customer",
                "include": ["email", "id"], "readonly": true}}}),
        )
        .unwrap();
        assert_eq!(
            steps,
            [
                Step::Import {
                    collection: "order_items".into(),
                    name: "order@@@customer@@@email".into(),
                    path: "order:customer:email".into(),
                    readonly: Some(true),
                },
                Step::Import {
                    collection: "order_items".into(),
                    name: "order@@@customer@@@id".into(),
                    path: "order:customer:id".into(),
                    readonly: Some(true),
                },
            ]
        );
        let steps = plan(
            &schema(),
            &json!({"orders": {"flattenRelation": {"relationName": "customer",
                "exclude": ["geo", "locked", "tags"]}}}),
        )
        .unwrap();
        assert_eq!(
            names(&steps),
            ["customer@@@id", "customer@@@email", "customer@@@address"]
        );
        assert!(matches!(&steps[0], Step::Import { readonly: None, .. }));
    }

    #[test]
    fn bad_relation_options_are_refused() {
        let e = err(json!({"orders": {"flattenRelation": {}}}));
        assert!(e.contains("options.relationName is required."), "{e}");
        let e = err(json!({"orders": {"flattenRelation": {"relationName": "nope"}}}));
        assert!(e.contains("Relation 'orders.nope' not found"), "{e}");
        let e = err(json!({"orders": {"flattenRelation": {"relationName": "customer_id"}}}));
        assert!(
            e.contains("'orders.customer_id' is a column, not a relation"),
            "{e}"
        );
        let e = err(json!({"orders": {"flattenRelation": {"relationName": "customer:orders"}}}));
        assert!(
            e.contains("'customers.orders' is not a ManyToOne or OneToOne relation"),
            "{e}"
        );
    }

    #[test]
    fn unknown_collections_and_functions_are_refused() {
        let e = err(json!({"nope": {"flattenColumn": {"columnName": "a"}}}));
        assert!(e.contains("collection 'nope' not found"), "{e}");
        let e = err(json!({"customers": {"flatten": {"columnName": "a"}}}));
        assert!(e.contains("unknown function 'flatten'"), "{e}");
        assert_eq!(plan(&schema(), &json!({})).unwrap(), []);
        assert_eq!(plan(&schema(), &Value::Null).unwrap(), []);
    }
}
