//! The decode-step model: one speculative-decoding step is a host program (scheduler work →
//! draft metadata prep → draft forward → host work between phases → verify metadata prep →
//! verify forward → accept), run for real with the host one step ahead of the GPU.
//!
//! Pure CPU pieces live here, with the stand-in forward; the GPU step loop
//! (`runs::steps`) builds on them:
//! * `forward` — GPU stand-ins for a forward: a fixed-duration spin, or a kernel streaming
//!   the bytes one GPU's forward reads;
//! * `profile` — bytes a forward streams and its collectives move, per model profile;
//! * `memory` — the bytes one GPU holds, and which cells of a run fit its memory;
//! * `host_profile` — the host program of a step and its measured costs (JSON files);
//! * `program` — the program op by op, and a simulation of it for tests;
//! * `stop` — when a cell stops: rounds, until its arms against eager-sync are precise;
//! * `metrics` — ITL, throughput, forward occupancy and host-bound gap from a timeline;
//! * `trace` — a Chrome trace-event (Perfetto) writer for host and GPU timelines.

pub mod forward;
pub mod host_profile;
pub mod memory;
pub mod metrics;
pub mod nccl_collectives;
pub mod post_wait;
pub mod profile;
pub mod program;
pub mod stop;
pub mod trace;
