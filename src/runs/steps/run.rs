//! `metaprep steps`: the run loop. It opens the GPU (and the rank's world), plans the cells
//! the memory holds, and for each (layout, batch, block) builds the cell once and measures
//! every host scale's arms: rounds of clean passes until the stopping rule (agreed across
//! ranks), then one timeline pass per arm, into rows saved after every cell.

use super::cell::StepCell;
use super::config::{plan, Cell, StepsConfig};
use super::make::{CellHost, CellMaker, IdleCosts, ReadyArm};
use super::notes::{model_notes, rank_notes};
use super::rows::{last_round_step_us, step_rows, ArmRounds};
use crate::axes::Arm;
use crate::axes::ReadPath;
use crate::gpu::Gpu;
use crate::harness::rows::CellId;
use crate::harness::run_output::{arm_cells, needs_measuring, progress, Opening, Recorder};
use crate::harness::timer::{ProgramItems, TimelineTimer, TimerSource};
use crate::model::forward::StreamSource;
use crate::model::host_profile::Item;
use crate::model::memory::{Deployment, GpuMemory};
use crate::model::trace::TraceBuilder;
use crate::results::csv::{completed_cells, host_scale_column, Row, KIND_STEP};
use crate::runs::rank_world::RankWorld;
use anyhow::Result;
use std::time::Instant;

pub struct StepsOutcome {
    pub rows: Vec<Row>,
    pub seconds: f64,
}

