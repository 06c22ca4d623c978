//! The table's filter builder: conditions in groups that match all (AND) or any (OR) of their
//! conditions and subgroups, nested up to [`MAX_DEPTH`] levels below the top one, turned into the
//! condition tree `GET /forest/{c}?filters=…` takes.
//!
//! The builder is a plain GET form, so it works without the script and from the keyboard: each
//! condition is `c<n>.f`, `c<n>.o`, `c<n>.v` (field, operator, value) and `c<n>.g` (its group's
//! path: `r` the top group, `r.2` its second subgroup, `r.2.1` …), each group's aggregator
//! `ga.<path>`; the buttons that add or remove a condition or a group submit the form with
//! `fx=<command>` and the page comes back with the change. Once applied, the table's address
//! carries the condition tree itself (`filters=<JSON>`, the /forest parameter), so a filtered view
//! is a link to share; links of older shape (`ff`/`fo`/`fv`, conditions all AND-ed) still read.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use crate::console::session::first;

/// The deepest subgroup the builder offers to add (the top group is depth 0).
pub(super) const MAX_DEPTH: usize = 2;
/// Deeper paths than this in a posted form are read as this deep (a form is not a tree).
const MAX_PATH: usize = 6;

/// One condition as the user typed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Condition {
    pub field: String,
    pub operator: String,
    pub value: String,
    /// Just added by a button: it gets the focus.
    pub fresh: bool,
}

impl Condition {
    fn blank(fresh: bool) -> Self {
        Self {
            fresh,
            ..Self::default()
        }
    }

    fn is_blank(&self) -> bool {
        self.field.is_empty()
    }
}

/// A group: all (`any == false`, AND) or any (OR) of its conditions and subgroups.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Group {
    pub any: bool,
    pub conditions: Vec<Condition>,
    pub groups: Vec<Group>,
}

/// One line of the builder as the template draws it: a group opening (its aggregator), a
/// condition, or a group closing (its buttons).
pub(super) struct Item {
    /// `open`, `row` or `close`.
    pub kind: &'static str,
    /// The group's path (of the condition's group for a row).
    pub path: String,
    /// The path as an element id (`r-2-1`).
    pub dom: String,
    pub depth: usize,
    /// Group: matches any (OR).
    pub any: bool,
    /// Group: its legend.
    pub title: String,
    /// Group: not the top one.
    pub removable: bool,
    /// Group: a subgroup may be added in it.
    pub nestable: bool,
    /// Row: its number (1-based, in the order drawn).
    pub n: usize,
    pub field: String,
    pub operator: String,
    pub value: String,
    pub fresh: bool,
}

/// `r.2.1` → `[2, 1]`; `None` when it does not read.
fn parse_path(text: &str) -> Option<Vec<usize>> {
    let mut parts = text.split('.');
    if parts.next()? != "r" {
        return None;
    }
    let path: Vec<usize> = parts
        .map(|p| p.parse::<usize>().ok().filter(|n| *n > 0))
        .collect::<Option<_>>()?;
    Some(path.into_iter().take(MAX_PATH).collect())
}

fn path_text(path: &[usize]) -> String {
    let mut out = "r".to_owned();
    for index in path {
        out.push('.');
        out.push_str(&index.to_string());
    }
    out
}

