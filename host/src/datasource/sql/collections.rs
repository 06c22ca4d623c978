//! Turns introspected tables into collection schemas (§14.3 flags, §14.5 relations): column
//! types, operators and flags; relations derived from single-column foreign keys (ManyToOne,
//! their OneToOne/OneToMany inverses, ManyToMany through junction tables) and their names.

use std::collections::{HashMap, HashSet};

use super::dialect::Dialect;
use super::model::{DefaultValue, ForeignKey, Table};
use super::naming::{plural, singular};
use super::operators;
use crate::datasource::query::Operator;
use crate::datasource::schema::{
    CollectionSchema, ColumnSchema, FieldSchema, RelationSchema, ValidationRule, Wire,
};

/// One schema per table, in the same order as `tables`. Relations name their foreign and
/// through collections by table name; renaming and filtering is the caller's job.
pub fn build(tables: &[Table], _dialect: Dialect) -> Vec<CollectionSchema> {
    let mut schemas: Vec<CollectionSchema> = tables.iter().map(collection).collect();
    for (i, relations) in relations(tables).into_iter().enumerate() {
        let (Some(schema), Some(table)) = (schemas.get_mut(i), tables.get(i)) else {
            continue;
        };
        for (name, relation) in name_relations(table, relations) {
            if schema.fields.contains_key(&name) {
                // The reference's ORM refuses the second association of that name.
                tracing::warn!(
                    "Skipping relation \"{}.{name}\": the name is already used",
                    table.name
                );
                continue;
            }
            schema.fields.insert(name, FieldSchema::Relation(relation));
        }
    }
    schemas
}

/// The columns Sequelize manages as timestamps (§14.2 "Auto timestamps"): `created_at` and
/// `updated_at` (or camelCase) when both exist, plus `deleted_at` (soft delete) with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoTimestamps {
    pub created_at: String,
    pub updated_at: String,
    /// Present: the table is "paranoid" (reads skip deleted rows, delete sets this column).
    pub deleted_at: Option<String>,
}

impl AutoTimestamps {
    fn contains(&self, column: &str) -> bool {
        self.created_at == column
            || self.updated_at == column
            || self.deleted_at.as_deref() == Some(column)
    }
}

/// The auto-timestamp columns of a table, if it has both creation and update columns.
pub fn auto_timestamps(table: &Table) -> Option<AutoTimestamps> {
    let find = |names: [&str; 2]| {
        table
            .columns
            .iter()
            .find(|c| names.contains(&c.name.as_str()))
            .map(|c| c.name.clone())
    };
    Some(AutoTimestamps {
        created_at: find(["createdAt", "created_at"])?,
        updated_at: find(["updatedAt", "updated_at"])?,
        deleted_at: find(["deletedAt", "deleted_at"]),
    })
}

/// The collection with its columns and flags (relations are added by `build`).
fn collection(table: &Table) -> CollectionSchema {
    let timestamps = auto_timestamps(table);
    let mut schema = CollectionSchema::new(table.name.clone());
    for column in &table.columns {
        let auto_timestamp = timestamps
            .as_ref()
            .is_some_and(|t| t.contains(&column.name));
        let read_only = column.auto_increment || table.is_view;
        let mut field = ColumnSchema::new(column.column_type.clone());
        field.filter_operators = operators::supported(&column.column_type);
        field.is_primary_key = column.is_primary_key;
        field.is_read_only = read_only;
        field.is_sortable = true;
        field.allow_null = column.nullable;
        // Only constants are shown; Sequelize sets timestamps itself, so they show none.
        field.default_value = match &column.default {
            Some(DefaultValue::Constant(value)) if !auto_timestamp => Some(value.clone()),
            _ => None,
        };
        field.enum_values = column.enum_values.clone();
        // The binary decorator shows keys as hex, so that ids stay short and URL-safe.
        let is_key =
            column.is_primary_key || table.foreign_keys.iter().any(|fk| fk.column == column.name);
        field.wire = match column.wire {
            Wire::DataUri if is_key => Wire::Hex,
            other => other,
        };
        if !column.nullable && !read_only && !auto_timestamp {
            field.validation.push(ValidationRule {
                operator: Operator::Present,
                value: None,
            });
        }
        schema
            .fields
            .insert(column.name.clone(), FieldSchema::Column(field));
    }
    // Views cannot be written; a table without any key column cannot address its records.
    schema.is_read_only = table.is_view || !table.columns.iter().any(|c| c.is_primary_key);
    schema
}

