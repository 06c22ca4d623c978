//! Filters: a condition tree plus search, segment, sort and page.

use super::condition_tree::ConditionTree;
use super::page::Page;
use super::sort::Sort;

/// What a list, aggregate, update or delete applies to. Sort and page only matter to `list`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub condition_tree: Option<ConditionTree>,
    /// Free-text search; blank means none.
    pub search: Option<String>,
    /// Also search the columns of first-level to-one relations.
    pub search_extended: bool,
    /// A segment name; must be one of the collection's segments.
    pub segment: Option<String>,
    pub sort: Sort,
    pub page: Option<Page>,
}

impl Filter {
    pub fn new(condition_tree: Option<ConditionTree>) -> Self {
        Self {
            condition_tree,
            ..Self::default()
        }
    }

    pub fn with_sort(mut self, sort: Sort) -> Self {
        self.sort = sort;
        self
    }

    pub fn with_page(mut self, page: Page) -> Self {
        self.page = Some(page);
        self
    }

    /// The search text, when it is not blank.
    pub fn search_text(&self) -> Option<&str> {
        self.search
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// This filter further restricted by `tree`.
    pub fn and(mut self, tree: Option<ConditionTree>) -> Self {
        self.condition_tree = ConditionTree::intersect([self.condition_tree.take(), tree]);
        self
    }
}
