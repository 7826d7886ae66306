//! One trace, analysed: the main thread's top-level ops, reads, uploads, steps and their
//! annotations, what the GPU did, and what the profiler's own events cost inside any span.

use super::probe::{EventCosts, EventCounts};
use super::trace::{is_profiler_step, tol, HostEvent, Span, ThreadEvents, Trace};
use anyhow::{anyhow, Result};
use std::collections::BTreeMap;

/// The annotation of the probe's `range` workload's own empty ranges (metaprep_host.py).
pub const EMPTY_RANGE: &str = "metaprep empty range";

#[derive(Debug, Clone, Copy, Default)]
pub struct RtKind {
    pub launch: bool,
    pub graph: bool,
    pub sync: bool,
    pub memcpy: bool,
}

pub fn rt_kind(name: &str) -> RtKind {
    RtKind {
        launch: name.starts_with("cudaLaunchKernel")
            || name.starts_with("cuLaunchKernel")
            || name.starts_with("cudaLaunchCooperativeKernel"),
        graph: name == "cudaGraphLaunch" || name == "cuGraphLaunch",
        sync: matches!(
            name,
            "cudaStreamSynchronize"
                | "cudaDeviceSynchronize"
                | "cudaEventSynchronize"
                | "cudaMemcpy"
                | "cuStreamSynchronize"
                | "cuCtxSynchronize"
                | "cuEventSynchronize"
        ),
        memcpy: name == "cudaMemcpyAsync" || name == "cudaMemcpy",
    }
}

/// A runtime call on the main thread.
#[derive(Debug, Clone)]
pub struct Rt {
    pub span: Span,
    pub kind: RtKind,
    pub corr: Option<u64>,
    /// A call that puts work on the GPU, made while GPU work launched earlier was still
    /// running (false for every other call).
    pub busy: bool,
}

/// A top-level op on the main thread and what lies inside it.
#[derive(Debug, Clone)]
pub struct TopOp {
    pub name: String,
    pub span: Span,
    pub sync: bool,
    pub upload: bool,
    /// Launch calls inside (driver calls inside a runtime launch not counted twice).
    pub launches: usize,
    pub graph: bool,
}

impl TopOp {
    /// A syncing op that is not an upload: a device value brought to the host.
    pub fn read(&self) -> bool {
        self.sync && !self.upload
    }
}

/// A point where the host waited for the GPU: a syncing op or a bare sync call.
#[derive(Debug, Clone)]
pub struct SyncPoint {
    pub name: String,
    pub span: Span,
}

/// Indices of sorted-by-start items whose span lies inside `outer`.
pub fn inside<T>(items: &[T], span: impl Fn(&T) -> Span, outer: Span) -> Vec<usize> {
    let lo = items.partition_point(|x| span(x).ts < outer.ts - tol(outer.ts));
    let hi = items.partition_point(|x| span(x).ts <= outer.end + tol(outer.end));
    (lo..hi.max(lo))
        .filter(|&i| outer.contains(span(&items[i])))
        .collect()
}

/// Total length of the union of `spans` clipped to `window`.
pub fn union_len(spans: &[Span], window: Span) -> f64 {
    let mut clipped: Vec<Span> = spans
        .iter()
        .map(|s| Span {
            ts: s.ts.max(window.ts),
            end: s.end.min(window.end),
        })
        .filter(|s| s.end > s.ts)
        .collect();
    clipped.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    let mut total = 0.0;
    let mut current: Option<Span> = None;
    for s in clipped {
        match &mut current {
            Some(c) if s.ts <= c.end => c.end = c.end.max(s.end),
            _ => {
                if let Some(c) = current {
                    total += c.dur();
                }
                current = Some(s);
            }
        }
    }
    total + current.map_or(0.0, Span::dur)
}

/// One prep annotation in one step.
#[derive(Debug, Clone, Copy)]
pub struct PrepStep {
    /// Its duration as the trace recorded it.
    pub recorded_us: f64,
    /// Its duration, profiler cost taken off (as recorded without a probe).
    pub host_us: f64,
    /// Host time its reads and syncing uploads spent waiting for the GPU to drain.
    pub waits: f64,
    pub ops: usize,
    /// Ops that hold no graph replay (a graph arm's replay-holding op is not an op).
    pub graph_ops: usize,
    pub launches: usize,
    pub launch_calls: usize,
    pub reads: usize,
    pub uploads: usize,
    pub ops_before_read: usize,
    pub graph_launches: usize,
    /// GPU µs of the work launched from inside it (kernels, copies, graph nodes).
    pub gpu_us: f64,
}

