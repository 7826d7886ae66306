//! What builds a run's cells ([`CellMaker`]): a cell's prep shapes, the host inputs and
//! device lengths every prep of its step reads, and the cell itself with its forwards, preps
//! and framework kernels. Apart from the run loop, which `check_steps` shares.

use super::cell::{CellPrep, StepCell};
use super::config::StepsConfig;
use super::forward::{forward_label, forward_size, Forward, ModelOf};
use super::host_costs::{framework_kernel, HostCosts};
use crate::axes::Layout;
use crate::axes::ReadPath;
use crate::gpu::Gpu;
use crate::model::forward::StreamSource;
use crate::model::host_profile::{family_of, phases_of, ForwardOf, Item};
use crate::model::nccl_collectives::CollectiveBuffers;
use crate::model::profile::{collective_latency_us, CollectivePlan, ForwardModel, Link};
use crate::prep::inputs::{generate, HostInputs};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::PrepPlan;
use crate::prep::Shape;
use crate::runs::rank_world::{RankWorld, ReadDelay};
use anyhow::Result;
use std::time::Duration;

/// What makes a run's cells: the GPU, the run's settings, its world and the forwards'
/// stream source.
pub(super) struct CellMaker<'a, 'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) config: &'a StepsConfig,
    pub(super) world: &'a RankWorld,
    pub(super) stream_source: &'a StreamSource,
}

impl<'g> CellMaker<'_, 'g> {
    /// A cell's prep shapes (in [`phases_of`]'s order), the host inputs every prep of its step
    /// reads, and the lengths on the device with the accept model that advances them.
    pub(super) fn inputs(
        &self,
        rank_bs: u32,
        block: u32,
    ) -> Result<(Vec<Shape>, HostInputs, DeviceLengths<'g>)> {
        let (gpu, config) = (self.gpu, self.config);
        let shapes = phases_of(config.drafter)
            .iter()
            .map(|&p| Shape::new(family_of(p), rank_bs, block, config.max_context))
            .collect::<Result<Vec<_>>>()?;
        // Every prep of the step reads the same inputs and lengths.
        let inputs: HostInputs = generate(
            &shapes[0],
            config.seed ^ ((rank_bs as u64) << 32 | block as u64),
            config.seq_lens,
            false,
        );
        let accept = config.acceptance.model(
            config.drafter.drafted(block),
            config.seed as u32,
            shapes[0].max_seq_len(),
        )?;
        let lengths = DeviceLengths::new(gpu, &inputs.seq_lens, rank_bs as usize, accept)?;
        Ok((shapes, inputs, lengths))
    }

    /// The cell (layout, rank batch, block) of `config`'s step: its preps over `inputs` and
    /// `lengths`, its forwards (real collectives in a world, busy-waits alone), the kernels its
    /// framework ops launch, at the profile's costs until the run sets each host scale's.
    pub(super) fn cell(
        &self,
        (layout, rank_bs, block): (Layout, u32, u32),
        shapes: Vec<Shape>,
        inputs: &HostInputs,
        lengths: &'g DeviceLengths<'g>,
    ) -> Result<StepCell<'g>> {
        let (gpu, config, world, stream_source) =
            (self.gpu, self.config, self.world, self.stream_source);
        let link = Link {
            gb_s: config.link_gb_s,
            latency_us: config
                .collective_latency_us
                .unwrap_or_else(|| collective_latency_us(layout)),
        };
        let items = config.host.step_items(config.drafter, block, rank_bs)?;
        // Each forward of the step, once: its model and tokens per request.
        let mut kinds: Vec<ForwardOf> = Vec::new();
        for of in items.iter().filter_map(Item::forward_of) {
            if !kinds.contains(&of) {
                kinds.push(of);
            }
        }
        let forward_kinds: Vec<(ForwardOf, &ForwardModel, u32)> = kinds
            .into_iter()
            .map(|of| match forward_size(config.drafter, of, block) {
                (ModelOf::Draft, tokens) => (of, &config.draft, tokens),
                (ModelOf::Target, tokens) => (of, &config.target, tokens),
            })
            .collect();
        let context = config.context();
        let spec = |m: &ForwardModel, tokens| m.spec(layout, rank_bs, context, tokens, link);
        let forward_plans: Vec<Option<CollectivePlan>> = forward_kinds
            .iter()
            .map(|&(_, m, tokens)| m.collective_plan(layout, rank_bs, tokens))
            .collect();
        let plans: Vec<CollectivePlan> = forward_plans.iter().flatten().copied().collect();
        let mut buffers = match world.comm() {
            Some(_) => Some(CollectiveBuffers::new(gpu, &plans, world.size())?),
            None => None,
        };
        let mut forwards = Vec::with_capacity(forward_kinds.len());
        for (&(of, model, tokens), plan) in forward_kinds.iter().zip(forward_plans) {
            let what = format!("the {} forward", forward_label(of));
            let forward = match (world.comm(), buffers.as_mut()) {
                (Some(comm), Some(buffers)) => {
                    let collectives = plan.as_ref().map(|p| (comm, buffers, p));
                    Forward::real(gpu, spec(model, tokens)?, stream_source, collectives, &what)?
                }
                _ => Forward::emulated(gpu, spec(model, tokens)?, stream_source)?,
            };
            forwards.push((of, forward));
        }
        let mut preps = Vec::with_capacity(shapes.len());
        for (phase, shape) in phases_of(config.drafter).into_iter().zip(shapes) {
            preps.push(CellPrep {
                phase,
                plan: PrepPlan::new(gpu, shape, inputs, lengths)?,
                kernel: framework_kernel(gpu, config.host.prep_kernel_us(phase, rank_bs))?,
            });
        }
        Ok(StepCell {
            gpu,
            lengths,
            preps,
            forwards,
            _collective_buffers: buffers,
            host_kernel: framework_kernel(gpu, config.host.kernel_us.value)?,
            // A run sets each host scale's costs once the idle costs are known.
            costs: HostCosts::new(
                config.host.clone(),
                [Duration::ZERO; ReadPath::ALL.len()],
                Duration::ZERO,
                ReadDelay::none(),
            ),
            upload_blocked: Duration::ZERO,
            initial: inputs.seq_lens.clone(),
            items,
            drafter: config.drafter,
        })
    }
}
