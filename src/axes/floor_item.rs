//! The floor items: the cheapest things a step can ask of the GPU, which an arm's cost is
//! read against (measured by `harness::floor`).

use crate::axes::Arm;

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
}

impl FloorItem {
    pub const ALL: [FloorItem; 5] = [
        FloorItem::EmptyKernel,
        FloorItem::EmptyGraph,
        FloorItem::D2hInt,
        FloorItem::H2dPinned,
        FloorItem::H2dPageable,
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
        }
    }
}
