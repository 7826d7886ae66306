//! The metaprep command line.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use metaprep::check::{self, CheckConfig};
use metaprep::cli_lists::{parse_list, parse_u32_list};
use metaprep::gpu::{Gpu, GpuUnavailable};
use metaprep::prep::{Arm, Family};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "metaprep",
    version,
    about = "What a host read of device sequence lengths costs a speculative-decoding step, \
             and what graph replay with device-only lengths wins back.",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the GPU: name, compute capability, SMs, L2, memory, driver and CUDA versions.
    Info(DeviceArgs),
    /// Check every family x arm against the CPU reference, bit for bit, on random inputs.
    Check(CheckArgs),
}

#[derive(Args)]
struct DeviceArgs {
    /// CUDA device ordinal to run on.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Seed for the random inputs (default: a fresh one, printed so a failure can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    /// Metadata families, comma separated: dspark_draft_block, dsa_decode,
    /// dsa_target_verify, dsa_draft_extend_v2.
    #[arg(
        long,
        default_value = "dspark_draft_block,dsa_decode,dsa_target_verify,dsa_draft_extend_v2"
    )]
    families: String,
    /// Arms, comma separated: eager-sync (host read each step), eager-device, graph, fused.
    #[arg(long, default_value = "eager-sync,eager-device,graph,fused")]
    arms: String,
    /// Live batch sizes, comma separated (graphs pad each to the next capture size).
    #[arg(long, default_value = "1,2,3,8,64,256,1024")]
    batch_sizes: String,
    /// Block sizes, comma separated: draft block (gamma) for DSpark, draft tokens N for DSA.
    #[arg(long, default_value = "1,3,5,6,8")]
    block_sizes: String,
    /// Checked steps per cell after the warm-up, with `accept` advancing lengths between them.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(3..=64))]
    steps: u32,
    /// Committed tokens a batch may hold in all: lengths are drawn up to
    /// min(128k, budget / batch size).
    #[arg(long, default_value_t = 1 << 21)]
    token_budget: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("metaprep: error: {e:#}");
            if e.downcast_ref::<GpuUnavailable>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Bad flag values exit 2, like clap's own usage errors, before any GPU work.
fn usage<T>(parsed: Result<T>) -> Result<T, ExitCode> {
    parsed.map_err(|e| {
        eprintln!("metaprep: error: {e:#}");
        ExitCode::from(2)
    })
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Info(args) => info(&args),
        Command::Check(args) => {
            let config = match check_config(&args) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            run_check(&args, &config)
        }
    }
}

fn info(args: &DeviceArgs) -> Result<ExitCode> {
    let gpu = Gpu::open(args.device)?;
    let i = &gpu.info;
    println!("GPU {}: {}", i.ordinal, i.name);
    println!(
        "  compute capability  {}.{}",
        i.compute_capability.0, i.compute_capability.1
    );
    println!("  SMs                 {}", i.sm_count);
    println!("  L2                  {} MiB", i.l2_bytes >> 20);
    println!(
        "  memory              {:.1} GiB",
        i.memory_bytes as f64 / (1u64 << 30) as f64
    );
    println!("  CUDA (driver)       {}", i.cuda_driver_version);
    println!("  NVRTC               {}", i.nvrtc_version);
    println!("  devices visible     {}", i.device_count);
    Ok(ExitCode::SUCCESS)
}

fn check_config(args: &CheckArgs) -> Result<CheckConfig, ExitCode> {
    Ok(CheckConfig {
        seed: args.seed.unwrap_or_else(fresh_seed),
        families: usage(parse_list(
            &args.families,
            "--families",
            "dsa_decode,dsa_target_verify",
            |s| s.parse::<Family>().map_err(anyhow::Error::msg),
        ))?,
        arms: usage(parse_list(&args.arms, "--arms", "eager-sync,graph", |s| {
            s.parse::<Arm>().map_err(anyhow::Error::msg)
        }))?,
        batch_sizes: usage(parse_u32_list(&args.batch_sizes, "--batch-sizes"))?,
        block_sizes: usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?,
        steps: args.steps as usize,
        token_budget: args.token_budget,
    })
}

fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ ((std::process::id() as u64) << 32)
}

fn run_check(args: &CheckArgs, config: &CheckConfig) -> Result<ExitCode> {
    let gpu = Gpu::open(args.device.device)?;
    println!(
        "metaprep check on {} (sm_{}{}, CUDA {}), seed {} (replay with --seed {})",
        gpu.info.name,
        gpu.info.compute_capability.0,
        gpu.info.compute_capability.1,
        gpu.info.cuda_driver_version,
        config.seed,
        config.seed
    );
    for &family in &config.families {
        let message =
            check::eager_sync_capture_is_refused(&gpu, family).context("capture guard")?;
        println!(
            "capture guard, {family}: capturing eager-sync refused ({})",
            first_line(&message)
        );
    }
    let results = check::run(&gpu, config, |r| {
        if r.mismatches > 0 {
            let (step, m) = r.first.as_ref().expect("a mismatch has a first");
            println!(
                "MISMATCH {} {} bs {} block {}: {} cells differ; first at step {step}: {m}",
                r.family, r.arm, r.batch_size, r.block, r.mismatches
            );
        }
    })?;
    println!("\n| family | arm | shapes | cells checked | mismatches |\n|---|---|---:|---:|---:|");
    for &family in &config.families {
        for &arm in &config.arms {
            let cells: Vec<_> = results
                .iter()
                .filter(|r| r.family == family && r.arm == arm)
                .collect();
            let checked: u64 = cells.iter().map(|r| r.cells).sum();
            let bad: u64 = cells.iter().map(|r| r.mismatches).sum();
            println!("| {family} | {arm} | {} | {checked} | {bad} |", cells.len());
        }
    }
    let bad: u64 = results.iter().map(|r| r.mismatches).sum();
    if bad > 0 {
        println!(
            "\nFAILED: {bad} cells differ from the CPU reference (seed {})",
            config.seed
        );
        return Ok(ExitCode::FAILURE);
    }
    println!("\nOK: every output of every arm equals the CPU reference, bit for bit ({} shapes x arms, {} steps each)", results.len(), config.steps);
    Ok(ExitCode::SUCCESS)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
