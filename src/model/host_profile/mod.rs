//! Host profiles: what the host does in one decode step, and what each piece costs, as a
//! serving framework runs it; the step is a host program the step loop runs for real. The
//! JSON schema, field by field: host-profiles/README.md.
//!
//! One concern per file: the types here; `load` (built-in profiles, files,
//! JSON); `well_formed` (what a profile must hold); `program` (the program's items, its
//! phases and their families, a step's items); `costs` (what an item, prep or read costs);
//! `scaling` (the what-if host scale, another measured host speed, an arm's host factor).

#[cfg(test)]
mod arm_factor_tests;
mod costs;
mod load;
mod program;
mod scaling;
#[cfg(test)]
mod tests;
mod well_formed;

pub use load::BUILT_IN;
pub use program::{
    expand_passes, family_of, first_launching_op, phases_of, prep_arm, Item,
    EAGLE_GPU_ITEMS_IN_ORDER, GPU_ITEMS_IN_ORDER, STEP_FAMILIES,
};
pub use scaling::MAX_HOST_SPEED_US;

use crate::model::post_wait::PostWait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A value and the measurement (or citation) it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

/// What an arm's prep issues on the host for one family, besides the plan's own kernels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ArmOps {
    /// Framework ops issued (reads not counted).
    pub ops: u32,
    /// How many of the ops launch a GPU kernel.
    #[serde(default)]
    pub launches: u32,
    /// Host reads of device values (`.tolist()`, `.item()`); eager-sync only.
    #[serde(default)]
    pub reads: u32,
    /// Ops issued before the first read.
    #[serde(default)]
    pub ops_before_read: u32,
    /// This prep's own mean host µs per op, when measured; else the profile's `op_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_us: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrepOps {
    pub source: String,
    pub eager_sync: ArmOps,
    pub eager_device: ArmOps,
    /// Host ops around a graph replay (copies into static inputs), for graph and fused.
    #[serde(default)]
    pub graph: ArmOps,
    /// graph-upload's host ops around its upload and replay (the copy of the uploaded list
    /// into the graph's input, ...), the upload itself not counted; absent: `graph`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_upload: Option<ArmOps>,
    /// GPU µs one of this prep's framework kernels takes (its graph replay's GPU time over
    /// its launching ops), when measured; else the profile's `kernel_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_us: Option<f64>,
    /// The same, measured at several per-GPU batch sizes (bigger batches, bigger kernels);
    /// between two of them linear in the batch size, beyond them the nearest. Takes
    /// precedence over `kernel_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_us_by_batch: Option<BTreeMap<u32, f64>>,
}

/// Which prep of a step: DSpark's draft block and the verify; EAGLE's draft passes' DSA
/// decode, the verify and the draft-extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Draft,
    Verify,
    Decode,
    Extend,
}

/// Which forward of a step: the draft model's (a DSpark block or an EAGLE pass), the
/// target's verify, or the draft model's draft-extend over the verified tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardOf {
    Draft,
    Verify,
    Extend,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostProfile {
    pub name: String,
    pub source: String,
    pub op_us: Sourced<f64>,
    /// GPU µs of one small framework kernel; 0 launches an empty kernel.
    pub kernel_us: Sourced<f64>,
    pub read_us: Sourced<f64>,
    pub graph_launch_us: Sourced<f64>,
    pub upload_us: Sourced<f64>,
    pub upload_syncs: Sourced<bool>,
    /// The host speed the framework costs above were taken at: µs per op of a pass of 24
    /// varied small CUDA ops with no profiler running, in the process that was measured
    /// (scripts/metaprep_host.py `host_speed()`). With it, [`HostProfile::at_host_speed`]
    /// moves the costs to another measured host speed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_speed_us: Option<Sourced<f64>>,
    pub preps: BTreeMap<String, PrepOps>,
    pub program: Vec<Item>,
    /// `read_us` of eager-pinned's read path, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_read_us: Option<Sourced<f64>>,
    /// `read_us` of eager-mapped's read path, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapped_read_us: Option<Sourced<f64>>,
    /// The EAGLE step (`steps --drafter eagle`), when the profile models it: its host
    /// segments, its `draft_passes` groups and the three DSA preps' items. `program` is
    /// DSpark's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eagle_program: Option<Vec<Item>>,
    /// What framework calls cost extra right after the host waited, by the wait's length
    /// (at `host_speed_us`), when measured: `steps` adds it after every read, syncing copy
    /// and gap in the host program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_wait: Option<Sourced<PostWait>>,
    /// The scale `validate --fit-post-wait` fitted, already in `post_wait`'s extras: kept so a
    /// later fit starts from the table `calibrate` wrote ([`HostProfile::without_fits`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_wait_scale: Option<Sourced<f64>>,
    /// Per arm (by its name, `eager-device`), a factor on every host duration of that arm's
    /// step ([`HostProfile::for_arm`]): fitted where the arm's traced costs, each deflated in
    /// its own trace process, miss an untraced run of the engine (`validate --fit`). An arm
    /// not listed runs at 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_host_factors: Option<BTreeMap<String, Sourced<f64>>>,
}
