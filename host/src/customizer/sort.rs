//! emulateFieldSorting and replaceFieldSorting (protocol §8.8, stack position 14).
//!
//! - Replaced: a sort clause on the field becomes the declared clauses (inverted when the clause
//!   is descending), themselves rewritten (they may name other replaced or emulated fields, here
//!   or through to-one relations). Checked when the stack is built, so a cycle or a clause the
//!   layer below cannot sort is a startup error, not a failing request.
//! - Emulated: when the (rewritten) sort uses the field, every matching record is listed with
//!   only the sort fields and the primary keys (at most `emulationRowLimit` of them), sorted and
//!   paginated in memory; the page is then fetched by primary key and put back in that order.
//!
//! Both mark the field sortable. Every collection is decorated: a sort through a relation
//! (`customer:fullName`) follows the related collection's rules.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::operator::{match_records, too_many_rows};
use super::stack::{ColumnTarget, Decorator, Layer, StackOptions, by_collection, decorated};
use super::{Customization, Kind, SortingMode};
use crate::datasource::query::evaluate;
use crate::datasource::schema::FieldSchema;
use crate::datasource::{
    Caller, Collection, CollectionSchema, DataSource, DataSourceSchema, Error, Filter, Page,
    Projection, Record, Result, Sort, SortClause, Value,
};

/// How sorting on one field is answered: `None` emulated, else the replacing clauses.
type Rule = Option<Vec<SortClause>>;

/// collection → field → rule.
type Registry = HashMap<String, HashMap<String, Rule>>;

/// The sort emulation layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut schema = child.schema().clone();
    let mut registry: Registry = HashMap::new();
    // (origin, collection, field) of each replacement, checked once all are known.
    let mut replaced = Vec::new();
    for (collection, list) in by_collection(customizations) {
        for customization in list {
            let Kind::Sorting { field, mode } = customization.kind else {
                continue;
            };
            let origin = customization.origin;
            let rule = match mode {
                SortingMode::Emulate => None,
                SortingMode::Replace(clauses) => Some(clauses),
                // Schema-only: the stack gives it to the schema layer.
                SortingMode::Disable => {
                    return Err(Error::Internal(format!(
                        "{origin}: disableFieldSorting belongs to the schema layer"
                    )));
                }
            };
            let target = ColumnTarget {
                origin: &origin,
                collection: &collection,
                field: &field,
                declared: "sorting",
                refused: "emulate or replace the sorting of",
            };
            let Some(target) = target.find(&mut schema, options)? else {
                continue;
            };
            if let Some(FieldSchema::Column(column)) = target.fields.get_mut(&field) {
                column.is_sortable = true;
            }
            if rule.is_some() {
                replaced.push((origin, collection.clone(), field.clone()));
            }
            registry
                .entry(collection.clone())
                .or_default()
                .insert(field, rule);
        }
    }
    let shared = Arc::new(Shared {
        child_schema: child.schema().clone(),
        schema,
        registry,
        row_limit: options.emulation_row_limit,
    });
    for (origin, collection, field) in replaced {
        shared.check(&origin, &collection, &field)?;
    }
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        Ok(Some(decorated(Sorted {
            child: collection,
            schema: shared.schema.collection(&name)?.clone(),
            shared: Arc::clone(&shared),
        })))
    })?;
    Ok(Arc::new(layer))
}

struct Shared {
    child_schema: DataSourceSchema,
    /// This layer's schema (the child's with the fields marked sortable).
    schema: DataSourceSchema,
    registry: Registry,
    row_limit: u64,
}

impl Shared {
    /// Sorting on a replaced field must end in clauses the layer below sorts, or that this layer
    /// emulates, without coming back to itself.
    fn check(&self, origin: &str, collection: &str, field: &str) -> Result<()> {
        let clause = SortClause {
            field: field.to_owned(),
            ascending: true,
        };
        let context = |e: Error| {
            Error::validation(format!(
                "{origin}: the sort replacing '{collection}.{field}' is invalid: {e}"
            ))
        };
        let clauses = self
            .rewrite_clause(collection, &clause, &mut Vec::new())
            .map_err(context)?;
        let own = self.child_schema.collection(collection)?;
        for clause in &clauses {
            let (_, column) = self
                .child_schema
                .resolve_column(own, &clause.field)
                .map_err(context)?;
            if !column.is_sortable && !self.is_emulated(collection, &clause.field) {
                return Err(context(Error::validation(format!(
                    "'{}' is not sortable",
                    clause.field
                ))));
            }
        }
        Ok(())
    }

