//! From pairs to calls: per cell and metric the paired change (Hodges–Lehmann with a Wilcoxon
//! interval over the sides' processes, [`crate::stats::paired`]), called `slower` or `faster`
//! only when the whole interval lies beyond the margin of the row's class, and the gate: a
//! BASE → NEW that makes any row slower fails.

use super::protocol::{CellName, Measured};
use crate::results::pacing::host_paced;
use crate::stats::paired::{hodges_lehmann, log_ratios, LogChange};
use crate::stats::summary::quantile;
use serde::Serialize;

/// One pair as it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRecord {
    pub round: usize,
    /// Which of the sides' processes measured it (from 0).
    pub process: usize,
    pub cell: usize,
    pub base_first: bool,
    pub base: Measured,
    pub new: Measured,
    /// Whether the pair was measured again after a host-speed move inside it.
    pub redone: bool,
}

impl PairRecord {
    /// The host's launch speed over the pair: the mean of its four probes, µs.
    pub fn probe_us(&self) -> f64 {
        let p = [
            self.base.probe_before_us,
            self.base.probe_after_us,
            self.new.probe_before_us,
            self.new.probe_after_us,
        ];
        p.iter().sum::<f64>() / 4.0
    }
}

/// Which margin a row is held to: what sets its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    Host,
    Gpu,
}

/// The margins the gate holds each class to, as fractions (0.05 = 5%).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Margins {
    pub host: f64,
    pub gpu: f64,
}

impl Margins {
    /// The default margins: host-paced 5%, a quarter of the +20% the gate must catch; GPU-paced
    /// 2%, under what 1 µs more stand-in forward makes (docs/ab.md gives the A/A behind both).
    pub const DEFAULT: Margins = Margins {
        host: 0.05,
        gpu: 0.02,
    };

    pub fn of(&self, pacing: Pacing) -> f64 {
        match pacing {
            Pacing::Host => self.host,
            Pacing::Gpu => self.gpu,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Call {
    /// The whole interval above the margin: NEW takes longer.
    Slower,
    /// The whole interval below minus the margin.
    Faster,
    /// The whole interval within ± the margin.
    Same,
    /// The interval reaches across a margin.
    Uncertain,
    /// Fewer pairs than an interval needs.
    TooFewPairs,
}

impl Call {
    pub fn of(change: Option<&LogChange>, margin: f64) -> Call {
        let Some(c) = change else {
            return Call::TooFewPairs;
        };
        let m = margin.ln_1p();
        if c.lo > m {
            Call::Slower
        } else if c.hi < -m {
            Call::Faster
        } else if c.lo >= -m && c.hi <= m {
            Call::Same
        } else {
            Call::Uncertain
        }
    }

    /// Whether a row so called is a finding (either way).
    pub fn called(self) -> bool {
        matches!(self, Call::Slower | Call::Faster)
    }

    pub fn name(self) -> &'static str {
        match self {
            Call::Slower => "slower",
            Call::Faster => "faster",
            Call::Same => "same",
            Call::Uncertain => "uncertain",
            Call::TooFewPairs => "too few pairs",
        }
    }
}

/// A change in percent with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PctChange {
    pub pct: f64,
    pub lo_pct: f64,
    pub hi_pct: f64,
}

impl From<&LogChange> for PctChange {
    fn from(c: &LogChange) -> Self {
        PctChange {
            pct: LogChange::pct(c.estimate),
            lo_pct: LogChange::pct(c.lo),
            hi_pct: LogChange::pct(c.hi),
        }
    }
}

/// The change over the host's fast-state pairs and over its slow-state ones, where the run
/// saw both and they disagree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StateSplit {
    pub fast: PctChange,
    pub slow: PctChange,
}

