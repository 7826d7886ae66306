//! What `metaprep sweep` keeps of each round, and the rows it gives once rounds stop.
//!
//! A *group* is the arms of one (family, layout, batch size, block size), visited back to
//! back in every round; the *floor* (its items and the harness) is measured at the start of
//! every round. Both keep their samples round by round. A cell's own metrics become rows with
//! [`CellId::rounds_row`] (median of the rounds' medians, interval between rounds); the
//! quantities users read as differences are formed inside each round, where their two sides
//! ran back to back or in the same round, with [`CellId::paired_row`]:
//! * `read_cost_us` (on each reading arm's cell: eager-sync, eager-pinned, eager-mapped):
//!   the arm's `step_us` − eager-device's;
//! * `step_ratio_vs_eager_sync` (every other arm): the arm's `step_us` / eager-sync's;
//! * `floor_multiple`: an arm's `step_us` / its launch floor's (empty kernel for eager arms,
//!   empty graph for graph arms) in the same round;
//! * `overhead_us` (the harness): the harness's `step_us` − the empty graph's.
//!
//! A prep cell also gets `bytes`, what its prep reads and writes (the same for every arm),
//! and `gb_s`, those bytes over each `gpu_prep_us` sample; the floor's d2d copy gets `gb_s`,
//! the ceiling they are read against ([`crate::harness::bandwidth`]).
//!
//! The floor also times the host-speed reference
//! ([`HOST_REFERENCE`](crate::axes::floor_item::HOST_REFERENCE), a fixed piece of CPU work on
//! the measuring core) every round: its own floor row, and env.json's note of each worker
//! process's host speed.
//!
//! A round's measurements travel as [`RoundResult`] (serde), so a round measured in a worker
//! process (`sweep --processes`) is kept exactly as one measured here.
//!
//! The records of a round live in `record`, a group's rounds in `group`, the floor's in
//! `floor`.

mod floor;
mod group;
mod record;

#[cfg(test)]
mod fixtures;

use crate::harness::rows::CellId;
use crate::results::csv::{CellKey, KIND_FLOOR};

pub use crate::axes::floor_item::HARNESS;
pub use floor::FloorRounds;
pub use group::GroupRounds;
pub use record::{ArmRound, FloorRound, GroupRound, RoundResult};

/// Rounds of samples: one list per round.
type Rounds = Vec<Vec<f64>>;

fn difference(a: f64, b: f64) -> f64 {
    a - b
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b
}

/// The cell of a floor item (or of [`HARNESS`]).
pub fn floor_cell(item: &str) -> CellId {
    CellId {
        key: CellKey::new(KIND_FLOOR, "floor", item, (1, 1), "tp1"),
        emulated: false,
    }
}
