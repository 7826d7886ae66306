//! The floor items: the cheapest things a step can ask of the GPU, which an arm's cost is
//! read against (measured by `harness::floor`).

use crate::axes::{Arm, Family};
use std::str::FromStr;

/// Bytes of the device-to-device copy, the bandwidth ceiling preps are read against: of the
/// order of the largest default-sweep prep (dsa_target_verify at bs 256, block 8 moves about
/// 47 MB), fixed so every run's ceiling is the same measurement, and its source and
/// destination together (128 MiB) well past an H100's or H200's 50 MB L2, so it runs at HBM
/// bandwidth. A prep whose bytes stay in L2 between steps may exceed it.
pub const D2D_COPY_BYTES: usize = 64 << 20;

/// GPU work the `d2h-int-busy` read is queued behind, in µs: long enough that the read is
/// always issued while it runs, short against the steps such a read completes in
/// (docs/read-paths.md).
pub const BUSY_BEFORE_READ_US: f64 = 2.0;

/// The floor row of the host-speed reference: a fixed piece of CPU work timed on the measuring
/// thread's core in every round of a sweep (`harness::host_reference`). Not a GPU item: a
/// floor cell beside the items, as the sweep's `harness` row is.
pub const HOST_REFERENCE: &str = "host-ref";
/// The `arm` of the floor row that runs the bare empty graph through the measuring harness:
/// the harness's own per-step overhead. Not a floor item, but a floor row.
pub const HARNESS: &str = "harness";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorItem {
    /// One empty kernel launch.
    EmptyKernel,
    /// One replay of a graph holding this many empty kernels in a chain (each depends on the
    /// one before, as a stream capture of the staged prep makes them): what a graph arm's
    /// replay costs with nothing inside its nodes. One node: the plain empty graph.
    EmptyGraphNodes(u8),
    /// One int device-to-host into pageable memory and a stream sync: the bare `.item()`.
    D2hInt,
    /// The same read queued behind [`BUSY_BEFORE_READ_US`] of running GPU work, as an
    /// engine's read lands behind the forward, which a read on an idle GPU does not show
    /// (docs/read-paths.md).
    D2hIntBusy,
    /// A small host-to-device copy from pinned memory.
    H2dPinned,
    /// A small host-to-device copy from pageable memory (`torch.tensor(list, device=...)`).
    H2dPageable,
    /// A [`D2D_COPY_BYTES`] device-to-device copy: the bandwidth ceiling.
    D2dCopy,
}

impl FloorItem {
    /// One replay of a graph holding one empty kernel.
    pub const EMPTY_GRAPH: FloorItem = FloorItem::EmptyGraphNodes(1);
    /// The two-node empty graph: the smallest graph whose replay the GPU paces.
    pub const EMPTY_GRAPH_2: FloorItem = FloorItem::EmptyGraphNodes(2);

    pub const ALL: [FloorItem; 9] = [
        FloorItem::EmptyKernel,
        FloorItem::EMPTY_GRAPH,
        FloorItem::EMPTY_GRAPH_2,
        FloorItem::EmptyGraphNodes(3),
        FloorItem::D2hInt,
        FloorItem::D2hIntBusy,
        FloorItem::H2dPinned,
        FloorItem::H2dPageable,
        FloorItem::D2dCopy,
    ];

    /// What an arm's prep of `family` is read against, like with like: an empty kernel
    /// launch for eager arms, and for arms that replay a graph an empty graph with as many
    /// kernel nodes as theirs (the fused arm's holds one kernel, the staged graph arms' one
    /// per stage of the family).
    pub fn of_cell(arm: Arm, family: Family) -> FloorItem {
        match arm {
            _ if !arm.uses_graph() => FloorItem::EmptyKernel,
            Arm::Fused => FloorItem::EMPTY_GRAPH,
            _ => FloorItem::EmptyGraphNodes(family.stages().len() as u8),
        }
    }

    /// What arms were read against before the floor had graphs of several nodes (runs
    /// without `empty-graph-N` rows): the one-node empty graph for every graph arm.
    pub fn of_arm_one_node(arm: Arm) -> FloorItem {
        if arm.uses_graph() {
            FloorItem::EMPTY_GRAPH
        } else {
            FloorItem::EmptyKernel
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FloorItem::EmptyKernel => "empty-kernel",
            FloorItem::EmptyGraphNodes(1) => "empty-graph",
            FloorItem::EmptyGraphNodes(2) => "empty-graph-2",
            FloorItem::EmptyGraphNodes(3) => "empty-graph-3",
            FloorItem::EmptyGraphNodes(4) => "empty-graph-4",
            FloorItem::EmptyGraphNodes(_) => "empty-graph-n",
            FloorItem::D2hInt => "d2h-int",
            FloorItem::D2hIntBusy => "d2h-int-busy",
            FloorItem::H2dPinned => "h2d-pinned",
            FloorItem::H2dPageable => "h2d-pageable",
            FloorItem::D2dCopy => "d2d-copy",
        }
    }

    /// Bytes one step reads and writes, for items whose bandwidth is reported (`gb_s`).
    pub fn bytes_moved(self) -> Option<u64> {
        match self {
            FloorItem::D2dCopy => Some(2 * D2D_COPY_BYTES as u64),
            _ => None,
        }
    }
}

impl FromStr for FloorItem {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FloorItem::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = FloorItem::ALL.iter().map(|i| i.name()).collect();
                format!("unknown floor item '{s}': use one of {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_graph_cell_has_its_node_count_in_the_floor() {
        for family in Family::ALL {
            for arm in Arm::ALL {
                let item = FloorItem::of_cell(arm, family);
                assert!(FloorItem::ALL.contains(&item), "{arm} {family}: {item:?}");
                assert_ne!(item.name(), "empty-graph-n");
            }
        }
        assert_eq!(
            FloorItem::of_cell(Arm::Graph, Family::DsparkDraftBlock),
            FloorItem::EmptyGraphNodes(3)
        );
        assert_eq!(
            FloorItem::of_cell(Arm::GraphUpload, Family::DsaDecode),
            FloorItem::EmptyGraphNodes(2)
        );
        assert_eq!(
            FloorItem::of_cell(Arm::Fused, Family::DsaDecode),
            FloorItem::EMPTY_GRAPH
        );
        assert_eq!(
            FloorItem::of_cell(Arm::EagerSync, Family::DsaDecode),
            FloorItem::EmptyKernel
        );
    }

    #[test]
    fn floor_names_are_distinct() {
        let mut names: Vec<_> = FloorItem::ALL.iter().map(|i| i.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FloorItem::ALL.len());
        for item in FloorItem::ALL {
            assert_eq!(item.name().parse::<FloorItem>(), Ok(item));
        }
        let e = HARNESS.parse::<FloorItem>().unwrap_err();
        assert!(e.contains("'harness'") && e.contains("d2d-copy"), "{e}");
    }
}
