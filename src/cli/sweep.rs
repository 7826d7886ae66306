//! `metaprep sweep`: its flags, their validation, and the run; the hidden `sweep-worker`.

use super::common::{
    check_run_out, default_out, forward_us, precision_pct, resume_target, usage, validate_shapes,
    DeviceArgs, NvtxArgs, PinArgs, PrepAxes,
};
use super::grid_args::{GridArgs, RoundsArgs};
use super::lists::{distinct, layout};
use crate::axes::Layout;
use crate::exit::Exit;
use crate::report::targets;
use crate::results::config_file::ConfigFile;
use crate::runs::sweep::{self, SweepConfig};
use crate::stats::rounds::MAX_ROUNDS;
use crate::stats::stopping::StoppingRule;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(mut_arg("batch_sizes", |a| a.default_value("1,8,64,256")))]
#[command(mut_arg("max_context", |a| a.default_value("131072").required(false)))]
#[command(mut_arg("max_rounds", |a| a.default_value("12").required(false)))]
#[command(mut_arg("precision_pct", |a| a.default_value("1").required(false)))]
#[command(mut_arg("cell_time_cap_ms", |a| a.default_value("500").required(false)))]
pub struct SweepArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    #[command(flatten)]
    pub(crate) pin: PinArgs,
    #[command(flatten)]
    pub(crate) nvtx: NvtxArgs,
    #[command(flatten)]
    pub(crate) prep: PrepAxes,
    #[command(flatten)]
    pub(crate) grid: GridArgs,
    /// Tensor-parallel layouts, comma separated: tp1, tp2, tp4, tp8 (1/TP of every layer
    /// per GPU, whole batch) or dep2, dep4 (attention data-parallel: bs/DP per GPU). The
    /// prep is per rank and does not depend on the TP degree, so tp layouts measure the same
    /// prep (only dep changes the batch a rank prepares); a layout needing more GPUs than
    /// the host has runs one rank and is marked emulated. `metaprep steps` is where TP
    /// changes the forward.
    #[arg(long, value_delimiter = ',', value_parser = layout, default_value = "tp1")]
    pub(crate) tp: Vec<Layout>,
    /// GPU time of the stand-in forward launched after each prep for the step_fwd_us
    /// metric (the GPU is busy when the next host read lands); 0 skips it.
    #[arg(long, allow_negative_numbers = true, default_value_t = 20.0)]
    pub(crate) forward_us: f64,
    #[command(flatten)]
    pub(crate) rounds: RoundsArgs,
    /// Most rounds a GPU-paced arm's cell gets (graph-upload, graph, fused: the arms whose
    /// step the GPU paces): once its group's rounds stop, such a cell goes on alone while its
    /// step_us or gpu_prep_us interval is wider than --gpu-paced-precision-pct, up to this or
    /// its group's time cap (stop_reason precision, gpu-paced-max-rounds, time-cap). Those
    /// rounds visit only these arms and run no forward (their step_fwd_us keeps the group's
    /// rounds). At or below --max-rounds: none.
    #[arg(long, default_value_t = 30)]
    pub(crate) gpu_paced_max_rounds: usize,
    /// Precision a GPU-paced arm's own rounds aim at, in percent of the median: with two runs
    /// at ±0.7% an A/A change interval is about ±1%, half compare's default ±2% threshold.
    #[arg(long, default_value_t = 0.7)]
    pub(crate) gpu_paced_precision_pct: f64,
    /// Samples per metric of a cell in each round (a round stops there, or at its share of
    /// --cell-time-cap-ms): its median is the round's value. 10 keep a round's median from
    /// resting on one outlier; more per round buy nothing the interval between rounds shows.
    #[arg(long, default_value_t = 10)]
    pub(crate) min_samples: usize,
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
    /// (metaprep's hidden `sweep-worker`): the first --min-rounds over up to N workers, so a
    /// group that stops there has seen N processes, then the rounds up to --max-rounds of the
    /// groups still open over up to N more, then the GPU-paced arms' own rounds over up to N
    /// more; 1 measures every round in this process. A process draws its state once for all
    /// its rounds (where its memory and the driver's structures landed, its CPU's state),
    /// which rounds in one process cannot show, so a cell whose rounds span six processes or
    /// more has its interval over processes (each one unit, its rounds' samples together),
    /// not over rounds. Each worker costs its start (a GPU context, the kernels' load, the
    /// inputs) and each cell's first visit in it; env.json names each worker's pinned CPU,
    /// start and host speed, rounds.csv which worker measured each round. Default: 9, or
    /// --max-rounds where that is fewer (a worker measures one round at least).
    #[arg(long)]
    pub(crate) processes: Option<usize>,
}

