//! `metaprep sweep`: every arm of every family over batch size x block size x layout, with
//! the floor measured in the same run, NVML telemetry per cell, and atomic, resumable output.
//!
//! **Rounds.** The run is measured in rounds, so that the host's and GPU's drift over the
//! run lands between rounds, where the reported intervals see it (see
//! [`crate::stats::rounds`]). Each round measures the floor first, then visits every cell
//! group still measuring (the arms of one family, layout, batch size and block size, back to
//! back) in a fresh seeded order ([`crate::harness::schedule`]). Inside a round a cell takes
//! `--min-samples` samples, or fewer if its time cap shared out between `--rounds` rounds runs
//! out ([`StoppingRule::per_round`]). After `--rounds` rounds, a group gets further rounds only
//! while its reported intervals are wide, up to `--max-rounds` or its time cap
//! ([`crate::stats::stopping`]); then its rows are formed ([`crate::runs::sweep_rounds`])
//! and written. Every round's medians go to `rounds.csv` as they come
//! ([`crate::harness::rounds_file`]).
//!
//! **Resume.** A group's rows are written when its rounds stop, all at once, so the CSV only
//! ever holds whole groups, each from one invocation's rounds; `--resume` keeps those and
//! measures every other group from its first round. Rows written without rounds (by a
//! metaprep before rounds) are not kept: their groups are measured again.

use crate::axes::layout::Layout;
use crate::axes::Arm;
use crate::axes::Family;
use crate::axes::FloorItem;
use crate::gpu::nvtx;
use crate::gpu::StepSource;
use crate::gpu::{Gpu, GpuChoice, Launch};
use crate::harness::floor::Floor;
use crate::harness::pin::{pin_current_thread, CpuPin};
use crate::harness::prep_cell::measure;
use crate::harness::rounds_file::RoundsFile;
use crate::harness::rows::{CellId, RoundLine};
use crate::harness::run_output::{
    arm_cells, emulation_notes, existing_rows, needs_measuring, progress, Recorder,
};
use crate::harness::sampling::sample_per_step;
use crate::harness::schedule::round_order;
use crate::prep::accept::AcceptModel;
use crate::prep::bytes::prep_bytes;
use crate::prep::inputs::{generate, HostInputs, LengthRange};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{ArmSteps, PrepPlan};
use crate::prep::Shape;
use crate::results::csv::{completed_cells, CellKey, Row, KIND_FLOOR, KIND_PREP};
use crate::runs::sweep_rounds::{floor_cell, FloorRounds, GroupRounds, HARNESS};
use crate::stats::stopping::{RoundsRule, RoundsStop, StoppingRule};
use anyhow::{Context, Result};
use cudarc::driver::CudaGraph;
use indicatif::ProgressBar;
use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The GPU and how it is opened.
    pub gpu: GpuChoice,
    /// Where the measuring thread is pinned once the GPU is open.
    pub cpu: CpuPin,
    pub families: Vec<Family>,
    pub arms: Vec<Arm>,
    pub batch_sizes: Vec<u32>,
    pub block_sizes: Vec<u32>,
    pub layouts: Vec<Layout>,
    /// GPU duration of the stand-in forward after each prep for `step_fwd_us`; 0 skips it.
    pub forward_us: f64,
    pub max_context: u32,
    pub seq_lens: LengthRange,
    /// The within-round rule; its time cap is a cell's per metric over all its rounds.
    pub rule: StoppingRule,
    /// Rounds every group gets (at least [`crate::stats::rounds::MIN_ROUNDS`]).
    pub rounds: usize,
    /// Rounds a group whose intervals stay wide may get.
    pub max_rounds: usize,
    pub steps_per_sample: usize,
    pub seed: u64,
    pub out: PathBuf,
    pub resume: bool,
}