/// One row of the verdict: a cell's metric (or a group's read cost) BASE against NEW.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeRow {
    pub cell: CellName,
    pub metric: String,
    pub pacing: Pacing,
    /// Medians of each side's bursts, in the metric's unit (its name's suffix: µs, tok/s).
    pub base: f64,
    pub new: f64,
    pub pairs: usize,
    /// Processes the pairs ran in: the interval's units.
    pub processes: usize,
    pub change: Option<PctChange>,
    pub margin_pct: f64,
    /// The smallest change this row's interval could have called: the margin plus the
    /// interval's half-width.
    pub detectable_pct: Option<f64>,
    pub call: Call,
    /// Whether the gate fails on it: a slower row.
    pub fails: bool,
    pub state_split: Option<StateSplit>,
}

/// The metric a group's read cost is written as: eager-sync's step less eager-device's, in
/// the same round on the same side.
pub const READ_COST: &str = "read_cost_us";
/// What a read-cost row names as its arm.
pub const READ_COST_ARMS: &str = "eager-sync - eager-device";

/// Every row of a run: each cell's metrics in the order its bursts gave them, then each
/// group's read cost where both eager-sync and eager-device ran.
pub fn rows(
    cells: &[CellName],
    pairs: &[PairRecord],
    margins: Margins,
    split_at: Option<f64>,
) -> Vec<ChangeRow> {
    let mut rows = Vec::new();
    for (index, cell) in cells.iter().enumerate() {
        let of_cell: Vec<&PairRecord> = pairs.iter().filter(|p| p.cell == index).collect();
        let Some(first) = of_cell.first() else {
            continue;
        };
        for metric in first.base.metrics.iter().map(|m| m.name.as_str()) {
            let values: Vec<PairValue> = (of_cell.iter())
                .filter_map(|p| {
                    Some(PairValue {
                        base: p.base.metric(metric)?,
                        new: p.new.metric(metric)?,
                        probe_us: p.probe_us(),
                        process: p.process,
                    })
                })
                .collect();
            let pacing = pacing_of(&cell.arm, metric);
            rows.push(row(
                cell.clone(),
                metric,
                pacing,
                &values,
                margins,
                split_at,
            ));
        }
    }
    rows.extend(read_cost_rows(cells, pairs, margins, split_at));
    rows
}

/// Whether more of `metric` is better (a throughput), so that a drop is a regression.
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("_tok_s")
}

/// The class of `arm`'s `metric`: which margin it is held to.
pub fn pacing_of(arm: &str, metric: &str) -> Pacing {
    if host_paced(arm, metric) {
        Pacing::Host
    } else {
        Pacing::Gpu
    }
}

/// A group's read cost, side by side, in each round where both its reading and its
/// device-only eager arm ran.
fn read_cost_rows(
    cells: &[CellName],
    pairs: &[PairRecord],
    margins: Margins,
    split_at: Option<f64>,
) -> Vec<ChangeRow> {
    let mut rows = Vec::new();
    for (sync, cell) in cells.iter().enumerate() {
        if cell.arm != "eager-sync" {
            continue;
        }
        let Some(device) = cells
            .iter()
            .position(|c| c.arm == "eager-device" && c.group() == cell.group())
        else {
            continue;
        };
        let rounds = pairs.iter().map(|p| p.round).max().map_or(0, |r| r + 1);
        let mut values = Vec::new();
        for round in 0..rounds {
            let find = |i: usize| pairs.iter().find(|p| p.round == round && p.cell == i);
            let (Some(s), Some(d)) = (find(sync), find(device)) else {
                continue;
            };
            let cost =
                |a: &Measured, b: &Measured| Some(a.metric("step_us")? - b.metric("step_us")?);
            if let (Some(base), Some(new)) = (cost(&s.base, &d.base), cost(&s.new, &d.new)) {
                values.push(PairValue {
                    base,
                    new,
                    probe_us: (s.probe_us() + d.probe_us()) / 2.0,
                    process: s.process,
                });
            }
        }
        let name = CellName {
            arm: READ_COST_ARMS.into(),
            ..cell.clone()
        };
        rows.push(row(
            name,
            READ_COST,
            Pacing::Host,
            &values,
            margins,
            split_at,
        ));
    }
    rows
}