/// A relation before naming: its schema, the base it is named from and its long form.
struct Pending {
    relation: RelationSchema,
    /// Step 1 and 2 of the naming rule, already applied.
    name: String,
    /// Step 4: used when the name conflicts.
    long_name: String,
}

/// The base of a name taken from a foreign-key column: the column without `_id`/`Id`
/// (case-sensitive, and only if something is left), else the target table's name.
fn column_base(column: &str, target_table: &str) -> String {
    ["_id", "Id"]
        .iter()
        .find_map(|suffix| column.strip_suffix(suffix).filter(|rest| !rest.is_empty()))
        .unwrap_or(target_table)
        .to_owned()
}

/// The two foreign keys of a junction table: exactly two columns that are members of the
/// declared primary key and each carry exactly one foreign key. Tables without a declared key
/// (even a guessed one) are never junctions.
fn junction(table: &Table) -> Option<(&ForeignKey, &ForeignKey)> {
    if table.is_view {
        return None;
    }
    let members: Vec<&ForeignKey> = table
        .columns
        .iter()
        .filter(|c| table.primary_key.contains(&c.name))
        .filter_map(|c| {
            let mut fks = table.foreign_keys.iter().filter(|fk| fk.column == c.name);
            match (fks.next(), fks.next()) {
                (Some(fk), None) => Some(fk),
                _ => None,
            }
        })
        .collect();
    match members.as_slice() {
        [a, b] => Some((a, b)),
        _ => None,
    }
}

/// Every relation, grouped by the table that gets it (same index as `tables`).
fn relations(tables: &[Table]) -> Vec<Vec<Pending>> {
    let index: HashMap<&str, usize> = tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut out: Vec<Vec<Pending>> = tables.iter().map(|_| Vec::new()).collect();
    for (ti, table) in tables.iter().enumerate() {
        if table.is_view {
            continue;
        }
        let junction = junction(table);
        for column in &table.columns {
            for fk in table
                .foreign_keys
                .iter()
                .filter(|fk| fk.column == column.name)
            {
                let Some(&ri) = index.get(fk.foreign_table.as_str()) else {
                    continue;
                };
                let (t, r, c) = (&table.name, &fk.foreign_table, &fk.column);
                out[ti].push(Pending {
                    relation: RelationSchema::ManyToOne {
                        foreign_collection: r.clone(),
                        foreign_key: c.clone(),
                        foreign_key_target: fk.foreign_column.clone(),
                    },
                    name: singular(&column_base(c, r)),
                    long_name: format!("{}_through_{c}", singular(r)),
                });
                if junction.is_some() {
                    // The two sides of a junction get a ManyToMany instead (below).
                    continue;
                }
                let is_unique = table
                    .unique
                    .iter()
                    .any(|set| set.len() == 1 && &set[0] == c);
                let pending = if is_unique {
                    Pending {
                        relation: RelationSchema::OneToOne {
                            foreign_collection: t.clone(),
                            origin_key: c.clone(),
                            origin_key_target: fk.foreign_column.clone(),
                        },
                        name: singular(t),
                        long_name: format!("{}_through_{r}_{c}", singular(t)),
                    }
                } else {
                    Pending {
                        relation: RelationSchema::OneToMany {
                            foreign_collection: t.clone(),
                            origin_key: c.clone(),
                            origin_key_target: fk.foreign_column.clone(),
                        },
                        name: plural(t),
                        long_name: format!("{}_through_{r}_{c}", plural(t)),
                    }
                };
                out[ri].push(pending);
            }
        }
        if let Some((a, b)) = junction {
            for (origin, foreign) in [(a, b), (b, a)] {
                let Some(&oi) = index.get(origin.foreign_table.as_str()) else {
                    continue;
                };
                let target = &foreign.foreign_table;
                out[oi].push(Pending {
                    relation: RelationSchema::ManyToMany {
                        foreign_collection: target.clone(),
                        through_collection: table.name.clone(),
                        origin_key: origin.column.clone(),
                        origin_key_target: origin.foreign_column.clone(),
                        foreign_key: foreign.column.clone(),
                        foreign_key_target: foreign.foreign_column.clone(),
                    },
                    name: plural(&column_base(&foreign.column, target)),
                    long_name: format!("{}_through_{}", plural(target), table.name),
                });
            }
        }
    }
    out
}

