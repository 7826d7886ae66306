//! `metaprep sweep`: every arm of every family over batch size x block size x layout, with
//! the floor measured in the same run, NVML telemetry per cell, a stopping rule on the
//! median's confidence interval, and atomic, resumable output.

use crate::gpu::Gpu;
use crate::measure::floor::{Floor, FloorItem};
use crate::measure::pin::{pin_current_thread, pin_note, CpuPin};
use crate::measure::prep_cell::{measure, PrepMeasurement, StepSource};
use crate::measure::rows::CellId;
use crate::measure::run_output::{
    arm_cells, emulation_notes, existing_rows, needs_measuring, progress, Recorder,
};
use crate::measure::sampling::sample_per_step;
use crate::measure::stats::{diff_of_medians, ratio_of_medians};
use crate::measure::stopping::StoppingRule;
use crate::prep::accept::AcceptModel;
use crate::prep::inputs::{generate, HostInputs, LengthRange};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{ArmSteps, PrepPlan};
use crate::prep::{Arm, Family, Shape};
use crate::report::csv::{completed_cells, Row, KIND_FLOOR, KIND_PREP};
use crate::step::forward;
use crate::step::layout::Layout;
use anyhow::{Context, Result};
use cudarc::driver::CudaGraph;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub device: usize,
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
    pub rule: StoppingRule,
    pub steps_per_sample: usize,
    pub seed: u64,
    pub out: PathBuf,
    pub resume: bool,
}

/// The bare empty graph run through the same harness as the arms: its cost over the raw
/// empty-graph floor is the harness's own per-step overhead.
struct GraphSteps<'a>(&'a CudaGraph);

impl StepSource for GraphSteps<'_> {
    fn issue_step(&mut self) -> Result<()> {
        self.0.launch().context("replaying the empty graph")
    }
}

fn floor_cell(item: &str) -> CellId {
    CellId {
        kind: KIND_FLOOR,
        family: "floor".into(),
        arm: item.into(),
        batch_size: 1,
        block_size: 1,
        layout: "tp1".into(),
        emulated: false,
    }
}

pub struct SweepOutcome {
    pub dir: PathBuf,
    pub rows: Vec<Row>,
    pub seconds: f64,
}

