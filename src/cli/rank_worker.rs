//! `metaprep rank-worker` (hidden): one rank of a world that `steps --ranks real|auto`
//! starts, once per GPU of a layout. It takes the parent's `steps` arguments verbatim after
//! `--`, and its own place: rank, layout, NCCL library, id file, output folder.

use super::steps::{steps_config, StepsArgs};
use crate::axes::Layout;
use crate::cli::common::parse_parent;
use crate::exit::Exit;
use crate::model::memory::GpuMemory;
use crate::runs::rank_world::RankRole;
use crate::runs::steps::TraceRequest;
use anyhow::{Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct RankWorkerArgs {
    /// This process's rank (0 makes and publishes the NCCL id); its GPU is --device + rank.
    #[arg(long)]
    rank: usize,
    /// The layout the world runs; its GPU count is the world's size.
    #[arg(long)]
    layout: Layout,
    /// The NCCL library the parent found.
    #[arg(long)]
    nccl_lib: PathBuf,
    /// Where rank 0 publishes the NCCL id and the others read it.
    #[arg(long)]
    id_file: PathBuf,
    /// This rank's own run folder (metaprep.csv, env.json, telemetry, trace).
    #[arg(long)]
    out: PathBuf,
    /// This world writes the run's --trace (into --out; the parent merges the ranks').
    #[arg(long)]
    trace_here: bool,
    /// The memory per GPU to plan for, the parent's (without --gpu-memory-gib): every rank
    /// plans the same cells whatever its own GPU holds.
    #[arg(long)]
    plan_memory_bytes: Option<u64>,
    /// The parent's `steps` arguments.
    #[arg(last = true)]
    steps_args: Vec<OsString>,
}

pub fn rank_worker(args: &RankWorkerArgs) -> Result<ExitCode> {
    let steps: StepsArgs = match parse_parent("steps", &args.steps_args) {
        Ok(steps) => steps,
        Err(code) => return Ok(code),
    };
    steps.nvtx.apply();
    let mut config = match steps_config(&steps) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let role = RankRole {
        rank: args.rank,
        world: args.layout.gpus() as usize,
        nccl: args.nccl_lib.clone(),
        id_file: args.id_file.clone(),
    };
    if config.gpu_memory.is_none() {
        config.gpu_memory = args.plan_memory_bytes.map(GpuMemory::device);
    }
    config.gpu = config.gpu.for_rank(args.rank);
    config.cpu = role.cpu(config.cpu)?;
    config.layouts = vec![args.layout];
    config.layouts_named = true;
    config.out = args.out.clone();
    config.resume = false;
    config.trace = match (args.trace_here, config.trace) {
        (true, Some(t)) => {
            let name = t.path.file_name().context("--trace names no file")?;
            Some(TraceRequest {
                path: args.out.join(name),
                cell: t.cell.filter(|c| c.0 == args.layout),
            })
        }
        _ => None,
    };
    config.rank = Some(role);
    if let Err(e) = crate::runs::steps::run(&config) {
        // Unwinding would destroy the NCCL communicator, and ncclCommDestroy may wait forever
        // for collectives the other ranks never join: end the process here, and the parent
        // names this rank with the last lines of its stderr.
        eprintln!("metaprep: error: {e:#}");
        std::process::exit(Exit::Failure.code().into());
    }
    Ok(Exit::Ok.into())
}
