//! Aggregations: Count, Sum, Avg, Max and Min, optionally grouped by fields or by date periods.

use indexmap::IndexMap;

use crate::datasource::error::{Error, Result};
use crate::datasource::record::Value;
use crate::datasource::schema::{CollectionSchema, DataSourceSchema, PrimitiveType};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregationOperation {
    Count,
    Sum,
    Avg,
    Max,
    Min,
}

impl std::str::FromStr for AggregationOperation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "Count" | "count" => Self::Count,
            "Sum" | "sum" => Self::Sum,
            "Avg" | "avg" => Self::Avg,
            "Max" | "max" => Self::Max,
            "Min" | "min" => Self::Min,
            _ => {
                return Err(Error::validation(format!(
                    "Invalid aggregation operation: '{s}'"
                )));
            }
        })
    }
}

/// Date periods to group by. Periods are computed in the caller's timezone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DateOperation {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl DateOperation {
    pub const ALL: [DateOperation; 5] = [
        Self::Day,
        Self::Week,
        Self::Month,
        Self::Quarter,
        Self::Year,
    ];
}

impl std::str::FromStr for DateOperation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "Day" => Self::Day,
            "Week" => Self::Week,
            "Month" => Self::Month,
            "Quarter" => Self::Quarter,
            "Year" => Self::Year,
            _ => return Err(Error::validation(format!("Invalid time range: '{s}'"))),
        })
    }
}

/// One grouping: by a field (path), optionally bucketed by a date period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub field: String,
    pub operation: Option<DateOperation>,
}

/// An aggregation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregation {
    pub operation: AggregationOperation,
    /// The aggregated field; `None` for `Count(*)`.
    pub field: Option<String>,
    pub groups: Vec<Group>,
}

impl Aggregation {
    pub fn count() -> Self {
        Self {
            operation: AggregationOperation::Count,
            field: None,
            groups: Vec::new(),
        }
    }

    pub fn new(operation: AggregationOperation, field: Option<&str>) -> Self {
        Self {
            operation,
            field: field.map(str::to_owned),
            groups: Vec::new(),
        }
    }

    pub fn group_by(mut self, field: impl Into<String>, operation: Option<DateOperation>) -> Self {
        self.groups.push(Group {
            field: field.into(),
            operation,
        });
        self
    }

    /// The aggregated field must be a column (Number for Sum/Avg), groups must be groupable
    /// columns, and date operations need Date or Dateonly columns.
    pub fn validate(&self, collection: &CollectionSchema, schema: &DataSourceSchema) -> Result<()> {
        if let Some(field) = &self.field {
            let (_, column) = schema.resolve_column(collection, field)?;
            let numeric = column.column_type.primitive() == Some(PrimitiveType::Number);
            if matches!(
                self.operation,
                AggregationOperation::Sum | AggregationOperation::Avg
            ) && !numeric
            {
                return Err(Error::validation(format!(
                    "Cannot aggregate '{field}' with {:?}: the field is not a Number",
                    self.operation
                )));
            }
        } else if self.operation != AggregationOperation::Count {
            return Err(Error::validation(format!(
                "{:?} needs a field",
                self.operation
            )));
        }
        if !self.groups.is_empty() && !collection.aggregation.support_groups {
            return Err(Error::validation(
                "This collection does not support grouping",
            ));
        }
        for group in &self.groups {
            let (_, column) = schema.resolve_column(collection, &group.field)?;
            if !column.is_groupable {
                return Err(Error::validation(format!(
                    "The field '{}' is not groupable",
                    group.field
                )));
            }
            if let Some(op) = group.operation {
                let is_date = matches!(
                    column.column_type.primitive(),
                    Some(PrimitiveType::Date | PrimitiveType::Dateonly)
                );
                if !is_date {
                    return Err(Error::validation(format!(
                        "Cannot group '{}' by {op:?}: the field is not a date",
                        group.field
                    )));
                }
                if !collection
                    .aggregation
                    .supported_date_operations
                    .contains(&op)
                {
                    return Err(Error::validation(format!(
                        "Date operation {op:?} is not supported"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// One row of an aggregation result. Date groups are `Dateonly` values (the period's first day).
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateResult {
    pub value: Value,
    pub group: IndexMap<String, Value>,
}
