//! The change between two rows and its verdict, shared by `compare` and `summary.md`'s
//! arm-against-arm tables (the method is in [`super::compare`]'s module docs).

use crate::results::csv::{Row, STEP_RATIO_VS_EAGER_SYNC};

/// The change in percent within which `compare` calls a cell `same` unless told otherwise;
/// `summary.md`'s arm-against-arm verdicts use it too.
pub const DEFAULT_THRESHOLD_PCT: f64 = 2.0;

/// Relative change of NEW's median over BASE's, in percent, with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub pct: f64,
    pub lo_pct: f64,
    pub hi_pct: f64,
}

/// Which way a change moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    Up,
    Down,
}

impl Moved {
    /// The call on a time (lower is better) that moved this way: up is slower.
    pub fn for_time(self) -> Verdict {
        match self {
            Moved::Up => Verdict::Slower,
            Moved::Down => Verdict::Faster,
        }
    }
}

impl Change {
    /// Which way the whole interval lies beyond ±`threshold_pct`; `None` while any of it is
    /// within (or NaN).
    pub fn beyond(&self, threshold_pct: f64) -> Option<Moved> {
        if self.lo_pct > threshold_pct {
            Some(Moved::Up)
        } else if self.hi_pct < -threshold_pct {
            Some(Moved::Down)
        } else {
            None
        }
    }
}

/// The change a ratio row (NEW over BASE formed inside each round, such as
/// `step_ratio_vs_eager_sync`) states: its median and interval less 1, in percent. `None`
/// without an interval.
pub fn change_of_ratio(row: &Row) -> Option<Change> {
    let pct = |x: f64| (x - 1.0) * 100.0;
    [row.median, row.ci_lo, row.ci_hi]
        .iter()
        .all(|v| v.is_finite())
        .then(|| Change {
            pct: pct(row.median),
            lo_pct: pct(row.ci_lo),
            hi_pct: pct(row.ci_hi),
        })
}

/// NEW/BASE − 1 in percent, interval by MOVER on the log scale (see the module docs).
/// `None` when a median or interval bound is not positive: a ratio means nothing there.
pub fn relative_change(base: &Row, new: &Row) -> Option<Change> {
    ratio_change(&[new], &[base])
}

/// Π numerators / Π denominators − 1 in percent, of independent medians, with its interval
/// by MOVER on the log scale: each term's reach towards a bound adds in quadrature.
pub(crate) fn ratio_change(numerators: &[&Row], denominators: &[&Row]) -> Option<Change> {
    let log_bounds = |row: &Row| -> Option<(f64, f64, f64)> {
        // No interval (too few samples: NaN bounds) means no change can be called; checked
        // before min/max, which would quietly replace a NaN bound by the median.
        if !(row.ci_lo.is_finite() && row.ci_hi.is_finite()) {
            return None;
        }
        // A median outside its own interval would make a negative width; widen to hold it.
        let (lo, hi) = (row.ci_lo.min(row.median), row.ci_hi.max(row.median));
        let all_positive = [lo, row.median, hi]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0);
        all_positive.then(|| (lo.ln(), row.median.ln(), hi.ln()))
    };
    let (mut log_ratio, mut down, mut up) = (0.0, 0.0, 0.0);
    let terms = numerators.iter().map(|r| (r, true));
    for (row, numerator) in terms.chain(denominators.iter().map(|r| (r, false))) {
        let (lo, mid, hi) = log_bounds(row)?;
        // A denominator's high end pulls the ratio down, its low end up.
        let (below, above) = if numerator {
            (mid - lo, hi - mid)
        } else {
            (hi - mid, mid - lo)
        };
        log_ratio += if numerator { mid } else { -mid };
        down += below * below;
        up += above * above;
    }
    let (lower, upper) = (log_ratio - down.sqrt(), log_ratio + up.sqrt());
    let pct = |log: f64| log.exp_m1() * 100.0;
    Some(Change {
        pct: pct(log_ratio),
        lo_pct: pct(lower),
        hi_pct: pct(upper),
    })
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    Unknown,
}

pub fn better_direction(metric: &str, unit: &str) -> Better {
    if is_time(metric, unit) || metric == "floor_multiple" || metric == STEP_RATIO_VS_EAGER_SYNC {
        Better::Lower
    } else if matches!(unit, "tok/s" | "GB/s")
        || metric == "occupancy"
        || metric.ends_with("_tok_s")
        || metric == "gb_s"
    {
        Better::Higher
    } else {
        Better::Unknown
    }
}

pub(crate) fn is_time(metric: &str, unit: &str) -> bool {
    matches!(unit, "us" | "ns" | "ms" | "s") || metric.ends_with("_us")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Slower,
    Uncertain,
    Changed,
    /// A floor multiple that moved because the floor it is read against moved (the
    /// machine), while the arm's own time did not move that way: no call on the code.
    FloorMoved,
    Faster,
    Same,
}

impl Verdict {
    /// As tables show it: a call of faster or slower in bold.
    pub fn marked(self) -> String {
        match self {
            Verdict::Slower | Verdict::Faster => format!("**{}**", self.as_str()),
            v => v.as_str().to_string(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Uncertain => "uncertain",
            Verdict::Changed => "changed",
            Verdict::FloorMoved => "floor moved",
        }
    }
}

/// The verdict of one cell and metric. Without a change interval (a zero or negative
/// median) identical medians are `same` and anything else is `uncertain`.
pub fn judge(base: &Row, new: &Row, threshold_pct: f64) -> (Option<Change>, Verdict) {
    let Some(change) = relative_change(base, new) else {
        let verdict = if base.median == new.median {
            Verdict::Same
        } else {
            Verdict::Uncertain
        };
        return (None, verdict);
    };
    let better = better_direction(&new.metric, &new.unit);
    (
        Some(change),
        verdict_on_change(&change, better, threshold_pct),
    )
}

/// The verdict on a change: `same` inside ±threshold, `faster` / `slower` (or `changed`
/// for an unknown direction) wholly beyond it, `uncertain` otherwise.
pub fn verdict_on_change(change: &Change, better: Better, threshold_pct: f64) -> Verdict {
    let t = threshold_pct;
    if change.lo_pct >= -t && change.hi_pct <= t {
        return Verdict::Same;
    }
    match (better, change.beyond(t)) {
        (_, None) => Verdict::Uncertain,
        (Better::Higher, Some(Moved::Up)) | (Better::Lower, Some(Moved::Down)) => Verdict::Faster,
        (Better::Higher, Some(Moved::Down)) | (Better::Lower, Some(Moved::Up)) => Verdict::Slower,
        (Better::Unknown, Some(_)) => Verdict::Changed,
    }
}