/// One trace's events, indexed for the questions calibration asks.
pub struct Analysis<'t> {
    pub file: &'t str,
    pub trace: &'t Trace,
    pub main: (String, String),
    pub main_ops: usize,
    pub threads_with_ops: usize,
    pub rts: Vec<Rt>,
    /// Launch calls, driver calls nested in runtime launches dropped.
    pub launches: Vec<Span>,
    pub tops: Vec<TopOp>,
    pub annotations: &'t [HostEvent],
    ops: &'t [HostEvent],
    pub sync_points: Vec<SyncPoint>,
    pub steps: Vec<Span>,
    pub step_kind: &'static str,
    max_gpu_dur: f64,
    /// GPU records per correlation id (a graph replay's nodes share its launch's): how
    /// many, their total µs, and when the last one ended.
    gpu_by_corr: BTreeMap<u64, (usize, f64, f64)>,
    /// (launch time, end of the GPU work it launched) of every main-thread runtime call
    /// that launched GPU work, by launch time.
    launched: Vec<(f64, f64)>,
    /// The latest end among `launched[..=i]`: whether the GPU was busy at a call, and when
    /// it drained for a sync, without a scan.
    launched_max_end: Vec<f64>,
    /// What one profiler event costs the host, when the trace has a probe.
    costs: Option<EventCosts>,
    /// The recorded duration of an empty annotation (its own share of its span).
    empty_range_us: f64,
}

impl<'t> Analysis<'t> {
    pub fn new(file: &'t str, trace: &'t Trace) -> Result<Analysis<'t>> {
        let threads_with_ops = trace.threads.values().filter(|t| !t.ops.is_empty()).count();
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
        let mut gpu_by_corr: BTreeMap<u64, (usize, f64, f64)> = BTreeMap::new();
        for g in &trace.gpu {
            if let Some(c) = g.corr {
                let e = gpu_by_corr.entry(c).or_insert((0, 0.0, f64::MIN));
                e.0 += 1;
                e.1 += g.span.dur();
                e.2 = e.2.max(g.span.end);
            }
        }
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

