//! The profiler's cost in a step: how much of the host's lag behind its bare self each GPU idle
//! stretch took back (on the critical path), and how much hid behind GPU work.

use super::idle_stretches;
use super::overlap;
use super::syncs::SyncCall;
use crate::calibrate::profiler_cost::ProfilerCost;
use crate::calibrate::trace::{Span, ThreadEvents, Trace};
use std::collections::BTreeMap;

/// The profiler's cost in a step, split: on the critical path (what the GPU idle stretches
/// took back of the host's lag, [`lag_taken_back`], each stretch's share inside the period)
/// and hidden behind GPU work (the rest: bare, the host would have waited that much longer
/// in a sync).
pub(super) fn profiler_split_us(
    p: &ProfilerCost,
    period: Span,
    taken_back: &[(Span, f64)],
) -> (f64, f64) {
    let from = taken_back.partition_point(|(s, _)| s.end <= period.ts);
    let on_path: f64 = (taken_back[from..].iter())
        .take_while(|(s, _)| s.ts < period.end)
        .map(|&(s, back)| back * overlap(s, period) / s.dur())
        .sum();
    let all = p.in_span(period);
    (on_path, (all - on_path).max(0.0))
}

/// Each GPU idle stretch between `busy` spans with what it took back of the host's lag: the
/// cost of the events the host ran since it last waited for the GPU in a sync (`waits`, when
/// each ended: a wait absorbs the lag before it), less what earlier stretches took back, up
/// to the stretch's length. A stretch whose ending work was launched (`launches`) before the
/// GPU went idle is the GPU's own bubble between queued work, which no host speed shortens:
/// it takes back nothing.
pub(super) fn lag_taken_back(
    p: &ProfilerCost,
    busy: &[Span],
    waits: &[f64],
    launches: &[(f64, f64)],
) -> Vec<(Span, f64)> {
    let (Some(first), Some(last)) = (busy.first(), busy.last()) else {
        return Vec::new();
    };
    let (mut from, mut taken) = (f64::NEG_INFINITY, 0.0);
    let mut backs = Vec::new();
    let between = Span {
        ts: first.end,
        end: last.ts,
    };
    for s in idle_stretches(busy, between) {
        let next = launches.partition_point(|&(start, _)| start < s.end);
        if launches
            .get(next)
            .is_some_and(|&(_, launched)| launched < s.ts)
        {
            continue;
        }
        let last_wait = waits.partition_point(|&end| end <= s.end);
        if let Some(&wait) = last_wait.checked_sub(1).map(|i| &waits[i]) {
            if wait > from {
                (from, taken) = (wait, 0.0);
            }
        }
        if from == f64::NEG_INFINITY {
            continue;
        }
        let lag = p.in_span(Span {
            ts: from,
            end: s.end,
        }) - taken;
        let back = lag.clamp(0.0, s.dur());
        taken += back;
        backs.push((s, back));
    }
    backs
}

/// Each GPU item's start with its launch's on the thread, in order of start.
pub(super) fn launches(trace: &Trace, events: &ThreadEvents) -> Vec<(f64, f64)> {
    let launched: BTreeMap<u64, f64> = (events.runtime.iter())
        .filter_map(|r| Some((r.corr?, r.span.ts)))
        .collect();
    let mut launches: Vec<(f64, f64)> = (trace.gpu.iter())
        .filter_map(|g| Some((g.span.ts, *launched.get(&g.corr?)?)))
        .collect();
    launches.sort_by(|a, b| a.0.total_cmp(&b.0));
    launches
}

/// When each sync the host waited in ended (it overlapped GPU work), in order.
pub(super) fn wait_ends(calls: &[SyncCall], busy: &[Span]) -> Vec<f64> {
    let mut ends: Vec<f64> = (calls.iter())
        .filter(|c| {
            let i = busy.partition_point(|b| b.end <= c.span.ts);
            busy.get(i).is_some_and(|b| b.ts < c.span.end)
        })
        .map(|c| c.span.end)
        .collect();
    ends.sort_by(f64::total_cmp);
    ends
}