/// Step 3 of the naming rule: a name shared by two relations of the table, equal to one of its
/// columns, to the table's own name, or to the junction table of one of its ManyToMany, is
/// replaced by the long form for every relation that got it. Long forms are not re-checked.
fn name_relations(table: &Table, relations: Vec<Pending>) -> Vec<(String, RelationSchema)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for pending in &relations {
        *counts.entry(pending.name.as_str()).or_default() += 1;
    }
    let columns: HashSet<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    let throughs: HashSet<&str> = relations
        .iter()
        .filter_map(|p| match &p.relation {
            RelationSchema::ManyToMany {
                through_collection, ..
            } => Some(through_collection.as_str()),
            _ => None,
        })
        .collect();
    let conflicts: HashSet<String> = relations
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| {
            counts.get(name).is_some_and(|n| *n >= 2)
                || columns.contains(name)
                || *name == table.name
                || throughs.contains(name)
        })
        .map(str::to_owned)
        .collect();
    relations
        .into_iter()
        .map(|p| {
            let name = if conflicts.contains(&p.name) {
                p.long_name
            } else {
                p.name
            };
            (name, p.relation)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::record::Value;
    use crate::datasource::schema::{ColumnType, PrimitiveType};
    use crate::datasource::sql::model::{Column, SqlKind};

    fn column(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            raw_type: "integer".to_owned(),
            kind: SqlKind::Int,
            column_type: ColumnType::Primitive(PrimitiveType::Number),
            nullable: true,
            default: None,
            auto_increment: false,
            is_primary_key: false,
            enum_values: Vec::new(),
            pg_cast: None,
            wire: Default::default(),
        }
    }

    /// A table with an `id` key (unless `pk` says otherwise) and foreign keys `column → table.id`.
    fn table(name: &str, columns: &[&str], pk: &[&str], fks: &[(&str, &str)]) -> Table {
        let pk: Vec<String> = if pk.is_empty() {
            vec!["id".to_owned()]
        } else {
            pk.iter().map(|s| (*s).to_owned()).collect()
        };
        let mut cols: Vec<Column> = Vec::new();
        for name in pk.iter().map(String::as_str).chain(columns.iter().copied()) {
            if !cols.iter().any(|c| c.name == name) {
                let mut c = column(name);
                c.is_primary_key = pk.iter().any(|p| p == name);
                cols.push(c);
            }
        }
        Table {
            name: name.to_owned(),
            schema: None,
            is_view: false,
            columns: cols,
            unique: vec![pk.clone()],
            primary_key: pk,
            foreign_keys: fks
                .iter()
                .map(|(c, t)| ForeignKey {
                    column: (*c).to_owned(),
                    foreign_table: (*t).to_owned(),
                    foreign_column: "id".to_owned(),
                })
                .collect(),
        }
    }

    fn relation_names(schemas: &[CollectionSchema], collection: &str) -> Vec<String> {
        let schema = schemas
            .iter()
            .find(|s| s.name == collection)
            .expect("collection");
        let mut names: Vec<String> = schema
            .relations()
            .map(|(n, r)| format!("{n}:{}", r.kind_name()))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn orders_and_junctions() {
        let tables = vec![
            table("customers", &[], &[], &[]),
            table(
                "orders",
                &["customer_id"],
                &[],
                &[("customer_id", "customers")],
            ),
            table("products", &["tags"], &[], &[]),
            table("tags", &[], &[], &[]),
            table(
                "order_items",
                &["quantity"],
                &["order_id", "product_id"],
                &[("order_id", "orders"), ("product_id", "products")],
            ),
            table(
                "product_tags",
                &[],
                &["product_id", "tag_id"],
                &[("product_id", "products"), ("tag_id", "tags")],
            ),
        ];
        let s = build(&tables, Dialect::Postgres);
        assert_eq!(
            relation_names(&s, "orders"),
            ["customer:ManyToOne", "products:ManyToMany"]
        );
        assert_eq!(relation_names(&s, "customers"), ["orders:OneToMany"]);
        assert_eq!(
            relation_names(&s, "order_items"),
            ["order:ManyToOne", "product:ManyToOne"]
        );
        assert_eq!(
            relation_names(&s, "products"),
            ["orders:ManyToMany", "tags_through_product_tags:ManyToMany"]
        );
        assert_eq!(relation_names(&s, "tags"), ["products:ManyToMany"]);
        let orders = &s[1];
        assert_eq!(
            orders.relation("products"),
            Some(&RelationSchema::ManyToMany {
                foreign_collection: "products".to_owned(),
                through_collection: "order_items".to_owned(),
                origin_key: "order_id".to_owned(),
                origin_key_target: "id".to_owned(),
                foreign_key: "product_id".to_owned(),
                foreign_key_target: "id".to_owned(),
            })
        );
    }

    #[test]
    fn spec_naming_examples() {
        let mut users = table("users", &["email"], &[], &[]);
        users.unique.push(vec!["email".to_owned()]);
        let mut profiles = table("profiles", &[], &["user_id"], &[("user_id", "users")]);
        profiles.unique = vec![vec!["user_id".to_owned()]];
        let mut passports = table("passports", &["user_id"], &[], &[("user_id", "users")]);
        passports.unique.push(vec!["user_id".to_owned()]);
        let mut by_email = table("by_email", &["user_email"], &[], &[]);
        by_email.foreign_keys.push(ForeignKey {
            column: "user_email".to_owned(),
            foreign_table: "users".to_owned(),
            foreign_column: "email".to_owned(),
        });
        let tables = vec![
            users,
            table(
                "posts",
                &["author_id", "editor_id", "reviewerId"],
                &[],
                &[
                    ("author_id", "users"),
                    ("editor_id", "users"),
                    ("reviewerId", "users"),
                ],
            ),
            table(
                "comments",
                &["owner", "post"],
                &[],
                &[("owner", "users"), ("post", "posts")],
            ),
            table(
                "messages",
                &["sender", "receiver"],
                &[],
                &[("sender", "users"), ("receiver", "users")],
            ),
            table(
                "employees",
                &["manager_id"],
                &[],
                &[("manager_id", "employees")],
            ),
            table("user", &["user_id"], &[], &[("user_id", "user")]),
            profiles,
            passports,
            table(
                "follows",
                &[],
                &["follower_id", "followee_id"],
                &[("follower_id", "users"), ("followee_id", "users")],
            ),
            table("people", &[], &[], &[]),
            table("status", &["people_id"], &[], &[("people_id", "people")]),
            table("data", &["status_id"], &[], &[("status_id", "status")]),
            table("uuid_pk", &[], &[], &[]),
            table(
                "uuid_child",
                &["parent_id"],
                &[],
                &[("parent_id", "uuid_pk")],
            ),
            by_email,
            table("with_id", &["Id"], &["key"], &[("Id", "users")]),
        ];
        let s = build(&tables, Dialect::Postgres);
        assert_eq!(
            relation_names(&s, "posts"),
            [
                "author:ManyToOne",
                "comments:OneToMany",
                "editor:ManyToOne",
                "reviewer:ManyToOne"
            ]
        );
        let mut expected_users = vec![
            "by_emails:OneToMany",
            "comments:OneToMany",
            "followees:ManyToMany",
            "followers:ManyToMany",
            "messages_through_users_receiver:OneToMany",
            "messages_through_users_sender:OneToMany",
            "passport:OneToOne",
            "posts_through_users_author_id:OneToMany",
            "posts_through_users_editor_id:OneToMany",
            "posts_through_users_reviewerId:OneToMany",
            "profile:OneToOne",
            "with_ids:OneToMany",
        ];
        expected_users.sort_unstable();
        assert_eq!(relation_names(&s, "users"), expected_users);
        assert_eq!(
            relation_names(&s, "comments"),
            ["post_through_post:ManyToOne", "user:ManyToOne"]
        );
        assert_eq!(
            relation_names(&s, "messages"),
            [
                "user_through_receiver:ManyToOne",
                "user_through_sender:ManyToOne"
            ]
        );
        assert_eq!(
            relation_names(&s, "employees"),
            [
                "employees_through_employees_manager_id:OneToMany",
                "manager:ManyToOne"
            ]
        );
        assert_eq!(
            relation_names(&s, "user"),
            ["user_through_user_id:ManyToOne", "users:OneToMany"]
        );
        assert_eq!(relation_names(&s, "profiles"), ["user:ManyToOne"]);
        assert_eq!(
            relation_names(&s, "follows"),
            ["followee:ManyToOne", "follower:ManyToOne"]
        );
        assert_eq!(
            relation_names(&s, "status"),
            ["data:OneToMany", "person:ManyToOne"]
        );
        assert_eq!(relation_names(&s, "people"), ["statuses:OneToMany"]);
        assert_eq!(relation_names(&s, "data"), ["status:ManyToOne"]);
        assert_eq!(relation_names(&s, "uuid_pk"), ["uuid_children:OneToMany"]);
        assert_eq!(relation_names(&s, "uuid_child"), ["parent:ManyToOne"]);
        assert_eq!(relation_names(&s, "by_email"), ["user:ManyToOne"]);
        assert_eq!(relation_names(&s, "with_id"), ["user:ManyToOne"]);
        let by_email = s.iter().find(|c| c.name == "by_email").expect("by_email");
        assert_eq!(
            by_email.relation("user"),
            Some(&RelationSchema::ManyToOne {
                foreign_collection: "users".to_owned(),
                foreign_key: "user_email".to_owned(),
                foreign_key_target: "email".to_owned(),
            })
        );
    }

    #[test]
    fn two_unique_foreign_keys_to_the_same_table() {
        let mut profile = table(
            "profile",
            &["owner_id", "backup_owner_id"],
            &[],
            &[("owner_id", "users"), ("backup_owner_id", "users")],
        );
        profile.unique.push(vec!["owner_id".to_owned()]);
        profile.unique.push(vec!["backup_owner_id".to_owned()]);
        let s = build(&[table("users", &[], &[], &[]), profile], Dialect::Postgres);
        assert_eq!(
            relation_names(&s, "users"),
            [
                "profile_through_users_backup_owner_id:OneToOne",
                "profile_through_users_owner_id:OneToOne"
            ]
        );
    }

    #[test]
    fn junction_needs_a_declared_key() {
        let mut nopk = table(
            "user_groups_nopk",
            &["user_id", "group_id"],
            &["user_id"],
            &[("user_id", "users"), ("group_id", "groups")],
        );
        nopk.primary_key.clear();
        nopk.unique.clear();
        let with_role = table(
            "memberships",
            &[],
            &["user_id", "group_id", "role"],
            &[("user_id", "users"), ("group_id", "groups")],
        );
        let s = build(
            &[
                table("users", &[], &[], &[]),
                table("groups", &[], &[], &[]),
                nopk,
                with_role,
            ],
            Dialect::Postgres,
        );
        assert_eq!(
            relation_names(&s, "users"),
            ["groups:ManyToMany", "user_groups_nopks:OneToMany"]
        );
        assert_eq!(
            relation_names(&s, "groups"),
            ["user_groups_nopks:OneToMany", "users:ManyToMany"]
        );
    }

    #[test]
    fn auto_timestamp_columns() {
        let t = table("a", &["createdAt", "updatedAt", "deletedAt"], &[], &[]);
        assert_eq!(
            auto_timestamps(&t),
            Some(AutoTimestamps {
                created_at: "createdAt".to_owned(),
                updated_at: "updatedAt".to_owned(),
                deleted_at: Some("deletedAt".to_owned()),
            })
        );
        let t = table("b", &["created_at", "updated_at"], &[], &[]);
        assert_eq!(auto_timestamps(&t).and_then(|a| a.deleted_at), None);
        assert_eq!(
            auto_timestamps(&table("c", &["created_at", "deleted_at"], &[], &[])),
            None
        );
    }

    #[test]
    fn flags() {
        let mut t = table(
            "things",
            &["name", "created_at", "updated_at", "flag", "n"],
            &[],
            &[],
        );
        t.columns[0].auto_increment = true;
        t.columns[0].nullable = false;
        t.columns[1].nullable = false;
        t.columns[2].nullable = false;
        t.columns[2].default = Some(DefaultValue::Expression("now()".to_owned()));
        t.columns[3].nullable = false;
        t.columns[4].nullable = false;
        t.columns[4].default = Some(DefaultValue::Constant(Value::Bool(false)));
        t.columns[5].default = Some(DefaultValue::Constant(Value::Int(3)));
        let s = build(&[t], Dialect::Postgres);
        let c = &s[0];
        assert!(!c.is_read_only);
        let id = c.column("id").expect("id");
        assert!(id.is_read_only && id.is_primary_key && !id.is_required());
        assert!(c.column("name").expect("name").is_required());
        assert!(!c.column("created_at").expect("created_at").is_required());
        assert!(!c.column("updated_at").expect("updated_at").is_required());
        let flag = c.column("flag").expect("flag");
        assert!(flag.is_required());
        assert_eq!(flag.default_value, Some(Value::Bool(false)));
        assert_eq!(c.column("n").expect("n").default_value, Some(Value::Int(3)));
        assert!(
            c.column("n")
                .expect("n")
                .filter_operators
                .contains(&Operator::GreaterThan)
        );

        let mut nopk = table("logs", &["msg"], &[], &[]);
        nopk.primary_key.clear();
        nopk.unique.clear();
        nopk.columns.retain(|c| c.name != "id");
        let mut view = table("v", &["msg"], &[], &[]);
        view.is_view = true;
        view.columns[1].nullable = false;
        let s = build(&[nopk, view], Dialect::Postgres);
        assert!(s[0].is_read_only);
        assert!(s[1].is_read_only);
        assert!(
            s[1].columns()
                .all(|(_, c)| c.is_read_only && !c.is_required())
        );
    }
}
