//! `metaprep ab-steps-worker`: one side of an `ab --steps`, measuring the decode-step model's
//! cells on request. Its hello names the cells the memory plan holds (before any GPU work);
//! on `Start` it builds every cell and makes each arm ready once; each `Measure` is a warm-up
//! pass, the host-speed probe, one arm's clean pass (`--warmup-steps`, then `--round-steps`
//! measured), the probe again.

use super::protocol::CellName;
use super::worker::{answer, greet, metrics, probe, ready_message};
use crate::axes::Arm;
use crate::gpu::probe::devices;
use crate::harness::floor::Floor;
use crate::harness::pin::pin_current_thread;
use crate::model::memory::GpuMemory;
use crate::runs::steps::{burst_cells, with_bursts, Cell, StepsConfig};
use anyhow::Result;
use std::io::{BufRead, Write};

/// The cells of `config`'s grid as both sides name them, planned for `memory`.
pub fn step_cells(config: &StepsConfig, memory: GpuMemory) -> Result<Vec<CellName>> {
    Ok(names(config, &burst_cells(config, memory)?))
}

/// How both sides name `cells`.
fn names(config: &StepsConfig, cells: &[(Cell, Arm)]) -> Vec<CellName> {
    let family = config.drafter.step_family();
    (cells.iter())
        .map(|&((layout, batch_size, block), arm)| CellName {
            family: family.into(),
            arm: arm.name().into(),
            batch_size,
            block,
            layout: layout.to_string(),
        })
        .collect()
}

/// The memory a side plans for: `--gpu-memory-gib`, else its device's, read without a context.
pub fn planned_memory(config: &StepsConfig) -> Result<GpuMemory> {
    Ok(match config.gpu_memory {
        Some(memory) => memory,
        None => GpuMemory::device(devices(config.gpu.ordinal)?.1),
    })
}

/// Serves one steps side: hello, then requests from `input` until it ends.
pub fn serve_steps(config: &StepsConfig, input: impl BufRead, out: &mut impl Write) -> Result<()> {
    let cells = burst_cells(config, planned_memory(config)?)?;
    let names = names(config, &cells);
    let Some(mut requests) = greet(input, out, &names, None)? else {
        return Ok(());
    };
    let gpu = config.gpu.open()?;
    // Held to the end: dropping it unpins the thread.
    let pinned = pin_current_thread(config.cpu)?;
    let mut floor = Floor::new(&gpu)?;
    // One process alone: every layout of the plan wider than one GPU is emulated.
    let mut emulated: Vec<String> = (cells.iter())
        .filter(|((layout, _, _), _)| layout.emulated(1))
        .map(|((layout, _, _), _)| layout.to_string())
        .collect();
    emulated.dedup();
    with_bursts(config, &gpu, &cells, |bursts| {
        let ready = ready_message(&gpu, &pinned, emulated);
        answer(&mut requests, out, ready, &names, |cell| {
            // Probed cold (after waiting for the other side) the launch path reads slow and every
            // pair looks moved: warm it first, as the sweep's bursts do (docs/ab.md).
            bursts.warm_up(cell)?;
            let before = probe(&mut floor)?;
            let b = bursts.burst(cell)?;
            let after = probe(&mut floor)?;
            let mut named = vec![
                ("itl_us", b.itl_us),
                ("step_us", b.step_us),
                ("throughput_tok_s", b.throughput_tok_s),
            ];
            if let Some(blocked) = b.host_blocked_us {
                named.push(("host_blocked_us", blocked));
            }
            Ok((before, after, metrics(named)))
        })
    })
}
