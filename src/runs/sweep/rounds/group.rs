//! A group's arms round by round, when the group stops, and its rows.

use super::{difference, ratio, ArmRound, FloorRounds, GroupRound, Rounds};
use crate::axes::{Arm, Family, FloorItem};
use crate::harness::bandwidth::{bytes_row, gb_s_row};
use crate::harness::nvml::CellTelemetry;
use crate::harness::rows::{CellId, RoundLine};
use crate::results::csv::{Row, STEP_RATIO_VS_EAGER_SYNC};
use crate::results::pacing::{gpu_paced_arm, host_paced};
use crate::stats::rounds::{over_rounds, paired, Paired};
use crate::stats::stopping::{RoundsRule, RoundsStop};
use crate::stats::summary::Summary;
use std::time::Duration;

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

    /// What a GPU-paced arm's own rounds are taken to precision on: its step and its device
    /// time (`gb_s` is the bytes over the latter), each over its rounds.
    fn gpu_paced_metrics(&self, processes: &[u32]) -> [Option<Summary>; 2] {
        [
            over_rounds(&self.step, processes),
            over_rounds(&self.gpu_prep, processes),
        ]
    }
}

/// Whether a GPU-paced arm's own rounds leave `metric` out, so its rounds end with its
/// group's: the forward (they run none) and every host-paced time. Those rounds visit the
/// GPU-paced arms back to back, with no forward and no eager arm between them, to narrow the
/// GPU's intervals; a host time from them is taken in another setting than the group's and
/// would be held to intervals no host-paced row has (docs/h200-findings.md: host times from
/// the GPU-paced rounds).
fn group_rounds_only(arm: Arm, metric: &str) -> bool {
    metric == "step_fwd_us" || host_paced(arm.name(), metric)
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
    /// Why the group's rounds stopped and after how many, once they have.
    group_stop: Option<(RoundsStop, usize)>,
    /// Why each arm's rounds stopped, once they have: a host-paced arm's with its group's, a
    /// GPU-paced arm's by [`RoundsRule::gpu_paced_stop`].
    arm_stops: Vec<Option<RoundsStop>>,
}

impl GroupRounds {
    pub fn new(family: Family, arms: &[Arm]) -> Self {
        Self {
            family,
            arms: arms.to_vec(),
            by_arm: vec![ArmRounds::default(); arms.len()],
            elapsed: Duration::ZERO,
            bytes: None,
            group_stop: None,
            arm_stops: vec![None; arms.len()],
        }
    }

    /// Adds a round of `self.arms[index]`; none once that arm's rounds have stopped (a round
    /// visits a whole group, or every GPU-paced arm of it).
    pub fn push(&mut self, index: usize, m: ArmRound) {
        if self.arm_stops[index].is_some() {
            return;
        }
        // Past the group's rounds, only the metrics a GPU-paced arm's own rounds serve.
        let (group_round, arm) = (self.group_stop.is_none(), self.arms[index]);
        let a = &mut self.by_arm[index];
        for (metric, rounds, values) in [
            ("step_us", &mut a.step, Some(m.step)),
            ("step_fwd_us", &mut a.step_fwd, m.step_fwd),
            ("host_issue_us", &mut a.host_issue, Some(m.host_issue)),
            ("host_blocked_us", &mut a.host_blocked, Some(m.host_blocked)),
            ("gpu_prep_us", &mut a.gpu_prep, Some(m.gpu_prep)),
        ] {
            if let Some(v) = values.filter(|_| group_round || !group_rounds_only(arm, metric)) {
                rounds.push(v);
            }
        }
    }

    /// Adds a visit of the group: every arm's round, its bytes and its time.
    pub fn push_visit(&mut self, visit: GroupRound) {
        for (index, arm) in visit.arms {
            self.push(index, arm);
        }
        self.bytes = visit.bytes.or(self.bytes);
        self.elapsed += Duration::from_secs_f64(visit.seconds);
    }

    /// The group's own rounds, those every arm took: all of them until the group stops.
    fn group_round_count(&self) -> usize {
        self.group_stop.map_or(usize::MAX, |(_, rounds)| rounds)
    }

