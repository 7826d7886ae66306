//! The metaprep command line.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use metaprep::check::{self, CheckConfig};
use metaprep::cli_lists::{parse_list, parse_u32_list};
use metaprep::gpu::{Gpu, GpuUnavailable};
use metaprep::measure::stopping::StoppingRule;
use metaprep::measure::targets;
use metaprep::prep::inputs::LengthRange;
use metaprep::prep::{Arm, Family, Shape};
use metaprep::report::compare::{run_compare, CompareArgs, EXIT_BAD_INPUT};
use metaprep::report::run_dir::RunDir;
use metaprep::step::layout::Layout;
use metaprep::sweep::{self, SweepConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "metaprep",
    version,
    about = "What a host read of device sequence lengths costs a speculative-decoding step, \
             and what graph replay with device-only lengths wins back.",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the GPU: name, compute capability, SMs, L2, memory, driver and CUDA versions.
    Info(DeviceArgs),
    /// Check every family x arm against the CPU reference, bit for bit, on random inputs.
    Check(CheckArgs),
    /// Time every arm over batch size x block size x layout, with the floor measured in the
    /// same run; writes metaprep.csv, env.json and telemetry.csv to --out.
    Sweep(SweepArgs),
    /// Write charts (PNG + SVG) and summary.md beside a run's CSV. Needs no GPU.
    Report(ReportArgs),
    Compare(CompareArgs),
}

#[derive(Args)]
struct SweepArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Metadata families, comma separated: dspark_draft_block, dsa_decode,
    /// dsa_target_verify, dsa_draft_extend_v2.
    #[arg(
        long,
        default_value = "dspark_draft_block,dsa_decode,dsa_target_verify,dsa_draft_extend_v2"
    )]
    families: String,
    /// Arms, comma separated: eager-sync (host read each step, the "before"), eager-device
    /// (device lengths, eager launches), graph (device lengths, one graph replay), fused
    /// (one kernel, in a graph).
    #[arg(long, default_value = "eager-sync,eager-device,graph,fused")]
    arms: String,
    /// Batch sizes (requests per step), comma separated. A dep layout gives each GPU
    /// ceil(bs / dp) of them.
    #[arg(long, default_value = "1,8,64,256")]
    batch_sizes: String,
    /// Block sizes, comma separated: DSpark's draft block gamma, or DSA's N draft tokens
    /// per request (decode has one row per request whatever the block).
    #[arg(long, default_value = "3,5,8")]
    block_sizes: String,
    /// Tensor-parallel layouts, comma separated: tp1, tp2, tp4, tp8 (1/TP of every layer
    /// per GPU, whole batch) or dep2, dep4 (attention data-parallel: bs/DP per GPU). The
    /// prep is per rank, so a layout needing more GPUs than the host has runs one rank and
    /// is marked emulated.
    #[arg(long, default_value = "tp1")]
    tp: String,
    /// GPU time of the stand-in forward launched after each prep for the step_fwd_us
    /// metric (the GPU is busy when the next host read lands); 0 skips it.
    #[arg(long, default_value_t = 20.0)]
    forward_us: f64,
    /// Longest context a request may reach: the static width of the page tables the graph
    /// path sizes by (tokens).
    #[arg(long, default_value_t = 131072)]
    max_context: u32,
    /// Committed lengths are drawn uniformly from MIN-MAX tokens.
    #[arg(long, default_value = "2048-8192")]
    seq_lens: String,
    /// Stop a cell once the 95% CI of its median is within this percentage of it.
    #[arg(long, default_value_t = 1.0)]
    rel_ci_pct: f64,
    /// Per-metric time cap of a cell, in milliseconds (the stop reason says which ended it).
    #[arg(long, default_value_t = 1000)]
    time_cap_ms: u64,
    /// Steps per sample: a sample is the wall time of this many steps over their count.
    #[arg(long, default_value_t = 50)]
    steps_per_sample: usize,
    /// Seed for the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory (default results/sweep-<UTC date and time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue an interrupted sweep in --out: complete cells are kept, the rest measured.
    #[arg(long)]
    resume: bool,
}

#[derive(Args)]
struct ReportArgs {
    /// A run directory written by `metaprep sweep` or `metaprep steps`.
    run_dir: PathBuf,
}

