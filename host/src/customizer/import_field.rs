//! importField (protocol §8.2): the column at a to-one `:` path, served as a field of the
//! collection. As the Node agent's import-field plugin, it is not a layer of its own but the
//! customizations it expands into, each served by its layer:
//! - a computed field copying the source column's type, default and enum values (dependency: the
//!   path; value: the dependency's);
//! - unless read-only (the source is, or `readonly` is set), a write handler turning
//!   `{name: v}` into the nested patch `{a: {b: {column: v}}}` that the write layer's nested
//!   to-one writes apply;
//! - for every operator of the source column, a replaced operator: the leaf becomes the same
//!   operator on the path;
//! - a replaced sort on the path when the source is sortable.

use std::sync::Arc;

use async_trait::async_trait;

use super::handlers::{
    Batch, ComputeHandler, Context, OperatorHandler, WriteContext, WriteHandler,
};
use super::stack::StackOptions;
use super::{Customization, FilteringMode, Kind, SortingMode};
use crate::agent::wire;
use crate::datasource::schema::{FieldSchema, Wire};
use crate::datasource::{
    Caller, ColumnSchema, ConditionTree, DataSourceSchema, Error, Operator, Record, Result,
    SortClause, Value,
};

/// What `importField` customizations become, for the layers that serve them.
#[derive(Default)]
pub(super) struct Imported {
    pub computed: Vec<Customization>,
    pub filtering: Vec<Customization>,
    pub sorting: Vec<Customization>,
    pub writing: Vec<Customization>,
}

/// Why a path cannot be imported.
enum Problem {
    /// A collection or field on the way does not exist: `options.missing` decides.
    Missing(String),
    /// The path exists but is not a column behind to-one relations.
    Invalid(String),
}

/// The column at `path` from `collection`, through to-one relations.
fn source<'a>(
    schema: &'a DataSourceSchema,
    collection: &str,
    path: &str,
) -> Result<&'a ColumnSchema, Problem> {
    let mut current = collection;
    let mut segments = path.split(':').peekable();
    while let Some(segment) = segments.next() {
        let holder = schema.collections.get(current).ok_or_else(|| {
            Problem::Missing(format!("the collection '{current}' does not exist"))
        })?;
        let last = segments.peek().is_none();
        match holder.fields.get(segment) {
            None => {
                return Err(Problem::Missing(format!(
                    "the field '{current}.{segment}' does not exist"
                )));
            }
            Some(FieldSchema::Column(column)) if last => return Ok(column),
            Some(FieldSchema::Column(_)) => {
                return Err(Problem::Invalid(format!(
                    "'{current}.{segment}' is a column, not a relation to go through"
                )));
            }
            Some(FieldSchema::Relation(relation)) if !last && relation.is_to_one() => {
                current = relation.foreign_collection();
            }
            Some(FieldSchema::Relation(relation)) => {
                return Err(Problem::Invalid(format!(
                    "'{current}.{segment}' is a {} relation; a path goes through ManyToOne or \
                     OneToOne relations to a column",
                    relation.kind_name()
                )));
            }
        }
    }
    Err(Problem::Invalid("the path is empty".to_owned()))
}

