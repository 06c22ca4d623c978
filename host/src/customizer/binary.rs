//! `replaceFieldBinaryMode` (protocol §8.12, stack position 22): a binary column crosses the wire
//! as a data URI or as hex. Records stay bytes in every layer; the agent converts at the edge
//! from the column's [`Wire`] (`agent::wire`: values, write bodies, filter values, and the
//! served `String` type with its `Match`/length rules), so this layer only sets that form.

use std::sync::Arc;

use super::stack::{StackOptions, schema_layer};
use super::{BinaryMode, Customization, Kind};
use crate::datasource::schema::{FieldSchema, Wire};
use crate::datasource::{ColumnType, DataSource, Error, PrimitiveType, Result};

/// The binary layer over `child`. The last mode declared for a column wins.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    schema_layer(
        child,
        customizations,
        |collection, schema, customization| {
            let Kind::BinaryMode { field, mode } = &customization.kind else {
                return Ok(());
            };
            let origin = &customization.origin;
            match schema.fields.get_mut(field) {
                Some(FieldSchema::Column(column))
                    if column.column_type == ColumnType::Primitive(PrimitiveType::Binary) =>
                {
                    column.wire = match mode {
                        BinaryMode::DataUri => Wire::DataUri,
                        BinaryMode::Hex => Wire::Hex,
                    };
                    Ok(())
                }
                // The agent's "Expected a binary field", naming the field.
                Some(_) => Err(Error::validation(format!(
                    "{origin}: cannot set the binary mode of '{collection}.{field}': \
                 expected a binary field"
                ))),
                None => options.missing(format!(
                    "{origin}: cannot set the binary mode of '{collection}.{field}', which does \
                 not exist"
                )),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::build_stack;
    use super::*;
    use crate::customizer::test_support::sqlite;

    async fn base() -> Arc<dyn DataSource> {
        sqlite("CREATE TABLE files (id INTEGER PRIMARY KEY, body BLOB, name TEXT);").await
    }

    fn mode(field: &str, mode: BinaryMode) -> Customization {
        Customization::collection(
            "test",
            "files",
            Kind::BinaryMode {
                field: field.into(),
                mode,
            },
        )
    }

    #[tokio::test]
    async fn the_last_declared_mode_sets_the_wire_form() {
        let base = base().await;
        assert_eq!(
            base.schema()
                .collection("files")
                .unwrap()
                .column("body")
                .unwrap()
                .wire,
            Wire::DataUri
        );
        let stack = build_stack(base, vec![mode("body", BinaryMode::Hex)]).unwrap();
        let files = stack.schema().collection("files").unwrap();
        assert_eq!(files.column("body").unwrap().wire, Wire::Hex);
        assert_eq!(
            stack
                .collection("files")
                .unwrap()
                .schema()
                .column("body")
                .unwrap()
                .wire,
            Wire::Hex
        );
        let stack = build_stack(
            stack,
            vec![
                mode("body", BinaryMode::Hex),
                mode("body", BinaryMode::DataUri),
            ],
        )
        .unwrap();
        let body = stack
            .schema()
            .collection("files")
            .unwrap()
            .column("body")
            .unwrap()
            .clone();
        assert_eq!(body.wire, Wire::DataUri);
    }

    #[tokio::test]
    async fn a_column_that_is_not_binary_is_refused_by_name() {
        let err = build_stack(base().await, vec![mode("name", BinaryMode::Hex)])
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("'files.name'") && err.contains("binary"),
            "{err}"
        );
        let err = build_stack(base().await, vec![mode("nope", BinaryMode::Hex)])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'files.nope'"), "{err}");
    }
}
