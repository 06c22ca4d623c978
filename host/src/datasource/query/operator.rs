//! Every filter operator of the agent, with its wire names and the column types it is allowed on.

use std::fmt;
use std::str::FromStr;

use crate::datasource::schema::{ColumnType, PrimitiveType};

macro_rules! operators {
    ($($name:ident),* $(,)?) => {
        /// A filter operator. PascalCase internally; snake_case on the wire (both are parsed).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Operator { $($name),* }

        impl Operator {
            pub const ALL: &'static [Operator] = &[$(Operator::$name),*];

            /// The PascalCase name.
            pub fn as_str(self) -> &'static str {
                match self { $(Operator::$name => stringify!($name)),* }
            }
        }
    };
}

operators!(
    Present,
    Blank,
    Missing,
    Equal,
    NotEqual,
    LessThan,
    GreaterThan,
    LessThanOrEqual,
    GreaterThanOrEqual,
    Match,
    Like,
    ILike,
    Contains,
    NotContains,
    IContains,
    NotIContains,
    LongerThan,
    ShorterThan,
    StartsWith,
    EndsWith,
    IStartsWith,
    IEndsWith,
    In,
    NotIn,
    IncludesAll,
    IncludesNone,
    Before,
    After,
    AfterXHoursAgo,
    BeforeXHoursAgo,
    Future,
    Past,
    PreviousMonthToDate,
    PreviousMonth,
    PreviousQuarterToDate,
    PreviousQuarter,
    PreviousWeekToDate,
    PreviousWeek,
    PreviousXDaysToDate,
    PreviousXDays,
    PreviousYearToDate,
    PreviousYear,
    Today,
    Yesterday,
);

/// What kind of value an operator takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// No value (`Present`, `Today`, …).
    None,
    /// A single value of the column's type.
    Single,
    /// A list of values of the column's type (`In`, `IncludesAll`, …).
    List,
    /// A number whatever the column type (`PreviousXDays`, `LongerThan`, …).
    Number,
    /// A pattern string (`Like`, `Match`, `Contains`, …).
    Pattern,
}

