//! Typings for plugin authors (`canopy typings`, `typingsPath`): a Rust module (or, with
//! `--lang python` or a `.py` path, a Python module, see `python`; with `--lang ts` or a `.ts`
//! path, the Node agent's `typings.d.ts` shape, see `ts`) that names every collection,
//! field, relation and `relation:field` path of the customized schema as a constant, so that a
//! typo in a plugin (`ds.collection(customers::NAME)`, a computed field's dependency
//! `orders::paths::CUSTOMER__FIRST_NAME`) is a compile error instead of a load-time one.
//!
//! The output is deterministic (names sorted, collisions settled in that order) so that it is
//! only rewritten when the schema changed: a file watcher on the plugin crate never loops.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::Path;

use crate::datasource::{
    CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, RelationSchema,
};

mod python;
mod ts;

/// A language Canopy writes plugin code in: `canopy plugin new --lang`, `canopy typings --lang`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Language {
    #[default]
    Rust,
    Python,
    /// TypeScript (`--lang ts` or `--lang typescript`).
    #[value(name = "ts", alias = "typescript")]
    Ts,
}

impl Language {
    /// The language of a typings file by its extension: `.py` is Python, `.ts` (`typings.d.ts`
    /// too) TypeScript, anything else Rust.
    pub fn of_path(path: &Path) -> Self {
        match path.extension().and_then(|x| x.to_str()) {
            Some("py") => Self::Python,
            Some("ts") => Self::Ts,
            _ => Self::Rust,
        }
    }
}

/// Past this many paths for one collection the walk stops with a warning (as the Node agent's
/// generator does): a wide schema at depth 5 would otherwise produce a file no one can compile.
pub const MAX_PATHS_PER_COLLECTION: usize = 10_000;

/// A generated module and what was left out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typings {
    /// The Rust source.
    pub source: String,
    /// One line per collection whose paths were cut at [`MAX_PATHS_PER_COLLECTION`].
    pub warnings: Vec<String>,
}

/// The typings of `schema` in `language`, with relation paths up to `max_depth` relations deep.
pub fn generate_in(language: Language, schema: &DataSourceSchema, max_depth: u32) -> Typings {
    match language {
        Language::Rust => generate(schema, max_depth),
        Language::Python => python::generate(schema, max_depth),
        Language::Ts => ts::generate(schema, max_depth),
    }
}

/// The typings of `schema` as a Rust module, with relation paths up to `max_depth` relations
/// deep.
pub fn generate(schema: &DataSourceSchema, max_depth: u32) -> Typings {
    let collections = sorted_collections(schema);
    let mut out = String::new();
    out.push_str(HEADER);
    let _ = writeln!(out, "\n/// Every collection, by name.");
    let _ = writeln!(out, "{SKIP_FMT}\n{ALLOW_UNUSED}");
    let _ = writeln!(out, "pub const COLLECTIONS: &[&str] = &[");
    for collection in &collections {
        let _ = writeln!(out, "    {:?},", collection.name);
    }
    out.push_str("];\n");
    let warnings = each_collection(
        schema,
        &collections,
        max_depth,
        module_ident,
        |collection, module, paths| write_collection(&mut out, collection, module, paths),
    );
    Typings {
        source: out,
        warnings,
    }
}

/// The collections of `schema`, sorted by name: the order both languages write them in.
fn sorted_collections(schema: &DataSourceSchema) -> Vec<&CollectionSchema> {
    let mut collections: Vec<&CollectionSchema> = schema.collections.values().collect();
    collections.sort_by(|a, b| a.name.cmp(&b.name));
    collections
}

/// Hands `write` each of `collections` with its identifier (distinct among them, made by
/// `ident`) and its paths up to `max_depth`; returns a warning for each whose paths stopped at
/// [`MAX_PATHS_PER_COLLECTION`]. Both languages walk the schema here, so their modules name the
/// same things with the same identifiers.
fn each_collection<'a>(
    schema: &'a DataSourceSchema,
    collections: &[&'a CollectionSchema],
    max_depth: u32,
    ident: fn(&str) -> String,
    mut write: impl FnMut(&'a CollectionSchema, &str, &[Reached<'a>]),
) -> Vec<String> {
    let idents = unique(collections.iter().map(|c| c.name.as_str()), ident);
    let mut warnings = Vec::new();
    for collection in collections {
        let name = idents
            .get(collection.name.as_str())
            .map_or("collection", String::as_str);
        let (paths, complete) = paths(schema, collection, max_depth);
        if !complete {
            warnings.push(format!(
                "typings: the paths of collection `{}` stop at {MAX_PATHS_PER_COLLECTION}; a lower \
                 typingsMaxDepth ({max_depth}) lists them all",
                collection.name
            ));
        }
        write(collection, name, &paths);
    }
    warnings
}