    /// Rounds every arm has measured: the group's own.
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
    /// `processes[r]` measured round `r` (the units of each interval:
    /// [`crate::stats::rounds::units`]).
    pub fn stop(&self, rule: &RoundsRule, processes: &[u32]) -> Option<RoundsStop> {
        let steps: Vec<_> = (self.by_arm.iter())
            .map(|a| over_rounds(&a.step, processes))
            .collect();
        let read_costs: Vec<Paired> = (self.arms.iter())
            .filter(|arm| arm.reads_host())
            .filter_map(|&arm| self.read_cost_sides(arm))
            .filter_map(|(own, device)| paired(own, device, difference, processes))
            .collect();
        rule.check(self.rounds(), &steps, &read_costs, self.elapsed)
    }

    /// After a round: whether every arm's rounds have stopped. Until the group's rounds stop
    /// ([`Self::stop`]) none has; then each host-paced arm stops with them, and each GPU-paced
    /// arm once [`RoundsRule::gpu_paced_stop`] says so.
    pub fn update(&mut self, rule: &RoundsRule, processes: &[u32]) -> bool {
        if self.group_stop.is_none() {
            self.group_stop = self.stop(rule, processes).map(|stop| (stop, self.rounds()));
        }
        let Some(group) = self.group_stop else {
            return false;
        };
        for ((&arm, a), stop) in self.arms.iter().zip(&self.by_arm).zip(&mut self.arm_stops) {
            if stop.is_none() {
                *stop = match gpu_paced_arm(arm) {
                    true => {
                        let metrics = a.gpu_paced_metrics(processes);
                        rule.gpu_paced_stop(group, a.step.len(), &metrics, self.elapsed)
                    }
                    false => Some(group.0),
                };
            }
        }
        self.arm_stops.iter().all(Option::is_some)
    }

    /// Why the group's rounds stopped, once they have.
    pub fn group_stop(&self) -> Option<RoundsStop> {
        self.group_stop.map(|(stop, _)| stop)
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
    /// paired with `floor`'s rounds of the same index. `stop` is the group's reason: each
    /// arm's rows say their arm's ([`Self::update`]; `stop` where none is known), but
    /// `step_fwd_us`, whose rounds are the group's. `processes[r]` measured round `r`.
    pub fn rows(
        &self,
        cells: &[CellId],
        floor: &FloorRounds,
        stop: RoundsStop,
        telemetry: &[Option<CellTelemetry>],
        processes: &[u32],
    ) -> Vec<Row> {
        let sync = self.step(Arm::EagerSync);
        let mut rows = Vec::new();
        let arms = self.arms.iter().zip(&self.by_arm).zip(&self.arm_stops);
        for ((((&arm, a), arm_stop), cell), t) in arms.zip(cells).zip(telemetry) {
            let t = t.as_ref();
            let own = arm_stop.unwrap_or(stop).as_str();
            for (metric, rounds) in a.measured(arm) {
                let reason = match group_rounds_only(arm, metric) {
                    true => stop.as_str(),
                    false => own,
                };
                rows.extend(cell.rounds_row(metric, "us", rounds, reason, t, processes));
            }
            if let Some(bytes) = self.bytes {
                rows.push(bytes_row(cell, bytes, a.step.len()));
                rows.extend(gb_s_row(cell, bytes, &a.gpu_prep, own, t, processes));
            }
            let floor_item = floor.item(FloorItem::of_cell(arm, self.family));
            let step = match group_rounds_only(arm, "floor_multiple") {
                true => &a.step[..self.group_round_count().min(a.step.len())],
                false => &a.step[..],
            };
            let sides = (step, floor_item);
            rows.extend(cell.paired_row("floor_multiple", "x", sides, ratio, t, processes));
            if let Some((own, device)) = self.read_cost_sides(arm).filter(|_| arm.reads_host()) {
                let sides = (own.as_slice(), device.as_slice());
                rows.extend(cell.paired_row(
                    "read_cost_us",
                    "us",
                    sides,
                    difference,
                    None,
                    processes,
                ));
            }
            if let Some(sync) = sync.filter(|_| arm != Arm::EagerSync) {
                rows.extend(cell.paired_row(
                    STEP_RATIO_VS_EAGER_SYNC,
                    "x",
                    (&a.step, sync),
                    ratio,
                    t,
                    processes,
                ));
            }
        }
        rows
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
