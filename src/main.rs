//! The metaprep command line.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use metaprep::axes::layout::Layout;
use metaprep::check::{self, CheckConfig};
use metaprep::cli_lists::{arms, families, layouts, parse_u32_list};
use metaprep::gpu::{Gpu, GpuUnavailable};
use metaprep::measure::pin::CpuPin;
use metaprep::measure::targets;
use metaprep::prep::inputs::LengthRange;
use metaprep::prep::{Family, Shape};
use metaprep::report::compare::{run_compare, CompareArgs, EXIT_BAD_INPUT};
use metaprep::results::run_dir::RunDir;
use metaprep::stats::rounds::MIN_ROUNDS;
use metaprep::stats::stopping::StoppingRule;
use metaprep::step::host_profile::{HostProfile, Item};
use metaprep::step::memory::{GpuMemory, NotDeployable};
use metaprep::step::profile::{ForwardModel, Profile};
use metaprep::step::run::{Cell, StepsConfig, TraceRequest};
use metaprep::step::stop::StepRounds;
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
    long_about = None,
    after_help = "Exit codes: 0 ok; 1 `compare` found a regression, or a command failed while \
                  running; 2 a bad flag or bad input (refused before any GPU work); 3 no GPU, \
                  CUDA driver or NVRTC."
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
    /// Time every arm over batch size x block size x layout in rounds (see --rounds), with the
    /// floor measured in every round; writes metaprep.csv, env.json and telemetry.csv to
    /// --out.
    Sweep(SweepArgs),
    /// Run the decode-step model (scheduler work, draft prep, draft forward, verify prep,
    /// verify forward, accept; host one step ahead) per arm, batch, block and layout: ITL,
    /// throughput, forward occupancy and host-bound gaps, into the same CSV as `sweep`.
    Steps(Box<StepsArgs>),
    /// Write charts (PNG + SVG) and summary.md beside a run's CSV. Needs no GPU.
    Report(ReportArgs),
    /// Derive a host profile (`steps --host-profile`) from a PyTorch profiler Chrome trace:
    /// per-op cost, reads, graph launches, the step's host program and each prep's ops.
    /// Needs no GPU.
    Calibrate(CalibrateArgs),
    Compare(CompareArgs),
}

#[derive(Args)]
struct SweepArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    pin: PinArgs,
    #[command(flatten)]
    prep: PrepAxes,
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
    /// prep is per rank and does not depend on the TP degree, so tp layouts measure the same
    /// prep (only dep changes the batch a rank prepares); a layout needing more GPUs than
    /// the host has runs one rank and is marked emulated. `metaprep steps` is where TP
    /// changes the forward.
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
    /// Rounds every cell is measured in. Each round measures the floor, then visits every
    /// cell group (the arms of one family, layout, batch and block, back to back) in a
    /// fresh order drawn from --seed and the round; a cell's row is the median of its rounds'
    /// medians, its 95% interval the spread between rounds, so drift during the run widens
    /// it. 6 is the fewest whose medians give a distribution-free 95% interval; fewer are
    /// refused.
    #[arg(long, default_value_t = MIN_ROUNDS)]
    rounds: usize,
    /// Most rounds a cell group gets: after --rounds, a group gets another round only while
    /// an arm's step_us interval is wider than --rel-ci-pct (or 20 ns) or its host-read
    /// cost's (eager-sync − eager-device, paired by round) wider than ±1% or ±0.3 µs, and
    /// until its time cap; the rows' stop_reason says which ended it (precision, max-rounds,
    /// time-cap).
    #[arg(long, default_value_t = 12)]
    max_rounds: usize,
    /// Precision aimed at, in percent of the median: inside a round, a cell stops sampling
    /// once the 95% CI of its median is within it; over rounds, a group stops once every
    /// arm's step_us interval between rounds is within it.
    #[arg(long, default_value_t = 1.0)]
    rel_ci_pct: f64,
    /// Fewest samples per metric of a cell in each round (10 give the round's median an
    /// interval that no single outlier holds open).
    #[arg(long, default_value_t = 10)]
    min_samples: usize,
    /// Time cap of a cell per metric over all its rounds, in milliseconds: each round's
    /// sampling stops at this / --rounds, and a group gets no round beyond --rounds once its
    /// measuring time reaches its cells' caps together.
    #[arg(long, default_value_t = 300)]
    time_cap_ms: u64,
    /// Steps per sample: a sample is the wall time of this many steps over their count.
    #[arg(long, default_value_t = 50)]
    steps_per_sample: usize,
    /// Seed for the random inputs and the rounds' visiting orders.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory (default results/sweep-<UTC date and time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue an interrupted sweep in --out: cell groups whose rounds had stopped are kept,
    /// every other group is measured again from its first round.
    #[arg(long)]
    resume: bool,
}