pub fn run(config: &SweepConfig) -> Result<SweepOutcome> {
    let started = Instant::now();
    let (csv_path, mut rows) = existing_rows(&config.out, config.resume)?;
    let gpu = Gpu::open(config.device)?;
    // The floor is measured again on every invocation so arms are read against a floor of
    // the same run; older floor rows are replaced.
    rows.retain(|r| r.kind != KIND_FLOOR);
    let done = completed_cells(&rows);
    let mut notes = emulation_notes(
        &config.layouts,
        gpu.info.device_count,
        "one rank's prep ran on one GPU",
    );
    notes.push(pin_note(pin_current_thread(config.cpu)?));
    let recorder = Recorder::start(&gpu, &config.out, csv_path, config.resume, notes)?;

    let mut floor = Floor::new(&gpu)?;
    let mut floor_samples: HashMap<&str, Vec<f64>> = HashMap::new();
    for item in FloorItem::ALL {
        let cell = floor_cell(item.name());
        recorder.set_cell(&cell.label());
        let sampled = sample_per_step(&config.rule, config.steps_per_sample, |n| {
            floor.batch(item, n)
        })?;
        let telemetry = recorder.cell_telemetry(&cell.label());
        rows.extend(cell.summary_row(
            "step_us",
            "us",
            &sampled.per_step_us,
            sampled.stop.as_str(),
            telemetry.as_ref(),
        ));
        floor_samples.insert(item.name(), sampled.per_step_us);
    }
    let harness = measure(
        &gpu,
        &mut GraphSteps(floor.empty_graph()),
        &config.rule,
        config.steps_per_sample,
        None,
    )?;
    let cell = floor_cell("harness");
    rows.extend(cell.summary_row(
        "step_us",
        "us",
        &harness.step.per_step_us,
        harness.step.stop.as_str(),
        None,
    ));
    if let Some(overhead) = diff_of_medians(
        &harness.step.per_step_us,
        &floor_samples["empty-graph"],
        config.seed,
    ) {
        rows.push(cell.estimate_row(
            "overhead_us",
            "us",
            &overhead,
            harness.step.per_step_us.len() as u64,
            None,
        ));
    }
    recorder.save(&rows)?;

    let mut forward = if config.forward_us > 0.0 {
        Some(forward::spin(&gpu, config.forward_us)?)
    } else {
        None
    };
    let groups = config.layouts.len()
        * config.batch_sizes.len()
        * config.block_sizes.len()
        * config.families.len();
    let progress = progress(groups * config.arms.len());
    for &layout in &config.layouts {
        for &bs in &config.batch_sizes {
            let rank_bs = layout.rank_batch(bs);
            for &block in &config.block_sizes {
                let mut inputs: Option<HostInputs> = None;
                for &family in &config.families {
                    let cells = arm_cells(
                        KIND_PREP,
                        family.name(),
                        &config.arms,
                        bs,
                        block,
                        layout,
                        gpu.info.device_count,
                    );
                    if !needs_measuring(&cells, &done, &mut rows, &progress) {
                        continue;
                    }
                    let shape = Shape::new(family, rank_bs, block, config.max_context)?;
                    let inputs = inputs.get_or_insert_with(|| {
                        generate(
                            &shape,
                            config.seed ^ ((rank_bs as u64) << 32 | block as u64),
                            config.seq_lens,
                            false,
                        )
                    });
                    let accept = AcceptModel::with_probability(
                        0.7,
                        block,
                        config.seed as u32,
                        shape.max_seq_len(),
                    );
                    let lengths =
                        DeviceLengths::new(&gpu, &inputs.seq_lens, rank_bs as usize, accept)?;
                    let mut plan =
                        PrepPlan::new(&gpu, shape, inputs, &lengths).with_context(|| {
                            format!("setting up {family} bs {rank_bs} block {block}")
                        })?;
                    let mut step_samples: HashMap<Arm, Vec<f64>> = HashMap::new();
                    for (&arm, cell) in config.arms.iter().zip(&cells) {
                        progress.set_message(cell.label());
                        let label = cell.label();
                        recorder.set_cell(&label);
                        let prepared = plan
                            .prepare(arm)
                            .with_context(|| format!("preparing {label}"))?;
                        let mut steps = ArmSteps {
                            plan: &mut plan,
                            prepared,
                        };
                        let m = measure(
                            &gpu,
                            &mut steps,
                            &config.rule,
                            config.steps_per_sample,
                            forward.as_mut(),
                        )
                        .with_context(|| format!("measuring {label}"))?;
                        let telemetry = recorder.cell_telemetry(&label);
                        rows.extend(arm_rows(
                            cell,
                            arm,
                            &m,
                            &floor_samples,
                            config.seed,
                            telemetry.as_ref(),
                        ));
                        step_samples.insert(arm, m.step.per_step_us);
                        progress.inc(1);
                    }
                    if let (Some(sync), Some(device)) = (
                        step_samples.get(&Arm::EagerSync),
                        step_samples.get(&Arm::EagerDevice),
                    ) {
                        let cell = &cells[config
                            .arms
                            .iter()
                            .position(|&a| a == Arm::EagerSync)
                            .expect("measured")];
                        if let Some(cost) = diff_of_medians(sync, device, config.seed) {
                            rows.push(cell.estimate_row(
                                "read_cost_us",
                                "us",
                                &cost,
                                sync.len().min(device.len()) as u64,
                                None,
                            ));
                        }
                    }
                    recorder.save(&rows)?;
                }
            }
        }
    }
    progress.finish_and_clear();
    recorder.finish()?;
    Ok(SweepOutcome {
        dir: config.out.clone(),
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The rows of one measured arm: its decomposition, and its cost as a multiple of its floor.
fn arm_rows(
    cell: &CellId,
    arm: Arm,
    m: &PrepMeasurement,
    floor: &HashMap<&str, Vec<f64>>,
    seed: u64,
    telemetry: Option<&crate::measure::nvml::CellTelemetry>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let stop = m.step.stop.as_str();
    rows.extend(cell.summary_row("step_us", "us", &m.step.per_step_us, stop, telemetry));
    if let Some(fwd) = &m.step_fwd {
        rows.extend(cell.summary_row(
            "step_fwd_us",
            "us",
            &fwd.per_step_us,
            fwd.stop.as_str(),
            telemetry,
        ));
    }
    rows.extend(cell.summary_row("host_issue_us", "us", &m.host_issue_us, stop, telemetry));
    if arm == Arm::EagerSync {
        rows.extend(cell.summary_row("host_blocked_us", "us", &m.host_blocked_us, stop, telemetry));
    }
    rows.extend(cell.summary_row("gpu_prep_us", "us", &m.gpu_prep_us, "fixed", telemetry));
    if let Some(multiple) = ratio_of_medians(
        &m.step.per_step_us,
        &floor[FloorItem::of_arm(arm).name()],
        seed,
    ) {
        rows.push(cell.estimate_row(
            "floor_multiple",
            "x",
            &multiple,
            m.step.per_step_us.len() as u64,
            telemetry,
        ));
    }
    rows
}
