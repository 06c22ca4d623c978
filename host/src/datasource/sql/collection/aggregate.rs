//! Aggregate rows become results. On PostgreSQL the database groups, orders and limits; on
//! MySQL and SQLite date groups come back as UTC 15-minute buckets (or days) and are merged
//! here into periods of the caller's timezone, then ordered by value and limited.

use std::cmp::Ordering;

use bigdecimal::{BigDecimal, ToPrimitive, Zero};
use chrono::{DateTime, Datelike, Duration, NaiveDate};
use chrono_tz::Tz;
use indexmap::IndexMap;

use crate::datasource::query::{AggregateResult, AggregationOperation, DateOperation};
use crate::datasource::record::Value;
use crate::datasource::sql::build::{AggregatePlan, AggregateValue, BUCKET_SECONDS, GroupKind};
use crate::datasource::sql::decode::{number_from_decimal, number_from_f64};

/// The results of an aggregation from its decoded rows.
pub(crate) fn results(
    plan: &AggregatePlan,
    rows: Vec<Vec<Value>>,
    limit: Option<u64>,
    tz: Tz,
) -> Vec<AggregateResult> {
    let value_columns = if plan.value == AggregateValue::SumAndCount {
        2
    } else {
        1
    };
    if !plan.merge {
        return rows
            .into_iter()
            .map(|mut row| {
                let groups = row.split_off(value_columns.min(row.len()));
                AggregateResult {
                    value: row.into_iter().next().unwrap_or(Value::Null),
                    group: plan
                        .groups
                        .iter()
                        .map(|g| g.field.clone())
                        .zip(groups)
                        .collect(),
                }
            })
            .collect();
    }
    let mut merged: IndexMap<String, (IndexMap<String, Value>, Accumulator)> = IndexMap::new();
    for mut row in rows {
        let groups = row.split_off(value_columns.min(row.len()));
        let group: IndexMap<String, Value> = plan
            .groups
            .iter()
            .zip(groups)
            .map(|(g, value)| {
                let value = match g.kind {
                    GroupKind::Value => value,
                    GroupKind::Bucket(period) => bucket_period(&value, period, tz),
                    GroupKind::Day(period) => match value {
                        Value::Dateonly(d) => Value::Dateonly(period_start(d, period)),
                        Value::Date(d) => Value::Dateonly(period_start(d.date_naive(), period)),
                        other => other,
                    },
                };
                (g.field.clone(), value)
            })
            .collect();
        let key = format!("{:?}", group.values().collect::<Vec<_>>());
        let entry = merged
            .entry(key)
            .or_insert_with(|| (group, Accumulator::new(plan.operation)));
        entry.1.add(&row);
    }
    let mut out: Vec<AggregateResult> = merged
        .into_values()
        .map(|(group, acc)| AggregateResult {
            value: acc.finish(),
            group,
        })
        .collect();
    // Value descending, NULL last, as the databases order it.
    out.sort_by(|a, b| match (a.value.is_null(), b.value.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => b.value.compare(&a.value),
    });
    if let Some(limit) = limit {
        out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    out
}

/// The first day of the period holding the bucket's local date.
fn bucket_period(value: &Value, period: DateOperation, tz: Tz) -> Value {
    let Value::Int(bucket) = value else {
        return Value::Null;
    };
    let Some(instant) = bucket
        .checked_mul(BUCKET_SECONDS)
        .and_then(|s| DateTime::from_timestamp(s, 0))
    else {
        return Value::Null;
    };
    Value::Dateonly(period_start(
        instant.with_timezone(&tz).date_naive(),
        period,
    ))
}

/// The first day of the period (ISO weeks start on Monday).
pub(crate) fn period_start(date: NaiveDate, period: DateOperation) -> NaiveDate {
    let first = |year, month| NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(date);
    match period {
        DateOperation::Day => date,
        DateOperation::Week => {
            // Checked: a date at the start of chrono's range has no Monday before it.
            date.checked_sub_signed(Duration::days(i64::from(
                date.weekday().num_days_from_monday(),
            )))
            .unwrap_or(date)
        }
        DateOperation::Month => first(date.year(), date.month()),
        DateOperation::Quarter => first(date.year(), (date.month0() / 3) * 3 + 1),
        DateOperation::Year => first(date.year(), 1),
    }
}

/// Merges partial aggregates of buckets into one period.
enum Accumulator {
    Count(i64),
    Sum(Option<BigDecimal>),
    Avg(BigDecimal, i64),
    Min(Value),
    Max(Value),
}

fn decimal(value: &Value) -> Option<BigDecimal> {
    match value {
        Value::Int(i) => Some(BigDecimal::from(*i)),
        Value::Float(f) => f.to_string().parse().ok(),
        Value::Decimal(d) => Some(d.clone()),
        _ => None,
    }
}

impl Accumulator {
    fn new(operation: AggregationOperation) -> Self {
        match operation {
            AggregationOperation::Count => Self::Count(0),
            AggregationOperation::Sum => Self::Sum(None),
            AggregationOperation::Avg => Self::Avg(BigDecimal::zero(), 0),
            AggregationOperation::Min => Self::Min(Value::Null),
            AggregationOperation::Max => Self::Max(Value::Null),
        }
    }

    fn add(&mut self, values: &[Value]) {
        let first = values.first().unwrap_or(&Value::Null);
        match self {
            Self::Count(n) => *n += first.as_f64().map_or(0, |f| f as i64),
            Self::Sum(total) => {
                if let Some(d) = decimal(first) {
                    *total = Some(total.take().unwrap_or_default() + d);
                }
            }
            Self::Avg(sum, count) => {
                if let Some(d) = decimal(first) {
                    *sum += d;
                }
                *count += values
                    .get(1)
                    .and_then(Value::as_f64)
                    .map_or(0, |f| f as i64);
            }
            Self::Min(current) => {
                if !first.is_null()
                    && (current.is_null() || first.compare(current) == Ordering::Less)
                {
                    *current = first.clone();
                }
            }
            Self::Max(current) => {
                if !first.is_null()
                    && (current.is_null() || first.compare(current) == Ordering::Greater)
                {
                    *current = first.clone();
                }
            }
        }
    }

    fn finish(self) -> Value {
        match self {
            Self::Count(n) => Value::Int(n),
            Self::Sum(total) => total.map_or(Value::Null, |d| number_from_decimal(&d)),
            Self::Avg(_, 0) => Value::Null,
            Self::Avg(sum, count) => {
                let avg = sum.to_f64().unwrap_or(f64::NAN) / count as f64;
                number_from_f64(avg)
            }
            Self::Min(v) | Self::Max(v) => match v {
                Value::Decimal(d) => number_from_decimal(&d),
                Value::Float(f) => number_from_f64(f),
                other => other,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default()
    }

    #[test]
    fn periods_start_on_their_first_day() {
        let d = date(2024, 8, 15);
        assert_eq!(period_start(d, DateOperation::Day), d);
        assert_eq!(period_start(d, DateOperation::Week), date(2024, 8, 12));
        assert_eq!(period_start(d, DateOperation::Month), date(2024, 8, 1));
        assert_eq!(period_start(d, DateOperation::Quarter), date(2024, 7, 1));
        assert_eq!(period_start(d, DateOperation::Year), date(2024, 1, 1));
        assert_eq!(
            period_start(date(2024, 1, 7), DateOperation::Week),
            date(2024, 1, 1)
        );
    }

    #[test]
    fn buckets_land_in_the_local_day() {
        // 2024-03-31 22:30 UTC is 1 April 00:30 in Paris.
        let bucket = DateTime::parse_from_rfc3339("2024-03-31T22:30:00Z")
            .map_or(0, |d| d.timestamp())
            / BUCKET_SECONDS;
        let paris = bucket_period(
            &Value::Int(bucket),
            DateOperation::Day,
            chrono_tz::Europe::Paris,
        );
        assert_eq!(paris, Value::Dateonly(date(2024, 4, 1)));
        let utc = bucket_period(&Value::Int(bucket), DateOperation::Day, chrono_tz::UTC);
        assert_eq!(utc, Value::Dateonly(date(2024, 3, 31)));
    }

    #[test]
    fn partial_aggregates_merge() {
        let mut avg = Accumulator::new(AggregationOperation::Avg);
        avg.add(&[Value::Int(10), Value::Int(4)]);
        avg.add(&[Value::Float(5.0), Value::Int(1)]);
        assert_eq!(avg.finish(), Value::Int(3));
        let mut sum = Accumulator::new(AggregationOperation::Sum);
        sum.add(&[Value::Null]);
        assert_eq!(sum.finish(), Value::Null);
        let mut max = Accumulator::new(AggregationOperation::Max);
        max.add(&[Value::from("b")]);
        max.add(&[Value::from("c")]);
        max.add(&[Value::Null]);
        assert_eq!(max.finish(), Value::from("c"));
    }
}
