//! The ways to run one prep plan.

use super::read_path::ReadPath;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
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
    /// eager-sync with the read done well: an asynchronous copy into pinned memory and a
    /// wait on an event recorded after it (`x.to("cpu", non_blocking=True)` then
    /// `event.synchronize()`); the same host-built list, page width and launches.
    EagerPinned,
    /// eager-sync with the lengths stored by a one-block kernel into mapped pinned host
    /// memory, with a sequence number the host polls for; the same list, width and launches.
    EagerMapped,
}

impl Arm {
    pub const ALL: [Arm; 7] = [
        Arm::EagerSync,
        Arm::EagerDevice,
        Arm::Graph,
        Arm::GraphUpload,
        Arm::Fused,
        Arm::EagerPinned,
        Arm::EagerMapped,
    ];

    /// The arms as tables and legends show them: from the "before" (and its better reads)
    /// to the closest to the floor.
    pub const SHOWN: [Arm; 7] = [
        Arm::EagerSync,
        Arm::EagerPinned,
        Arm::EagerMapped,
        Arm::EagerDevice,
        Arm::GraphUpload,
        Arm::Graph,
        Arm::Fused,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arm::EagerSync => "eager-sync",
            Arm::EagerDevice => "eager-device",
            Arm::Graph => "graph",
            Arm::GraphUpload => "graph-upload",
            Arm::Fused => "fused",
            Arm::EagerPinned => "eager-pinned",
            Arm::EagerMapped => "eager-mapped",
        }
    }

    /// How the arm brings device lengths to the host each step; `None` for the arms that
    /// keep them on the device.
    pub fn read_path(self) -> Option<ReadPath> {
        match self {
            Arm::EagerSync => Some(ReadPath::Pageable),
            Arm::EagerPinned => Some(ReadPath::Pinned),
            Arm::EagerMapped => Some(ReadPath::Mapped),
            Arm::EagerDevice | Arm::Graph | Arm::GraphUpload | Arm::Fused => None,
        }
    }

    /// True for the arms that read device lengths to the host each step (eager-sync and its
    /// pinned and mapped variants).
    pub fn reads_host(self) -> bool {
        self.read_path().is_some()
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
            let names: Vec<&str> = Arm::ALL.iter().map(|a| a.name()).collect();
            format!("unknown arm '{s}': use one of {}", names.join(", "))
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
        let e = "graphs".parse::<Arm>().unwrap_err();
        assert!(
            e.contains("eager-sync") && e.contains("eager-mapped"),
            "{e}"
        );
    }

    #[test]
    fn the_reading_arms_are_eager_and_each_has_its_own_path() {
        let readers: Vec<Arm> = Arm::ALL.into_iter().filter(|a| a.reads_host()).collect();
        assert_eq!(
            readers,
            [Arm::EagerSync, Arm::EagerPinned, Arm::EagerMapped]
        );
        assert!(readers.iter().all(|a| !a.uses_graph()));
        let paths: Vec<ReadPath> = readers.iter().filter_map(|a| a.read_path()).collect();
        assert_eq!(paths, ReadPath::ALL);
    }
}
