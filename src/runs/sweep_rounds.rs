//! What `metaprep sweep` keeps of each round, and the rows it gives once rounds stop.
//!
//! A *group* is the arms of one (family, layout, batch size, block size), visited back to
//! back in every round; the *floor* (its items and the harness) is measured at the start of
//! every round. Both keep their samples round by round. A cell's own metrics become rows with
//! [`CellId::rounds_row`] (median of the rounds' medians, interval between rounds); the
//! quantities users read as differences are formed inside each round, where their two sides
//! ran back to back or in the same round, with [`CellId::paired_row`]:
//! * `read_cost_us` (on each reading arm's cell: eager-sync, eager-pinned, eager-mapped):
//!   the arm's `step_us` − eager-device's;
//! * `step_ratio_vs_eager_sync` (every other arm): the arm's `step_us` / eager-sync's;
//! * `floor_multiple`: an arm's `step_us` / its launch floor's (empty kernel for eager arms,
//!   empty graph for graph arms) in the same round;
//! * `overhead_us` (the harness): the harness's `step_us` − the empty graph's.
//!
//! A prep cell also gets `bytes`, what its prep reads and writes (the same for every arm),
//! and `gb_s`, those bytes over each `gpu_prep_us` sample; the floor's d2d copy gets `gb_s`,
//! the ceiling they are read against ([`crate::harness::bandwidth`]).
//!
//! The floor also times the host-speed reference ([`HOST_REFERENCE`], a fixed piece of CPU
//! work on the measuring core) every round, and each host-paced time of a cell gets a twin
//! over it, formed inside each round ([`crate::results::pacing`]): the row per unit of host
//! speed, where a move of the whole host cancels.
//!
//! A round's measurements travel as [`RoundResult`] (serde), so a round measured in a worker
//! process (`sweep --processes`) is kept exactly as one measured here.

use crate::axes::floor_item::HOST_REFERENCE;
use crate::axes::Arm;
use crate::axes::{Family, FloorItem};
use crate::harness::bandwidth::{bytes_row, gb_s_row};
use crate::harness::nvml::CellTelemetry;
use crate::harness::prep_cell::PrepMeasurement;
use crate::harness::rows::{CellId, RoundLine};
use crate::results::csv::{Row, KIND_FLOOR, STEP_RATIO_VS_EAGER_SYNC};
use crate::results::pacing::{has_host_twin, twin_metric};
use crate::stats::rounds::{over_rounds, paired, per_round, Paired};
use crate::stats::stopping::{RoundsRule, RoundsStop};
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use crate::axes::floor_item::HARNESS;

/// Rounds of samples: one list per round.
type Rounds = Vec<Vec<f64>>;

fn difference(a: f64, b: f64) -> f64 {
    a - b
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b
}

/// The cell of a floor item (or of [`HARNESS`]).
pub fn floor_cell(item: &str) -> CellId {
    CellId {
        kind: KIND_FLOOR,
        family: "floor".into(),
        arm: item.into(),
        batch_size: 1,
        block_size: 1,
        layout: "tp1".into(),
        emulated: false,
        host_scale: None,
    }
}

/// One visit of one arm: each metric's samples in one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArmRound {
    pub step: Vec<f64>,
    /// `None` when the sweep runs no forward (`--forward-us 0`).
    pub step_fwd: Option<Vec<f64>>,
    pub host_issue: Vec<f64>,
    pub host_blocked: Vec<f64>,
    pub gpu_prep: Vec<f64>,
}

impl From<PrepMeasurement> for ArmRound {
    fn from(m: PrepMeasurement) -> Self {
        ArmRound {
            step: m.step.per_step_us,
            step_fwd: m.step_fwd.map(|f| f.per_step_us),
            host_issue: m.host_issue_us,
            host_blocked: m.host_blocked_us,
            gpu_prep: m.gpu_prep_us,
        }
    }
}

/// One visit of a group in one round: its arms (by index into the run's arms) in the order
/// they ran, what one prep moves, and the time the visit took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRound {
    /// The group's index in the whole grid (resumed or not, worker or not).
    pub grid_index: usize,
    pub arms: Vec<(usize, ArmRound)>,
    pub bytes: Option<u64>,
    pub seconds: f64,
}

/// One round of the floor: each item's samples in [`FloorItem::ALL`]'s order, the harness's
/// and the host-speed reference's, and the time it took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FloorRound {
    pub items: Vec<Vec<f64>>,
    pub harness: Vec<f64>,
    pub host_reference: Vec<f64>,
    pub seconds: f64,
}

