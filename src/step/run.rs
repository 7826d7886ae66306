//! The decode-step model on the GPU: host scheduler work -> draft metadata (the arm under
//! test) -> draft forward -> verify metadata -> verify forward -> accept, with the host
//! allowed to run one step ahead of the GPU, as an overlap scheduler does.
//!
//! Each cell runs twice:
//! * a clean pass, one CUDA event per step (the one the one-step-ahead rule waits on, so it
//!   costs nothing extra): step wall times and completions on the device clock give ITL and
//!   throughput;
//! * a timeline pass with events around each phase (ten a step, a few µs of host time): GPU
//!   busy intervals give forward occupancy and the host-bound gap, and for the traced cell
//!   the Perfetto trace. A prep phase is marked from its first launch (for eager-sync: after
//!   the host read, the list and its copy) to its last kernel's end; for eager arms the gaps
//!   between their own launches fall inside it. Occupancy is reported per step (1 - gap /
//!   step wall time), so it has a median and an interval.
//!
//! Layouts run one rank: a layout needing more GPUs than the host has is emulated (the
//! collective is a busy-wait sized by the bytes it would move); real ranks would each run
//! this loop on their own GPU and stream, with the collective a real NCCL call.

use super::forward::{spin, StreamSource};
use super::layout::Layout;
use super::metrics::{StepRecord, Timeline};
use super::profile::{ForwardModel, ForwardSpec};
use super::trace::{HostLane, TraceBuilder};
use crate::gpu::{Gpu, Launch};
use crate::measure::nvml::CellTelemetry;
use crate::measure::rows::CellId;
use crate::measure::run_output::{
    arm_cells, emulation_notes, existing_rows, needs_measuring, progress, Recorder,
};
use crate::measure::stats::Estimate;
use crate::prep::accept::AcceptModel;
use crate::prep::inputs::{generate, HostInputs, LengthRange};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{PrepPlan, Prepared};
use crate::prep::{Arm, Family, Shape};
use crate::report::csv::{completed_cells, Row, KIND_STEP};
use anyhow::{Context, Result};
use cudarc::driver::CudaEvent;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The `family` column of step rows: the draft and verify metadata a step prepares.
pub const STEP_FAMILY: &str = "dspark+dsa_target_verify";
/// A step's phases, in issue order.
const PHASES: [&str; 5] = [
    "draft prep",
    "draft forward",
    "verify prep",
    "verify forward",
    "accept",
];
/// Steps per throughput sample.
const THROUGHPUT_WINDOW: usize = 10;

#[derive(Debug, Clone)]
pub struct StepsConfig {
    pub device: usize,
    pub arms: Vec<Arm>,
    pub batch_sizes: Vec<u32>,
    pub block_sizes: Vec<u32>,
    pub layouts: Vec<Layout>,
    pub target: ForwardModel,
    pub draft: ForwardModel,
    pub accept_mean: f64,
    pub host_work_us: f64,
    pub link_gb_s: f64,
    /// Measured steps of the clean pass (fewer when the cell's time cap ends it first).
    pub steps: usize,
    pub min_steps: usize,
    pub cell_time_cap: Duration,
    pub warmup_steps: usize,
    pub timeline_steps: usize,
    pub max_context: u32,
    pub seq_lens: LengthRange,
    pub seed: u64,
    pub out: PathBuf,
    pub resume: bool,
    /// Which cell's timeline to write as a Perfetto trace, and where.
    pub trace: Option<TraceRequest>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    pub layout: Layout,
    pub batch_size: u32,
    pub block: u32,
    /// The eager-sync arm's trace; other arms' go beside it with `-<arm>` before `.json`.
    pub path: PathBuf,
}

impl TraceRequest {
    pub fn path_for(&self, arm: Arm) -> PathBuf {
        if arm == Arm::EagerSync {
            return self.path.clone();
        }
        let stem = self
            .path
            .file_stem()
            .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
        self.path.with_file_name(format!("{stem}-{arm}.json"))
    }
}

/// One forward stand-in: stream the bytes, then the collectives' busy-wait.
struct Forward {
    launches: Vec<Launch>,
}

impl Forward {
    fn new(gpu: &Gpu, spec: ForwardSpec, source: &StreamSource) -> Result<Self> {
        let mut launches = Vec::new();
        if spec.stream_bytes > 0 {
            launches.push(source.launch(gpu, spec.stream_bytes)?);
        }
        if spec.spin_us > 0.0 {
            launches.push(spin(gpu, spec.spin_us)?);
        }
        Ok(Self { launches })
    }

