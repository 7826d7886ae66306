//! The floor items: the cheapest things a step can ask of the GPU, which an arm's cost is
//! read against (measured by `harness::floor`).

use crate::axes::Arm;

/// Bytes of the device-to-device copy, the bandwidth ceiling preps are read against: of the
/// order of the largest default-sweep prep (dsa_target_verify at bs 256, block 8 moves about
/// 47 MB), fixed so every run's ceiling is the same measurement, and its source and
/// destination together (128 MiB) well past an H100's or H200's 50 MB L2, so it runs at HBM
/// bandwidth. A prep whose bytes stay in L2 between steps may exceed it.
pub const D2D_COPY_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorItem {
    /// One empty kernel launch.
    EmptyKernel,
    /// One replay of a graph holding one empty kernel.
    EmptyGraph,
    /// One int device-to-host into pageable memory and a stream sync: the bare `.item()`.
    D2hInt,
    /// A small host-to-device copy from pinned memory.
    H2dPinned,
    /// A small host-to-device copy from pageable memory (`torch.tensor(list, device=...)`).
    H2dPageable,
    /// A [`D2D_COPY_BYTES`] device-to-device copy: the bandwidth ceiling.
    D2dCopy,
}

impl FloorItem {
    pub const ALL: [FloorItem; 6] = [
        FloorItem::EmptyKernel,
        FloorItem::EmptyGraph,
        FloorItem::D2hInt,
        FloorItem::H2dPinned,
        FloorItem::H2dPageable,
        FloorItem::D2dCopy,
    ];

    /// What an arm is read against: an empty graph replay for graph arms, an empty kernel
    /// launch for eager ones.
    pub fn of_arm(arm: Arm) -> FloorItem {
        if arm.uses_graph() {
            FloorItem::EmptyGraph
        } else {
            FloorItem::EmptyKernel
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FloorItem::EmptyKernel => "empty-kernel",
            FloorItem::EmptyGraph => "empty-graph",
            FloorItem::D2hInt => "d2h-int",
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
