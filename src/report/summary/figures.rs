//! One figure of a cell as text, shared by several sections and by `read_paths`: a change
//! with its interval, a reading arm's read cost, and the difference of two medians with a
//! MOVER interval.

use super::index::Index;
use crate::report::change::Change;
use crate::report::format::{fmt_interval, fmt_num, fmt_pct, DEVICE_ARM};
use crate::results::csv::{CellKey, Row};

/// "-15.1% [-15.2, -15.0]", or "-15.1% [n/a]" without an interval.
pub(crate) fn change_text(change: Option<Change>, pct: f64) -> String {
    match change {
        Some(c) => format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct)),
        None => format!("{} [n/a]", fmt_pct(pct)),
    }
}

/// What a reading arm's read costs in a prep cell, "17.2 [16.9, 17.5]" µs: the sweep's
/// paired `read_cost_us`, else the arm's step time − eager-device's with its MOVER interval.
pub(crate) fn read_cost(index: &Index, reader: &CellKey) -> Option<String> {
    if let Some(cost) = index.get(reader, "read_cost_us") {
        return Some(format!(
            "{} [{}, {}]",
            fmt_num(cost.median),
            fmt_num(cost.ci_lo),
            fmt_num(cost.ci_hi)
        ));
    }
    let device = reader.with_arm(DEVICE_ARM);
    let (d, lo, hi) = difference(
        index.get(reader, "step_us")?,
        index.get(&device, "step_us")?,
    );
    Some(format!("{} [{}, {}]", fmt_num(d), fmt_num(lo), fmt_num(hi)))
}

/// `a − b` with a 95% interval by MOVER for a difference of independent estimates; NaN
/// bounds when either side has no interval (too few samples).
pub(super) fn difference(a: &Row, b: &Row) -> (f64, f64, f64) {
    let d = a.median - b.median;
    if ![a.ci_lo, a.ci_hi, b.ci_lo, b.ci_hi]
        .iter()
        .all(|v| v.is_finite())
    {
        return (d, f64::NAN, f64::NAN);
    }
    let below = |r: &Row| (r.median - r.ci_lo).max(0.0);
    let above = |r: &Row| (r.ci_hi - r.median).max(0.0);
    (
        d,
        d - below(a).hypot(above(b)),
        d + above(a).hypot(below(b)),
    )
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::report::summary::fixtures::prep;

    #[test]
    fn host_read_difference_combines_both_intervals() {
        let mut sync = prep("eager-sync", 40.0);
        (sync.ci_lo, sync.ci_hi) = (39.0, 42.0);
        let mut device = prep("eager-device", 25.0);
        (device.ci_lo, device.ci_hi) = (24.0, 25.5);
        let (d, lo, hi) = difference(&sync, &device);
        assert_eq!(d, 15.0);
        // lower: sync's lower reach (1.0) with device's upper reach (0.5)
        assert!((lo - (15.0 - 1.25f64.sqrt())).abs() < 1e-12, "{lo}");
        // upper: sync's upper reach (2.0) with device's lower reach (1.0)
        assert!((hi - (15.0 + 5.0f64.sqrt())).abs() < 1e-12, "{hi}");
        device.ci_lo = f64::NAN;
        let (d, lo, hi) = difference(&sync, &device);
        assert_eq!(d, 15.0);
        assert!(
            lo.is_nan() && hi.is_nan(),
            "no interval on one side: none on the difference"
        );
    }
}
