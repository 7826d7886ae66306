//! `metaprep check`: its flags, their validation, and the check against the CPU reference.
//!
//! Only `check --dump DIR` writes an `env.json` (`DIR/env.json`, its `settings` what the dump
//! holds: `Settings::Check`, its seed, cases and arms; with `--cpu-only` the GPU fields stay
//! empty). The check and `--soak` write nothing: their outputs are stdout. The check's own
//! axes (`--families`, `--batch-sizes`, `--block-sizes`, `--steps`, `--token-budget`) are
//! refused with `--dump`, whose cases span their own.

use super::common::{usage, DeviceArgs, PrepAxes};
use crate::axes::{Arm, Family};
use crate::cli::lists::{distinct, positive_u32};
use crate::exit::Exit;
use crate::harness::environment::{env_record, host_record};
use crate::results::env::EnvRecord;
use crate::runs::check::{self, CheckConfig};
use crate::runs::dump::{write_dump, DumpTarget};
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
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
    #[arg(long, value_delimiter = ',', value_parser = positive_u32, default_value = "1,2,3,8,64,256,1024", conflicts_with = "dump")]
    pub(crate) batch_sizes: Vec<u32>,
    /// Block sizes, comma separated: draft block (gamma) for DSpark, draft tokens N for DSA.
    #[arg(long, value_delimiter = ',', value_parser = positive_u32, default_value = "1,3,5,6,8", conflicts_with = "dump")]
    pub(crate) block_sizes: Vec<u32>,
    /// Checked steps per cell after the warm-up, with `accept` advancing lengths between them.
    #[arg(long, default_value_t = 4, conflicts_with = "dump", value_parser = clap::value_parser!(u32).range(3..=64))]
    pub(crate) steps: u32,
    /// Committed tokens a batch may hold in all: lengths are drawn up to
    /// min(128k, budget / batch size).
    #[arg(long, default_value_t = 1 << 21, conflicts_with = "dump")]
    pub(crate) token_budget: u64,
    /// Instead of the check: write the inputs and every output of a fixed set of cases to
    /// DIR (cases.json + safetensors, see src/runs/dump.rs) for scripts/crosscheck_sglang.py:
    /// the CPU reference's buffers for the eager and graph page rules and, unless --cpu-only,
    /// each of --arms' buffers after one poisoned step on the GPU (an arm that differs from
    /// the reference fails the command). --seed picks the cases (default: fresh, printed).
    #[arg(long, value_name = "DIR")]
    pub(crate) dump: Option<PathBuf>,
    /// With --dump: write only the CPU reference's outputs; needs no GPU.
    #[arg(long, requires = "dump")]
    pub(crate) cpu_only: bool,
    /// With --dump: replace the earlier dump in DIR (without it, a folder holding a dump is
    /// refused: the new dump would delete the cases it does not write).
    #[arg(long, requires = "dump")]
    pub(crate) force: bool,
    /// With --dump: how many cases (they cycle through the families, batch 1-8, blocks 1-8).
    #[arg(long, default_value_t = 640, requires = "dump", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) dump_cases: u32,
    /// Instead of the check: a soak of N steps of each family x arm at one shape (one
    /// --batch-sizes and one --block-sizes value), each step's prep followed by `accept` on
    /// the device, a poisoned step checked against the CPU reference every 10000 steps and at
    /// the last, device memory in use, this process's resident memory and its heap in use
    /// (glibc's mallinfo2) sampled at each check. Fails (exit 1) on any mismatch or if device
    /// memory or the heap in use (the resident set where the C library cannot say) grows by
    /// more than 1% over its first sample: the resident set also holds what the allocator
    /// keeps after a free.
    #[arg(long, value_name = "STEPS", conflicts_with = "dump", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub(crate) soak: Option<u64>,
}

