//! `metaprep steps`: its flags, their validation, and the run.

use super::common::{
    check_run_out, default_out, resume_target, time_cap, usage, validate_shapes, writable_file,
    DeviceArgs, NvtxArgs, PinArgs,
};
use super::grid_args::{GridArgs, RoundsArgs};
use super::lists::{arm, distinct, layout};
use super::step_model::StepModelArgs;
use crate::axes::layout::Layout;
use crate::axes::{Arm, Drafter};
use crate::exit::Exit;
use crate::harness::timer::TimerKind;
use crate::model::memory::GpuMemory;
use crate::model::stop::StepRounds;
use crate::runs::rank_world::{RanksMode, ReadSkew};
use crate::runs::steps::{Cell, StepsConfig, TraceRequest};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Clone)]
#[command(mut_arg("batch_sizes", |a| a.default_value(DEFAULT_STEP_BATCHES)))]
#[command(mut_arg("max_context", |a| a.default_value("32768").required(false)))]
#[command(mut_arg("max_rounds", |a| a.default_value("20").required(false)))]
#[command(mut_arg("precision_pct", |a| a.default_value("0.5").required(false)))]
#[command(mut_arg("cell_time_cap_ms", |a| a.default_value("15000").required(false)))]
pub struct StepsArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    #[command(flatten)]
    pub(crate) pin: PinArgs,
    #[command(flatten)]
    pub(crate) nvtx: NvtxArgs,
    /// Arms, comma separated: eager-sync (both metadata preps read seq_lens to the host,
    /// which blocks the host until the GPU catches up), eager-device, graph, graph-upload
    /// (graph replay with `[block] * bs` copied up before each replay; under --drafter eagle
    /// before the draft-extend replay only, as SGLang's merged DSA path does), fused, and
    /// eager-pinned / eager-mapped (eager-sync's program with a pinned or a mapped read; not
    /// in the default: eager-pinned needs a host profile with a measured `pinned_read_us`,
    /// and the two add half again to the run's time).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = arm,
        default_value = "eager-sync,eager-device,graph,graph-upload"
    )]
    pub(crate) arms: Vec<Arm>,
    #[command(flatten)]
    pub(crate) grid: GridArgs,
    /// The full grid: every batch size from 1 to 256 in powers of two (instead of
    /// --batch-sizes' default), on every layout that fits. Takes several times the default's
    /// time. It picks the batch sizes, so it cannot be given with --batch-sizes.
    #[arg(long, conflicts_with = "batch_sizes")]
    pub(crate) full: bool,
    /// The step program: `dspark` (the DSpark draft block, then DSA target verify) or
    /// `eagle` (SGLang 0.5.23's spec-v2 EAGLE/MTP step with the DSA backend: draft passes,
    /// each a DSA decode prep and a one-token draft forward, then DSA target verify, then
    /// the draft model's DSA draft-extend over the N verified tokens, with the eager seams
    /// between them as host ops; every arm applies to all three preps). At block N, EAGLE
    /// runs N − 2 draft passes, not N − 1: with top-k 1, N = speculative_num_steps + 1, the
    /// first draft token comes from the previous step's draft-extend forward, and the draft
    /// loop runs speculative_num_steps − 1 forwards (eagle_worker_v2.py:808-847), so a block
    /// must be at least 2. Rows name the drafter in their `family` column.
    #[arg(long, default_value = "dspark")]
    pub(crate) drafter: Drafter,
    /// Layouts, comma separated: tp1, tp2, tp4, tp8 (1/TP of every layer's weights per GPU,
    /// whole batch, an all-reduce per layer) or dep2, dep4 (attention data-parallel with
    /// bs/DP requests per GPU, experts spread over the DP GPUs, all-to-all per layer).
    /// Layouts needing more GPUs than the host has run one rank and are marked emulated;
    /// those the host has the GPUs for run one process per GPU where NCCL loads (--ranks).
    /// Only cells one GPU can hold run (target and draft weights plus KV cache within 90% of
    /// its memory); the others are left out with a note. Default: all six; a layout named
    /// here that holds no batch of the run is refused.
    #[arg(long, value_delimiter = ',', value_parser = layout)]
    pub(crate) tp: Vec<Layout>,
    /// Memory of one GPU in GiB, to plan for another GPU than this one (default: the
    /// device's own total memory). Decides which layouts and batches fit (see --tp).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) gpu_memory_gib: Option<f64>,
    #[command(flatten)]
    pub(crate) step_model: StepModelArgs,
    /// A cell (layout, batch, block) runs its arms in rounds, back to back in each round:
    /// measured steps of one arm's clean pass in one round.
    #[arg(long, default_value_t = 30)]
    pub(crate) round_steps: usize,
    #[command(flatten)]
    pub(crate) rounds: RoundsArgs,
    /// Warm-up steps before each clean pass's measured ones.
    #[arg(long, default_value_t = 10)]
    pub(crate) warmup_steps: usize,
    /// Steps of each arm's timeline pass (occupancy, gaps, trace).
    #[arg(long, default_value_t = 40)]
    pub(crate) timeline_steps: usize,
    /// What times the timeline pass: `events` (CUDA events where each GPU phase begins and
    /// ends: one span per phase, gaps between an eager prep's own launches fall inside it) or
    /// `cupti` (CUPTI's activity records: every kernel, copy and memset its own span, so
    /// those gaps show, and the framework kernels of host phases count as busy). `cupti`
    /// needs libcupti (see --cupti-lib) and is an error without it. Step times, ITL and
    /// throughput come from the clean passes either way.
    #[arg(long, default_value_t = TimerKind::Events)]
    pub(crate) timer: TimerKind,
    /// The CUPTI library for --timer cupti. Default: searched in LD_LIBRARY_PATH, then in the
    /// NVIDIA wheels (site-packages/nvidia/cu13/lib, nvidia/cuda_cupti/lib) of $VIRTUAL_ENV,
    /// $CONDA_PREFIX and every python3 on PATH, then /usr/local/cuda/extras/CUPTI/lib64.
    #[arg(long, value_name = "FILE")]
    pub(crate) cupti_lib: Option<PathBuf>,
    /// Time cap of each timeline pass, ms (3 steps at least).
    #[arg(long, default_value_t = 1000)]
    pub(crate) timeline_cap_ms: u64,
    /// Seed for the random inputs (committed lengths, request rows), the accept draws and
    /// the read-skew jitter: the same seed replays the same steps.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Output directory (default results/steps-DATE, DATE the UTC date and time).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Continue an interrupted run in --out.
    #[arg(long)]
    pub(crate) resume: bool,
    /// Write the timeline of --trace-cell as a Chrome trace-event JSON (opens in Perfetto):
    /// FILE for eager-sync, FILE-ARM.json for each other arm ARM. FILE must not exist yet
    /// (unless --resume).
    #[arg(long)]
    pub(crate) trace: Option<PathBuf>,
    /// The cell to trace, LAYOUT:BATCH:BLOCK (default: the first layout, batch and block;
    /// with real ranks, the first real layout of several ranks). With real ranks the trace holds every
    /// rank, host lanes and GPU lane, one process each.
    #[arg(long)]
    pub(crate) trace_cell: Option<String>,
    /// How layouts wider than one GPU run. `real`: one process per GPU of the layout, each
    /// with its own CUDA context, stream, host loop and arm, the forwards' collectives real
    /// NCCL calls (all-reduce for tp, grouped send/receive all-to-all for dep) on its
    /// stream; every layout of the run, tp1 as a world of one rank; refused (exit 3) where
    /// the host lacks the GPUs or NCCL. `emulated`: one rank in this process, collectives as
    /// busy-waits, layouts wider than one GPU marked emulated. `auto`: real for layouts
    /// wider than one GPU that the host has the GPUs for when NCCL loads, emulated for the
    /// rest (and tp1 in this process).
    #[arg(long, default_value = "auto")]
    pub(crate) ranks: String,
    /// The NCCL library (libnccl.so.2) for real ranks. Default: $METAPREP_NCCL, then
    /// libnccl.so.2 in each LD_LIBRARY_PATH folder, Python site-packages' nvidia/nccl/lib
    /// (the NVIDIA pip wheels PyTorch installs), /usr/lib/ARCH-linux-gnu,
    /// /usr/local/cuda/lib64.
    #[arg(long)]
    pub(crate) nccl_lib: Option<PathBuf>,
    /// Extra host time (µs) after each host read of seq_lens, on --read-skew-rank: one slow
    /// host makes every rank wait at the next collective (straggler amplification).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub(crate) read_skew_us: f64,
    /// A further uniform draw from 0 to this many µs after each host read on
    /// --read-skew-rank (seeded from --seed and the rank): an unsteady host.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub(crate) read_skew_jitter_us: f64,
    /// The rank --read-skew-us slows (0 is the rank in this process when alone), or `all`.
    #[arg(long, default_value = "all")]
    pub(crate) read_skew_rank: String,
}

