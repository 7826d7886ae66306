//! `metaprep sweep`: every arm of every family over batch size x block size x layout, with
//! the floor measured in the same run, NVML telemetry per cell, and atomic, resumable output.
//!
//! **Rounds.** The run is measured in rounds, so that the host's and GPU's drift over the
//! run lands between rounds, where the reported intervals see it (see
//! [`crate::stats::rounds`]). Each round measures the floor (and the host-speed reference)
//! first, then visits every cell group still measuring (the arms of one family, layout, batch
//! size and block size, back to back) in a fresh seeded order ([`crate::harness::schedule`]).
//! Inside a round a cell takes `--min-samples` samples, or fewer if its time cap shared out
//! between `--rounds` rounds runs out ([`StoppingRule::per_round`]). After `--rounds` rounds, a
//! group gets further rounds only while its reported intervals are wide, up to `--max-rounds`
//! or its time cap ([`crate::stats::stopping`]). Then its GPU-paced arms (graph-upload, graph,
//! fused: [`crate::results::pacing::gpu_paced_arm`]) go on alone while their `step_us` or
//! `gpu_prep_us` interval is wider than `--gpu-paced-rel-ci-pct`, up to
//! `--gpu-paced-max-rounds` or the group's time cap; rounds past `--max-rounds` visit only those
//! arms and run no forward (their `step_fwd_us` was within ±0.5% at 12 rounds on the H200).
//! Once every arm has stopped its group's rows are formed ([`crate::runs::sweep_rounds`]) and
//! written. Every round's medians go to `rounds.csv`
//! ([`crate::harness::rounds_file`]).
//!
//! **Processes.** A process's state (where its memory landed, the driver's structures, the
//! CPU's) is one draw for all its rounds: on the H200 host every graph and fused
//! `host_issue_us` of the fourth of four back-to-back sweeps was 50–58% above the first's,
//! with intervals that excluded zero (issue 25). With `--processes N` the rounds are measured
//! by up to N worker processes (`metaprep sweep-worker`, started one after another, each
//! measuring `ceil(--max-rounds / N)` rounds of the groups still open and handing back each
//! round as typed [`RoundResult`]s, [`crate::runs::sweep_workers`]), so the between-process
//! effect lands between rounds, in the intervals. This process then holds the NVML sampler
//! and the files and measures nothing.
//!
//! **Resume.** A group's rows are written when its rounds stop, all at once, so the CSV only
//! ever holds whole groups, each from one invocation's rounds; `--resume` keeps those and
//! measures every other group from its first round. Rows written without rounds (by a
//! metaprep before rounds) are not kept: their groups are measured again.