pub(crate) fn check_config(args: &CheckArgs) -> Result<CheckConfig, ExitCode> {
    let (families, arms) = usage(args.prep.checked())?;
    // A dump's cases cycle through every family, batch 1-8 and blocks 1-8 (the shapes clap
    // refuses with --dump): a narrower --families would be ignored, so it is refused.
    if args.dump.is_some() && families.len() != Family::ALL.len() {
        return usage(Err(anyhow::anyhow!(
            "--families has no effect with --dump: its cases cycle through every family \
             (scripts/crosscheck_sglang.py reads them all); leave --families out"
        )));
    }
    usage(distinct(&args.batch_sizes, "--batch-sizes"))?;
    usage(distinct(&args.block_sizes, "--block-sizes"))?;
    Ok(CheckConfig {
        seed: args.seed.unwrap_or_else(check::fresh_seed),
        families,
        arms,
        batch_sizes: args.batch_sizes.clone(),
        block_sizes: args.block_sizes.clone(),
        steps: args.steps as usize,
        token_budget: args.token_budget,
    })
    .and_then(|config: CheckConfig| {
        let largest = *config
            .batch_sizes
            .iter()
            .max()
            .expect("a parsed list is not empty");
        if config.token_budget < u64::from(largest) {
            return usage(Err(anyhow::anyhow!(
                "--token-budget {}: a batch of {largest} needs a token per request at least; \
                 give {largest} or more (the default, 2097152, draws lengths up to 128k at small \
                 batches)",
                config.token_budget
            )));
        }
        if args.soak.is_some() && (config.batch_sizes.len(), config.block_sizes.len()) != (1, 1) {
            return usage(Err(anyhow::anyhow!(
                "--soak soaks one shape per family and arm: give one --batch-sizes and one \
                 --block-sizes value, such as --batch-sizes 8 --block-sizes 5"
            )));
        }
        for &family in &config.families {
            for &bs in &config.batch_sizes {
                for &block in &config.block_sizes {
                    usage(
                        check::check_shape(family, bs, block, config.steps, config.token_budget)
                            .with_context(|| format!("--batch-sizes {bs}, --block-sizes {block}")),
                    )?;
                }
            }
        }
        Ok(config)
    })
}

pub(crate) fn run_check(args: &CheckArgs, config: &CheckConfig) -> Result<ExitCode> {
    let gpu = args.device.open()?;
    crate::outln!(
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
        for arm in Arm::ALL.into_iter().filter(|a| a.reads_host()) {
            let message =
                check::host_read_capture_is_refused(&gpu, family, arm).context("capture guard")?;
            crate::outln!(
                "capture guard, {family}: capturing {arm} refused ({})",
                first_line(&message)
            );
        }
    }
    let results = check::run(&gpu, config, |r| {
        if r.tally.mismatches > 0 {
            let (step, m) = r.tally.first.as_ref().expect("a mismatch has a first");
            crate::outln!(
                "MISMATCH {} {} bs {} block {}: {} cells differ; first at step {step}: {m}",
                r.family,
                r.arm,
                r.batch_size,
                r.block,
                r.tally.mismatches
            );
        }
    })?;
    crate::outln!(
        "\n| family | arm | shapes | cells checked | mismatches |\n|---|---|---:|---:|---:|"
    );
    for &family in &config.families {
        for &arm in &config.arms {
            let cells: Vec<_> = results
                .iter()
                .filter(|r| r.family == family && r.arm == arm)
                .collect();
            let checked: u64 = cells.iter().map(|r| r.tally.cells).sum();
            let bad: u64 = cells.iter().map(|r| r.tally.mismatches).sum();
            crate::outln!("| {family} | {arm} | {} | {checked} | {bad} |", cells.len());
        }
    }
    let bad: u64 = results.iter().map(|r| r.tally.mismatches).sum();
    if bad > 0 {
        crate::outln!(
            "\nFAILED: {bad} cells differ from the CPU reference (seed {})",
            config.seed
        );
        return Ok(Exit::Failure.into());
    }
    crate::outln!("\nOK: every output of every arm equals the CPU reference, bit for bit ({} shapes x arms, {} steps each)", results.len(), config.steps);
    Ok(Exit::Ok.into())
}

/// `check --dump DIR`: the cases, the CPU reference, and unless `--cpu-only` each arm.
pub(crate) fn run_dump(args: &CheckArgs, config: &CheckConfig, dir: &Path) -> Result<ExitCode> {
    let target = match usage(DumpTarget::new(dir)) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    if let (Some((seed, cases)), false) = (target.replaces, args.force) {
        let refused: Result<()> = Err(anyhow::anyhow!(
            "--dump {} holds an earlier dump ({cases} cases, seed {seed}): pass --force to \
             replace it, or name a new folder",
            dir.display()
        ));
        return Ok(usage(refused).unwrap_err());
    }
    let gpu = if args.cpu_only {
        None
    } else {
        Some(args.device.open()?)
    };
    let count = args.dump_cases as usize;
    let source = match &gpu {
        Some(gpu) => format!(
            "the CPU reference and {} arms on {}",
            config.arms.len(),
            gpu.info.name
        ),
        None => "the CPU reference only (--cpu-only)".into(),
    };
    crate::outln!(
        "metaprep check --dump {}: {count} cases, seed {} (replay with --seed {}), {source}",
        dir.display(),
        config.seed,
        config.seed
    );
    if let Some((seed, cases)) = target.replaces {
        crate::outln!(
            "  it replaces the dump there ({cases} cases, seed {seed}) once every case is written"
        );
    }
    let building = target.building();
    let env = match &gpu {
        Some(gpu) => env_record(gpu, Vec::new()),
        None => host_record(vec![
            "--cpu-only: no GPU opened, its fields are empty".into()
        ]),
    };
    let settings = config.dump_settings(args.dump_cases, args.cpu_only);
    let env = EnvRecord {
        settings: Some(settings),
        ..env
    };
    let mismatches = write_dump(
        &building,
        config.seed,
        count,
        gpu.as_ref(),
        &config.arms,
        |k| {
            if (k + 1) % 100 == 0 {
                crate::outln!("  {} of {count} cases written", k + 1);
            }
        },
    )?;
    env.write(&building)?;
    // A dump that shows a mismatch is kept: its buffers are what to look at.
    target.commit()?;
    for (case, arm, cells, first) in &mismatches {
        crate::outln!("MISMATCH case {case} {arm}: {cells} cells differ; first: {first}");
    }
    if !mismatches.is_empty() {
        crate::outln!(
            "\nFAILED: {} buffers differ from the CPU reference (seed {})",
            mismatches.len(),
            config.seed
        );
        return Ok(Exit::Failure.into());
    }
    crate::outln!(
        "wrote {count} cases to {} (index: cases.json)",
        dir.display()
    );
    Ok(Exit::Ok.into())
}

