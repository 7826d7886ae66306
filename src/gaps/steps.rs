//! Finding the decode steps in a trace: a region the user names, torch.profiler's own
//! `ProfilerStep#N`, or a region that repeats and covers most of the host thread's time.

use crate::calibrate::trace::{is_profiler_step, HostEvent, Trace};

/// Fewest steps a repeating region needs to be taken for the step.
const MIN_REPEATS: usize = 3;

/// How the steps were found, and where each began.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSource {
    pub how: String,
    pub starts: Vec<f64>,
}

impl StepSource {
    pub fn starts(&self) -> &[f64] {
        &self.starts
    }

    pub fn describe(&self) -> String {
        self.how.clone()
    }
}

/// The thread the steps run on and where each began: `marker`'s events where given (a
/// region, op or Python frame of that name, or whose name starts with it), else
/// `ProfilerStep#N`, else the repeating region that covers the most of its thread.
pub fn find(trace: &Trace, marker: Option<&str>) -> Result<((String, String), StepSource), String> {
    let mut best: Option<((String, String), StepSource, f64)> = None;
    for (thread, events) in &trace.threads {
        let candidates: Vec<(String, Vec<&HostEvent>)> = match marker {
            Some(name) => {
                let all = (events.annotations.iter())
                    .chain(&events.ops)
                    .chain(&events.python)
                    .filter(|e| e.name == name || e.name.starts_with(name))
                    .collect();
                vec![(format!("the `{name}` marker"), all)]
            }
            None => repeating(&events.annotations),
        };
        for (how, mut found) in candidates {
            found.sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
            found.dedup_by(|b, a| b.span.ts < a.span.end);
            if found.len() < 2 || (marker.is_none() && found.len() < MIN_REPEATS) {
                continue;
            }
            let cover: f64 = found.iter().map(|e| e.span.dur()).sum();
            let better = best.as_ref().is_none_or(|(_, _, c)| cover > *c);
            if better {
                let starts = found.iter().map(|e| e.span.ts).collect();
                best = Some((thread.clone(), StepSource { how, starts }, cover));
            }
        }
    }
    best.map(|(thread, source, _)| (thread, source))
        .ok_or_else(|| match marker {
            Some(name) => format!(
            "no two `{name}` events on one thread: --step-marker names a record_function region, \
             an op or a Python frame that runs once a decode step"
        ),
            None => "no decode steps found: no region repeats on a thread (torch.profiler's \
                 `ProfilerStep#N` from `prof.step()`, or a `record_function` around each step); \
                 name one with --step-marker NAME"
                .to_string(),
        })
}

/// The regions that may be steps: `ProfilerStep#N` together, else each name that repeats.
fn repeating(annotations: &[HostEvent]) -> Vec<(String, Vec<&HostEvent>)> {
    let profiler: Vec<&HostEvent> = annotations
        .iter()
        .filter(|e| is_profiler_step(&e.name))
        .collect();
    if profiler.len() >= 2 {
        return vec![("torch.profiler's `ProfilerStep#N`".to_string(), profiler)];
    }
    let mut by_name: std::collections::BTreeMap<&str, Vec<&HostEvent>> = Default::default();
    for e in annotations {
        by_name.entry(&e.name).or_default().push(e);
    }
    (by_name.into_iter())
        .filter(|(_, v)| v.len() >= MIN_REPEATS)
        .map(|(name, v)| (format!("the repeating `{name}` region"), v))
        .collect()
}
