//! The decode-step model: one speculative-decoding step is host scheduler work → draft
//! metadata prep → draft forward → verify metadata prep → verify forward → accept.
//!
//! Pure CPU pieces live here; the GPU step loop builds on them:
//! * `layout` — TP / DEP layouts, per-GPU batch, emulation when GPUs are short;
//! * `profile` — bytes a forward streams and its collectives move, per model profile;
//! * `metrics` — ITL, throughput, forward occupancy and host-bound gap from a timeline;
//! * `trace` — a Chrome trace-event (Perfetto) writer for host and GPU timelines.

pub mod forward;
pub mod layout;
pub mod metrics;
pub mod profile;
pub mod run;
pub mod trace;
