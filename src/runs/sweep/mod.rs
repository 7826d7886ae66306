//! `metaprep sweep`: every arm of every family over batch size x block size x layout, with
//! the floor measured in the same run, NVML telemetry per cell, and atomic, resumable output.
//!
//! **Rounds.** The run is measured in rounds so that the host's and GPU's drift lands between
//! rounds, where the reported intervals see it ([`crate::stats::rounds`], docs/rounds.md).
//! Each round measures the floor, then every open cell group (the arms of one family, layout,
//! batch size and block size, back to back) in a seeded order ([`crate::harness::schedule`]).
//! After `--rounds` rounds a group goes on only while its intervals are wide
//! ([`crate::stats::stopping`]); then its GPU-paced arms
//! ([`crate::results::pacing::gpu_paced_arm`]) go on alone, with no forward, until
//! `--gpu-paced-precision-pct` or `--gpu-paced-max-rounds`. A group's rows are formed
//! ([`crate::runs::sweep::rounds`]) once every arm has stopped; every round's medians go to
//! `rounds.csv` ([`crate::harness::rounds_file`]).
//!
//! **Processes.** A process's state (where its memory landed, the driver's, the CPU's) is one
//! draw for all its rounds, so `--processes N` shares the rounds out over worker processes
//! ([`crate::runs::sweep::workers`]) and the between-process effect lands in the intervals.
//! This process then holds the NVML sampler and the files and measures nothing.
//!
//! **Resume.** A group's rows are written all at once when its rounds stop, so the CSV only
//! holds whole groups; `--resume` keeps those and measures every other group from its first
//! round (rows written without rounds are measured again).
//!
//! The grid of groups is in `grid`, the state between rounds in `state`, and what measures a
//! round on the GPU in `measurer`.

mod grid;
mod measurer;
pub mod rounds;
mod state;
pub mod workers;

pub use grid::grid;
pub(crate) use measurer::{generate_inputs, group_lengths, group_shape};
pub use measurer::{Mark, Measurer};
pub(crate) use state::{RunState, Sink};

use crate::axes::layout::Layout;
use crate::axes::Arm;
use crate::axes::Family;
use crate::axes::FloorItem;
use crate::gpu::GpuChoice;
use crate::harness::pin::CpuPin;
use crate::harness::rounds_file::RoundsFile;
use crate::harness::rows::CellId;
use crate::harness::run_output::{emulation_notes, progress, Opening};
use crate::prep::inputs::LengthRange;
use crate::results::config_file::ConfigFile;
use crate::results::csv::{completed_cells, Row, KIND_FLOOR, KIND_PREP};
use crate::results::env::EnvRecord;
use crate::stats::stopping::{RoundsRule, StoppingRule};
use anyhow::Result;
use grid::grid_groups;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// What a sweep hands its worker processes (`sweep-worker --settings`).
impl ConfigFile for SweepConfig {
    const COMMAND: &'static str = "sweep";
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

    /// env.json's note on how the rounds were shared out over worker processes.
    fn workers_note(&self) -> String {
        let (n, last) = (self.processes, self.last_round());
        format!(
            "rounds measured in worker processes, one after another: the first {} over up to \
             {n} workers, the rest up to {} over up to {n} more, the GPU-paced arms' own up to \
             {last} over up to {n} more (each worker's own notes follow)",
            self.rounds, self.max_rounds
        )
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

/// One (family, layout, batch size, block size) of the grid, its arms' cells measured
/// together in every round.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Its place in the whole grid (what a worker is told to measure).
    pub grid_index: usize,
    pub family: Family,
    pub layout: Layout,
    pub batch_size: u32,
    pub block: u32,
    cells: Vec<CellId>,
}

pub struct SweepOutcome {
    pub dir: PathBuf,
    pub rows: Vec<Row>,
    pub seconds: f64,
}

pub fn run(config: &SweepConfig) -> Result<SweepOutcome> {
    let started = Instant::now();
    let (mut opening, mut kept) = Opening::new(&config.out, config.resume)?;
    let gpu = config.gpu.open()?;
    // The floor is measured again on every invocation so arms are read against a floor of
    // the same run; older floor rows are replaced.
    kept.retain(|r| r.kind != KIND_FLOOR);
    opening.notes.extend(emulation_notes(
        &config.layouts,
        gpu.info.device_count,
        gpu.info.device_count,
        "one rank's prep ran on one GPU",
    ));
    let before_rounds = kept
        .iter()
        .filter(|r| r.kind == KIND_PREP && r.rounds == 0)
        .count();
    if before_rounds > 0 {
        opening.notes.push(format!(
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
    // Workers pin their own measuring threads; this one then only reads what they send.
    match in_workers {
        true => opening.notes.push(config.workers_note()),
        false => opening.pin(config.cpu)?,
    }
    let recorder = opening.start(&gpu, config.settings())?;
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
        crate::runs::sweep::workers::run(config, &mut state, &sink)?
    } else {
        let mut here = Measurer::new(&gpu, config, &state.open_specs())?;
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
