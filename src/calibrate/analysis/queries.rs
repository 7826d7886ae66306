//! What lies inside a span: top-level ops, runtime calls, annotations, GPU work and waits.

use super::{inside, union_len, Analysis, Rt, TopOp};
use crate::calibrate::trace::{is_profiler_step, HostEvent, Span};

impl<'t> Analysis<'t> {
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
}
