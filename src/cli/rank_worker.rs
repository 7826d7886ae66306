//! `metaprep rank-worker` (hidden): one rank of a world that `steps --ranks real|auto`
//! starts, once per GPU of a layout. It reads the parent's validated config from the file
//! `--settings` names (written by [`crate::runs::ranks`]; no command line is parsed again) and
//! takes its own place from its flags: rank, layout, NCCL library, id file, output folder.

use super::common::{usage, NvtxArgs};
use crate::axes::Layout;
use crate::exit::Exit;
use crate::results::config_file::ConfigFile;
use crate::runs::rank_world::RankRole;
use crate::runs::steps::{StepsConfig, TraceRequest};
use anyhow::{Context, Result};
use clap::Args;
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
    /// The parent's validated `steps` config, as JSON: what every rank of the run measures,
    /// with the memory per GPU every rank plans for (the parent's, so that every rank plans
    /// the same cells whatever its own GPU holds).
    #[arg(long, value_name = "FILE")]
    settings: PathBuf,
    #[command(flatten)]
    nvtx: NvtxArgs,
}

pub fn rank_worker(args: &RankWorkerArgs) -> Result<ExitCode> {
    args.nvtx.apply();
    let mut config = match usage(StepsConfig::read_json(&args.settings)) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let role = RankRole {
        rank: args.rank,
        world: args.layout.gpus() as usize,
        nccl: args.nccl_lib.clone(),
        id_file: args.id_file.clone(),
    };
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
        crate::exit::print_error(&e);
        std::process::exit(Exit::Failure.code().into());
    }
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::common::parse_args;
    use crate::cli::steps::{steps_config, StepsArgs};
    use crate::model::memory::GpuMemory;

    /// The config `steps --out DIR/run FLAGS` validates.
    fn config(dir: &tempfile::TempDir, flags: &[&str]) -> StepsConfig {
        let out = dir.path().join("run");
        let mut argv = vec!["--out".into(), out.into_os_string()];
        argv.extend(flags.iter().map(Into::into));
        let args: StepsArgs = parse_args("steps", &argv).unwrap();
        steps_config(&args).unwrap()
    }

    #[test]
    fn the_config_round_trips_through_json_whole() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.json");
        let flagged = [
            "--drafter",
            "eagle",
            "--tp",
            "tp2,dep4",
            "--gpu-memory-gib",
            "80.5",
            "--block-sizes",
            "3",
            "--accept-length",
            "2.7",
            "--host-scale",
            "1,0.5",
            "--collective-latency-us",
            "12.5",
            "--timer",
            "cupti",
            "--trace",
            trace.to_str().unwrap(),
            "--trace-cell",
            "dep4:4:3",
            "--ranks",
            "real",
            "--read-skew-us",
            "3.3",
            "--read-skew-rank",
            "1",
            "--cpu",
            "off",
            "--device",
            "1",
            "--sync",
            "spin",
            "--kernel-image",
            "ptx",
        ];
        for flags in [
            &[][..],
            &flagged[..],
            &[
                "--forward-us",
                "20",
                "--cpu",
                "0",
                "--accept-rate",
                "0.30000000000000004",
            ][..],
        ] {
            let config = config(&dir, flags);
            let path = dir.path().join("config.json");
            config.write_json(&path).unwrap();
            assert_eq!(StepsConfig::read_json(&path).unwrap(), config, "{flags:?}");
        }
        let flagged = config(&dir, &flagged);
        assert_eq!(flagged.layouts, [Layout::Tp(2), Layout::Dep(4)]);
        assert!(flagged.gpu_memory.is_some() && flagged.trace.is_some());
    }

    #[test]
    fn the_workers_settings_plan_for_the_parents_memory_unless_a_flag_gave_one() {
        use crate::runs::ranks::write_worker_settings;
        let dir = tempfile::tempdir().unwrap();
        let parent = config(&dir, &[]);
        let path = write_worker_settings(&parent, GpuMemory::device(150_000_000_000)).unwrap();
        assert_eq!(path, parent.out.join("ranks/steps-config.json"));
        let workers = StepsConfig::read_json(&path).unwrap();
        assert_eq!(workers.gpu_memory, Some(GpuMemory::device(150_000_000_000)));
        assert_eq!(
            workers,
            StepsConfig {
                gpu_memory: workers.gpu_memory,
                ..parent
            }
        );
        let flagged = config(&dir, &["--gpu-memory-gib", "80"]);
        let path = write_worker_settings(&flagged, GpuMemory::device(150_000_000_000)).unwrap();
        assert_eq!(StepsConfig::read_json(&path).unwrap(), flagged);
    }

    #[test]
    fn a_settings_file_that_is_missing_or_malformed_is_bad_input_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("steps-config.json");
        let e = StepsConfig::read_json(&path).unwrap_err();
        assert!(e.downcast_ref::<crate::exit::BadInput>().is_some(), "{e:#}");
        assert!(e.to_string().contains(path.to_str().unwrap()), "{e:#}");
        for text in ["{", "{\"arms\": [\"eager-sync\"]}", "[]"] {
            std::fs::write(&path, text).unwrap();
            let e = StepsConfig::read_json(&path).unwrap_err();
            assert!(e.downcast_ref::<crate::exit::BadInput>().is_some(), "{e:#}");
            let shown = e.to_string();
            assert!(shown.starts_with(path.to_str().unwrap()), "{shown}");
            assert!(shown.contains("not a steps config"), "{shown}");
        }
    }
}
