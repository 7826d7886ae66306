//! The flags several commands share, and the validation of shared values.

use crate::axes::Family;
use crate::gpu::{Gpu, GpuChoice, ImageChoice, SyncMode};
use crate::harness::pin::CpuPin;
use crate::prep::inputs::LengthRange;
use crate::prep::Shape;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Where the measuring thread runs.
#[derive(Args, Clone)]
pub struct PinArgs {
    /// CPU to pin the measuring thread to once the GPU is open: a CPU number, `auto` (the
    /// last CPU this process may run on) or `off`. Unpinned, the OS moves the thread between
    /// cores, and host costs of a few µs move by tens of percent with it. env.json records
    /// the CPU and its cpufreq governor where readable.
    #[arg(long, default_value = "auto")]
    pub(crate) cpu: CpuPin,
}

#[derive(Args, Clone)]
pub struct DeviceArgs {
    /// CUDA device ordinal to run on.
    #[arg(long, default_value_t = 0)]
    pub(crate) device: usize,
    /// What the kernels are compiled to: `auto` (a cubin for the GPU's exact architecture,
    /// sm_90 on H100/H200, sm_100 on B200, sm_103 on GB300, where NVRTC knows it; else PTX
    /// for the newest architecture NVRTC knows that the GPU can run, JIT-compiled by the
    /// driver), `cubin` (refuse the PTX fallback) or `ptx` (force it, to test it). `info` and
    /// env.json say which was loaded.
    #[arg(long, value_enum, default_value_t = ImageChoice::Auto)]
    pub(crate) kernel_image: ImageChoice,
    /// How the host waits for the GPU in a synchronise (the end of every host read): `auto`
    /// (the driver's choice, what PyTorch leaves it at), `spin` (busy-wait), `yield` (yield
    /// the CPU between polls) or `blocking` (sleep until the GPU signals). The last three are
    /// set on the context and read back (auto leaves it as the driver made it); env.json
    /// records it. On an H200 a small D2H read plus synchronise took 9.8 µs with auto,
    /// 8.2 µs with spin and 13–16 µs with blocking; a read queued behind running GPU work
    /// completed in steps of about 8 µs after the work whatever the mode.
    #[arg(long, value_enum, default_value_t = SyncMode::Auto)]
    pub(crate) sync: SyncMode,
}

impl DeviceArgs {
    /// The GPU these flags name and how to open it.
    pub(crate) fn choice(&self) -> GpuChoice {
        GpuChoice {
            ordinal: self.device,
            image: self.kernel_image,
            sync: self.sync,
        }
    }

    /// The GPU these flags name, opened as they say.
    pub(crate) fn open(&self) -> Result<Gpu> {
        self.choice().open()
    }
}

/// NVTX ranges for Nsight Systems.
#[derive(Args, Clone)]
pub struct NvtxArgs {
    /// NVTX ranges (`on`) around every step, every phase of a step and every arm's prep,
    /// named as in the CSV (`step (graph)`, `draft prep (eager-sync)`, `draft forward`,
    /// `seq_lens.tolist()`; in a sweep `dsa_decode prep (eager-sync)` and the harness row's
    /// `harness (empty graph)`), for `nsys profile --trace=cuda,nvtx`. With no tool attached
    /// each is a no-op call; `off` skips even that, to measure what the ranges cost (the
    /// harness row's `overhead_us`).
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub(crate) nvtx: Switch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl NvtxArgs {
    /// Turns the process's NVTX ranges on or off as the flag says.
    pub(crate) fn apply(&self) {
        crate::gpu::nvtx::set_enabled(self.nvtx == Switch::On);
    }
}

/// The prep axes `check` and `sweep` share.
#[derive(Args, Clone)]
pub struct PrepAxes {
    /// Metadata families, comma separated: dspark_draft_block, dsa_decode,
    /// dsa_target_verify, dsa_draft_extend_v2.
    #[arg(
        long,
        default_value = "dspark_draft_block,dsa_decode,dsa_target_verify,dsa_draft_extend_v2"
    )]
    pub(crate) families: String,
    /// Arms, comma separated: eager-sync (host read each step, the "before"), eager-pinned
    /// and eager-mapped (the same prep, the read done well: a pinned copy and an event wait,
    /// or a kernel storing the lengths into mapped host memory and the host polling a flag;
    /// docs/read-paths.md), eager-device (device lengths, eager launches), graph (device
    /// lengths, one graph replay), graph-upload (graph, but `[block] * bs` copied up from the
    /// host before each replay, as the merged DSA draft-extend path does), fused (one kernel,
    /// in a graph).
    #[arg(
        long,
        default_value = "eager-sync,eager-pinned,eager-mapped,eager-device,graph,graph-upload,fused"
    )]
    pub(crate) arms: String,
}

/// `--resume` continues the run in `--out`: without one there is nothing to continue.
pub(crate) fn resume_target(resume: bool, out: &Option<PathBuf>) -> Result<()> {
    if resume && out.is_none() {
        anyhow::bail!("--resume continues the run in --out DIR: name that directory");
    }
    Ok(())
}

/// A time cap flag in ms: at least 1 ms, at most an hour (beyond that a value is a typo).
pub(crate) fn time_cap(ms: u64, flag: &str) -> Result<Duration> {
    if ms == 0 || ms > 3_600_000 {
        anyhow::bail!("{flag}: {ms} is not a time cap between 1 ms and an hour");
    }
    Ok(Duration::from_millis(ms))
}

/// A stand-in forward of `--forward-us`: positive, at most a second.
pub(crate) fn forward_us(us: f64) -> Result<f64> {
    if !(us.is_finite() && us > 0.0 && us <= 1e6) {
        anyhow::bail!(
            "--forward-us: {us} is not a duration in µs between 0 and a second (more than a \
             second is a typo: give microseconds, such as 20)"
        );
    }
    Ok(us)
}

/// Bad flag values exit 2, like clap's own usage errors, before any GPU work.
pub(crate) fn usage<T>(parsed: Result<T>) -> Result<T, ExitCode> {
    parsed.map_err(|e| {
        eprintln!("metaprep: error: {e:#}");
        ExitCode::from(2)
    })
}

pub(crate) fn parse_range(s: &str) -> Result<LengthRange> {
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
pub(crate) fn seq_lens_within(s: &str, max_context: u32) -> Result<LengthRange> {
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
pub(crate) fn default_out(command: &str) -> PathBuf {
    PathBuf::from(format!(
        "results/{command}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    ))
}

/// Every shape a run will build, checked before any GPU work.
pub(crate) fn validate_shapes(
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

/// This process's command line after `subcommand`: what a parent hands on to its workers.
pub(crate) fn args_after(subcommand: &str) -> Vec<std::ffi::OsString> {
    std::env::args_os()
        .skip(1)
        .skip_while(|a| a != subcommand)
        .skip(1)
        .collect()
}
