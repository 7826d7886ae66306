//! A checked run of the step ([`check_steps`]): every arm of every cell on one GPU, every
//! prep inside each step poisoned before it and compared bit for bit with the CPU reference
//! after it, at the lengths accept has advanced to. What `check` proves for one prep at a
//! time, here inside the step; used by the GPU tests.

use super::config::{Cell, StepsConfig};
use super::make::CellMaker;
use crate::axes::Arm;
use crate::axes::Family;
use crate::gpu::Gpu;
use crate::model::forward::StreamSource;
use crate::prep::family::PageRule;
use crate::prep::inputs::HostInputs;
use crate::prep::plan::PrepPlan;
use crate::prep::reference::expected;
use crate::runs::check::Tally;
use crate::runs::rank_world::RankWorld;
use anyhow::{Context, Result};

/// What a checked pass ([`check_steps`]) found for one arm of one cell.
pub struct StepCheck {
    pub arm: Arm,
    /// The step's preps' families, in the step's order.
    pub families: Vec<Family>,
    /// Per prep: cells compared with the CPU reference, mismatches, the first.
    pub tallies: Vec<Tally>,
    /// The device's lengths before each step against the CPU mirror of accept.
    pub lengths: Tally,
    /// Preps checked (every prep item of every step).
    pub preps_checked: usize,
    /// Tokens accept added to the lengths over the pass, summed over the live requests.
    pub accepted: u64,
    pub(super) step: u64,
    /// The inputs at the step being checked: the mirror's lengths.
    pub(super) inputs: HostInputs,
}

impl StepCheck {
    /// Checks prep `k` of the step, just issued as `arm`: its outputs against the reference
    /// at this step's lengths, and a reading arm's host read against those lengths.
    pub(super) fn prep(&mut self, gpu: &Gpu, plan: &PrepPlan, arm: Arm, k: usize) -> Result<()> {
        gpu.sync()
            .with_context(|| format!("{} {arm} in step {}", plan.shape.family, self.step))?;
        let got = plan.download_outputs()?;
        let want = expected(&plan.shape, &self.inputs, PageRule::of(arm));
        self.tallies[k].outputs(self.step, &got, &want);
        if arm.reads_host() {
            let live = plan.shape.batch_size as usize;
            self.tallies[k].lengths(
                self.step,
                "seq_lens read to the host",
                plan.host_lengths(),
                &self.inputs.seq_lens[..live],
            );
        }
        self.preps_checked += 1;
        Ok(())
    }

    /// No cell of any prep, nor any length, differed.
    pub fn passed(&self) -> bool {
        self.lengths.mismatches == 0 && self.tallies.iter().all(|t| t.mismatches == 0)
    }
}

/// Runs `steps` checked steps (`StepCell::checked_pass`) of `config`'s program for every arm
/// of every (layout, batch, block) cell on one GPU (alone: a wider layout is one rank, its
/// collectives busy-waits), the host profile's costs as in `steps`.
pub fn check_steps(config: &StepsConfig, steps: usize) -> Result<Vec<(Cell, StepCheck)>> {
    let gpu = config.gpu.open()?;
    let world = RankWorld::alone();
    let stream_source = StreamSource::new(&gpu, 1 << 24)?;
    let maker = CellMaker {
        gpu: &gpu,
        config,
        world: &world,
        stream_source: &stream_source,
    };
    let mut results = Vec::new();
    for &layout in &config.layouts {
        for &bs in &config.batch_sizes {
            let rank_bs = layout.rank_batch(bs);
            for &block in &config.block_sizes {
                let (shapes, inputs, lengths) = maker.inputs(rank_bs, block)?;
                let mut cell = maker.cell((layout, rank_bs, block), shapes, &inputs, &lengths)?;
                for &arm in &config.arms {
                    let what = || format!("{layout} bs {bs} block {block} {arm}");
                    let prepared = cell.prepare_all(arm).with_context(what)?;
                    let program = cell.program(arm);
                    let check = cell
                        .checked_pass(&program, &prepared, steps, &inputs)
                        .with_context(what)?;
                    results.push(((layout, bs, block), check));
                }
            }
        }
    }
    Ok(results)
}
