//! Which rows called `slower` fail the comparison (`compare --gate`).
//!
//! Between two runs a host-paced row carries the host's state of those minutes, which neither
//! its rounds nor worker processes sample (docs/h200-findings.md: gating two separate runs),
//! so a CI gates on what the GPU paces and reads the host-paced calls as the report gives
//! them, or runs `ab`.

use crate::results::pacing::host_paced;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Gate {
    /// Every row called `slower` fails the comparison.
    All,
    /// Only rows the GPU paces fail it (the graph arms' step, forward and prep times and
    /// bandwidths, graph's and graph-upload's floor multiples, eager-device's step with the
    /// forward); host-paced rows called `slower` are still reported, marked "not gated", with
    /// the smallest change they could see.
    #[default]
    GpuPaced,
}

impl Gate {
    /// Whether a row `slower` on `metric`, of `base_arm` in BASE and `new_arm` in NEW, fails
    /// the comparison.
    pub fn fails(self, base_arm: &str, new_arm: &str, metric: &str) -> bool {
        match self {
            Gate::All => true,
            Gate::GpuPaced => !host_paced(base_arm, metric) && !host_paced(new_arm, metric),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Gate::All => "all",
            Gate::GpuPaced => "gpu-paced",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_paced_gate_fails_only_rows_the_gpu_paces_on_both_sides() {
        for (arm, metric) in [("eager-sync", "step_us"), ("graph", "host_issue_us")] {
            assert!(Gate::All.fails(arm, arm, metric));
            assert!(!Gate::GpuPaced.fails(arm, arm, metric), "{arm} {metric}");
        }
        assert!(Gate::GpuPaced.fails("graph", "graph", "step_us"));
        assert!(Gate::GpuPaced.fails("eager-device", "eager-device", "step_fwd_us"));
        // Two arms: graph against eager-sync is host-paced on one side.
        assert!(!Gate::GpuPaced.fails("eager-sync", "graph", "step_us"));
    }
}
