//! `metaprep ab`: its flags, their checks before any GPU work, and the run; the hidden
//! `ab-worker` each side runs.

use super::common::usage;
use super::out_folder::{empty_out, write_run_folder};
use super::steps::{steps_config, StepsArgs};
use super::sweep::{sweep_config, SweepArgs};
use crate::ab::report::{markdown, pairs_csv, AbReport};
use crate::ab::run::{measure, RunPlan};
use crate::ab::sides::SideSpec;
use crate::ab::steps_worker::{serve_steps, step_cells};
use crate::ab::verdict::Margins;
use crate::ab::worker::{cells, serve, Plant};
use crate::exit::Exit;
use crate::runs::steps::one_host_scale;
use crate::stats::paired::MIN_PAIRS;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The grid both sides run unless the flags after `--` say otherwise: three families, the
/// four arms the question turns on, two batches, DeepSeek-V4's block, and bursts of 5
/// samples of 20 steps.
pub const DEFAULT_GRID: &[&str] = &[
    "--families",
    "dsa_decode,dsa_target_verify,dspark_draft_block",
    "--arms",
    "eager-sync,eager-device,graph,fused",
    "--batch-sizes",
    "8,64",
    "--block-sizes",
    "5",
    "--min-samples",
    "5",
    "--steps-per-sample",
    "20",
];

/// The steps grid both sides run under `--steps` unless the flags after `--` say otherwise:
/// the default model at tp8 (emulated on one GPU; planned for an H200's memory so that it
/// fits whatever the GPU, the forwards being stand-ins that hold no weights), bs 1 and 8,
/// DeepSeek-V4's block, the three arms the question turns on, and bursts of 5 warm-up and 20
/// measured steps.
pub const DEFAULT_STEPS_GRID: &[&str] = &[
    "--tp",
    "tp8",
    "--gpu-memory-gib",
    "141",
    "--batch-sizes",
    "1,8",
    "--block-sizes",
    "5",
    "--arms",
    "eager-sync,eager-device,graph",
    "--warmup-steps",
    "5",
    "--round-steps",
    "20",
];

/// Flags of both grids with no meaning in `ab`, whose pairs replace rounds and which writes
/// its own folder.
const NOT_AB_FLAGS: &[&str] = &[
    "--out",
    "--resume",
    "--processes",
    "--min-rounds",
    "--rounds",
    "--max-rounds",
    "--precision-pct",
    "--rel-ci-pct",
    "--cell-time-cap-ms",
    "--time-cap-ms",
    "--gpu-paced-max-rounds",
    "--gpu-paced-precision-pct",
];

/// Steps flags with no meaning in `ab`: it runs no timeline pass and one process a side.
const NOT_AB_STEPS_FLAGS: &[&str] = &[
    "--trace",
    "--trace-cell",
    "--timeline-steps",
    "--timeline-cap-ms",
    "--timer",
    "--cupti-lib",
    "--ranks",
    "--nccl-lib",
];

/// Which command's grid the sides run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    Sweep,
    Steps,
}

impl Grid {
    fn defaults(self) -> &'static [&'static str] {
        match self {
            Grid::Sweep => DEFAULT_GRID,
            Grid::Steps => DEFAULT_STEPS_GRID,
        }
    }

    /// The command whose flags the grid is.
    fn command(self) -> &'static str {
        match self {
            Grid::Sweep => "sweep",
            Grid::Steps => "steps",
        }
    }

    /// The hidden subcommand a side's worker runs.
    pub fn worker(self) -> &'static str {
        match self {
            Grid::Sweep => "ab-worker",
            Grid::Steps => "ab-steps-worker",
        }
    }

    fn refused(self, flag: &str) -> bool {
        NOT_AB_FLAGS.contains(&flag) || (self == Grid::Steps && NOT_AB_STEPS_FLAGS.contains(&flag))
    }
}