        // Top-level ops: ops are sorted by start, longest first, so a nested op always
        // comes after the op that holds it.
        let mut tops: Vec<TopOp> = Vec::new();
        for op in &thread.ops {
            if tops.last().is_some_and(|t| t.span.contains(op.span)) {
                continue;
            }
            let within = inside(&rts, |r| r.span, op.span);
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
                launches: inside(&launches, |s| *s, op.span).len(),
                graph,
            });
        }

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

    /// From now on, durations are read with the profiler's per-event `costs` taken off.
    pub fn deflate_with(&mut self, costs: EventCosts) {
        self.costs = Some(costs);
        let empties: Vec<f64> = self
            .annotations
            .iter()
            .filter(|a| a.name == EMPTY_RANGE)
            .map(|a| a.span.dur())
            .collect();
        self.empty_range_us = crate::stats::summary::quantile(&empties, 0.5).unwrap_or(0.0);
    }

    /// Every event the profiler recorded inside `span` on the main thread.
    pub fn events_in(&self, span: Span) -> EventCounts {
        let rts: Vec<&Rt> = inside(&self.rts, |r| r.span, span)
            .into_iter()
            .map(|i| &self.rts[i])
            .collect();
        let count = |graph: bool, busy: bool| {
            rts.iter()
                .filter(|r| r.kind.graph == graph && r.busy == busy)
                .count() as f64
        };
        let graph_nodes: usize = rts
            .iter()
            .filter(|r| r.kind.graph)
            .filter_map(|r| r.corr)
            .map(|c| self.gpu_by_corr.get(&c).map_or(0, |g| g.0))
            .sum();
        EventCounts {
            cpu_ops: inside(self.ops, |o| o.span, span).len() as f64,
            runtime: count(false, false),
            runtime_busy: count(false, true),
            annotations: inside(self.annotations, |a| a.span, span).len() as f64,
            graph_launches: count(true, false),
            graph_launches_busy: count(true, true),
            graph_nodes: graph_nodes as f64,
        }
    }

    /// What the profiler's events cost inside `span`, less the events that are `span`'s
    /// own record (`own`: itself, as an op or an annotation).
    fn overhead(&self, span: Span, own: EventCounts) -> f64 {
        let Some(costs) = self.costs else { return 0.0 };
        let mut n = self.events_in(span);
        n.cpu_ops = (n.cpu_ops - own.cpu_ops).max(0.0);
        n.annotations = (n.annotations - own.annotations).max(0.0);
        costs.of(n)
    }

    /// A top-level op's host time without the profiler: its duration less what the events
    /// nested in it cost (its own record lands mostly outside its span: the probe's
    /// single-op workloads show their recorded spans at their bare cost).
    pub fn op_us(&self, op: &TopOp) -> f64 {
        let own = EventCounts {
            cpu_ops: 1.0,
            ..EventCounts::default()
        };
        (op.span.dur() - self.overhead(op.span, own)).max(0.0)
    }

    /// A syncing op's host time without the profiler and without its wait for the GPU:
    /// from the moment the GPU drained to its end, less what the events recorded there cost.
    /// The profiler's work before the drain overlapped the wait, so it cost nothing.
    pub fn sync_op_us(&self, op: &TopOp) -> f64 {
        let after = Span {
            ts: op.span.ts + self.wait(op.span),
            end: op.span.end,
        };
        let own = EventCounts {
            cpu_ops: if after.contains(op.span) { 1.0 } else { 0.0 },
            ..EventCounts::default()
        };
        (after.dur() - self.overhead(after, own)).max(0.0)
    }

    /// What the profiler's events recorded while a syncing op waited for the GPU cost: work
    /// that overlapped the wait, so the host never paid it.
    fn absorbed(&self, op: &TopOp) -> f64 {
        let (Some(costs), wait) = (self.costs, self.wait(op.span)) else {
            return 0.0;
        };
        if wait <= 0.0 {
            return 0.0;
        }
        // Events that began before the GPU drained (a sync call itself runs on past it).
        let drained = op.span.ts + wait;
        let mut n = self.events_in(op.span);
        let after = self.events_in(Span {
            ts: drained,
            end: op.span.end,
        });
        n.cpu_ops -= 1.0 + after.cpu_ops; // the op itself is not its own event here
        n.runtime -= after.runtime;
        n.runtime_busy -= after.runtime_busy;
        n.annotations -= after.annotations;
        n.graph_launches -= after.graph_launches;
        n.graph_launches_busy -= after.graph_launches_busy;
        n.graph_nodes -= after.graph_nodes;
        costs.of(n).max(0.0)
    }

    /// An annotated range's host time without the profiler: its duration less every event
    /// recorded inside it and less an empty annotation's own share of its span.
    pub fn range_us(&self, span: Span) -> f64 {
        let own = EventCounts {
            annotations: 1.0,
            ..EventCounts::default()
        };
        let empty = if self.costs.is_some() {
            self.empty_range_us
        } else {
            0.0
        };
        (span.dur() - self.overhead(span, own) - empty).max(0.0)
    }

    pub fn tops_in(&self, span: Span) -> Vec<&TopOp> {
        inside(&self.tops, |t| t.span, span)
            .into_iter()
            .map(|i| &self.tops[i])
            .collect()
    }

    pub fn rts_in(&self, span: Span) -> Vec<&Rt> {
        inside(&self.rts, |r| r.span, span)
            .into_iter()
            .map(|i| &self.rts[i])
            .collect()
    }

    /// The annotations directly inside `step` (not inside another one inside it), in order.
    pub fn children(&self, step: Span) -> Vec<&'t HostEvent> {
        let mut out: Vec<&HostEvent> = Vec::new();
        for i in inside(self.annotations, |a| a.span, step) {
            let a = &self.annotations[i];
            if a.name == "step" || is_profiler_step(&a.name) {
                continue;
            }
            if out.last().is_some_and(|o| o.span.contains(a.span)) {
                continue;
            }
            out.push(a);
        }
        out
    }

    /// The outermost annotations named `name` anywhere on the main thread.
    pub fn named(&self, name: &str) -> Vec<Span> {
        self.annotations
            .iter()
            .filter(|a| a.name == name)
            .map(|a| a.span)
            .collect()
    }

    pub fn gpu_busy(&self, window: Span) -> f64 {
        let gpu = &self.trace.gpu;
        let from = window.ts - self.max_gpu_dur;
        let lo = gpu.partition_point(|g| g.span.ts < from);
        let hi = gpu.partition_point(|g| g.span.ts <= window.end);
        let spans: Vec<Span> = gpu[lo..hi.max(lo)].iter().map(|g| g.span).collect();
        union_len(&spans, window)
    }

    /// How long a syncing op waited for the GPU: from its start to the end of the last GPU
    /// work that was launched (or, with no launch on record, started) before it and finished
    /// while it was blocked; 0 when the GPU was already idle. Work queued behind a running
    /// kernel starts on the GPU only after the host began waiting, so the launch time is
    /// what decides. Its own copy starts after it and is part of its cost.
    pub fn wait(&self, span: Span) -> f64 {
        let ends_inside = |end: f64| end >= span.ts && end <= span.end;
        // Work that started before the op and ended while it blocked started at most the
        // longest GPU record earlier.
        let gpu = &self.trace.gpu;
        let lo = gpu.partition_point(|g| g.span.ts < span.ts - self.max_gpu_dur);
        let hi = gpu.partition_point(|g| g.span.ts < span.ts);
        let started = gpu[lo..hi.max(lo)]
            .iter()
            .map(|g| g.span.end)
            .filter(|&e| ends_inside(e))
            .fold(span.ts, f64::max);
        let before = self.launched.partition_point(|&(at, _)| at < span.ts);
        let launched = match before.checked_sub(1).map(|i| self.launched_max_end[i]) {
            None => span.ts,
            // The usual case: everything launched before has ended by the time the op
            // returns, so the latest end is the drain.
            Some(latest) if latest <= span.end => latest.max(span.ts),
            // Work on another stream outlasts the op: only what ended inside it counts.
            Some(_) => self.launched[..before]
                .iter()
                .map(|&(_, end)| end)
                .filter(|&e| ends_inside(e))
                .fold(span.ts, f64::max),
        };
        started.max(launched) - span.ts
    }

    /// GPU µs of the work launched by the runtime calls inside `span`.
    pub fn gpu_launched_in(&self, span: Span) -> f64 {
        self.rts_in(span)
            .iter()
            .filter_map(|r| r.corr)
            .filter_map(|c| self.gpu_by_corr.get(&c))
            .map(|g| g.1)
            .sum()
    }

    pub fn prep_step(&self, span: Span) -> PrepStep {
        let tops = self.tops_in(span);
        let reads = tops.iter().filter(|t| t.read()).count();
        let ops: Vec<&&TopOp> = tops.iter().filter(|t| !t.read()).collect();
        let ops_before_read = tops.iter().position(|t| t.read()).unwrap_or(0);
        let absorbed: f64 = tops
            .iter()
            .filter(|t| t.sync)
            .map(|t| self.absorbed(t))
            .sum();
        PrepStep {
            recorded_us: span.dur(),
            host_us: self.range_us(span) + absorbed,
            waits: tops
                .iter()
                .filter(|t| t.sync)
                .map(|t| self.wait(t.span))
                .sum(),
            ops: ops.len(),
            graph_ops: ops.iter().filter(|t| !t.graph).count(),
            launches: ops.iter().filter(|t| t.launches > 0).count(),
            launch_calls: inside(&self.launches, |s| *s, span).len(),
            reads,
            uploads: ops.iter().filter(|t| t.upload).count(),
            ops_before_read,
            graph_launches: self.rts_in(span).iter().filter(|r| r.kind.graph).count(),
            gpu_us: self.gpu_launched_in(span),
        }
    }

    /// Events per repetition inside each probe workload's annotation (`{mark} {name}`),
    /// the annotation itself not counted; the median over its timings.
    pub fn probe_counts(
        &self,
        mark: &str,
        workloads: impl IntoIterator<Item = String>,
        reps: u32,
    ) -> BTreeMap<String, EventCounts> {
        let mut out = BTreeMap::new();
        for name in workloads {
            let spans = self.named(&format!("{mark} {name}"));
            if spans.is_empty() {
                continue;
            }
            let per: Vec<EventCounts> = spans.iter().map(|&s| self.events_in(s)).collect();
            let med = |f: fn(&EventCounts) -> f64| {
                let v: Vec<f64> = per.iter().map(f).collect();
                crate::stats::summary::quantile(&v, 0.5).unwrap_or(0.0) / f64::from(reps)
            };
            out.insert(
                name,
                EventCounts {
                    cpu_ops: med(|c| c.cpu_ops),
                    runtime: med(|c| c.runtime),
                    // The workload's own annotation is not one of its events.
                    annotations: (med(|c| c.annotations) - 1.0 / f64::from(reps)).max(0.0),
                    runtime_busy: med(|c| c.runtime_busy),
                    graph_launches: med(|c| c.graph_launches),
                    graph_launches_busy: med(|c| c.graph_launches_busy),
                    graph_nodes: med(|c| c.graph_nodes),
                },
            );
        }
        out
    }
}
