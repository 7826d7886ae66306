//! `metaprep steps`: its flags, their validation, and the run.

use super::common::{
    check_run_out, default_out, forward_us, resume_target, seq_lens_within, time_cap, usage,
    validate_shapes, writable_file, DeviceArgs, NvtxArgs, PinArgs,
};
use crate::axes::layout::Layout;
use crate::axes::Drafter;
use crate::cli::lists::{arms, layouts, parse_u32_list};
use crate::exit::Exit;
use crate::harness::timer::TimerKind;
use crate::model::host_profile::{HostProfile, Item};
use crate::model::memory::GpuMemory;
use crate::model::profile::{ForwardModel, Profile};
use crate::model::stop::StepRounds;
use crate::prep::accept::Acceptance;
use crate::runs::rank_world::{RanksMode, ReadSkew};
use crate::runs::steps::{Cell, StepsConfig, TraceRequest};
use anyhow::{Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Clone)]
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
    /// from scripts/torch_read_paths.py, and the two add half again to the run's time).
    #[arg(long, default_value = "eager-sync,eager-device,graph,graph-upload")]
    pub(crate) arms: String,
    /// Batch sizes (requests per step), comma separated. Default: 1,4,16,64, the small
    /// batches where a read's exposed host work matters; with --full, 1,2,4,8,16,32,64,128,256.
    /// Batch sizes a layout's GPUs cannot hold are left out.
    #[arg(long)]
    pub(crate) batch_sizes: Option<String>,
    /// The full grid: every batch size from 1 to 256 in powers of two (instead of 1,4,16,64),
    /// on every layout that fits. Takes several times the default's time. It picks the batch
    /// sizes, so it cannot be given with --batch-sizes.
    #[arg(long, conflicts_with = "batch_sizes")]
    pub(crate) full: bool,
    /// Draft block sizes gamma, comma separated; the verify step checks the same N tokens.
    /// Under --drafter eagle the block is N, EAGLE's speculative_num_draft_tokens.
    #[arg(long, default_value = "3,5,8")]
    pub(crate) block_sizes: String,
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
    #[arg(long)]
    pub(crate) tp: Option<String>,
    /// Memory of one GPU in GiB, to plan for another GPU than this one (default: the
    /// device's own total memory). Decides which layouts and batches fit (see --tp).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) gpu_memory_gib: Option<f64>,
    /// Target model profile for the verify forward: moe-large (DeepSeek-V3/V4-class MoE,
    /// FP8 weights, MLA cache), draft-small, or custom (see --custom-*).
    #[arg(long, default_value = "moe-large")]
    pub(crate) model: String,
    /// Model profile for the draft forward.
    #[arg(long, default_value = "draft-small")]
    pub(crate) draft_model: String,
    /// Custom profile (--model or --draft-model custom): weight bytes per layer (before the
    /// TP split). Default: 200000000.
    #[arg(long)]
    pub(crate) custom_weight_bytes_per_layer: Option<u64>,
    /// Custom profile (--model or --draft-model custom): layers. Default: 32.
    #[arg(long)]
    pub(crate) custom_layers: Option<u32>,
    /// Custom profile (--model or --draft-model custom): KV-cache bytes per token per layer.
    /// Default: 1024.
    #[arg(long)]
    pub(crate) custom_kv_bytes_per_token_per_layer: Option<u64>,
    /// Custom profile (--model or --draft-model custom): hidden size (sizes the collectives).
    /// Default: 4096.
    #[arg(long)]
    pub(crate) custom_hidden_size: Option<u32>,
    /// Replace both forwards by a fixed GPU busy-wait of this many µs (a quick what-if that
    /// ignores the profiles and the layout).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) forward_us: Option<f64>,
    /// Per-draft-token acceptance rate α: each draft token is accepted with probability α
    /// until the first rejection, so a block of γ drafts accepts (1 − α^(γ+1)) / (1 − α)
    /// tokens per request per step, bonus token included (Leviathan et al. 2023), drawn per
    /// request per step. Default: the rate that gives the seed serving run's 3.51 tokens at
    /// block 5 (α ≈ 0.779: block 3 accepts 2.86, block 8 4.04). Under --drafter eagle a block
    /// N drafts γ = N − 1 tokens (N = 5 accepts 3.22 at the default α, N = 3 2.38).
    #[arg(long, conflicts_with = "accept_length")]
    pub(crate) accept_rate: Option<f64>,
    /// Instead of --accept-rate: this mean accepted length (tokens per request per step, 1 to
    /// block + 1; under --drafter eagle 1 to N) for one block size. With several --block-sizes it is refused, since one
    /// length for every block would give each block a different α.
    #[arg(long)]
    pub(crate) accept_length: Option<f64>,
    /// The host program of a step and what each piece costs: `pytorch` (each prep's ops,
    /// launches and reads as SGLang 0.5.23's own eager code issues them, at the framework
    /// costs scripts/calibrate_torch.py measured on an H200), `pytorch-transcription` (the
    /// same costs with that script's own transcription of the preps, which issues more ops),
    /// `native` (the Rust harness's own launches and reads, nothing added), or a JSON file
    /// (`metaprep calibrate` from your engine's traces: docs/calibration.md; every field in
    /// host-profiles/README.md).
    #[arg(long, default_value = "pytorch")]
    pub(crate) host_profile: String,
    /// Run the profile's framework costs at this measured host speed instead of the one they
    /// were calibrated at: µs per op as scripts/metaprep_host.py `host_speed()`
    /// measures it in the engine's process. Ops, reads, graph launches and uploads scale by
    /// this over the profile's `host_speed_us`; host segments and GPU times stay. `metaprep
    /// validate` passes each reference cell's own.
    #[arg(long)]
    pub(crate) host_speed_us: Option<f64>,
    /// Replace the µs of the program's `scheduler` host segment (a what-if).
    #[arg(long)]
    pub(crate) host_work_us: Option<f64>,
    /// What-if factors on every host cost of the profile (host segments and per-op costs;
    /// reads, launches and op counts stay as measured), comma separated, such as 0.5,1,2,4:
    /// each factor runs the whole grid again, its rows' `host_scale` column saying which, and
    /// `report` charts graph's throughput gain against it.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub(crate) host_scale: Vec<f64>,
    /// Link bandwidth the emulated collectives move their bytes at (GB/s).
    #[arg(long, default_value_t = 450.0)]
    pub(crate) link_gb_s: f64,
    /// Latency of one collective (µs), added to bytes / bandwidth. Default: by GPU count,
    /// 4.5/4.8/7.8 µs at 2/4/8 GPUs (a custom all-reduce on H100, sgl-project/sglang#2904).
    #[arg(long)]
    pub(crate) collective_latency_us: Option<f64>,
    /// A cell (layout, batch, block) runs its arms in rounds, back to back in each round:
    /// measured steps of one arm's clean pass in one round.
    #[arg(long, default_value_t = 30)]
    pub(crate) round_steps: usize,
    /// Fewest rounds per cell (6 at least: fewer round medians give no 95% interval).
    #[arg(long, default_value_t = 6)]
    pub(crate) min_rounds: usize,
    /// Most rounds per cell.
    #[arg(long, default_value_t = 20)]
    pub(crate) max_rounds: usize,
    /// A cell stops once every arm's step time against eager-sync's (paired within rounds)
    /// has a 95% interval within ± this many percentage points, after --min-rounds.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) precision_pct: f64,
    /// Time cap of one cell, all its arms and rounds, ms: past --min-rounds it stops there,
    /// precise or not (its rows' stop_reason says which). The minimum rounds always run; for
    /// long steps their passes get shorter so that they fit the cap.
    #[arg(long, default_value_t = 15_000)]
    pub(crate) cell_time_cap_ms: u64,
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
    /// Longest context a request may reach (tokens): the page tables' static width.
    #[arg(long, default_value_t = 32768)]
    pub(crate) max_context: u32,
    /// Committed lengths are drawn uniformly from MIN-MAX tokens.
    #[arg(long, default_value = "2048-8192")]
    pub(crate) seq_lens: String,
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

