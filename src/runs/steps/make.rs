//! What builds a run's cells ([`CellMaker`]): a cell's prep shapes, the host inputs and
//! device lengths every prep of its step reads, and the cell itself with its forwards, preps
//! and framework kernels; then its arms made ready at a host ([`CellHost`]). Apart from the
//! run loop, which `check_steps` shares.
//!
//! Where the profile gives an arm a host factor (`arm_host_factors`), that arm gets its own
//! host costs and step items, built once per cell and host scale and put in place of the
//! cell's for each of its passes. The arms rotate within a round, so each factored arm keeps
//! its own costs (and its own post-wait state and read jitter) and none leaks into another's.

use super::cell::{ArmProgram, CellPrep, StepCell, StepPrep};
use super::config::StepsConfig;
use super::forward::{forward_label, forward_size, Forward, ModelOf};
use super::host_costs::{framework_kernel, HostCosts};
use crate::axes::{Arm, Layout, ReadPath};
use crate::gpu::Gpu;
use crate::model::forward::StreamSource;
use crate::model::host_profile::{family_of, phases_of, ForwardOf, HostProfile, Item};
use crate::model::nccl_collectives::CollectiveBuffers;
use crate::model::profile::{collective_latency_us, CollectivePlan, ForwardModel, Link};
use crate::prep::inputs::{generate, HostInputs};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::PrepPlan;
use crate::prep::Shape;
use crate::runs::rank_world::{RankWorld, ReadDelay};
use anyhow::{Context, Result};
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

/// The harness's own idle read (per read path) and upload costs a cell measured.
pub(super) type IdleCosts = ([Duration; ReadPath::ALL.len()], Duration);

/// One arm's host: the costs its step runs at and the items with its host segments' µs.
pub(super) struct OwnHost {
    pub(super) costs: HostCosts,
    pub(super) items: Vec<Item>,
}

/// One arm made ready for a cell: its programs, each prep's prepared plan, and its own host
/// where the profile gives the arm a factor (else the cell's serves, as for every arm of a
/// profile without factors).
pub(super) struct ReadyArm {
    pub(super) program: ArmProgram,
    pub(super) prepared: Vec<StepPrep>,
    pub(super) own: Option<OwnHost>,
}

/// Each of `arms`' own host, in their order: `Some` for an arm `profile` gives a factor,
/// with `profile.for_arm(arm)` made into costs by `costs_of` and into items by `items_of`.
pub(super) fn own_hosts(
    profile: &HostProfile,
    arms: &[Arm],
    mut costs_of: impl FnMut(HostProfile) -> HostCosts,
    mut items_of: impl FnMut(&HostProfile) -> Result<Vec<Item>>,
) -> Result<Vec<Option<OwnHost>>> {
    arms.iter()
        .map(|&arm| {
            if profile.arm_host_factor(arm).is_none() {
                return Ok(None);
            }
            let own = profile.for_arm(arm);
            let items = items_of(&own)?;
            Ok(Some(OwnHost {
                costs: costs_of(own),
                items,
            }))
        })
        .collect()
}

/// What a cell's host runs at: the run's profile scaled, on this rank, at this block and
/// rank batch, over the harness's own idle costs.
pub(super) struct CellHost<'c> {
    pub(super) config: &'c StepsConfig,
    pub(super) rank: usize,
    pub(super) block: u32,
    pub(super) rank_bs: u32,
    pub(super) scale: f64,
    pub(super) idle: IdleCosts,
}

impl CellHost<'_> {
    /// Sets the cell's costs and items to this host's, and makes every arm of the run ready
    /// on it once (`labels` name them in errors), each at its own host where it has one.
    pub(super) fn ready_arms(
        &self,
        cell: &mut StepCell,
        labels: &[String],
    ) -> Result<Vec<ReadyArm>> {
        let config = self.config;
        let costs_of = |profile| {
            let skew = config.read_skew.on(self.rank, config.seed);
            HostCosts::new(profile, self.idle.0, self.idle.1, skew)
        };
        let items_of = |p: &HostProfile| p.step_items(config.drafter, self.block, self.rank_bs);
        let scaled = config.host.scaled(self.scale)?;
        let owns = own_hosts(&scaled, &config.arms, costs_of, items_of)?;
        cell.items = items_of(&scaled)?;
        cell.costs = costs_of(scaled);
        let mut ready = Vec::with_capacity(config.arms.len());
        for ((&arm, label), mut own) in config.arms.iter().zip(labels).zip(owns) {
            let (program, prepared) = cell.with_host(own.as_mut(), |cell| {
                let prepared = cell.prepare_all(arm).with_context(|| label.clone())?;
                Ok((cell.program(arm), prepared))
            })?;
            ready.push(ReadyArm {
                program,
                prepared,
                own,
            });
        }
        Ok(ready)
    }
}

impl StepCell<'_> {
    /// Runs `f` on the cell with `own`'s costs and items in place of the cell's, putting
    /// the cell's back after it whatever it returned; with `None`, on the cell's own.
    pub(super) fn with_host<T>(
        &mut self,
        own: Option<&mut OwnHost>,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let Some(own) = own else { return f(self) };
        self.swap_host(own);
        let out = f(self);
        self.swap_host(own);
        out
    }

    fn swap_host(&mut self, own: &mut OwnHost) {
        std::mem::swap(&mut self.costs, &mut own.costs);
        std::mem::swap(&mut self.items, &mut own.items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axes::Drafter;
    use crate::model::host_profile::Sourced;

    #[test]
    fn each_factored_arm_gets_its_own_host_and_the_others_the_cell_s() {
        let mut p = HostProfile::load("pytorch").unwrap();
        let factor = |value| Sourced {
            value,
            source: "test".into(),
        };
        p.arm_host_factors = Some(
            [
                ("eager-device".to_string(), factor(2.0)),
                ("graph".to_string(), factor(0.5)),
            ]
            .into(),
        );
        let arms = [Arm::EagerSync, Arm::EagerDevice, Arm::Graph];
        let idle = Duration::from_micros(1);
        let costs_of = |p| HostCosts::new(p, [idle; ReadPath::ALL.len()], idle, ReadDelay::none());
        let items_of = |p: &HostProfile| p.step_items(Drafter::Dspark, 5, 8);
        let owns = own_hosts(&p, &arms, costs_of, items_of).unwrap();
        assert!(
            owns[0].is_none(),
            "eager-sync has no factor: the cell's costs serve it"
        );
        let cell = costs_of(p.clone());
        let scheduler = |items: &[Item]| match &items[0] {
            Item::Host { us, .. } => *us,
            other => panic!("{other:?}"),
        };
        let cell_items = items_of(&p).unwrap();
        for (own, arm, k) in [
            (&owns[1], Arm::EagerDevice, 2.0),
            (&owns[2], Arm::Graph, 0.5),
        ] {
            let own = own.as_ref().unwrap();
            let c = &own.costs;
            let near = |a: Duration, b: f64| (a.as_secs_f64() * 1e6 - b).abs() < 1e-3;
            assert!(near(c.op, p.op_us.value * k), "{:?}", c.op);
            assert!(near(c.graph_launch, p.graph_launch_us.value * k));
            assert!(near(c.read_top_up[0], p.read_us.value * k - 1.0));
            assert!(near(c.upload_top_up, p.upload_us.value * k - 1.0));
            assert_eq!(c.profile, p.for_arm(arm));
            assert_eq!(scheduler(&own.items), scheduler(&cell_items) * k);
        }
        assert_ne!(owns[1].as_ref().unwrap().costs.op, cell.op);
    }
}
