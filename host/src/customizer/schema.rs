//! Schema-only toggles (protocol §8.12, stack position 18): `disableCount` (`countable: false`)
//! and `disableFieldSorting` (`isSortable: false`). Only the schema changes; every operation is
//! forwarded, the agent refusing what the schema no longer advertises.

use std::sync::Arc;

use super::stack::{StackOptions, schema_layer, target_column};
use super::{Customization, Kind, SortingMode};
use crate::datasource::{DataSource, Result};

/// The schema layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    schema_layer(
        child,
        customizations,
        |collection, schema, customization| {
            match &customization.kind {
                Kind::DisableCount => schema.countable = false,
                Kind::Sorting {
                    field,
                    mode: SortingMode::Disable,
                } => {
                    let origin = &customization.origin;
                    let column = target_column(
                        schema,
                        field,
                        options,
                        format!(
                            "{origin}: cannot disable sorting on '{collection}.{field}', which \
                             is a relation"
                        ),
                        format!(
                            "{origin}: cannot disable sorting on '{collection}.{field}', which \
                             does not exist"
                        ),
                    )?;
                    if let Some(column) = column {
                        column.is_sortable = false;
                    }
                }
                _ => {}
            }
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::build_stack;
    use super::*;
    use crate::customizer::test_support::sqlite;

    async fn base() -> Arc<dyn DataSource> {
        sqlite("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);").await
    }

    fn on_items(kind: Kind) -> Customization {
        Customization::collection("test", "items", kind)
    }

    #[tokio::test]
    async fn disable_count_and_sorting_change_only_the_schema() {
        let stack = build_stack(
            base().await,
            vec![
                on_items(Kind::DisableCount),
                on_items(Kind::Sorting {
                    field: "name".into(),
                    mode: SortingMode::Disable,
                }),
            ],
        )
        .unwrap();
        let items = stack.schema().collection("items").unwrap();
        assert!(!items.countable);
        assert!(!items.column("name").unwrap().is_sortable);
        assert!(items.column("id").unwrap().is_sortable);
        // The collection's own schema matches the datasource's.
        assert_eq!(stack.collection("items").unwrap().schema(), items);
    }

    #[tokio::test]
    async fn disabling_sorting_on_a_missing_field_is_refused_unless_ignored() {
        let customization = || {
            vec![on_items(Kind::Sorting {
                field: "nope".into(),
                mode: SortingMode::Disable,
            })]
        };
        let err = build_stack(base().await, customization())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("items.nope"), "{err}");
        let options = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        let stack = super::super::build_stack_with(base().await, customization(), &options);
        assert!(stack.is_ok());
    }
}