/// One pair's value of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PairValue {
    base: f64,
    new: f64,
    probe_us: f64,
    process: usize,
}

/// The change over processes: each process's median ln(NEW/BASE) over its pairs is one value
/// of the Hodges–Lehmann estimate and its interval. A process draws a pace of its own, which
/// no pair inside it can see (docs/ab.md).
pub fn over_processes(d: &[(usize, f64)]) -> Option<LogChange> {
    let mut processes: Vec<usize> = d.iter().map(|&(p, _)| p).collect();
    processes.sort_unstable();
    processes.dedup();
    let per_process: Vec<f64> = (processes.iter())
        .filter_map(|&p| {
            let of: Vec<f64> = d.iter().filter(|v| v.0 == p).map(|v| v.1).collect();
            quantile(&of, 0.5)
        })
        .collect();
    hodges_lehmann(&per_process).map(|c| LogChange {
        pairs: d.len(),
        ..c
    })
}

/// A row from its pairs' values.
fn row(
    cell: CellName,
    metric: &str,
    pacing: Pacing,
    values: &[PairValue],
    margins: Margins,
    split_at: Option<f64>,
) -> ChangeRow {
    let d: Vec<(usize, f64)> = (values.iter())
        .filter_map(|v| Some((v.process, *log_ratios([(v.base, v.new)]).first()?)))
        .collect();
    let change = over_processes(&d);
    let margin = margins.of(pacing);
    // Where more is better, a drop is what the gate calls slower.
    let worse = match higher_is_better(metric) {
        true => change.as_ref().map(LogChange::flipped),
        false => change,
    };
    let call = Call::of(worse.as_ref(), margin);
    let side = |pick: fn(&PairValue) -> f64| {
        quantile(&values.iter().map(pick).collect::<Vec<_>>(), 0.5).unwrap_or(f64::NAN)
    };
    let mut processes: Vec<usize> = d.iter().map(|v| v.0).collect();
    processes.sort_unstable();
    processes.dedup();
    ChangeRow {
        cell,
        metric: metric.to_string(),
        pacing,
        base: side(|v| v.base),
        new: side(|v| v.new),
        pairs: d.len(),
        processes: processes.len(),
        change: change.as_ref().map(PctChange::from),
        margin_pct: margin * 100.0,
        detectable_pct: change.map(|c| LogChange::pct(margin.ln_1p() + (c.hi - c.lo) / 2.0)),
        call,
        fails: call == Call::Slower,
        state_split: split_at.and_then(|at| state_split(values, at)),
    }
}

/// The fast-state and slow-state pairs' changes where each side of `at` has an interval and
/// the two intervals do not overlap (over pairs: a diagnosis, not a gate).
fn state_split(values: &[PairValue], at: f64) -> Option<StateSplit> {
    let part = |slow: bool| {
        let d = log_ratios(
            (values.iter())
                .filter(|v| (v.probe_us > at) == slow)
                .map(|v| (v.base, v.new)),
        );
        hodges_lehmann(&d)
    };
    let (fast, slow) = (part(false)?, part(true)?);
    let disjoint = fast.hi < slow.lo || slow.hi < fast.lo;
    disjoint.then(|| StateSplit {
        fast: PctChange::from(&fast),
        slow: PctChange::from(&slow),
    })
}

/// The probe level that splits a run's pairs into the host's fast and slow states, where its
/// probes spread over more than `bound` (a fraction) between their 10th and 90th percentiles;
/// `None` where the host stayed in one state.
pub fn state_threshold(pairs: &[PairRecord], bound: f64) -> Option<f64> {
    let probes: Vec<f64> = pairs.iter().map(PairRecord::probe_us).collect();
    let (p10, p90) = (quantile(&probes, 0.1)?, quantile(&probes, 0.9)?);
    (p10 > 0.0 && p90 / p10 > 1.0 + bound).then(|| (p10 * p90).sqrt())
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