impl SweepConfig {
    /// When a group stops adding rounds: its arms' `step_us` as precise as the within-round
    /// rule asks, and a time cap of its cells' caps together (a cap per cell and metric pass).
    pub fn group_rule(&self) -> RoundsRule {
        let passes = if self.forward_us > 0.0 { 2 } else { 1 };
        RoundsRule {
            min_rounds: self.rounds,
            max_rounds: self.max_rounds,
            step: self.rule.clone(),
            time_cap: self.rule.time_cap * (self.arms.len() * passes) as u32,
        }
    }

    /// The floor's: the same, its items and the harness each a cell of one pass.
    fn floor_rule(&self) -> RoundsRule {
        RoundsRule {
            time_cap: self.rule.time_cap * (FloorItem::ALL.len() + 1) as u32,
            ..self.group_rule()
        }
    }
}

/// The bare empty graph run through the same harness as the arms: its cost over the raw
/// empty-graph floor is the harness's own per-step overhead.
struct GraphSteps<'a>(&'a CudaGraph);

impl StepSource for GraphSteps<'_> {
    fn issue_step(&mut self) -> Result<()> {
        self.0.launch().context("replaying the empty graph")
    }
}

/// The NVTX range of each step of the harness row.
const HARNESS_RANGE: &CStr = c"harness (empty graph)";

/// One (family, layout, batch size, block size) of the grid, its arms' cells measured
/// together in every round.
struct Group {
    family: Family,
    layout: Layout,
    batch_size: u32,
    block: u32,
    cells: Vec<CellId>,
    rounds: GroupRounds,
    /// Its rows, once its rounds have stopped.
    rows: Vec<Row>,
}

pub struct SweepOutcome {
    pub dir: PathBuf,
    pub rows: Vec<Row>,
    pub seconds: f64,
}

