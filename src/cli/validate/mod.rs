//! `metaprep validate REFERENCE --host-profile P`: the step model against an engine's own
//! untraced step times, on the reference's grid, in one call.

mod fit;
mod post_wait;
mod settings;

use super::common::{default_out, usage};
use super::steps::{steps_config, StepsArgs};
use crate::axes::{Arm, Family};
use crate::calibrate::validate::{
    cell_host_speed, chunk_run_speeds, compare_cell, csv_text, markdown, passed, Bars, Cell,
    FitNote, Line, ModelCell, ModelStep, Reference, ReferenceRow,
};
use crate::exit::Exit;
use crate::model::host_profile::HostProfile;
use crate::prep::Shape;
use crate::results::atomic::write_atomic;
use crate::results::csv::{Row, KIND_STEP};
use anyhow::{Context, Result};
use clap::Args;
use fit::{fit_profile, read_fit, with_profile, FitCell, FITTED_PROFILE};
use post_wait::{fit_in_turns, read_post_wait_fit};
use settings::{checked_settings, write_env};
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

/// One steps run of one cell: its step_us medians per arm.
fn model_run(
    base: &StepsArgs,
    cell: Cell,
    arms: &[Arm],
    speed: Option<f64>,
    out: &Path,
) -> Result<BTreeMap<Arm, ModelStep>> {
    let a = cell_args(base, cell, arms, speed, out);
    // Bad flags were refused before the first cell, so a refusal here is a bug of this file.
    let config = steps_config(&a).map_err(|_| {
        anyhow::anyhow!("validate: steps refused the settings of {}", out.display())
    })?;
    let outcome = crate::runs::steps::run(&config)?;
    let rows: Vec<&Row> = outcome
        .rows
        .iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == "step_us")
        .collect();
    let mut steps = BTreeMap::new();
    for r in rows {
        let arm: Arm = r.arm.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        steps.insert(
            arm,
            ModelStep {
                median: r.median,
                ci_lo: r.ci_lo,
                ci_hi: r.ci_hi,
            },
        );
    }
    Ok(steps)
}

/// What validate works from: the reference, the profile, the new output folder and the fit
/// file's cell.
type Prepared = (Reference, HostProfile, PathBuf, Option<Fits>);

/// The fit cells: the arm factors' and, with --fit-post-wait, the post-wait scale's.
struct Fits {
    factors: FitCell,
    post_wait: Option<FitCell>,
}

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

/// A cell's steps runs' folder name (`f1000-bs1-b5`), before any `-raw` or `-at` suffix.
fn cell_name(cell: Cell) -> String {
    format!("f{}-bs{}-b{}", cell.forward_us, cell.batch_size, cell.block)
}

/// Where the steps run of `cell` at the profile's own host speed writes, under `out`.
fn raw_run_dir(out: &Path, cell: Cell) -> PathBuf {
    out.join("steps").join(format!("{}-raw", cell_name(cell)))
}

/// The model's runs for one cell: at the profile's own host speed ("raw"), at each chunk
/// speed, and at the cell's median host speed. `own_speed`: the profile's.
fn model_cell(
    args: &ValidateArgs,
    cell: Cell,
    rows: &BTreeMap<Arm, ReferenceRow>,
    own_speed: Option<f64>,
    out: &Path,
) -> Result<ModelCell> {
    let arms: Vec<Arm> = rows.keys().copied().collect();
    let name = cell_name(cell);
    let raw = model_run(&args.steps, cell, &arms, None, &raw_run_dir(out, cell))?;
    let speed = cell_host_speed(rows).filter(|_| own_speed.is_some());
    // Rows with chunks are predicted chunk by chunk, between runs at the cell's extreme
    // chunk speeds; the run at the cell's median speed is for rows without them.
    let mut by_speed = Vec::new();
    for s in chunk_run_speeds(rows, own_speed) {
        let dir = out.join("steps").join(format!("{name}-at{s:.3}"));
        by_speed.push((s, model_run(&args.steps, cell, &arms, Some(s), &dir)?));
    }
    let all_chunked = own_speed.is_some() && rows.values().all(|r| !r.chunks.is_empty());
    let at_speed = match speed.filter(|_| !all_chunked) {
        Some(s) => model_run(
            &args.steps,
            cell,
            &arms,
            Some(s),
            &out.join("steps").join(&name),
        )?,
        None => raw.clone(),
    };
    Ok(ModelCell {
        at_speed,
        raw,
        by_speed,
        host_ratio: speed.zip(own_speed).map(|(s, o)| s / o),
    })
}

pub(crate) fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let (reference, profile, out, fit) = match usage(prepare(args)) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    // Every cell's settings, and the fit cells', checked whole before any GPU work.
    let mut settings = match checked_settings(args, &reference, fit.as_ref(), &out) {
        Ok(settings) => Some(settings),
        Err(code) => return Ok(code),
    };
    let made = crate::results::atomic::NewFolder::create(&out.join("steps"))?;
    let result = (|| -> Result<ExitCode> {
        let bars = Bars {
            step_pct: args.step_pct,
            diff_pct: args.diff_pct,
        };
        let own_speed = profile.host_speed_us.as_ref().map(|s| s.value);
        // With --fit, the profile validated is the fitted one.
        let (validated, note): (ValidateArgs, Option<FitNote>) = match &fit {
            Some(fit) => {
                let base = profile.without_fits();
                let note = match &fit.post_wait {
                    Some(long) => {
                        fit_in_turns(args, &base, &fit.factors, long, own_speed, bars, &out)?
                    }
                    None => fit_profile(args, &base, 1, &fit.factors, own_speed, bars, &out)?.1,
                };
                (with_profile(args, &out.join(FITTED_PROFILE)), Some(note))
            }
            None => (args.clone(), None),
        };
        let mut lines: Vec<Line> = Vec::new();
        for (cell, rows) in &reference.cells {
            let model = model_cell(&validated, *cell, rows, own_speed, &out)?;
            // Once the first cell ran: its machine is the validation's.
            if let Some(settings) = settings.take() {
                write_env(&out, &raw_run_dir(&out, *cell), settings)?;
            }
            lines.extend(compare_cell(*cell, rows, &model, own_speed, bars)?);
        }
        let reference_name = args.reference.display().to_string();
        write_atomic(&out.join("validation.csv"), csv_text(&lines)?.as_bytes())?;
        let md = markdown(&reference_name, &profile.name, &lines, bars, note.as_ref());
        write_atomic(&out.join("validation.md"), md.as_bytes())?;
        crate::out!("{md}");
        crate::outln!(
            "wrote {} and validation.csv",
            out.join("validation.md").display()
        );
        Ok(Exit::failed_if(!passed(&lines, note.as_ref())).into())
    })();
    // A validation that fails (no GPU, a failed fit, a cell that could not run) leaves no
    // folder behind, so the same command can run again: `--out` must be new.
    if result.is_err() {
        made.discard();
    }
    result
}
