//! Which rows the host's speed sets more than the GPU's.
//!
//! On a host whose speed moves, the rows below move between runs and between processes while
//! the GPU-paced rows hold (docs/h200-findings.md: host-paced rows). `compare` gates only
//! GPU-paced rows by default ([`crate::report::compare::Gate`]); `ab` pairs the two sides in
//! time, so it can judge both.

use crate::axes::Arm;
use crate::results::csv::STEP_RATIO_VS_EAGER_SYNC;

/// Whether a row's value is set by the host's speed more than by the GPU's: the host's
/// own times and the read cost, a step's GPU idle (`gap_us`, `occupancy`: the GPU waits for
/// the host there, whatever the arm), every metric of an eager arm (its launches pace its prep, and
/// eager-sync waits on a read) but eager-device's `step_fwd_us` and the bytes, and the ratios
/// over eager-sync, and fused's floor multiple (over a floor the host's launch rate paces).
/// Eager-device's step with the forward is the GPU's, prep and forward back to back: A/A
/// pairs and a longer forward move it as they move the graph arms' `step_fwd_us`
/// (docs/h200-findings.md#which-rows-the-host-paces).
pub fn host_paced(arm: &str, metric: &str) -> bool {
    let arm = arm.parse::<Arm>().ok();
    let eager = arm.is_some_and(|arm| !arm.uses_graph());
    let gpu_paced_eager = arm == Some(Arm::EagerDevice) && metric == "step_fwd_us";
    // A floor multiple is paced by its floor too. Fused's floor is the one-node empty graph
    // (`FloorItem::of_cell`), a replay of no work whose step is the host's launch rate.
    let over_a_launch_floor = arm == Some(Arm::Fused) && metric == "floor_multiple";
    matches!(
        metric,
        "host_issue_us"
            | "host_blocked_us"
            | "read_cost_us"
            | "gap_us"
            | "occupancy"
            | STEP_RATIO_VS_EAGER_SYNC
    ) || over_a_launch_floor
        || (eager && metric != "bytes" && !gpu_paced_eager)
}

/// Whether the GPU paces an arm's step (its `step_us` is no host-paced row): the arms the
/// sweep gives rounds of their own past `--max-rounds` ([`crate::stats::stopping`]).
pub fn gpu_paced_arm(arm: Arm) -> bool {
    !host_paced(arm.name(), "step_us")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_paces_eager_arms_and_host_times_not_the_gpus_rows() {
        for (arm, metric) in [
            ("eager-sync", "step_us"),
            ("eager-sync", "step_fwd_us"),
            ("eager-sync", "gb_s"),
            ("eager-device", "gpu_prep_us"),
            ("graph", "host_issue_us"),
            ("fused", "host_issue_us"),
            ("eager-sync", "read_cost_us"),
            ("graph", STEP_RATIO_VS_EAGER_SYNC),
            ("fused", "floor_multiple"),
            ("graph-upload", "gap_us"),
            ("graph", "occupancy"),
        ] {
            assert!(host_paced(arm, metric), "{arm} {metric}");
        }
        for (arm, metric) in [
            ("eager-device", "step_fwd_us"),
            ("eager-sync", "bytes"),
            ("graph", "step_us"),
            ("fused", "gpu_prep_us"),
            ("graph", "gb_s"),
            ("graph", "floor_multiple"),
            ("graph-upload", "floor_multiple"),
        ] {
            assert!(!host_paced(arm, metric), "{arm} {metric}");
        }
    }

    #[test]
    fn the_gpu_paces_the_graph_arms_and_fused() {
        let paced: Vec<Arm> = Arm::ALL.into_iter().filter(|&a| gpu_paced_arm(a)).collect();
        assert_eq!(paced, [Arm::Graph, Arm::GraphUpload, Arm::Fused]);
    }
}