impl Operator {
    /// The snake_case wire name (`previous_x_days_to_date`).
    pub fn snake_case(self) -> String {
        let mut out = String::new();
        for (i, c) in self.as_str().chars().enumerate() {
            if c.is_ascii_uppercase() {
                if i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }

    pub fn value_kind(self) -> ValueKind {
        use Operator::*;
        match self {
            Present
            | Blank
            | Missing
            | Future
            | Past
            | Today
            | Yesterday
            | PreviousMonth
            | PreviousMonthToDate
            | PreviousQuarter
            | PreviousQuarterToDate
            | PreviousWeek
            | PreviousWeekToDate
            | PreviousYear
            | PreviousYearToDate => ValueKind::None,
            In | NotIn | IncludesAll | IncludesNone => ValueKind::List,
            PreviousXDays | PreviousXDaysToDate | AfterXHoursAgo | BeforeXHoursAgo | LongerThan
            | ShorterThan => ValueKind::Number,
            Match | Like | ILike | Contains | NotContains | IContains | NotIContains
            | StartsWith | EndsWith | IStartsWith | IEndsWith => ValueKind::Pattern,
            Equal | NotEqual | LessThan | GreaterThan | LessThanOrEqual | GreaterThanOrEqual
            | Before | After => ValueKind::Single,
        }
    }

    /// Operators whose meaning depends on "now" in the caller's timezone.
    pub fn is_time_relative(self) -> bool {
        use Operator::*;
        matches!(
            self,
            Future
                | Past
                | Today
                | Yesterday
                | PreviousMonth
                | PreviousMonthToDate
                | PreviousQuarter
                | PreviousQuarterToDate
                | PreviousWeek
                | PreviousWeekToDate
                | PreviousYear
                | PreviousYearToDate
                | PreviousXDays
                | PreviousXDaysToDate
                | AfterXHoursAgo
                | BeforeXHoursAgo
        )
    }

    /// Interval operators: those a Value chart compares with the previous period.
    pub fn is_interval(self) -> bool {
        self.is_time_relative()
            && !matches!(
                self,
                Operator::Future
                    | Operator::Past
                    | Operator::AfterXHoursAgo
                    | Operator::BeforeXHoursAgo
            )
    }

    /// Whether the agent allows this operator on this column type (§9.1 of the protocol notes).
    pub fn allowed_for(self, column_type: &ColumnType) -> bool {
        use Operator::*;
        const BASE: &[Operator] = &[Blank, Equal, Missing, NotEqual, Present];
        const ARRAY: &[Operator] = &[In, NotIn, IncludesAll, IncludesNone];
        const STRING: &[Operator] = &[
            Contains,
            NotContains,
            StartsWith,
            EndsWith,
            LongerThan,
            ShorterThan,
            Like,
            ILike,
            IContains,
            NotIContains,
            IStartsWith,
            IEndsWith,
            Match,
        ];
        const NUMBER: &[Operator] = &[GreaterThan, LessThan, GreaterThanOrEqual, LessThanOrEqual];
        const DATEONLY: &[Operator] = &[
            Today,
            Yesterday,
            PreviousXDaysToDate,
            PreviousWeek,
            PreviousWeekToDate,
            PreviousMonth,
            PreviousMonthToDate,
            PreviousQuarter,
            PreviousQuarterToDate,
            PreviousYear,
            PreviousYearToDate,
            Past,
            Future,
            PreviousXDays,
            Before,
            After,
            GreaterThan,
            LessThan,
            GreaterThanOrEqual,
            LessThanOrEqual,
        ];
        const DATE_EXTRA: &[Operator] = &[BeforeXHoursAgo, AfterXHoursAgo];
        // Beyond the agent's rules, what its capabilities list for SQL columns (derived by its
        // equivalence graph from the Sequelize operators), which Canopy also answers.
        const DATE_LISTS: &[Operator] = &[In, NotIn];
        const TIME: &[Operator] = &[LessThan, GreaterThan, LessThanOrEqual, GreaterThanOrEqual];

        let primitive = match column_type {
            // Arrays and composites take the base set plus the array operators.
            ColumnType::Array(_) | ColumnType::Composite(_) => {
                return BASE.contains(&self) || ARRAY.contains(&self);
            }
            ColumnType::Primitive(p) => *p,
        };
        if BASE.contains(&self) {
            return true;
        }
        match primitive {
            PrimitiveType::String => {
                ARRAY.contains(&self) || STRING.contains(&self) || NUMBER.contains(&self)
            }
            PrimitiveType::Number => ARRAY.contains(&self) || NUMBER.contains(&self),
            PrimitiveType::Dateonly | PrimitiveType::Date => {
                DATEONLY.contains(&self) || DATE_EXTRA.contains(&self) || DATE_LISTS.contains(&self)
            }
            PrimitiveType::Time => TIME.contains(&self),
            PrimitiveType::Binary
            | PrimitiveType::Enum
            | PrimitiveType::Json
            | PrimitiveType::Boolean
            | PrimitiveType::Uuid => ARRAY.contains(&self),
            PrimitiveType::Point => false,
        }
    }
}

impl Operator {
    /// Every operator in the agent's `allOperators` order, the order in which it lists a column's
    /// operators (capabilities, error messages): its schema sets are rebuilt by filtering it.
    pub const AGENT_ORDER: &'static [Operator] = {
        use Operator::*;
        &[
            Equal,
            NotEqual,
            LessThan,
            GreaterThan,
            LessThanOrEqual,
            GreaterThanOrEqual,
            Match,
            NotContains,
            NotIContains,
            LongerThan,
            ShorterThan,
            IncludesAll,
            IncludesNone,
            Today,
            Yesterday,
            PreviousMonth,
            PreviousQuarter,
            PreviousWeek,
            PreviousYear,
            PreviousMonthToDate,
            PreviousQuarterToDate,
            PreviousWeekToDate,
            PreviousXDaysToDate,
            PreviousXDays,
            PreviousYearToDate,
            Present,
            Blank,
            Missing,
            In,
            NotIn,
            StartsWith,
            EndsWith,
            Contains,
            IStartsWith,
            IEndsWith,
            IContains,
            Like,
            ILike,
            Before,
            After,
            AfterXHoursAgo,
            BeforeXHoursAgo,
            Future,
            Past,
        ]
    };

    /// These operators in [`Operator::AGENT_ORDER`].
    pub fn in_agent_order<'a>(operators: impl IntoIterator<Item = &'a Operator>) -> Vec<Operator> {
        let mut out: Vec<Operator> = operators.into_iter().copied().collect();
        out.sort_by_key(|op| Self::AGENT_ORDER.iter().position(|o| o == op));
        out
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Operator {
    type Err = String;

    /// Accepts PascalCase (`NotEqual`) and snake_case (`not_equal`), as the agent's parser does.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut pascal = String::with_capacity(s.len());
        let mut upper = true;
        for c in s.chars() {
            if c == '_' {
                upper = true;
            } else if upper {
                pascal.push(c.to_ascii_uppercase());
                upper = false;
            } else {
                pascal.push(c);
            }
        }
        Operator::ALL
            .iter()
            .copied()
            .find(|op| op.as_str() == pascal)
            .ok_or_else(|| format!("Unknown operator: '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_snake_and_pascal_case() {
        assert_eq!("not_equal".parse::<Operator>(), Ok(Operator::NotEqual));
        assert_eq!("NotEqual".parse::<Operator>(), Ok(Operator::NotEqual));
        assert_eq!("i_contains".parse::<Operator>(), Ok(Operator::IContains));
        assert_eq!(
            "previous_x_days_to_date".parse::<Operator>(),
            Ok(Operator::PreviousXDaysToDate)
        );
        assert!("nope".parse::<Operator>().is_err());
    }

    #[test]
    fn the_agent_order_holds_every_operator_once() {
        assert_eq!(Operator::AGENT_ORDER.len(), Operator::ALL.len());
        for op in Operator::ALL {
            assert!(Operator::AGENT_ORDER.contains(op), "{op}");
        }
        assert_eq!(
            Operator::in_agent_order(&[Operator::Present, Operator::In, Operator::Equal]),
            [Operator::Equal, Operator::Present, Operator::In]
        );
    }

    #[test]
    fn snake_case_round_trips_for_every_operator() {
        for op in Operator::ALL {
            assert_eq!(op.snake_case().parse::<Operator>(), Ok(*op), "{op}");
        }
        assert_eq!(Operator::PreviousXDays.snake_case(), "previous_x_days");
        assert_eq!(Operator::ILike.snake_case(), "i_like");
    }

    #[test]
    fn dates_take_lists_and_strings_take_comparisons_as_the_agent_lists_them() {
        let dateonly = ColumnType::Primitive(PrimitiveType::Dateonly);
        assert!(Operator::In.allowed_for(&dateonly));
        assert!(Operator::Today.allowed_for(&dateonly));
        assert!(Operator::BeforeXHoursAgo.allowed_for(&dateonly));
        assert!(!Operator::Like.allowed_for(&dateonly));
        let string = ColumnType::Primitive(PrimitiveType::String);
        assert!(Operator::Like.allowed_for(&string));
        assert!(Operator::LessThanOrEqual.allowed_for(&string));
        assert!(!Operator::Today.allowed_for(&string));
        assert!(!Operator::GreaterThan.allowed_for(&ColumnType::Primitive(PrimitiveType::Boolean)));
    }
}
