//! `metaprep validate REFERENCE --host-profile P`: the step model against an engine's own
//! untraced step times, on the reference's grid, in one call.
//!
//! This file is the adapter: the flags, their refusals before any GPU work, and `steps` run
//! per cell through the steps flags; the validation itself is `calibrate::validate`'s.

mod settings;

use super::common::{default_out, usage};
use super::steps::{steps_config, StepsArgs};
use crate::axes::{Arm, Family};
use crate::calibrate::validate::{
    read_fit, read_post_wait_fit, Bars, Cell, Fits, ModelStep, Reference, StepsRunner, Validation,
};
use crate::exit::Exit;
use crate::model::host_profile::HostProfile;
use crate::prep::Shape;
use crate::results::csv::KIND_STEP;
use anyhow::{Context, Result};
use clap::Args;
use settings::checked_settings;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Clone)]
pub struct ValidateArgs {
    /// The reference: a CSV with one row per (forward_us, batch_size, block, arm) holding
    /// the engine's untraced median `step_us`, and optionally `host_speed_us` (µs per
    /// op of scripts/metaprep_host.py host_speed() in its process while the cell ran),
    /// `step_us_p10`, `step_us_p90`,
    /// `samples`, `rounds`; with `chunk_host_speed_us` and `chunk_step_us` (a probe every
    /// few steps: StepSampler) each chunk is predicted at its own host speed and the means
    /// over chunks compared; scripts/metaprep_host.py `write_reference` writes it.
    pub(crate) reference: PathBuf,
    /// Each arm's step time passes within ± this many percent of the reference's.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) step_pct: f64,
    /// eager-sync − graph passes within ± this many percent of the reference's difference.
    #[arg(long, default_value_t = 15.0)]
    pub(crate) diff_pct: f64,
    /// Fit each arm's host factor first, at the one cell of this CSV (same columns as the
    /// reference): the engine run untraced at one host-bound cell, in its own process, with
    /// every arm of the reference (scripts/reference_loop.py --no-traces --forward-us 100
    /// --batch-sizes 1). Steps runs of that cell move each arm's factor (every host duration
    /// of its step times it) until its step is within 2% of FIT.csv's, as validation
    /// measures it (6 runs at most, factors 0.1-10); an arm whose step does not follow its
    /// factor there (GPU-bound) keeps x1, the trace's costs, and says so; one no run brings
    /// within 2% fails the validation (exit 1, named in validation.md). --host-work-us is refused with --fit (the factors would
    /// take the what-if in). The fitted profile, each factor with its source, is written
    /// to --out as fitted-profile.json, and the reference is validated with it. Factors the
    /// profile already holds are dropped before the fit.
    #[arg(long, value_name = "FIT.csv")]
    pub(crate) fit: Option<PathBuf>,
    /// With --fit: also fit the post-wait table, at this CSV's one long-forward cell.
    ///
    /// With --fit: then scale the profile's post-wait table (what framework calls cost
    /// extra after a wait, from metaprep_host.py's probe) at the one cell of this CSV, the
    /// engine run untraced at a long forward in its own process with eager-sync and graph
    /// (scripts/reference_loop.py --no-traces --forward-us 3000 --batch-sizes 1). Steps runs
    /// of that cell move the scale until eager-sync − graph is within 5% of LONG.csv's (6
    /// runs at most); the probe's extras are its own ops' and an engine's pay a different
    /// share, which only grows with the reads' waits. The scale and its source go into
    /// fitted-profile.json; its rows of the reference are marked "fit cell".
    #[arg(long, value_name = "LONG.csv", requires = "fit")]
    pub(crate) fit_post_wait: Option<PathBuf>,
    /// Every `steps` flag that is not an axis of the reference (--host-profile, --seed,
    /// --min-rounds, --cpu, ...): the reference names the forward, batch, block and arms,
    /// the layout is tp1, and --out is validate's own.
    #[command(flatten)]
    pub(crate) steps: StepsArgs,
    /// The flags given on the command line, by their ids ([`super::parse_from`]).
    #[arg(skip)]
    pub(crate) given: Vec<String>,
}