/// Everything one round measured: the floor, then every group it visited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundResult {
    /// From 0, over the whole run.
    pub round: usize,
    pub floor: FloorRound,
    pub groups: Vec<GroupRound>,
}

/// One arm's metrics, round by round.
#[derive(Debug, Clone, Default)]
struct ArmRounds {
    step: Rounds,
    step_fwd: Rounds,
    host_issue: Rounds,
    host_blocked: Rounds,
    gpu_prep: Rounds,
}

impl ArmRounds {
    /// The metrics measured of `arm` (all µs), in the rows' order: `host_blocked_us` only
    /// for an arm that reads the host, the others block in no read.
    fn measured(&self, arm: Arm) -> Vec<(&'static str, &Rounds)> {
        let mut metrics = vec![
            ("step_us", &self.step),
            ("step_fwd_us", &self.step_fwd),
            ("host_issue_us", &self.host_issue),
        ];
        if arm.reads_host() {
            metrics.push(("host_blocked_us", &self.host_blocked));
        }
        metrics.push(("gpu_prep_us", &self.gpu_prep));
        metrics
    }
}

/// A group's arms, round by round.
#[derive(Debug, Clone)]
pub struct GroupRounds {
    family: Family,
    arms: Vec<Arm>,
    by_arm: Vec<ArmRounds>,
    /// Time spent measuring the group's cells, over all its rounds.
    pub elapsed: Duration,
    /// Bytes one prep of the group reads and writes, once its inputs are known.
    pub bytes: Option<u64>,
}

impl GroupRounds {
    pub fn new(family: Family, arms: &[Arm]) -> Self {
        Self {
            family,
            arms: arms.to_vec(),
            by_arm: vec![ArmRounds::default(); arms.len()],
            elapsed: Duration::ZERO,
            bytes: None,
        }
    }

    /// Adds a round of `self.arms[index]`.
    pub fn push(&mut self, index: usize, m: ArmRound) {
        let a = &mut self.by_arm[index];
        a.step.push(m.step);
        if let Some(fwd) = m.step_fwd {
            a.step_fwd.push(fwd);
        }
        a.host_issue.push(m.host_issue);
        a.host_blocked.push(m.host_blocked);
        a.gpu_prep.push(m.gpu_prep);
    }

    /// Adds a visit of the group: every arm's round, its bytes and its time.
    pub fn push_visit(&mut self, visit: GroupRound) {
        for (index, arm) in visit.arms {
            self.push(index, arm);
        }
        self.bytes = visit.bytes.or(self.bytes);
        self.elapsed += Duration::from_secs_f64(visit.seconds);
    }

    /// Rounds every arm has measured.
    pub fn rounds(&self) -> usize {
        self.by_arm.iter().map(|a| a.step.len()).min().unwrap_or(0)
    }

    fn step(&self, arm: Arm) -> Option<&Rounds> {
        let index = self.arms.iter().position(|&a| a == arm)?;
        Some(&self.by_arm[index].step)
    }

    /// A reading arm's and eager-device's step times: the two sides of `arm`'s read cost.
    fn read_cost_sides(&self, arm: Arm) -> Option<(&Rounds, &Rounds)> {
        Some((self.step(arm)?, self.step(Arm::EagerDevice)?))
    }

    /// Whether the group gets no further round, and why (see [`RoundsRule`]): the rule
    /// judges every reading arm's read cost, and the group stops only when it stops for each.
    pub fn stop(&self, rule: &RoundsRule) -> Option<RoundsStop> {
        let steps: Vec<_> = self.by_arm.iter().map(|a| over_rounds(&a.step)).collect();
        let read_costs: Vec<Paired> = (self.arms.iter())
            .filter(|arm| arm.reads_host())
            .filter_map(|&arm| self.read_cost_sides(arm))
            .filter_map(|(own, device)| paired(own, device, difference))
            .collect();
        rule.check(self.rounds(), &steps, &read_costs, self.elapsed)
    }

    /// Every round's median of each arm's measured metrics, `cells[i]` being `self.arms[i]`'s;
    /// `processes[r]` measured round `r`.
    pub fn round_lines(&self, cells: &[CellId], processes: &[u32]) -> Vec<RoundLine> {
        let mut lines = Vec::new();
        for ((&arm, a), cell) in self.arms.iter().zip(&self.by_arm).zip(cells) {
            for (metric, rounds) in a.measured(arm) {
                lines.extend(cell.round_lines(metric, rounds, processes));
            }
        }
        lines
    }

