//! `metaprep validate`: a reference's untraced step times (an engine, or a loop written like
//! one) against `steps` run on the same grid with a host profile, in the same call.
//!
//! The reference is a CSV (scripts/metaprep_host.py `write_reference` writes it): one row per
//! (forward µs, batch size, block, arm) with the untraced median step time, and optionally
//! the host speed the engine's process had while that cell ran. Where a row has one and the
//! profile records its own, the model runs at the reference's host speed (`steps
//! --host-speed-us`); the model at the profile's own host speed is shown beside it ("raw").
//! A cell passes when every arm's step time is within `step_pct` of the reference and, where
//! both arms ran, eager-sync − graph within `diff_pct` of the reference's difference.
//!
//! A row with chunks (`chunk_host_speed_us`, `chunk_step_us`: the steps between two host-speed
//! probes, each at the probes' mean speed) is compared by "chunk mean": the model, run at the
//! cell's extreme chunk speeds and interpolated at each chunk's, against the chunks' median
//! steps, both averaged over chunks. Unlike one median of all steps, it follows a host whose
//! speed switches between levels (docs/calibration.md, "Host speed").
//!
//! With `--fit`, each arm's host factor (`arm_host_factors`) is fitted first at one untraced
//! cell recorded in its own process, with the same model and estimator, and the fitted
//! profile is validated.
//!
//! One concern per file: `reference` reads the reference CSV; `compare` holds each cell's
//! lines against it (the per-arm, chunk-mean and difference estimators, the pass bars);
//! `fit` fits the per-arm host factors over a model given as a closure; `fit_profile` and
//! `fit_post_wait` run those fits with `steps` runs of the fit cells; `run` models every cell
//! through a [`StepsRunner`] (the command line's `steps`) and writes the env.json; `render`
//! writes validation.csv and validation.md.

mod compare;
pub mod fit;
mod fit_post_wait;
mod fit_profile;
mod reference;
mod render;
mod run;
#[cfg(test)]
mod tests;

pub use compare::{
    cell_host_speed, chunk_run_speeds, compare_cell, interpolate, Bars, Line, ModelCell, ModelStep,
    Quantity, SPEED_MERGE,
};
pub use fit_post_wait::read_post_wait_fit;
pub use fit_profile::{read_fit, FitCell};
pub use reference::{Cell, Reference, ReferenceRow};
pub use render::{csv_text, markdown, passed, FitNote, PostWaitNote};
pub use run::{raw_run_dir, run, write_env, Fits, StepsRunner, Validation};