/// The steps flags validate sets per cell (by clap id and name): refused when given, and
/// left out of `validate --help`.
pub(crate) const AXES: [(&str, &str); 12] = [
    ("block_sizes", "--block-sizes"),
    ("arms", "--arms"),
    ("model", "--model"),
    ("draft_model", "--draft-model"),
    ("forward_us", "--forward-us"),
    ("batch_sizes", "--batch-sizes"),
    ("tp", "--tp"),
    ("host_speed_us", "--host-speed-us"),
    ("full", "--full"),
    ("resume", "--resume"),
    ("trace", "--trace"),
    ("host_scale", "--host-scale"),
];

/// The steps flags validate sets per cell, which must not be given: not even at their
/// defaults, which would be ignored as silently as any other value.
fn refuse_axes(a: &StepsArgs, given: &[String]) -> Result<()> {
    let default: StepsArgs = super::common::parse_args("steps", &[])
        .map_err(|_| anyhow::anyhow!("steps' defaults parse"))?;
    let named = |id: &str| given.iter().any(|g| g == id);
    for (id, flag) in AXES {
        anyhow::ensure!(
            !named(id),
            "{flag}: validate takes the forward, batch, block, arms and host speed of each cell from the reference and runs tp1; leave {flag} out"
        );
    }
    for (given, flag) in [
        (
            a.grid.block_sizes != default.grid.block_sizes,
            "--block-sizes",
        ),
        (a.arms != default.arms, "--arms"),
        (a.step_model.model != default.step_model.model, "--model"),
        (
            a.step_model.draft_model != default.step_model.draft_model,
            "--draft-model",
        ),
        (a.step_model.forward_us.is_some(), "--forward-us"),
        (
            a.grid.batch_sizes != default.grid.batch_sizes,
            "--batch-sizes",
        ),
        (!a.tp.is_empty(), "--tp"),
        (a.step_model.host_speed_us.is_some(), "--host-speed-us"),
        (a.full, "--full"),
        (a.resume, "--resume"),
        (a.trace.is_some(), "--trace"),
        (a.step_model.host_scale != [1.0], "--host-scale"),
    ] {
        anyhow::ensure!(
            !given,
            "{flag}: validate takes the forward, batch, block, arms and host speed of each cell from the reference and runs tp1; leave {flag} out"
        );
    }
    Ok(())
}

/// The steps flags of one cell: the user's, with the cell's axes, tp1 and `out`.
fn cell_args(
    base: &StepsArgs,
    cell: Cell,
    arms: &[Arm],
    speed: Option<f64>,
    out: &Path,
) -> StepsArgs {
    let mut a = base.clone();
    a.step_model.forward_us = Some(cell.forward_us);
    a.grid.batch_sizes = vec![cell.batch_size];
    a.grid.block_sizes = vec![cell.block];
    a.tp = vec![crate::axes::Layout::Tp(1)];
    a.arms = arms.to_vec();
    a.step_model.host_speed_us = speed;
    a.out = Some(out.to_path_buf());
    a
}

/// `steps` run through the user's steps flags, one cell at a time.
struct StepsFlags<'a>(&'a StepsArgs);

impl StepsRunner for StepsFlags<'_> {
    fn run(
        &self,
        profile: Option<&Path>,
        cell: Cell,
        arms: &[Arm],
        speed: Option<f64>,
        out: &Path,
    ) -> Result<BTreeMap<Arm, ModelStep>> {
        let mut a = cell_args(self.0, cell, arms, speed, out);
        if let Some(profile) = profile {
            a.step_model.host_profile = profile.display().to_string();
        }
        // Bad flags were refused before the first cell, so a refusal here is a bug of this file.
        let config = steps_config(&a).map_err(|_| {
            anyhow::anyhow!("validate: steps refused the settings of {}", out.display())
        })?;
        let outcome = crate::runs::steps::run(&config)?;
        let rows = (outcome.rows.iter()).filter(|r| r.kind == KIND_STEP && r.metric == "step_us");
        let mut steps = BTreeMap::new();
        for r in rows {
            let arm: Arm = r.arm.parse().map_err(|e: String| anyhow::anyhow!(e))?;
            let step = ModelStep {
                median: r.median,
                ci_lo: r.ci_lo,
                ci_hi: r.ci_hi,
            };
            steps.insert(arm, step);
        }
        Ok(steps)
    }
}

