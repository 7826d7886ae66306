//! Finding the decode steps in a trace: a region the user names, torch.profiler's own
//! `ProfilerStep#N`, a region that repeats and covers most of the host thread's time, or,
//! in a trace with none of these, the replays of the graph with the most GPU work.

use crate::calibrate::probe::is_probe_region;
use crate::calibrate::trace::{is_profiler_step, rt_kind, HostEvent, Trace};

/// Fewest steps a repeating region needs to be taken for the step.
const MIN_REPEATS: usize = 3;

/// How the steps were found, and where each began.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSource {
    pub how: String,
    pub starts: Vec<f64>,
    /// The region or event the steps are, where they are one: no place inside a step.
    pub name: Option<String>,
}

/// The thread the steps run on and where each began: `marker`'s events where given (a
/// region, op or Python frame of that name, or whose name starts with it), else
/// `ProfilerStep#N`, else the repeating region that covers the most of its thread.
pub fn find(trace: &Trace, marker: Option<&str>) -> Result<((String, String), StepSource), String> {
    let mut best: Option<((String, String), StepSource, f64)> = None;
    for (thread, events) in &trace.threads {
        let candidates: Vec<Candidate> = match marker {
            Some(name) => {
                let all = (events.annotations.iter())
                    .chain(&events.ops)
                    .chain(&events.python)
                    .filter(|e| e.name == name || e.name.starts_with(name))
                    .collect();
                vec![(format!("the `{name}` marker"), Some(name.to_string()), all)]
            }
            None => repeating(&events.annotations),
        };
        for (how, name, mut found) in candidates {
            found.sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
            found.dedup_by(|b, a| b.span.ts < a.span.end);
            if found.len() < 2 || (marker.is_none() && found.len() < MIN_REPEATS) {
                continue;
            }
            let cover: f64 = found.iter().map(|e| e.span.dur()).sum();
            let better = best.as_ref().is_none_or(|(_, _, c)| cover > *c);
            if better {
                let starts = found.iter().map(|e| e.span.ts).collect();
                let source = StepSource { how, starts, name };
                best = Some((thread.clone(), source, cover));
            }
        }
    }
    if let (None, None) = (&best, marker) {
        if let Some(found) = largest_replays(trace) {
            return Ok(found);
        }
    }
    best.map(|(thread, source, _)| (thread, source))
        .ok_or_else(|| match marker {
            Some(name) => format!(
            "no two `{name}` events on one thread: --step-marker names a record_function region, \
             an op or a Python frame that runs once a decode step"
        ),
            None => "no decode steps found: no region repeats on a thread (torch.profiler's \
                 `ProfilerStep#N` from `prof.step()`, or a `record_function` around each step) \
                 and no graph is replayed at least 3 times; name one with --step-marker NAME"
                .to_string(),
        })
}

/// The regions that may be steps: `ProfilerStep#N` together, else each name that repeats.
/// Each: how the steps were found, the region's name, its events.
type Candidate<'e> = (String, Option<String>, Vec<&'e HostEvent>);

fn repeating(annotations: &[HostEvent]) -> Vec<Candidate<'_>> {
    let profiler: Vec<&HostEvent> = annotations
        .iter()
        .filter(|e| is_profiler_step(&e.name))
        .collect();
    if profiler.len() >= 2 {
        return vec![(
            "torch.profiler's `ProfilerStep#N`".to_string(),
            None,
            profiler,
        )];
    }
    let mut by_name: std::collections::BTreeMap<&str, Vec<&HostEvent>> = Default::default();
    // The profiler-cost probes of a probe file repeat too, before the steps: never steps.
    for e in annotations.iter().filter(|e| !is_probe_region(&e.name)) {
        by_name.entry(&e.name).or_default().push(e);
    }
    (by_name.into_iter())
        .filter(|(_, v)| v.len() >= MIN_REPEATS)
        .map(|(name, v)| {
            (
                format!("the repeating `{name}` region"),
                Some(name.to_string()),
                v,
            )
        })
        .collect()
}

