//! What measures a round on the GPU ([`Measurer`]): the floor (its items, the harness's
//! empty graph, the host-speed reference) and then every open group's arms back to back, in
//! the round's seeded order. The same in this process and in a `sweep-worker`.

use super::{GroupSpec, SweepConfig};
use crate::axes::floor_item::HOST_REFERENCE;
use crate::axes::Arm;
use crate::axes::FloorItem;
use crate::gpu::nvtx;
use crate::gpu::StepSource;
use crate::gpu::{Gpu, Graph, Launch};
use crate::harness::floor::Floor;
use crate::harness::pin::spawn_helper;
use crate::harness::prep_cell::{measure, EVENT_STEPS};
use crate::harness::sampling::sample_per_step;
use crate::harness::schedule::round_order;
use crate::harness::speed_reference::HostReference;
use crate::prep::accept::AcceptModel;
use crate::prep::bytes::prep_bytes;
use crate::prep::inputs::{generate, HostInputs, LengthRange};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{ArmSteps, PrepPlan};
use crate::prep::Shape;
use crate::results::pacing::gpu_paced_arm;
use crate::runs::sweep::rounds::{floor_cell, FloorRound, GroupRound, RoundResult, HARNESS};
use crate::stats::stopping::StoppingRule;
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::ffi::CStr;
use std::time::Instant;

/// The bare empty graph run through the same harness as the arms: its cost over the raw
/// empty-graph floor is the harness's own per-step overhead.
struct GraphSteps<'a>(&'a Graph);

impl StepSource for GraphSteps<'_> {
    fn issue_step(&mut self) -> Result<()> {
        self.0.launch().context("replaying the empty graph")
    }
}

/// The NVTX range of each step of the harness row.
const HARNESS_RANGE: &CStr = c"harness (empty graph)";

/// Says that a cell begins: its label, and whether it counts as a visit of a prep cell (the
/// floor's do not). A worker sends it on; this process tags NVML samples and the progress.
pub type Mark<'m> = dyn FnMut(&str, bool) -> Result<()> + 'm;

/// What measures rounds on the GPU: the floor, the stand-in forward, the host-speed reference
/// and each group's inputs, made once per process and kept for every round it measures.
pub struct Measurer<'g> {
    gpu: &'g Gpu,
    config: &'g SweepConfig,
    floor: Floor<'g>,
    forward: Option<Launch>,
    host_reference: HostReference,
    /// Inputs depend on the rank's batch and the block only; generating the largest takes
    /// longer than measuring a cell, so each is generated once and kept for every round.
    inputs: HashMap<InputKey, HostInputs>,
    /// The within-round rule.
    rule: StoppingRule,
}

/// What a group's inputs depend on: the rank's batch and the block.
type InputKey = (u32, u32);

/// The inputs of `shape` in a sweep of `seed` and `lengths`: seeded by the batch and block
/// alone, so every process and every family of that batch and block draws the same.
fn group_inputs(seed: u64, lengths: LengthRange, shape: &Shape) -> HostInputs {
    let seed = seed ^ ((shape.batch_size as u64) << 32 | shape.block as u64);
    generate(shape, seed, lengths, false)
}

/// The rank's shape of `group`.
pub(crate) fn group_shape(config: &SweepConfig, group: &GroupSpec) -> Result<Shape> {
    let rank_bs = group.layout.rank_batch(group.batch_size);
    Shape::new(group.family, rank_bs, group.block, config.max_context)
}

