//! The host's sync calls in a trace: the runtime calls that block until the GPU catches up,
//! and where in the engine each was made.

use super::Site;
use crate::calibrate::trace::{is_profiler_step, rt_kind, tol, HostEvent, Span, ThreadEvents};
use serde::Serialize;
use std::collections::BTreeMap;

/// What a sync waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncKind {
    /// A read of device data to the host (`.item()`, `.tolist()`, a copy to the host).
    Read,
    /// A copy up to the device that the host waits for (from pageable memory).
    Upload,
    /// Any other wait (an explicit synchronize, an event).
    Other,
}

impl SyncKind {
    /// Whether the wait drains the GPU's queue (a read or an upload), so that another such
    /// call left after a removed one takes over its wait; other waits pace the loop.
    pub fn drains_queue(self) -> bool {
        self != SyncKind::Other
    }
}

/// Ops that read device data to the host.
const READ_OPS: &[&str] = &["aten::item", "aten::_local_scalar_dense", "aten::tolist"];

/// A sync call: when it blocked, the engine's call it was made in, and its site.
#[derive(Debug, Clone)]
pub struct SyncCall {
    pub span: Span,
    /// The engine's call it was made in (the Python built-in or outermost op around it that
    /// launches no GPU work); its own span where none is.
    pub op: Span,
    pub site: Site,
}

/// The thread's sync calls, in order, each with what it waited for (the copy the runtime
/// launched just before it on the thread, or the op around it) and where it was made: the
/// outermost op or Python built-in around it, the innermost region but the step's own
/// (`step`: the region the steps are), and the innermost Python frame with a file and line.
pub fn calls(
    events: &ThreadEvents,
    copies: &BTreeMap<u64, String>,
    step: Option<&str>,
) -> Vec<SyncCall> {
    let syncs: Vec<(usize, &HostEvent)> = (events.runtime.iter().enumerate())
        .filter(|(_, e)| rt_kind(&e.name).sync)
        .collect();
    let spans: Vec<Span> = syncs.iter().map(|(_, e)| e.span).collect();
    let ops = enclosing(&events.ops, &spans);
    let python = enclosing(&events.python, &spans);
    let regions = enclosing(&events.annotations, &spans);
    let mut out = Vec::with_capacity(syncs.len());
    for (k, &(i, e)) in syncs.iter().enumerate() {
        let (ops, python) = (&ops[k], &python[k]);
        let launched = (events.runtime[..i].iter().rev().take(2))
            .filter(|r| rt_kind(&r.name).memcpy)
            .find_map(|r| Some((r, r.corr.and_then(|c| copies.get(&c))?)));
        let copy = launched.map(|(_, c)| c);
        // A copy to pageable host memory returns only once it has landed: the host waits
        // in it, not in the sync after it.
        let ts = match launched {
            Some((r, c)) if c.contains("DtoH") && c.contains("Pageable") => r.span.ts,
            _ => e.span.ts,
        };
        let in_read_op = ops.iter().any(|o| READ_OPS.contains(&o.name.as_str()));
        let kind = match copy {
            _ if in_read_op || e.name.contains("DtoH") => SyncKind::Read,
            Some(c) if c.contains("DtoH") => SyncKind::Read,
            Some(c) if c.contains("HtoD") => SyncKind::Upload,
            _ => SyncKind::Other,
        };
        // Python built-ins (`<built-in method tolist of Tensor object>`) name what the
        // engine called; of framework ops the outermost does.
        let builtins: Vec<&HostEvent> = (python.iter())
            .filter(|p| p.name.starts_with("<built-in method"))
            .copied()
            .collect();
        let op = (builtins.first())
            .map(|b| builtin_name(&b.name))
            .or_else(|| ops.first().map(|o| o.name.clone()))
            .unwrap_or_else(|| e.name.clone());
        let region = (regions[k].iter().rev())
            .find(|r| !is_profiler_step(&r.name) && Some(r.name.as_str()) != step)
            .map(|r| r.name.clone());
        let function = (python.iter().rev())
            .find(|f| f.name.contains(".py("))
            .map(|f| f.name.clone());
        out.push(SyncCall {
            span: Span {
                ts,
                end: e.span.end,
            },
            op: engine_call(events, &builtins, ops).map_or(e.span, |o| o.span),
            site: Site {
                kind,
                op,
                region,
                function,
                call: e.name.clone(),
            },
        });
    }
    out
}

/// The engine's call a sync was made in: the outermost of the Python built-ins and ops
/// around it that launches no GPU work of its own (only copies and syncs), so that removing
/// a read never takes off the host time of a larger op that happens to read inside it.
fn engine_call<'e>(
    events: &ThreadEvents,
    builtins: &[&'e HostEvent],
    ops: &[&'e HostEvent],
) -> Option<&'e HostEvent> {
    let mut around: Vec<&HostEvent> = builtins.iter().chain(ops).copied().collect();
    around
        .sort_by(|a, b| (a.span.ts.total_cmp(&b.span.ts)).then(b.span.end.total_cmp(&a.span.end)));
    around.into_iter().find(|o| {
        let from = events.runtime.partition_point(|r| r.span.ts < o.span.ts);
        !(events.runtime[from..].iter())
            .take_while(|r| r.span.ts < o.span.end)
            .any(|r| rt_kind(&r.name).launch || rt_kind(&r.name).graph)
    })
}

/// For each of `spans` (in order of start), the events of `list` (one thread's, in order of
/// start) that contain it, outermost first: one sweep, keeping only the events still open.
fn enclosing<'e>(list: &'e [HostEvent], spans: &[Span]) -> Vec<Vec<&'e HostEvent>> {
    let mut out = Vec::with_capacity(spans.len());
    let mut open: Vec<&HostEvent> = Vec::new();
    let mut next = 0;
    for s in spans {
        while next < list.len() && list[next].span.ts <= s.ts + tol(s.ts) {
            let starts = list[next].span.ts;
            open.retain(|e| e.span.end + tol(e.span.end) >= starts);
            open.push(&list[next]);
            next += 1;
        }
        open.retain(|e| e.span.end + tol(e.span.end) >= s.ts);
        out.push(
            open.iter()
                .filter(|e| e.span.contains(*s))
                .copied()
                .collect(),
        );
    }
    out
}

/// `<built-in method tolist of Tensor object>` → `Tensor.tolist()`.
fn builtin_name(name: &str) -> String {
    let inner = name
        .trim_start_matches("<built-in method ")
        .trim_end_matches('>');
    match inner.split_once(" of ") {
        Some((method, of)) => {
            let class = of.trim_end_matches(" object");
            format!("{class}.{method}()")
        }
        None => inner.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builtin_is_named_as_the_engine_calls_it() {
        assert_eq!(
            builtin_name("<built-in method tolist of Tensor object>"),
            "Tensor.tolist()"
        );
        assert_eq!(
            builtin_name("<built-in method item of Tensor object>"),
            "Tensor.item()"
        );
    }
}
