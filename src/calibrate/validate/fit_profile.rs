//! `validate --fit FIT.csv`: each arm's host factor fitted at the one untraced cell of
//! FIT.csv by steps runs of that cell (the model and estimator validation reports), and the
//! fitted profile written with each factor's source.

use super::fit::{fit_factors, ArmFit, Unfollowed, MAX_ITERATIONS, TOLERANCE};
use super::run::{model_cell, Model};
use super::{
    cell_host_speed, compare_cell, Bars, Cell, FitNote, Line, Quantity, Reference, ReferenceRow,
};
use crate::axes::Arm;
use crate::model::host_profile::{HostProfile, Sourced};
use crate::results::atomic::write_atomic;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What to run for a fit file, for the refusals.
const FIT_RECIPE: &str = "record one untraced cell with every arm, in its own process: \
    scripts/reference_loop.py --no-traces --forward-us 100 --batch-sizes 1 --out fit/ \
    (or calibrate_torch.py the same way), and pass --fit fit/reference.csv";

/// The fitted profile's file in validate's --out.
pub const FITTED_PROFILE: &str = "fitted-profile.json";

/// The fit file's one cell and its rows.
pub struct FitCell {
    pub file: PathBuf,
    pub cell: Cell,
    pub rows: BTreeMap<Arm, ReferenceRow>,
}

/// `path` read as a fit file: one cell, with every arm `reference` validates.
pub fn read_fit(path: &Path, reference: &Reference, reference_file: &Path) -> Result<FitCell> {
    let arms: Vec<Arm> = reference
        .cells
        .iter()
        .flat_map(|(_, r)| r.keys().copied())
        .collect();
    let why = format!(
        "{} validates it: every arm validated is fitted",
        reference_file.display()
    );
    // Only the arms validated are fitted: another arm of the file (fused, say) may be
    // GPU-bound at the cell, and its factor would serve nothing.
    read_one_cell(path, "--fit", &arms, &why, FIT_RECIPE)
}

/// `path` read as `flag`'s file: exactly one cell, holding every one of `arms` (kept alone).
pub(super) fn read_one_cell(
    path: &Path,
    flag: &str,
    arms: &[Arm],
    why: &str,
    recipe: &str,
) -> Result<FitCell> {
    let file = path.display();
    if !path.is_file() {
        bail!("{flag} {file} is not a file: {recipe}");
    }
    let fit = Reference::read(path).context(flag.to_string())?;
    if fit.cells.len() != 1 {
        let cells: Vec<String> = fit.cells.iter().map(|(c, _)| c.to_string()).collect();
        bail!(
            "{flag} {file} holds {} cells ({}): a fit needs exactly one; {recipe}",
            cells.len(),
            cells.join("; ")
        );
    }
    let (cell, mut rows) = fit.cells.into_iter().next().expect("one cell");
    if let Some(arm) = arms.iter().find(|a| !rows.contains_key(a)) {
        bail!("{flag} {file} has no {arm} row, and {why}; {recipe}");
    }
    rows.retain(|arm, _| arms.contains(arm));
    Ok(FitCell {
        file: path.to_path_buf(),
        cell,
        rows,
    })
}

/// `base` with `factors` (a profile without any: the fit starts from the traced costs).
fn with_factors(base: &HostProfile, factors: &BTreeMap<Arm, Sourced<f64>>) -> HostProfile {
    let mut p = base.clone();
    let named = factors
        .iter()
        .map(|(a, f)| (a.name().to_string(), f.clone()));
    p.arm_host_factors = Some(named.collect());
    p
}

/// The folder under `out/fit/` of a fit's run `name` in pass `pass` of the turns (the first
/// pass's, and a fit without turns, keep their plain names).
pub(super) fn run_name(pass: usize, name: &str) -> String {
    match pass {
        1 => name.to_string(),
        _ => format!("pass{pass}-{name}"),
    }
}