#[derive(Args)]
struct StepsArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    pin: PinArgs,
    /// Arms, comma separated: eager-sync (both metadata preps read seq_lens to the host,
    /// which blocks the host until the GPU catches up), eager-device, graph, graph-upload
    /// (graph replay with `[block] * bs` copied up before each replay), fused.
    #[arg(long, default_value = "eager-sync,eager-device,graph,graph-upload")]
    arms: String,
    /// Batch sizes (requests per step), comma separated. Default: 1,4,16,64, the small
    /// batches where a read's exposed host work matters; with --full, 1,2,4,8,16,32,64,128,256.
    /// Batch sizes a layout's GPUs cannot hold are left out.
    #[arg(long)]
    batch_sizes: Option<String>,
    /// The full grid: every batch size from 1 to 256 in powers of two (instead of 1,4,16,64),
    /// on every layout that fits. Takes several times the default's time.
    #[arg(long)]
    full: bool,
    /// Draft block sizes gamma, comma separated; the verify step checks the same N tokens.
    #[arg(long, default_value = "3,5,8")]
    block_sizes: String,
    /// Layouts, comma separated: tp1, tp2, tp4, tp8 (1/TP of every layer's weights per GPU,
    /// whole batch, an all-reduce per layer) or dep2, dep4 (attention data-parallel with
    /// bs/DP requests per GPU, experts spread over the DP GPUs, all-to-all per layer).
    /// Layouts needing more GPUs than the host has run one rank and are marked emulated.
    /// Only cells one GPU can hold run (target and draft weights plus KV cache within 90% of
    /// its memory); the others are left out with a note. Default: all six; a layout named
    /// here that holds no batch of the run is refused.
    #[arg(long)]
    tp: Option<String>,
    /// Memory of one GPU in GiB, to plan for another GPU than this one (default: the
    /// device's own total memory). Decides which layouts and batches fit (see --tp).
    #[arg(long, allow_negative_numbers = true)]
    gpu_memory_gib: Option<f64>,
    /// Target model profile for the verify forward: moe-large (DeepSeek-V3/V4-class MoE,
    /// FP8 weights, MLA cache), draft-small, or custom (see --custom-*).
    #[arg(long, default_value = "moe-large")]
    model: String,
    /// Model profile for the draft forward.
    #[arg(long, default_value = "draft-small")]
    draft_model: String,
    /// Custom profile: weight bytes per layer (before the TP split).
    #[arg(long, default_value_t = 200_000_000)]
    custom_weight_bytes_per_layer: u64,
    /// Custom profile: layers.
    #[arg(long, default_value_t = 32)]
    custom_layers: u32,
    /// Custom profile: KV-cache bytes per token per layer.
    #[arg(long, default_value_t = 1024)]
    custom_kv_bytes_per_token_per_layer: u64,
    /// Custom profile: hidden size (sizes the collectives).
    #[arg(long, default_value_t = 4096)]
    custom_hidden_size: u32,
    /// Replace both forwards by a fixed GPU busy-wait of this many µs (a quick what-if that
    /// ignores the profiles and the layout).
    #[arg(long)]
    forward_us: Option<f64>,
    /// Mean tokens accepted per request per step, bonus token included (between 1 and
    /// block + 1 for every block size).
    #[arg(long, default_value_t = 3.51)]
    accept_length: f64,
    /// The host program of a step and what each piece costs: `pytorch` (measured from
    /// PyTorch on an H200 by scripts/calibrate_torch.py: framework ops per prep at their
    /// measured host cost), `native` (the Rust harness's own launches and reads, nothing
    /// added), or a JSON file (written by scripts/calibrate_torch.py or `metaprep calibrate`;
    /// host-profiles/README.md documents every field).
    #[arg(long, default_value = "pytorch")]
    host_profile: String,
    /// Replace the µs of the program's `scheduler` host segment (a what-if).
    #[arg(long)]
    host_work_us: Option<f64>,
    /// What-if factors on every host cost of the profile (host segments and per-op costs;
    /// reads, launches and op counts stay as measured), comma separated, such as 0.5,1,2,4:
    /// each factor runs the whole grid again, its rows' family marked `host x<factor>`, and
    /// `report` charts graph's throughput gain against it.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    host_scale: Vec<f64>,
    /// Link bandwidth the emulated collectives move their bytes at (GB/s).
    #[arg(long, default_value_t = 450.0)]
    link_gb_s: f64,
    /// Latency of one collective (µs), added to bytes / bandwidth. Default: by GPU count,
    /// 4.5/4.8/7.8 µs at 2/4/8 GPUs (a custom all-reduce on H100, sgl-project/sglang#2904).
    #[arg(long)]
    collective_latency_us: Option<f64>,
    /// A cell (layout, batch, block) runs its arms in rounds, back to back in each round:
    /// measured steps of one arm's clean pass in one round.
    #[arg(long, default_value_t = 30)]
    round_steps: usize,
    /// Fewest rounds per cell (6 at least: fewer round medians give no 95% interval).
    #[arg(long, default_value_t = 6)]
    min_rounds: usize,
    /// Most rounds per cell.
    #[arg(long, default_value_t = 20)]
    max_rounds: usize,
    /// A cell stops once every arm's step time against eager-sync's (paired within rounds)
    /// has a 95% interval within ± this many percentage points, after --min-rounds.
    #[arg(long, default_value_t = 0.5)]
    precision_pct: f64,
    /// Time cap of one cell, all its arms and rounds, ms: it stops there, precise or not
    /// (its rows' stop_reason says which).
    #[arg(long, default_value_t = 15_000)]
    cell_time_cap_ms: u64,
    /// Warm-up steps before each clean pass's measured ones.
    #[arg(long, default_value_t = 10)]
    warmup_steps: usize,
    /// Steps of each arm's timeline pass (events around each phase: occupancy, gaps, trace).
    #[arg(long, default_value_t = 40)]
    timeline_steps: usize,
    /// Time cap of each timeline pass, ms (3 steps at least).
    #[arg(long, default_value_t = 1000)]
    timeline_cap_ms: u64,
    /// Longest context a request may reach (tokens): the page tables' static width.
    #[arg(long, default_value_t = 32768)]
    max_context: u32,
    /// Committed lengths are drawn uniformly from MIN-MAX tokens.
    #[arg(long, default_value = "2048-8192")]
    seq_lens: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory (default results/steps-<UTC date and time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue an interrupted run in --out.
    #[arg(long)]
    resume: bool,
    /// Write the timeline of --trace-cell as a Chrome trace-event JSON (opens in Perfetto):
    /// FILE for eager-sync, FILE-<arm>.json for the other arms.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The cell to trace, LAYOUT:BATCH:BLOCK (default: the first layout, batch and block).
    #[arg(long)]
    trace_cell: Option<String>,
}

