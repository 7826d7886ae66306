//! The command line: clap's arguments per command (one file each), the flags they share,
//! and each command's Args -> Config with every flag validated before any GPU work.

pub mod ab;
pub mod calibrate;
pub mod check;
pub mod collectives;
pub mod common;
pub mod doctor;
pub mod gaps;
pub mod grid_args;
pub mod help;
pub mod info;
pub mod lists;
mod out_folder;
pub mod rank_worker;
pub mod report;
pub mod step_model;
pub mod steps;
pub mod sweep;
pub mod validate;

use crate::exit::Exit;
use crate::report::compare::{run_compare, CompareArgs};
use anyhow::Result;
use calibrate::CalibrateArgs;
use check::CheckArgs;
use clap::{Parser, Subcommand};
use common::DeviceArgs;
use report::ReportArgs;
use std::process::ExitCode;
use steps::StepsArgs;
use sweep::SweepArgs;

#[derive(Parser)]
#[command(
    name = "metaprep",
    version = crate::VERSION,
    about = "What a host read of device sequence lengths costs a speculative-decoding step, \
             and what graph replay with device-only lengths wins back.",
    long_about = None,
    after_help = "Exit codes: 0 ok; 1 `ab` or `compare` found a regression, `validate` a failed cell \
                  or an unconverged fit, `check` a wrong cell, or a command failed while \
                  running; 2 a bad flag or bad input (refused before any GPU work); 3 no GPU, \
                  CUDA driver or NVRTC."
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print the GPU: name, compute capability, SMs, L2, memory, driver and CUDA versions.
    Info(DeviceArgs),
    /// Check this host for everything metaprep uses: the driver, NVRTC (also looked for in
    /// Python's site-packages, where a PyTorch venv keeps it), the kernels compiled and loaded,
    /// NVML, GPM, CUPTI, NCCL and CPU pinning; each found (file, version) or not (and the fix).
    /// Runs without a GPU; exit 3 when something check, sweep and steps need is missing.
    Doctor(DeviceArgs),
    /// Check every family x arm against the CPU reference, bit for bit, on random inputs.
    Check(CheckArgs),
    /// Time every arm over batch size x block size x layout in rounds (see --min-rounds), with the
    /// floor measured in every round; writes metaprep.csv, rounds.csv (each round's medians),
    /// env.json and telemetry.csv to --out.
    Sweep(SweepArgs),
    /// Run the decode-step model (scheduler work, draft prep, draft forward, verify prep,
    /// verify forward, accept; host one step ahead; --drafter eagle: draft passes, verify,
    /// draft-extend) per arm, batch, block and layout: ITL, throughput, forward occupancy and
    /// host-bound gaps, into the same CSV as `sweep`.
    Steps(Box<StepsArgs>),
    /// Write charts (PNG + SVG) and summary.md beside a run's CSV (or into --out). Needs no GPU.
    Report(ReportArgs),
    /// Derive a host profile (`steps --host-profile`) from a PyTorch profiler Chrome trace:
    /// per-op cost, reads, graph launches, the step's host program and each prep's ops.
    /// Needs no GPU.
    Calibrate(CalibrateArgs),
    /// Hold the step model against an engine's own untraced step times: run `steps` with a
    /// host profile on every cell of a reference CSV (forward µs, batch, block, arm, step µs,
    /// host speed), each at the host speed the reference recorded, and write validation.md
    /// and validation.csv (reference, model, error, pass per arm and for eager-sync − graph);
    /// with --fit, each arm's host factor fitted first at one untraced cell. Exit 1 when a
    /// cell fails its bar.
    Validate(Box<validate::ValidateArgs>),
    Compare(CompareArgs),
    /// BASE against NEW, interleaved in time and tested in pairs: each side a long-lived
    /// worker (two builds, or this build with two sets of flags), every cell measured on both
    /// back to back, half BASE-first, many short pairs; a row is called only where its whole
    /// 95% interval (Hodges–Lehmann, Wilcoxon) lies beyond its margin. Exit 1 on a slower row
    /// or a failed side. docs/compare.md says when to use it and when `compare`.
    Ab(Box<ab::AbArgs>),
    /// Which host syncs stall an engine's decode loop, and what removing them wins, from its
    /// own torch.profiler trace (no annotations needed). Needs no GPU. docs/gaps.md says how.
    Gaps(gaps::GapsArgs),
    /// NCCL latency and bandwidth on this host's GPUs: all-reduce (and, with two GPUs or
    /// more, expert parallelism's all-to-all) over a range of sizes, one process per GPU,
    /// timed with CUDA events; prints a table and the α (µs) + bytes/β (GB/s) fit that
    /// `steps --collective-latency-us/--link-gb-s` take.
    Collectives(collectives::CollectivesArgs),
    /// One rank of `steps` with real ranks (started by `steps`, not by hand).
    #[command(hide = true)]
    RankWorker(Box<rank_worker::RankWorkerArgs>),
    /// One side of `ab` (started by `ab`, not by hand).
    #[command(hide = true, args_override_self = true)]
    AbWorker(Box<ab::AbWorkerArgs>),
    /// One side of `ab --steps` (started by `ab`, not by hand).
    #[command(hide = true, args_override_self = true)]
    AbStepsWorker(Box<ab::AbStepsWorkerArgs>),
    /// Rounds of a sweep measured in a worker process (started by `sweep --processes`, not by
    /// hand).
    #[command(hide = true)]
    SweepWorker(Box<sweep::SweepWorkerArgs>),
}