/// `--read-skew-us` and `--read-skew-rank`, checked.
fn read_skew(args: &StepsArgs) -> Result<ReadSkew> {
    for (v, flag) in [
        (args.read_skew_us, "--read-skew-us"),
        (args.read_skew_jitter_us, "--read-skew-jitter-us"),
    ] {
        anyhow::ensure!(
            v.is_finite() && (0.0..=1e6).contains(&v),
            "{flag}: {v} is not a usable value (give µs between 0 and 1e6)"
        );
    }
    let rank = match args.read_skew_rank.as_str() {
        "all" => None,
        r => Some(r.parse::<usize>().map_err(|_| {
            anyhow::anyhow!("--read-skew-rank: `{r}` is not a rank: give a number or `all`")
        })?),
    };
    Ok(ReadSkew {
        us: args.read_skew_us,
        jitter_us: args.read_skew_jitter_us,
        rank,
    })
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
    let layout = layout
        .parse()
        .map_err(|e: anyhow::Error| anyhow::anyhow!("--trace-cell `{s}`: {e}"))?;
    Ok((layout, number(bs)?, number(block)?))
}

/// The most steps one pass (--round-steps, --warmup-steps, --timeline-steps) may take.
const MAX_PASS_STEPS: usize = 1_000_000;

/// `steps`' default batch sizes: small batches, where a read's exposed host work matters.
const DEFAULT_STEP_BATCHES: &str = "1,4,16,64";
/// Refuses a block too small for `drafter`'s step: EAGLE at N = 1 drafts nothing
/// (speculative_num_steps 0 disables drafting in SGLang).
fn drafter_blocks(drafter: Drafter, blocks: &[u32]) -> Result<()> {
    if let Some(b) = blocks.iter().find(|&&b| drafter == Drafter::Eagle && b < 2) {
        anyhow::bail!(
            "--block-sizes {b}: an EAGLE step verifies N = speculative_num_steps + 1 tokens, \
             so N must be at least 2"
        );
    }
    Ok(())
}