pub fn run(config: &StepsConfig) -> Result<StepsOutcome> {
    let started = Instant::now();
    config.host.require_read_costs(&config.arms)?;
    let read_paths: Vec<ReadPath> = config.arms.iter().filter_map(|a| a.read_path()).collect();
    let (mut opening, mut rows) = Opening::new(&config.out, config.resume)?;
    let (gpu, world, (deployment, trace_cell)) = open(config)?;
    let ranks = world.size() as u32;
    let done = completed_cells(&rows);
    opening
        .notes
        .extend(rank_notes(config, &deployment, &world, &gpu));
    opening.callouts.extend(deployment.replanned.clone());
    opening.pin(config.cpu)?;
    // Each cell gets its own timer: an EAGLE step's items depend on the block size.
    let (timers, timer_line) = TimerSource::open(config.timer, config.cupti_lib.as_deref())?;
    opening
        .notes
        .extend(model_notes(config, &deployment, &timer_line)?);
    let recorder = opening.start(&gpu, config.settings())?;
    let stream_source = StreamSource::new(&gpu, 1 << 30)?;
    let maker = CellMaker {
        gpu: &gpu,
        config,
        world: &world,
        stream_source: &stream_source,
    };
    let total_cells = config.host_scales.len()
        * deployment.cells.iter().map(|(_, b)| b.len()).sum::<usize>()
        * config.block_sizes.len()
        * config.arms.len();
    let progress = progress(total_cells, "cells");
    let measuring = Measuring {
        config,
        gpu: &gpu,
        world: &world,
        recorder: &recorder,
        progress: &progress,
        trace_cell,
    };
    for &(layout, ref batch_sizes) in &deployment.cells {
        for &bs in batch_sizes {
            let rank_bs = layout.rank_batch(bs);
            for &block in &config.block_sizes {
                // One group per (layout, batch, block): every host scale's cells, measured whole.
                let groups = scale_groups(config, (layout, bs, block), ranks);
                let all: Vec<CellId> = groups.iter().flat_map(|(_, c)| c.clone()).collect();
                if !needs_measuring(&all, &done, &mut rows, &progress) {
                    continue;
                }
                // Ranks begin each cell together.
                world.barrier(&gpu)?;
                let (shapes, inputs, lengths) = maker.inputs(rank_bs, block)?;
                let mut cell = maker.cell((layout, rank_bs, block), shapes, &inputs, &lengths)?;
                let mut timer = timers.timer(
                    &gpu,
                    ProgramItems {
                        gpu: cell.items.iter().map(Item::is_gpu).collect(),
                    },
                )?;
                let idle = cell.idle_host_costs(&read_paths)?;
                for (scale, cells) in &groups {
                    let group = ScaleCells {
                        at: (layout, bs, block),
                        scale: *scale,
                        cells,
                        labels: cells.iter().map(CellId::label).collect(),
                        traced: *scale == config.host_scales[0],
                    };
                    measuring.scale(&mut cell, timer.as_mut(), &group, idle, &mut rows)?;
                }
                recorder.save(&rows)?;
            }
        }
    }
    progress.finish_and_clear();
    recorder.finish()?;
    Ok(StepsOutcome {
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The GPU opened, the rank's world joined (alone: a world of one), and the cells planned
/// with the cell `--trace` writes. A planned memory (`--gpu-memory-gib`) is checked before
/// the GPU opens, the device's once it is open: either way before any measurement.
fn open(config: &StepsConfig) -> Result<(Gpu, RankWorld, (Deployment, Option<Cell>))> {
    let context = config.context();
    let planned = config
        .gpu_memory
        .map(|memory| plan(config, context, memory))
        .transpose()?;
    let gpu = config.gpu.open()?;
    let world = match &config.rank {
        Some(role) => RankWorld::join(role, &gpu)?,
        None => RankWorld::alone(),
    };
    let planned = match planned {
        Some(p) => p,
        None => plan(config, context, GpuMemory::device(gpu.info.memory_bytes))?,
    };
    Ok((gpu, world, planned))
}

/// Every host scale's cells of (layout, batch, block), one per arm, with the scale in its
/// own column.
fn scale_groups(
    config: &StepsConfig,
    (layout, bs, block): Cell,
    ranks: u32,
) -> Vec<(f64, Vec<CellId>)> {
    config
        .host_scales
        .iter()
        .map(|&scale| {
            let family = config.drafter.step_family();
            let cells = arm_cells(KIND_STEP, family, &config.arms, bs, block, layout, ranks)
                .into_iter()
                .map(|mut c| {
                    c.key.host_scale = host_scale_column(scale);
                    c
                })
                .collect();
            (scale, cells)
        })
        .collect()
}

/// One host scale's cells of a (layout, batch, block): what they are called, and whether
/// their timelines may be traced (the first scale's alone).
struct ScaleCells<'c> {
    at: Cell,
    scale: f64,
    cells: &'c [CellId],
    labels: Vec<String>,
    traced: bool,
}

/// The rounds of one host scale's arms: each arm's clean passes, why they stopped, and the
/// slowest rank's mean step time of the last round (this rank's alone).
struct Rounds {
    measured: Vec<ArmRounds>,
    stop: &'static str,
    step_us: Option<f64>,
}

/// What measuring a cell needs of the run: its settings, GPU, world, recorder and progress,
/// and the cell `--trace` writes.
struct Measuring<'a> {
    config: &'a StepsConfig,
    gpu: &'a Gpu,
    world: &'a RankWorld,
    recorder: &'a Recorder,
    progress: &'a indicatif::ProgressBar,
    trace_cell: Option<Cell>,
}

impl Measuring<'_> {
    /// Measures `group` on `cell` at its host scale: every arm made ready once, rounds of
    /// clean passes until they stop, then each arm's timeline pass; its rows onto `rows`.
    fn scale(
        &self,
        cell: &mut StepCell,
        timer: &mut dyn TimelineTimer,
        group: &ScaleCells,
        idle: IdleCosts,
        rows: &mut Vec<Row>,
    ) -> Result<()> {
        let config = self.config;
        let ((layout, bs, block), scale) = (group.at, group.scale);
        let rank_bs = layout.rank_batch(bs);
        self.progress
            .set_message(format!("{layout} bs {bs} block {block} x{scale}"));
        let host = CellHost {
            config,
            rank: self.world.rank(),
            block,
            rank_bs,
            scale,
            idle,
        };
        let mut ready = host.ready_arms(cell, &group.labels)?;
        let batch_scale = bs as f64 / rank_bs as f64;
        let rounds = self.rounds(cell, &mut ready, &group.labels, batch_scale)?;
        self.timelines(cell, timer, &mut ready, group, &rounds, rows)?;
        self.progress.inc(config.arms.len() as u64);
        if self.progress.is_hidden() {
            // No terminal (a log file): the same progress, one line per cell.
            eprintln!(
                "{}/{} cells in {:.0} s, ETA {:.0} s ({layout} bs {bs} block {block} x{scale}: {})",
                self.progress.position(),
                self.progress.length().unwrap_or(0),
                self.progress.elapsed().as_secs_f64(),
                self.progress.eta().as_secs_f64(),
                rounds.stop
            );
        }
        Ok(())
    }

    /// Rounds of every arm's clean pass, the arms rotated each round, until the stopping
    /// rule (agreed across ranks) ends them.
    fn rounds(
        &self,
        cell: &mut StepCell,
        ready: &mut [ReadyArm],
        labels: &[String],
        batch_scale: f64,
    ) -> Result<Rounds> {
        let config = self.config;
        let mut measured: Vec<ArmRounds> =
            config.arms.iter().map(|_| ArmRounds::default()).collect();
        let cell_start = Instant::now();
        // The slowest rank's mean step time of the last round (this rank's alone).
        let mut step_us = None;
        let stop = loop {
            let round = measured[0].step_us.len();
            let (warmup, steps) =
                config
                    .rounds
                    .pass_length(ready.len(), step_us, config.warmup_steps);
            // Rotated each round, so no arm always runs first after another.
            let arms = ready.len();
            for i in (0..arms).map(|i| (i + round) % arms) {
                self.recorder.set_cell(&labels[i]);
                let ReadyArm {
                    program,
                    prepared,
                    own,
                } = &mut ready[i];
                let clean = cell.with_host(own.as_mut(), |cell| {
                    cell.clean_pass(program, prepared, warmup + steps)
                })?;
                measured[i].push(&clean, warmup, batch_scale)?;
            }
            let step_times: Vec<&[Vec<f64>]> =
                measured.iter().map(|m| m.step_us.as_slice()).collect();
            let here =
                config
                    .rounds
                    .check(&config.arms, &step_times, round + 1, cell_start.elapsed());
            let agreed = self
                .world
                .agree_round(self.gpu, here, last_round_step_us(&measured))?;
            step_us = agreed.1;
            if let Some(why) = agreed.0 {
                break why.as_str();
            }
        };
        Ok(Rounds {
            measured,
            stop,
            step_us,
        })
    }

    /// Each arm's timeline pass (traced for the `--trace` cell), then the arm's rows from
    /// its rounds and its timeline.
    fn timelines(
        &self,
        cell: &mut StepCell,
        timer: &mut dyn TimelineTimer,
        ready: &mut [ReadyArm],
        group: &ScaleCells,
        rounds: &Rounds,
        rows: &mut Vec<Row>,
    ) -> Result<()> {
        let config = self.config;
        let ((layout, bs, block), scale) = (group.at, group.scale);
        let (timeline_steps, timeline_cap) = self.world.timeline_length(
            self.gpu,
            config.timeline_steps,
            config.timeline_cap,
            rounds.step_us,
        )?;
        let measured = &rounds.measured;
        let eager_sync = config.arms.iter().position(|&a| a == Arm::EagerSync);
        for (i, ((&arm, id), ready)) in config.arms.iter().zip(group.cells).zip(ready).enumerate() {
            self.recorder.set_cell(&group.labels[i]);
            let request = config
                .trace
                .as_ref()
                .filter(|_| self.trace_cell == Some(group.at))
                .filter(|_| group.traced);
            let mut trace = request.map(|_| TraceBuilder::new());
            if let Some(t) = trace.as_mut() {
                t.set_arm(arm.name());
                t.set_title(&format!(
                    "{arm}: {layout} bs {bs} block {block}, host profile `{}` x{scale}",
                    config.host.name
                ));
            }
            // Ranks start each timeline together, so their traces line up.
            self.world.barrier(self.gpu)?;
            let ReadyArm {
                program,
                prepared,
                own,
            } = ready;
            let timeline = cell.with_host(own.as_mut(), |cell| {
                cell.timeline_pass(
                    program,
                    prepared,
                    timer,
                    timeline_steps,
                    timeline_cap,
                    trace.as_mut(),
                )
            })?;
            if let (Some(t), Some(request)) = (trace, request) {
                t.write(&request.path_for(arm))?;
            }
            let against_sync = eager_sync.filter(|&s| s != i).map(|s| &measured[s]);
            let telemetry = self.recorder.cell_telemetry(&group.labels[i]);
            rows.extend(step_rows(
                id,
                arm,
                &measured[i],
                rounds.stop,
                against_sync,
                &timeline,
                telemetry.as_ref(),
            ));
        }
        Ok(())
    }
}
