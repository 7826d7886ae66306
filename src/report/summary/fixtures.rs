//! Rows the summary's tests build their runs from.

use crate::results::csv::test_rows::row;
use crate::results::csv::{Row, KIND_PREP, KIND_STEP};

/// A DSpark step row of `arm` at bs 1.
pub(super) fn step(arm: &str, metric: &str, median: f64) -> Row {
    row(
        KIND_STEP,
        "dspark+dsa_target_verify",
        arm,
        1,
        metric,
        median,
    )
}

/// A DSA decode prep row's `step_us` of `arm` at bs 4.
pub(super) fn prep(arm: &str, median: f64) -> Row {
    row(KIND_PREP, "dsa_decode", arm, 4, "step_us", median)
}
