//! Test fixtures of the sweep's rounds: drifting groups and floors, and row look-ups.

use super::{FloorRounds, GroupRounds};
use crate::axes::{Arm, Family, FloorItem};
use crate::harness::prep_cell::PrepMeasurement;
use crate::harness::rows::CellId;
use crate::harness::sampling::Sampled;
use crate::results::csv::{CellKey, Row, KIND_PREP, STEP_RATIO_VS_EAGER_SYNC};
use crate::stats::rounds::ONE_PROCESS;
use crate::stats::stopping::{RoundsRule, RoundsStop, StopReason, StoppingRule};

/// A round's samples around `level`, tight inside the round.
pub(super) fn samples(level: f64) -> Vec<f64> {
    (0..10)
        .map(|i| level * (1.0 + 0.001 * (i % 3) as f64))
        .collect()
}

pub(super) fn measurement(step: f64) -> PrepMeasurement {
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

pub(super) const ARMS: [Arm; 3] = [Arm::EagerSync, Arm::EagerDevice, Arm::Graph];
/// The graph arm's rows of a group whose bytes are known, in order.
pub(super) const GRAPH_METRICS: [&str; 8] = [
    "step_us",
    "step_fwd_us",
    "host_issue_us",
    "gpu_prep_us",
    "bytes",
    "gb_s",
    "floor_multiple",
    STEP_RATIO_VS_EAGER_SYNC,
];
/// The host's drift, round by round: ±10% around 1, the same for every cell of a round.
pub(super) const DRIFT: [f64; 6] = [1.0, 1.1, 0.92, 1.05, 0.9, 1.08];

pub(super) fn cells() -> Vec<CellId> {
    ARMS.iter()
        .map(|arm| CellId {
            key: CellKey::new(KIND_PREP, "dsa_decode", arm.name(), (8, 5), "tp1"),
            emulated: false,
        })
        .collect()
}

/// One round of the floor at drift `d`: the items of [`drifting`] and the host reference,
/// each at its level times `d`.
pub(super) fn push_floor_round(floor: &mut FloorRounds, d: f64) {
    for (item, us) in FloorItem::ALL
        .iter()
        .zip([2.0, 2.5, 5.0, 6.0, 9.0, 17.0, 3.0, 4.0, 32.0])
    {
        floor.push(*item, samples(us * d));
    }
    floor.push_harness(samples(2.7 * d));
    floor.push_host_reference(samples(1.25 * d));
}

/// Rounds stopping at six for the group, nine for a GPU-paced arm, at ±0.7%.
pub(super) fn rule_past_max() -> RoundsRule {
    RoundsRule {
        min_rounds: 6,
        max_rounds: 6,
        step: StoppingRule::default(),
        time_cap: std::time::Duration::from_secs(60),
        gpu_paced_max_rounds: 9,
        gpu_paced_rel_ci: 0.007,
    }
}

/// Six rounds in which every cell drifts by [`DRIFT`]: eager-sync 40 µs, eager-device
/// 22 µs, graph 10 µs, the empty kernel 2 µs, the empty graphs of 1, 2 and 3 nodes 2.5, 5
/// and 6 µs, the reads on an idle and a busy GPU 9 and 17 µs, the d2d copy 32 µs, the
/// harness 2.7 µs, the host-speed reference 1.25 µs a unit.
pub(super) fn drifting() -> (GroupRounds, FloorRounds) {
    drifting_by(&DRIFT)
}

/// [`drifting`]'s cells, drifting by `levels` round by round.
pub(super) fn drifting_by(levels: &[f64]) -> (GroupRounds, FloorRounds) {
    let mut group = GroupRounds::new(Family::DsaDecode, &ARMS);
    let mut floor = FloorRounds::default();
    for &d in levels {
        push_floor_round(&mut floor, d);
        for (i, us) in [40.0, 22.0, 10.0].into_iter().enumerate() {
            group.push(i, measurement(us * d).into());
        }
    }
    (group, floor)
}

/// `group`'s rows over [`cells`] and `floor`, without telemetry, every round in one
/// process.
pub(super) fn rows_of(group: &GroupRounds, floor: &FloorRounds, stop: RoundsStop) -> Vec<Row> {
    group.rows(&cells(), floor, stop, &[None, None, None], ONE_PROCESS)
}

/// `group`'s rows over [`cells`] and then `floor`'s, without telemetry, `processes[r]`
/// having measured round `r`.
pub(super) fn group_and_floor_rows(
    group: &GroupRounds,
    floor: &FloorRounds,
    stop: RoundsStop,
    processes: &[u32],
) -> Vec<Row> {
    let mut rows = group.rows(&cells(), floor, stop, &[None, None, None], processes);
    rows.extend(floor.rows(stop, |_| None, processes));
    rows
}

pub(super) fn find<'a>(rows: &'a [Row], arm: &str, metric: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.arm == arm && r.metric == metric)
        .unwrap_or_else(|| panic!("no {arm} {metric}"))
}

/// The metrics of `arm`'s rows, in row order.
pub(super) fn metrics_of<'a>(rows: &'a [Row], arm: &str) -> Vec<&'a str> {
    rows.iter()
        .filter(|r| r.arm == arm)
        .map(|r| r.metric.as_str())
        .collect()
}