/// `steps --full`'s.
const FULL_STEP_BATCHES: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// The step counts of a pass: a timeline of at least 3 steps, no pass over
/// [`MAX_PASS_STEPS`].
fn check_pass_steps(args: &StepsArgs) -> Result<()> {
    anyhow::ensure!(
        args.timeline_steps >= 3,
        "--timeline-steps ({}) must be at least 3",
        args.timeline_steps
    );
    for (v, flag) in [
        (args.round_steps, "--round-steps"),
        (args.warmup_steps, "--warmup-steps"),
        (args.timeline_steps, "--timeline-steps"),
    ] {
        anyhow::ensure!(
            v <= MAX_PASS_STEPS,
            "{flag}: {v} steps is more than {MAX_PASS_STEPS} per pass: give fewer"
        );
    }
    Ok(())
}

/// `--trace` with the cell `--trace-cell` picks, which must be a cell of the run.
fn trace_request(
    args: &StepsArgs,
    layouts: &[Layout],
    batch_sizes: &[u32],
    block_sizes: &[u32],
) -> Result<Option<TraceRequest>> {
    let cell = args.trace_cell.as_deref().map(trace_cell).transpose()?;
    if let Some((layout, bs, block)) = cell {
        anyhow::ensure!(
            layouts.contains(&layout) && batch_sizes.contains(&bs) && block_sizes.contains(&block),
            "--trace-cell {layout}:{bs}:{block} is not a cell of this run (--tp, \
             --batch-sizes, --block-sizes): no trace would be written"
        );
    }
    Ok(args.trace.clone().map(|path| TraceRequest { cell, path }))
}