/// Worker processes a sweep's rounds are shared out over by default: a group's first six
/// rounds in six processes and the rest up to --max-rounds in six more, one round each, and
/// the GPU-paced arms' own 18 in nine, two each, so a cell's interval over processes
/// ([`crate::stats::rounds::units`]) has up to 21 units; a worker's start is cheap
/// (docs/h200-findings.md: a process's draw).
pub const DEFAULT_PROCESSES: usize = 9;

/// `metaprep sweep-worker` (hidden): rounds of a sweep measured for the sweep that started
/// it. It reads the parent's validated config from the file `--settings` names (written by
/// [`crate::runs::sweep::workers`]; no command line is parsed again) and takes its rounds and
/// groups from its flags.
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
    /// The parent's validated `sweep` config, as JSON: what every worker of the run measures.
    #[arg(long, value_name = "FILE")]
    settings: PathBuf,
    #[command(flatten)]
    nvtx: NvtxArgs,
}

impl SweepWorkerArgs {
    /// The rounds and groups this worker was given.
    pub(crate) fn assignment(&self) -> crate::runs::sweep::workers::Assignment {
        crate::runs::sweep::workers::Assignment {
            first_round: self.first_round,
            rounds: self.rounds,
            groups: self.groups.clone(),
        }
    }
}

/// Runs a sweep worker: its rounds' messages go to stdout; an error ends it with exit 1 and
/// its message on stderr, which the parent quotes (a missing or malformed --settings file,
/// exit 2).
pub(crate) fn sweep_worker(args: &SweepWorkerArgs) -> Result<ExitCode> {
    args.nvtx.apply();
    let config = match usage(SweepConfig::read_json(&args.settings)) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    crate::runs::sweep::workers::serve(&config, &args.assignment(), &mut std::io::stdout().lock())?;
    Ok(Exit::Ok.into())
}

pub(crate) fn sweep_config(args: &SweepArgs) -> Result<SweepConfig, ExitCode> {
    usage(resume_target(args.resume, &args.out))?;
    let rounds = usage(args.rounds.checked())?;
    if args.min_samples < 2 {
        return usage(Err(anyhow::anyhow!(
            "--min-samples: {} is too few: an interval needs at least 2 samples (10 by default)",
            args.min_samples
        )));
    }
    if args.gpu_paced_max_rounds > MAX_ROUNDS {
        return usage(Err(anyhow::anyhow!(
            "--gpu-paced-max-rounds: {} is more than {MAX_ROUNDS}",
            args.gpu_paced_max_rounds
        )));
    }
    let gpu_paced_pct = usage(precision_pct(
        args.gpu_paced_precision_pct,
        "--gpu-paced-precision-pct",
    ))?;
    // Given, it must fit the rounds; left out, it is the default cut to them.
    let processes = (args.processes).unwrap_or(DEFAULT_PROCESSES.min(rounds.max));
    if processes == 0 || processes > rounds.max {
        return usage(Err(anyhow::anyhow!(
            "--processes: {} must be between 1 (every round in this process) and --max-rounds \
             ({}): a worker measures one round at least",
            processes,
            rounds.max
        )));
    }
    let (batch_sizes, block_sizes, seq_lens) = usage(args.grid.checked())?;
    let (families, arms) = usage(args.prep.checked())?;
    usage(distinct(&args.tp, "--tp"))?;
    let config = SweepConfig {
        gpu: args.device.choice(),
        cpu: usage(args.pin.checked())?,
        families,
        arms,
        batch_sizes,
        block_sizes,
        layouts: args.tp.clone(),
        forward_us: if args.forward_us == 0.0 {
            0.0
        } else {
            usage(forward_us(args.forward_us))?
        },
        max_context: args.grid.max_context,
        seq_lens,
        rule: StoppingRule {
            rel_ci: rounds.precision_pct / 100.0,
            time_cap: rounds.cell_time_cap,
            min_samples: args.min_samples,
            ..StoppingRule::default()
        },
        rounds: rounds.min,
        max_rounds: rounds.max,
        gpu_paced_max_rounds: args.gpu_paced_max_rounds,
        gpu_paced_rel_ci: gpu_paced_pct / 100.0,
        steps_per_sample: args.steps_per_sample,
        seed: args.seed,
        out: args.out.clone().unwrap_or_else(|| default_out("sweep")),
        resume: args.resume,
        processes,
    };
    validate_shapes(
        &config.families,
        &config.batch_sizes,
        &config.block_sizes,
        config.max_context,
    )?;
    Ok(config)
}

