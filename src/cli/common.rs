//! The flags several commands share, and the validation of shared values.

use super::lists::{arm, distinct, family};
use crate::axes::{Arm, Family};
use crate::exit::Exit;
use crate::gpu::{Gpu, GpuChoice, ImageChoice, SyncMode};
use crate::harness::pin::CpuPin;
use crate::prep::inputs::LengthRange;
use crate::prep::Shape;
use crate::results::env::{EnvRecord, ENV_FILE};
use crate::results::run_dir::{RESULTS_CSV, TELEMETRY_CSV};
use crate::results::settings::Settings;
pub(crate) use crate::results::writable::{writable_file, writable_folder};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
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

impl PinArgs {
    /// `--cpu`, checked against the CPUs this process may run on before any GPU work.
    pub(crate) fn checked(&self) -> Result<CpuPin> {
        crate::harness::pin::pinned_cpu(self.cpu, &crate::harness::pin::allowed_cpus()?)?;
        Ok(self.cpu)
    }
}

#[derive(Args, Clone)]
pub struct DeviceArgs {
    /// CUDA device ordinal to run on: 0 for the first GPU (`nvidia-smi` lists them).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = device_ordinal)]
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
    /// records it. docs/sync-modes.md says what each costs a read.
    #[arg(long, value_enum, default_value_t = SyncMode::Auto)]
    pub(crate) sync: SyncMode,
}

/// `--device`: a CUDA device ordinal. Negative numbers reach this parser (rather than being
/// read as a flag) so that `--device -1` gets a line that says what an ordinal is.
fn device_ordinal(s: &str) -> Result<usize, String> {
    s.parse().map_err(|_| {
        format!("`{s}` is not a device ordinal: give 0 for the first GPU, 1 for the second, ...")
    })
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
    /// Metadata families, comma separated (default: every family metaprep has).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = family,
        default_values_t = Family::ALL
    )]
    pub(crate) families: Vec<Family>,
    /// Arms, comma separated: eager-sync (host read each step, the "before"), eager-pinned
    /// and eager-mapped (the same prep, the read done well: a pinned copy and an event wait,
    /// or a kernel storing the lengths into mapped host memory and the host polling a flag;
    /// docs/read-paths.md), eager-device (device lengths, eager launches), graph (device
    /// lengths, one graph replay), graph-upload (graph, but `[block] * bs` copied up from the
    /// host before each replay, as sgl-project/sglang#32219's merged draft-extend path does), fused (one kernel,
    /// in a graph).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = arm,
        default_value = "eager-sync,eager-pinned,eager-mapped,eager-device,graph,graph-upload,fused"
    )]
    pub(crate) arms: Vec<Arm>,
}

impl PrepAxes {
    /// `--families` and `--arms`, each value listed once.
    pub(crate) fn checked(&self) -> Result<(Vec<Family>, Vec<Arm>)> {
        distinct(&self.families, "--families")?;
        distinct(&self.arms, "--arms")?;
        Ok((self.families.clone(), self.arms.clone()))
    }
}

/// `--resume` continues the run in `--out`: without one there is nothing to continue.
pub(crate) fn resume_target(resume: bool, out: &Option<PathBuf>) -> Result<()> {
    if resume && out.is_none() {
        anyhow::bail!("--resume continues the run in --out DIR: name that directory");
    }
    Ok(())
}

