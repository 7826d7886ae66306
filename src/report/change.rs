//! The change between two rows and its verdict, shared by `compare` and `summary.md`'s
//! arm-against-arm tables (the method is in [`super::compare`]'s module docs), and the
//! smallest change a pair of intervals could call.

use crate::results::csv::{Row, STEP_RATIO_VS_EAGER_SYNC};

/// A median with its 95% interval: what a change is formed from (a results row, or the
/// slimmer form `compare` keeps of one).
pub trait Interval {
    fn median(&self) -> f64;
    /// The interval's bounds; NaN where the row has none.
    fn bounds(&self) -> (f64, f64);

    /// Whether both bounds are numbers: a row without them can call no change.
    fn has_interval(&self) -> bool {
        let (lo, hi) = self.bounds();
        lo.is_finite() && hi.is_finite()
    }
}

impl Interval for Row {
    fn median(&self) -> f64 {
        self.median
    }

    fn bounds(&self) -> (f64, f64) {
        (self.ci_lo, self.ci_hi)
    }
}

/// The change in percent within which `compare` calls a cell `same` unless told otherwise;
/// `summary.md`'s arm-against-arm verdicts use it too.
pub const DEFAULT_THRESHOLD_PCT: f64 = 2.0;

/// Relative change of NEW's median over BASE's, in percent, with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
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

