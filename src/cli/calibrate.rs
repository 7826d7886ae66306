//! `metaprep calibrate`: a host profile from PyTorch profiler traces of an engine.

use super::common::{usage, writable_file};
use crate::calibrate::{calibrate as derive_profile, CalibrateRequest};
use crate::exit::Exit;
use crate::model::host_profile::HostProfile;
use crate::results::atomic::same_file;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct CalibrateArgs {
    /// Chrome traces from `torch.profiler` (`export_chrome_trace`), one per arm, recorded at
    /// one cell with scripts/metaprep_host.py `record()` (which writes each trace's probe file
    /// beside it: the profiler's own cost is measured there and taken off). Each decode step
    /// inside `record_function("step")` (or `prof.step()`), its parts named `draft prep`,
    /// `draft forward`, `verify prep`, `verify forward`, `accept`; any other name (such as
    /// `scheduler`, `sampling`) is a host segment. The README's calibration recipe says what
    /// to run.
    #[arg(required = true, value_name = "TRACE")]
    pub(crate) traces: Vec<PathBuf>,
    /// The profile whose values stand where the traces show nothing (an arm no trace ran, a
    /// foreign engine's program): native, pytorch or a JSON file.
    #[arg(long, default_value = "pytorch")]
    pub(crate) base: String,
    /// Where to write the derived profile (JSON); it must not exist yet, unless --force.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    /// The batch size the traces ran at (their preps' GPU time is taken at it), 1-65536.
    #[arg(long, default_value_t = 1)]
    pub(crate) batch_size: u32,
    /// BATCH:FILE, repeatable: a trace of the same engine at another per-GPU batch size
    /// (1-65536). Its preps' GPU time (CUDA activity, which the profiler does not slow) gives each prep's
    /// `kernel_us_by_batch`. With its probe file, where its steps run the same program, its
    /// Python-only host segments (a scheduler walking every request), the profiler's cost
    /// taken off as from the traces, give their `us_by_batch` where they differ from the
    /// traced batch's beyond the steps' spread. Without it every batch uses the traced one's.
    #[arg(long, value_name = "BATCH:FILE")]
    pub(crate) gpu_trace: Vec<String>,
    /// Calibrate traces that have no probe file, with the profiler's own cost left in their
    /// host costs (every source says so): predictions from such a profile overstate the
    /// host time after a read (docs/calibration.md).
    #[arg(long)]
    pub(crate) keep_profiler_costs: bool,
    /// Leave out the post-wait cost the probe files measured: the ops keep what they paid
    /// after the traced waits, and the profile has no `post_wait`, so `steps` adds nothing
    /// after a read. With it (the default), the trace's ops are taken back to their
    /// back-to-back cost and `steps` adds the measured cost after each wait of its own.
    #[arg(long)]
    pub(crate) no_post_wait: bool,
}

fn gpu_trace(text: &str) -> Result<(u32, PathBuf)> {
    let (batch, file) = text.split_once(':').with_context(|| {
        format!("--gpu-trace `{text}` is not BATCH:FILE, such as 64:trace-bs64.json")
    })?;
    let batch = batch
        .parse::<u32>()
        .ok()
        .filter(|b| (1..=crate::prep::MAX_BATCH).contains(b))
        .with_context(|| {
            let max = crate::prep::MAX_BATCH;
            format!("--gpu-trace `{text}`: `{batch}` is not a batch size (1-{max})")
        })?;
    anyhow::ensure!(
        !file.is_empty(),
        "--gpu-trace `{text}` names no file: give BATCH:FILE, such as 64:trace-bs64.json"
    );
    Ok((batch, PathBuf::from(file)))
}

pub(crate) fn calibrate(args: &CalibrateArgs) -> Result<ExitCode> {
    let derived = (|| {
        let base = HostProfile::load(&args.base).context("--base")?;
        let max = crate::prep::MAX_BATCH;
        anyhow::ensure!(
            (1..=max).contains(&args.batch_size),
            "--batch-size {} is outside 1-{max}, the batch sizes a prep is built for",
            args.batch_size
        );
        let gpu_traces = args
            .gpu_trace
            .iter()
            .map(|t| gpu_trace(t))
            .collect::<Result<Vec<_>>>()?;
        let mut batches = std::collections::BTreeSet::from([args.batch_size]);
        for (batch, path) in &gpu_traces {
            anyhow::ensure!(
                batches.insert(*batch),
                "--gpu-trace {batch}:{}: batch {batch} {}: give one trace per batch size",
                path.display(),
                if *batch == args.batch_size {
                    "is the traced batch (--batch-size), which the traces themselves give"
                } else {
                    "has a trace already"
                }
            );
        }
        writable_file(&args.out, "--out")?;
        if args.out.exists() && !args.force {
            anyhow::bail!(
                "--out {} exists: choose another path or pass --force to replace it",
                args.out.display()
            );
        }
        // One file in two roles would give two batches one trace's times.
        let all_traces: Vec<&PathBuf> = (args.traces.iter())
            .chain(gpu_traces.iter().map(|(_, p)| p))
            .collect();
        for (i, a) in all_traces.iter().enumerate() {
            if let Some(b) = all_traces[..i].iter().find(|b| same_file(a, b)) {
                anyhow::bail!(
                    "{} and {} are one file given twice: each traced arm and each \
                     --gpu-trace batch needs a trace of its own",
                    b.display(),
                    a.display()
                );
            }
        }
        // --base is a profile's name or its file: as a file, it is an input too.
        let inputs = args
            .traces
            .iter()
            .cloned()
            .chain(gpu_traces.iter().map(|(_, p)| p.clone()))
            .chain(std::iter::once(PathBuf::from(&args.base)));
        for input in inputs {
            let probe = crate::calibrate::probe_path(&input);
            for file in [&input, &probe] {
                if same_file(&args.out, file) {
                    anyhow::bail!(
                        "--out {} is the input {}: choose another path",
                        args.out.display(),
                        file.display()
                    );
                }
            }
        }
        let request = CalibrateRequest {
            traces: args.traces.clone(),
            batch: args.batch_size,
            gpu_traces,
            keep_profiler_costs: args.keep_profiler_costs,
            post_wait: !args.no_post_wait,
        };
        derive_profile(&request, &base)
    })();
    let calibration = match usage(derived) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    crate::results::atomic::write_atomic(&args.out, calibration.profile.to_json().as_bytes())
        .with_context(|| format!("--out {}", args.out.display()))?;
    crate::outln!("{}", calibration.report);
    crate::outln!("wrote {}", args.out.display());
    crate::outln!(
        "next: metaprep validate REFERENCE.csv --host-profile {} (or metaprep steps --host-profile {})",
        args.out.display(),
        args.out.display()
    );
    Ok(Exit::Ok.into())
}
