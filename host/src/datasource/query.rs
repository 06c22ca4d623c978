//! The query language of collections: operators, condition trees, filters, projections, sorts,
//! pages and aggregations.

mod aggregation;
mod condition_tree;
pub mod equivalence;
pub mod evaluate;
mod filter;
mod operator;
mod page;
mod projection;
pub mod search;
mod sort;

pub use aggregation::{AggregateResult, Aggregation, AggregationOperation, DateOperation, Group};
pub use condition_tree::{Aggregator, ConditionTree, Leaf};
pub use filter::Filter;
pub use operator::{Operator, ValueKind};
pub use page::Page;
pub use projection::Projection;
pub use sort::{Sort, SortClause};
