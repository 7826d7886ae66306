//! validation.csv and validation.md from the compared lines.

use super::{Bars, Cell, Line, Quantity};
use anyhow::Result;
use std::fmt::Write;

/// validation.csv's text.
pub fn csv_text(lines: &[Line]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for l in lines {
        w.serialize(l)?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// What validation.md says of a fitted profile (`validate --fit`): the fit file, its cell,
/// and one phrase per arm's factor.
pub struct FitNote {
    pub file: String,
    pub cell: Cell,
    pub factors: Vec<String>,
    /// The arms (and the post-wait scale) no fit run brought within the tolerance, each
    /// with its closest error: the validation fails on them whatever its cells say.
    pub unconverged: Vec<String>,
    /// `--fit-post-wait`: the post-wait table's scale, fitted after the factors.
    pub post_wait: Option<PostWaitNote>,
}

/// What validation.md says of the post-wait scale: the file, its cell, the phrase.
pub struct PostWaitNote {
    pub file: String,
    pub cell: Cell,
    pub phrase: String,
    /// Passes of the factors and the scale fitted in turns, the note's the last.
    pub passes: usize,
}

impl FitNote {
    /// Whether every arm's fit converged.
    pub fn converged(&self) -> bool {
        self.unconverged.is_empty()
    }
}

impl FitNote {
    /// Whether `l` is a cell of this reference that a fit ran at (either fit's).
    fn is_fit_cell(&self, l: &Line) -> bool {
        let at = |c: Cell| {
            (c.forward_us, c.batch_size, c.block) == (l.forward_us, l.batch_size, l.block)
        };
        at(self.cell) || self.post_wait.as_ref().is_some_and(|p| at(p.cell))
    }
}

/// Whether a validation passes: every line within its bar and, where the profile was fitted
/// first, every arm's fit converged (validation.md's verdict and validate's exit).
pub fn passed(lines: &[Line], fit: Option<&FitNote>) -> bool {
    lines.iter().all(|l| l.pass) && fit.is_none_or(FitNote::converged)
}

/// validation.md's text; `fit` when the profile was fitted first.
pub fn markdown(
    reference: &str,
    profile: &str,
    lines: &[Line],
    bars: Bars,
    fit: Option<&FitNote>,
) -> String {
    let mut r = String::new();
    let steps: Vec<&Line> = lines
        .iter()
        .filter(|l| l.quantity == Quantity::StepUs)
        .collect();
    let diffs: Vec<&Line> = lines
        .iter()
        .filter(|l| l.quantity == Quantity::SyncMinusGraphUs)
        .collect();
    let within = |v: &[&Line]| v.iter().filter(|l| l.pass).count();
    let _ = writeln!(r, "# Validation of `{profile}` against `{reference}`\n");
    let _ = writeln!(
        r,
        "**{}**: step time within ±{}% in {} of {} (cell, arm); eager-sync − graph within ±{}% in {} of {} cells.\n",
        if passed(lines, fit) { "PASS" } else { "FAIL" },
        bars.step_pct,
        within(&steps),
        steps.len(),
        bars.diff_pct,
        within(&diffs),
        diffs.len()
    );
    let _ = writeln!(
        r,
        "The model ran each cell at the host speed the reference recorded for it (its framework costs times the ratio to the profile's own host speed); \"raw\" is the model at the profile's own host speed. Rows marked \"chunk mean\" recorded a host-speed probe every few steps: their reference is the mean over chunks of each chunk's median step, and their model the mean over the same chunks of the model interpolated at each chunk's own speed (between runs at the cell's slowest and fastest chunk speed and the profile's own). \"host speed\" is the cell's median chunk speed over the profile's, with the chunks' p10–p90 in µs per op; \"forward\" is the marked forward's measured device time over its nominal µs (a `torch.cuda._sleep` forward runs longer when the SM clock drops; the model's forward is wall-clock).\n"
    );
    if let Some(fit) = fit.filter(|f| !f.converged()) {
        let _ = writeln!(
            r,
            "**The fit did not converge** for {}: its step is not within ±{}% of the fit cell's (eager-sync − graph within ±{}% for the post-wait scale) at the factor it keeps, the closest run's, so this validation fails (a reference below the GPU's floor there, or a model noisier than the tolerance).\n",
            fit.unconverged.join(", "),
            crate::calibrate::validate::fit::TOLERANCE * 100.0,
            crate::calibrate::validate::fit::DIFF_TOLERANCE * 100.0
        );
    }
    if let Some(fit) = fit {
        let _ = writeln!(
            r,
            "The profile was **fitted** before this validation: each arm's host factor (`arm_host_factors`, every host duration of its step times it) was fitted at {} of `{}`, an untraced run in its own process, and every cell below ran with the fitted profile: {}. Rows marked \"fit cell\" are that cell of this reference: a different process's measurement of the same cell, so they count, but they are not independent of the fit.\n",
            fit.cell,
            fit.file,
            fit.factors.join("; ")
        );
        if let Some(p) = &fit.post_wait {
            let _ = writeln!(
                r,
                "Then the post-wait table (`post_wait`: what framework calls cost extra after a wait, from metaprep_host.py's probe) was **scaled** to fit eager-sync − graph at {} of `{}`, another untraced process: {}. The factors and the scale were fitted in turns, each with the other's last (the factors take in the extras at the short forward, the scale the factors at the long one): {} pass{}, the factors above the last's. Its rows here are marked \"fit cell\" too.\n",
                p.cell,
                p.file,
                p.phrase,
                p.passes,
                if p.passes == 1 { "" } else { "es" }
            );
        }
    }
    let _ = writeln!(
        r,
        "| forward µs | bs | block | arm | reference µs | model µs | error | raw model µs | raw error | host speed ratio | speeds p10–p90 | forward | estimator | pass |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|"
    );
    for l in lines {
        let speeds = match (l.host_speed_p10, l.host_speed_p90) {
            (Some(a), Some(b)) => format!("{a:.1}–{b:.1}"),
            _ => "–".to_string(),
        };
        let fwd = l
            .forward_stretch
            .map_or("–".to_string(), |f| format!("{f:.3}"));
        let arm = match fit.filter(|f| f.is_fit_cell(l)) {
            Some(_) => format!("{} (fit cell)", l.arm),
            None => l.arm.clone(),
        };
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:+.1}% | {:.1} | {:+.1}% | {:.3} | {} | {} | {} | {} |",
            l.forward_us,
            l.batch_size,
            l.block,
            arm,
            l.reference_us,
            l.model_us,
            l.error_pct,
            l.model_raw_us,
            l.raw_error_pct,
            l.host_ratio,
            speeds,
            fwd,
            l.estimator.replace('_', " "),
            if l.pass { "yes" } else { "**no**" }
        );
    }
    r
}
