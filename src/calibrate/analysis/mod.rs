//! One trace, analysed: the main thread's top-level ops, reads, uploads, steps and their
//! annotations, what the GPU did, and what the profiler's own events cost inside any span.
//!
//! Its types live here; building it from a trace in `build`, the profiler's cost taken off
//! durations in `costs`, what lies inside a span in `queries`.

mod build;
mod costs;
mod queries;

use super::probe::EventCosts;
pub use super::trace::{rt_kind, RtKind};
use super::trace::{tol, HostEvent, Span, Trace};
use std::collections::BTreeMap;

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
    /// What this op cost extra for following a wait or a gap (the probe's post-wait table
    /// at its place in the sequence; 0 without one): taken off its host time.
    pub post_wait_us: f64,
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
