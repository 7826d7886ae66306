//! `metaprep ab`: its flags, their checks before any GPU work, and the run; the hidden
//! `ab-worker` each side runs.

use super::common::usage;
use super::out_folder::{empty_out, write_run_folder};
use super::sweep::{sweep_config, SweepArgs};
use crate::ab::report::{markdown, pairs_csv, AbReport};
use crate::ab::run::{measure, RunPlan};
use crate::ab::sides::SideSpec;
use crate::ab::verdict::Margins;
use crate::ab::worker::{cells, serve, Plant};
use crate::exit::Exit;
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

/// Sweep flags with no meaning in `ab`, whose pairs replace rounds and which writes its own
/// folder.
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
    /// The grid, as `metaprep sweep` takes it, after `--` (families, arms, batch and block
    /// sizes, layouts, --forward-us, --min-samples and --steps-per-sample of a burst).
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
    if let Some(flag) =
        (args.grid.iter()).find(|a| NOT_AB_FLAGS.contains(&a.split('=').next().unwrap_or(a)))
    {
        bail!(
            "{flag} is a sweep flag ab does not take: ab measures pairs, not rounds (--pairs), \
             and writes its own folder (ab's --out, before --)"
        );
    }
    let this = std::env::current_exe().context("finding this program")?;
    let grid = overridden(
        DEFAULT_GRID.iter().map(|s| s.to_string()).collect(),
        &args.grid,
    );
    let (base, base_own) = side_spec("BASE", &args.base, &args.base_flags, &grid, &this)?;
    let (new, new_own) = side_spec("NEW", &args.new, &args.new_flags, &grid, &this)?;
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
    let args = overridden(grid.to_vec(), &own);
    Ok((SideSpec { name, exe, args }, own))
}

/// A side of this build checked as its worker will read it, before any GPU work; two such
/// sides must name the same cells.
fn same_grid(base: &SideSpec, new: &SideSpec, this: &Path) -> Result<()> {
    let mut grids = Vec::new();
    for spec in [base, new] {
        if crate::results::atomic::same_file(&spec.exe, this) {
            let config =
                worker_config(&spec.args).with_context(|| format!("{}'s flags", spec.label()))?;
            grids.push((spec.label(), cells(&config.0)));
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
    let name = |token: &str| token.split('=').next().unwrap_or(token).to_string();
    let given: Vec<String> = (later.iter())
        .filter(|t| t.starts_with("--"))
        .map(|t| name(t))
        .collect();
    let mut kept = Vec::with_capacity(first.len() + later.len());
    let mut tokens = first.into_iter().peekable();
    while let Some(token) = tokens.next() {
        if token.starts_with("--") && given.contains(&name(&token)) {
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

/// The sweep config and plant a worker reads from `args` (its flags after `ab-worker`).
fn worker_config(args: &[String]) -> Result<(crate::runs::sweep::SweepConfig, Option<Plant>)> {
    use clap::Parser;
    let argv = ["metaprep", "ab-worker"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    let cli = crate::cli::Cli::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?;
    let crate::cli::Command::AbWorker(worker) = cli.command else {
        bail!("not an ab-worker command line");
    };
    let config = sweep_config(&worker.sweep)
        .map_err(|_| anyhow::anyhow!("refused as the line above says"))?;
    Ok((config, worker.plant_host))
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
mod tests {
    use super::*;
    use clap::Parser;

    fn config_of(line: &[&str]) -> Result<AbConfig> {
        let argv = ["metaprep", "ab"].iter().chain(line);
        let cli = crate::cli::Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
        let crate::cli::Command::Ab(args) = cli.command else {
            panic!("not an ab command line");
        };
        ab_config(&args)
    }

    fn refused(line: &[&str], needle: &str) {
        match config_of(line) {
            Ok(_) => panic!("{line:?} was taken"),
            Err(e) => assert!(format!("{e:#}").contains(needle), "{line:?}: {e:#}"),
        }
    }

    #[test]
    fn each_side_runs_the_grid_then_its_own_flags_which_replace_the_grids() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let config = config_of(&[
            "--out",
            out.to_str().unwrap(),
            "--base-flags",
            "--forward-us 20",
            "--new-flags",
            "--forward-us 21 --plant-host eager-sync=4us",
            "--",
            "--batch-sizes",
            "1,8",
        ])
        .unwrap();
        let (base, base_plant) = worker_config(&config.plan.base.args).unwrap();
        let (new, new_plant) = worker_config(&config.plan.new.args).unwrap();
        assert_eq!((base.forward_us, new.forward_us), (20.0, 21.0));
        assert_eq!(
            base.batch_sizes,
            [1, 8],
            "the grid after -- replaces the default's"
        );
        assert_eq!(base.block_sizes, [5]);
        assert_eq!((base.rule.min_samples, base.steps_per_sample), (5, 20));
        assert_eq!(base_plant, None);
        assert_eq!(
            new_plant.map(|p| p.amount),
            Some(crate::ab::worker::PlantAmount::Us(4.0))
        );
        assert_eq!(cells(&base), cells(&new));
        assert_eq!(cells(&base).len(), 3 * 4 * 2);
        assert_eq!(
            config.own_flags[1],
            ["--forward-us", "21", "--plant-host", "eager-sync=4us"]
        );
        assert!(!out.exists(), "nothing is written before the run");
    }

    #[test]
    fn bad_flags_are_refused_before_any_gpu_work() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("summary.md"), "a user's").unwrap();
        let full = full.to_str().unwrap();
        refused(&["--pairs", "7"], "--pairs: 7 is outside 16-1000");
        refused(
            &["--pairs", "8", "--processes", "9"],
            "--pairs: 8 is outside 9-1000",
        );
        refused(&["--processes", "5"], "--processes: 5 is outside 6-100");
        refused(
            &["--host-margin-pct", "0"],
            "--host-margin-pct: 0 is outside",
        );
        refused(&["--gpu-margin-pct", "nan"], "--gpu-margin-pct");
        refused(&["--pair-timeout-s", "0"], "--pair-timeout-s: 0 is outside");
        refused(
            &["--", "--processes", "2"],
            "--processes is a sweep flag ab does not take",
        );
        refused(&["--", "--max-rounds=3"], "--max-rounds=3 is a sweep flag");
        refused(&["--new-flags", "--batch-sizes 8"], "name different grids");
        refused(
            &["--new-flags", "--arms eager-sync"],
            "name different grids",
        );
        refused(
            &["--new-flags", "'unclosed"],
            "--new-flags: `'unclosed` is not a quoted list",
        );
        refused(&["--new-flags", "--plant-host graph=0us"], "NEW (");
        refused(&["--base-flags", "--no-such-flag"], "BASE (");
        refused(
            &["/no/such/metaprep", "/bin/sh"],
            "BASE /no/such/metaprep: no such executable",
        );
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "not a program").unwrap();
        let plain = plain.to_str().unwrap();
        refused(&["/bin/sh", plain], "not an executable file");
        refused(&["--out", full], "not empty");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("full/summary.md")).unwrap(),
            "a user's"
        );
    }

    #[test]
    fn a_later_flag_replaces_an_earlier_one_and_its_value() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            overridden(
                s(&["--arms", "a,b", "--seed", "1", "--nvtx", "on"]),
                &s(&["--arms=c", "--seed", "2"])
            ),
            s(&["--nvtx", "on", "--arms=c", "--seed", "2"])
        );
        assert_eq!(
            overridden(s(&["--forward-us", "-1"]), &s(&["--forward-us", "3"])),
            s(&["--forward-us", "3"])
        );
    }
}