pub fn run(config: &SweepConfig) -> Result<SweepOutcome> {
    let started = Instant::now();
    let (csv_path, mut kept) = existing_rows(&config.out, config.resume)?;
    let gpu = config.gpu.open()?;
    // The floor is measured again on every invocation so arms are read against a floor of
    // the same run; older floor rows are replaced.
    kept.retain(|r| r.kind != KIND_FLOOR);
    let mut notes = emulation_notes(
        &config.layouts,
        gpu.info.device_count,
        gpu.info.device_count,
        "one rank's prep ran on one GPU",
    );
    let before_rounds = kept
        .iter()
        .filter(|r| r.kind == KIND_PREP && r.rounds == 0)
        .count();
    if before_rounds > 0 {
        notes.push(format!(
            "resumed: {before_rounds} rows measured without rounds (an older metaprep) were \
             dropped and their groups measured again in rounds"
        ));
    }
    let done = completed_cells(
        &kept
            .iter()
            .filter(|r| r.kind != KIND_PREP || r.rounds > 0)
            .cloned()
            .collect::<Vec<_>>(),
    );
    // Held to the end of the run: dropping it unpins the thread.
    let pinned = pin_current_thread(config.cpu)?;
    notes.push(pinned.note());
    let recorder = Recorder::start(&gpu, &config.out, csv_path, config.resume, notes)?;
    let rounds_file = RoundsFile::open(&config.out, config.resume, &done)?;

    // Counts cell visits (a cell once per round); the length grows as groups get rounds
    // beyond --rounds, so the ETA is to the end of the rounds planned so far.
    let progress = progress(0, "cell rounds");
    let mut groups = grid_groups(config, gpu.info.device_count, &done, &mut kept, &progress);

    let mut floor = Floor::new(&gpu)?;
    let mut forward = if config.forward_us > 0.0 {
        Some(Launch::spin(&gpu, config.forward_us)?)
    } else {
        None
    };
    let per_round = config.rule.per_round(config.rounds);
    let (group_rule, floor_rule) = (config.group_rule(), config.floor_rule());
    let mut floor_rounds = FloorRounds::default();
    let mut floor_stop: Option<RoundsStop> = None;
    let mut floor_rows = Vec::new();
    // Inputs depend on the rank's batch and the block only; generating the largest takes
    // longer than measuring a cell, so each is generated once and kept for every round.
    let mut inputs: HashMap<(u32, u32), HostInputs> = HashMap::new();
    let mut open: Vec<usize> = (0..groups.len()).collect();
    for round in 0..config.max_rounds {
        if open.is_empty() && floor_stop.is_some() {
            break;
        }
        let planned = config.rounds.saturating_sub(round).max(1);
        progress
            .set_length(progress.position() + (open.len() * config.arms.len() * planned) as u64);
        let heading = format!(
            "round {} of {}–{}",
            round + 1,
            config.rounds,
            config.max_rounds
        );
        progress.set_message(format!("{heading} · floor"));
        measure_floor(
            &gpu,
            &mut floor,
            &recorder,
            config,
            &per_round,
            &mut floor_rounds,
        )?;
        let mut visiting = Visiting {
            gpu: &gpu,
            config,
            rule: &per_round,
            forward: &mut forward,
            inputs: &mut inputs,
            recorder: &recorder,
            progress: &progress,
            heading: &heading,
        };
        for visit in round_order(&open, config.arms.len(), config.seed, round) {
            let group = &mut groups[visit.group];
            visiting
                .measure(group, &visit.arms)
                .with_context(|| heading.clone())?;
        }
        floor_stop = floor_stop.or_else(|| floor_rounds.stop(&floor_rule));
        if let Some(stop) = floor_stop {
            floor_rows = floor_rounds.rows(stop, |label| recorder.cell_telemetry(label));
        }
        open = close_stopped(&mut groups, &open, &group_rule, &floor_rounds, &recorder);
        // Rounds first: a run stopped between the two writes then has every kept group's
        // rounds, and a group whose rows are not yet written is measured again on resume.
        rounds_file.write(&round_lines(&floor_rounds, &groups))?;
        recorder.save(&all_rows(&kept, &floor_rows, &groups))?;
    }
    progress.finish_and_clear();
    recorder.finish()?;
    Ok(SweepOutcome {
        dir: config.out.clone(),
        rows: all_rows(&kept, &floor_rows, &groups),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The grid's groups still to measure, in grid order; complete ones a resumed run holds are
/// skipped (and counted as progress), partly complete ones have their rows removed.
fn grid_groups(
    config: &SweepConfig,
    gpus: u32,
    done: &HashSet<CellKey>,
    kept: &mut Vec<Row>,
    progress: &ProgressBar,
) -> Vec<Group> {
    let mut groups = Vec::new();
    for &layout in &config.layouts {
        for &batch_size in &config.batch_sizes {
            for &block in &config.block_sizes {
                for &family in &config.families {
                    let cells = arm_cells(
                        KIND_PREP,
                        family.name(),
                        &config.arms,
                        batch_size,
                        block,
                        layout,
                        gpus,
                    );
                    if needs_measuring(&cells, done, kept, progress) {
                        groups.push(Group {
                            family,
                            layout,
                            batch_size,
                            block,
                            cells,
                            rounds: GroupRounds::new(family, &config.arms),
                            rows: Vec::new(),
                        });
                    }
                }
            }
        }
    }
    groups
}

/// Forms the rows of every `open` group whose rounds stop now, and returns the rest.
fn close_stopped(
    groups: &mut [Group],
    open: &[usize],
    rule: &RoundsRule,
    floor: &FloorRounds,
    recorder: &Recorder,
) -> Vec<usize> {
    let mut still_open = Vec::new();
    for &index in open {
        let group = &mut groups[index];
        match group.rounds.stop(rule) {
            Some(stop) => {
                let telemetry: Vec<_> = group
                    .cells
                    .iter()
                    .map(|c| recorder.cell_telemetry(&c.label()))
                    .collect();
                group.rows = group.rounds.rows(&group.cells, floor, stop, &telemetry);
            }
            None => still_open.push(index),
        }
    }
    still_open
}

/// The run's rows: those kept from an earlier invocation, the floor's once its rounds have
/// stopped, then every stopped group's in grid order.
fn all_rows(kept: &[Row], floor: &[Row], groups: &[Group]) -> Vec<Row> {
    kept.iter()
        .chain(floor)
        .chain(groups.iter().flat_map(|g| &g.rows))
        .cloned()
        .collect()
}

/// Every round's medians so far, the floor's first: what `rounds.csv` holds.
fn round_lines(floor: &FloorRounds, groups: &[Group]) -> Vec<RoundLine> {
    let mut lines = floor.round_lines();
    for group in groups {
        lines.extend(group.rounds.round_lines(&group.cells));
    }
    lines
}

/// One round of the floor: every item, then the empty graph through the arms' harness.
fn measure_floor(
    gpu: &Gpu,
    floor: &mut Floor,
    recorder: &Recorder,
    config: &SweepConfig,
    rule: &StoppingRule,
    rounds: &mut FloorRounds,
) -> Result<()> {
    let started = Instant::now();
    for item in FloorItem::ALL {
        recorder.set_cell(&floor_cell(item.name()).label());
        let sampled = sample_per_step(rule, config.steps_per_sample, |n| floor.batch(item, n))?;
        rounds.push(item, sampled.per_step_us);
    }
    recorder.set_cell(&floor_cell(HARNESS).label());
    let harness = measure(
        gpu,
        &mut GraphSteps(floor.empty_graph()?),
        HARNESS_RANGE,
        rule,
        config.steps_per_sample,
        None,
    )?;
    rounds.push_harness(harness.step.per_step_us);
    rounds.elapsed += started.elapsed();
    Ok(())
}

/// What one visit of a group needs from the run.
struct Visiting<'a, 'g> {
    gpu: &'g Gpu,
    config: &'a SweepConfig,
    /// The within-round rule.
    rule: &'a StoppingRule,
    forward: &'a mut Option<Launch>,
    inputs: &'a mut HashMap<(u32, u32), HostInputs>,
    recorder: &'a Recorder,
    progress: &'a ProgressBar,
    heading: &'a str,
}

impl Visiting<'_, '_> {
    /// One round of `group`: a fresh plan over its inputs, then each arm in `arm_order`
    /// (indices into the run's arms), back to back.
    fn measure(&mut self, group: &mut Group, arm_order: &[usize]) -> Result<()> {
        let (gpu, config) = (self.gpu, self.config);
        let rank_bs = group.layout.rank_batch(group.batch_size);
        let block = group.block;
        let shape = Shape::new(group.family, rank_bs, block, config.max_context)?;
        let inputs = self.inputs.entry((rank_bs, block)).or_insert_with(|| {
            generate(
                &shape,
                config.seed ^ ((rank_bs as u64) << 32 | block as u64),
                config.seq_lens,
                false,
            )
        });
        // The sweep never runs accept, so every step preps these lengths.
        let valid_from: Vec<i32> = (inputs.req_pool_indices.iter())
            .map(|&pool| inputs.swa_valid_from[pool as usize])
            .collect();
        group.rounds.bytes = Some(prep_bytes(&shape, &inputs.seq_lens, &valid_from).total());
        let accept =
            AcceptModel::with_probability(0.7, block, config.seed as u32, shape.max_seq_len());
        let lengths = DeviceLengths::new(gpu, &inputs.seq_lens, rank_bs as usize, accept)?;
        let mut plan = PrepPlan::new(gpu, shape, inputs, &lengths)
            .with_context(|| format!("setting up {} bs {rank_bs} block {block}", group.family))?;
        for &index in arm_order {
            let arm = config.arms[index];
            let label = group.cells[index].label();
            self.progress
                .set_message(format!("{} · {label}", self.heading));
            self.recorder.set_cell(&label);
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
                self.rule,
                config.steps_per_sample,
                self.forward.as_mut(),
            )
            .with_context(|| format!("measuring {label}"))?;
            group.rounds.elapsed += started.elapsed();
            group.rounds.push(index, m);
            self.progress.inc(1);
        }
        Ok(())
    }
}
