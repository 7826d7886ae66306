//! Which rows the host's speed sets more than the GPU's, and the twin the sweep writes of each
//! such time: the same quantity per unit of host speed.
//!
//! On the H200 host the rows below moved 8–17% between two back-to-back runs and up to 58%
//! between processes while the GPU-paced rows held (results/2026-11-29-h200-rounds/,
//! results/2026-11-29-h200-read-landing/). The sweep times a fixed piece of CPU work
//! on the measuring core in every round ([`crate::axes::floor_item::HOST_REFERENCE`]), and
//! writes each host-paced time over that round's reference as a twin row (`<metric>` +
//! [`TwinReference::suffix`], unit `x`), formed inside each round like the other paired rows, so
//! a move of the whole host cancels in it. A graph arm's host issue is a replay's launch, whose
//! speed the CPU work does not follow: its twin is over the same round's one-node empty graph
//! ([`TwinReference::EmptyGraph`]). `compare` shows a row's raw change and its twin's side by
//! side.
//!
//! The GPU-paced times of the graph arms (`step_us`, `gpu_prep_us`) carry a draw of their own
//! per process: the GPU's pace at starting a graph's work, which the two-node empty graph
//! measures in the same round ([`TwinReference::EmptyGraph2`]). Their twin over it is what
//! `compare` reads where the raw change cannot tell the run from the process it ran in.

use crate::axes::floor_item::HOST_REFERENCE;
use crate::axes::{Arm, FloorItem};
use crate::results::csv::STEP_RATIO_VS_EAGER_SYNC;

/// What a host-paced time's twin is read over, in each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwinReference {
    /// The host-speed reference: fixed CPU work on the measuring core.
    HostWork,
    /// The one-node empty graph's replay: the host's launch path, which moves between runs
    /// while the CPU work does not (docs/h200-findings.md: the launch path in an A/A).
    EmptyGraph,
    /// The two-node empty graph's replay: the smallest graph whose step the GPU paces (the
    /// one-node graph's is the host's launch rate), a measure of how fast the GPU starts a
    /// graph's work. Over the 60 worker processes of four small-grid sweeps on the H200 the
    /// per-process level of fused's `step_us` correlated r = 0.78 with it (median cell; 0.31
    /// with the one-node graph, 0.03 with the empty kernel), graph's 0.47 at bs 8; over it,
    /// fused's step spread 1.73% from process to process at bs 8 where raw it spread 2.37%
    /// (results/2026-12-02-h200-four-process-aa/before/rounds-fused-graph-floor.csv.gz).
    EmptyGraph2,
}

impl TwinReference {
    pub const ALL: [TwinReference; 3] = [
        TwinReference::HostWork,
        TwinReference::EmptyGraph,
        TwinReference::EmptyGraph2,
    ];

    /// What the twin's metric adds to its row's: `step_us_per_host_ref`.
    pub fn suffix(self) -> &'static str {
        match self {
            TwinReference::HostWork => "_per_host_ref",
            TwinReference::EmptyGraph => "_per_empty_graph",
            TwinReference::EmptyGraph2 => "_per_empty_graph_2",
        }
    }

    /// The floor row (its `arm`) whose `step_us` the twin is over: `compare` reads the
    /// reference's own move from it.
    pub fn floor_arm(self) -> &'static str {
        self.floor_item().map_or(HOST_REFERENCE, FloorItem::name)
    }

    /// The floor item the twin is over; `None` for the host-speed reference, which is no
    /// floor item (the floor times it beside them).
    pub fn floor_item(self) -> Option<FloorItem> {
        match self {
            TwinReference::HostWork => None,
            TwinReference::EmptyGraph => Some(FloorItem::EMPTY_GRAPH),
            TwinReference::EmptyGraph2 => Some(FloorItem::EMPTY_GRAPH_2),
        }
    }

    /// Whether the rows it is the reference of are paced by the host (their twin tests a
    /// raw call) rather than by the GPU (their twin can show a change the raw row cannot).
    pub fn of_host_paced(self) -> bool {
        self != TwinReference::EmptyGraph2
    }
}

/// Whether a prep row's value is set by the host's speed more than by the GPU's: the host's
/// own times and the read cost, every metric of an eager arm (its launches pace its prep, and
/// eager-sync waits on a read) but eager-device's `step_fwd_us` and the bytes, and the ratios
/// over eager-sync, and fused's floor multiple (over a floor the host's launch rate paces).
/// Eager-device's step with the forward is the GPU's, prep and forward back
/// to back: in A/A pairs it was called only at batch 256, by about 1 µs, as the graph arms'
/// `step_fwd_us` there; it was `slower` in 48 of 48 cells for 2 µs more forward.
pub fn host_paced(arm: &str, metric: &str) -> bool {
    let arm = arm.parse::<Arm>().ok();
    let eager = arm.is_some_and(|arm| !arm.uses_graph());
    let gpu_paced_eager = arm == Some(Arm::EagerDevice) && metric == "step_fwd_us";
    // A floor multiple is paced by its floor too. Fused's floor is the one-node empty graph
    // (`FloorItem::of_cell`), a replay of no work whose step is the host's launch rate.
    let over_a_launch_floor = arm == Some(Arm::Fused) && metric == "floor_multiple";
    matches!(
        metric,
        "host_issue_us" | "host_blocked_us" | "read_cost_us" | STEP_RATIO_VS_EAGER_SYNC
    ) || over_a_launch_floor
        || (eager && metric != "bytes" && !gpu_paced_eager && twin_of(metric).is_none())
}

