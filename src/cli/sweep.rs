//! `metaprep sweep`: its flags, their validation, and the run.

use super::common::{
    check_run_out, default_out, forward_us, parse_parent, resume_target, seq_lens_within, time_cap,
    usage, validate_shapes, DeviceArgs, NvtxArgs, PinArgs, PrepAxes,
};
use crate::cli::lists::{arms, families, layouts, parse_u32_list};
use crate::exit::Exit;
use crate::report::targets;
use crate::runs::sweep::{self, SweepConfig};
use crate::stats::rounds::{MAX_ROUNDS, MIN_ROUNDS};
use crate::stats::stopping::StoppingRule;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    #[command(flatten)]
    pub(crate) pin: PinArgs,
    #[command(flatten)]
    pub(crate) nvtx: NvtxArgs,
    #[command(flatten)]
    pub(crate) prep: PrepAxes,
    /// Batch sizes (requests per step), comma separated. A dep layout gives each GPU
    /// ceil(bs / dp) of them.
    #[arg(long, default_value = "1,8,64,256")]
    pub(crate) batch_sizes: String,
    /// Block sizes, comma separated: DSpark's draft block gamma, or DSA's N draft tokens
    /// per request (decode has one row per request whatever the block).
    #[arg(long, default_value = "3,5,8")]
    pub(crate) block_sizes: String,
    /// Tensor-parallel layouts, comma separated: tp1, tp2, tp4, tp8 (1/TP of every layer
    /// per GPU, whole batch) or dep2, dep4 (attention data-parallel: bs/DP per GPU). The
    /// prep is per rank and does not depend on the TP degree, so tp layouts measure the same
    /// prep (only dep changes the batch a rank prepares); a layout needing more GPUs than
    /// the host has runs one rank and is marked emulated. `metaprep steps` is where TP
    /// changes the forward.
    #[arg(long, default_value = "tp1")]
    pub(crate) tp: String,
    /// GPU time of the stand-in forward launched after each prep for the step_fwd_us
    /// metric (the GPU is busy when the next host read lands); 0 skips it.
    #[arg(long, allow_negative_numbers = true, default_value_t = 20.0)]
    pub(crate) forward_us: f64,
    /// Longest context a request may reach: the static width of the page tables the graph
    /// path sizes by (tokens).
    #[arg(long, default_value_t = 131072)]
    pub(crate) max_context: u32,
    /// Committed lengths are drawn uniformly from MIN-MAX tokens.
    #[arg(long, default_value = "2048-8192")]
    pub(crate) seq_lens: String,
    /// Rounds every cell is measured in. Each round measures the floor, then visits every
    /// cell group (the arms of one family, layout, batch and block, back to back) in a
    /// fresh order drawn from --seed and the round; a cell's row is the median of its rounds'
    /// medians, its 95% interval the spread between rounds, so drift during the run widens
    /// it. 6 is the fewest whose medians give a distribution-free 95% interval; fewer are
    /// refused.
    #[arg(long, default_value_t = MIN_ROUNDS)]
    pub(crate) rounds: usize,
    /// Most rounds a cell group gets: after --rounds, a group gets another round only while
    /// an arm's step_us interval is wider than --rel-ci-pct (or 20 ns) or its host-read
    /// cost's (eager-sync − eager-device, paired by round) wider than ±1% or ±0.3 µs, and
    /// until its time cap; the rows' stop_reason says which ended it (precision, max-rounds,
    /// time-cap). On the H200 eager-sync's read blocks about 11 or 17 µs at batch 8 from round to
    /// round: a copy queued behind running GPU work completes in steps of about 8 µs, and the
    /// host's speed decides whether the read lands behind the prep's last kernel (the floor's
    /// d2h-int-busy; results/2026-11-29-h200-read-landing/). So eager groups take every
    /// round: at 20 the default sweep took 226 s on the H200 (seven arms, five workers;
    /// results/2026-12-01-h200-sweep/), at 12 it fits in three minutes.
    #[arg(long, default_value_t = 12)]
    pub(crate) max_rounds: usize,
    /// Most rounds a GPU-paced arm's cell gets (graph-upload, graph, fused: the arms whose
    /// step the GPU paces): once its group's rounds stop, such a cell goes on alone while its
    /// step_us or gpu_prep_us interval is wider than --gpu-paced-rel-ci-pct, up to this or its
    /// group's time cap (stop_reason precision, gpu-paced-max-rounds, time-cap). Those rounds
    /// visit only these arms and run no forward (their step_fwd_us keeps the group's rounds).
    /// Their intervals are set by rounds and their cells are cheap: on the H200 12 rounds gave
    /// ±1.1–2.0%, which left 55% of the GPU-paced rows of an A/A `uncertain` at compare's ±2%;
    /// 18 more rounds of these arms take about 30 s there (issue 25). At or below
    /// --max-rounds: none.
    #[arg(long, default_value_t = 30)]
    pub(crate) gpu_paced_max_rounds: usize,
    /// Precision a GPU-paced arm's own rounds aim at, in percent of the median: with two runs
    /// at ±0.7% an A/A change interval is about ±1%, half compare's default ±2% threshold.
    #[arg(long, default_value_t = 0.7)]
    pub(crate) gpu_paced_rel_ci_pct: f64,
    /// Precision aimed at, in percent of the median: a group stops adding rounds once every
    /// arm's step_us interval between rounds is within it (and its read cost's is within
    /// ±1% or ±0.3 µs).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) rel_ci_pct: f64,
    /// Samples per metric of a cell in each round (a round stops there, or at its share of
    /// --time-cap-ms): its median is the round's value. 10 keep a round's median from resting
    /// on one outlier; more per round buy nothing the interval between rounds shows.
    #[arg(long, default_value_t = 10)]
    pub(crate) min_samples: usize,
    /// Time cap of a cell per metric over all its rounds, in milliseconds: each round's
    /// sampling stops at this / --rounds even short of its samples, and a group gets no round
    /// beyond --rounds once its measuring time reaches its cells' caps together.
    #[arg(long, default_value_t = 500)]
    pub(crate) time_cap_ms: u64,
    /// Steps per sample: a sample is the wall time of this many steps over their count.
    #[arg(long, default_value_t = 50, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub(crate) steps_per_sample: usize,
    /// Seed for the random inputs and the rounds' visiting orders.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Output directory (default results/sweep-DATE, DATE the UTC date and time).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Continue an interrupted sweep in --out: cell groups whose rounds had stopped are kept,
    /// every other group is measured again from its first round.
    #[arg(long)]
    pub(crate) resume: bool,
    /// Worker processes the rounds are shared out over, started one after another
    /// (metaprep's hidden `sweep-worker`): the first --rounds over up to N workers, so a group
    /// that stops there has seen N processes, then the rounds up to --max-rounds of the groups
    /// still open over up to N more; 1 measures every round in this process. A process draws its state
    /// once for all its rounds (where its memory and the driver's structures landed, its
    /// CPU's state): on the H200 host one process's graph host_issue_us sat 50-58% above
    /// another's with intervals that excluded zero, so rounds in one process cannot show that
    /// spread. Each worker costs its start (a GPU context, the kernels' compile, the inputs);
    /// env.json names each worker's pinned CPU and its host speed, rounds.csv which worker
    /// measured each round.
    #[arg(long, default_value_t = DEFAULT_PROCESSES)]
    pub(crate) processes: usize,
}