use crate::axes::floor_item::HOST_REFERENCE;
use crate::axes::layout::Layout;
use crate::axes::Arm;
use crate::axes::Family;
use crate::axes::FloorItem;
use crate::gpu::nvtx;
use crate::gpu::StepSource;
use crate::gpu::{Gpu, GpuChoice, Launch};
use crate::harness::floor::Floor;
use crate::harness::host_reference::HostReference;
use crate::harness::nvml::CellTelemetry;
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
use crate::results::env::EnvRecord;
use crate::results::pacing::gpu_paced_arm;
use crate::runs::sweep_rounds::{
    floor_cell, FloorRound, FloorRounds, GroupRound, GroupRounds, RoundResult, HARNESS,
};
use crate::stats::stopping::{RoundsRule, RoundsStop, StoppingRule};
use anyhow::{Context, Result};
use cudarc::driver::CudaGraph;
use indicatif::ProgressBar;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, OsString};
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
    /// Rounds a GPU-paced arm whose intervals stay wider than `gpu_paced_rel_ci` may get
    /// (at least `max_rounds`; rounds past that visit only these arms).
    pub gpu_paced_max_rounds: usize,
    /// The precision GPU-paced arms' `step_us` and `gpu_prep_us` are taken to (0.007 = ±0.7%).
    pub gpu_paced_rel_ci: f64,
    pub steps_per_sample: usize,
    pub seed: u64,
    pub out: PathBuf,
    pub resume: bool,
    /// Worker processes the rounds are shared out over; 1 measures every round here.
    pub processes: usize,
    /// The command line after `sweep`, handed on to worker processes.
    pub args: Vec<OsString>,
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
            gpu_paced_max_rounds: self.gpu_paced_max_rounds,
            gpu_paced_rel_ci: self.gpu_paced_rel_ci,
        }
    }

    /// The last round any cell may get.
    pub fn last_round(&self) -> usize {
        self.max_rounds.max(self.gpu_paced_max_rounds)
    }

    /// Whether round `round` (from 0) is past `--max-rounds`: it visits only the GPU-paced arms
    /// and runs no forward.
    pub fn gpu_paced_round(&self, round: usize) -> bool {
        round >= self.max_rounds
    }

    /// The floor's: the same, its items, the harness and the host reference each a cell of one
    /// pass.
    fn floor_rule(&self) -> RoundsRule {
        RoundsRule {
            time_cap: self.rule.time_cap * (FloorItem::ALL.len() + 2) as u32,
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
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Its place in the whole grid (what a worker is told to measure).
    pub grid_index: usize,
    family: Family,
    layout: Layout,
    batch_size: u32,
    block: u32,
    cells: Vec<CellId>,
}

/// A group being measured: its rounds so far, and its rows once they have stopped.
struct Group {
    spec: GroupSpec,
    rounds: GroupRounds,
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
    let in_workers = config.processes > 1;
    // Held to the end of the run: dropping it unpins the thread. Workers pin their own
    // measuring threads; this one then only reads what they send.
    let pinned = match in_workers {
        true => None,
        false => Some(pin_current_thread(config.cpu)?),
    };
    match &pinned {
        Some(pinned) => notes.push(pinned.note()),
        None => notes.push(format!(
            "rounds measured in worker processes, one after another: the first {} over up to \
             {} workers, the rest up to {} over up to {} more, the GPU-paced arms' own up to {} \
             over up to {} more (each worker's own notes follow)",
            config.rounds,
            config.processes,
            config.max_rounds,
            config.processes,
            config.last_round(),
            config.processes
        )),
    }
    let recorder = Recorder::start(
        &gpu,
        &config.out,
        csv_path,
        config.resume,
        notes,
        config.settings(),
    )?;
    let rounds_file = RoundsFile::open(&config.out, config.resume, &done)?;

    // Counts cell visits (a cell once per round); the length grows as groups get rounds
    // beyond --rounds, so the ETA is to the end of the rounds planned so far.
    let progress = progress(0, "cell rounds");
    let groups = grid_groups(config, gpu.info.device_count, &done, &mut kept, &progress);
    let mut state = RunState::new(config, groups);
    let sink = Sink {
        recorder: &recorder,
        rounds_file: &rounds_file,
        kept: &kept,
        progress: &progress,
    };
    let worker_notes = if in_workers {
        crate::runs::sweep_workers::run(config, &mut state, &sink)?
    } else {
        let mut here = Measurer::new(&gpu, config)?;
        while let Some(round) = state.next_round() {
            sink.plan(&state, round, 1);
            let specs = state.open_specs();
            let result = here.round(round, &specs, &mut |label: &str, counts: bool| {
                sink.mark(label, counts);
                Ok(())
            })?;
            state.absorb(result, 0, &sink);
            sink.save(&state)?;
        }
        Vec::new()
    };
    progress.finish_and_clear();
    recorder.finish()?;
    if in_workers {
        let mut env = EnvRecord::read(&config.out)?;
        env.notes.extend(worker_notes);
        env.notes.extend(state.host_speed_by_process());
        env.write(&config.out)?;
    }
    Ok(SweepOutcome {
        dir: config.out.clone(),
        rows: state.rows(&kept),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Where a round's results go: the recorder (NVML's cell tags and the files), `rounds.csv`,
/// and the progress bar.
pub(crate) struct Sink<'r> {
    recorder: &'r Recorder,
    rounds_file: &'r RoundsFile,
    /// Rows an earlier invocation completed.
    kept: &'r [Row],
    progress: &'r ProgressBar,
}

impl Sink<'_> {
    /// A cell (of the floor, or a prep cell that `counts` as a cell visit) begins.
    pub(crate) fn mark(&self, label: &str, counts: bool) {
        self.recorder.set_cell(label);
        self.progress.set_message(label.to_string());
        if counts {
            self.progress.inc(1);
        }
    }

    /// Rounds `round..round + rounds` (from 0) are about to be measured: the bar's length
    /// grows to the rounds planned so far (those, or the rest of `--rounds`), and its heading
    /// names them against the run's range of rounds.
    pub(crate) fn plan(&self, state: &RunState, round: usize, rounds: usize) {
        let planned = state.min_rounds.saturating_sub(round).max(rounds);
        let arms = match round >= state.max_rounds {
            true => state.gpu_paced_arms,
            false => state.arms,
        };
        let visits = state.open.len() * arms * planned;
        self.progress
            .set_length(self.progress.position() + visits as u64);
        let last = round + rounds;
        let (min, max) = (state.min_rounds, state.max_rounds);
        let of = match round >= max {
            true => format!("{max}–{} (GPU-paced arms)", state.last_round),
            false => format!("{min}–{max}"),
        };
        self.progress.set_prefix(match rounds {
            1 => format!("round {last} of {of}: "),
            _ => format!("rounds {}–{last} of {of}: ", round + 1),
        });
    }

    /// Rounds first: a run stopped between the two writes then has every kept group's rounds,
    /// and a group whose rows are not yet written is measured again on resume.
    pub(crate) fn save(&self, state: &RunState) -> Result<()> {
        self.rounds_file.write(&state.round_lines())?;
        self.recorder.save(&state.rows(self.kept))
    }
}

/// The run's measurements so far: every group's rounds and the floor's, which groups are still
/// open, and which process measured each round.
pub(crate) struct RunState {
    groups: Vec<Group>,
    /// Indices into `groups` of those still measuring, in grid order.
    open: Vec<usize>,
    floor: FloorRounds,
    floor_stop: Option<RoundsStop>,
    floor_rows: Vec<Row>,
    group_rule: RoundsRule,
    floor_rule: RoundsRule,
    /// The process of each round absorbed (0: this one; workers from 1).
    processes: Vec<u32>,
    min_rounds: usize,
    max_rounds: usize,
    /// The last round any cell may get (GPU-paced arms past `max_rounds`).
    last_round: usize,
    arms: usize,
    gpu_paced_arms: usize,
}

impl RunState {
    fn new(config: &SweepConfig, groups: Vec<Group>) -> Self {
        RunState {
            open: (0..groups.len()).collect(),
            groups,
            floor: FloorRounds::default(),
            floor_stop: None,
            floor_rows: Vec::new(),
            group_rule: config.group_rule(),
            floor_rule: config.floor_rule(),
            processes: Vec::new(),
            min_rounds: config.rounds,
            max_rounds: config.max_rounds,
            last_round: config.last_round(),
            arms: config.arms.len(),
            gpu_paced_arms: config.arms.iter().filter(|&&a| gpu_paced_arm(a)).count(),
        }
    }

    /// The next round to measure (from 0), or `None` once every group and the floor have
    /// stopped or the rounds run out.
    pub(crate) fn next_round(&self) -> Option<usize> {
        let round = self.processes.len();
        let finished = self.open.is_empty() && self.floor_stop.is_some();
        (round < self.last_round && !finished).then_some(round)
    }

    /// The groups still measuring, in grid order.
    pub(crate) fn open_specs(&self) -> Vec<GroupSpec> {
        self.open
            .iter()
            .map(|&i| self.groups[i].spec.clone())
            .collect()
    }

    /// Keeps a round measured by `process`, then forms the rows of the floor and of each group
    /// whose rounds stop now. A visit of a group that stopped already (a worker measures every
    /// round it was given), or of an arm that did, is left out.
    pub(crate) fn absorb(&mut self, result: RoundResult, process: u32, sink: &Sink) {
        let telemetry = |label: &str| sink.recorder.cell_telemetry(label);
        self.floor.push_round(result.floor);
        let by_grid: HashMap<usize, usize> = self
            .open
            .iter()
            .map(|&i| (self.groups[i].spec.grid_index, i))
            .collect();
        for visit in result.groups {
            if let Some(&i) = by_grid.get(&visit.grid_index) {
                self.groups[i].rounds.push_visit(visit);
            }
        }
        self.processes.push(process);
        // The floor is measured every round (the groups' rows pair with its rounds); once its
        // own rounds may stop, its rows are formed again each round from all of them.
        self.floor_stop = self
            .floor_stop
            .or_else(|| self.floor.stop(&self.floor_rule));
        if let Some(stop) = self.floor_stop {
            self.floor_rows = self.floor.rows(stop, telemetry);
        }
        self.open = close_stopped(
            &mut self.groups,
            &self.open,
            &self.group_rule,
            &self.floor,
            &telemetry,
        );
    }

    /// The run's rows: those kept from an earlier invocation, the floor's once its rounds have
    /// stopped, then every stopped group's in grid order.
    fn rows(&self, kept: &[Row]) -> Vec<Row> {
        kept.iter()
            .chain(&self.floor_rows)
            .chain(self.groups.iter().flat_map(|g| &g.rows))
            .cloned()
            .collect()
    }

    /// Every round's medians so far, the floor's first: what `rounds.csv` holds.
    fn round_lines(&self) -> Vec<RoundLine> {
        let mut lines = self.floor.round_lines(&self.processes);
        for group in &self.groups {
            lines.extend(group.rounds.round_lines(&group.spec.cells, &self.processes));
        }
        lines
    }

    /// env.json's note of each worker's host speed: the median of its rounds' host-reference
    /// medians against the median worker's, naming a worker 1.25× slower or faster.
    fn host_speed_by_process(&self) -> Vec<String> {
        let reference = self.floor.host_reference();
        let mut by_process: std::collections::BTreeMap<u32, Vec<Vec<f64>>> = Default::default();
        for (round, &process) in reference.iter().zip(&self.processes) {
            by_process.entry(process).or_default().push(round.clone());
        }
        let medians: Vec<(u32, f64)> = by_process
            .into_iter()
            .filter_map(|(p, rounds)| {
                let m = crate::stats::summary::summarize(&crate::stats::rounds::round_medians(
                    &rounds,
                ))?;
                Some((p, m.median))
            })
            .collect();
        let Some(typical) =
            crate::stats::summary::summarize(&medians.iter().map(|(_, m)| *m).collect::<Vec<_>>())
                .map(|s| s.median)
        else {
            return Vec::new();
        };
        let each: Vec<String> = medians
            .iter()
            .map(|&(p, m)| {
                let ratio = m / typical;
                let named = if ratio >= SLOW_PROCESS {
                    format!(" (its host ran {ratio:.2}× as slow)")
                } else if ratio <= 1.0 / SLOW_PROCESS {
                    format!(" (its host ran {:.2}× as fast)", 1.0 / ratio)
                } else {
                    String::new()
                };
                format!("worker {p} {m:.3} µs, {ratio:.2}× the median{named}")
            })
            .collect();
        vec![format!(
            "host-speed reference ({HOST_REFERENCE}, median µs a unit of its CPU work) by \
             worker process: {}; each round's in rounds.csv with its process",
            each.join("; ")
        )]
    }
}

/// A worker whose host-speed reference is this many times the median worker's (or its
/// inverse) is named slow (fast) in env.json.
const SLOW_PROCESS: f64 = 1.25;

/// The grid's groups still to measure, in grid order; complete ones a resumed run holds are
/// skipped (and counted as progress), partly complete ones have their rows removed.
fn grid_groups(
    config: &SweepConfig,
    gpus: u32,
    done: &HashSet<CellKey>,
    kept: &mut Vec<Row>,
    progress: &ProgressBar,
) -> Vec<Group> {
    grid(config, gpus)
        .into_iter()
        .filter(|spec| needs_measuring(&spec.cells, done, kept, progress))
        .map(|spec| Group {
            rounds: GroupRounds::new(spec.family, &config.arms),
            spec,
            rows: Vec::new(),
        })
        .collect()
}

/// Every group of the grid, in grid order: layout, batch size, block size, family.
pub fn grid(config: &SweepConfig, gpus: u32) -> Vec<GroupSpec> {
    let mut specs = Vec::new();
    for &layout in &config.layouts {
        for &batch_size in &config.batch_sizes {
            for &block in &config.block_sizes {
                for &family in &config.families {
                    specs.push(GroupSpec {
                        grid_index: specs.len(),
                        family,
                        layout,
                        batch_size,
                        block,
                        cells: arm_cells(
                            KIND_PREP,
                            family.name(),
                            &config.arms,
                            batch_size,
                            block,
                            layout,
                            gpus,
                        ),
                    });
                }
            }
        }
    }
    specs
}

/// Forms the rows of every `open` group whose arms' rounds have all stopped now, and returns
/// the rest.
fn close_stopped(
    groups: &mut [Group],
    open: &[usize],
    rule: &RoundsRule,
    floor: &FloorRounds,
    telemetry: &dyn Fn(&str) -> Option<CellTelemetry>,
) -> Vec<usize> {
    let mut still_open = Vec::new();
    for &index in open {
        let group = &mut groups[index];
        let done = group.rounds.update(rule);
        match group.rounds.group_stop().filter(|_| done) {
            Some(stop) => {
                let cells = &group.spec.cells;
                let telemetry: Vec<_> = cells.iter().map(|c| telemetry(&c.label())).collect();
                group.rows = group.rounds.rows(cells, floor, stop, &telemetry);
            }
            None => still_open.push(index),
        }
    }
    still_open
}

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
    inputs: HashMap<(u32, u32), HostInputs>,
    /// The within-round rule.
    rule: StoppingRule,
}

impl<'g> Measurer<'g> {
    pub fn new(gpu: &'g Gpu, config: &'g SweepConfig) -> Result<Self> {
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
            inputs: HashMap::new(),
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
            steps,
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
        let bytes = prep_bytes(&shape, &inputs.seq_lens, &valid_from).total();
        let accept =
            AcceptModel::with_probability(0.7, block, config.seed as u32, shape.max_seq_len());
        let lengths = DeviceLengths::new(gpu, &inputs.seq_lens, rank_bs as usize, accept)?;
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
                config.steps_per_sample,
                self.forward.as_mut().filter(|_| forward),
            )
            .with_context(|| format!("measuring {label}"))?;
            visit.seconds += started.elapsed().as_secs_f64();
            visit.arms.push((index, m.into()));
        }
        Ok(visit)
    }
}
