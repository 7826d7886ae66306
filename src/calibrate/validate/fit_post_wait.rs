//! `validate --fit-post-wait LONG.csv`: the post-wait table's scale fitted at the one cell of
//! LONG.csv, a long forward, on eager-sync − graph, after `--fit`'s arm factors.
//!
//! Why: the table's shape is metaprep_host.py's probe (a `.item()` behind a sleep kernel, then
//! 97 synthetic ops), and its size does not transfer to an engine's own ops
//! (docs/h200-findings.md: post-wait cost).
//! The extras are the only host cost that grows with the forward, so a cell whose reads wait
//! long measures their scale; the arm factors are fitted where the reads wait little.

use super::fit::{fit_factors, in_turns, ArmFit, DIFF_TOLERANCE, MAX_ITERATIONS};
use super::fit_profile::{
    fit_outcome, fit_phrase, fit_profile, fit_run, read_one_cell, run_name, sourced, FitCell,
    FITTED_PROFILE,
};
use super::run::Model;
use super::{Bars, FitNote, Line, PostWaitNote, Quantity};
use crate::axes::Arm;
use crate::model::host_profile::HostProfile;
use crate::results::atomic::write_atomic;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// What to run for a --fit-post-wait file, for the refusals.
const RECIPE: &str = "record one untraced cell with eager-sync and graph at a long forward, \
    in its own process: scripts/reference_loop.py --no-traces --forward-us 3000 \
    --batch-sizes 1 --out fit-long/ (or calibrate_torch.py the same way), and pass \
    --fit-post-wait fit-long/reference.csv";

/// The one factor this fit moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PostWaitScale;

impl std::fmt::Display for PostWaitScale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("post-wait scale")
    }
}

/// `path` read as a --fit-post-wait file: one cell with eager-sync and graph, at a longer
/// forward than `fit`'s (the arm factors' cell).
pub fn read_post_wait_fit(path: &Path, fit: &FitCell) -> Result<FitCell> {
    let why = "the scale is fitted on eager-sync − graph";
    let long = read_one_cell(
        path,
        "--fit-post-wait",
        &[Arm::EagerSync, Arm::Graph],
        why,
        RECIPE,
    )?;
    if long.cell.forward_us <= fit.cell.forward_us {
        bail!(
            "--fit-post-wait {}: its forward ({} µs) is not longer than --fit's ({} µs): the \
             post-wait scale is fitted where the reads wait long, the host factors where they \
             wait little; {RECIPE}",
            path.display(),
            long.cell.forward_us,
            fit.cell.forward_us
        );
    }
    Ok(long)
}

/// `profile` (no scale fitted yet) with its post-wait extras times `scale`, recorded with
/// `why` as its `post_wait_scale`.
fn scaled(profile: &HostProfile, scale: f64, why: &str) -> Result<HostProfile> {
    let mut p = profile.clone();
    p.post_wait
        .as_mut()
        .context("the profile has no post_wait table to scale")?
        .value
        .scale(scale);
    p.post_wait_scale = Some(sourced(scale, why.to_string()));
    Ok(p)
}

/// `--fit` with `--fit-post-wait`: the arm factors at `factors`' cell and the post-wait scale
/// at `long`'s fitted in turns ([`in_turns`]), each pass fitting the factors on `base` (no
/// fits) with the scale of the pass before, then the scale with those factors. Returns
/// what validation.md says of the last pass; the fitted profile is in `out` as
/// [`FITTED_PROFILE`].
pub(super) fn fit_in_turns(
    model: Model,
    base: &HostProfile,
    factors: &FitCell,
    long: &FitCell,
    own_speed: Option<f64>,
    bars: Bars,
    out: &Path,
) -> Result<FitNote> {
    let turns = in_turns(1.0, |pass, scale| {
        let start = match pass {
            1 => base.clone(),
            _ => scaled(base, scale, &format!("the scale pass {} fitted", pass - 1))?,
        };
        let (fitted, mut note) = fit_profile(model, &start, pass, factors, own_speed, bars, out)?;
        // Each of its runs names its own profile: the fitted one with a scaled table.
        let (pw, unconverged, scale) =
            fit_post_wait(model, &fitted, pass, long, own_speed, bars, out)?;
        note.post_wait = Some(pw);
        note.unconverged.extend(unconverged);
        Ok((scale, note))
    })?;
    Ok(turns.last)
}

