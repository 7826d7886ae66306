//! Durations with the profiler's own events taken off: ops, syncs, ranges, prep steps, and
//! the probe's event counts.

use super::{inside, Analysis, PrepStep, Rt, TopOp};
use crate::calibrate::probe::{EventCosts, EventCounts, ProbeFile, EMPTY_RANGE};
use crate::calibrate::trace::Span;
use crate::model::post_wait::{PostWait, Sequence};

/// A gap between two top-level ops of a trace longer than this starts a post-wait sequence:
/// under the profiler back-to-back ops sit a few µs apart (each op's own record lands after
/// its span), so the harness's 10 µs would see gaps that are the profiler's.
pub const TRACE_GAP_US: f64 = 20.0;
use std::collections::BTreeMap;

impl Analysis<'_> {
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

    /// From now on, a top-level op's host time is also without what it cost extra for
    /// following a wait or a gap, by `table` (this process's post-wait probe): the ops after
    /// a syncing op pay for its wait, and a gap between two ops longer than [`TRACE_GAP_US`]
    /// (a Python segment, a replay, the wait between steps) is a wait too, each by
    /// [`Sequence`]'s rule, the one `steps` follows. The trace
    /// then gives back-to-back costs, and `steps` adds the post-wait cost wherever its own
    /// program waits, at the waits of the cell it runs rather than of the traced one.
    pub fn without_post_wait(&mut self, table: &PostWait) {
        let mut sequence = Sequence::default();
        let mut last_end: Option<f64> = None;
        for i in 0..self.tops.len() {
            let top = &self.tops[i];
            let span = top.span;
            // A read is no call of its own here, as in steps: its wait starts the sequence.
            if top.read() {
                sequence.wait(self.wait(span));
                last_end = Some(span.end);
                continue;
            }
            if let Some(end) = last_end.filter(|end| span.ts - end > TRACE_GAP_US) {
                sequence.wait(span.ts - end);
            }
            self.tops[i].post_wait_us = sequence.next_call(table);
            // A syncing upload is a call, and then a wait (as steps runs graph-upload's).
            if self.tops[i].sync {
                sequence.wait(self.wait(span));
            }
            last_end = Some(span.end);
        }
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
        (op.span.dur() - self.overhead(op.span, own) - op.post_wait_us).max(0.0)
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
        let post_wait: f64 = tops.iter().map(|t| t.post_wait_us).sum();
        PrepStep {
            recorded_us: span.dur(),
            host_us: (self.range_us(span) + absorbed - post_wait).max(0.0),
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

    /// Events per repetition inside each of `probe`'s workloads' annotations (`{mark}
    /// {name}`), the annotation itself not counted; the median over its timings.
    pub fn probe_counts(&self, probe: &ProbeFile) -> BTreeMap<String, EventCounts> {
        let (mark, reps) = (&probe.mark, probe.reps);
        let mut out = BTreeMap::new();
        for name in probe.bare_us.keys().cloned() {
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