/// The settings of the sweep this process runs itself, its --out checked too (its workers
/// run the config it hands them, checked here).
pub(crate) fn parent_config(args: &SweepArgs) -> Result<SweepConfig, ExitCode> {
    let config = sweep_config(args)?;
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
    crate::outln!(
        "sweep done in {:.0} s: {} rows in {}; cells by what stopped their rounds and when: {}\n\n{table}",
        outcome.seconds,
        outcome.rows.len(),
        outcome.dir.display(),
        stops.join(", ")
    );
    crate::outln!("next: metaprep report {}", outcome.dir.display());
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::settings::Settings;
    use clap::Parser;

    fn config_result(line: &str) -> Result<SweepConfig, ExitCode> {
        let argv = std::iter::once("metaprep").chain(line.split_whitespace());
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let crate::cli::Command::Sweep(args) = cli.command else {
            panic!("not a sweep command line");
        };
        sweep_config(&args)
    }

    fn config_of(line: &str) -> SweepConfig {
        config_result(line).unwrap_or_else(|_| panic!("{line} refused"))
    }

    #[test]
    fn the_default_processes_fit_the_rounds_and_a_given_count_must() {
        assert_eq!(config_of("sweep").processes, DEFAULT_PROCESSES);
        // Fewer rounds than the default's workers: one worker a round, not a refusal.
        assert_eq!(config_of("sweep --max-rounds 8").processes, 8);
        assert_eq!(config_of("sweep --max-rounds 8 --processes 3").processes, 3);
        assert!(
            config_result("sweep --max-rounds 8 --processes 9").is_err(),
            "9 workers for 8 rounds"
        );
    }

    #[test]
    fn the_config_round_trips_through_json_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep-config.json");
        let out = dir.path().join("run");
        let flagged = format!(
            "sweep --device 1 --kernel-image ptx --sync spin --cpu off --nvtx off \
             --families dsa_decode,dsa_draft_extend_v2 --arms eager-sync,graph-upload,fused \
             --batch-sizes 8,64 --block-sizes 3,8 --max-context 65536 --seq-lens 100-4000 \
             --tp tp2,dep4 --forward-us 12.5 --min-rounds 7 --max-rounds 9 \
             --precision-pct 0.3 --cell-time-cap-ms 250 --gpu-paced-max-rounds 40 \
             --gpu-paced-precision-pct 0.30000000000000004 --min-samples 12 \
             --steps-per-sample 7 --seed 99 --out {} --resume --processes 3",
            out.display()
        );
        for line in ["sweep", "sweep --forward-us 0", &flagged] {
            let config = config_of(line);
            config.write_json(&path).unwrap();
            assert_eq!(SweepConfig::read_json(&path).unwrap(), config, "{line}");
        }
        let flagged = config_of(&flagged);
        assert_eq!(flagged.layouts, [Layout::Tp(2), Layout::Dep(4)]);
        assert!(flagged.resume && flagged.out == out && flagged.processes == 3);
        // Families by the names the CSV writes.
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(json.contains("\"dsa_draft_extend_v2\""), "{json}");
    }

    /// The worker's command line is one the program's own parser takes, the floor-only round
    /// of a run whose groups all stopped included.
    #[test]
    fn the_program_parses_every_worker_command_it_makes() {
        use crate::runs::sweep::workers::{worker_command, Assignment};
        for groups in [vec![0, 3, 7], vec![]] {
            let assignment = Assignment {
                first_round: 6,
                rounds: 4,
                groups,
            };
            let settings = std::path::Path::new("/out/sweep-config.json");
            let c = worker_command(
                std::path::Path::new("metaprep"),
                &assignment,
                settings,
                false,
            );
            let argv = std::iter::once(c.get_program().to_owned())
                .chain(c.get_args().map(ToOwned::to_owned));
            let cli = crate::cli::Cli::try_parse_from(argv)
                .unwrap_or_else(|e| panic!("{:?}: {e}", assignment.groups));
            let crate::cli::Command::SweepWorker(worker) = cli.command else {
                panic!("not a sweep-worker command line");
            };
            assert_eq!(worker.assignment(), assignment);
            assert_eq!(worker.settings, settings);
            assert_eq!(worker.nvtx.nvtx, crate::cli::common::Switch::Off);
        }
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
        assert_eq!(default.gpu_paced_precision_pct, Some(0.7));
        let config = config_of("sweep --gpu-paced-max-rounds 20 --gpu-paced-precision-pct 0.5");
        assert_eq!((config.gpu_paced_max_rounds, config.last_round()), (20, 20));
        assert!((config.gpu_paced_rel_ci - 0.005).abs() < 1e-12);
        // A cap at or below --max-rounds gives the GPU-paced arms no rounds of their own, and
        // records none: the run's settings are those of a run before them.
        let none = config_of("sweep --gpu-paced-max-rounds 8");
        assert_eq!(none.last_round(), 12);
        let Settings::Sweep(off) = none.settings() else {
            panic!("not a sweep's settings");
        };
        assert_eq!(
            (off.gpu_paced_max_rounds, off.gpu_paced_precision_pct),
            (None, None)
        );
    }
}
