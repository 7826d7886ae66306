//! The records one round's measurements travel as (serde), from a worker process or not.

use crate::harness::prep_cell::PrepMeasurement;
use serde::{Deserialize, Serialize};

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

/// One round of the floor: each item's samples in
/// [`FloorItem::ALL`](crate::axes::FloorItem::ALL)'s order, the harness's and the host-speed
/// reference's, and the time it took.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axes::Family;
    use crate::runs::sweep::rounds::fixtures::*;
    use crate::runs::sweep::rounds::{FloorRounds, GroupRounds};
    use crate::stats::rounds::ONE_PROCESS;
    use crate::stats::stopping::RoundsStop;
    use std::time::Duration;

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
            let rows = group_and_floor_rows(g, f, RoundsStop::MaxRounds, ONE_PROCESS);
            format!("{rows:?}")
        };
        assert_eq!(rows(&here, &floor_here), rows(&there, &floor_there));
        assert_eq!(there.elapsed, Duration::from_secs(3));
    }
}