    /// The clauses that `sort` stands for.
    fn rewrite(&self, collection: &str, sort: &Sort) -> Result<Sort> {
        let mut out = Vec::with_capacity(sort.0.len());
        for clause in &sort.0 {
            out.extend(self.rewrite_clause(collection, clause, &mut Vec::new())?);
        }
        Ok(Sort(out))
    }

    /// One clause, with replaced fields substituted recursively; `path` holds the replacements
    /// being expanded (`collection.field`), to stop cycles.
    fn rewrite_clause(
        &self,
        collection: &str,
        clause: &SortClause,
        path: &mut Vec<String>,
    ) -> Result<Vec<SortClause>> {
        if let Some((head, rest)) = clause.field.split_once(':') {
            let relation = self
                .schema
                .collection(collection)
                .ok()
                .and_then(|c| c.relation(head))
                .filter(|r| r.is_to_one());
            let Some(relation) = relation else {
                // Not a to-one relation: the layer below reports the bad path.
                return Ok(vec![clause.clone()]);
            };
            let inner = SortClause {
                field: rest.to_owned(),
                ascending: clause.ascending,
            };
            return Ok(self
                .rewrite_clause(relation.foreign_collection(), &inner, path)?
                .into_iter()
                .map(|c| SortClause {
                    field: format!("{head}:{}", c.field),
                    ascending: c.ascending,
                })
                .collect());
        }
        let Some(Some(replacement)) = self
            .registry
            .get(collection)
            .and_then(|fields| fields.get(&clause.field))
        else {
            return Ok(vec![clause.clone()]);
        };
        let id = format!("{collection}.{}", clause.field);
        if path.contains(&id) {
            path.push(id);
            return Err(Error::validation(format!(
                "sort replacement cycle: {}",
                path.join(" -> ")
            )));
        }
        path.push(id);
        let mut out = Vec::new();
        for sub in replacement {
            let sub = SortClause {
                field: sub.field.clone(),
                // A descending sort on the field inverts every replacing clause.
                ascending: sub.ascending == clause.ascending,
            };
            out.extend(self.rewrite_clause(collection, &sub, path)?);
        }
        path.pop();
        Ok(out)
    }

    /// Whether sorting on `path` (relative to `collection`) is emulated here.
    fn is_emulated(&self, collection: &str, path: &str) -> bool {
        match path.split_once(':') {
            None => matches!(
                self.registry.get(collection).and_then(|f| f.get(path)),
                Some(None)
            ),
            Some((head, rest)) => self
                .schema
                .collection(collection)
                .ok()
                .and_then(|c| c.relation(head))
                .is_some_and(|r| self.is_emulated(r.foreign_collection(), rest)),
        }
    }
}

struct Sorted {
    child: Arc<dyn Collection>,
    schema: CollectionSchema,
    shared: Arc<Shared>,
}

