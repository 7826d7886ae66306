//! The decode-step model on the GPU: the host program of a
//! [`HostProfile`](crate::model::host_profile::HostProfile) (its items:
//! [`HostProfile::step_items`](crate::model::host_profile::HostProfile::step_items)) run for
//! real with the host allowed one step ahead of the GPU, as an overlap scheduler does. Host
//! segments are busy-waits, launches and reads are real: whatever a read exposes shows on
//! the GPU timeline by itself.
//!
//! Each cell runs twice:
//! * a clean pass, one CUDA event per step (the one the one-step-ahead rule waits on, so it
//!   costs nothing extra): step wall times and completions on the device clock give ITL and
//!   throughput;
//! * a timeline pass timed by `--timer` (see [`crate::harness::timer`]): GPU busy intervals
//!   give forward occupancy (per step, 1 - gap / step wall time, so it has a median and an
//!   interval), the host-bound gap and, for the traced cell, the Perfetto trace. With CUDA
//!   events (ten a step) a prep phase is marked from its first launch (for eager-sync: after
//!   the host read, the list and its copy) to its last kernel's end, so for eager arms the
//!   gaps between their own launches fall inside it; with CUPTI every kernel and copy is its
//!   own interval.
//!
//! A process runs one rank. Alone, a layout wider than one GPU is emulated (the collective
//! is a busy-wait sized by the bytes it would move). As a worker of a world
//! ([`crate::runs::ranks`] starts one per GPU), the rank runs this same loop on its own GPU
//! and stream, the forward's collectives are real NCCL calls captured into the forward's
//! graph, and every decision that could differ between ranks is agreed
//! ([`RankWorld`](crate::runs::rank_world::RankWorld)).
//!
//! One concern a file, in the order a run meets them: `config` (what a run is asked, the
//! cells it plans), `run` (the loop over cells, host scales, rounds and timelines) and
//! `notes` (what it writes into env.json about itself); `make` (a cell built: inputs,
//! forwards, preps, and its arms made ready at a host, each factored arm at its own), `cell`
//! (one step of an arm's program run, each prep's host actions inside it), `host_costs` (host
//! costs as durations, busy-waits, framework ops), `forward` (the forward stand-ins),
//! `passes` (the clean, checked and timeline passes over a cell), `rows` (a cell's rounds
//! into CSV rows) and `checked_run` (every prep of every step against the CPU reference, for
//! the GPU tests); `bursts` (the grid held ready for `ab`'s short bursts).

mod bursts;
mod cell;
mod checked_run;
mod config;
mod forward;
mod host_costs;
mod make;
mod notes;
mod passes;
mod rows;
mod run;

pub use bursts::{burst_cells, one_host_scale, with_bursts, StepBurst, StepBursts};
pub use checked_run::{check_steps, StepCheck};
pub use config::{plan, Cell, StepsConfig, TraceRequest};
pub(crate) use notes::model_name;
pub use rows::window_throughput;
pub use run::{run, StepsOutcome};