/// Fits every arm of `fit` on `base` (a profile without arm factors: `without_fits`, or that
/// with the post-wait scale of the pass before, `pass` counting from 1), writes the fitted
/// profile into `out` (as [`FITTED_PROFILE`]) and returns it and what validation.md says of it.
pub(super) fn fit_profile(
    model: Model,
    base: &HostProfile,
    pass: usize,
    fit: &FitCell,
    own_speed: Option<f64>,
    bars: Bars,
    out: &Path,
) -> Result<(HostProfile, FitNote)> {
    let arms: Vec<Arm> = fit.rows.keys().copied().collect();
    let at = fit.cell.to_string();
    // Each run's factors and lines, to source the factors chosen.
    let mut runs: Vec<(BTreeMap<Arm, f64>, Vec<Line>)> = Vec::new();
    let fits = fit_factors(&arms, TOLERANCE, |factors| {
        let n = runs.len() + 1;
        let sourced = factors
            .iter()
            .map(|(&a, &k)| (a, sourced(k, format!("fit run {n} of {MAX_ITERATIONS}"))))
            .collect();
        let profile = with_factors(base, &sourced);
        let lines = fit_run(
            model,
            &profile,
            fit,
            &run_name(pass, &format!("run{n}")),
            own_speed,
            bars,
            out,
        )?;
        let errors: BTreeMap<Arm, f64> = step_lines(&lines)
            .map(|(arm, l)| (arm, l.error_pct / 100.0))
            .collect();
        let said: Vec<String> = errors
            .iter()
            .map(|(a, e)| format!("{a} x{:.4} {:+.2}%", factors[a], e * 100.0))
            .collect();
        eprintln!("validate --fit: run {n} at {at}: {}", said.join(", "));
        runs.push((factors.clone(), lines));
        Ok(errors)
    })
    .with_context(|| {
        format!(
            "--fit {}: fitting the host factors at {at}",
            fit.file.display()
        )
    })?;
    let mut factors = BTreeMap::new();
    let mut phrases = Vec::new();
    for (&arm, f) in &fits {
        let line = runs
            .get(f.run as usize - 1)
            .and_then(|(_, lines)| step_lines(lines).find(|(a, _)| *a == arm))
            .map(|(_, l)| l.clone())
            .with_context(|| format!("the fit ran no model at {arm}'s factor"))?;
        factors.insert(
            arm,
            sourced(f.factor, source(fit, &at, &fit.rows[&arm], &line, f)),
        );
        phrases.push(format!("{arm} {}", fit_phrase(f, "not host-bound there")));
    }
    let path = out.join(FITTED_PROFILE);
    let fitted = with_factors(base, &factors);
    write_atomic(&path, fitted.to_json().as_bytes())?;
    eprintln!("validate --fit: wrote {}", path.display());
    // A kept (not host-bound) arm is settled, so only fitted arms can be unconverged.
    let unconverged = (fits.iter())
        .filter(|(_, f)| !f.converged)
        .map(|(arm, f)| format!("{arm} ({:+.2}% at best)", f.error * 100.0))
        .collect();
    let note = FitNote {
        file: fit.file.display().to_string(),
        cell: fit.cell,
        factors: phrases,
        unconverged,
        post_wait: None,
    };
    Ok((fitted, note))
}

/// The per-arm step lines of a cell's comparison, by arm.
pub(super) fn step_lines(lines: &[Line]) -> impl Iterator<Item = (Arm, &Line)> {
    lines
        .iter()
        .filter(|l| l.quantity == Quantity::StepUs)
        .filter_map(|l| Some((l.arm.parse().ok()?, l)))
}

pub(super) fn sourced(value: f64, source: String) -> Sourced<f64> {
    Sourced { value, source }
}

/// One run of a fit: `profile` written to `out/fit/<name>/profile.json`, and `fit`'s cell
/// modelled with it and compared with the fit file's rows, as validation compares a cell.
pub(super) fn fit_run(
    model: Model,
    profile: &HostProfile,
    fit: &FitCell,
    name: &str,
    own_speed: Option<f64>,
    bars: Bars,
    out: &Path,
) -> Result<Vec<Line>> {
    let dir = out.join("fit").join(name);
    std::fs::create_dir_all(dir.join("steps"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("profile.json");
    write_atomic(&path, profile.to_json().as_bytes())?;
    let c = fit.cell;
    let with_profile = Model {
        profile: Some(&path),
        ..model
    };
    let modelled = model_cell(with_profile, c, &fit.rows, own_speed, &dir)?;
    compare_cell(c, &fit.rows, &modelled, own_speed, bars)
}

/// A fitted value as validation.md says it: `x1.234 (+0.50% there)`, then `kept` (why) where
/// the fit left it, `not converged` where no run came within its tolerance.
pub(super) fn fit_phrase(f: &ArmFit, kept: &str) -> String {
    let state = match (f.not_host_bound.is_some(), f.converged) {
        (true, _) => format!(", kept: {kept}"),
        (false, true) => String::new(),
        (false, false) => ", not converged".to_string(),
    };
    format!("x{:.3} ({:+.2}% there{state})", f.factor, f.error * 100.0)
}

/// A fitted value's outcome in its source: `kept` where the fit left it, else within
/// `tolerance` (relative) or the closest of every run.
pub(super) fn fit_outcome(
    f: &ArmFit,
    tolerance: f64,
    kept: impl FnOnce(Unfollowed) -> String,
) -> String {
    let tolerance = tolerance * 100.0;
    match (f.not_host_bound, f.converged) {
        (Some(u), _) => kept(u),
        (None, true) => format!("within {tolerance}%"),
        (None, false) => {
            format!("not within {tolerance}% after {MAX_ITERATIONS} runs: the closest")
        }
    }
}

/// Where a fitted factor came from: the fit file and cell, the reference's step and host
/// speed, the model's step at the factor, and the runs it took.
fn source(fit: &FitCell, at: &str, row: &ReferenceRow, line: &Line, f: &ArmFit) -> String {
    let speed = cell_host_speed(&fit.rows).or(row.host_speed_us);
    let speed = speed.map_or("no host speed recorded".into(), |s| {
        format!("host speed {s:.2} µs per op")
    });
    let outcome = fit_outcome(f, TOLERANCE, |_| {
        "kept: validation's step bar judges it there, as every cell".to_string()
    });
    let steps = format!(
        "reference step {:.1} µs ({}, {speed}), model step {:.1} µs at this factor ({:+.2}%, \
         {outcome})",
        line.reference_us,
        line.estimator.replace('_', " "),
        line.model_us,
        f.error * 100.0,
    );
    let file = fit.file.display();
    match f.not_host_bound {
        Some(unfollowed) => format!(
            "kept at x{:.3} (the trace's costs), not fitted: at {at} of --fit {file} \
             {unfollowed}; {steps}",
            f.factor
        ),
        None => format!(
            "fitted by metaprep validate --fit {file} at {at}: {steps}, {} fit runs",
            f.iterations
        ),
    }
}
