//! A `steps` grid held ready for short bursts on request, as `ab`'s steps side measures it:
//! every (layout, batch, block) cell built once with each arm made ready at the run's one
//! host scale, then one arm's clean pass whenever asked. One process alone: layouts wider
//! than one GPU are emulated.

use super::cell::StepCell;
use super::config::{plan, Cell, StepsConfig};
use super::make::{CellHost, CellMaker, ReadyArm};
use super::passes::Pass;
use super::rows::ArmRounds;
use crate::axes::{Arm, ReadPath};
use crate::gpu::Gpu;
use crate::model::forward::StreamSource;
use crate::model::memory::GpuMemory;
use crate::runs::rank_world::RankWorld;
use crate::stats::summary::quantile;
use anyhow::{bail, Context, Result};

/// One burst's medians over its measured steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepBurst {
    pub itl_us: f64,
    pub step_us: f64,
    pub throughput_tok_s: f64,
    /// Time the host spent blocked in reads a step, for an arm that reads.
    pub host_blocked_us: Option<f64>,
}

/// The cells `config` measures on GPUs of `memory`, each (layout, batch, block) with every
/// arm, in the order [`StepBursts::burst`] indexes them.
pub fn burst_cells(config: &StepsConfig, memory: GpuMemory) -> Result<Vec<(Cell, Arm)>> {
    one_host_scale(config)?;
    let (deployment, _) = plan(config, config.context(), memory)?;
    let mut cells = Vec::new();
    for (layout, batches) in &deployment.cells {
        for &bs in batches {
            for &block in &config.block_sizes {
                cells.extend(config.arms.iter().map(|&arm| ((*layout, bs, block), arm)));
            }
        }
    }
    Ok(cells)
}

/// Bursts run at one host scale: a side's cells are the same whatever its scale, so two
/// scales would name each cell twice.
pub fn one_host_scale(config: &StepsConfig) -> Result<()> {
    if config.host_scales.len() != 1 {
        bail!(
            "--host-scale: ab pairs one host scale a side ({} given): give each side one",
            config.host_scales.len()
        );
    }
    Ok(())
}

/// A grid's cells built and their arms ready.
pub struct StepBursts<'c, 'g> {
    config: &'c StepsConfig,
    cells: Vec<HeldCell<'g>>,
}

struct HeldCell<'g> {
    cell: StepCell<'g>,
    ready: Vec<ReadyArm>,
    /// The batch's requests per request this rank holds.
    batch_scale: f64,
}

impl StepBursts<'_, '_> {
    /// `--warmup-steps` steps of burst `index`'s arm, unmeasured: the host's launch path warm
    /// again after the wait for the other side, before the probe reads its speed.
    pub fn warm_up(&mut self, index: usize) -> Result<()> {
        self.pass(index, self.config.warmup_steps).map(|_| ())
    }

    /// Burst `index` of [`burst_cells`]' order: `--warmup-steps` then `--round-steps` clean
    /// steps of one arm of one cell.
    pub fn burst(&mut self, index: usize) -> Result<StepBurst> {
        let (warmup, steps) = (self.config.warmup_steps, self.config.rounds.steps);
        let (pass, batch_scale, arm) = self.pass(index, warmup + steps)?;
        let mut rounds = ArmRounds::default();
        rounds.push(&pass, warmup, batch_scale)?;
        let median = |v: &[Vec<f64>]| quantile(&v.concat(), 0.5).unwrap_or(f64::NAN);
        Ok(StepBurst {
            itl_us: median(&rounds.itl_us),
            step_us: median(&rounds.step_us),
            throughput_tok_s: median(&rounds.throughput_tok_s),
            host_blocked_us: arm.reads_host().then(|| median(&rounds.blocked_us)),
        })
    }

    /// A clean pass of `steps` steps of burst `index`'s arm, its cell's batch scale and the
    /// arm.
    fn pass(&mut self, index: usize, steps: usize) -> Result<(Pass, f64, Arm)> {
        let arms = self.config.arms.len();
        let held =
            (self.cells.get_mut(index / arms)).with_context(|| format!("no step cell {index}"))?;
        let ReadyArm {
            program,
            prepared,
            own,
        } = &mut held.ready[index % arms];
        let pass = held.cell.with_host(own.as_mut(), |cell| {
            cell.clean_pass(program, prepared, steps)
        })?;
        Ok((pass, held.batch_scale, program.arm))
    }
}

/// Builds `cells` (as [`burst_cells`] planned them) on `gpu` and hands them to `serve`: the
/// cells borrow their inputs, which live as long as this call.
pub fn with_bursts<R>(
    config: &StepsConfig,
    gpu: &Gpu,
    cells: &[(Cell, Arm)],
    serve: impl FnOnce(&mut StepBursts) -> Result<R>,
) -> Result<R> {
    let world = RankWorld::alone();
    let stream_source = StreamSource::new(gpu, 1 << 30)?;
    let maker = CellMaker {
        gpu,
        config,
        world: &world,
        stream_source: &stream_source,
    };
    let read_paths: Vec<ReadPath> = config.arms.iter().filter_map(|a| a.read_path()).collect();
    let groups: Vec<Cell> = (cells.iter())
        .step_by(config.arms.len())
        .map(|&(at, _)| at)
        .collect();
    let made = (groups.iter())
        .map(|&(layout, bs, block)| maker.inputs(layout.rank_batch(bs), block))
        .collect::<Result<Vec<_>>>()?;
    let mut held = Vec::with_capacity(groups.len());
    for (&(layout, bs, block), (shapes, inputs, lengths)) in groups.iter().zip(&made) {
        let rank_bs = layout.rank_batch(bs);
        let what = format!("{layout} bs {bs} block {block}");
        let mut cell = (maker.cell((layout, rank_bs, block), shapes.clone(), inputs, lengths))
            .with_context(|| what.clone())?;
        let host = CellHost {
            config,
            rank: 0,
            block,
            rank_bs,
            scale: config.host_scales[0],
            idle: cell.idle_host_costs(&read_paths)?,
        };
        let labels: Vec<String> = (config.arms.iter())
            .map(|arm| format!("{what} {arm}"))
            .collect();
        let ready = host.ready_arms(&mut cell, &labels)?;
        held.push(HeldCell {
            cell,
            ready,
            batch_scale: bs as f64 / rank_bs as f64,
        });
    }
    serve(&mut StepBursts {
        config,
        cells: held,
    })
}
