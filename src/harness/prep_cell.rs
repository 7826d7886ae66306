//! One sweep cell: an arm's per-step cost, decomposed. A sweep calls [`measure`] once per
//! round of the cell, with the within-round stopping rule.
//!
//! * `step_us` — wall time per step, steps issued back to back, GPU done at the end.
//! * `step_fwd_us` — the same with a stand-in forward of fixed GPU duration after each prep,
//!   so the GPU is busy when the next step's host read lands (it then waits for the forward:
//!   host and GPU serialise).
//! * `host_issue_us` — host time per step spent issuing the prep, not counting the read.
//! * `host_blocked_us` — host time per step blocked in the read (eager-sync only).
//! * `gpu_prep_us` — device time from the prep's first launch to its last kernel's end (CUDA
//!   events, in a separate pass so they do not perturb the others). For eager-sync the start
//!   is marked after the host read, the list and its copy; for eager arms the gaps between
//!   their own launches are inside the span.
//!
//! Every step is one NVTX range named by the caller (`dsa_decode prep (eager-sync)`, the
//! harness's `harness (empty graph)`), so the harness row's overhead includes the ranges' cost.

use super::sampling::{sample_per_step, Sampled};
use crate::gpu::nvtx::Range;
use crate::gpu::{Gpu, Launch, StepSource};
use crate::stats::stopping::StoppingRule;
use anyhow::Result;
use std::ffi::CStr;
use std::time::{Duration, Instant};

pub struct PrepMeasurement {
    pub step: Sampled,
    pub step_fwd: Option<Sampled>,
    pub host_issue_us: Vec<f64>,
    pub host_blocked_us: Vec<f64>,
    pub gpu_prep_us: Vec<f64>,
}

/// Steps in the event-timed pass for `gpu_prep_us` (in a sweep, each round's).
pub const EVENT_STEPS: usize = 200;

/// Measures `source`'s steps, each inside an NVTX range named `range`, the device time over
/// `event_steps` of them.
pub fn measure(
    gpu: &Gpu,
    source: &mut dyn StepSource,
    range: &CStr,
    rule: &StoppingRule,
    (steps_per_sample, event_steps): (usize, usize),
    forward: Option<&mut Launch>,
) -> Result<PrepMeasurement> {
    let (mut host_issue_us, mut host_blocked_us) = (Vec::new(), Vec::new());
    let step = sample_per_step(rule, steps_per_sample, |n| {
        let start = Instant::now();
        let mut issuing = Duration::ZERO;
        for _ in 0..n {
            let t = Instant::now();
            let _range = Range::push(range);
            source.issue_step()?;
            issuing += t.elapsed();
        }
        gpu.sync()?;
        let took = start.elapsed();
        let blocked = source.take_blocked();
        host_blocked_us.push(blocked.as_secs_f64() * 1e6 / n as f64);
        host_issue_us.push(issuing.saturating_sub(blocked).as_secs_f64() * 1e6 / n as f64);
        Ok(took)
    })?;
    let step_fwd = match forward {
        None => None,
        Some(fwd) => Some(sample_per_step(rule, steps_per_sample, |n| {
            let start = Instant::now();
            for _ in 0..n {
                let _range = Range::push(range);
                source.issue_step()?;
                fwd.issue(gpu.cu_stream())?;
            }
            gpu.sync()?;
            source.take_blocked();
            Ok(start.elapsed())
        })?),
    };
    let gpu_prep_us = event_timed(gpu, source, range, event_steps)?;
    Ok(PrepMeasurement {
        step,
        step_fwd,
        host_issue_us,
        host_blocked_us,
        gpu_prep_us,
    })
}

/// Device time of each of `steps` preps, from events recorded around it.
fn event_timed(
    gpu: &Gpu,
    source: &mut dyn StepSource,
    range: &CStr,
    steps: usize,
) -> Result<Vec<f64>> {
    let begin = gpu.timing_events(steps)?;
    let end = gpu.timing_events(steps)?;
    for (begin, end) in begin.iter().zip(&end) {
        let _range = Range::push(range);
        source.issue_step_marked(gpu, begin)?;
        end.record(&gpu.stream)?;
    }
    gpu.sync()?;
    source.take_blocked();
    begin
        .iter()
        .zip(&end)
        .map(|(b, e)| Ok(b.elapsed_ms(e)? as f64 * 1e3))
        .collect()
}