#[derive(Args)]
struct CalibrateArgs {
    /// A Chrome trace from `torch.profiler` (`export_chrome_trace`), each decode step inside
    /// `record_function("step")` (or `prof.step()`), its parts named `scheduler`,
    /// `draft prep`, `draft forward`, `verify prep`, `verify forward`, `accept`, ... as
    /// scripts/calibrate_torch.py records them.
    trace: PathBuf,
    /// The profile whose values stand where the trace shows nothing (an arm it did not run,
    /// a foreign engine's program): native, pytorch or a JSON file.
    #[arg(long, default_value = "pytorch")]
    base: String,
    /// Where to write the derived profile (JSON); it must not exist yet, unless --force.
    #[arg(long)]
    out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct ReportArgs {
    /// A run directory written by `metaprep sweep` or `metaprep steps`.
    run_dir: PathBuf,
}

/// Where the measuring thread runs.
#[derive(Args)]
struct PinArgs {
    /// CPU to pin the measuring thread to once the GPU is open: a CPU number, `auto` (the
    /// last CPU this process may run on) or `off`. Unpinned, the OS moves the thread between
    /// cores, and host costs of a few µs move by tens of percent with it. env.json records
    /// the CPU and its cpufreq governor where readable.
    #[arg(long, default_value = "auto")]
    cpu: CpuPin,
}

#[derive(Args)]
struct DeviceArgs {
    /// CUDA device ordinal to run on.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// The prep axes `check` and `sweep` share.
#[derive(Args)]
struct PrepAxes {
    /// Metadata families, comma separated: dspark_draft_block, dsa_decode,
    /// dsa_target_verify, dsa_draft_extend_v2.
    #[arg(
        long,
        default_value = "dspark_draft_block,dsa_decode,dsa_target_verify,dsa_draft_extend_v2"
    )]
    families: String,
    /// Arms, comma separated: eager-sync (host read each step, the "before"), eager-device
    /// (device lengths, eager launches), graph (device lengths, one graph replay),
    /// graph-upload (graph, but `[block] * bs` copied up from the host before each replay, as
    /// the merged DSA draft-extend path does), fused (one kernel, in a graph).
    #[arg(
        long,
        default_value = "eager-sync,eager-device,graph,graph-upload,fused"
    )]
    arms: String,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Seed for the random inputs (default: a fresh one, printed so a failure can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    prep: PrepAxes,
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
    // Die quietly on a closed pipe (`metaprep compare A B | head`), as Unix tools do,
    // instead of panicking in println!.
    #[cfg(unix)]
    // SAFETY: restores the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("metaprep: error: {e:#}");
            if e.downcast_ref::<GpuUnavailable>().is_some() {
                ExitCode::from(EXIT_NO_GPU)
            } else if e.downcast_ref::<NotDeployable>().is_some() {
                // Known only once the memory per GPU is, which may take opening the device.
                ExitCode::from(EXIT_BAD_INPUT)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `--resume` continues the run in `--out`: without one there is nothing to continue.
fn resume_target(resume: bool, out: &Option<PathBuf>) -> Result<()> {
    if resume && out.is_none() {
        anyhow::bail!("--resume continues the run in --out DIR: name that directory");
    }
    Ok(())
}

/// A time cap flag in ms: at least 1 ms, at most an hour (beyond that a value is a typo).
fn time_cap(ms: u64, flag: &str) -> Result<Duration> {
    if ms == 0 || ms > 3_600_000 {
        anyhow::bail!("{flag}: {ms} is not a time cap between 1 ms and an hour");
    }
    Ok(Duration::from_millis(ms))
}

/// A stand-in forward of `--forward-us`: positive, at most a second.
fn forward_us(us: f64) -> Result<f64> {
    if !(us.is_finite() && us > 0.0 && us <= 1e6) {
        anyhow::bail!(
            "--forward-us: {us} is not a duration in µs between 0 and a second (more than a \
             second is a typo: give microseconds, such as 20)"
        );
    }
    Ok(us)
}

/// More rounds than any sweep needs: a larger --max-rounds is a typo.
const MAX_ROUNDS: usize = 100;

/// No GPU, driver or NVRTC: distinct from a bad flag, so a script can tell them apart.
const EXIT_NO_GPU: u8 = 3;

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
        Command::Steps(args) => match steps_config(&args) {
            Ok(config) => run_steps(&config),
            Err(code) => Ok(code),
        },
        Command::Report(args) => report(&args.run_dir),
        Command::Calibrate(args) => calibrate(&args),
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

/// `--seq-lens`, whose longest length must leave room for the drafts within `--max-context`.
fn seq_lens_within(s: &str, max_context: u32) -> Result<LengthRange> {
    let range = parse_range(s)?;
    if range.max as u64 + 64 > max_context as u64 {
        anyhow::bail!(
            "--seq-lens: lengths up to {} do not fit --max-context {max_context}: raise --max-context or lower the range",
            range.max
        );
    }
    Ok(range)
}

/// The default `--out`: `results/<command>-<UTC date and time>`.
fn default_out(command: &str) -> PathBuf {
    PathBuf::from(format!(
        "results/{command}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    ))
}

fn sweep_config(args: &SweepArgs) -> Result<SweepConfig, ExitCode> {
    usage(resume_target(args.resume, &args.out))?;
    let positive = |v: f64, flag: &str| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(anyhow::anyhow!("{flag}: {v} is not a positive number"))
        }
    };
    let time_cap = usage(time_cap(args.time_cap_ms, "--time-cap-ms"))?;
    if args.min_samples < 2 {
        return usage(Err(anyhow::anyhow!(
            "--min-samples: {} is too few: an interval needs at least 2 samples (10 by default)",
            args.min_samples
        )));
    }
    if args.rounds < MIN_ROUNDS {
        return usage(Err(anyhow::anyhow!(
            "--rounds: {} is too few: the medians of {MIN_ROUNDS} rounds are the fewest that \
             give a 95% interval, and a row without one can never be called faster or slower",
            args.rounds
        )));
    }
    if args.max_rounds < args.rounds || args.max_rounds > MAX_ROUNDS {
        return usage(Err(anyhow::anyhow!(
            "--max-rounds: {} must be between --rounds ({}) and {MAX_ROUNDS}",
            args.max_rounds,
            args.rounds
        )));
    }
    let config = SweepConfig {
        device: args.device.device,
        cpu: args.pin.cpu,
        families: usage(families(&args.prep.families))?,
        arms: usage(arms(&args.prep.arms))?,
        batch_sizes: usage(parse_u32_list(&args.batch_sizes, "--batch-sizes"))?,
        block_sizes: usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?,
        layouts: usage(layouts(&args.tp))?,
        forward_us: if args.forward_us == 0.0 {
            0.0
        } else {
            usage(forward_us(args.forward_us))?
        },
        max_context: args.max_context,
        seq_lens: usage(seq_lens_within(&args.seq_lens, args.max_context))?,
        rule: StoppingRule {
            rel_ci: usage(positive(args.rel_ci_pct, "--rel-ci-pct"))? / 100.0,
            time_cap,
            min_samples: args.min_samples,
            ..StoppingRule::default()
        },
        rounds: args.rounds,
        max_rounds: args.max_rounds,
        steps_per_sample: usage(positive(args.steps_per_sample as f64, "--steps-per-sample"))?
            as usize,
        seed: args.seed,
        out: args.out.clone().unwrap_or_else(|| default_out("sweep")),
        resume: args.resume,
    };
    validate_shapes(
        &config.families,
        &config.batch_sizes,
        &config.block_sizes,
        config.max_context,
    )?;
    Ok(config)
}

fn run_sweep(config: &SweepConfig) -> Result<ExitCode> {
    let outcome = sweep::run(config)?;
    let table = targets::render(&targets::speed_targets(
        &outcome.rows,
        Some(outcome.seconds),
    ));
    metaprep::results::atomic::write_atomic(&outcome.dir.join("targets.md"), table.as_bytes())?;
    // What ended each cell's rounds, and how many it got: where the time went.
    let mut stops: std::collections::BTreeMap<(&str, u32), usize> = Default::default();
    for r in outcome
        .rows
        .iter()
        .filter(|r| r.kind == metaprep::results::csv::KIND_PREP && r.metric == "step_us")
    {
        *stops.entry((r.stop_reason.as_str(), r.rounds)).or_default() += 1;
    }
    let stops: Vec<String> = stops
        .iter()
        .map(|((reason, rounds), cells)| format!("{cells} {reason} at {rounds}"))
        .collect();
    println!(
        "sweep done in {:.0} s: {} rows in {}; cells by what stopped their rounds and when: {}\n\n{table}",
        outcome.seconds,
        outcome.rows.len(),
        outcome.dir.display(),
        stops.join(", ")
    );
    println!("next: metaprep report {}", outcome.dir.display());
    Ok(ExitCode::SUCCESS)
}

fn forward_model(name: &str, args: &StepsArgs) -> Result<ForwardModel> {
    if let Some(us) = args.forward_us {
        return Ok(ForwardModel::FixedUs(forward_us(us)?));
    }
    Ok(ForwardModel::Profile(if name == "custom" {
        Profile::custom(
            args.custom_weight_bytes_per_layer,
            args.custom_layers,
            args.custom_kv_bytes_per_token_per_layer,
            args.custom_hidden_size,
        )?
    } else {
        Profile::named(name)?
    }))
}

/// The `--host-profile`, with `--host-work-us` replacing its scheduler segment.
fn host_program(args: &StepsArgs) -> Result<HostProfile> {
    let mut host = HostProfile::load(&args.host_profile)?;
    if let Some(v) = args.host_work_us {
        let scheduler = host.program.iter_mut().find_map(|item| match item {
            Item::Host { name, us, .. } if name == "scheduler" => Some(us),
            _ => None,
        });
        let Some(us) = scheduler else {
            anyhow::bail!(
                "--host-work-us: host profile `{}` has no `scheduler` segment to replace",
                host.name
            );
        };
        *us = v;
    }
    Ok(host)
}

fn trace_cell(s: &str) -> Result<Cell> {
    let parts: Vec<&str> = s.split(':').collect();
    let [layout, bs, block] = parts.as_slice() else {
        anyhow::bail!("--trace-cell: `{s}` is not LAYOUT:BATCH:BLOCK, such as tp4:1:5");
    };
    let number = |v: &str| {
        v.parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .with_context(|| format!("--trace-cell: `{v}` is not a positive integer"))
    };
    Ok((layout.parse()?, number(bs)?, number(block)?))
}

/// `steps`' default batch sizes: small batches, where a read's exposed host work matters.
const DEFAULT_STEP_BATCHES: &str = "1,4,16,64";
/// `steps --full`'s.
const FULL_STEP_BATCHES: &str = "1,2,4,8,16,32,64,128,256";

fn steps_config(args: &StepsArgs) -> Result<StepsConfig, ExitCode> {
    let layouts = match &args.tp {
        Some(list) => usage(layouts(list))?,
        None => Layout::all().to_vec(),
    };
    let gpu_memory = usage(args.gpu_memory_gib.map(GpuMemory::from_gib).transpose())?;
    let default_batches = if args.full {
        FULL_STEP_BATCHES
    } else {
        DEFAULT_STEP_BATCHES
    };
    let batch_sizes = usage(parse_u32_list(
        args.batch_sizes.as_deref().unwrap_or(default_batches),
        "--batch-sizes",
    ))?;
    let block_sizes = usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?;
    let smallest_block = *block_sizes
        .iter()
        .min()
        .expect("a parsed list is not empty");
    if !(args.accept_length >= 1.0 && args.accept_length <= smallest_block as f64 + 1.0) {
        return usage(Err(anyhow::anyhow!(
            "--accept-length: {} is impossible with block {smallest_block}: a step accepts between 1 and block + 1 tokens",
            args.accept_length
        )));
    }
    for (v, flag) in [
        (args.host_work_us, "--host-work-us"),
        (Some(args.link_gb_s), "--link-gb-s"),
        (args.collective_latency_us, "--collective-latency-us"),
    ] {
        let Some(v) = v else { continue };
        if !(v.is_finite() && (0.0..=1e6).contains(&v)) || (flag == "--link-gb-s" && v == 0.0) {
            return usage(Err(anyhow::anyhow!(
                "{flag}: {v} is not a usable value (give a number between 0 and 1e6)"
            )));
        }
    }
    let host = usage(host_program(args))?;
    for &scale in &args.host_scale {
        usage(host.scaled(scale))?;
    }
    if args
        .host_scale
        .iter()
        .enumerate()
        .any(|(i, s)| args.host_scale[..i].contains(s))
    {
        return usage(Err(anyhow::anyhow!("--host-scale lists a factor twice")));
    }
    let rounds = usage(StepRounds::new(
        args.min_rounds,
        args.max_rounds,
        args.round_steps,
        args.precision_pct,
        usage(time_cap(args.cell_time_cap_ms, "--cell-time-cap-ms"))?,
    ))?;
    let timeline_cap = usage(time_cap(args.timeline_cap_ms, "--timeline-cap-ms"))?;
    if args.timeline_steps < 3 {
        return usage(Err(anyhow::anyhow!(
            "--timeline-steps ({}) must be at least 3",
            args.timeline_steps
        )));
    }
    validate_shapes(
        &[Family::DsparkDraftBlock, Family::DsaTargetVerify],
        &batch_sizes,
        &block_sizes,
        args.max_context,
    )?;
    let seq_lens = usage(seq_lens_within(&args.seq_lens, args.max_context))?;
    usage(resume_target(args.resume, &args.out))?;
    if args.trace_cell.is_some() && args.trace.is_none() {
        return usage(Err(anyhow::anyhow!(
            "--trace-cell picks the cell --trace writes: give --trace FILE too"
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| default_out("steps"));
    let cell = usage(args.trace_cell.as_deref().map(trace_cell).transpose())?;
    if let Some((layout, bs, block)) = cell {
        if !(layouts.contains(&layout) && batch_sizes.contains(&bs) && block_sizes.contains(&block))
        {
            return usage(Err(anyhow::anyhow!(
                "--trace-cell {layout}:{bs}:{block} is not a cell of this run (--tp, \
                 --batch-sizes, --block-sizes): no trace would be written"
            )));
        }
    }
    let trace = args.trace.clone().map(|path| TraceRequest { cell, path });
    Ok(StepsConfig {
        device: args.device.device,
        cpu: args.pin.cpu,
        arms: usage(arms(&args.arms))?,
        batch_sizes,
        block_sizes,
        layouts,
        layouts_named: args.tp.is_some(),
        gpu_memory,
        target: usage(forward_model(&args.model, args).context("--model"))?,
        draft: usage(forward_model(&args.draft_model, args).context("--draft-model"))?,
        accept_mean: args.accept_length,
        host,
        host_scales: args.host_scale.clone(),
        link_gb_s: args.link_gb_s,
        collective_latency_us: args.collective_latency_us,
        rounds,
        warmup_steps: args.warmup_steps,
        timeline_steps: args.timeline_steps,
        timeline_cap,
        max_context: args.max_context,
        seq_lens,
        seed: args.seed,
        out,
        resume: args.resume,
        trace,
    })
}

fn run_steps(config: &StepsConfig) -> Result<ExitCode> {
    let outcome = metaprep::step::run::run(config)?;
    println!(
        "steps done in {:.0} s: {} rows in {}",
        outcome.seconds,
        outcome.rows.len(),
        config.out.display()
    );
    println!("next: metaprep report {}", config.out.display());
    Ok(ExitCode::SUCCESS)
}

fn calibrate(args: &CalibrateArgs) -> Result<ExitCode> {
    let derived = (|| {
        let base = HostProfile::load(&args.base).context("--base")?;
        if args.out.exists() && !args.force {
            anyhow::bail!(
                "--out {} exists: choose another path or pass --force to replace it",
                args.out.display()
            );
        }
        if args.out == args.trace {
            anyhow::bail!("--out is the trace itself: choose another path");
        }
        metaprep::step::calibrate::calibrate_trace(&args.trace, &base)
    })();
    let calibration = match usage(derived) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    metaprep::results::atomic::write_atomic(&args.out, calibration.profile.to_json().as_bytes())?;
    println!("{}", calibration.report);
    println!("wrote {}", args.out.display());
    println!("next: metaprep steps --host-profile {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

fn report(dir: &std::path::Path) -> Result<ExitCode> {
    let run = RunDir::open(dir)?;
    let charts = metaprep::report::charts::render_all(
        dir,
        &run.rows,
        &run.env,
        &run.telemetry,
        &run.traces
            .iter()
            .map(|(name, json)| (name.as_str(), json.as_str()))
            .collect::<Vec<_>>(),
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
    println!(
        "host {} ({})",
        std::env::consts::ARCH,
        metaprep::measure::environment::cpu_model()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every shape a run will build, checked before any GPU work.
fn validate_shapes(
    families: &[Family],
    batch_sizes: &[u32],
    block_sizes: &[u32],
    max_context: u32,
) -> Result<(), ExitCode> {
    for &family in families {
        for &bs in batch_sizes {
            for &block in block_sizes {
                usage(Shape::new(family, bs, block, max_context))?;
            }
        }
    }
    Ok(())
}

fn check_config(args: &CheckArgs) -> Result<CheckConfig, ExitCode> {
    Ok(CheckConfig {
        seed: args.seed.unwrap_or_else(check::fresh_seed),
        families: usage(families(&args.prep.families))?,
        arms: usage(arms(&args.prep.arms))?,
        batch_sizes: usage(parse_u32_list(&args.batch_sizes, "--batch-sizes"))?,
        block_sizes: usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?,
        steps: args.steps as usize,
        token_budget: args.token_budget,
    })
    .and_then(|config: CheckConfig| {
        for &family in &config.families {
            for &bs in &config.batch_sizes {
                for &block in &config.block_sizes {
                    usage(check::check_shape(
                        family,
                        bs,
                        block,
                        config.steps,
                        config.token_budget,
                    ))?;
                }
            }
        }
        Ok(config)
    })
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