#[derive(Args)]
struct DeviceArgs {
    /// CUDA device ordinal to run on.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Seed for the random inputs (default: a fresh one, printed so a failure can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    /// Metadata families, comma separated: dspark_draft_block, dsa_decode,
    /// dsa_target_verify, dsa_draft_extend_v2.
    #[arg(
        long,
        default_value = "dspark_draft_block,dsa_decode,dsa_target_verify,dsa_draft_extend_v2"
    )]
    families: String,
    /// Arms, comma separated: eager-sync (host read each step), eager-device, graph, fused.
    #[arg(long, default_value = "eager-sync,eager-device,graph,fused")]
    arms: String,
    /// Live batch sizes, comma separated (graphs pad each to the next capture size).
    #[arg(long, default_value = "1,2,3,8,64,256,1024")]
    batch_sizes: String,
    /// Block sizes, comma separated: draft block (gamma) for DSpark, draft tokens N for DSA.
    #[arg(long, default_value = "1,3,5,6,8")]
    block_sizes: String,
    /// Checked steps per cell after the warm-up, with `accept` advancing lengths between them.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(3..=64))]
    steps: u32,
    /// Committed tokens a batch may hold in all: lengths are drawn up to
    /// min(128k, budget / batch size).
    #[arg(long, default_value_t = 1 << 21)]
    token_budget: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("metaprep: error: {e:#}");
            if e.downcast_ref::<GpuUnavailable>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Bad flag values exit 2, like clap's own usage errors, before any GPU work.
fn usage<T>(parsed: Result<T>) -> Result<T, ExitCode> {
    parsed.map_err(|e| {
        eprintln!("metaprep: error: {e:#}");
        ExitCode::from(2)
    })
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Info(args) => info(&args),
        Command::Check(args) => {
            let config = match check_config(&args) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            run_check(&args, &config)
        }
        Command::Sweep(args) => match sweep_config(&args) {
            Ok(config) => run_sweep(&config),
            Err(code) => Ok(code),
        },
        Command::Report(args) => report(&args.run_dir),
        Command::Compare(args) => match run_compare(&args) {
            Ok(outcome) => {
                print!("{}", outcome.markdown);
                Ok(ExitCode::from(outcome.exit_code()))
            }
            Err(e) => {
                eprintln!("metaprep: error: {e:#}");
                Ok(ExitCode::from(EXIT_BAD_INPUT))
            }
        },
    }
}

fn parse_range(s: &str) -> Result<LengthRange> {
    let (lo, hi) = s
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?)))
        .with_context(|| {
            format!("--seq-lens: `{s}` is not a range: write MIN-MAX in tokens, such as 2048-8192")
        })?;
    if lo > hi {
        anyhow::bail!("--seq-lens: {lo} is above {hi}: write the smaller length first");
    }
    Ok(LengthRange { min: lo, max: hi })
}

fn sweep_config(args: &SweepArgs) -> Result<SweepConfig, ExitCode> {
    let positive = |v: f64, flag: &str| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(anyhow::anyhow!("{flag}: {v} is not a positive number"))
        }
    };
    let config = SweepConfig {
        device: args.device.device,
        families: usage(parse_list(
            &args.families,
            "--families",
            "dsa_decode,dsa_target_verify",
            |s| s.parse::<Family>().map_err(anyhow::Error::msg),
        ))?,
        arms: usage(parse_list(&args.arms, "--arms", "eager-sync,graph", |s| {
            s.parse::<Arm>().map_err(anyhow::Error::msg)
        }))?,
        batch_sizes: usage(parse_u32_list(&args.batch_sizes, "--batch-sizes"))?,
        block_sizes: usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?,
        layouts: usage(Layout::parse_list(&args.tp))?,
        forward_us: if args.forward_us == 0.0 {
            0.0
        } else {
            usage(positive(args.forward_us, "--forward-us"))?
        },
        max_context: args.max_context,
        seq_lens: usage(parse_range(&args.seq_lens))?,
        rule: StoppingRule {
            rel_ci: usage(positive(args.rel_ci_pct, "--rel-ci-pct"))? / 100.0,
            time_cap: Duration::from_millis(args.time_cap_ms),
            ..StoppingRule::default()
        },
        steps_per_sample: usage(positive(args.steps_per_sample as f64, "--steps-per-sample"))?
            as usize,
        seed: args.seed,
        out: args.out.clone().unwrap_or_else(|| {
            PathBuf::from(format!(
                "results/sweep-{}",
                chrono::Utc::now().format("%Y%m%d-%H%M%S")
            ))
        }),
        resume: args.resume,
    };
    // Shapes are validated before any GPU work.
    for &family in &config.families {
        for &block in &config.block_sizes {
            usage(Shape::new(family, 1, block, config.max_context))?;
        }
    }
    if config.seq_lens.max as u64 + 64 > config.max_context as u64 {
        return usage(Err(anyhow::anyhow!(
            "--seq-lens: lengths up to {} do not fit --max-context {}: raise --max-context or lower the range",
            config.seq_lens.max,
            config.max_context
        )));
    }
    Ok(config)
}

