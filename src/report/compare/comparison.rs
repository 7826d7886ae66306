//! The verdicts: each matched row's change, its change over its own floor, the smallest
//! change it could have called, and its verdict (docs/compare.md).
//!
//! The types live here; the power of each class of rows in `power`, the launch floors a row
//! is read against in `floors`, the derived rows' verdicts in `derived`, and the pairing and
//! judging of every row in `judge`.

use super::gate::Gate;
use super::side::{Entry, Side};
use crate::report::change::{Change, Verdict};
use crate::results::csv::KIND_FLOOR;

pub use super::power::PowerClass;

/// One matched cell and metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// Its rows' indices in BASE's and NEW's entries.
    pub base: usize,
    pub new: usize,
    pub change: Option<Change>,
    /// The change of the row over the floor each side's arm is read against; `None` for rows
    /// not read against a floor (not a prep time, a side without that floor, or two arms
    /// read against different floors).
    pub vs_floor: Option<Change>,
    /// The smallest change in the worse direction these two intervals could have called
    /// (`slower`), in percent ([`smallest_callable_pct`](crate::report::change::smallest_callable_pct)).
    pub smallest_callable_pct: Option<f64>,
    /// What the change alone says (and `broken`).
    pub called: Verdict,
    /// The verdict: `called`, or `uncertain` for a host-paced derived row whose call no row
    /// it is made of makes (`derived`).
    pub verdict: Verdict,
}

/// One floor row on both sides: how the machine moved, with no verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct FloorMove {
    pub base: usize,
    pub new: usize,
    pub change: Option<Change>,
}

/// Everything a comparison found.
#[derive(Debug)]
pub struct Comparison {
    pub base: Side,
    pub new: Side,
    /// `Some((base arm, new arm))` when two arms are compared.
    pub arms: Option<(String, String)>,
    pub threshold_pct: f64,
    /// Which rows called `slower` fail the comparison (`--gate`; `all` unless set).
    pub gate: Gate,
    /// In table order: kind, family, layout, batch size, block size, arm, metric.
    pub matched: Vec<Matched>,
    /// In the floor's order: launches, copies, the harness and the host-speed reference.
    pub floors: Vec<FloorMove>,
    /// BASE's rows NEW lacks and NEW's rows BASE lacks (indices into each side's entries).
    pub only_in_base: Vec<usize>,
    pub only_in_new: Vec<usize>,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.matched.iter().filter(|m| m.verdict == verdict).count()
    }

    /// Whether `m` fails the comparison: called `slower`, of a kind of row [`Self::gate`]
    /// fails on.
    pub fn fails(&self, m: &Matched) -> bool {
        let (b, n) = self.entries(m);
        m.verdict == Verdict::Slower && self.gate.fails(&b.arm, &n.arm, &n.metric)
    }

    /// Whether `m` is called `slower` but [`Self::gate`] does not fail on it.
    pub fn not_gated(&self, m: &Matched) -> bool {
        m.verdict == Verdict::Slower && !self.fails(m)
    }

    /// The rows called `slower` that fail the comparison under [`Self::gate`].
    pub fn gated_slower(&self) -> usize {
        self.matched.iter().filter(|m| self.fails(m)).count()
    }

    pub fn entries(&self, m: &Matched) -> (&Entry, &Entry) {
        (&self.base.entries[m.base], &self.new.entries[m.new])
    }

    pub fn floor_entries(&self, f: &FloorMove) -> (&Entry, &Entry) {
        (&self.base.entries[f.base], &self.new.entries[f.new])
    }

    /// Rows only BASE holds that fail the comparison (unless `--allow-missing`): its cells'
    /// rows between two runs; none between two arms, which hold different metrics by design.
    /// A floor NEW lacks (an item an older build did not time) is a yardstick, not a result:
    /// floors never fail the comparison.
    pub fn missing(&self) -> Vec<usize> {
        self.only_in_base(false)
    }

    /// Rows only BASE holds that are not findings: between two arms all of them, between two
    /// runs its floors.
    pub fn base_extras(&self) -> Vec<usize> {
        self.only_in_base(true)
    }

    fn only_in_base(&self, extras: bool) -> Vec<usize> {
        let finding = |i: &&usize| {
            let e = &self.base.entries[**i];
            self.arms.is_none() && &*e.kind != KIND_FLOOR
        };
        (self.only_in_base.iter())
            .filter(|i| finding(i) != extras)
            .copied()
            .collect()
    }

    /// Missing and broken rows: findings that fail the comparison unless `--allow-missing`.
    pub fn findings(&self) -> usize {
        self.missing().len() + self.count(Verdict::Broken)
    }
}
