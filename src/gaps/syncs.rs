//! The host's sync calls in a trace: the runtime calls that block until the GPU catches up,
//! and where in the engine each was made.

use super::Site;
use crate::calibrate::trace::{tol, HostEvent, Span, ThreadEvents};
use serde::Serialize;
use std::collections::BTreeMap;

/// Runtime and driver calls that block the host until earlier GPU work is done: a stream,
/// device or event sync, or a copy the runtime makes synchronous (`cudaMemcpy`, and a copy to
/// pageable host memory, which `.item()` and `.tolist()` issue and then sync).
pub const SYNC_CALLS: &[&str] = &[
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
    "cuMemcpyDtoH_v2",
];

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

/// Ops that read device data to the host.
const READ_OPS: &[&str] = &["aten::item", "aten::_local_scalar_dense", "aten::tolist"];

/// A sync call: when, which, and what it waited for.
#[derive(Debug, Clone)]
pub struct SyncCall {
    pub span: Span,
    pub call: String,
    pub kind: SyncKind,
}

/// The thread's sync calls, in order, each with what it waited for: the copy the runtime
/// launched just before it on the thread, or the op around it.
pub fn calls(events: &ThreadEvents, copies: &BTreeMap<u64, String>) -> Vec<SyncCall> {
    let mut out = Vec::new();
    for (i, e) in events.runtime.iter().enumerate() {
        if !SYNC_CALLS.contains(&e.name.as_str()) {
            continue;
        }
        let copy = (events.runtime[..i].iter().rev().take(2))
            .filter(|r| r.name.starts_with("cudaMemcpy") || r.name.starts_with("cuMemcpy"))
            .find_map(|r| r.corr.and_then(|c| copies.get(&c)));
        let in_read_op = (events.ops.iter())
            .any(|o| o.span.contains(e.span) && READ_OPS.contains(&o.name.as_str()));
        let kind = match copy {
            _ if in_read_op || e.name.contains("DtoH") => SyncKind::Read,
            Some(c) if c.contains("DtoH") => SyncKind::Read,
            Some(c) if c.contains("HtoD") => SyncKind::Upload,
            _ => SyncKind::Other,
        };
        out.push(SyncCall {
            span: e.span,
            call: e.name.clone(),
            kind,
        });
    }
    out
}

impl SyncCall {
    /// Where it was made: the outermost op or Python built-in around it, the innermost
    /// region and the innermost Python frame with a file and line.
    pub fn site(&self, events: &ThreadEvents, step_marker: Option<&str>) -> Site {
        let around = |list: &[HostEvent]| -> Vec<HostEvent> {
            (list.iter())
                .filter(|e| {
                    e.span.contains(self.span) && e.span.ts <= self.span.ts + tol(e.span.ts)
                })
                .cloned()
                .collect()
        };
        let ops = around(&events.ops);
        let python = around(&events.python);
        // Python built-ins (`<built-in method tolist of Tensor object>`) name what the
        // engine called; of framework ops the outermost does.
        let builtin = (python.iter()).find(|e| e.name.starts_with("<built-in method"));
        let op = builtin
            .map(|e| builtin_name(&e.name))
            .or_else(|| ops.first().map(|e| e.name.clone()))
            .unwrap_or_else(|| self.call.clone());
        let region = (around(&events.annotations).into_iter())
            .rev()
            .find(|e| !is_step_region(&e.name) && Some(e.name.as_str()) != step_marker)
            .map(|e| e.name);
        let function = (python.into_iter())
            .rev()
            .find(|e| e.name.contains(".py("))
            .map(|e| e.name);
        Site {
            kind: self.kind,
            op,
            region,
            function,
            call: self.call.clone(),
        }
    }
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

/// A region that is the step itself, not a place in it.
fn is_step_region(name: &str) -> bool {
    crate::calibrate::trace::is_profiler_step(name)
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