    /// The rows of the group's cells, `cells[i]` and `telemetry[i]` being `self.arms[i]`'s,
    /// paired with `floor`'s rounds of the same index.
    pub fn rows(
        &self,
        cells: &[CellId],
        floor: &FloorRounds,
        stop: RoundsStop,
        telemetry: &[Option<CellTelemetry>],
    ) -> Vec<Row> {
        let stop = stop.as_str();
        let sync = self.step(Arm::EagerSync);
        let mut rows = Vec::new();
        let host = floor.host_reference();
        let twin = |cell: &CellId, metric: &str, rounds: &[Vec<f64>], t| {
            let twinned = !host.is_empty() && has_host_twin(&cell.arm, metric);
            twinned
                .then(|| cell.paired_row(&twin_metric(metric), "x", (rounds, host), ratio, t))
                .flatten()
        };
        for (((&arm, a), cell), t) in self.arms.iter().zip(&self.by_arm).zip(cells).zip(telemetry) {
            let t = t.as_ref();
            for (metric, rounds) in a.measured(arm) {
                rows.extend(cell.rounds_row(metric, "us", rounds, stop, t));
                rows.extend(twin(cell, metric, rounds, t));
            }
            if let Some(bytes) = self.bytes {
                rows.push(bytes_row(cell, bytes, self.rounds()));
                rows.extend(gb_s_row(cell, bytes, &a.gpu_prep, stop, t));
            }
            let floor_item = floor.item(FloorItem::of_cell(arm, self.family));
            rows.extend(cell.paired_row("floor_multiple", "x", (&a.step, floor_item), ratio, t));
            if let Some((own, device)) = self.read_cost_sides(arm).filter(|_| arm.reads_host()) {
                let sides = (own.as_slice(), device.as_slice());
                rows.extend(cell.paired_row("read_cost_us", "us", sides, difference, None));
                // Each round's read cost, as one value a round, over the host's.
                let cost = per_round(own, device, difference);
                rows.extend(twin(cell, "read_cost_us", &cost, None));
            }
            if let Some(sync) = sync.filter(|_| arm != Arm::EagerSync) {
                rows.extend(cell.paired_row(
                    STEP_RATIO_VS_EAGER_SYNC,
                    "x",
                    (&a.step, sync),
                    ratio,
                    t,
                ));
            }
        }
        rows
    }
}

/// The floor's items, the harness and the host-speed reference, round by round.
#[derive(Debug, Clone, Default)]
pub struct FloorRounds {
    /// In [`FloorItem::ALL`]'s order.
    items: [Rounds; FloorItem::ALL.len()],
    harness: Rounds,
    host_reference: Rounds,
    /// Time spent measuring the floor, over all rounds.
    pub elapsed: Duration,
}

fn index_of(item: FloorItem) -> usize {
    FloorItem::ALL
        .iter()
        .position(|&i| i == item)
        .expect("every item is in ALL")
}

impl FloorRounds {
    pub fn push(&mut self, item: FloorItem, per_step_us: Vec<f64>) {
        self.items[index_of(item)].push(per_step_us);
    }

    pub fn push_harness(&mut self, per_step_us: Vec<f64>) {
        self.harness.push(per_step_us);
    }

    pub fn push_host_reference(&mut self, per_unit_us: Vec<f64>) {
        self.host_reference.push(per_unit_us);
    }

    /// Adds one round of the floor (its items in [`FloorItem::ALL`]'s order).
    pub fn push_round(&mut self, round: FloorRound) {
        for (item, samples) in FloorItem::ALL.iter().zip(round.items) {
            self.push(*item, samples);
        }
        self.push_harness(round.harness);
        self.push_host_reference(round.host_reference);
        self.elapsed += Duration::from_secs_f64(round.seconds);
    }

    /// The host-speed reference's rounds (none in a floor measured without it).
    pub fn host_reference(&self) -> &[Vec<f64>] {
        &self.host_reference
    }

    pub fn item(&self, item: FloorItem) -> &[Vec<f64>] {
        &self.items[index_of(item)]
    }

    /// Each item's `step_us` rounds, the harness's and the host-speed reference's, by name.
    fn step_rounds(&self) -> impl Iterator<Item = (&'static str, &Rounds)> {
        let names = FloorItem::ALL.iter().map(|i| i.name());
        let rounds = self.items.iter();
        names
            .chain([HARNESS, HOST_REFERENCE])
            .zip(rounds.chain([&self.harness, &self.host_reference]))
    }