impl Change {
    /// Whether the whole interval lies within ±`threshold_pct`: the change is shown to be
    /// no larger than that.
    pub fn within(&self, threshold_pct: f64) -> bool {
        self.lo_pct >= -threshold_pct && self.hi_pct <= threshold_pct
    }

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
pub fn relative_change<T: Interval>(base: &T, new: &T) -> Option<Change> {
    ratio_change(&[new], &[base])
}

/// `(ln lo, ln median, ln hi)` of a row with a positive median and interval; `None` without
/// an interval (too few samples: NaN bounds), checked before min/max, which would quietly
/// replace a NaN bound by the median.
fn log_bounds(row: &dyn Interval) -> Option<(f64, f64, f64)> {
    if !row.has_interval() {
        return None;
    }
    let (ci_lo, ci_hi) = row.bounds();
    let median = row.median();
    // A median outside its own interval would make a negative width; widen to hold it.
    let (lo, hi) = (ci_lo.min(median), ci_hi.max(median));
    let all_positive = [lo, median, hi].iter().all(|v| v.is_finite() && *v > 0.0);
    all_positive.then(|| (lo.ln(), median.ln(), hi.ln()))
}

/// Π numerators / Π denominators − 1 in percent, of independent medians, with its interval
/// by MOVER on the log scale: each term's reach towards a bound adds in quadrature.
pub(crate) fn ratio_change(
    numerators: &[&dyn Interval],
    denominators: &[&dyn Interval],
) -> Option<Change> {
    let (mut log_ratio, mut down, mut up) = (0.0, 0.0, 0.0);
    let terms = numerators.iter().map(|r| (r, true));
    for (row, numerator) in terms.chain(denominators.iter().map(|r| (r, false))) {
        let (lo, mid, hi) = log_bounds(*row)?;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    Slower,
    /// NEW lost the interval BASE has (too few samples or rounds): nothing can be called, and
    /// `compare` fails on it unless `--allow-missing`.
    Broken,
    Faster,
    Changed,
    Uncertain,
    Same,
}

impl Verdict {
    /// Every verdict, in the order reports count them.
    pub const ALL: [Verdict; 6] = [
        Verdict::Slower,
        Verdict::Broken,
        Verdict::Faster,
        Verdict::Changed,
        Verdict::Uncertain,
        Verdict::Same,
    ];

    /// As tables show it: a call of faster or slower, and a broken row, in bold.
    pub fn marked(self) -> String {
        match self {
            Verdict::Slower | Verdict::Faster | Verdict::Broken => {
                format!("**{}**", self.as_str())
            }
            v => v.as_str().to_string(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Broken => "broken",
            Verdict::Uncertain => "uncertain",
            Verdict::Changed => "changed",
        }
    }

    /// A call of faster or slower.
    pub fn is_call(self) -> bool {
        matches!(self, Verdict::Slower | Verdict::Faster)
    }
}

/// The verdict of one cell and metric improving `better`. Without a change interval (a zero
/// or negative median, or no interval) identical medians are `same` and anything else is
/// `uncertain`.
pub fn judge<T: Interval>(
    base: &T,
    new: &T,
    better: Better,
    threshold_pct: f64,
) -> (Option<Change>, Verdict) {
    let Some(change) = relative_change(base, new) else {
        let verdict = if base.median() == new.median() {
            Verdict::Same
        } else {
            Verdict::Uncertain
        };
        return (None, verdict);
    };
    (
        Some(change),
        verdict_on_change(&change, better, threshold_pct),
    )
}

/// The smallest change, in percent, that NEW could show over BASE and still be called worse
/// (slower) beyond ±`threshold_pct`, were NEW's interval as wide (on the log scale) as it is:
/// the power of this pair of rows. For a metric where lower is better (or of unknown
/// direction) that is a rise, `(1 + t) · e^√(NEW's reach down² + BASE's reach up²) − 1`; where
/// higher is better a fall of `1 − (1 − t) · e^−√(NEW's reach up² + BASE's reach down²)`, given
/// as its size. `None` without intervals or positive values.
pub fn smallest_callable_pct<T: Interval>(
    base: &T,
    new: &T,
    better: Better,
    threshold_pct: f64,
) -> Option<f64> {
    let (b_lo, b_mid, b_hi) = log_bounds(base)?;
    let (n_lo, n_mid, n_hi) = log_bounds(new)?;
    let t = threshold_pct / 100.0;
    let pct = match better {
        Better::Higher => {
            let reach = (n_hi - n_mid).hypot(b_mid - b_lo);
            (1.0 - (1.0 - t) * (-reach).exp()) * 100.0
        }
        Better::Lower | Better::Unknown => {
            let reach = (n_mid - n_lo).hypot(b_hi - b_mid);
            ((1.0 + t) * reach.exp() - 1.0) * 100.0
        }
    };
    pct.is_finite().then_some(pct)
}

/// The verdict on a change: `same` inside ±threshold, `faster` / `slower` (or `changed`
/// for an unknown direction) wholly beyond it, `uncertain` otherwise.
pub fn verdict_on_change(change: &Change, better: Better, threshold_pct: f64) -> Verdict {
    let t = threshold_pct;
    if change.within(t) {
        return Verdict::Same;
    }
    match (better, change.beyond(t)) {
        (_, None) => Verdict::Uncertain,
        (Better::Higher, Some(Moved::Up)) | (Better::Lower, Some(Moved::Down)) => Verdict::Faster,
        (Better::Higher, Some(Moved::Down)) | (Better::Lower, Some(Moved::Up)) => Verdict::Slower,
        (Better::Unknown, Some(_)) => Verdict::Changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::results::csv::test_rows::row;

    /// A row with an explicit interval (measured in rounds, as a sweep's are).
    fn with_ci(metric: &str, median: f64, lo: f64, hi: f64) -> Row {
        let mut r = row("prep", "dsa_decode", "graph", 4, metric, median);
        (r.ci_lo, r.ci_hi) = (lo, hi);
        r
    }

    fn verdict_of(base: &Row, new: &Row) -> Verdict {
        judge(base, new, better_direction(&new.metric, &new.unit), 2.0).1
    }

    #[test]
    fn change_interval_is_mover_on_the_log_scale() {
        let base = with_ci("step_us", 100.0, 99.0, 101.0);
        let new = with_ci("step_us", 110.0, 109.0, 111.0);
        let c = relative_change(&base, &new).unwrap();
        assert!((c.pct - 10.0).abs() < 1e-9);
        // ln 1.1 ∓ hypot of the reaching log half-widths, worked by hand.
        assert!((c.lo_pct - 8.524).abs() < 0.005, "{c:?}");
        assert!((c.hi_pct - 11.498).abs() < 0.005, "{c:?}");
        // Narrower than the box [lo_new/hi_base, hi_new/lo_base] − 1.
        assert!(c.lo_pct > (109.0 / 101.0 - 1.0) * 100.0);
        assert!(c.hi_pct < (111.0 / 99.0 - 1.0) * 100.0);
    }

    #[test]
    fn change_is_undefined_without_positive_values_or_an_interval() {
        let zero = with_ci("gap_us", 0.0, 0.0, 0.5);
        let some = with_ci("gap_us", 5.0, 4.5, 5.5);
        assert!(relative_change(&zero, &some).is_none());
        assert_eq!(verdict_of(&zero, &some), Verdict::Uncertain);
        assert_eq!(verdict_of(&zero, &zero), Verdict::Same);
        let bare = with_ci("step_us", 5.0, f64::NAN, f64::NAN);
        assert!(!bare.has_interval() && some.has_interval());
        assert!(relative_change(&some, &bare).is_none());
        assert_eq!(verdict_of(&bare, &bare), Verdict::Same, "identical medians");
    }

    #[test]
    fn more_bandwidth_is_faster_and_bytes_only_change() {
        let base = with_ci("gb_s", 1000.0, 990.0, 1010.0);
        let new = with_ci("gb_s", 1500.0, 1480.0, 1520.0);
        assert_eq!(verdict_of(&base, &new), Verdict::Faster);
        assert_eq!(verdict_of(&new, &base), Verdict::Slower);
        let bytes = |b| with_ci("bytes", b, b, b);
        assert_eq!(verdict_of(&bytes(4e7), &bytes(4e7)), Verdict::Same);
        assert_eq!(verdict_of(&bytes(4e7), &bytes(5e7)), Verdict::Changed);
    }

    #[test]
    fn direction_follows_unit_and_metric() {
        assert_eq!(better_direction("step_us", "us"), Better::Lower);
        assert_eq!(
            better_direction(STEP_RATIO_VS_EAGER_SYNC, "x"),
            Better::Lower
        );
        assert_eq!(better_direction("gap_us", "us"), Better::Lower);
        assert_eq!(better_direction("floor_multiple", "x"), Better::Lower);
        assert_eq!(
            better_direction("throughput_tok_s", "tok/s"),
            Better::Higher
        );
        assert_eq!(better_direction("occupancy", "ratio"), Better::Higher);
        assert_eq!(better_direction("launches", "count"), Better::Unknown);
        assert_eq!(better_direction("gb_s", "GB/s"), Better::Higher);
        assert_eq!(better_direction("bytes", "B"), Better::Unknown);
    }

    #[test]
    fn verdicts_for_times_and_the_other_way_for_throughput() {
        let base = with_ci("step_us", 100.0, 99.0, 101.0);
        let same = with_ci("step_us", 100.5, 99.5, 101.5);
        let slower = with_ci("step_us", 110.0, 109.0, 111.0);
        let faster = with_ci("step_us", 90.0, 89.0, 91.0);
        let noisy = with_ci("step_us", 102.5, 99.0, 106.0);
        assert_eq!(verdict_of(&base, &same), Verdict::Same);
        assert_eq!(verdict_of(&base, &slower), Verdict::Slower);
        assert_eq!(verdict_of(&base, &faster), Verdict::Faster);
        assert_eq!(verdict_of(&base, &noisy), Verdict::Uncertain);
        // A big enough threshold makes a 10% change noise.
        assert_eq!(judge(&base, &slower, Better::Lower, 20.0).1, Verdict::Same);
        let up = with_ci("throughput_tok_s", 1100.0, 1090.0, 1110.0);
        let tokps = with_ci("throughput_tok_s", 1000.0, 990.0, 1010.0);
        assert_eq!(verdict_of(&tokps, &up), Verdict::Faster);
        let idle = with_ci("occupancy", 0.7, 0.69, 0.71);
        assert_eq!(
            verdict_of(&with_ci("occupancy", 0.9, 0.89, 0.91), &idle),
            Verdict::Slower
        );
    }

    #[test]
    fn a_ratio_row_states_its_change() {
        let mut ratio = with_ci(STEP_RATIO_VS_EAGER_SYNC, 0.4, 0.39, 0.42);
        ratio.unit = "x".into();
        let c = change_of_ratio(&ratio).unwrap();
        assert!((c.pct + 60.0).abs() < 1e-9 && (c.lo_pct + 61.0).abs() < 1e-9);
        assert!((c.hi_pct + 58.0).abs() < 1e-9, "{c:?}");
        assert_eq!(verdict_on_change(&c, Better::Lower, 2.0), Verdict::Faster);
        ratio.ci_lo = f64::NAN;
        assert_eq!(change_of_ratio(&ratio), None);
    }

    #[test]
    fn the_smallest_callable_change_is_the_threshold_past_both_reaches() {
        // ±8% on both sides, as a real empty-kernel floor has: a rise must clear 2% plus the
        // two reaches in quadrature on the log scale.
        let base = with_ci("step_us", 100.0, 92.0, 108.0);
        let new = base.clone();
        let smallest = smallest_callable_pct(&base, &new, Better::Lower, 2.0).unwrap();
        let reach = ((100.0f64 / 92.0).ln()).hypot((108.0f64 / 100.0).ln());
        assert!((smallest - (1.02 * reach.exp() - 1.0) * 100.0).abs() < 1e-9);
        assert!((14.0..14.5).contains(&smallest), "{smallest}");
        // A rise that large is called slower; one 1% short of it is not.
        let moved = |pct: f64| {
            let f = 1.0 + pct / 100.0;
            with_ci("step_us", 100.0 * f, 92.0 * f, 108.0 * f)
        };
        assert_eq!(verdict_of(&base, &moved(smallest + 0.01)), Verdict::Slower);
        assert_eq!(
            verdict_of(&base, &moved(smallest - 1.0)),
            Verdict::Uncertain
        );
        // Where higher is better the worse way is down.
        let gb = with_ci("gb_s", 100.0, 99.0, 101.0);
        let fall = smallest_callable_pct(&gb, &gb, Better::Higher, 2.0).unwrap();
        let shrunk = with_ci(
            "gb_s",
            100.0 - fall - 0.01,
            99.0 * (1.0 - (fall + 0.01) / 100.0),
            101.0 * (1.0 - (fall + 0.01) / 100.0),
        );
        assert_eq!(verdict_of(&gb, &shrunk), Verdict::Slower);
        assert!(smallest_callable_pct(
            &gb,
            &with_ci("gb_s", 1.0, f64::NAN, 2.0),
            Better::Higher,
            2.0
        )
        .is_none());
    }

    #[test]
    fn every_verdict_is_counted_and_named() {
        let names: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(
            names,
            ["slower", "broken", "faster", "changed", "uncertain", "same"]
        );
        assert_eq!(Verdict::Broken.marked(), "**broken**");
        assert!(Verdict::Slower.is_call() && !Verdict::Uncertain.is_call());
    }
}
