//! The passes over a cell's arm: the clean pass (one event a step: ITL, throughput), the
//! checked pass (every prep's outputs against the CPU reference, for the GPU tests) and the
//! timeline pass (the timer's GPU spans, host spans and the optional trace). Each runs
//! [`StepCell::run_step`] with the one-step-ahead rule.

use super::cell::{ArmProgram, StepCell, StepPrep};
use super::checked_run::StepCheck;
use crate::axes::ReadPath;
use crate::harness::timer::TimelineTimer;
use crate::model::metrics::{StepRecord, Timeline};
use crate::model::trace::{HostLane, TraceBuilder};
use crate::prep::inputs::HostInputs;
use crate::runs::check::Tally;
use anyhow::Result;
use std::time::{Duration, Instant};

/// One host span of the timeline pass, for the trace: kept as it happens (no formatting or
/// allocation between steps, which the pass times) and named once the pass is over.
pub(super) struct HostSpan {
    pub(super) lane: HostLane,
    pub(super) what: SpanOf,
    pub(super) start: Instant,
    pub(super) end: Instant,
}

/// What a host span was: a program item (by index) or the host read inside a prep.
#[derive(Clone, Copy)]
pub(super) enum SpanOf {
    Item(usize),
    Read,
}

/// The timeline pass's timer and the step it is timing.
pub(super) struct Marks<'t> {
    pub(super) timer: &'t mut dyn TimelineTimer,
    pub(super) step: usize,
}

impl Marks<'_> {
    /// Where the GPU span of program item `item` begins.
    pub(super) fn gpu_start(&mut self, item: usize) -> Result<()> {
        self.timer.gpu_start(self.step, item)
    }
}

pub(super) struct Pass {
    /// Completion of every step on the device clock, µs from the anchor.
    pub(super) done_us: Vec<f64>,
    pub(super) tokens: Vec<Vec<u32>>,
    pub(super) blocked_us: Vec<f64>,
}

impl StepCell<'_> {
    /// The clean pass: `total` steps, one event each.
    pub(super) fn clean_pass(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        total: usize,
    ) -> Result<Pass> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        // Reads made while preparing the arms are not this pass's.
        self.take_blocked();
        let anchor = self.gpu.timing_events(1)?.remove(0);
        let done = self.gpu.timing_events(total)?;
        let mut blocked_us = Vec::with_capacity(total);
        anchor.record(&self.gpu.stream)?;
        for k in 0..total {
            if k >= 2 {
                done[k - 2].synchronize()?;
            }
            self.run_step(program, prepared, None, None, None)?;
            done[k].record(&self.gpu.stream)?;
            blocked_us.push(self.take_blocked().as_secs_f64() * 1e6);
        }
        self.gpu.sync()?;
        let done_us = done
            .iter()
            .map(|e| Ok(anchor.elapsed_ms(e)? as f64 * 1e3))
            .collect::<Result<_>>()?;
        Ok(Pass {
            done_us,
            tokens: self.tokens(total),
            blocked_us,
        })
    }

    /// `steps` steps of `program` with every prep's outputs poisoned before it and checked
    /// against the CPU reference after it, at the lengths the CPU mirror of accept gives that
    /// step; the device's lengths are checked against the mirror before each step. Slow
    /// (a sync and a download per prep): for tests, not timing.
    pub(super) fn checked_pass(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        steps: usize,
        inputs: &HostInputs,
    ) -> Result<StepCheck> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        let live = self.lengths.live_bs();
        let mut check = StepCheck {
            arm: program.arm,
            families: self.preps.iter().map(|p| p.plan.shape.family).collect(),
            tallies: vec![Tally::default(); self.preps.len()],
            lengths: Tally::default(),
            preps_checked: 0,
            accepted: 0,
            step: 0,
            inputs: inputs.clone(),
        };
        let mut counters = vec![0u32; live];
        for step in 0..steps {
            check.step = step as u64;
            let held = self.lengths.download_seq_lens()?;
            check.lengths.lengths(
                check.step,
                "seq_lens before the step",
                &held[..live],
                &check.inputs.seq_lens[..live],
            );
            self.run_step(program, prepared, None, None, Some(&mut check))?;
            self.gpu.sync()?;
            let accepted =
                self.lengths
                    .accept_model
                    .apply(&mut check.inputs.seq_lens, &mut counters, live);
            check.accepted += accepted.iter().map(|&a| a as u64).sum::<u64>();
        }
        Ok(check)
    }

    /// The timeline pass: `timer` sees every item of every step; host spans and the
    /// optional trace; `steps` steps, or fewer (3 at least) once `cap` has passed.
    #[allow(clippy::too_many_arguments)] // the pass's inputs; all are used once
    pub(super) fn timeline_pass(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        timer: &mut dyn TimelineTimer,
        steps: usize,
        cap: Duration,
        mut trace: Option<&mut TraceBuilder>,
    ) -> Result<Timeline> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        timer.start(steps)?;
        let host0 = Instant::now();
        let host_us = |t: Instant| t.saturating_duration_since(host0).as_secs_f64() * 1e6;
        // Room for every item and a few reads a step, so the traced pass does not grow it.
        let per_step = program.items.len() + 4;
        let mut spans = Vec::with_capacity(if trace.is_some() { steps * per_step } else { 0 });
        // Where each step's host spans end in `spans`.
        let mut step_ends = Vec::with_capacity(steps);
        let mut ran = 0;
        for k in 0..steps {
            if k >= 3 && host0.elapsed() > cap {
                break;
            }
            if k >= 2 {
                timer.wait_step(k - 2)?;
            }
            ran = k + 1;
            let marks = Marks {
                timer: &mut *timer,
                step: k,
            };
            let log = trace.is_some().then_some(&mut spans);
            self.run_step(program, prepared, Some(marks), log, None)?;
            self.take_blocked();
            step_ends.push(spans.len());
        }
        self.gpu.sync()?;
        let steps = ran;
        let program_items = &program.items;
        if let Some(t) = trace.as_deref_mut() {
            let path = program.arm.read_path().unwrap_or(ReadPath::Pageable);
            let read = path.range().to_string_lossy();
            let mut from = 0;
            for (k, &end) in step_ends.iter().enumerate() {
                for s in &spans[from..end] {
                    let name = match s.what {
                        SpanOf::Item(i) => program_items[i].label(),
                        SpanOf::Read => &read,
                    };
                    let (start, len) = (host_us(s.start), (s.end - s.start).as_secs_f64() * 1e6);
                    t.host_span(s.lane, name, start, len, k as u64)?;
                }
                from = end;
            }
        }
        let measured = timer.finish(steps)?;
        let tokens = self.tokens(steps);
        let mut records = Vec::with_capacity(steps);
        let mut previous_done = 0.0;
        for (k, step) in measured.into_iter().enumerate() {
            let mut busy = Vec::with_capacity(step.spans.len());
            for span in &step.spans {
                busy.push((span.start_us, span.end_us));
                if let Some(t) = trace.as_deref_mut() {
                    t.gpu_span(
                        span.stream,
                        program_items[span.item].label(),
                        span.op.as_deref(),
                        span.start_us,
                        (span.end_us - span.start_us).max(0.0),
                        k as u64,
                    )?;
                }
            }
            records.push(StepRecord {
                host_start_us: previous_done,
                host_end_us: step.done_us,
                gpu_busy: busy,
                tokens_per_request: tokens[k].clone(),
            });
            previous_done = step.done_us;
        }
        // The first step has no previous completion on this clock: leave it out.
        Timeline::new(records.split_off(1))
    }
}