    fn rounds(&self) -> usize {
        self.step_rounds().map(|(_, r)| r.len()).min().unwrap_or(0)
    }

    /// Whether the floor's rounds may stop, and why: every item's `step_us` and the
    /// harness's judged as a group's arms are (no read cost).
    pub fn stop(&self, rule: &RoundsRule) -> Option<RoundsStop> {
        let steps: Vec<_> = self.step_rounds().map(|(_, r)| over_rounds(r)).collect();
        rule.check(self.rounds(), &steps, &[], self.elapsed)
    }

    /// Every round's median of each item's `step_us`, the harness's and the host reference's;
    /// `processes[r]` measured round `r`.
    pub fn round_lines(&self, processes: &[u32]) -> Vec<RoundLine> {
        self.step_rounds()
            .flat_map(|(name, rounds)| floor_cell(name).round_lines("step_us", rounds, processes))
            .collect()
    }

    /// The floor's rows: each item's `step_us`, the harness's and its overhead over the empty
    /// graph, and the host-speed reference's (µs per unit of its work); `telemetry` gives a
    /// floor cell's NVML summary by label.
    pub fn rows(
        &self,
        stop: RoundsStop,
        telemetry: impl Fn(&str) -> Option<CellTelemetry>,
    ) -> Vec<Row> {
        let stop = stop.as_str();
        let mut rows = Vec::new();
        for (item, rounds) in FloorItem::ALL.iter().zip(&self.items) {
            let cell = floor_cell(item.name());
            let t = telemetry(&cell.label());
            rows.extend(cell.rounds_row("step_us", "us", rounds, stop, t.as_ref()));
            if let Some(bytes) = item.bytes_moved() {
                rows.extend(gb_s_row(&cell, bytes, rounds, stop, t.as_ref()));
            }
        }
        let cell = floor_cell(HARNESS);
        let t = telemetry(&cell.label());
        rows.extend(cell.rounds_row("step_us", "us", &self.harness, stop, t.as_ref()));
        let empty_graph = self.item(FloorItem::EMPTY_GRAPH);
        rows.extend(cell.paired_row(
            "overhead_us",
            "us",
            (&self.harness, empty_graph),
            difference,
            None,
        ));
        let cell = floor_cell(HOST_REFERENCE);
        let t = telemetry(&cell.label());
        rows.extend(cell.rounds_row("step_us", "us", &self.host_reference, stop, t.as_ref()));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::sampling::Sampled;
    use crate::results::csv::KIND_PREP;
    use crate::stats::stopping::{StopReason, StoppingRule};

    /// A round's samples around `level`, tight inside the round.
    fn samples(level: f64) -> Vec<f64> {
        (0..10)
            .map(|i| level * (1.0 + 0.001 * (i % 3) as f64))
            .collect()
    }

    fn measurement(step: f64) -> PrepMeasurement {
        let sampled = |level| Sampled {
            per_step_us: samples(level),
            stop: StopReason::Converged,
        };
        PrepMeasurement {
            step: sampled(step),
            step_fwd: Some(sampled(step + 20.0)),
            host_issue_us: samples(step / 2.0),
            host_blocked_us: samples(step / 3.0),
            gpu_prep_us: samples(4.0),
        }
    }

    const ARMS: [Arm; 3] = [Arm::EagerSync, Arm::EagerDevice, Arm::Graph];
    /// The graph arm's rows of a group whose bytes are known, in order.
    const GRAPH_METRICS: [&str; 9] = [
        "step_us",
        "step_fwd_us",
        "host_issue_us",
        "host_issue_us_per_host_ref",
        "gpu_prep_us",
        "bytes",
        "gb_s",
        "floor_multiple",
        STEP_RATIO_VS_EAGER_SYNC,
    ];
    /// The host's drift, round by round: ±10% around 1, the same for every cell of a round.
    const DRIFT: [f64; 6] = [1.0, 1.1, 0.92, 1.05, 0.9, 1.08];

    fn cells() -> Vec<CellId> {
        ARMS.iter()
            .map(|arm| CellId {
                kind: KIND_PREP,
                family: "dsa_decode".into(),
                arm: arm.name().into(),
                batch_size: 8,
                block_size: 5,
                layout: "tp1".into(),
                emulated: false,
                host_scale: None,
            })
            .collect()
    }

    /// Six rounds in which every cell drifts by [`DRIFT`]: eager-sync 40 µs, eager-device
    /// 22 µs, graph 10 µs, the empty kernel 2 µs, the empty graphs of 1, 2 and 3 nodes 2.5, 5
    /// and 6 µs, the reads on an idle and a busy GPU 9 and 17 µs, the d2d copy 32 µs, the
    /// harness 2.7 µs, the host-speed reference 1.25 µs a unit.
    fn drifting() -> (GroupRounds, FloorRounds) {
        let mut group = GroupRounds::new(Family::DsaDecode, &ARMS);
        let mut floor = FloorRounds::default();
        for d in DRIFT {
            for (item, us) in FloorItem::ALL
                .iter()
                .zip([2.0, 2.5, 5.0, 6.0, 9.0, 17.0, 3.0, 4.0, 32.0])
            {
                floor.push(*item, samples(us * d));
            }
            floor.push_harness(samples(2.7 * d));
            floor.push_host_reference(samples(1.25 * d));
            for (i, us) in [40.0, 22.0, 10.0].into_iter().enumerate() {
                group.push(i, measurement(us * d).into());
            }
        }
        (group, floor)
    }

    fn find<'a>(rows: &'a [Row], arm: &str, metric: &str) -> &'a Row {
        rows.iter()
            .find(|r| r.arm == arm && r.metric == metric)
            .unwrap_or_else(|| panic!("no {arm} {metric}"))
    }

    /// The metrics of `arm`'s rows, in row order.
    fn metrics_of<'a>(rows: &'a [Row], arm: &str) -> Vec<&'a str> {
        rows.iter()
            .filter(|r| r.arm == arm)
            .map(|r| r.metric.as_str())
            .collect()
    }

    #[test]
    fn a_cells_interval_spans_the_drift_between_rounds() {
        let (group, floor) = drifting();
        assert_eq!(group.rounds(), 6);
        let rows = group.rows(&cells(), &floor, RoundsStop::MaxRounds, &[None, None, None]);
        let step = find(&rows, "graph", "step_us");
        // Six round medians: the interval is their whole range, 0.9 to 1.1 times 10 µs
        // (each round's median is its level times 1.001).
        assert!((step.ci_lo - 9.0 * 1.001).abs() < 1e-9, "{step:?}");
        assert!((step.ci_hi - 11.0 * 1.001).abs() < 1e-9, "{step:?}");
        assert!(step.ci_lo < step.median && step.median < step.ci_hi);
        assert_eq!((step.rounds, step.samples), (6, 60));
        assert_eq!(step.stop_reason, "max-rounds");
        // Every metric of every arm is a rounds row; host_blocked_us only for the reader.
        // Each host-paced time has its twin per unit of host speed right after it.
        assert_eq!(
            metrics_of(&rows, "eager-sync"),
            [
                "step_us",
                "step_us_per_host_ref",
                "step_fwd_us",
                "step_fwd_us_per_host_ref",
                "host_issue_us",
                "host_issue_us_per_host_ref",
                "host_blocked_us",
                "host_blocked_us_per_host_ref",
                "gpu_prep_us",
                "gpu_prep_us_per_host_ref",
                "floor_multiple",
                "read_cost_us",
                "read_cost_us_per_host_ref"
            ]
        );
        let mut graph = GRAPH_METRICS.to_vec();
        graph.retain(|m| !["bytes", "gb_s"].contains(m));
        assert_eq!(
            metrics_of(&rows, "graph"),
            graph,
            "the GPU paces a graph arm's times but its host issue"
        );
        assert!(!rows
            .iter()
            .any(|r| r.arm == "graph" && r.metric == "host_blocked_us"));
        assert!(
            rows.iter().all(|r| r.rounds == 6),
            "every row says its rounds"
        );
    }

    #[test]
    fn differences_are_paired_inside_each_round() {
        let (group, floor) = drifting();
        let rows = group.rows(&cells(), &floor, RoundsStop::Precision, &[None, None, None]);
        // The read cost is 18 µs times the round's drift: paired, its interval spans only
        // that (0.9 to 1.1 times 18 µs), not the 40-µs and 22-µs cells' ranges combined.
        let cost = find(&rows, "eager-sync", "read_cost_us");
        assert_eq!(cost.stop_reason, "derived");
        assert!((cost.ci_lo - 0.9 * 18.0 * 1.001).abs() < 1e-9, "{cost:?}");
        assert!((cost.ci_hi - 1.1 * 18.0 * 1.001).abs() < 1e-9, "{cost:?}");
        // Ratios cancel the drift: graph is 10/40 of eager-sync in every round, eager arms
        // 20x the empty kernel and DSA decode's two-kernel graph 2x the empty graph of two
        // nodes.
        for (arm, metric, value) in [
            ("graph", STEP_RATIO_VS_EAGER_SYNC, 0.25),
            ("eager-device", STEP_RATIO_VS_EAGER_SYNC, 0.55),
            ("eager-sync", "floor_multiple", 20.0),
            ("eager-device", "floor_multiple", 11.0),
            ("graph", "floor_multiple", 2.0),
        ] {
            let r = find(&rows, arm, metric);
            assert!((r.median - value).abs() < 1e-9, "{arm} {metric}: {r:?}");
            assert!(r.ci_hi - r.ci_lo < 1e-9, "{arm} {metric}: {r:?}");
            assert_eq!((r.unit.as_str(), r.rounds), ("x", 6));
        }
        assert!(!rows
            .iter()
            .any(|r| r.arm == "eager-sync" && r.metric == STEP_RATIO_VS_EAGER_SYNC));
    }

    #[test]
    fn twins_per_unit_of_host_speed_cancel_a_drift_the_host_shares() {
        let (group, floor) = drifting();
        let rows = group.rows(&cells(), &floor, RoundsStop::Precision, &[None, None, None]);
        // Host and cells drift alike, round by round: over the host's 1.25 µs a unit,
        // eager-sync's 40 µs is 32 units in every round, the read cost 18 / 1.25 = 14.4.
        for (metric, value) in [
            ("step_us_per_host_ref", 32.0),
            ("read_cost_us_per_host_ref", 14.4),
            ("host_issue_us_per_host_ref", 16.0),
        ] {
            let twin = find(&rows, "eager-sync", metric);
            assert!((twin.median - value).abs() < 1e-9, "{metric}: {twin:?}");
            assert!(twin.ci_hi - twin.ci_lo < 1e-9, "{metric}: {twin:?}");
            assert_eq!((twin.unit.as_str(), twin.rounds), ("x", 6));
        }
        // The raw row keeps the drift.
        let raw = find(&rows, "eager-sync", "step_us");
        assert!(raw.ci_hi / raw.ci_lo > 1.2, "{raw:?}");
        // A floor measured without the reference (none pushed) gives no twins.
        let mut bare = FloorRounds::default();
        for d in DRIFT {
            bare.push(FloorItem::EmptyKernel, samples(2.0 * d));
        }
        let rows = group.rows(&cells(), &bare, RoundsStop::Precision, &[None, None, None]);
        assert!(!rows.iter().any(|r| r.metric.ends_with("_per_host_ref")));
    }

    #[test]
    fn a_round_from_a_worker_is_kept_as_one_measured_here() {
        let (here, floor_here) = drifting();
        let mut there = GroupRounds::new(Family::DsaDecode, &ARMS);
        let mut floor_there = FloorRounds::default();
        for d in DRIFT {
            let items = [2.0, 2.5, 5.0, 6.0, 9.0, 17.0, 3.0, 4.0, 32.0];
            floor_there.push_round(FloorRound {
                items: items.iter().map(|us| samples(us * d)).collect(),
                harness: samples(2.7 * d),
                host_reference: samples(1.25 * d),
                seconds: 0.0,
            });
            there.push_visit(GroupRound {
                grid_index: 0,
                arms: [40.0, 22.0, 10.0]
                    .into_iter()
                    .enumerate()
                    .map(|(i, us)| (i, measurement(us * d).into()))
                    .collect(),
                bytes: None,
                seconds: 0.5,
            });
        }
        // Compared as printed: derived rows hold NaN quantiles, which equal nothing.
        let rows = |g: &GroupRounds, f: &FloorRounds| {
            let mut rows = g.rows(&cells(), f, RoundsStop::MaxRounds, &[None, None, None]);
            rows.extend(f.rows(RoundsStop::MaxRounds, |_| None));
            format!("{rows:?}")
        };
        assert_eq!(rows(&here, &floor_here), rows(&there, &floor_there));
        assert_eq!(there.elapsed, Duration::from_secs(3));
    }

    #[test]
    fn floor_rows_and_the_harness_overhead() {
        let (_, floor) = drifting();
        let rows = floor.rows(RoundsStop::Precision, |_| None);
        let items: Vec<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
        assert_eq!(
            items,
            [
                "empty-kernel",
                "empty-graph",
                "empty-graph-2",
                "empty-graph-3",
                "d2h-int",
                "d2h-int-busy",
                "h2d-pinned",
                "h2d-pageable",
                "d2d-copy",
                "d2d-copy",
                "harness",
                "harness",
                HOST_REFERENCE
            ]
        );
        // 128 MiB a copy over 32 µs times the drift; inside a round the middle samples are
        // 1.001 times the level, and over rounds the median is between 1/1.05 and 1/1.0.
        let copy = rows
            .iter()
            .find(|r| r.arm == "d2d-copy" && r.metric == "gb_s")
            .unwrap();
        let expected = 134_217_728.0 / 32.0 / 1e3 / 1.001 * (1.0 / 1.05 + 1.0) / 2.0;
        assert!((copy.median / expected - 1.0).abs() < 1e-12, "{copy:?}");
        assert_eq!((copy.unit.as_str(), copy.rounds), ("GB/s", 6));
        assert!(rows.iter().all(|r| r.kind == KIND_FLOOR && r.rounds == 6));
        let overhead = find(&rows, HARNESS, "overhead_us");
        // 0.2 µs times the drift, formed round by round.
        assert!(
            (overhead.median - 0.2 * 1.001 * 1.025).abs() < 1e-9,
            "{overhead:?}"
        );
        assert!(overhead.ci_lo >= 0.9 * 0.2 && overhead.ci_hi <= 1.1 * 0.2 * 1.001 + 1e-12);
    }

    #[test]
    fn a_group_with_known_bytes_gets_bytes_and_bandwidth_rows() {
        let (mut group, floor) = drifting();
        group.bytes = Some(8_000);
        let rows = group.rows(&cells(), &floor, RoundsStop::Precision, &[None, None, None]);
        for arm in ARMS {
            let bytes = find(&rows, arm.name(), "bytes");
            assert_eq!(
                (bytes.median, bytes.ci_lo, bytes.ci_hi, bytes.unit.as_str()),
                (8000.0, 8000.0, 8000.0, "B"),
                "the same for every arm"
            );
            assert_eq!((bytes.rounds, bytes.stop_reason.as_str()), (6, "derived"));
            // 8 kB over the 4-µs device time (middle samples 1.001 times it): 2 GB/s.
            let gb_s = find(&rows, arm.name(), "gb_s");
            assert!((gb_s.median - 2.0 / 1.001).abs() < 1e-12, "{gb_s:?}");
            assert_eq!(
                (gb_s.unit.as_str(), gb_s.stop_reason.as_str()),
                ("GB/s", "precision")
            );
        }
        assert_eq!(metrics_of(&rows, "graph"), GRAPH_METRICS);
    }

    /// A group of the reading arms with eager-device: eager-sync 40 µs, eager-device 22,
    /// eager-pinned 31 and eager-mapped 27 µs, each times `drift(arm index, round drift)`.
    fn readers(drift: impl Fn(usize, f64) -> f64) -> (GroupRounds, Vec<CellId>) {
        let arms = [
            Arm::EagerSync,
            Arm::EagerDevice,
            Arm::EagerPinned,
            Arm::EagerMapped,
        ];
        let mut group = GroupRounds::new(Family::DsaDecode, &arms);
        for d in DRIFT {
            for (i, us) in [40.0, 22.0, 31.0, 27.0].into_iter().enumerate() {
                group.push(i, measurement(us * drift(i, d)).into());
            }
        }
        let cells = arms
            .iter()
            .map(|arm| CellId {
                arm: arm.name().into(),
                ..cells()[0].clone()
            })
            .collect();
        (group, cells)
    }

    #[test]
    fn every_reading_arm_gets_its_read_cost_against_eager_device() {
        let (group, cells) = readers(|_, d| d);
        let (_, floor) = drifting();
        let rows = group.rows(
            &cells,
            &floor,
            RoundsStop::Precision,
            &[None, None, None, None],
        );
        // Paired in each round: (arm − 22 µs) times the round's drift; the median of six
        // drifts is 1.025, each round's middle sample 1.001 times its level.
        for (arm, cost) in [
            ("eager-sync", 18.0),
            ("eager-pinned", 9.0),
            ("eager-mapped", 5.0),
        ] {
            let r = find(&rows, arm, "read_cost_us");
            assert!(
                (r.median - cost * 1.001 * 1.025).abs() < 1e-9,
                "{arm}: {r:?}"
            );
            assert_eq!(r.stop_reason, "derived");
        }
        // eager-sync's metrics, and the ratio over it.
        let mut like_sync = metrics_of(&rows, "eager-sync");
        like_sync.push(STEP_RATIO_VS_EAGER_SYNC);
        assert_eq!(metrics_of(&rows, "eager-pinned"), like_sync);
        let ratio = find(&rows, "eager-mapped", STEP_RATIO_VS_EAGER_SYNC);
        assert!((ratio.median - 27.0 / 40.0).abs() < 1e-12, "{ratio:?}");
        assert!(!rows
            .iter()
            .any(|r| r.arm == "eager-device" && r.metric == "read_cost_us"));
    }

    #[test]
    fn a_group_waits_for_its_least_precise_read_cost() {
        let rule = RoundsRule {
            min_rounds: 6,
            max_rounds: 8,
            step: StoppingRule {
                rel_ci: 0.2,
                ..StoppingRule::default()
            },
            time_cap: Duration::from_secs(60),
        };
        // Every cell steady but eager-mapped, whose ±10% drift leaves its 5-µs read cost
        // between 2.3 and 7.7 µs: the others' read costs are exact, and still no stop.
        let (group, _) = readers(|i, d| if i == 3 { d } else { 1.0 });
        assert_eq!(group.stop(&rule), None);
        let (steady, _) = readers(|_, _| 1.0);
        assert_eq!(steady.stop(&rule), Some(RoundsStop::Precision));
    }

    #[test]
    fn round_lines_give_each_rounds_median_in_order() {
        let (group, floor) = drifting();
        let lines = group.round_lines(&cells(), &[1, 1, 1, 2, 2, 2]);
        let of = |arm: &str, metric: &str| -> Vec<(u32, f64)> {
            lines
                .iter()
                .filter(|l| l.cell.arm == arm && l.metric == metric)
                .map(|l| (l.round, l.median))
                .collect()
        };
        // The middle of a round's samples (level, 1.001 level, 1.002 level, ...) is 1.001 level.
        let expected: Vec<(u32, f64)> = (1..)
            .zip(DRIFT)
            .map(|(round, d)| (round, 40.0 * d * 1.001))
            .collect();
        let got = of("eager-sync", "step_us");
        assert_eq!(got.len(), expected.len());
        for ((r, m), (er, em)) in got.iter().zip(&expected) {
            assert_eq!(r, er);
            assert!((m - em).abs() < 1e-9, "round {r}: {m} vs {em}");
        }
        assert_eq!(of("eager-sync", "host_blocked_us").len(), 6);
        assert!(
            of("graph", "host_blocked_us").is_empty(),
            "graph reads nothing"
        );
        assert!(lines.iter().all(|l| l.samples == 10));
        assert_eq!(
            lines.iter().filter(|l| l.process == 2).count() * 2,
            lines.len(),
            "rounds 4 to 6 in the second process"
        );
        let floor_lines = floor.round_lines(&[]);
        assert_eq!(floor_lines.len(), (FloorItem::ALL.len() + 2) * DRIFT.len());
        assert!(floor_lines
            .iter()
            .any(|l| l.cell.arm == HARNESS && l.round == 6));
        assert!(floor_lines
            .iter()
            .any(|l| l.cell.arm == HOST_REFERENCE && l.round == 6));
    }

    #[test]
    fn a_group_stops_by_its_rounds_rule() {
        let (group, floor) = drifting();
        let rule = RoundsRule {
            min_rounds: 6,
            max_rounds: 8,
            step: StoppingRule::default(),
            time_cap: Duration::from_secs(60),
        };
        // ±10% drift between rounds: far from ±1%, so not precise; more rounds.
        assert_eq!(group.stop(&rule), None);
        assert_eq!(floor.stop(&rule), None);
        let tight = RoundsRule {
            step: StoppingRule {
                rel_ci: 0.2,
                ..StoppingRule::default()
            },
            ..rule.clone()
        };
        // At ±20% the arms pass, and the read cost's ±1.8 µs on 18 µs does not.
        assert_eq!(group.stop(&tight), None);
        assert_eq!(floor.stop(&tight), Some(RoundsStop::Precision));
        let mut spent = group.clone();
        spent.elapsed = rule.time_cap;
        assert_eq!(spent.stop(&rule), Some(RoundsStop::TimeCap));
        let five = GroupRounds {
            by_arm: group
                .by_arm
                .iter()
                .map(|a| ArmRounds {
                    step: a.step[..5].to_vec(),
                    ..a.clone()
                })
                .collect(),
            ..spent
        };
        assert_eq!(five.rounds(), 5);
        assert_eq!(five.stop(&rule), None, "no stop before min rounds");
    }
}