/// `check --soak STEPS`: every family x arm of the run soaked at its one shape.
pub(crate) fn run_soak(args: &CheckArgs, config: &CheckConfig, steps: u64) -> Result<ExitCode> {
    let gpu = args.device.open()?;
    let (bs, block) = (config.batch_sizes[0], config.block_sizes[0]);
    crate::outln!(
        "metaprep check --soak {steps} on {} (kernels: {}): bs {bs} block {block}, a spot check every {} steps, seed {} (replay with --seed {})",
        gpu.info.name,
        gpu.info.kernel_image,
        check::SOAK_CHECK_EVERY,
        config.seed,
        config.seed
    );
    let memory = |m: &check::MemoryTrace| {
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        format!(
            "{:.1} / {:.1} / {:.1} ({:+.3}%)",
            mib(m.first()),
            mib(m.max()),
            mib(m.last()),
            m.growth_pct()
        )
    };
    // Each row as its soak ends, so a run stopped early keeps what it finished.
    crate::outln!(
        "\n| family | arm | steps | spot checks | cells checked | mismatches | steps/s | device MiB first / max / last (growth) | host RSS MiB first / max / last (growth) | host heap in use MiB first / max / last (growth) |\n|---|---|---:|---:|---:|---:|---:|---|---|---|"
    );
    let mut results = Vec::new();
    for &family in &config.families {
        let shape = check::check_shape(family, bs, block, 1, config.token_budget)?;
        let seed = check::shape_seed(config.seed, family, bs, block);
        for &arm in &config.arms {
            let started = std::time::Instant::now();
            let r = check::soak(
                &gpu,
                shape,
                arm,
                steps,
                config.token_budget,
                seed,
                |step, bad| {
                    if step > 0 && step % (20 * check::SOAK_CHECK_EVERY) == 0 {
                        eprintln!(
                            "  {family} {arm}: {step} steps, {bad} mismatches, {:.0} s",
                            started.elapsed().as_secs_f64()
                        );
                    }
                },
            )
            .with_context(|| format!("soaking {family} {arm}"))?;
            if let Some((step, m)) = &r.tally.first {
                crate::outln!("MISMATCH {family} {arm} at step {step}: {m}");
            }
            crate::outln!(
                "| {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} |",
                r.family,
                r.arm,
                r.steps,
                r.checks,
                r.tally.cells,
                r.tally.mismatches,
                r.steps as f64 / r.seconds,
                memory(&r.device),
                memory(&r.host),
                match r.heap.samples.is_empty() {
                    true => "not sampled (no glibc mallinfo2): RSS judged".to_string(),
                    false => memory(&r.heap),
                },
            );
            results.push(r);
        }
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{} {}", r.family, r.arm))
        .collect();
    if !failed.is_empty() {
        crate::outln!(
            "\nFAILED: {} (a mismatch, or device memory or the host heap in use grown by more than {}%; seed {})",
            failed.join(", "),
            check::SOAK_MEMORY_GROWTH_PCT,
            config.seed
        );
        return Ok(Exit::Failure.into());
    }
    crate::outln!(
        "\nOK: {} soaks of {steps} steps, every spot check equal to the CPU reference, device and host memory within {}% of their first sample",
        results.len(),
        check::SOAK_MEMORY_GROWTH_PCT
    );
    Ok(Exit::Ok.into())
}

pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