#[derive(Args)]
pub struct AbArgs {
    /// BASE's metaprep executable (another build); left out, this one.
    pub(crate) base: Option<PathBuf>,
    /// NEW's metaprep executable; left out, this one.
    pub(crate) new: Option<PathBuf>,
    /// Flags only BASE's worker gets, after the grid's, quoted as one argument (such as
    /// "--forward-us 20"); a later flag overrides the grid's.
    #[arg(long, allow_hyphen_values = true, value_name = "FLAGS")]
    pub(crate) base_flags: Option<String>,
    /// Flags only NEW's worker gets; test aid --plant-host ARM=AMOUNT slows one arm.
    ///
    /// --plant-host ARM=AMOUNT (eager-sync=20% or eager-sync=5us) adds a host busy-wait to
    /// each step of one arm, a known slowdown for checking the gate.
    #[arg(long, allow_hyphen_values = true, value_name = "FLAGS")]
    pub(crate) new_flags: Option<String>,
    /// Pairs of each cell (one a round, the cells shuffled each round): at least --processes.
    #[arg(long, default_value_t = 16)]
    pub(crate) pairs: usize,
    /// Processes each side runs in, one after another, the rounds shared out over them: a
    /// process draws a host and GPU pace of its own, so the interval is over processes; at
    /// least 6. docs/ab.md says why 16.
    #[arg(long, default_value_t = 16)]
    pub(crate) processes: usize,
    /// Margin of host-paced rows, %: a row fails only when its whole interval is above it.
    #[arg(long, default_value_t = Margins::DEFAULT.host * 100.0)]
    pub(crate) host_margin_pct: f64,
    /// Margin of GPU-paced rows (the graph arms' and fused's steps and device times), %.
    #[arg(long, default_value_t = Margins::DEFAULT.gpu * 100.0)]
    pub(crate) gpu_margin_pct: f64,
    /// A pair whose probe of the host's launch speed moved more than this inside a side's
    /// burst is measured once more, % (docs/ab.md says why 35).
    #[arg(long, default_value_t = 35.0)]
    pub(crate) redo_bound_pct: f64,
    /// Seconds a side may take to open the GPU and warm its cells up.
    #[arg(long, default_value_t = 300)]
    pub(crate) start_timeout_s: u64,
    /// Seconds a side may take over one burst before it is killed as hung.
    #[arg(long, default_value_t = 60)]
    pub(crate) pair_timeout_s: u64,
    /// Seed of the pairs' order.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Output folder (default results/ab-DATE); it must not exist or be empty.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Print ab.json instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
    /// Pair the decode-step model's grid (ITL, step time, throughput) instead of the sweep's.
    ///
    /// The flags after `--` are then `metaprep steps`' (one host scale a side). Test aid for a
    /// slower host: --new-flags "--host-scale 1.2", every host cost of NEW 20% longer.
    #[arg(long)]
    pub(crate) steps: bool,
    /// The grid, as `metaprep sweep` (or with --steps, `metaprep steps`) takes it, after `--`
    /// (families, arms, batch and block sizes, layouts, --forward-us, --min-samples and
    /// --steps-per-sample of a burst; for steps --warmup-steps and --round-steps).
    #[arg(last = true, value_name = "SWEEP FLAGS")]
    pub(crate) grid: Vec<String>,
}

/// `metaprep ab-worker` (hidden): one side of an `ab`, started by it.
#[derive(Args)]
pub struct AbWorkerArgs {
    #[command(flatten)]
    pub(crate) sweep: SweepArgs,
    /// Test aid: a host busy-wait at the start of each step of ARM, AMOUNT µs (5us) or a
    /// share of the step (20%).
    #[arg(long, value_name = "ARM=AMOUNT")]
    pub(crate) plant_host: Option<Plant>,
}

/// `metaprep ab-steps-worker` (hidden): one side of an `ab --steps`, started by it.
#[derive(Args)]
pub struct AbStepsWorkerArgs {
    #[command(flatten)]
    pub(crate) steps: StepsArgs,
}

/// Everything `ab` was asked, checked.
pub struct AbConfig {
    pub plan: RunPlan,
    pub margins: Margins,
    pub out: PathBuf,
    pub json: bool,
    /// Each side's own flags.
    pub own_flags: [Vec<String>; 2],
    /// The grid's flags, defaults and `--` together.
    pub grid: Vec<String>,
}