fn run_sweep(config: &SweepConfig) -> Result<ExitCode> {
    let outcome = sweep::run(config)?;
    let table = targets::render(&targets::speed_targets(
        &outcome.rows,
        Some(outcome.seconds),
    ));
    metaprep::report::atomic::write_atomic(&outcome.dir.join("targets.md"), table.as_bytes())?;
    println!(
        "sweep done in {:.0} s: {} rows in {}\n\n{table}",
        outcome.seconds,
        outcome.rows.len(),
        outcome.dir.display()
    );
    println!("next: metaprep report {}", outcome.dir.display());
    Ok(ExitCode::SUCCESS)
}

fn report(dir: &std::path::Path) -> Result<ExitCode> {
    let run = RunDir::open(dir)?;
    let charts = metaprep::report::charts::render_all(
        dir,
        &run.rows,
        &run.env,
        &run.telemetry,
        run.trace_json.as_deref(),
    )?;
    let summary = metaprep::report::summary::write_summary(dir, &run.rows, &run.env)?;
    println!(
        "wrote {} and {} chart files under {}",
        summary.display(),
        charts.files.len(),
        dir.join("charts").display()
    );
    for (chart, reason) in &charts.skipped {
        println!("skipped {chart}: {reason}");
    }
    Ok(ExitCode::SUCCESS)
}

fn info(args: &DeviceArgs) -> Result<ExitCode> {
    let gpu = Gpu::open(args.device)?;
    let i = &gpu.info;
    println!("GPU {}: {}", i.ordinal, i.name);
    println!(
        "  compute capability  {}.{}",
        i.compute_capability.0, i.compute_capability.1
    );
    println!("  SMs                 {}", i.sm_count);
    println!("  L2                  {} MiB", i.l2_bytes >> 20);
    println!(
        "  memory              {:.1} GiB",
        i.memory_bytes as f64 / (1u64 << 30) as f64
    );
    println!("  CUDA (driver)       {}", i.cuda_driver_version);
    println!("  NVRTC               {}", i.nvrtc_version);
    println!("  devices visible     {}", i.device_count);
    Ok(ExitCode::SUCCESS)
}

fn check_config(args: &CheckArgs) -> Result<CheckConfig, ExitCode> {
    Ok(CheckConfig {
        seed: args.seed.unwrap_or_else(fresh_seed),
        families: usage(parse_list(
            &args.families,
            "--families",
            "dsa_decode,dsa_target_verify",
            |s| s.parse::<Family>().map_err(anyhow::Error::msg),
        ))?,
        arms: usage(parse_list(&args.arms, "--arms", "eager-sync,graph", |s| {
            s.parse::<Arm>().map_err(anyhow::Error::msg)
        }))?,
        batch_sizes: usage(parse_u32_list(&args.batch_sizes, "--batch-sizes"))?,
        block_sizes: usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?,
        steps: args.steps as usize,
        token_budget: args.token_budget,
    })
}

fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ ((std::process::id() as u64) << 32)
}

fn run_check(args: &CheckArgs, config: &CheckConfig) -> Result<ExitCode> {
    let gpu = Gpu::open(args.device.device)?;
    println!(
        "metaprep check on {} (sm_{}{}, CUDA {}), seed {} (replay with --seed {})",
        gpu.info.name,
        gpu.info.compute_capability.0,
        gpu.info.compute_capability.1,
        gpu.info.cuda_driver_version,
        config.seed,
        config.seed
    );
    for &family in &config.families {
        let message =
            check::eager_sync_capture_is_refused(&gpu, family).context("capture guard")?;
        println!(
            "capture guard, {family}: capturing eager-sync refused ({})",
            first_line(&message)
        );
    }
    let results = check::run(&gpu, config, |r| {
        if r.mismatches > 0 {
            let (step, m) = r.first.as_ref().expect("a mismatch has a first");
            println!(
                "MISMATCH {} {} bs {} block {}: {} cells differ; first at step {step}: {m}",
                r.family, r.arm, r.batch_size, r.block, r.mismatches
            );
        }
    })?;
    println!("\n| family | arm | shapes | cells checked | mismatches |\n|---|---|---:|---:|---:|");
    for &family in &config.families {
        for &arm in &config.arms {
            let cells: Vec<_> = results
                .iter()
                .filter(|r| r.family == family && r.arm == arm)
                .collect();
            let checked: u64 = cells.iter().map(|r| r.cells).sum();
            let bad: u64 = cells.iter().map(|r| r.mismatches).sum();
            println!("| {family} | {arm} | {} | {checked} | {bad} |", cells.len());
        }
    }
    let bad: u64 = results.iter().map(|r| r.mismatches).sum();
    if bad > 0 {
        println!(
            "\nFAILED: {bad} cells differ from the CPU reference (seed {})",
            config.seed
        );
        return Ok(ExitCode::FAILURE);
    }
    println!("\nOK: every output of every arm equals the CPU reference, bit for bit ({} shapes x arms, {} steps each)", results.len(), config.steps);
    Ok(ExitCode::SUCCESS)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
