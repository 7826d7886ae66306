//! `metaprep calibrate`: a host profile from a PyTorch profiler trace.

use super::common::{usage, writable_file};
use crate::model::host_profile::HostProfile;
use crate::results::atomic::same_file;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct CalibrateArgs {
    /// A Chrome trace from `torch.profiler` (`export_chrome_trace`), each decode step inside
    /// `record_function("step")` (or `prof.step()`), its parts named `scheduler`,
    /// `draft prep`, `draft forward`, `verify prep`, `verify forward`, `accept`, ... as
    /// scripts/calibrate_torch.py records them.
    pub(crate) trace: PathBuf,
    /// The profile whose values stand where the trace shows nothing (an arm it did not run,
    /// a foreign engine's program): native, pytorch or a JSON file.
    #[arg(long, default_value = "pytorch")]
    pub(crate) base: String,
    /// Where to write the derived profile (JSON); it must not exist yet, unless --force.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    pub(crate) force: bool,
}

pub(crate) fn calibrate(args: &CalibrateArgs) -> Result<ExitCode> {
    let derived = (|| {
        let base = HostProfile::load(&args.base).context("--base")?;
        // One file under another name (`./t.json`, an absolute path, a hard or symbolic link)
        // is still the trace: --force must not replace it.
        if same_file(&args.out, &args.trace) {
            anyhow::bail!(
                "--out {} is the trace {} itself (the same file by another name or link): \
                 choose another path",
                args.out.display(),
                args.trace.display()
            );
        }
        writable_file(&args.out, "--out")?;
        if args.out.exists() && !args.force {
            anyhow::bail!(
                "--out {} exists: choose another path or pass --force to replace it",
                args.out.display()
            );
        }
        crate::model::calibrate::calibrate_trace(&args.trace, &base)
    })();
    let calibration = match usage(derived) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    crate::results::atomic::write_atomic(&args.out, calibration.profile.to_json().as_bytes())
        .with_context(|| format!("--out {}", args.out.display()))?;
    println!("{}", calibration.report);
    println!("wrote {}", args.out.display());
    println!("next: metaprep steps --host-profile {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