/// Every input `groups` use, generated at once on helper threads (off the measuring CPU):
/// each process of a `--processes` sweep draws them all again, and drawn one by one on the
/// measuring thread they would cost each worker time between its cells
/// (docs/h200-findings.md#host-side-costs-of-the-tools).
pub(crate) fn generate_inputs(
    config: &SweepConfig,
    groups: &[GroupSpec],
) -> Result<HashMap<InputKey, HostInputs>> {
    let mut shapes: HashMap<InputKey, Shape> = HashMap::new();
    for group in groups {
        let shape = group_shape(config, group)?;
        shapes
            .entry((shape.batch_size, shape.block))
            .or_insert(shape);
    }
    let helpers = shapes
        .into_iter()
        .map(|(key, shape)| {
            let (seed, lengths) = (config.seed, config.seq_lens);
            let helper = spawn_helper("sweep inputs", move || group_inputs(seed, lengths, &shape));
            Ok((
                key,
                helper.context("starting a thread to draw the sweep's inputs")?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    helpers
        .into_iter()
        .map(|(key, helper)| match helper.join() {
            Ok(inputs) => Ok((key, inputs)),
            Err(_) => bail!(
                "the thread drawing the inputs of bs {} block {} panicked",
                key.0,
                key.1
            ),
        })
        .collect()
}

/// Bytes one prep of `shape` over `inputs` reads and writes.
fn group_bytes(shape: &Shape, inputs: &HostInputs) -> u64 {
    // The sweep never runs accept, so every step preps these lengths.
    let valid_from: Vec<i32> = (inputs.req_pool_indices.iter())
        .map(|&pool| inputs.swa_valid_from[pool as usize])
        .collect();
    prep_bytes(shape, &inputs.seq_lens, &valid_from).total()
}

/// The device lengths a plan of `shape` over `inputs` reads (the sweep's accept model, which
/// it never runs).
pub(crate) fn group_lengths<'g>(
    gpu: &'g Gpu,
    config: &SweepConfig,
    shape: &Shape,
    inputs: &HostInputs,
) -> Result<DeviceLengths<'g>> {
    let accept =
        AcceptModel::with_probability(0.7, shape.block, config.seed as u32, shape.max_seq_len());
    DeviceLengths::new(gpu, &inputs.seq_lens, shape.batch_size as usize, accept)
}

impl<'g> Measurer<'g> {
    /// The measurer of rounds over `groups` (or fewer of them, as groups stop).
    pub fn new(gpu: &'g Gpu, config: &'g SweepConfig, groups: &[GroupSpec]) -> Result<Self> {
        let forward = if config.forward_us > 0.0 {
            Some(Launch::spin(gpu, config.forward_us)?)
        } else {
            None
        };
        Ok(Measurer {
            gpu,
            config,
            floor: Floor::new(gpu)?,
            forward,
            host_reference: HostReference::new(),
            inputs: generate_inputs(config, groups)?,
            rule: config.rule.per_round(config.rounds),
        })
    }

    /// Round `round` (from 0): the floor, then every group of `groups` in the round's order,
    /// each one's arms back to back.
    pub fn round(
        &mut self,
        round: usize,
        groups: &[GroupSpec],
        mark: &mut Mark,
    ) -> Result<RoundResult> {
        let heading = format!(
            "round {} of {}–{} (GPU-paced arms to {})",
            round + 1,
            self.config.rounds,
            self.config.max_rounds,
            self.config.last_round()
        );
        // Past --max-rounds only the GPU-paced arms are open (any other's visit is dropped).
        let gpu_paced_only = self.config.gpu_paced_round(round);
        let arms = &self.config.arms;
        let floor = self.measure_floor(mark).with_context(|| heading.clone())?;
        let positions: Vec<usize> = (0..groups.len()).collect();
        let mut visits = Vec::with_capacity(groups.len());
        for mut visit in round_order(&positions, arms.len(), self.config.seed, round) {
            if gpu_paced_only {
                visit.arms.retain(|&i| gpu_paced_arm(arms[i]));
            }
            let group = &groups[visit.group];
            let measured = self
                .visit(group, &visit.arms, !gpu_paced_only, mark)
                .with_context(|| heading.clone())?;
            visits.push(measured);
        }
        Ok(RoundResult {
            round,
            floor,
            groups: visits,
        })
    }

    /// One round of the floor: every item, the empty graph through the arms' harness, then the
    /// host-speed reference on this (pinned) thread.
    fn measure_floor(&mut self, mark: &mut Mark) -> Result<FloorRound> {
        let started = Instant::now();
        let (rule, steps) = (&self.rule, self.config.steps_per_sample);
        let mut round = FloorRound::default();
        for item in FloorItem::ALL {
            mark(&floor_cell(item.name()).label(), false)?;
            let floor = &mut self.floor;
            let sampled = sample_per_step(rule, steps, |n| floor.batch(item, n))?;
            round.items.push(sampled.per_step_us);
        }
        mark(&floor_cell(HARNESS).label(), false)?;
        let harness = measure(
            self.gpu,
            &mut GraphSteps(self.floor.empty_graph()?),
            HARNESS_RANGE,
            rule,
            (steps, EVENT_STEPS),
            None,
        )?;
        round.harness = harness.step.per_step_us;
        mark(&floor_cell(HOST_REFERENCE).label(), false)?;
        let host = &mut self.host_reference;
        round.host_reference = sample_per_step(rule, steps, |n| Ok(host.batch(n)))?.per_step_us;
        round.seconds = started.elapsed().as_secs_f64();
        Ok(round)
    }

    /// One round of `group`: a fresh plan over its inputs, then each arm in `arm_order`
    /// (indices into the run's arms), back to back, with the forward pass if `forward`.
    fn visit(
        &mut self,
        group: &GroupSpec,
        arm_order: &[usize],
        forward: bool,
        mark: &mut Mark,
    ) -> Result<GroupRound> {
        let (gpu, config) = (self.gpu, self.config);
        let shape = group_shape(config, group)?;
        let (rank_bs, block) = (shape.batch_size, shape.block);
        // Drawn for every group the measurer was made for; a round visits those or fewer.
        let inputs = self.inputs.get(&(rank_bs, block)).with_context(|| {
            format!("no inputs drawn for bs {rank_bs} block {block}: not a group of this worker")
        })?;
        let bytes = group_bytes(&shape, inputs);
        let lengths = group_lengths(gpu, config, &shape, inputs)?;
        let mut plan = PrepPlan::new(gpu, shape, inputs, &lengths)
            .with_context(|| format!("setting up {} bs {rank_bs} block {block}", group.family))?;
        let mut visit = GroupRound {
            grid_index: group.grid_index,
            arms: Vec::with_capacity(arm_order.len()),
            bytes: Some(bytes),
            seconds: 0.0,
        };
        for &index in arm_order {
            let arm: Arm = config.arms[index];
            let label = group.cells[index].label();
            mark(&label, true)?;
            let prepared = plan
                .prepare(arm)
                .with_context(|| format!("preparing {label}"))?;
            let mut steps = ArmSteps {
                plan: &mut plan,
                prepared,
            };
            let range = nvtx::name(&format!("{} prep ({arm})", group.family));
            let started = Instant::now();
            let m = measure(
                gpu,
                &mut steps,
                &range,
                &self.rule,
                (config.steps_per_sample, EVENT_STEPS),
                self.forward.as_mut().filter(|_| forward),
            )
            .with_context(|| format!("measuring {label}"))?;
            visit.seconds += started.elapsed().as_secs_f64();
            visit.arms.push((index, m.into()));
        }
        Ok(visit)
    }
}