pub(crate) fn ab_config(args: &AbArgs) -> Result<AbConfig> {
    if args.processes < MIN_PAIRS || args.processes > 100 {
        bail!(
            "--processes: {} is outside {MIN_PAIRS}-100: the interval is over processes, and a \
             95% one needs {MIN_PAIRS}",
            args.processes
        );
    }
    if args.pairs < args.processes || args.pairs > 1000 {
        bail!(
            "--pairs: {} is outside {}-1000: each of the --processes measures one pair of \
             each cell at least",
            args.pairs,
            args.processes
        );
    }
    let pct = |v: f64, flag: &str, lo: f64, hi: f64| -> Result<f64> {
        if !(lo..=hi).contains(&v) {
            bail!("{flag}: {v} is outside {lo}-{hi} %");
        }
        Ok(v / 100.0)
    };
    let margins = Margins {
        host: pct(args.host_margin_pct, "--host-margin-pct", 0.1, 100.0)?,
        gpu: pct(args.gpu_margin_pct, "--gpu-margin-pct", 0.1, 100.0)?,
    };
    let redo_bound = pct(args.redo_bound_pct, "--redo-bound-pct", 1.0, 1000.0)?;
    for (flag, s) in [
        ("--start-timeout-s", args.start_timeout_s),
        ("--pair-timeout-s", args.pair_timeout_s),
    ] {
        if !(1..=3600).contains(&s) {
            bail!("{flag}: {s} is outside 1-3600 s");
        }
    }
    let kind = if args.steps { Grid::Steps } else { Grid::Sweep };
    if let Some(flag) = (args.grid.iter()).find(|a| kind.refused(flag_name(a))) {
        bail!(
            "{flag} is a {} flag ab does not take: ab measures pairs, not rounds (--pairs), \
             one process a side with no timeline, and writes its own folder (ab's --out, \
             before --)",
            kind.command()
        );
    }
    let this = std::env::current_exe().context("finding this program")?;
    let grid = overridden(
        kind.defaults().iter().map(|s| s.to_string()).collect(),
        &args.grid,
    );
    let side = |name, exe, own| side_spec(kind, name, exe, own, &grid, &this);
    let (base, base_own) = side("BASE", &args.base, &args.base_flags)?;
    let (new, new_own) = side("NEW", &args.new, &args.new_flags)?;
    same_grid(&base, &new, &this)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| super::common::default_out("ab"));
    empty_out(&out)?;
    Ok(AbConfig {
        plan: RunPlan {
            base,
            new,
            pairs: args.pairs,
            processes: args.processes,
            seed: args.seed,
            redo_bound,
            start_timeout: Duration::from_secs(args.start_timeout_s),
            pair_timeout: Duration::from_secs(args.pair_timeout_s),
        },
        margins,
        out,
        json: args.json,
        own_flags: [base_own, new_own],
        grid,
    })
}

/// A side: its executable (this one where none is given) and its worker's flags, the grid's
/// then its own; and its own alone.
fn side_spec(
    kind: Grid,
    name: &'static str,
    exe: &Option<PathBuf>,
    own: &Option<String>,
    grid: &[String],
    this: &Path,
) -> Result<(SideSpec, Vec<String>)> {
    let own = match own {
        Some(flags) => shlex::split(flags).with_context(|| {
            let flag = name.to_lowercase();
            format!("--{flag}-flags: `{flags}` is not a quoted list of flags")
        })?,
        None => Vec::new(),
    };
    let exe = match exe {
        Some(path) => executable(path, name)?,
        None => this.to_path_buf(),
    };
    let mut args = vec![kind.worker().to_string()];
    args.extend(overridden(grid.to_vec(), &own));
    Ok((SideSpec { name, exe, args }, own))
}

/// A side of this build checked as its worker will read it, before any GPU work; two such
/// sides must name the same cells.
fn same_grid(base: &SideSpec, new: &SideSpec, this: &Path) -> Result<()> {
    let mut grids = Vec::new();
    for spec in [base, new] {
        if crate::results::atomic::same_file(&spec.exe, this) {
            let named =
                worker_cells(&spec.args).with_context(|| format!("{}'s flags", spec.label()))?;
            grids.push((spec.label(), named));
        }
    }
    if let [(b, base_cells), (n, new_cells)] = grids.as_slice() {
        if base_cells != new_cells {
            bail!(
                "{b} and {n} name different grids ({} and {} cells): a side's own flags may \
                 change how it runs, not which cells",
                base_cells.len(),
                new_cells.len()
            );
        }
    }
    Ok(())
}

/// `first` with every flag `later` gives again taken out (with its value), then `later`: a
/// list flag given twice would be appended to, not replaced.
fn overridden(first: Vec<String>, later: &[String]) -> Vec<String> {
    let given: Vec<&str> = (later.iter())
        .filter(|t| t.starts_with("--"))
        .map(|t| flag_name(t))
        .collect();
    let mut kept = Vec::with_capacity(first.len() + later.len());
    let mut tokens = first.into_iter().peekable();
    while let Some(token) = tokens.next() {
        if token.starts_with("--") && given.contains(&flag_name(&token)) {
            if !token.contains('=') && tokens.peek().is_some_and(|v| !v.starts_with("--")) {
                tokens.next();
            }
            continue;
        }
        kept.push(token);
    }
    kept.extend(later.iter().cloned());
    kept
}