/// `--accept-rate` / `--accept-length`, checked against the run's block sizes.
pub(crate) fn acceptance(
    rate: Option<f64>,
    length: Option<f64>,
    blocks: &[u32],
) -> Result<Acceptance> {
    match (rate, length) {
        (_, Some(l)) if blocks.len() > 1 => anyhow::bail!(
            "--accept-length {l} fixes one block size's mean, but --block-sizes lists {}: \
             give --accept-rate (one α, each block its own length) or one block size",
            blocks.len()
        ),
        (_, Some(l)) => Acceptance::Length(l)
            .check(blocks)
            .context("--accept-length"),
        (Some(r), None) => Acceptance::Rate(r).check(blocks).context("--accept-rate"),
        (None, None) => Ok(Acceptance::seed()),
    }
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

/// The forward `flag` (`--model`, `--draft-model`) names, or `--forward-us`'s busy-wait,
/// which replaces both (its errors name `--forward-us`, not a flag the user may not have given).
fn forward_model(name: &str, flag: &str, args: &StepsArgs) -> Result<ForwardModel> {
    if let Some(us) = args.forward_us {
        return Ok(ForwardModel::FixedUs(forward_us(us)?));
    }
    let profile = if name == "custom" {
        Profile::custom(
            args.custom_weight_bytes_per_layer.unwrap_or(200_000_000),
            args.custom_layers.unwrap_or(32),
            args.custom_kv_bytes_per_token_per_layer.unwrap_or(1024),
            args.custom_hidden_size.unwrap_or(4096),
        )
    } else {
        Profile::named(name)
    };
    Ok(ForwardModel::Profile(profile.context(flag.to_string())?))
}

/// The `--host-profile`, with `--host-work-us` replacing its scheduler segment.
fn host_program(args: &StepsArgs) -> Result<HostProfile> {
    let mut host = HostProfile::load(&args.host_profile)?;
    if let Some(v) = args.host_work_us {
        host.program_of(args.drafter)?;
        let program = match (args.drafter, host.eagle_program.as_mut()) {
            (Drafter::Eagle, Some(eagle)) => eagle,
            _ => &mut host.program,
        };
        let scheduler = program.iter_mut().find_map(|item| match item {
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
    match args.host_speed_us {
        Some(speed) => host.at_host_speed(speed).context("--host-speed-us"),
        None => Ok(host),
    }
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
const FULL_STEP_BATCHES: &str = "1,2,4,8,16,32,64,128,256";

pub(crate) fn steps_config(args: &StepsArgs) -> Result<StepsConfig, ExitCode> {
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
    usage(drafter_blocks(args.drafter, &block_sizes))?;
    // The accept model's block is the tokens the drafter proposes (EAGLE: N − 1).
    let drafted: Vec<u32> = block_sizes
        .iter()
        .map(|&b| args.drafter.drafted(b))
        .collect();
    let acceptance = usage(acceptance(args.accept_rate, args.accept_length, &drafted))?;
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
    for (v, flag) in [
        (args.round_steps, "--round-steps"),
        (args.warmup_steps, "--warmup-steps"),
        (args.timeline_steps, "--timeline-steps"),
    ] {
        if v > MAX_PASS_STEPS {
            return usage(Err(anyhow::anyhow!(
                "{flag}: {v} steps is more than {MAX_PASS_STEPS} per pass: give fewer"
            )));
        }
    }
    let custom = [args.model.as_str(), args.draft_model.as_str()].contains(&"custom");
    for (given, flag) in [
        (
            args.custom_weight_bytes_per_layer.is_some(),
            "--custom-weight-bytes-per-layer",
        ),
        (args.custom_layers.is_some(), "--custom-layers"),
        (
            args.custom_kv_bytes_per_token_per_layer.is_some(),
            "--custom-kv-bytes-per-token-per-layer",
        ),
        (args.custom_hidden_size.is_some(), "--custom-hidden-size"),
    ] {
        if given && (!custom || args.forward_us.is_some()) {
            return usage(Err(anyhow::anyhow!(
                "{flag} sizes the custom profile, which this run does not use: give --model \
                 custom (or --draft-model custom) without --forward-us, or leave {flag} out"
            )));
        }
    }
    validate_shapes(
        args.drafter.families(),
        &batch_sizes,
        &block_sizes,
        args.max_context,
    )?;
    usage(host.program_of(args.drafter))?;
    let seq_lens = usage(seq_lens_within(&args.seq_lens, args.max_context))?;
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
    if let Some(path) = &args.nccl_lib {
        usage(crate::gpu::nccl::comm::check_explicit(path))?;
    }
    let read_skew = usage(read_skew(args))?;
    let widest = layouts.iter().map(|l| l.gpus() as usize).max().unwrap_or(1);
    if let Some(rank) = read_skew.rank.filter(|&r| r >= widest) {
        return usage(Err(anyhow::anyhow!(
            "--read-skew-rank {rank}: no layout of the run has that rank (the widest, {widest} \
             GPUs, has ranks 0 to {}); give a rank below {widest}, or `all`",
            widest - 1
        )));
    }
    if read_skew.rank.is_some() && read_skew.us == 0.0 && read_skew.jitter_us == 0.0 {
        return usage(Err(anyhow::anyhow!(
            "--read-skew-rank picks the rank --read-skew-us or --read-skew-jitter-us slows: \
             give one of them too, or leave --read-skew-rank out"
        )));
    }
    let arms = usage(arms(&args.arms))?;
    usage(host.require_read_costs(&arms))?;
    Ok(StepsConfig {
        gpu: args.device.choice(),
        cpu: usage(args.pin.checked())?,
        arms,
        batch_sizes,
        block_sizes,
        layouts,
        layouts_named: args.tp.is_some(),
        gpu_memory,
        target: usage(forward_model(&args.model, "--model", args))?,
        draft: usage(forward_model(&args.draft_model, "--draft-model", args))?,
        acceptance,
        host,
        drafter: args.drafter,
        host_scales: args.host_scale.clone(),
        link_gb_s: args.link_gb_s,
        collective_latency_us: args.collective_latency_us,
        rounds,
        warmup_steps: args.warmup_steps,
        timeline_steps: args.timeline_steps,
        timer: args.timer,
        cupti_lib: args.cupti_lib.clone(),
        timeline_cap,
        max_context: args.max_context,
        seq_lens,
        seed: args.seed,
        out,
        resume: args.resume,
        trace,
        ranks: usage(args.ranks.parse::<RanksMode>().context("--ranks"))?,
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
        usage(writable_file(&trace.path, "--trace"))?;
        if trace.path.exists() && !config.resume {
            return usage(Err(anyhow::anyhow!(
                "--trace {} exists: choose another path or remove it",
                trace.path.display()
            )));
        }
    }
    Ok(())
}

/// This process's arguments after `steps`: what real ranks' workers are given.
pub(crate) fn args_after_subcommand() -> Vec<OsString> {
    super::common::args_after("steps")
}

pub(crate) fn run_steps(config: &StepsConfig, steps_args: &[OsString]) -> Result<ExitCode> {
    let outcome = crate::runs::ranks::run(config, steps_args)?;
    println!(
        "steps done in {:.0} s: {} rows in {}",
        outcome.seconds,
        outcome.rows.len(),
        config.out.display()
    );
    println!("next: metaprep report {}", config.out.display());
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;
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
    }
}
