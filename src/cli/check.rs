//! `metaprep check`: its flags, their validation, and the check against the CPU reference.

use super::common::{usage, DeviceArgs, PrepAxes};
use crate::cli::lists::{arms, families, parse_u32_list};
use crate::gpu::Gpu;
use crate::runs::check::{self, CheckConfig};
use anyhow::{Context, Result};
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    /// Seed for the random inputs (default: a fresh one, printed so a failure can be replayed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    #[command(flatten)]
    pub(crate) prep: PrepAxes,
    /// Live batch sizes, comma separated (graphs pad each to the next capture size).
    #[arg(long, default_value = "1,2,3,8,64,256,1024")]
    pub(crate) batch_sizes: String,
    /// Block sizes, comma separated: draft block (gamma) for DSpark, draft tokens N for DSA.
    #[arg(long, default_value = "1,3,5,6,8")]
    pub(crate) block_sizes: String,
    /// Checked steps per cell after the warm-up, with `accept` advancing lengths between them.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(3..=64))]
    pub(crate) steps: u32,
    /// Committed tokens a batch may hold in all: lengths are drawn up to
    /// min(128k, budget / batch size).
    #[arg(long, default_value_t = 1 << 21)]
    pub(crate) token_budget: u64,
}

pub(crate) fn check_config(args: &CheckArgs) -> Result<CheckConfig, ExitCode> {
    Ok(CheckConfig {
        seed: args.seed.unwrap_or_else(check::fresh_seed),
        families: usage(families(&args.prep.families))?,
        arms: usage(arms(&args.prep.arms))?,
        batch_sizes: usage(parse_u32_list(&args.batch_sizes, "--batch-sizes"))?,
        block_sizes: usage(parse_u32_list(&args.block_sizes, "--block-sizes"))?,
        steps: args.steps as usize,
        token_budget: args.token_budget,
    })
    .and_then(|config: CheckConfig| {
        for &family in &config.families {
            for &bs in &config.batch_sizes {
                for &block in &config.block_sizes {
                    usage(check::check_shape(
                        family,
                        bs,
                        block,
                        config.steps,
                        config.token_budget,
                    ))?;
                }
            }
        }
        Ok(config)
    })
}

pub(crate) fn run_check(args: &CheckArgs, config: &CheckConfig) -> Result<ExitCode> {
    let gpu = Gpu::open_with(args.device.device, args.device.kernel_image)?;
    println!(
        "metaprep check on {} (sm_{}{}, CUDA {}, kernels: {}), seed {} (replay with --seed {})",
        gpu.info.name,
        gpu.info.compute_capability.0,
        gpu.info.compute_capability.1,
        gpu.info.cuda_driver_version,
        gpu.info.kernel_image,
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

pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