/// Replays whose GPU work is within this share of the largest replay's count as its replays.
const SAME_GRAPH: f64 = 0.8;

/// The launches of the graph with the most GPU work (a decode step's forward, replayed once a
/// step): each `cudaGraphLaunch` that ran as many kernels as the largest one and, by
/// correlation, at least [`SAME_GRAPH`] of its GPU time, on the thread with the most of them.
/// The kernel count tells apart two graphs of like GPU time (a draft of three forwards and a
/// verify of one), either of which marks a step once.
fn largest_replays(trace: &Trace) -> Option<((String, String), StepSource)> {
    // Each launch's GPU time and kernel count.
    let mut by_corr: std::collections::BTreeMap<u64, (f64, usize)> = Default::default();
    for g in &trace.gpu {
        if let Some(c) = g.corr {
            let at = by_corr.entry(c).or_default();
            at.0 += g.span.dur();
            at.1 += 1;
        }
    }
    let mut best: Option<((String, String), Vec<f64>)> = None;
    for (thread, events) in &trace.threads {
        let replays: Vec<(f64, (f64, usize))> = (events.runtime.iter())
            .filter(|e| rt_kind(&e.name).graph)
            .filter_map(|e| Some((e.span.ts, *by_corr.get(&e.corr?)?)))
            .collect();
        let Some(&(_, (largest, kernels))) =
            (replays.iter()).max_by(|a, b| a.1 .0.total_cmp(&b.1 .0).then(a.1 .1.cmp(&b.1 .1)))
        else {
            continue;
        };
        let starts: Vec<f64> = (replays.iter())
            .filter(|r| largest > 0.0 && r.1 .1 == kernels && r.1 .0 >= SAME_GRAPH * largest)
            .map(|r| r.0)
            .collect();
        if starts.len() >= MIN_REPEATS && best.as_ref().is_none_or(|(_, b)| starts.len() > b.len())
        {
            best = Some((thread.clone(), starts));
        }
    }
    let (thread, starts) = best?;
    let every = replays_per_step(&trace.threads[&thread].ops, &starts);
    let starts: Vec<f64> = starts.into_iter().step_by(every).collect();
    let how = match every {
        1 => "the replays of the graph with the most GPU work".to_string(),
        n => format!(
            "every {n} replays of the graphs with the most GPU work (their host ops repeat so)"
        ),
    };
    let source = StepSource {
        how,
        starts,
        name: None,
    };
    (source.starts.len() >= MIN_REPEATS).then_some((thread, source))
}

/// Longest run of replays that may make one step.
const MAX_REPLAYS_PER_STEP: usize = 4;
/// Share of the stretches between replays whose host ops must repeat at a period to take it.
const REPEAT_SHARE: f64 = 0.8;

/// How many consecutive replays make one step: two graphs of one size (a draft and a verify
/// forward alike) both count as the largest, and the host ops between them then repeat every
/// second stretch, not every one. The shortest period at which [`REPEAT_SHARE`] of the
/// stretches match; 1 where none does.
fn replays_per_step(ops: &[HostEvent], starts: &[f64]) -> usize {
    // The ops are in order of start: each stretch is one slice of them.
    let names_between = |from: f64, to: f64| -> Vec<&str> {
        let first = ops.partition_point(|e| e.span.ts < from);
        (ops[first..].iter())
            .take_while(|e| e.span.ts < to)
            .map(|e| e.name.as_str())
            .collect()
    };
    let stretches: Vec<Vec<&str>> = (starts.windows(2))
        .map(|w| names_between(w[0], w[1]))
        .collect();
    (1..=MAX_REPLAYS_PER_STEP)
        .take_while(|&p| stretches.len() >= 2 * p)
        .find(|&p| {
            let same = (p..stretches.len())
                .filter(|&i| stretches[i] == stretches[i - p])
                .count();
            same as f64 >= REPEAT_SHARE * (stretches.len() - p) as f64
        })
        .unwrap_or(1)
}