/// Worker processes a sweep's rounds are shared out over by default: five draws of a process's
/// state in a group's first six rounds and five more in the rest, for a few seconds' start each.
pub const DEFAULT_PROCESSES: usize = 5;

/// `metaprep sweep-worker` (hidden): rounds of a sweep measured for the sweep that started
/// it, which passes its own sweep arguments after `--`.
#[derive(Args)]
pub struct SweepWorkerArgs {
    /// The first round to measure, from 0 over the whole run.
    #[arg(long)]
    first_round: usize,
    /// How many rounds to measure.
    #[arg(long)]
    rounds: usize,
    /// Grid indices of the cell groups to visit, comma separated.
    #[arg(long, value_delimiter = ',')]
    groups: Vec<usize>,
    /// The parent's `sweep` arguments.
    #[arg(last = true)]
    sweep_args: Vec<std::ffi::OsString>,
}

impl SweepWorkerArgs {
    /// The rounds and groups this worker was given.
    pub(crate) fn assignment(&self) -> crate::runs::sweep_workers::Assignment {
        crate::runs::sweep_workers::Assignment {
            first_round: self.first_round,
            rounds: self.rounds,
            groups: self.groups.clone(),
        }
    }
}

/// Runs a sweep worker: its rounds' messages go to stdout; an error ends it with exit 1 and
/// its message on stderr, which the parent quotes.
pub(crate) fn sweep_worker(args: &SweepWorkerArgs) -> Result<ExitCode> {
    let sweep: SweepArgs = match parse_parent("sweep", &args.sweep_args) {
        Ok(sweep) => sweep,
        Err(code) => return Ok(code),
    };
    sweep.nvtx.apply();
    let config = match sweep_config(&sweep, args.sweep_args.clone()) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    crate::runs::sweep_workers::serve(&config, &args.assignment(), &mut std::io::stdout().lock())?;
    Ok(Exit::Ok.into())
}