/// `--out` of a measuring run (`sweep`, `steps`), checked before any GPU work: a folder it can
/// write in; without `--resume` one that holds no run yet; with it, a run whose CSV reads and
/// whose recorded settings are `settings`.
pub(crate) fn check_run_out(out: &Path, resume: bool, settings: Settings) -> Result<()> {
    writable_folder(out, "--out")?;
    let csv = out.join(RESULTS_CSV);
    if !resume {
        if csv.exists() {
            bail!(
                "{} already exists: pass --resume to continue that run, or choose another --out",
                csv.display()
            );
        }
        return Ok(());
    }
    for name in [RESULTS_CSV, TELEMETRY_CSV] {
        let gzipped = crate::results::compressed::run_file(out, name);
        if gzipped != out.join(name) {
            bail!(
                "{}: an archived (gzipped) run cannot be continued: gunzip it first, or \
                 choose another --out",
                gzipped.display()
            );
        }
    }
    let rows = crate::results::csv::rows_for_resume(&csv)?;
    let telemetry = out.join(TELEMETRY_CSV);
    if telemetry.exists() {
        crate::results::run_dir::read_telemetry(&telemetry)?;
    }
    if !rows.is_empty() && !out.join(ENV_FILE).exists() {
        bail!(
            "cannot resume {}: it has no {ENV_FILE} recording the run's settings, so rows \
             of other settings could be mixed in; start a new run with another --out",
            out.display()
        );
    }
    if out.join(ENV_FILE).exists() {
        let now = EnvRecord {
            settings: Some(settings),
            ..EnvRecord::default()
        };
        EnvRecord::read(out)?.check_resume(out, &now)?;
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

/// A precision flag's percent: positive, at most 100 (an interval of ±100% of the median says
/// nothing).
pub(crate) fn precision_pct(pct: f64, flag: &str) -> Result<f64> {
    if !(pct.is_finite() && pct > 0.0 && pct <= 100.0) {
        anyhow::bail!(
            "{flag}: {pct} is no precision: give a positive number of percent, at most 100 (an \
             interval of ±100% of the median says nothing)"
        );
    }
    Ok(pct)
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

/// `command`'s arguments (those after its name) parsed as `command` parses them: its
/// defaults from none, a test's command line; refused as a bad flag (exit 2).
pub(crate) fn parse_args<A: clap::Args>(
    command: &'static str,
    args: &[std::ffi::OsString],
) -> Result<A, ExitCode> {
    #[derive(clap::Parser)]
    struct Only<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }
    use clap::Parser;
    let parsed = Only::<A>::try_parse_from(
        std::iter::once(std::ffi::OsString::from(command)).chain(args.iter().cloned()),
    )
    .map(|only| only.args)
    .map_err(|e| anyhow::anyhow!("the {command} arguments: {e}"));
    usage(parsed)
}

/// Bad flag values exit 2, like clap's own usage errors, before any GPU work.
pub(crate) fn usage<T>(parsed: Result<T>) -> Result<T, ExitCode> {
    parsed.map_err(|e| {
        crate::exit::print_error(&e);
        Exit::BadInput.into()
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
    if lo == 0 {
        anyhow::bail!("--seq-lens: `{s}` starts at 0: a request has 1 committed token at least");
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
                usage(Shape::new(family, bs, block, max_context).with_context(|| {
                    format!(
                        "--batch-sizes {bs}, --block-sizes {block}, --max-context {max_context}"
                    )
                }))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::test_rows::row;
    use crate::results::csv::write_rows;

    /// A run folder whose env.json records `settings`, with one row.
    fn run_of(settings: Option<Settings>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        write_rows(
            &dir.path().join(RESULTS_CSV),
            &[row("prep", "dsa_decode", "graph", 8, "step_us", 20.0)],
        )
        .unwrap();
        EnvRecord {
            settings,
            ..crate::results::env::test_env()
        }
        .write(dir.path())
        .unwrap();
        dir
    }

    #[test]
    fn a_resume_must_repeat_the_settings_before_any_gpu_work() {
        use crate::results::settings::test_sweep;
        let run = run_of(Some(Settings::Sweep(test_sweep())));
        let out = run.path();
        let check = |resume: bool, settings: Settings| {
            check_run_out(out, resume, settings).map_err(|e| format!("{e:#}"))
        };
        // The same settings, the axes in another order: resumable.
        let mut reordered = test_sweep();
        reordered.batch_sizes.reverse();
        check(true, Settings::Sweep(reordered)).unwrap();
        let mut other = test_sweep();
        other.rounds = 8;
        let why = check(true, Settings::Sweep(other)).unwrap_err();
        assert!(
            why.contains("cannot resume") && why.contains("rounds: `6` vs `8`"),
            "{why}"
        );
        // Refused before the GPU opens: exit 2.
        let err = check_run_out(out, true, Settings::Sweep(test_sweep_seed(3))).unwrap_err();
        assert!(
            err.downcast_ref::<crate::exit::BadInput>().is_some(),
            "{err:#}"
        );
        // Without --resume, an existing run is refused whatever the settings.
        let why = check(false, Settings::Sweep(test_sweep())).unwrap_err();
        assert!(why.contains("metaprep.csv already exists: pass --resume"));
        // A damaged CSV is refused before the GPU opens, naming its line.
        std::fs::write(out.join(RESULTS_CSV), "kind,family\nprep").unwrap();
        let why = check(true, Settings::Sweep(test_sweep())).unwrap_err();
        assert!(why.contains("metaprep.csv line 2"), "{why}");
    }

    fn test_sweep_seed(seed: u64) -> crate::results::settings::SweepSettings {
        crate::results::settings::SweepSettings {
            seed,
            ..crate::results::settings::test_sweep()
        }
    }

    #[test]
    fn a_run_recorded_without_settings_is_not_resumed() {
        use crate::results::settings::test_sweep;
        let run = run_of(None);
        let why = format!(
            "{:#}",
            check_run_out(run.path(), true, Settings::Sweep(test_sweep())).unwrap_err()
        );
        assert!(
            why.contains("settings: `sweep run without settings` vs `sweep run`"),
            "{why}"
        );
    }
}
