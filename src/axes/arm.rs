//! The ways to run one prep plan.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arm {
    /// The "before": reads `seq_lens` to the host each step (`.tolist()`), builds
    /// `[block] * bs` and the max length there, copies the list back, then launches.
    EagerSync,
    /// Device tensors only, eager launches: separates the sync's cost from launching's.
    EagerDevice,
    /// Device tensors only, captured once into a CUDA graph and replayed each step.
    Graph,
    /// The graph arm as merged in the engine's DSA draft-extend path: before each replay the
    /// host builds `[block] * bs` and copies it up from pageable memory (the kernels read
    /// that copy), where caching it as a device constant was suggested and not taken.
    GraphUpload,
    /// One kernel writing every output of the family, captured in a graph.
    Fused,
}

impl Arm {
    pub const ALL: [Arm; 5] = [
        Arm::EagerSync,
        Arm::EagerDevice,
        Arm::Graph,
        Arm::GraphUpload,
        Arm::Fused,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arm::EagerSync => "eager-sync",
            Arm::EagerDevice => "eager-device",
            Arm::Graph => "graph",
            Arm::GraphUpload => "graph-upload",
            Arm::Fused => "fused",
        }
    }

    /// True for the arm that reads device lengths to the host each step.
    pub fn reads_host(self) -> bool {
        self == Arm::EagerSync
    }

    pub fn uses_graph(self) -> bool {
        matches!(self, Arm::Graph | Arm::GraphUpload | Arm::Fused)
    }
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Arm::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            format!("unknown arm '{s}': use one of eager-sync, eager-device, graph, graph-upload, fused")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_rejected() {
        for arm in Arm::ALL {
            assert_eq!(arm.name().parse::<Arm>(), Ok(arm));
        }
        assert!("graphs".parse::<Arm>().unwrap_err().contains("eager-sync"));
    }
}