    fn issue(&self, gpu: &Gpu) -> Result<()> {
        for launch in &self.launches {
            // SAFETY: the stream source outlives the cell; spin takes only a duration.
            unsafe { launch.issue(gpu.cu_stream())? };
        }
        Ok(())
    }
}

fn busy_wait(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Everything one (layout, batch, block) needs, shared by its arms.
struct StepCell<'g> {
    gpu: &'g Gpu,
    lengths: &'g DeviceLengths<'g>,
    draft: PrepPlan<'g>,
    verify: PrepPlan<'g>,
    draft_fwd: Forward,
    verify_fwd: Forward,
    host_work: Duration,
    initial: Vec<i32>,
}

struct Pass {
    /// Completion of every step on the device clock, µs from the anchor.
    done_us: Vec<f64>,
    tokens: Vec<Vec<u32>>,
    blocked_us: Vec<f64>,
}

impl StepCell<'_> {
    /// Issues phase `phase` of a step (see `PHASES`). With `start`, the event is recorded
    /// right before the phase's GPU work: for a prep, after any host read it makes.
    fn issue_phase(
        &mut self,
        phase: usize,
        pd: &Prepared,
        pv: &Prepared,
        start: Option<&CudaEvent>,
    ) -> Result<()> {
        let prep = match phase {
            0 => Some((&mut self.draft, pd)),
            2 => Some((&mut self.verify, pv)),
            _ => None,
        };
        if let Some((plan, prepared)) = prep {
            return match start {
                Some(event) => plan.issue_marked(prepared, event),
                None => plan.issue(prepared),
            };
        }
        if let Some(event) = start {
            event.record(&self.gpu.stream)?;
        }
        match phase {
            1 => self.draft_fwd.issue(self.gpu),
            3 => self.verify_fwd.issue(self.gpu),
            _ => self.lengths.issue_accept(),
        }
    }

    /// Accepted tokens of the next `steps` steps, from the CPU mirror of the accept kernel.
    fn tokens(&self, steps: usize) -> Vec<Vec<u32>> {
        let mut lens = self.initial.clone();
        let mut counters = vec![0u32; lens.len()];
        let live = self.lengths.live_bs();
        (0..steps)
            .map(|_| {
                self.lengths
                    .accept_model
                    .apply(&mut lens, &mut counters, live)
                    .into_iter()
                    .map(|a| a as u32)
                    .collect()
            })
            .collect()
    }

    /// The clean pass: `total` steps, one event each; stops early (after `min_total`) at the cap.
    fn clean_pass(
        &mut self,
        pd: &Prepared,
        pv: &Prepared,
        total: usize,
        min_total: usize,
        cap: Duration,
    ) -> Result<Pass> {
        self.lengths.reset()?;
        // Reads made while preparing the arms are not this pass's.
        self.draft.take_blocked();
        self.verify.take_blocked();
        self.gpu.sync()?;
        let anchor = self.gpu.timing_events(1)?.remove(0);
        let done = self.gpu.timing_events(total)?;
        let mut blocked_us = Vec::with_capacity(total);
        anchor.record(&self.gpu.stream)?;
        let start = Instant::now();
        let mut ran = 0;
        for k in 0..total {
            if k >= 2 {
                done[k - 2].synchronize()?;
            }
            busy_wait(self.host_work);
            for phase in 0..PHASES.len() {
                self.issue_phase(phase, pd, pv, None)?;
            }
            done[k].record(&self.gpu.stream)?;
            blocked_us
                .push((self.draft.take_blocked() + self.verify.take_blocked()).as_secs_f64() * 1e6);
            ran = k + 1;
            if ran >= min_total && start.elapsed() > cap {
                break;
            }
        }
        self.gpu.sync()?;
        let done_us = done[..ran]
            .iter()
            .map(|e| Ok(anchor.elapsed_ms(e)? as f64 * 1e3))
            .collect::<Result<_>>()?;
        Ok(Pass {
            done_us,
            tokens: self.tokens(ran),
            blocked_us,
        })
    }

    /// The timeline pass: events around every phase, host spans, optional trace.
    fn timeline_pass(
        &mut self,
        arm: Arm,
        pd: &Prepared,
        pv: &Prepared,
        steps: usize,
        mut trace: Option<&mut TraceBuilder>,
    ) -> Result<Timeline> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        let anchor = self.gpu.timing_events(1)?.remove(0);
        let begin = self.gpu.timing_events(steps * PHASES.len())?;
        let end = self.gpu.timing_events(steps * PHASES.len())?;
        anchor.record(&self.gpu.stream)?;
        anchor.synchronize()?;
        let host0 = Instant::now();
        let host_us = |t: Instant| t.saturating_duration_since(host0).as_secs_f64() * 1e6;
        for k in 0..steps {
            if k >= 2 {
                end[(k - 1) * PHASES.len() - 1].synchronize()?;
            }
            let s0 = Instant::now();
            busy_wait(self.host_work);
            if let Some(t) = trace.as_deref_mut() {
                t.host_span(
                    HostLane::Scheduler,
                    "scheduler work",
                    host_us(s0),
                    host_us(Instant::now()) - host_us(s0),
                    k as u64,
                )?;
            }
            for (p, name) in PHASES.iter().enumerate() {
                let (b, e) = (&begin[k * PHASES.len() + p], &end[k * PHASES.len() + p]);
                let t0 = Instant::now();
                self.issue_phase(p, pd, pv, Some(b))?;
                e.record(&self.gpu.stream)?;
                if let Some(t) = trace.as_deref_mut() {
                    t.host_span(
                        HostLane::Launch,
                        name,
                        host_us(t0),
                        host_us(Instant::now()) - host_us(t0),
                        k as u64,
                    )?;
                    let read = if p == 0 {
                        self.draft.take_last_read()
                    } else if p == 2 {
                        self.verify.take_last_read()
                    } else {
                        None
                    };
                    if let Some((r0, r1)) = read {
                        t.host_span(
                            HostLane::BlockedInRead,
                            "seq_lens.tolist()",
                            host_us(r0),
                            (r1 - r0).as_secs_f64() * 1e6,
                            k as u64,
                        )?;
                    }
                }
            }
            self.draft.take_blocked();
            self.verify.take_blocked();
        }
        self.gpu.sync()?;
        let device_us = |e: &CudaEvent| -> Result<f64> { Ok(anchor.elapsed_ms(e)? as f64 * 1e3) };
        let tokens = self.tokens(steps);
        let mut records = Vec::with_capacity(steps);
        let mut previous_done = 0.0;
        for k in 0..steps {
            let mut busy = Vec::with_capacity(PHASES.len());
            for (p, name) in PHASES.iter().enumerate() {
                let (b, e) = (
                    device_us(&begin[k * PHASES.len() + p])?,
                    device_us(&end[k * PHASES.len() + p])?,
                );
                busy.push((b, e));
                if let Some(t) = trace.as_deref_mut() {
                    let label = if p == 0 || p == 2 {
                        format!("{name} ({arm})")
                    } else {
                        name.to_string()
                    };
                    t.gpu_span(0, &label, b, (e - b).max(0.0), k as u64)?;
                }
            }
            let done = busy[PHASES.len() - 1].1;
            records.push(StepRecord {
                host_start_us: previous_done,
                host_end_us: done,
                gpu_busy: busy,
                tokens_per_request: tokens[k].clone(),
            });
            previous_done = done;
        }
        // The first step has no previous completion on this clock: leave it out.
        Timeline::new(records.split_off(1))
    }
}