impl Sorted {
    /// The page of `filter` sorted in memory: keys first, then the records by key.
    async fn list_emulated(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
        emulated: &str,
    ) -> Result<Vec<Record>> {
        let keys: Vec<&str> = self.schema.primary_keys();
        if keys.is_empty() {
            return Err(Error::NoPrimaryKey);
        }
        let limit = self.shared.row_limit;
        let mut reference = Projection::new(filter.sort.0.iter().map(|c| c.field.clone()));
        for key in &keys {
            if !reference.iter().any(|p| p == *key) {
                reference.push((*key).to_owned());
            }
        }
        let all = Filter {
            sort: Sort::default(),
            page: Some(Page::new(0, limit.saturating_add(1))),
            ..filter.clone()
        };
        let mut records = self.child.list(caller, &all, &reference).await?;
        if records.len() as u64 > limit {
            return Err(too_many_rows(&self.schema.name, emulated, "sorting", limit));
        }
        evaluate::sort_records(&mut records, &filter.sort);
        if let Some(page) = &filter.page {
            let skip = usize::try_from(page.skip).unwrap_or(usize::MAX);
            let take = usize::try_from(page.limit).unwrap_or(usize::MAX);
            records = records.into_iter().skip(skip).take(take).collect();
        }
        if records.is_empty() {
            return Ok(records);
        }
        let position: HashMap<String, usize> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (key_of(r, &keys), i))
            .collect();
        let mut wanted = projection.clone();
        let missing: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| !projection.iter().any(|p| p == *k))
            .collect();
        for key in &missing {
            wanted.push((*key).to_owned());
        }
        // The keys decide: the search, segment and conditions were applied by the first list.
        let by_key = Filter::new(Some(match_records(&self.schema, &records)));
        let page = self.child.list(caller, &by_key, &wanted).await?;
        let mut slots: Vec<Option<Record>> = vec![None; records.len()];
        for record in page {
            if let Some(&i) = position.get(&key_of(&record, &keys)) {
                slots[i] = Some(if missing.is_empty() {
                    record
                } else {
                    record
                        .iter()
                        .filter(|(name, _)| !missing.contains(name))
                        .map(|(name, value)| (name, value.clone()))
                        .collect()
                });
            }
        }
        // A record deleted between the two lists is left out.
        Ok(slots.into_iter().flatten().collect())
    }
}

/// The primary key of a record as one string, to find it again.
fn key_of(record: &Record, keys: &[&str]) -> String {
    keys.iter()
        .map(|k| record.get(k).unwrap_or(&Value::Null).to_id_string())
        .collect::<Vec<_>>()
        .join("|")
}

