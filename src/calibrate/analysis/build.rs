//! Building an [`Analysis`] from a trace: the main thread, its runtime calls and which found
//! the GPU busy, its top-level ops, sync points and steps.

use super::{inside, rt_kind, Analysis, Rt, SyncPoint, TopOp};
use crate::calibrate::trace::{is_profiler_step, tol, Span, ThreadEvents, Trace};
use anyhow::{anyhow, Result};
use std::collections::BTreeMap;

/// GPU records per correlation id: how many, their total µs, and when the last one ended.
type GpuByCorr = BTreeMap<u64, (usize, f64, f64)>;

impl<'t> Analysis<'t> {
    pub fn new(file: &'t str, trace: &'t Trace) -> Result<Analysis<'t>> {
        Self::build(file, trace, true)
    }

    /// An analysis of a trace that may hold no steps (what `gaps` reads): its events and
    /// probes only, with no step to read.
    pub fn of_events(file: &'t str, trace: &'t Trace) -> Result<Analysis<'t>> {
        Self::build(file, trace, false)
    }

    fn build(file: &'t str, trace: &'t Trace, need_steps: bool) -> Result<Analysis<'t>> {
        let threads_with_ops = trace.threads.values().filter(|t| !t.ops.is_empty()).count();
        let (main_key, thread) = main_thread(file, trace)?;
        let mut rts: Vec<Rt> = thread
            .runtime
            .iter()
            .map(|e| Rt {
                span: e.span,
                kind: rt_kind(&e.name),
                corr: e.corr,
                busy: false,
            })
            .collect();
        let mut launches: Vec<Span> = Vec::new();
        for r in rts.iter().filter(|r| r.kind.launch) {
            if launches.last().is_some_and(|l| l.contains(r.span)) {
                continue;
            }
            launches.push(r.span);
        }
        let gpu_by_corr = gpu_by_corr(trace);
        let (launched, launched_max_end) = mark_busy(&mut rts, &gpu_by_corr);
        let tops = top_ops(trace, thread, &rts, &launches);
        let sync_points = sync_points(thread, &rts, &tops);
        let (steps, step_kind) = match steps(file, thread) {
            Err(_) if !need_steps => (Vec::new(), "no steps"),
            found => found?,
        };
        let max_gpu_dur = trace.gpu.iter().map(|g| g.span.dur()).fold(0.0, f64::max);
        Ok(Analysis {
            file,
            trace,
            main: main_key.clone(),
            main_ops: thread.ops.len(),
            threads_with_ops,
            rts,
            launches,
            tops,
            annotations: &thread.annotations,
            ops: &thread.ops,
            sync_points,
            steps,
            step_kind,
            max_gpu_dur,
            gpu_by_corr,
            launched,
            launched_max_end,
            costs: None,
            empty_range_us: 0.0,
        })
    }
}

