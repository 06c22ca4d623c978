//! What the fuzz targets (`fuzz/`, docs/fuzzing.md) need from this crate and cannot reach
//! otherwise: a realistic schema to parse requests against, and the parsers of modules that are
//! private to their parent. Not an API (hidden from the docs); the binary does not use it, and
//! it stays compiled (and linted) in every build so that the targets cannot rot unnoticed.

use crate::datasource::{
    CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, FieldSchema, Operator,
    PrimitiveType, RelationSchema, schema::Wire,
};

pub use crate::plugins::loader::{PluginToml, detect_language};

/// A column of `ty` with every operator its type allows, as the SQL datasource declares them.
fn column(ty: impl Into<ColumnType>) -> ColumnSchema {
    let mut c = ColumnSchema::new(ty);
    c.filter_operators = Operator::ALL
        .iter()
        .copied()
        .filter(|o| o.allowed_for(&c.column_type))
        .collect();
    c
}

fn primary_key(ty: PrimitiveType) -> FieldSchema {
    let mut c = column(ty);
    c.is_primary_key = true;
    FieldSchema::Column(c)
}

fn plain(ty: impl Into<ColumnType>) -> FieldSchema {
    FieldSchema::Column(column(ty))
}

fn many_to_one(foreign: &str, key: &str) -> FieldSchema {
    FieldSchema::Relation(RelationSchema::ManyToOne {
        foreign_collection: foreign.into(),
        foreign_key: key.into(),
        foreign_key_target: "id".into(),
    })
}

fn collection(name: &str, fields: Vec<(&str, FieldSchema)>) -> CollectionSchema {
    let mut c = CollectionSchema::new(name);
    for (n, f) in fields {
        c.fields.insert(n.to_owned(), f);
    }
    c
}

/// A schema with every kind of column and relation the parsers branch on: `books` (number key,
/// segments, an enum, an array, a composite, binary, read-only and unsortable columns) →
/// `author` (`persons`, UUID key, and `manager`, a relation to itself, for deep paths) →
/// `company`; `books` has `reviews` (one-to-many) and `tags` (many-to-many), `persons` one
/// `passport` (one-to-one); `order_items` has a composite key and no search; `logs` no key;
/// `files` a binary key served in hex.
pub fn schema() -> DataSourceSchema {
    use PrimitiveType::*;
    let mut status = column(Enum);
    status.enum_values = vec!["draft".into(), "published".into()];
    let mut moods = column(ColumnType::Array(Box::new(Enum.into())));
    moods.enum_values = vec!["happy".into(), "sad".into()];
    let mut created_at = column(Date);
    created_at.is_read_only = true;
    let mut published = column(Dateonly);
    published.is_sortable = false;
    let dimensions = ColumnType::Composite(
        [
            ("width".to_owned(), Number.into()),
            ("unit".to_owned(), String.into()),
        ]
        .into_iter()
        .collect(),
    );
    let mut books = collection(
        "books",
        vec![
            ("id", primary_key(Number)),
            ("title", plain(String)),
            ("status", FieldSchema::Column(status)),
            ("moods", FieldSchema::Column(moods)),
            ("published", FieldSchema::Column(published)),
            ("created_at", FieldSchema::Column(created_at)),
            ("opens_at", plain(Time)),
            ("in_stock", plain(Boolean)),
            ("price", plain(Number)),
            ("metadata", plain(Json)),
            ("location", plain(Point)),
            ("cover", plain(Binary)),
            ("dimensions", plain(dimensions)),
            ("scores", plain(ColumnType::Array(Box::new(Number.into())))),
            ("author_id", plain(Uuid)),
            ("author", many_to_one("persons", "author_id")),
            (
                "reviews",
                FieldSchema::Relation(RelationSchema::OneToMany {
                    foreign_collection: "reviews".into(),
                    origin_key: "book_id".into(),
                    origin_key_target: "id".into(),
                }),
            ),
            (
                "tags",
                FieldSchema::Relation(RelationSchema::ManyToMany {
                    foreign_collection: "tags".into(),
                    through_collection: "book_tags".into(),
                    origin_key: "book_id".into(),
                    origin_key_target: "id".into(),
                    foreign_key: "tag_id".into(),
                    foreign_key_target: "id".into(),
                }),
            ),
        ],
    );
    books.segments = vec!["Recent".into(), "Best sellers".into()];
    let persons = collection(
        "persons",
        vec![
            ("id", primary_key(Uuid)),
            ("name", plain(String)),
            ("company_id", plain(Number)),
            ("company", many_to_one("companies", "company_id")),
            ("manager_id", plain(Uuid)),
            ("manager", many_to_one("persons", "manager_id")),
            (
                "passport",
                FieldSchema::Relation(RelationSchema::OneToOne {
                    foreign_collection: "passports".into(),
                    origin_key: "person_id".into(),
                    origin_key_target: "id".into(),
                }),
            ),
        ],
    );
    let companies = collection(
        "companies",
        vec![("id", primary_key(Number)), ("name", plain(String))],
    );
    let passports = collection(
        "passports",
        vec![("id", primary_key(Number)), ("person_id", plain(Uuid))],
    );
    let reviews = collection(
        "reviews",
        vec![("id", primary_key(Number)), ("book_id", plain(Number))],
    );
    let tags = collection(
        "tags",
        vec![("id", primary_key(Number)), ("label", plain(String))],
    );
    let book_tags = collection(
        "book_tags",
        vec![
            ("book_id", primary_key(Number)),
            ("tag_id", primary_key(Number)),
        ],
    );
    let mut order_items = collection(
        "order_items",
        vec![
            ("order_id", primary_key(Number)),
            ("sku", primary_key(String)),
            ("quantity", plain(Number)),
        ],
    );
    order_items.searchable = false;
    let logs = collection("logs", vec![("message", plain(String))]);
    let mut key = column(Binary);
    key.is_primary_key = true;
    key.wire = Wire::Hex;
    let files = collection(
        "files",
        vec![("hash", FieldSchema::Column(key)), ("name", plain(String))],
    );
    let mut schema = DataSourceSchema::default();
    for c in [
        books,
        persons,
        companies,
        passports,
        reviews,
        tags,
        book_tags,
        order_items,
        logs,
        files,
    ] {
        schema.collections.insert(c.name.clone(), c);
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_resolves_every_relation() {
        let schema = schema();
        for collection in schema.collections.values() {
            for (name, relation) in collection.relations() {
                assert!(
                    schema.collection(relation.foreign_collection()).is_ok(),
                    "{}.{name}",
                    collection.name
                );
            }
        }
        let books = schema.collection("books").expect("books");
        assert!(
            schema
                .resolve_column(books, "author:manager:company:name")
                .is_ok()
        );
    }
}
