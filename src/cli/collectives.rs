//! `metaprep collectives`: NCCL latency and bandwidth on this host's GPUs (one process per
//! GPU; this command starts them as hidden `--worker-rank` runs of itself).

use super::common::{usage, writable_folder, DeviceArgs};
use crate::cli::lists::{distinct, positive_u32};
use crate::exit::Exit;
use crate::gpu::nccl::Nccl;
use crate::gpu::probe::devices;
use crate::runs::collectives::{run_worker, CollectivesConfig};
use crate::runs::rank_world::{id_file, start_world, RankRole};
use anyhow::{ensure, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

#[derive(Args)]
pub struct CollectivesArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    /// Ranks, one per GPU from --device on (default: every GPU from --device on). One rank
    /// times NCCL's local path only: no link is crossed.
    #[arg(long)]
    pub(crate) gpus: Option<u32>,
    /// Sizes in KiB, comma separated: the all-reduced buffer, or the bytes each rank sends
    /// each other rank in an all-to-all.
    #[arg(long, value_delimiter = ',', value_parser = positive_u32, default_value = "8,64,512,4096,65536")]
    pub(crate) sizes_kib: Vec<u32>,
    /// Collectives timed back to back in one sample (the time is per collective).
    #[arg(long, default_value_t = 20)]
    pub(crate) iters: u32,
    /// Samples per size (the table gives their median and p10–p90).
    #[arg(long, default_value_t = 15)]
    pub(crate) samples: usize,
    /// The NCCL library (libnccl.so.2); default: searched as `steps --nccl-lib` says.
    #[arg(long)]
    pub(crate) nccl_lib: Option<PathBuf>,
    /// Also write collectives.csv into this folder.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Set on the processes this command starts: their rank.
    #[arg(long, hide = true)]
    pub(crate) worker_rank: Option<usize>,
    /// Set on the processes this command starts: where rank 0 publishes the NCCL id.
    #[arg(long, hide = true)]
    pub(crate) id_file: Option<PathBuf>,
}

/// The largest `--sizes-kib` value: a 16 GiB buffer, more than any engine all-reduces at once
/// (an all-to-all sends it to every other rank), and room on every GPU it runs on.
const MAX_SIZE_KIB: u32 = 16 << 20;

/// The sizes in bytes, with the counts, `--gpus` and `--out` checked: bad flags exit 2
/// before any GPU work.
fn sizes_of(args: &CollectivesArgs) -> Result<Vec<u64>, ExitCode> {
    usage(distinct(&args.sizes_kib, "--sizes-kib"))?;
    let kib = &args.sizes_kib;
    if let Some(&big) = kib.iter().find(|&&k| k > MAX_SIZE_KIB) {
        return usage(Err(anyhow::anyhow!(
            "--sizes-kib: {big} KiB is more than {MAX_SIZE_KIB} KiB (16 GiB) per buffer: give \
             sizes in KiB, such as 8,64,512,4096,65536"
        )));
    }
    if args.iters == 0 || args.samples < 3 {
        return usage(Err(anyhow::anyhow!(
            "--iters must be at least 1 and --samples at least 3 (got {} and {})",
            args.iters,
            args.samples
        )));
    }
    if args.gpus == Some(0) {
        return usage(Err(anyhow::anyhow!(
            "--gpus 0: a world needs one rank at least (one GPU times NCCL's local path)"
        )));
    }
    if let (Some(out), None) = (&args.out, args.worker_rank) {
        usage(writable_folder(out, "--out"))?;
    }
    usage(crate::gpu::nccl::comm::check_named(
        args.nccl_lib.as_deref(),
    ))?;
    Ok(kib.iter().map(|&k| u64::from(k) * 1024).collect())
}

pub(crate) fn collectives(args: &CollectivesArgs) -> Result<ExitCode> {
    let sizes = match sizes_of(args) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    if let (Some(rank), Some(id_file)) = (args.worker_rank, &args.id_file) {
        let config = CollectivesConfig {
            gpu: args.device.choice(),
            role: RankRole {
                rank,
                world: args.gpus.context("a worker is told the world's size")? as usize,
                nccl: args
                    .nccl_lib
                    .clone()
                    .context("a worker is told the library")?,
                id_file: id_file.clone(),
            },
            sizes,
            iters: args.iters,
            samples: args.samples,
            out: args.out.clone(),
        };
        if let Some(table) = run_worker(&config)? {
            crate::out!("{table}");
        }
        return Ok(Exit::Ok.into());
    }
    let (count, _) = devices(args.device.device)?;
    let here = count - args.device.device as u32;
    let world = args.gpus.unwrap_or(here);
    ensure!(
        (1..=here).contains(&world),
        "--gpus {world}: this host has {here} GPU(s) from --device {} on",
        args.device.device
    );
    let nccl = Nccl::load(args.nccl_lib.as_deref())?;
    let dir = match &args.out {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("metaprep-collectives-{}", std::process::id())),
    };
    let id_file = id_file(&dir);
    let sizes_kib: Vec<String> = args.sizes_kib.iter().map(u32::to_string).collect();
    let rank_command = |r: usize, exe: &Path| {
        let mut c = Command::new(exe);
        c.arg("collectives")
            .args(["--device", &args.device.device.to_string()])
            .args(["--kernel-image", &flag_value(args.device.kernel_image)])
            .args(["--sync", &flag_value(args.device.sync)])
            .args(["--gpus", &world.to_string()])
            .args(["--sizes-kib", &sizes_kib.join(",")])
            .args(["--iters", &args.iters.to_string()])
            .args(["--samples", &args.samples.to_string()])
            .arg("--nccl-lib")
            .arg(&nccl.path)
            .args(["--worker-rank", &r.to_string()])
            .arg("--id-file")
            .arg(&id_file);
        if let Some(out) = &args.out {
            c.arg("--out").arg(out);
        }
        if r != 0 {
            c.stdout(Stdio::null());
        }
        c
    };
    let ran = start_world(&dir, world as usize, rank_command);
    // The scratch folder (the id file) goes whether the ranks succeeded or not.
    if args.out.is_none() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            eprintln!("metaprep: could not remove {}: {e}", dir.display());
        }
    }
    ran?;
    Ok(Exit::Ok.into())
}

/// A value flag as the command line writes it, to hand on to a worker (every variant has a
/// name; none is skipped).
fn flag_value(value: impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{ImageChoice, SyncMode};

    #[test]
    fn workers_get_the_flags_as_the_command_line_writes_them() {
        assert_eq!(flag_value(ImageChoice::Ptx), "ptx");
        assert_eq!(flag_value(ImageChoice::Auto), "auto");
        assert_eq!(flag_value(SyncMode::Blocking), "blocking");
        assert_eq!(flag_value(SyncMode::Spin), SyncMode::Spin.to_string());
    }
}
