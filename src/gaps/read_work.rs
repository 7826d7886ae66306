//! The host work a read or upload brings with it: what the host does with a value read before
//! it launches again, and what it builds for an upload since it last launched. A device-only
//! rewrite drops that work with the call.

use crate::calibrate::profiler_cost::ProfilerCost;
use crate::calibrate::trace::{Span, ThreadEvents, Trace};
use std::collections::BTreeSet;

/// Each op on the thread that puts work on the GPU (the outermost op around the launch; the
/// launch itself outside any), in order.
pub(super) fn launching_ops(trace: &Trace, events: &ThreadEvents) -> Vec<Span> {
    let on_gpu: BTreeSet<u64> = trace.gpu.iter().filter_map(|g| g.corr).collect();
    let mut outermost: Vec<Span> = Vec::new();
    for op in &events.ops {
        if outermost.last().is_none_or(|o| op.span.ts >= o.end) {
            outermost.push(op.span);
        }
    }
    let mut ops: Vec<Span> = (events.runtime.iter())
        .filter(|r| r.corr.is_some_and(|c| on_gpu.contains(&c)))
        .map(|r| {
            let i = outermost.partition_point(|o| o.ts <= r.span.ts);
            match i.checked_sub(1).map(|i| outermost[i]) {
                Some(o) if o.end >= r.span.end => o,
                _ => r.span,
            }
        })
        .collect();
    ops.dedup();
    ops
}

/// The host's work a read or upload `op` brings with it, less the profiler's cost in it, µs:
/// from its return to the start of the thread's next op that launches GPU work or of the next
/// sync call (work on the value read; none where the step launches nothing after it), and,
/// for an upload, from the end of the last launching op or sync call before it (building what
/// it uploads), unless a read or upload before it claimed that stretch or the step launched
/// nothing before it.
pub(super) fn work_around(
    (op, upload): (Span, bool),
    (prev, next): (Option<(Span, bool)>, Option<Span>),
    launching: &[Span],
    period: Span,
    profiler: Option<&ProfilerCost>,
) -> f64 {
    let bare = |span: Span| match span.end > span.ts {
        true => (span.dur() - profiler.map_or(0.0, |p| p.in_span(span))).max(0.0),
        false => 0.0,
    };
    let after = match launching.get(launching.partition_point(|l| l.ts < op.end)) {
        Some(l) if l.ts < period.end => {
            let end = next.map_or(l.ts, |c| c.ts.min(l.ts));
            bare(Span { ts: op.end, end })
        }
        _ => 0.0,
    };
    // The end of the step's last launch before `op`: none where the step launched nothing
    // yet, and what came first is the step's own start (a scheduler's), not this upload's.
    let i = launching.partition_point(|l| l.end <= op.ts);
    let launched = (i.checked_sub(1).map(|i| launching[i].end)).filter(|&end| end >= period.ts);
    let before = match (upload, launched, prev) {
        (false, _, _) | (_, None, _) => 0.0,
        (true, Some(launched), Some((p, true))) if p.end >= launched => 0.0,
        (true, Some(launched), prev) => bare(Span {
            ts: prev.map_or(launched, |(p, _)| p.end.max(launched)),
            end: op.ts,
        }),
    };
    after + before
}