/// A JSON leaf value as the builder's text: lists joined with commas.
fn value_text(value: Option<&Json>) -> String {
    match value {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(text)) => text.clone(),
        Some(Json::Array(items)) => items
            .iter()
            .map(|item| value_text(Some(item)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

impl Group {
    /// The builder's state of a table's query: its `filters` tree, else the builder's own fields
    /// (and the older `ff`/`fo`/`fv`), then the button pressed (`fx`); and a message when the
    /// `filters` of the address does not read as a condition tree.
    pub fn from_pairs(pairs: &[(String, String)]) -> (Self, Option<String>) {
        let fx = first(pairs, "fx").unwrap_or("");
        let mut group = match first(pairs, "filters").filter(|text| !text.trim().is_empty()) {
            Some(text) => match serde_json::from_str::<Json>(text)
                .ok()
                .and_then(|tree| Self::from_tree(&tree))
            {
                Some(group) => group,
                None => {
                    return (
                        Self::with_blank(Self::default()),
                        Some(
                            "The filter in this address could not be read. Build it again below."
                                .to_owned(),
                        ),
                    );
                }
            },
            None => Self::from_form(pairs, fx),
        };
        group.command(fx);
        (Self::with_blank(group), None)
    }

    /// The top group always offers one empty condition to fill in.
    fn with_blank(mut group: Self) -> Self {
        if !group.conditions.iter().any(Condition::is_blank) {
            group.conditions.push(Condition::blank(false));
        }
        group
    }

    /// A condition tree of the /forest `filters` parameter; `None` when it is not one.
    pub fn from_tree(tree: &Json) -> Option<Self> {
        let object = tree.as_object()?;
        if let Some(aggregator) = object.get("aggregator") {
            let any = aggregator.as_str()?.eq_ignore_ascii_case("or");
            let mut group = Self {
                any,
                ..Self::default()
            };
            for item in object.get("conditions")?.as_array()? {
                if item.get("aggregator").is_some() {
                    group.groups.push(Self::from_tree(item)?);
                } else {
                    group.conditions.push(Self::leaf(item)?);
                }
            }
            Some(group)
        } else {
            Some(Self {
                conditions: vec![Self::leaf(tree)?],
                ..Self::default()
            })
        }
    }

    fn leaf(tree: &Json) -> Option<Condition> {
        Some(Condition {
            field: tree.get("field")?.as_str()?.to_owned(),
            operator: tree.get("operator")?.as_str()?.to_owned(),
            value: value_text(tree.get("value")),
            fresh: false,
        })
    }

    /// The builder's posted fields; the condition a "Remove" button names (`fx=droprow:<n>`)
    /// is left out.
    fn from_form(pairs: &[(String, String)], fx: &str) -> Self {
        let dropped: Option<usize> = fx.strip_prefix("droprow:").and_then(|n| n.parse().ok());
        let mut aggregators: BTreeMap<Vec<usize>, bool> = BTreeMap::new();
        aggregators.insert(Vec::new(), false);
        let mut rows: BTreeMap<usize, (Condition, Vec<usize>)> = BTreeMap::new();
        let (mut legacy_fields, mut legacy_operators, mut legacy_values) =
            (Vec::new(), Vec::new(), Vec::new());
        for (key, value) in pairs {
            if let Some(path) = key.strip_prefix("ga.") {
                if let Some(path) = parse_path(path) {
                    aggregators.insert(path, value == "or");
                }
                continue;
            }
            match key.as_str() {
                "ff" => legacy_fields.push(value.clone()),
                "fo" => legacy_operators.push(value.clone()),
                "fv" => legacy_values.push(value.clone()),
                _ => {}
            }
            let Some((number, part)) = key.strip_prefix('c').and_then(|k| k.split_once('.')) else {
                continue;
            };
            let Ok(number) = number.parse::<usize>() else {
                continue;
            };
            let row = rows.entry(number).or_default();
            match part {
                "f" => row.0.field = value.clone(),
                "o" => row.0.operator = value.clone(),
                "v" => row.0.value = value.clone(),
                "g" => row.1 = parse_path(value).unwrap_or_default(),
                _ => {}
            }
        }
        let mut conditions: Vec<(Condition, Vec<usize>)> = rows
            .into_iter()
            .filter(|(number, _)| Some(*number) != dropped)
            .map(|(_, row)| row)
            .filter(|(condition, _)| !condition.is_blank())
            .collect();
        for (i, field) in legacy_fields.into_iter().enumerate() {
            if field.is_empty() {
                continue;
            }
            let condition = Condition {
                field,
                operator: legacy_operators.get(i).cloned().unwrap_or_default(),
                value: legacy_values.get(i).cloned().unwrap_or_default(),
                fresh: false,
            };
            conditions.push((condition, Vec::new()));
        }
        // Every group a condition names exists, with its parents.
        let mut paths: Vec<Vec<usize>> = aggregators.keys().cloned().collect();
        paths.extend(conditions.iter().map(|(_, path)| path.clone()));
        for path in paths {
            for len in 0..=path.len() {
                aggregators.entry(path[..len].to_vec()).or_insert(false);
            }
        }
        Self::build(&[], &aggregators, &conditions)
    }

    fn build(
        path: &[usize],
        aggregators: &BTreeMap<Vec<usize>, bool>,
        conditions: &[(Condition, Vec<usize>)],
    ) -> Self {
        Self {
            any: aggregators.get(path).copied().unwrap_or(false),
            conditions: conditions
                .iter()
                .filter(|(_, p)| p == path)
                .map(|(c, _)| c.clone())
                .collect(),
            groups: aggregators
                .keys()
                .filter(|p| p.len() == path.len() + 1 && p.starts_with(path))
                .map(|p| Self::build(p, aggregators, conditions))
                .collect(),
        }
    }

    /// The group at `path` (1-based positions of subgroups).
    fn at(&mut self, path: &[usize]) -> Option<&mut Self> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => self.groups.get_mut(first.checked_sub(1)?)?.at(rest),
        }
    }

    /// Applies a builder button: `row:<path>` adds a condition to that group, `group:<path>` a
    /// subgroup (with one condition), `drop:<path>` removes a subgroup (`droprow` is applied
    /// while reading the form).
    fn command(&mut self, fx: &str) {
        let Some((verb, path)) = fx.split_once(':') else {
            return;
        };
        let Some(path) = parse_path(path) else {
            return;
        };
        match verb {
            "row" => {
                if let Some(group) = self.at(&path) {
                    group.conditions.push(Condition::blank(true));
                }
            }
            "group" if path.len() < MAX_DEPTH => {
                if let Some(group) = self.at(&path) {
                    group.groups.push(Self {
                        // A subgroup is most often the other aggregator: an OR inside an AND.
                        any: !group.any,
                        conditions: vec![Condition::blank(true)],
                        groups: Vec::new(),
                    });
                }
            }
            "drop" => {
                if let Some((last, parent)) = path.split_last()
                    && let Some(group) = self.at(parent)
                    && *last >= 1
                    && *last <= group.groups.len()
                {
                    group.groups.remove(*last - 1);
                }
            }
            _ => {}
        }
    }

    /// Conditions that are filled in, in this group and below.
    pub fn count(&self) -> usize {
        self.conditions.iter().filter(|c| !c.is_blank()).count()
            + self.groups.iter().map(Self::count).sum::<usize>()
    }

    /// The condition tree, each filled-in condition made by `leaf` (which checks it); a group
    /// of one item is that item, an empty one nothing.
    pub fn tree(
        &self,
        leaf: &dyn Fn(&Condition) -> Result<Json, String>,
    ) -> Result<Option<Json>, String> {
        let mut items = Vec::new();
        for condition in self.conditions.iter().filter(|c| !c.is_blank()) {
            items.push(leaf(condition)?);
        }
        for group in &self.groups {
            if let Some(tree) = group.tree(leaf)? {
                items.push(tree);
            }
        }
        Ok(match items.len() {
            0 => None,
            1 => items.pop(),
            _ => Some(json!({
                "aggregator": if self.any { "or" } else { "and" },
                "conditions": items,
            })),
        })
    }

    /// The builder's lines, in the order drawn; conditions are numbered from 1.
    pub fn items(&self) -> Vec<Item> {
        let mut out = Vec::new();
        let mut n = 0;
        self.walk(&[], &mut n, &mut out);
        out
    }

    fn walk(&self, path: &[usize], n: &mut usize, out: &mut Vec<Item>) {
        let text = path_text(path);
        let dom = text.replace('.', "-");
        let item = |kind| Item {
            kind,
            path: text.clone(),
            dom: dom.clone(),
            depth: path.len(),
            any: self.any,
            title: if path.is_empty() {
                "All filters".to_owned()
            } else {
                format!("Group {}", text.trim_start_matches("r."))
            },
            removable: !path.is_empty(),
            nestable: path.len() < MAX_DEPTH,
            n: 0,
            field: String::new(),
            operator: String::new(),
            value: String::new(),
            fresh: false,
        };
        out.push(item("open"));
        for condition in &self.conditions {
            *n += 1;
            out.push(Item {
                n: *n,
                field: condition.field.clone(),
                operator: condition.operator.clone(),
                value: condition.value.clone(),
                fresh: condition.fresh,
                ..item("row")
            });
        }
        for (i, group) in self.groups.iter().enumerate() {
            let mut child = path.to_vec();
            child.push(i + 1);
            group.walk(&child, n, out);
        }
        out.push(item("close"));
    }

    /// The builder's fields as query pairs (filled-in conditions only), for links that keep a
    /// filter that does not read yet.
    pub fn form_pairs(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.count() == 0 {
            return out;
        }
        for item in self.items() {
            match item.kind {
                "open" => out.push((
                    format!("ga.{}", item.path),
                    if item.any { "or" } else { "and" }.to_owned(),
                )),
                "row" if !item.field.is_empty() => {
                    out.push((format!("c{}.f", item.n), item.field));
                    out.push((format!("c{}.o", item.n), item.operator));
                    out.push((format!("c{}.v", item.n), item.value));
                    out.push((format!("c{}.g", item.n), item.path));
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn plain(condition: &Condition) -> Result<Json, String> {
        Ok(
            json!({"field": condition.field, "operator": condition.operator, "value": condition.value}),
        )
    }

    #[test]
    fn an_or_group_inside_the_and_group_reads_from_the_form_and_back_from_its_tree() {
        let form = pairs(&[
            ("ga.r", "and"),
            ("c1.f", "status"),
            ("c1.o", "equal"),
            ("c1.v", "paid"),
            ("c1.g", "r"),
            ("c2.f", ""),
            ("c2.g", "r"),
            ("ga.r.1", "or"),
            ("c3.f", "total"),
            ("c3.o", "greater_than"),
            ("c3.v", "900"),
            ("c3.g", "r.1"),
            ("c4.f", "total"),
            ("c4.o", "less_than"),
            ("c4.v", "10"),
            ("c4.g", "r.1"),
        ]);
        let (group, error) = Group::from_pairs(&form);
        assert!(error.is_none());
        assert_eq!(group.count(), 3);
        let tree = group.tree(&plain).unwrap().unwrap();
        assert_eq!(
            tree,
            json!({"aggregator": "and", "conditions": [
                {"field": "status", "operator": "equal", "value": "paid"},
                {"aggregator": "or", "conditions": [
                    {"field": "total", "operator": "greater_than", "value": "900"},
                    {"field": "total", "operator": "less_than", "value": "10"},
                ]},
            ]})
        );
        let again = Group::from_pairs(&pairs(&[("filters", &tree.to_string())])).0;
        assert_eq!(again.tree(&plain).unwrap().unwrap(), tree);
        // The form written back reads as the same tree.
        let (from_links, _) = Group::from_pairs(&again.form_pairs());
        assert_eq!(from_links.tree(&plain).unwrap().unwrap(), tree);
    }

    #[test]
    fn buttons_add_and_remove_conditions_and_groups_within_the_depth() {
        let (group, _) = Group::from_pairs(&pairs(&[("fx", "group:r")]));
        assert_eq!(group.groups.len(), 1);
        assert!(group.groups[0].any, "a subgroup of an AND is an OR");
        assert!(group.groups[0].conditions[0].fresh);
        let (group, _) = Group::from_pairs(&pairs(&[("ga.r.1", "or"), ("fx", "row:r.1")]));
        assert_eq!(group.groups[0].conditions.len(), 1);
        let (group, _) = Group::from_pairs(&pairs(&[("ga.r.1.1", "and"), ("fx", "group:r.1.1")]));
        assert!(
            group.groups[0].groups[0].groups.is_empty(),
            "no third level"
        );
        let (group, _) = Group::from_pairs(&pairs(&[("ga.r.1", "or"), ("fx", "drop:r.1")]));
        assert!(group.groups.is_empty());
        let (group, _) = Group::from_pairs(&pairs(&[
            ("c1.f", "a"),
            ("c1.o", "present"),
            ("c2.f", "b"),
            ("c2.o", "present"),
            ("fx", "droprow:1"),
        ]));
        assert_eq!(group.count(), 1);
        assert_eq!(group.conditions[0].field, "b");
    }

    #[test]
    fn older_links_and_unreadable_trees() {
        let (group, error) =
            Group::from_pairs(&pairs(&[("ff", "status"), ("fo", "equal"), ("fv", "paid")]));
        assert!(error.is_none());
        assert_eq!(
            group.tree(&plain).unwrap().unwrap(),
            json!({"field": "status", "operator": "equal", "value": "paid"})
        );
        let (_, error) = Group::from_pairs(&pairs(&[("filters", "{\"aggregator\": 3}")]));
        assert!(error.is_some());
        assert_eq!(Group::from_pairs(&pairs(&[])).0.tree(&plain).unwrap(), None);
    }
}