/// Writes the typings of `schema` to `path` (Python for a `.py` file, TypeScript for a `.ts` one,
/// else Rust) unless the file
/// already holds them; returns whether it wrote. The file is replaced through a rename, so a
/// watcher never reads half of it.
pub fn update(path: &Path, schema: &DataSourceSchema, max_depth: u32) -> std::io::Result<bool> {
    update_in(Language::of_path(path), path, schema, max_depth)
}

/// [`update`] in a given language, whatever the file's extension.
pub fn update_in(
    language: Language,
    path: &Path,
    schema: &DataSourceSchema,
    max_depth: u32,
) -> std::io::Result<bool> {
    let typings = generate_in(language, schema, max_depth);
    for warning in &typings.warnings {
        tracing::warn!("{warning}");
    }
    write_if_changed(path, &typings.source)
}

/// Writes `source` to `path` unless the file already holds exactly it.
pub fn write_if_changed(path: &Path, source: &str) -> std::io::Result<bool> {
    match std::fs::read_to_string(path) {
        Ok(current) if current == source => return Ok(false),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    std::fs::write(&temporary, source)?;
    std::fs::rename(&temporary, path)?;
    Ok(true)
}

/// Attributes of each top-level item: a plugin uses only the names it needs, the others must
/// not warn; and `cargo fmt` must leave a generated file as it is (its `--check` would fail).
const SKIP_FMT: &str = "#[rustfmt::skip]";
const ALLOW_UNUSED: &str =
    "#[allow(dead_code, reason = \"generated: a plugin uses the names it needs\")]";

const HEADER: &str = "\
// @generated by `canopy typings` from the customized schema (after every plugin). Do not edit:
// `canopy serve` rewrites it at start outside production when `typingsPath` is set.
//
// Use it as a module of the plugin crate (`mod typings;` with this file as `src/typings.rs`):
// `typings::customers::NAME`, `typings::customers::fields::FIRST_NAME`,
// `typings::orders::relations::CUSTOMER`, `typings::orders::paths::CUSTOMER__FIRST_NAME`
// (`customer:first_name`: a path's relations and field are joined by `__`).
";

/// One collection's module.
fn write_collection(
    out: &mut String,
    collection: &CollectionSchema,
    module: &str,
    paths: &[Reached],
) {
    let mut columns: Vec<(&String, &ColumnSchema)> = collection.columns().collect();
    columns.sort_by(|a, b| a.0.cmp(b.0));
    let mut relations: Vec<(&String, &RelationSchema)> = collection.relations().collect();
    relations.sort_by(|a, b| a.0.cmp(b.0));

    let _ = writeln!(out, "\n/// Collection {}.", code(&collection.name));
    let _ = writeln!(out, "{SKIP_FMT}\n{ALLOW_UNUSED}");
    let _ = writeln!(out, "pub mod {module} {{");
    let _ = writeln!(out, "    /// {}", code(&collection.name));
    let _ = writeln!(out, "    pub const NAME: &str = {:?};", collection.name);

    let _ = writeln!(
        out,
        "\n    /// Columns and computed fields of {}.",
        code(&collection.name)
    );
    let _ = writeln!(out, "    pub mod fields {{");
    let idents = unique(columns.iter().map(|(n, _)| n.as_str()), const_ident);
    for (name, column) in &columns {
        let ident = idents.get(name.as_str()).map_or("FIELD", String::as_str);
        let _ = writeln!(out, "        /// {}: {}.", code(name), describe(column));
        let _ = writeln!(out, "        pub const {ident}: &str = {name:?};");
    }
    let _ = writeln!(out, "    }}");

    let _ = writeln!(out, "\n    /// Relations of {}.", code(&collection.name));
    let _ = writeln!(out, "    pub mod relations {{");
    let idents = unique(relations.iter().map(|(n, _)| n.as_str()), const_ident);
    for (name, relation) in &relations {
        let ident = idents.get(name.as_str()).map_or("RELATION", String::as_str);
        let _ = writeln!(
            out,
            "        /// {}: {} to {}.",
            code(name),
            relation.kind_name(),
            code(relation.foreign_collection())
        );
        let _ = writeln!(out, "        pub const {ident}: &str = {name:?};");
    }
    let _ = writeln!(out, "    }}");

    let _ = writeln!(
        out,
        "\n    /// Columns reached from {} through to-one relations (`relation:field`).",
        code(&collection.name)
    );
    let _ = writeln!(out, "    pub mod paths {{");
    let mut names: Vec<&str> = paths.iter().map(|p| p.path.as_str()).collect();
    names.sort_unstable();
    let idents = unique(names.iter().copied(), path_ident);
    for path in paths {
        let ident = idents
            .get(path.path.as_str())
            .map_or("PATH", String::as_str);
        let _ = writeln!(
            out,
            "        /// {}: {} (in {}).",
            code(&path.path),
            describe(path.column),
            code(&path.collection)
        );
        let _ = writeln!(out, "        pub const {ident}: &str = {:?};", path.path);
    }
    let _ = writeln!(out, "    }}");
    let _ = writeln!(out, "}}");
}

/// A column reached through relations.
struct Reached<'a> {
    /// `customer:address:city`.
    path: String,
    /// The collection holding the column.
    collection: String,
    column: &'a ColumnSchema,
}