/// Throughput samples over windows of steps: tokens of the window over its wall time, times
/// `scale`, the batch's requests per request this rank holds (bs / rank batch: 1 for tp
/// layouts; for dep, the ranks holding the rest of the batch, which run in parallel).
pub fn window_throughput(
    done_us: &[f64],
    tokens: &[Vec<u32>],
    window: usize,
    scale: f64,
) -> Vec<f64> {
    (1..done_us.len())
        .step_by(window)
        .filter(|&s| s + window <= done_us.len())
        .map(|s| {
            let toks: u64 = tokens[s..s + window]
                .iter()
                .flatten()
                .map(|&a| a as u64)
                .sum();
            toks as f64 * scale / ((done_us[s + window - 1] - done_us[s - 1]) * 1e-6)
        })
        .collect()
}

pub struct StepsOutcome {
    pub rows: Vec<Row>,
    pub seconds: f64,
}

pub fn run(config: &StepsConfig) -> Result<StepsOutcome> {
    let started = Instant::now();
    let (csv_path, mut rows) = existing_rows(&config.out, config.resume)?;
    let gpu = Gpu::open(config.device)?;
    let done = completed_cells(&rows);
    let how = format!(
        "one rank ran on one GPU, collectives are busy-waits sized by their bytes at {} GB/s",
        config.link_gb_s
    );
    let mut notes = emulation_notes(&config.layouts, gpu.info.device_count, &how);
    notes.push(format!(
        "step model: target {}, draft {}, accept length {}, host scheduler work {} us, link {} GB/s; occupancy and gap_us from a separate pass with events around each phase",
        model_name(&config.target), model_name(&config.draft), config.accept_mean, config.host_work_us, config.link_gb_s
    ));
    let recorder = Recorder::start(&gpu, &config.out, csv_path, config.resume, notes)?;
    let stream_source = StreamSource::new(&gpu, 1 << 30)?;
    let total_cells = config.layouts.len()
        * config.batch_sizes.len()
        * config.block_sizes.len()
        * config.arms.len();
    let progress = progress(total_cells);
    let context = (config.seq_lens.min + config.seq_lens.max) / 2;
    for &layout in &config.layouts {
        for &bs in &config.batch_sizes {
            let rank_bs = layout.rank_batch(bs);
            for &block in &config.block_sizes {
                let cells = arm_cells(
                    KIND_STEP,
                    STEP_FAMILY,
                    &config.arms,
                    bs,
                    block,
                    layout,
                    gpu.info.device_count,
                );
                if !needs_measuring(&cells, &done, &mut rows, &progress) {
                    continue;
                }
                let draft_shape =
                    Shape::new(Family::DsparkDraftBlock, rank_bs, block, config.max_context)?;
                let verify_shape =
                    Shape::new(Family::DsaTargetVerify, rank_bs, block, config.max_context)?;
                let inputs: HostInputs = generate(
                    &draft_shape,
                    config.seed ^ ((rank_bs as u64) << 32 | block as u64),
                    config.seq_lens,
                    false,
                );
                let accept = AcceptModel::with_mean(
                    config.accept_mean,
                    block,
                    config.seed as u32,
                    draft_shape.max_seq_len(),
                )?;
                let lengths = DeviceLengths::new(&gpu, &inputs.seq_lens, rank_bs as usize, accept)?;
                let spec =
                    |m: &ForwardModel| m.spec(layout, rank_bs, context, block, config.link_gb_s);
                let mut cell = StepCell {
                    gpu: &gpu,
                    lengths: &lengths,
                    draft: PrepPlan::new(&gpu, draft_shape, &inputs, &lengths)?,
                    verify: PrepPlan::new(&gpu, verify_shape, &inputs, &lengths)?,
                    draft_fwd: Forward::new(&gpu, spec(&config.draft)?, &stream_source)?,
                    verify_fwd: Forward::new(&gpu, spec(&config.target)?, &stream_source)?,
                    host_work: Duration::from_secs_f64(config.host_work_us * 1e-6),
                    initial: inputs.seq_lens.clone(),
                };
                for (&arm, id) in config.arms.iter().zip(&cells) {
                    let label = id.label();
                    progress.set_message(label.clone());
                    recorder.set_cell(&label);
                    let pd = cell
                        .draft
                        .prepare(arm)
                        .with_context(|| format!("preparing the draft metadata of {label}"))?;
                    let pv = cell
                        .verify
                        .prepare(arm)
                        .with_context(|| format!("preparing the verify metadata of {label}"))?;
                    let total = config.warmup_steps + config.steps;
                    let clean = cell.clean_pass(
                        &pd,
                        &pv,
                        total,
                        config.warmup_steps + config.min_steps,
                        config.cell_time_cap,
                    )?;
                    let request = config
                        .trace
                        .as_ref()
                        .filter(|t| (t.layout, t.batch_size, t.block) == (layout, bs, block));
                    let mut trace = request.map(|_| TraceBuilder::new());
                    if let Some(t) = trace.as_mut() {
                        t.set_arm(arm.name());
                    }
                    let timeline =
                        cell.timeline_pass(arm, &pd, &pv, config.timeline_steps, trace.as_mut())?;
                    if let (Some(t), Some(request)) = (trace, request) {
                        t.write(&request.path_for(arm))?;
                    }
                    let telemetry = recorder.cell_telemetry(&label);
                    rows.extend(step_rows(
                        id,
                        arm,
                        &clean,
                        config.warmup_steps,
                        &timeline,
                        bs as f64 / rank_bs as f64,
                        telemetry.as_ref(),
                    )?);
                    progress.inc(1);
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

fn model_name(m: &ForwardModel) -> String {
    match m {
        ForwardModel::Profile(p) => p.name.clone(),
        ForwardModel::FixedUs(us) => format!("fixed {us} us"),
    }
}

/// The rows of one step cell: ITL, throughput, step time and blocked time from the clean
/// pass (after its warm-up), occupancy and gaps from the timeline pass.
fn step_rows(
    id: &CellId,
    arm: Arm,
    clean: &Pass,
    warmup: usize,
    timeline: &Timeline,
    batch_scale: f64,
    telemetry: Option<&CellTelemetry>,
) -> Result<Vec<Row>> {
    let measured: Vec<StepRecord> = (warmup.max(1)..clean.done_us.len())
        .map(|k| StepRecord {
            host_start_us: clean.done_us[k - 1],
            host_end_us: clean.done_us[k],
            gpu_busy: Vec::new(),
            tokens_per_request: clean.tokens[k].clone(),
        })
        .collect();
    let steps = Timeline::new(measured).context("the clean pass")?;
    let stop = "fixed";
    let mut rows = Vec::new();
    rows.extend(id.summary_row("itl_us", "us", &steps.itl_samples_us(), stop, telemetry));
    let p99 = steps.summary().itl_p99_us;
    rows.push(id.estimate_row(
        "itl_p99_us",
        "us",
        &Estimate {
            point: p99,
            lo: f64::NAN,
            hi: f64::NAN,
        },
        steps.itl_samples_us().len() as u64,
        telemetry,
    ));
    rows.extend(id.summary_row("step_us", "us", &steps.step_wall_us(), stop, telemetry));
    let done_tail = &clean.done_us[warmup.max(1) - 1..];
    let tokens_tail = &clean.tokens[warmup.max(1) - 1..];
    rows.extend(id.summary_row(
        "throughput_tok_s",
        "tok/s",
        &window_throughput(done_tail, tokens_tail, THROUGHPUT_WINDOW, batch_scale),
        stop,
        telemetry,
    ));
    if arm == Arm::EagerSync {
        rows.extend(id.summary_row(
            "host_blocked_us",
            "us",
            &clean.blocked_us[warmup.max(1).min(clean.blocked_us.len())..],
            stop,
            telemetry,
        ));
    }
    let walls = timeline.step_wall_us();
    let gaps = timeline.gap_per_step_us();
    let occupancy: Vec<f64> = walls.iter().zip(&gaps).map(|(w, g)| 1.0 - g / w).collect();
    rows.extend(id.summary_row("occupancy", "ratio", &occupancy, stop, telemetry));
    rows.extend(id.summary_row("gap_us", "us", &gaps, stop, telemetry));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_windows_count_tokens_over_their_wall_time() {
        // Steps complete every 100 µs; each of 2 requests accepts 2 tokens a step.
        let done: Vec<f64> = (0..21).map(|k| 100.0 * k as f64).collect();
        let tokens = vec![vec![2u32, 2]; 21];
        let samples = window_throughput(&done, &tokens, 10, 1.0);
        assert_eq!(samples.len(), 2);
        // 10 steps x 4 tokens over 1000 µs = 40 000 tok/s.
        assert!(
            samples.iter().all(|&s| (s - 40_000.0).abs() < 1e-6),
            "{samples:?}"
        );
        assert_eq!(
            window_throughput(&done, &tokens, 10, 4.0)[0],
            160_000.0,
            "other ranks' requests add"
        );
        assert!(
            window_throughput(&done[..5], &tokens[..5], 10, 1.0).is_empty(),
            "no partial window"
        );
    }

    #[test]
    fn trace_paths_per_arm() {
        let t = TraceRequest {
            layout: Layout::Tp(4),
            batch_size: 1,
            block: 5,
            path: PathBuf::from("out/trace.json"),
        };
        assert_eq!(t.path_for(Arm::EagerSync), PathBuf::from("out/trace.json"));
        assert_eq!(
            t.path_for(Arm::Graph),
            PathBuf::from("out/trace-graph.json")
        );
    }
}
