//! metaprep: what a host read of device sequence lengths costs a speculative-decoding step,
//! and what graph replay with device-only lengths wins back.
//!
//! The floors and the import rule are in ARCHITECTURE.md: `cli → runs → {harness, model,
//! prep} → gpu`; everything may use `results`, `stats` and `axes`; `report` reads `results`.
//!
//! `unsafe` is allowed in `gpu/` alone (the driver's and the host's C interfaces behind safe
//! wrappers); `scripts/check_unsafe.sh` also keeps `cudarc` there.

#![deny(unsafe_code)]
// Standard output through `out!`/`outln!`, which do not panic on a full disk.
#![deny(clippy::print_stdout)]

/// `metaprep --version`: the crate's version and the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("METAPREP_GIT_REV"),
    ")"
);

pub mod ab;
pub mod axes;
pub mod calibrate;
pub mod cli;
pub mod exit;
pub mod gaps;
#[allow(unsafe_code)]
pub mod gpu;
pub mod harness;
pub mod model;
pub mod prep;
pub mod report;
pub mod results;
pub mod runs;
pub mod stats;