/// Expands the `importField` customizations against `schema`: the schema of the collections
/// with their computed fields and added relations (an import may cross an added relation, or
/// read a computed field). An import may read an earlier import.
pub(super) fn expand(
    schema: &DataSourceSchema,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Imported> {
    let mut out = Imported::default();
    if customizations.is_empty() {
        return Ok(out);
    }
    let mut schema = schema.clone();
    for customization in customizations {
        let Kind::ImportField {
            name,
            path,
            readonly,
        } = customization.kind
        else {
            continue;
        };
        let origin = customization.origin;
        let Some(collection) = customization.collection else {
            return Err(Error::validation(format!(
                "{origin}: importField '{name}' names no collection"
            )));
        };
        let describe = |detail: String| {
            format!("{origin}: importField '{collection}.{name}' from '{path}': {detail}")
        };
        let column = match source(&schema, &collection, &path) {
            Ok(column) => column.clone(),
            Err(Problem::Missing(detail)) => {
                options.missing(describe(detail))?;
                continue;
            }
            Err(Problem::Invalid(detail)) => return Err(Error::validation(describe(detail))),
        };
        if column.is_read_only && readonly == Some(false) {
            return Err(Error::validation(describe(format!(
                "readonly cannot be false because the field '{path}' is not writable"
            ))));
        }
        let writable = !column.is_read_only && readonly != Some(true);
        let on = |kind: Kind| Customization::collection(origin.clone(), collection.clone(), kind);
        out.computed.push(on(Kind::ComputedField {
            name: name.clone(),
            column_type: column.column_type.clone(),
            dependencies: vec![path.clone()],
            default_value: column
                .default_value
                .as_ref()
                .and_then(|v| wire::to_json(v, Wire::NumberString).ok()),
            enum_values: (!column.enum_values.is_empty()).then(|| column.enum_values.clone()),
            handler: Arc::new(CopyValue),
        }));
        if writable {
            out.writing.push(on(Kind::Writing {
                field: name.clone(),
                handler: Arc::new(Nest { path: path.clone() }),
            }));
        }
        for operator in &column.filter_operators {
            out.filtering.push(on(Kind::Filtering {
                field: name.clone(),
                mode: FilteringMode::Replace(
                    *operator,
                    Arc::new(OnPath {
                        path: path.clone(),
                        operator: *operator,
                    }),
                ),
            }));
        }
        if column.is_sortable {
            out.sorting.push(on(Kind::Sorting {
                field: name.clone(),
                mode: SortingMode::Replace(vec![SortClause {
                    field: path.clone(),
                    ascending: true,
                }]),
            }));
        }
        // Later imports may read this one.
        if let Some(target) = schema.collections.get_mut(&collection)
            && !target.fields.contains_key(&name)
        {
            let mut imported = ColumnSchema::new(column.column_type.clone());
            imported.is_read_only = !writable;
            imported.is_sortable = column.is_sortable;
            imported.filter_operators = column.filter_operators.clone();
            imported.enum_values = column.enum_values.clone();
            imported.default_value = column.default_value.clone();
            target.fields.insert(name, FieldSchema::Column(imported));
        }
    }
    Ok(out)
}

/// The imported value: the only dependency's.
struct CopyValue;

#[async_trait]
impl ComputeHandler for CopyValue {
    async fn compute(&self, _: &Caller, _: &Context, batch: &Batch) -> Result<Vec<Value>> {
        Ok(batch
            .columns
            .first()
            .map(|c| c.values.clone())
            .unwrap_or_else(|| vec![Value::Null; batch.len]))
    }
}

/// `{name: v}` written as `{a: {b: {column: v}}}` along the path.
struct Nest {
    path: String,
}

/// The nested patch that writes `value` at `path`.
fn nested_patch(path: &str, value: &Value) -> Record {
    let mut patch = Record::new();
    patch.set_path(path, value.clone());
    patch
}

#[async_trait]
impl WriteHandler for Nest {
    async fn write(&self, _: &Caller, _: &WriteContext, value: &Value) -> Result<Option<Record>> {
        Ok(Some(nested_patch(&self.path, value)))
    }
}

/// A leaf on the imported field: the same operator and value on the path.
struct OnPath {
    path: String,
    operator: Operator,
}

#[async_trait]
impl OperatorHandler for OnPath {
    async fn replace(&self, _: &Caller, _: &Context, value: &Value) -> Result<ConditionTree> {
        Ok(ConditionTree::leaf(
            self.path.as_str(),
            self.operator,
            value.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{CollectionSchema, ColumnType, PrimitiveType, RelationSchema};

    fn schema() -> DataSourceSchema {
        let mut countries = CollectionSchema::new("countries");
        let mut id = ColumnSchema::new(PrimitiveType::Number);
        id.is_primary_key = true;
        id.filter_operators = [Operator::Equal, Operator::In].into_iter().collect();
        countries
            .fields
            .insert("id".into(), FieldSchema::Column(id));
        let mut name = ColumnSchema::new(PrimitiveType::String);
        name.filter_operators = [Operator::Equal, Operator::Contains].into_iter().collect();
        name.default_value = Some(Value::String("?".into()));
        countries
            .fields
            .insert("name".into(), FieldSchema::Column(name));
        let mut code = ColumnSchema::new(PrimitiveType::String);
        code.is_read_only = true;
        code.is_sortable = false;
        countries
            .fields
            .insert("code".into(), FieldSchema::Column(code));
        let mut customers = CollectionSchema::new("customers");
        customers.fields.insert(
            "country_id".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::Number)),
        );
        customers.fields.insert(
            "country".into(),
            FieldSchema::Relation(RelationSchema::ManyToOne {
                foreign_collection: "countries".into(),
                foreign_key: "country_id".into(),
                foreign_key_target: "id".into(),
            }),
        );
        customers.fields.insert(
            "friends".into(),
            FieldSchema::Relation(RelationSchema::OneToMany {
                foreign_collection: "customers".into(),
                origin_key: "country_id".into(),
                origin_key_target: "country_id".into(),
            }),
        );
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("countries".into(), countries);
        schema.collections.insert("customers".into(), customers);
        schema
    }

    fn import(name: &str, path: &str, readonly: Option<bool>) -> Customization {
        Customization::collection(
            "p",
            "customers",
            Kind::ImportField {
                name: name.into(),
                path: path.into(),
                readonly,
            },
        )
    }

    #[test]
    fn a_writable_sortable_column_expands_into_four_kinds() {
        let out = expand(
            &schema(),
            vec![import("country_name", "country:name", None)],
            &StackOptions::default(),
        )
        .unwrap();
        assert_eq!(out.computed.len(), 1);
        let Kind::ComputedField {
            column_type,
            dependencies,
            default_value,
            ..
        } = &out.computed[0].kind
        else {
            panic!("a computed field")
        };
        assert_eq!(*column_type, ColumnType::Primitive(PrimitiveType::String));
        assert_eq!(dependencies, &["country:name"]);
        assert_eq!(default_value, &Some(serde_json::json!("?")));
        assert_eq!(out.writing.len(), 1);
        let ops: Vec<String> = out
            .filtering
            .iter()
            .map(|c| format!("{:?}", c.kind))
            .collect();
        assert_eq!(
            ops,
            [
                "Filtering(country_name, Replace(Equal))",
                "Filtering(country_name, Replace(Contains))"
            ]
        );
        assert_eq!(
            format!("{:?}", out.sorting[0].kind),
            "Sorting(country_name, Replace([SortClause { field: \"country:name\", ascending: true }]))"
        );
    }

    #[test]
    fn read_only_sources_and_options() {
        let out = expand(
            &schema(),
            vec![
                import("code", "country:code", None),
                import("name_ro", "country:name", Some(true)),
            ],
            &StackOptions::default(),
        )
        .unwrap();
        assert_eq!(out.computed.len(), 2);
        assert!(out.writing.is_empty());
        // `code` has no operator and is not sortable.
        assert_eq!(out.filtering.len(), 2);
        assert_eq!(out.sorting.len(), 1);

        let Err(error) = expand(
            &schema(),
            vec![import("code", "country:code", Some(false))],
            &StackOptions::default(),
        ) else {
            panic!("readonly: false on a read-only source is refused")
        };
        let message = error.to_string();
        assert!(
            message.contains("'country:code' is not writable") && message.contains("p:"),
            "{message}"
        );
    }

    #[test]
    fn bad_and_missing_paths() {
        let refused = |path: &str, options: &StackOptions| {
            expand(&schema(), vec![import("x", path, None)], options)
                .err()
                .map(|e| e.to_string())
        };
        let strict = StackOptions::default();
        let missing = refused("country:nope", &strict).unwrap();
        assert!(
            missing.contains("'countries.nope' does not exist")
                && missing.contains("importField 'customers.x'"),
            "{missing}"
        );
        let to_many = refused("friends:country_id", &strict).unwrap();
        assert!(to_many.contains("OneToMany"), "{to_many}");
        let through_column = refused("country_id:name", &strict).unwrap();
        assert!(through_column.contains("is a column"), "{through_column}");
        // Ignored missing elements skip the import; bad paths are still refused.
        let lenient = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        assert_eq!(refused("country:nope", &lenient), None);
        assert!(refused("friends:country_id", &lenient).is_some());
    }

    #[test]
    fn an_import_may_read_an_earlier_import() {
        let mut schema = schema();
        // orders → customers, so `customer:country_name` reads the import on customers.
        let mut orders = CollectionSchema::new("orders");
        orders.fields.insert(
            "customer".into(),
            FieldSchema::Relation(RelationSchema::ManyToOne {
                foreign_collection: "customers".into(),
                foreign_key: "customer_id".into(),
                foreign_key_target: "id".into(),
            }),
        );
        schema.collections.insert("orders".into(), orders);
        let out = expand(
            &schema,
            vec![
                import("country_name", "country:name", None),
                Customization::collection(
                    "p",
                    "orders",
                    Kind::ImportField {
                        name: "country".into(),
                        path: "customer:country_name".into(),
                        readonly: None,
                    },
                ),
            ],
            &StackOptions::default(),
        )
        .unwrap();
        assert_eq!(out.computed.len(), 2);
        assert_eq!(out.writing.len(), 2);
    }

    #[test]
    fn the_write_patch_nests_along_the_path() {
        let patch = nested_patch("a:b:c", &Value::Int(1));
        assert_eq!(patch.get_path("a:b:c"), Some(&Value::Int(1)));
        assert!(matches!(patch.get("a"), Some(Value::Record(_))));
    }
}