/// Whether the GPU paces an arm's step (its `step_us` is no host-paced row): the arms the
/// sweep gives rounds of their own past `--max-rounds` ([`crate::stats::stopping`]).
pub fn gpu_paced_arm(arm: Arm) -> bool {
    !host_paced(arm.name(), "step_us")
}

/// The reference the sweep writes a twin of this prep row over, if any: every host-paced time
/// has one (per unit of host speed; a graph arm's host issue is read over the launch path),
/// and so have a graph arm's GPU-paced step and device time (over the two-node empty graph;
/// not its step with the forward, which the forward's 20 µs set).
pub fn twin_reference(arm: &str, metric: &str) -> Option<TwinReference> {
    let graph_arm = arm.parse::<Arm>().is_ok_and(Arm::uses_graph);
    if !metric.ends_with("_us") {
        return None;
    }
    if !host_paced(arm, metric) {
        let gpu_time = matches!(metric, "step_us" | "gpu_prep_us");
        return (graph_arm && gpu_time).then_some(TwinReference::EmptyGraph2);
    }
    let replay = metric == "host_issue_us" && graph_arm;
    Some(match replay {
        true => TwinReference::EmptyGraph,
        false => TwinReference::HostWork,
    })
}

/// The twin's metric of `metric` over `reference`.
pub fn twin_metric(metric: &str, reference: TwinReference) -> String {
    format!("{metric}{}", reference.suffix())
}

/// The metric a twin is of and what it is over; `None` for a row that is not a twin.
pub fn twin_of(metric: &str) -> Option<(&str, TwinReference)> {
    TwinReference::ALL
        .into_iter()
        .find_map(|r| Some((metric.strip_suffix(r.suffix())?, r)))
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
            ("eager-sync", "step_us_per_host_ref"),
        ] {
            assert!(!host_paced(arm, metric), "{arm} {metric}");
        }
    }

    #[test]
    fn the_gpu_paces_the_graph_arms_and_fused() {
        let paced: Vec<Arm> = Arm::ALL.into_iter().filter(|&a| gpu_paced_arm(a)).collect();
        assert_eq!(paced, [Arm::Graph, Arm::GraphUpload, Arm::Fused]);
    }

    #[test]
    fn twins_are_of_host_paced_times_and_name_their_row_and_reference() {
        use TwinReference::*;
        assert_eq!(twin_reference("eager-sync", "read_cost_us"), Some(HostWork));
        assert_eq!(
            twin_reference("eager-device", "host_issue_us"),
            Some(HostWork)
        );
        for arm in ["graph", "graph-upload", "fused"] {
            assert_eq!(
                twin_reference(arm, "host_issue_us"),
                Some(EmptyGraph),
                "{arm}"
            );
        }
        assert_eq!(
            twin_reference("eager-sync", "gb_s"),
            None,
            "a bandwidth, not a time"
        );
        assert_eq!(twin_reference("graph", STEP_RATIO_VS_EAGER_SYNC), None);
        for arm in ["graph", "graph-upload", "fused"] {
            for metric in ["step_us", "gpu_prep_us"] {
                assert_eq!(
                    twin_reference(arm, metric),
                    Some(EmptyGraph2),
                    "{arm} {metric}"
                );
            }
            assert_eq!(
                twin_reference(arm, "step_fwd_us"),
                None,
                "the forward sets it"
            );
        }
        assert_eq!(twin_reference("eager-device", "step_fwd_us"), None);
        for (reference, twin) in [
            (HostWork, "host_issue_us_per_host_ref"),
            (EmptyGraph, "host_issue_us_per_empty_graph"),
            (EmptyGraph2, "host_issue_us_per_empty_graph_2"),
        ] {
            assert_eq!(twin_metric("host_issue_us", reference), twin);
            assert_eq!(twin_of(twin), Some(("host_issue_us", reference)));
        }
        assert_eq!(twin_of("host_issue_us"), None);
        assert_eq!(EmptyGraph.floor_arm(), "empty-graph");
        assert_eq!(EmptyGraph2.floor_arm(), "empty-graph-2");
        assert!(!host_paced("graph", "host_issue_us_per_empty_graph"));
        assert!(!host_paced("fused", "step_us_per_empty_graph_2"));
        assert!(HostWork.of_host_paced() && EmptyGraph.of_host_paced());
        assert!(!EmptyGraph2.of_host_paced());
    }
}