/// Fits the post-wait scale of `fitted` (the profile [`fit_profile`] wrote in pass `pass`, its
/// arm factors in it) at `long`'s cell, and writes the profile with the scaled table in its
/// place. Returns what validation.md says, the unconverged phrase if no run came within
/// `DIFF_TOLERANCE`, and the scale.
fn fit_post_wait(
    model: Model,
    fitted: &HostProfile,
    pass: usize,
    long: &FitCell,
    own_speed: Option<f64>,
    bars: Bars,
    out: &Path,
) -> Result<(PostWaitNote, Option<String>, f64)> {
    // The arm fit ran with the table of the pass before; the scale is fitted on the table as
    // calibrate wrote it. The table's presence was checked before any GPU work, and `scaled`
    // names a missing one.
    let profile = fitted.with_post_wait_as_calibrated();
    let at = long.cell.to_string();
    let mut runs: Vec<Line> = Vec::new();
    let fits = fit_factors(&[PostWaitScale], DIFF_TOLERANCE, |scales| {
        let n = runs.len() + 1;
        let k = scales[&PostWaitScale];
        let run = format!("post-wait fit run {n} of {MAX_ITERATIONS}");
        let profile = scaled(&profile, k, &run)?;
        let name = run_name(pass, &format!("post-wait-run{n}"));
        let lines = fit_run(model, &profile, long, &name, own_speed, bars, out)?;
        let diff = lines
            .into_iter()
            .find(|l| l.quantity == Quantity::SyncMinusGraphUs)
            .context("the post-wait fit cell gave no eager-sync − graph line")?;
        eprintln!(
            "validate --fit-post-wait: run {n} at {at}: x{k:.4} {:+.2}%",
            diff.error_pct
        );
        let e = diff.error_pct / 100.0;
        runs.push(diff);
        Ok(BTreeMap::from([(PostWaitScale, e)]))
    })
    .with_context(|| {
        format!(
            "--fit-post-wait {}: fitting the post-wait scale at {at}",
            long.file.display()
        )
    })?;
    let f = fits[&PostWaitScale];
    let line = &runs[f.run as usize - 1];
    let why = source(long, &at, line, &f);
    let path = out.join(FITTED_PROFILE);
    write_atomic(
        &path,
        scaled(&profile, f.factor, &why)?.to_json().as_bytes(),
    )?;
    eprintln!(
        "validate --fit-post-wait: wrote {} (post-wait x{:.3})",
        path.display(),
        f.factor
    );
    let unconverged =
        (!f.converged).then(|| format!("the post-wait scale ({:+.2}% at best)", f.error * 100.0));
    let note = PostWaitNote {
        file: long.file.display().to_string(),
        cell: long.cell,
        phrase: fit_phrase(&f, "eager-sync − graph does not follow the scale there"),
        passes: pass,
    };
    Ok((note, unconverged, f.factor))
}

/// Where the scale came from: the file and cell, the reference's and the model's
/// eager-sync − graph, and the runs it took.
fn source(long: &FitCell, at: &str, line: &Line, f: &ArmFit) -> String {
    let outcome = fit_outcome(f, DIFF_TOLERANCE, |u| {
        format!(
            "kept: eager-sync − graph moved {:+.1}% when the scale moved {:+.1}%, so the reads \
             do not wait long enough there; fit at a longer forward",
            u.step_move * 100.0,
            u.factor_move() * 100.0
        )
    });
    format!(
        "fitted by metaprep validate --fit-post-wait {} at {at}: reference eager-sync − graph \
         {:.1} µs ({}), model {:.1} µs at this scale ({:+.2}%, {outcome}), {} fit runs",
        long.file.display(),
        line.reference_us,
        line.estimator.replace('_', " "),
        line.model_us,
        f.error * 100.0,
        f.iterations
    )
}