/// The thread with the most cpu_ops, and its key; an error where the trace is no PyTorch
/// profiler trace with CUDA runtime events on that thread.
fn main_thread<'t>(
    file: &str,
    trace: &'t Trace,
) -> Result<(&'t (String, String), &'t ThreadEvents)> {
    let mut main: Option<(&(String, String), &ThreadEvents)> = None;
    for (key, thread) in &trace.threads {
        if thread.ops.len() > main.map_or(0, |(_, t)| t.ops.len()) {
            main = Some((key, thread));
        }
    }
    let Some((main_key, thread)) = main else {
        return Err(anyhow!(
            "{file}: no cpu_op events: not a PyTorch profiler trace (record with torch.profiler and export_chrome_trace)"
        ));
    };
    if !trace.any_runtime {
        return Err(anyhow!(
            "{file}: no cuda_runtime events: record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        ));
    }
    if thread.runtime.is_empty() {
        return Err(anyhow!(
            "{file}: no cuda_runtime events on the main thread (pid {}, tid {}, the one with the most cpu_ops)",
            main_key.0,
            main_key.1
        ));
    }
    Ok((main_key, thread))
}

/// The trace's GPU records by correlation id (a graph replay's nodes share its launch's).
fn gpu_by_corr(trace: &Trace) -> GpuByCorr {
    let mut gpu_by_corr: GpuByCorr = BTreeMap::new();
    for g in &trace.gpu {
        if let Some(c) = g.corr {
            let e = gpu_by_corr.entry(c).or_insert((0, 0.0, f64::MIN));
            e.0 += 1;
            e.1 += g.span.dur();
            e.2 = e.2.max(g.span.end);
        }
    }
    gpu_by_corr
}

/// Marks each call that put work on the GPU while earlier work still ran busy; returns the
/// (launch time, end of its GPU work) of every call that launched some, and the latest end
/// among the first `i + 1` of them.
fn mark_busy(rts: &mut [Rt], gpu_by_corr: &GpuByCorr) -> (Vec<(f64, f64)>, Vec<f64>) {
    let launched: Vec<(f64, f64)> = rts
        .iter()
        .filter_map(|r| Some((r.span.ts, gpu_by_corr.get(&r.corr?)?.2)))
        .collect();
    // A call is busy when work launched before it ends after it starts.
    let launched_max_end: Vec<f64> = launched
        .iter()
        .scan(f64::MIN, |latest, &(_, end)| {
            *latest = latest.max(end);
            Some(*latest)
        })
        .collect();
    // Only calls that put work on the GPU (launches, copies, replays) are told apart: the
    // probe measures the busy cost of a launch, and a sync is busy by its nature.
    for r in rts
        .iter_mut()
        .filter(|r| r.kind.launch || r.kind.memcpy || r.kind.graph)
    {
        let before = launched.partition_point(|&(at, _)| at < r.span.ts);
        r.busy = before > 0 && launched_max_end[before - 1] > r.span.ts;
    }
    (launched, launched_max_end)
}

/// Top-level ops: ops are sorted by start, longest first, so a nested op always comes after
/// the op that holds it.
fn top_ops(trace: &Trace, thread: &ThreadEvents, rts: &[Rt], launches: &[Span]) -> Vec<TopOp> {
    let mut tops: Vec<TopOp> = Vec::new();
    for op in &thread.ops {
        if tops.last().is_some_and(|t| t.span.contains(op.span)) {
            continue;
        }
        let within = inside(rts, |r| r.span, op.span);
        let (mut sync, mut graph, mut htod, mut other_copy) = (false, false, false, false);
        for &i in &within {
            let r = &rts[i];
            sync |= r.kind.sync;
            graph |= r.kind.graph;
            if r.kind.memcpy {
                match r.corr.and_then(|c| trace.memcpy_by_corr.get(&c)) {
                    Some(name) if name.contains("HtoD") => htod = true,
                    _ => other_copy = true,
                }
            }
        }
        tops.push(TopOp {
            name: op.name.clone(),
            span: op.span,
            sync,
            upload: htod && !other_copy,
            launches: inside(launches, |s| *s, op.span).len(),
            graph,
            post_wait_us: 0.0,
        });
    }
    tops
}

/// The syncing top-level ops and the sync calls outside any op, by start.
fn sync_points(thread: &ThreadEvents, rts: &[Rt], tops: &[TopOp]) -> Vec<SyncPoint> {
    let mut sync_points: Vec<SyncPoint> = tops
        .iter()
        .filter(|t| t.sync)
        .map(|t| SyncPoint {
            name: t.name.clone(),
            span: t.span,
        })
        .collect();
    for (r, e) in rts.iter().zip(&thread.runtime) {
        let in_op = {
            let i = tops.partition_point(|t| t.span.ts <= r.span.ts + tol(r.span.ts));
            i > 0 && tops[i - 1].span.contains(r.span)
        };
        if r.kind.sync && !in_op {
            sync_points.push(SyncPoint {
                name: e.name.clone(),
                span: r.span,
            });
        }
    }
    sync_points.sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
    sync_points
}

/// The outermost `step` annotations, else the outermost `ProfilerStep#N` ranges, and which
/// of the two they are; an error where the trace has neither.
fn steps(file: &str, thread: &ThreadEvents) -> Result<(Vec<Span>, &'static str)> {
    let outermost = |pick: &dyn Fn(&str) -> bool| {
        let mut spans: Vec<Span> = Vec::new();
        for a in thread.annotations.iter().filter(|a| pick(&a.name)) {
            if spans.last().is_some_and(|s| s.contains(a.span)) {
                continue;
            }
            spans.push(a.span);
        }
        spans
    };
    let mut steps = outermost(&|n| n == "step");
    let mut step_kind = "`step` annotations";
    if steps.is_empty() {
        steps = outermost(&is_profiler_step);
        step_kind = "`ProfilerStep#N` ranges";
    }
    if steps.is_empty() {
        return Err(anyhow!(
            "{file}: no steps: wrap each decode step in torch.profiler.record_function(\"step\") or call prof.step()"
        ));
    }
    Ok((steps, step_kind))
}