/// A command-line token's flag: `--arms` of `--arms=a,b`.
fn flag_name(token: &str) -> &str {
    token.split('=').next().unwrap_or(token)
}

/// A side's executable: a file that can be run.
fn executable(path: &Path, side: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("{side} {}: no such executable", path.display()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        bail!("{side} {}: not an executable file", path.display());
    }
    Ok(path.to_path_buf())
}

/// A worker's command line (`args`: its subcommand and flags) as it will read it.
fn worker_command(args: &[String]) -> Result<crate::cli::Command> {
    use clap::Parser;
    let argv = std::iter::once("metaprep".to_string()).chain(args.iter().cloned());
    let cli = crate::cli::Cli::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?;
    Ok(cli.command)
}

/// The sweep config and plant a sweep worker reads from `args`.
#[cfg(test)]
fn worker_config(args: &[String]) -> Result<(crate::runs::sweep::SweepConfig, Option<Plant>)> {
    let crate::cli::Command::AbWorker(worker) = worker_command(args)? else {
        bail!("not an ab-worker command line");
    };
    let config = sweep_config(&worker.sweep).map_err(|_| refused())?;
    Ok((config, worker.plant_host))
}

/// The steps config a steps worker reads from `args`.
#[cfg(test)]
fn steps_worker_config(args: &[String]) -> Result<crate::runs::steps::StepsConfig> {
    let crate::cli::Command::AbStepsWorker(worker) = worker_command(args)? else {
        bail!("not an ab-steps-worker command line");
    };
    steps_config(&worker.steps).map_err(|_| refused())
}

fn refused() -> anyhow::Error {
    anyhow::anyhow!("refused as the line above says")
}

/// The cells a worker of this build would name, where it knows them before opening a GPU (a
/// steps side planned for its own device's memory does not: its hello is matched instead).
fn worker_cells(args: &[String]) -> Result<Vec<crate::ab::protocol::CellName>> {
    use crate::cli::Command;
    match worker_command(args)? {
        Command::AbWorker(worker) => {
            Ok(cells(&sweep_config(&worker.sweep).map_err(|_| refused())?))
        }
        Command::AbStepsWorker(worker) => {
            let config = steps_config(&worker.steps).map_err(|_| refused())?;
            match config.gpu_memory {
                Some(memory) => step_cells(&config, memory),
                None => one_host_scale(&config).map(|_| Vec::new()),
            }
        }
        _ => bail!("not an ab worker command line"),
    }
}

/// Runs `ab`: both sides, the verdict, the folder; exit 1 on a slower row or a failed side.
pub(crate) fn ab(args: &AbArgs) -> Result<ExitCode> {
    let config = match usage(ab_config(args)) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    crate::gpu::probe::require_driver()?;
    let bar = crate::harness::run_output::progress(0, "pairs");
    let measurement = measure(&config.plan, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let report = AbReport::of(
        &config.plan,
        config.margins,
        &config.own_flags,
        &config.grid,
        &measurement,
    );
    let summary = markdown(&report);
    let json = serde_json::to_string_pretty(&report)?;
    let pairs = pairs_csv(&measurement)?;
    let files = [
        ("summary.md", summary.as_bytes()),
        ("ab.json", json.as_bytes()),
        ("pairs.csv", &pairs[..]),
    ];
    write_run_folder(&config.out, "ab", &files)?;
    if config.json {
        crate::outln!("{json}");
    } else {
        crate::out!("{summary}");
    }
    eprintln!("metaprep: ab wrote {}", config.out.display());
    Ok(Exit::failed_if(!report.passed).into())
}

/// Runs one steps side's worker on this process's stdin and stdout.
pub(crate) fn ab_steps_worker(args: &AbStepsWorkerArgs) -> Result<ExitCode> {
    let config = match steps_config(&args.steps) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let stdin = std::io::stdin();
    serve_steps(&config, stdin.lock(), &mut std::io::stdout().lock())?;
    Ok(Exit::Ok.into())
}

/// Runs one side's worker on this process's stdin and stdout.
pub(crate) fn ab_worker(args: &AbWorkerArgs) -> Result<ExitCode> {
    let config = match sweep_config(&args.sweep) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let stdin = std::io::stdin();
    serve(
        &config,
        args.plant_host,
        stdin.lock(),
        &mut std::io::stdout().lock(),
    )?;
    Ok(Exit::Ok.into())
}

#[cfg(test)]
#[path = "ab_tests.rs"]
mod tests;
