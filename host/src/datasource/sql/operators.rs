//! The operators the SQL datasource answers for each column type. Operators of §9.2 that have no
//! native SQL form (time operators, `Blank`, `Contains`…) are lowered before SQL is written, so the
//! collection advertises the whole set and every database answers all of it.
//!
//! Each list holds at least what the Node agent's capabilities list for a SQL column of the type
//! (the Sequelize operators and every operator its equivalence graph derives from them); the
//! extras are in `docs/compatibility.md`.

use std::collections::BTreeSet;

use crate::datasource::query::Operator;
use crate::datasource::schema::{ColumnType, PrimitiveType};

/// Every operator a SQL collection accepts on a column of this type.
pub fn supported(column_type: &ColumnType) -> BTreeSet<Operator> {
    use Operator::*;
    let presence = [Present, Missing, Blank];
    let ops: Vec<Operator> = match column_type {
        // In and NotIn: the agent derives them from Equal and NotEqual.
        ColumnType::Array(_) => vec![Equal, NotEqual, In, NotIn, IncludesAll, IncludesNone],
        ColumnType::Composite(_) => vec![],
        ColumnType::Primitive(p) => match p {
            // Json, Point: presence only, as the agent (equality on JSON differs per database).
            PrimitiveType::Json | PrimitiveType::Point => vec![],
            PrimitiveType::Boolean
            | PrimitiveType::Uuid
            | PrimitiveType::Enum
            | PrimitiveType::Binary => {
                vec![Equal, NotEqual, In, NotIn]
            }
            PrimitiveType::Number => {
                vec![
                    Equal,
                    NotEqual,
                    In,
                    NotIn,
                    LessThan,
                    GreaterThan,
                    LessThanOrEqual,
                    GreaterThanOrEqual,
                ]
            }
            PrimitiveType::String => vec![
                Equal,
                NotEqual,
                In,
                NotIn,
                // In code point order on every database (see the SQL builder).
                LessThan,
                GreaterThan,
                LessThanOrEqual,
                GreaterThanOrEqual,
                Like,
                ILike,
                Contains,
                NotContains,
                IContains,
                NotIContains,
                StartsWith,
                EndsWith,
                IStartsWith,
                IEndsWith,
                LongerThan,
                ShorterThan,
                Match,
            ],
            PrimitiveType::Time => {
                vec![
                    Equal,
                    NotEqual,
                    LessThan,
                    GreaterThan,
                    LessThanOrEqual,
                    GreaterThanOrEqual,
                ]
            }
            PrimitiveType::Date | PrimitiveType::Dateonly => {
                vec![
                    Equal,
                    NotEqual,
                    In,
                    NotIn,
                    LessThan,
                    GreaterThan,
                    LessThanOrEqual,
                    GreaterThanOrEqual,
                    Before,
                    After,
                    Today,
                    Yesterday,
                    Past,
                    Future,
                    PreviousWeek,
                    PreviousWeekToDate,
                    PreviousMonth,
                    PreviousMonthToDate,
                    PreviousQuarter,
                    PreviousQuarterToDate,
                    PreviousYear,
                    PreviousYearToDate,
                    PreviousXDays,
                    PreviousXDaysToDate,
                    // On a Dateonly column: before (after) the local date of that instant.
                    BeforeXHoursAgo,
                    AfterXHoursAgo,
                ]
            }
        },
    };
    presence
        .into_iter()
        .chain(ops)
        .filter(|op| op.allowed_for(column_type))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_operator_is_allowed_for_its_type() {
        use PrimitiveType::*;
        for p in [
            String, Number, Boolean, Date, Dateonly, Time, Enum, Json, Uuid, Point, Binary,
        ] {
            let ty = ColumnType::Primitive(p);
            assert!(supported(&ty).contains(&Operator::Present), "{p}");
        }
        let dates = supported(&ColumnType::Primitive(Date));
        assert!(dates.contains(&Operator::PreviousXDaysToDate));
        assert!(dates.contains(&Operator::BeforeXHoursAgo));
        assert!(supported(&ColumnType::Primitive(Dateonly)).contains(&Operator::BeforeXHoursAgo));
        assert!(
            supported(&ColumnType::Array(Box::new(ColumnType::Primitive(Number))))
                .contains(&Operator::IncludesAll)
        );
    }
}