/// The columns reachable from `start` through to-one relations, up to `max_depth` relations,
/// breadth first with each level sorted by name. A relation is not followed straight back
/// through its inverse (`order → customer → order` adds nothing but length). The flag is false
/// when the walk stopped at [`MAX_PATHS_PER_COLLECTION`].
fn paths<'a>(
    schema: &'a DataSourceSchema,
    start: &'a CollectionSchema,
    max_depth: u32,
) -> (Vec<Reached<'a>>, bool) {
    struct Step<'a> {
        collection: &'a CollectionSchema,
        depth: u32,
        prefix: String,
        /// (collection, relation taken from it) on the way here.
        traversed: Vec<(&'a str, &'a str)>,
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([Step {
        collection: start,
        depth: 0,
        prefix: String::new(),
        traversed: Vec::new(),
    }]);
    while let Some(step) = queue.pop_front() {
        let mut fields: Vec<_> = step.collection.fields.iter().collect();
        fields.sort_by(|a, b| a.0.cmp(b.0));
        if !step.prefix.is_empty() {
            for (name, column) in fields
                .iter()
                .filter_map(|(n, f)| f.as_column().map(|c| (*n, c)))
            {
                if out.len() == MAX_PATHS_PER_COLLECTION {
                    return (out, false);
                }
                out.push(Reached {
                    path: format!("{}:{name}", step.prefix),
                    collection: step.collection.name.clone(),
                    column,
                });
            }
        }
        if step.depth >= max_depth {
            continue;
        }
        for (name, relation) in fields
            .iter()
            .filter_map(|(n, f)| f.as_relation().map(|r| (*n, r)))
            .filter(|(_, r)| r.is_to_one())
        {
            let Some(target) = schema.collections.get(relation.foreign_collection()) else {
                continue;
            };
            let back = inverse(step.collection, relation, target);
            if back.is_some_and(|back| {
                step.traversed
                    .iter()
                    .any(|&(c, r)| c == target.name && r == back)
            }) {
                continue;
            }
            let mut traversed = step.traversed.clone();
            traversed.push((step.collection.name.as_str(), name.as_str()));
            queue.push_back(Step {
                collection: target,
                depth: step.depth + 1,
                prefix: if step.prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{}:{name}", step.prefix)
                },
                traversed,
            });
        }
    }
    (out, true)
}

/// The relation of `target` that walks `relation` (of `from`) backwards: same keys, other way.
fn inverse<'a>(
    from: &CollectionSchema,
    relation: &RelationSchema,
    target: &'a CollectionSchema,
) -> Option<&'a str> {
    target
        .relations()
        .find(|(_, candidate)| {
            candidate.foreign_collection() == from.name
                && match (relation, candidate) {
                    (
                        RelationSchema::ManyToOne {
                            foreign_key,
                            foreign_key_target,
                            ..
                        },
                        RelationSchema::OneToMany {
                            origin_key,
                            origin_key_target,
                            ..
                        }
                        | RelationSchema::OneToOne {
                            origin_key,
                            origin_key_target,
                            ..
                        },
                    )
                    | (
                        RelationSchema::OneToOne {
                            origin_key,
                            origin_key_target,
                            ..
                        },
                        RelationSchema::ManyToOne {
                            foreign_key,
                            foreign_key_target,
                            ..
                        },
                    ) => foreign_key == origin_key && foreign_key_target == origin_key_target,
                    _ => false,
                }
        })
        .map(|(name, _)| name.as_str())
}

/// A column's type and flags for its rustdoc line: `` `Enum` (`a`, `b`), nullable ``.
fn describe(column: &ColumnSchema) -> String {
    let mut text = format!("`{}`", type_name(&column.column_type));
    let mut enums: Vec<&str> = column.enum_values.iter().map(String::as_str).collect();
    enums.sort_unstable();
    if !enums.is_empty() {
        let values: Vec<String> = enums.iter().map(|v| code(v)).collect();
        let _ = write!(text, " ({})", values.join(", "));
    }
    if column.is_primary_key {
        text.push_str(", primary key");
    } else if column.allow_null && !column.is_required() {
        text.push_str(", nullable");
    }
    if column.is_read_only {
        text.push_str(", read-only");
    }
    text
}