#[async_trait]
impl Decorator for Sorted {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        if filter.sort.is_empty() {
            return self.child.list(caller, filter, projection).await;
        }
        let sort = self.shared.rewrite(&self.schema.name, &filter.sort)?;
        let emulated = sort
            .0
            .iter()
            .find(|c| self.shared.is_emulated(&self.schema.name, &c.field))
            .map(|c| c.field.clone());
        let filter = Filter {
            sort,
            ..filter.clone()
        };
        match emulated {
            None => self.child.list(caller, &filter, projection).await,
            Some(field) => {
                self.list_emulated(caller, &filter, projection, &field)
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::customizer::test_support::{base, caller, full_name, ids};
    use crate::customizer::{StackOptions, build_stack, build_stack_with};

    fn sorting(collection: &str, field: &str, mode: SortingMode) -> Customization {
        Customization::collection(
            "test",
            collection,
            Kind::Sorting {
                field: field.into(),
                mode,
            },
        )
    }

    fn clause(field: &str, ascending: bool) -> SortClause {
        SortClause {
            field: field.into(),
            ascending,
        }
    }

    fn sorted(sort: Vec<SortClause>, page: Option<Page>) -> Filter {
        Filter {
            sort: Sort(sort),
            page,
            ..Filter::default()
        }
    }

    #[tokio::test]
    async fn emulated_sort_on_a_computed_field_sorts_and_paginates_in_memory() {
        let stack = build_stack(
            base().await,
            vec![
                full_name(),
                sorting("customers", "fullName", SortingMode::Emulate),
            ],
        )
        .unwrap();
        let customers = stack.schema().collection("customers").unwrap();
        assert!(customers.column("fullName").unwrap().is_sortable);
        // Ada Lovelace, Alan Turing, Grace Hopper.
        let desc = sorted(vec![clause("fullName", false)], None);
        assert_eq!(ids(&stack, "customers", &desc).await.unwrap(), [3, 2, 1]);
        let page = sorted(vec![clause("fullName", false)], Some(Page::new(1, 1)));
        assert_eq!(ids(&stack, "customers", &page).await.unwrap(), [2]);
        // The page's records have what was asked (the computed field) and nothing more.
        let records = stack
            .collection("customers")
            .unwrap()
            .list(
                &caller(),
                &sorted(vec![clause("fullName", true)], None),
                &Projection::new(["fullName"]),
            )
            .await
            .unwrap();
        let names: Vec<String> = records
            .iter()
            .map(|r| {
                assert_eq!(r.len(), 1, "{r:?}");
                r.get("fullName").unwrap().to_id_string()
            })
            .collect();
        assert_eq!(names, ["Ada Lovelace", "Alan Turing", "Grace Hopper"]);
        // Through a relation, with a filter and a tie-breaker (the order without customer first).
        let filter = Filter {
            condition_tree: Some(crate::datasource::ConditionTree::leaf(
                "amount",
                crate::datasource::Operator::GreaterThan,
                Value::Int(10),
            )),
            ..sorted(
                vec![clause("customer:fullName", false), clause("id", true)],
                None,
            )
        };
        assert_eq!(ids(&stack, "orders", &filter).await.unwrap(), [3, 2, 5, 4]);
    }

    #[tokio::test]
    async fn replaced_sort_substitutes_the_clauses_inverted_when_descending() {
        let stack = build_stack(
            base().await,
            vec![
                full_name(),
                sorting(
                    "customers",
                    "fullName",
                    SortingMode::Replace(vec![clause("last_name", true)]),
                ),
            ],
        )
        .unwrap();
        assert!(
            stack
                .schema()
                .collection("customers")
                .unwrap()
                .column("fullName")
                .unwrap()
                .is_sortable
        );
        // Hopper, Lovelace, Turing.
        let asc = sorted(vec![clause("fullName", true)], None);
        assert_eq!(ids(&stack, "customers", &asc).await.unwrap(), [3, 1, 2]);
        let desc = sorted(vec![clause("fullName", false)], None);
        assert_eq!(ids(&stack, "customers", &desc).await.unwrap(), [2, 1, 3]);
        let orders = sorted(
            vec![clause("customer:fullName", true), clause("id", true)],
            None,
        );
        assert_eq!(
            ids(&stack, "orders", &orders).await.unwrap(),
            [4, 3, 1, 5, 2]
        );
    }

    #[tokio::test]
    async fn a_replacement_cycle_or_an_unsortable_replacement_is_refused_at_build_time() {
        let err = build_stack(
            base().await,
            vec![
                sorting(
                    "customers",
                    "first_name",
                    SortingMode::Replace(vec![clause("last_name", true)]),
                ),
                sorting(
                    "customers",
                    "last_name",
                    SortingMode::Replace(vec![clause("first_name", false)]),
                ),
            ],
        )
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains("customers.first_name -> customers.last_name -> customers.first_name"),
            "{err}"
        );
        // A computed field is not sortable below: replacing by it needs it emulated.
        let err = build_stack(
            base().await,
            vec![
                full_name(),
                sorting(
                    "customers",
                    "id",
                    SortingMode::Replace(vec![clause("fullName", true)]),
                ),
            ],
        )
        .err()
        .unwrap();
        assert!(
            err.to_string().contains("'fullName' is not sortable"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn emulated_sort_past_the_row_limit_is_a_validation_error_naming_the_option() {
        let options = StackOptions {
            emulation_row_limit: 2,
            ..StackOptions::default()
        };
        let stack = build_stack_with(
            base().await,
            vec![
                full_name(),
                sorting("customers", "fullName", SortingMode::Emulate),
            ],
            &options,
        )
        .unwrap();
        let err = ids(
            &stack,
            "customers",
            &sorted(vec![clause("fullName", true)], None),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Validation(_)), "{err:?}");
        let message = err.to_string();
        for part in ["customers.fullName", "2 records", "emulationRowLimit"] {
            assert!(message.contains(part), "{message}");
        }
        // A filter that keeps the matches under the limit works.
        let filter = Filter {
            condition_tree: Some(crate::datasource::ConditionTree::leaf(
                "id",
                crate::datasource::Operator::GreaterThan,
                Value::Int(1),
            )),
            ..sorted(vec![clause("fullName", false)], None)
        };
        assert_eq!(ids(&stack, "customers", &filter).await.unwrap(), [3, 2]);
    }
}