/// [`read_skew`]'s flags, with a skewed rank that some layout of the run has and a skew for
/// it.
fn checked_read_skew(args: &StepsArgs, layouts: &[Layout]) -> Result<ReadSkew> {
    let read_skew = read_skew(args)?;
    let widest = layouts.iter().map(|l| l.gpus() as usize).max().unwrap_or(1);
    if let Some(rank) = read_skew.rank.filter(|&r| r >= widest) {
        anyhow::bail!(
            "--read-skew-rank {rank}: no layout of the run has that rank (the widest, {widest} \
             GPUs, has ranks 0 to {}); give a rank below {widest}, or `all`",
            widest - 1
        );
    }
    anyhow::ensure!(
        !(read_skew.rank.is_some() && read_skew.us == 0.0 && read_skew.jitter_us == 0.0),
        "--read-skew-rank picks the rank --read-skew-us or --read-skew-jitter-us slows: \
         give one of them too, or leave --read-skew-rank out"
    );
    Ok(read_skew)
}

pub(crate) fn steps_config(args: &StepsArgs) -> Result<StepsConfig, ExitCode> {
    usage(distinct(&args.tp, "--tp"))?;
    let layouts = match args.tp.as_slice() {
        [] => Layout::all().to_vec(),
        named => named.to_vec(),
    };
    let gpu_memory = usage(args.gpu_memory_gib.map(GpuMemory::from_gib).transpose())?;
    let (mut batch_sizes, block_sizes, seq_lens) = usage(args.grid.checked())?;
    if args.full {
        batch_sizes = FULL_STEP_BATCHES.to_vec();
    }
    usage(drafter_blocks(args.drafter, &block_sizes))?;
    let model = usage(args.step_model.checked(args.drafter, &block_sizes))?;
    let rounds = usage(args.rounds.checked())?;
    let rounds = usage(StepRounds::new(
        rounds.min,
        rounds.max,
        args.round_steps,
        rounds.precision_pct,
        rounds.cell_time_cap,
    ))?;
    let timeline_cap = usage(time_cap(args.timeline_cap_ms, "--timeline-cap-ms"))?;
    usage(check_pass_steps(args))?;
    validate_shapes(
        args.drafter.families(),
        &batch_sizes,
        &block_sizes,
        args.grid.max_context,
    )?;
    usage(model.host.program_of(args.drafter))?;
    usage(resume_target(args.resume, &args.out))?;
    if args.trace_cell.is_some() && args.trace.is_none() {
        return usage(Err(anyhow::anyhow!(
            "--trace-cell picks the cell --trace writes: give --trace FILE too"
        )));
    }
    if args.cupti_lib.is_some() && args.timer != TimerKind::Cupti {
        return usage(Err(anyhow::anyhow!(
            "--cupti-lib names the CUPTI of --timer cupti: give --timer cupti too"
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| default_out("steps"));
    let trace = usage(trace_request(args, &layouts, &batch_sizes, &block_sizes))?;
    let ranks = usage(args.ranks.parse::<RanksMode>().context("--ranks"))?;
    if ranks != RanksMode::Emulated {
        usage(crate::gpu::nccl::comm::check_named(
            args.nccl_lib.as_deref(),
        ))?;
    }
    if let Some(problem) =
        (args.cupti_lib.as_deref()).and_then(crate::gpu::cupti::library::named_problem)
    {
        return usage(Err(anyhow::anyhow!(problem)));
    }
    let read_skew = usage(checked_read_skew(args, &layouts))?;
    usage(distinct(&args.arms, "--arms"))?;
    let arms = args.arms.clone();
    usage(model.host.require_read_costs(&arms))?;
    Ok(StepsConfig {
        gpu: args.device.choice(),
        cpu: usage(args.pin.checked())?,
        arms,
        batch_sizes,
        block_sizes,
        layouts,
        layouts_named: !args.tp.is_empty(),
        models_named: args.step_model.models_named(),
        gpu_memory,
        target: model.target,
        draft: model.draft,
        acceptance: model.acceptance,
        host: model.host,
        drafter: args.drafter,
        host_scales: args.step_model.host_scale.clone(),
        link_gb_s: args.step_model.link_gb_s,
        collective_latency_us: args.step_model.collective_latency_us,
        rounds,
        warmup_steps: args.warmup_steps,
        timeline_steps: args.timeline_steps,
        timer: args.timer,
        cupti_lib: args.cupti_lib.clone(),
        timeline_cap,
        max_context: args.grid.max_context,
        seq_lens,
        seed: args.seed,
        out,
        resume: args.resume,
        trace,
        ranks,
        nccl_lib: args.nccl_lib.clone(),
        rank: None,
        read_skew,
    })
}

/// Where a `steps` run writes, checked before any GPU work (a rank worker's own folder is its
/// parent's to make): `--out` ([`check_run_out`]) and `--trace`'s file.
pub(crate) fn check_outputs(config: &StepsConfig) -> Result<(), ExitCode> {
    usage(check_run_out(&config.out, config.resume, config.settings()))?;
    if let Some(trace) = &config.trace {
        // Each arm's trace goes beside the named one, its name longer by the arm's.
        for &arm in &config.arms {
            usage(writable_file(&trace.path_for(arm), "--trace"))?;
        }
        if trace.path.exists() && !config.resume {
            return usage(Err(anyhow::anyhow!(
                "--trace {} exists: choose another path or remove it",
                trace.path.display()
            )));
        }
    }
    Ok(())
}

pub(crate) fn run_steps(config: &StepsConfig) -> Result<ExitCode> {
    use crate::runs::{ranks, steps};
    if config.timer == TimerKind::Cupti {
        // A missing CUPTI is known before any GPU is looked at (loaded once per process; the
        // timer reuses it).
        crate::gpu::cupti::load_cupti(config.cupti_lib.as_deref())?;
    }
    let outcome = match ranks::wanted(config)? {
        true => ranks::run(config)?,
        false => steps::run(config)?,
    };
    crate::outln!(
        "steps done in {:.0} s: {} rows in {}",
        outcome.seconds,
        outcome.rows.len(),
        config.out.display()
    );
    crate::outln!("next: metaprep report {}", config.out.display());
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::host_profile::{HostProfile, Item};
    use clap::Parser;

    #[derive(Parser)]
    struct Steps {
        #[command(flatten)]
        args: StepsArgs,
    }

    fn config(flags: &[&str]) -> Result<StepsConfig, ExitCode> {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let mut argv = vec!["steps", "--out", out.to_str().unwrap()];
        argv.extend(flags);
        steps_config(&Steps::try_parse_from(argv).unwrap().args)
    }

    #[test]
    fn drafter_defaults_to_dspark_and_parses_eagle() {
        assert_eq!(config(&[]).unwrap().drafter, Drafter::Dspark);
        let eagle = config(&["--drafter", "eagle"]).unwrap();
        assert_eq!(eagle.drafter, Drafter::Eagle);
        assert_eq!(eagle.block_sizes, [3, 5, 8]);
        assert!(eagle.host.eagle_program.is_some());
        // --accept-rate's help: at the default α, EAGLE's N = 5 accepts 3.22 and N = 3 2.38.
        let crate::prep::accept::Acceptance::Rate(alpha) = eagle.acceptance else {
            panic!("the default acceptance is a rate")
        };
        let at = |n: u32| {
            let e = crate::prep::accept::expected_accept(alpha, Drafter::Eagle.drafted(n));
            format!("{e:.2}")
        };
        assert_eq!((at(5), at(3)), ("3.22".to_string(), "2.38".to_string()));
        // EAGLE at N = 3 drafts 2 tokens: it accepts at most 3, DSpark's block 3 at most 4.
        let eagle_3 = [
            "--drafter",
            "eagle",
            "--block-sizes",
            "3",
            "--accept-length",
            "3.5",
        ];
        assert!(config(&eagle_3).is_err());
        assert!(config(&eagle_3[2..]).is_ok());
        let e = Steps::try_parse_from(["steps", "--drafter", "medusa"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("unknown drafter 'medusa': use dspark or eagle"),
            "{e}"
        );
    }

    #[test]
    fn eagle_refuses_a_block_of_one_and_a_profile_without_its_program() {
        assert!(config(&["--drafter", "eagle", "--block-sizes", "1,3"]).is_err());
        assert!(
            config(&["--block-sizes", "1,3"]).is_ok(),
            "DSpark's block 1 is fine"
        );
        assert!(drafter_blocks(Drafter::Eagle, &[2, 5]).is_ok());
        let e = drafter_blocks(Drafter::Eagle, &[1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("N must be at least 2"), "{e}");
        assert!(config(&[
            "--drafter",
            "eagle",
            "--host-profile",
            "pytorch-transcription"
        ])
        .is_err());
        assert!(config(&["--host-profile", "pytorch-transcription"]).is_ok());
        // --host-work-us replaces the scheduler segment of the program that runs.
        let eagle = config(&["--drafter", "eagle", "--host-work-us", "7"]).unwrap();
        let scheduler = |items: &[Item]| {
            items.iter().find_map(|i| match i {
                Item::Host { name, us, .. } if name == "scheduler" => Some(*us),
                _ => None,
            })
        };
        assert_eq!(
            scheduler(eagle.host.eagle_program.as_deref().unwrap()),
            Some(7.0)
        );
        assert_eq!(scheduler(&eagle.host.program), Some(50.0));
        // On a profile whose scheduler has a time per batch, the what-if value holds at
        // every batch.
        let dir = tempfile::tempdir().unwrap();
        let mut v: serde_json::Value =
            serde_json::from_str(&HostProfile::load("pytorch").unwrap().to_json()).unwrap();
        let at = v["program"]
            .as_array()
            .unwrap()
            .iter()
            .position(|i| i["name"] == "scheduler")
            .unwrap();
        v["program"][at]["us_by_batch"] = serde_json::json!({"1": 50.0, "64": 150.0});
        let path = dir.path().join("by-batch.json");
        std::fs::write(&path, v.to_string()).unwrap();
        let path = path.to_str().unwrap();
        let by_batch = config(&["--host-profile", path]).unwrap();
        let at_64 = |c: &StepsConfig| {
            scheduler(&c.host.step_items(Drafter::Dspark, 5, 64).unwrap()).unwrap()
        };
        assert_eq!(at_64(&by_batch), 150.0);
        let what_if = config(&["--host-profile", path, "--host-work-us", "7"]).unwrap();
        assert_eq!(at_64(&what_if), 7.0);
    }
}