/// The command line as [`parse`] reads it: every flag's value may begin with `-`, so that
/// `--seed -1` reaches the flag's own parser (which refuses it, naming `--seed`) instead of
/// clap reading `-1` as an unknown flag and naming none.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command().mut_subcommands(|c| {
        let validate = c.get_name() == "validate";
        // Hidden first, so that the short help counts only the flags it leaves out.
        let c = c.mut_args(|a| {
            // validate's help leaves out the steps flags it sets per cell (and refuses).
            let a = match validate && validate::AXES.iter().any(|(id, _)| a.get_id() == *id) {
                true => a.hide(true),
                false => a,
            };
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        });
        help::fit_to_screen(c)
    })
}

/// Parses this process's command line ([`command`]); a usage error exits 2 as clap's do.
pub fn parse() -> Cli {
    parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parses `argv` as [`parse`] does; `validate` learns which flags were given at all (a flag
/// given its default value is still given).
pub fn parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let matches = command().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let (Command::Validate(args), Some(("validate", sub))) =
        (&mut cli.command, matches.subcommand())
    {
        args.given = (sub.ids())
            .filter(|id| {
                sub.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|id| id.to_string())
            .collect();
    }
    Ok(cli)
}

/// Runs a parsed command line: bad flags exit 2 here, before any GPU work.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Info(args) => info::info(&args),
        Command::Doctor(args) => doctor::doctor(&args),
        Command::Check(args) => {
            let config = match check::check_config(&args) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            match (&args.dump, args.soak) {
                (Some(dir), _) => check::run_dump(&args, &config, dir),
                (None, Some(steps)) => check::run_soak(&args, &config, steps),
                (None, None) => check::run_check(&args, &config),
            }
        }
        Command::Sweep(args) => match sweep::parent_config(&args) {
            Ok(config) => {
                args.nvtx.apply();
                sweep::run_sweep(&config)
            }
            Err(code) => Ok(code),
        },
        Command::Steps(args) => match steps::steps_config(&args)
            .and_then(|config| steps::check_outputs(&config).map(|()| config))
        {
            Ok(config) => {
                args.nvtx.apply();
                steps::run_steps(&config)
            }
            Err(code) => Ok(code),
        },
        Command::Collectives(args) => collectives::collectives(&args),
        Command::RankWorker(args) => rank_worker::rank_worker(&args),
        Command::SweepWorker(args) => sweep::sweep_worker(&args),
        Command::Report(args) => report::report(&args),
        Command::Ab(args) => ab::ab(&args),
        Command::Gaps(args) => gaps::gaps(&args),
        Command::AbWorker(args) => ab::ab_worker(&args),
        Command::AbStepsWorker(args) => ab::ab_steps_worker(&args),
        Command::Calibrate(args) => calibrate::calibrate(&args),
        Command::Validate(args) => {
            args.steps.nvtx.apply();
            validate::validate(&args)
        }
        Command::Compare(args) => match run_compare(&args) {
            Ok(outcome) => {
                crate::out!("{}", outcome.terminal);
                if args.out.is_none() {
                    for written in &outcome.written {
                        eprintln!("metaprep: {written}");
                    }
                }
                Ok(outcome.exit().into())
            }
            Err(e) => {
                crate::exit::print_error(&e);
                Ok(Exit::BadInput.into())
            }
        },
    }
}