/// `Number`, `[String]` for an array, `{city: String, zip: Number}` for a composite.
fn type_name(column_type: &ColumnType) -> String {
    match column_type {
        ColumnType::Primitive(p) => p.as_str().to_owned(),
        ColumnType::Array(inner) => format!("[{}]", type_name(inner)),
        ColumnType::Composite(fields) => {
            let sorted: BTreeMap<&String, &ColumnType> = fields.iter().collect();
            let inner: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{}: {}", clean(k), type_name(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// A name as inline code in a doc line, whatever it holds (backticks, line breaks).
fn code(name: &str) -> String {
    let name = clean(name);
    if name.contains('`') || name.is_empty() {
        format!("{name:?}")
    } else {
        format!("`{name}`")
    }
}

/// Control characters (a line break would end the doc comment) as their escapes.
fn clean(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Identifiers for `names` that are all distinct. A name already written as its identifier
/// (`first_name` for `FIRST_NAME`) keeps it; then the others, in the order given, take theirs if
/// free, else the first free of `_2`, `_3`… So adding a field never renames another one.
fn unique<'a>(
    names: impl Iterator<Item = &'a str>,
    ident: fn(&str) -> String,
) -> BTreeMap<&'a str, String> {
    let mut candidates: Vec<(&str, String)> = names.map(|n| (n, ident(n))).collect();
    // Stable: among equals, the given order decides.
    candidates.sort_by_key(|(name, id)| !id.eq_ignore_ascii_case(&name.replace(':', "__")));
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut out = BTreeMap::new();
    let mut pending = Vec::new();
    for (name, id) in candidates {
        if taken.insert(id.clone()) {
            out.insert(name, id);
        } else {
            pending.push((name, id));
        }
    }
    for (name, id) in pending {
        let mut n = 2;
        let chosen = loop {
            let candidate = format!("{id}_{n}");
            if !taken.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        taken.insert(chosen.clone());
        out.insert(name, chosen);
    }
    out
}

/// `first_name`, `firstName` → `FIRST_NAME`; `2fa` → `_2FA`; `prénom` → `PR_U00E9_NOM`.
fn const_ident(name: &str) -> String {
    let words = words(name);
    let ident = if words.is_empty() {
        "UNNAMED".to_owned()
    } else {
        words.join("_").to_ascii_uppercase()
    };
    lead(ident)
}

/// `customer:first_name` → `CUSTOMER__FIRST_NAME`.
fn path_ident(path: &str) -> String {
    let parts: Vec<String> = path
        .split(':')
        .map(|part| {
            let words = words(part);
            if words.is_empty() {
                "UNNAMED".to_owned()
            } else {
                words.join("_").to_ascii_uppercase()
            }
        })
        .collect();
    lead(parts.join("__"))
}

/// `OrderItems`, `order-items` → `order_items`; a keyword gets a trailing `_` (`type_`).
fn module_ident(name: &str) -> String {
    let words = words(name);
    let ident = if words.is_empty() {
        "unnamed".to_owned()
    } else {
        words.join("_").to_ascii_lowercase()
    };
    let ident = lead(ident);
    if KEYWORDS.contains(&ident.as_str()) || CRATES.contains(&ident.as_str()) {
        format!("{ident}_")
    } else {
        ident
    }
}

/// An identifier cannot start with a digit.
fn lead(ident: String) -> String {
    if ident.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{ident}")
    } else {
        ident
    }
}

/// The ASCII words of a name: split at anything not alphanumeric and at camelCase humps
/// (`HTTPServer` → `HTTP`, `Server`); any other character becomes its own `U00E9` word, so two
/// names that differ by an accent still get different identifiers.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            let hump = c.is_ascii_uppercase()
                && i > 0
                && (chars[i - 1].is_ascii_lowercase()
                    || chars[i - 1].is_ascii_digit()
                    || (chars[i - 1].is_ascii_uppercase()
                        && chars.get(i + 1).is_some_and(char::is_ascii_lowercase)));
            if hump && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.push(c);
        } else {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            if !c.is_ascii() {
                words.push(format!("U{:04X}", u32::from(c)));
            }
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Rust's keywords (all editions, reserved ones included) in lower case: module names are.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "union", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Crate names a module would shadow if the file were included at a crate's root.
const CRATES: &[&str] = &["alloc", "core", "proc_macro", "std", "test"];

#[cfg(test)]
mod tests;