pub(crate) fn sweep_config(
    args: &SweepArgs,
    command_args: Vec<std::ffi::OsString>,
) -> Result<SweepConfig, ExitCode> {
    usage(resume_target(args.resume, &args.out))?;
    let positive = |v: f64, flag: &str| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(anyhow::anyhow!("{flag}: {v} is not a positive number"))
        }
    };
    if args.rel_ci_pct > 100.0 {
        return usage(Err(anyhow::anyhow!(
            "--rel-ci-pct: {}% is no precision: an interval of more than ±100% of the median \
             says nothing (1 by default)",
            args.rel_ci_pct
        )));
    }
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
    if args.gpu_paced_max_rounds > MAX_ROUNDS {
        return usage(Err(anyhow::anyhow!(
            "--gpu-paced-max-rounds: {} is more than {MAX_ROUNDS}",
            args.gpu_paced_max_rounds
        )));
    }
    if args.gpu_paced_rel_ci_pct > 100.0 {
        return usage(Err(anyhow::anyhow!(
            "--gpu-paced-rel-ci-pct: {}% is no precision (0.7 by default)",
            args.gpu_paced_rel_ci_pct
        )));
    }
    if args.processes == 0 || args.processes > args.max_rounds {
        return usage(Err(anyhow::anyhow!(
            "--processes: {} must be between 1 (every round in this process) and --max-rounds \
             ({}): a worker measures one round at least",
            args.processes,
            args.max_rounds
        )));
    }
    let config = SweepConfig {
        gpu: args.device.choice(),
        cpu: usage(args.pin.checked())?,
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
        gpu_paced_max_rounds: args.gpu_paced_max_rounds,
        gpu_paced_rel_ci: usage(positive(
            args.gpu_paced_rel_ci_pct,
            "--gpu-paced-rel-ci-pct",
        ))? / 100.0,
        steps_per_sample: usage(positive(args.steps_per_sample as f64, "--steps-per-sample"))?
            as usize,
        seed: args.seed,
        out: args.out.clone().unwrap_or_else(|| default_out("sweep")),
        resume: args.resume,
        processes: args.processes,
        args: command_args,
    };
    validate_shapes(
        &config.families,
        &config.batch_sizes,
        &config.block_sizes,
        config.max_context,
    )?;
    Ok(config)
}

/// The settings of the sweep this process runs itself, its --out checked too (a worker's is
/// not: the parent made that folder, and an earlier worker wrote into it).
pub(crate) fn parent_config(
    args: &SweepArgs,
    command_args: Vec<std::ffi::OsString>,
) -> Result<SweepConfig, ExitCode> {
    let config = sweep_config(args, command_args)?;
    usage(check_run_out(&config.out, config.resume, config.settings()))?;
    Ok(config)
}

pub(crate) fn run_sweep(config: &SweepConfig) -> Result<ExitCode> {
    let outcome = sweep::run(config)?;
    let table = targets::render(&targets::speed_targets(
        &outcome.rows,
        Some(outcome.seconds),
    ));
    crate::results::atomic::write_atomic(&outcome.dir.join("targets.md"), table.as_bytes())?;
    // What ended each cell's rounds, and how many it got: where the time went.
    let mut stops: std::collections::BTreeMap<(&str, u32), usize> = Default::default();
    for r in outcome
        .rows
        .iter()
        .filter(|r| r.kind == crate::results::csv::KIND_PREP && r.metric == "step_us")
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
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::settings::Settings;
    use clap::Parser;

    fn config_of(line: &str) -> SweepConfig {
        let argv = std::iter::once("metaprep").chain(line.split_whitespace());
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let crate::cli::Command::Sweep(args) = cli.command else {
            panic!("not a sweep command line");
        };
        sweep_config(&args, Vec::new()).unwrap_or_else(|_| panic!("{line} refused"))
    }

    #[test]
    fn the_settings_record_the_gpu_paced_rounds() {
        let Settings::Sweep(default) = config_of("sweep").settings() else {
            panic!("not a sweep's settings");
        };
        assert_eq!(
            (default.max_rounds, default.gpu_paced_max_rounds),
            (12, Some(30))
        );
        assert_eq!(default.gpu_paced_rel_ci_pct, Some(0.7));
        let config = config_of("sweep --gpu-paced-max-rounds 20 --gpu-paced-rel-ci-pct 0.5");
        assert_eq!((config.gpu_paced_max_rounds, config.last_round()), (20, 20));
        assert!((config.gpu_paced_rel_ci - 0.005).abs() < 1e-12);
        // A cap at or below --max-rounds gives the GPU-paced arms no rounds of their own.
        let none = config_of("sweep --gpu-paced-max-rounds 8");
        assert_eq!(none.last_round(), 12);
        assert!(!none.gpu_paced_round(11) && none.gpu_paced_round(12));
    }
}
