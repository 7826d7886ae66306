//! The power of a comparison: the smallest change each class of rows could have called.

use super::comparison::Comparison;
use super::side::{Entry, Name};
use crate::report::change::{better_direction, Better};
use crate::report::format::kind_rank;
use crate::results::csv::KIND_PREP;
use crate::results::pacing::host_paced;
use crate::stats::summary::quantile;
use std::collections::BTreeMap;

impl Comparison {
    /// What size of change each class of rows could have called: see [`PowerClass`].
    pub fn power(&self) -> Vec<PowerClass> {
        let mut classes: BTreeMap<(u8, Name, Name, &'static str), Vec<Option<f64>>> =
            BTreeMap::new();
        for m in &self.matched {
            let (b, n) = self.entries(m);
            // A metric of unknown direction (a prep's bytes) is `changed`, never a regression.
            if better_direction(&n.metric, &n.unit) == Better::Unknown {
                continue;
            }
            let pacing = pacing_of(b, n);
            classes
                .entry((kind_rank(&n.kind), n.kind.clone(), n.metric.clone(), pacing))
                .or_default()
                .push(m.smallest_callable_pct);
        }
        classes
            .into_iter()
            .map(|((_, kind, metric, pacing), smallest)| {
                PowerClass::of(kind.to_string(), metric.to_string(), pacing, &smallest)
            })
            .collect()
    }
}

/// Who paces a row: `host` (see [`host_paced`]), `GPU`, or `model` for the decode-step model's
/// rows, which mix both.
fn pacing_of(base: &Entry, new: &Entry) -> &'static str {
    if &*new.kind != KIND_PREP {
        "model"
    } else if host_paced(&base.arm, &base.metric) || host_paced(&new.arm, &new.metric) {
        "host"
    } else {
        "GPU"
    }
}

/// The power of one class of rows (kind, metric, who paces it): the smallest change its rows
/// could have called, its median and 90th percentile over the rows (type-7 quantiles,
/// [`quantile`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PowerClass {
    pub kind: String,
    pub metric: String,
    pub paced_by: &'static str,
    pub rows: usize,
    /// Rows without the intervals to call anything.
    pub without_interval: usize,
    pub median_pct: Option<f64>,
    pub p90_pct: Option<f64>,
}

impl PowerClass {
    fn of(kind: String, metric: String, paced_by: &'static str, smallest: &[Option<f64>]) -> Self {
        let values: Vec<f64> = smallest.iter().flatten().copied().collect();
        let at = |q: f64| quantile(&values, q);
        PowerClass {
            kind,
            metric,
            paced_by,
            rows: smallest.len(),
            without_interval: smallest.len() - values.len(),
            median_pct: at(0.5),
            p90_pct: at(0.9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{cell, wide};
    use crate::report::compare::compare_rows;
    use crate::results::csv::test_rows::row;

    #[test]
    fn power_is_given_per_class_of_rows() {
        let base = vec![
            cell("eager-sync", "step_us", 40.0, 8.0),
            wide(
                row("prep", "dsa_decode", "eager-sync", 8, "step_us", 40.0),
                4.0,
            ),
            cell("graph", "step_us", 10.0, 1.0),
            cell("graph", "bytes", 1e6, 0.0),
        ];
        let c = compare_rows(&base, &base, None, 2.0).unwrap();
        let power = c.power();
        let classes: Vec<(&str, &str, usize)> = power
            .iter()
            .map(|p| (p.metric.as_str(), p.paced_by, p.rows))
            .collect();
        assert_eq!(classes, [("step_us", "GPU", 1), ("step_us", "host", 2)]);
        let host = &power[1];
        assert!(host.median_pct.unwrap() < host.p90_pct.unwrap());
        assert!(c.matched.iter().all(|m| m.smallest_callable_pct.is_some()));
    }

    #[test]
    fn a_class_takes_the_type_7_median_and_p90_of_its_rows_with_an_interval() {
        let smallest = [Some(4.0), None, Some(1.0), Some(3.0), Some(2.0)];
        let class = super::PowerClass::of("prep".into(), "step_us".into(), "GPU", &smallest);
        assert_eq!((class.rows, class.without_interval), (5, 1));
        // Four values: the median lies between 2 and 3, the p90 at h = 2.7 between 3 and 4.
        assert_eq!(class.median_pct, Some(2.5));
        assert!((class.p90_pct.unwrap() - 3.7).abs() < 1e-12);
        let none = super::PowerClass::of("prep".into(), "step_us".into(), "GPU", &[None]);
        assert_eq!((none.median_pct, none.p90_pct), (None, None));
    }
}