/// What validate works from: the reference, the profile, the new output folder and the fit
/// file's cell.
type Prepared = (Reference, HostProfile, PathBuf, Option<Fits>);

/// The reference, the profile, the new output folder and the fit cell, every flag and every
/// cell's shapes checked before any GPU work.
fn prepare(args: &ValidateArgs) -> Result<Prepared> {
    refuse_axes(&args.steps, &args.given)?;
    for (v, flag) in [(args.step_pct, "--step-pct"), (args.diff_pct, "--diff-pct")] {
        anyhow::ensure!(
            v.is_finite() && v > 0.0 && v <= 100.0,
            "{flag} {v}: give a percentage above 0 and at most 100"
        );
    }
    let reference = Reference::read(&args.reference)?;
    let profile =
        HostProfile::load(&args.steps.step_model.host_profile).context("--host-profile")?;
    let out = args
        .steps
        .out
        .clone()
        .unwrap_or_else(|| default_out("validate"));
    anyhow::ensure!(
        !out.exists(),
        "--out {} exists: validate writes a new folder; choose another",
        out.display()
    );
    super::common::writable_folder(&out, "--out")?;
    check_cell_shapes(
        args,
        &args.reference,
        reference.cells.iter().map(|(c, _)| c),
    )?;
    let fit = match &args.fit {
        Some(_) if args.steps.step_model.host_work_us.is_some() => {
            // The factors would absorb the what-if, and the fitted profile would not say so.
            anyhow::bail!(
                "--host-work-us with --fit: the fitted factors would take in the what-if \
                 host work and keep it in fitted-profile.json; fit without it, then give \
                 --host-work-us to steps with the fitted profile"
            )
        }
        Some(path) => {
            let fit = read_fit(path, &reference, &args.reference)?;
            check_cell_shapes(args, path, [&fit.cell])?;
            let post_wait = match &args.fit_post_wait {
                Some(long) => {
                    let cell = read_post_wait_fit(long, &fit)?;
                    check_cell_shapes(args, long, [&cell.cell])?;
                    anyhow::ensure!(
                        profile.post_wait.is_some(),
                        "--fit-post-wait: the profile {} has no post_wait table to scale: \
                         calibrate from traces recorded with scripts/metaprep_host.py's probe \
                         files (each holds a post-wait probe)",
                        args.steps.step_model.host_profile
                    );
                    Some(cell)
                }
                None => None,
            };
            Some(Fits {
                factors: fit,
                post_wait,
            })
        }
        None => None,
    };
    Ok((reference, profile, out, fit))
}

/// Every cell's shapes: a batch or block of the reference no kernel takes is named by its
/// cell.
fn check_cell_shapes<'a>(
    args: &ValidateArgs,
    file: &Path,
    cells: impl IntoIterator<Item = &'a Cell>,
) -> Result<()> {
    for cell in cells {
        for family in [Family::DsparkDraftBlock, Family::DsaTargetVerify] {
            Shape::new(
                family,
                cell.batch_size,
                cell.block,
                args.steps.grid.max_context,
            )
            .with_context(|| format!("{}: the cell at {cell}", file.display()))?;
        }
    }
    Ok(())
}

pub(crate) fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let (reference, profile, out, fits) = match usage(prepare(args)) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    // Every cell's settings, and the fit cells', checked whole before any GPU work.
    let settings = match checked_settings(args, &reference, fits.as_ref(), &out) {
        Ok(settings) => settings,
        Err(code) => return Ok(code),
    };
    let validation = Validation {
        reference: &reference,
        reference_file: &args.reference,
        profile: &profile,
        bars: Bars {
            step_pct: args.step_pct,
            diff_pct: args.diff_pct,
        },
        fits: fits.as_ref(),
        out: &out,
    };
    let (md, passed) =
        crate::calibrate::validate::run(&StepsFlags(&args.steps), &validation, settings)?;
    crate::out!("{md}");
    crate::outln!(
        "wrote {} and validation.csv",
        out.join("validation.md").display()
    );
    Ok(Exit::failed_if(!passed).into())
}
