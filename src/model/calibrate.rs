//! `metaprep calibrate`: derive a [`HostProfile`] from a PyTorch profiler Chrome trace (what
//! `torch.profiler.profile(...).export_chrome_trace(path)` writes, and what serving engines'
//! profiling endpoints write).
//!
//! # What is read
//!
//! The trace is `{"traceEvents": [...]}` (a bare array of events is accepted too, as Chrome
//! allows). Only complete events (`"ph": "X"`) of these categories are used; `ts` and `dur`
//! are µs: `cpu_op` (framework ops, nested), `user_annotation` (`record_function` ranges and
//! `ProfilerStep#N`), `cuda_runtime` / `cuda_driver` (host API calls, `args.correlation`),
//! and the GPU side `kernel`, `gpu_memcpy`, `gpu_memset`. Everything else (`python_function`,
//! flows, metadata, instants, `gpu_user_annotation`) is skipped. Older exports' category
//! names (`Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset`) are read as the new ones, and
//! a `cpu_op` named `ProfilerStep#N` (older exports) is read as an annotation.
//!
//! Host events are those of the **main thread**: the (pid, tid) with the most `cpu_op`s.
//!
//! # Definitions
//!
//! * **top-level op**: a `cpu_op` on the main thread not contained in another `cpu_op`'s
//!   `[ts, ts + dur]` (`aten::to` counts once, not with its `aten::_to_copy` and `aten::copy_`).
//! * **syncing op**: a top-level op containing a runtime call that waits for the GPU:
//!   `cudaStreamSynchronize`, `cudaDeviceSynchronize`, `cudaEventSynchronize`, or the
//!   blocking `cudaMemcpy`. `aten::item` / `aten::_local_scalar_dense` / `.tolist()` are
//!   syncing ops this way: their `cudaMemcpyAsync` is followed by a stream sync inside them.
//! * **upload**: a top-level op with a `cudaMemcpy(Async)` whose GPU side (the `gpu_memcpy`
//!   with the same `args.correlation`) is `HtoD`, and no copy in another direction
//!   (`torch.tensor(list, device=...)`). An upload that syncs is a syncing op but **not a
//!   read**: it counts among a prep's ops, not its reads.
//! * **read**: a syncing op that is not an upload (a device value brought to the host).
//! * **steps**: the outermost `step` annotations (`record_function("step")`) if any, else
//!   the `ProfilerStep#N` ranges that `prof.step()` records.
//!
//! # Derivations (each value's `source` names the trace file and says which rule made it)
//!
//! All of them look only inside steps (warm-up and teardown outside steps are left out).
//!
//! * `op_us` = median duration of the top-level ops that do not sync.
//! * `read_us` = median over the reads of each read's duration less its wait for the GPU
//!   (from its start to the end of the last GPU work that finished while it blocked): what
//!   a read costs the host with the GPU idle, which is what the profile's `read_us` means. No reads:
//!   the base profile's value is kept.
//! * `graph_launch_us` = median duration of the `cudaGraphLaunch` calls; none: base kept.
//! * `upload_us` = median duration of the uploads; `upload_syncs` = any upload syncs; none:
//!   base kept.
//! * **program**: the annotations directly inside each step, in time order. The sequence
//!   most steps share is used (ties: the earliest), and per-item numbers are medians over
//!   the steps that share it. `draft prep`, `draft forward`, `verify prep`, `verify forward`
//!   map to their items, `accept` to `accept` with `ops` = median top-level ops inside, any
//!   other name to a `host` item with `ops` = median top-level ops inside and `us` = 0, or,
//!   when it holds no ops (a pure Python stretch), `us` = its median duration and `ops` = 0.
//! * **preps** (`draft prep` → `dspark_draft_block`, `verify prep` → `dsa_target_verify`):
//!   per step, `ops` = top-level ops inside less the reads, `launches` = how many of those
//!   ops launch a kernel (`cudaLaunchKernel*`, `cuLaunchKernel*` inside them; the raw count
//!   of launch calls is in the report), `reads` = reads inside, `ops_before_read` = ops
//!   before the first read; the profile takes each count's median over steps, rounded.
//!   The arm seen is `eager_sync` if it reads, else `graph` if a `cudaGraphLaunch` lies
//!   inside (its `ops` leave out an op that holds the replay), else `eager_device`; the arms
//!   not seen keep the base profile's entries. The arm's own `op_us` = (median prep duration
//!   − reads × `read_us` − graph replays × `graph_launch_us`) / ops, none when ops = 0, and
//!   floored at 0.
//! * A trace whose steps hold neither `draft prep` nor `verify prep` (another engine's
//!   trace) keeps the base profile's program and preps; the report then lists the host
//!   segments between consecutive syncs instead.
//!
//! The report also has a per-step table: wall time, host busy (top-level op time plus the
//! annotations that hold no op), syncs (syncing ops plus sync calls outside every op),
//! kernel launches, graph launches, GPU busy (union of kernel / memcpy / memset intervals
//! inside the step) and GPU idle (wall − busy).
//!
//! Every failure is one line that names the trace file.

use super::host_profile::{ArmOps, HostProfile, Item, PrepOps, Sourced};
use anyhow::{anyhow, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// A derived host profile and the markdown report of how it was derived.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub profile: HostProfile,
    /// Markdown: what was found, the derived values, the per-step table.
    pub report: String,
}

/// Read the Chrome trace at `path` and derive a host profile from it; what the trace does
/// not show is taken from `base`.
pub fn calibrate_trace(path: &Path, base: &HostProfile) -> Result<Calibration> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("{}: cannot read the trace: {e}", path.display()))?;
    calibrate_text(path, &text, base)
}

/// [`calibrate_trace`] on trace text already read; `path` names it in messages and sources.
fn calibrate_text(path: &Path, text: &str, base: &HostProfile) -> Result<Calibration> {
    let file = path.display().to_string();
    let trace = Trace::parse(&file, text)?;
    Analysis::new(&file, &trace)?.calibrate(path, base)
}

/// Slack when comparing µs timestamps: 10 ns plus a few ulps of the timestamp itself
/// (exports with epoch-µs timestamps keep only ~0.25 µs of resolution).
fn tol(t: f64) -> f64 {
    0.01 + t.abs() * 4.0 * f64::EPSILON
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    ts: f64,
    end: f64,
}

impl Span {
    fn dur(self) -> f64 {
        self.end - self.ts
    }

    fn contains(self, other: Span) -> bool {
        other.ts >= self.ts - tol(self.ts) && other.end <= self.end + tol(self.end)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cat {
    CpuOp,
    Annotation,
    Runtime,
    Kernel,
    Memcpy,
    Memset,
}

impl Cat {
    fn of(cat: &str) -> Option<Cat> {
        match cat.to_ascii_lowercase().as_str() {
            "cpu_op" | "operator" => Some(Cat::CpuOp),
            "user_annotation" => Some(Cat::Annotation),
            "cuda_runtime" | "runtime" | "cuda_driver" => Some(Cat::Runtime),
            "kernel" => Some(Cat::Kernel),
            "gpu_memcpy" | "memcpy" => Some(Cat::Memcpy),
            "gpu_memset" | "memset" => Some(Cat::Memset),
            _ => None,
        }
    }

    fn is_host(self) -> bool {
        matches!(self, Cat::CpuOp | Cat::Annotation | Cat::Runtime)
    }
}

/// A host event: a cpu_op, an annotation or a runtime/driver call.
#[derive(Debug, Clone)]
struct HostEvent {
    name: String,
    span: Span,
    corr: Option<u64>,
}

#[derive(Debug, Default)]
struct ThreadEvents {
    ops: Vec<HostEvent>,
    annotations: Vec<HostEvent>,
    runtime: Vec<HostEvent>,
}

/// The events of a trace that calibration uses.
#[derive(Debug)]
struct Trace {
    threads: BTreeMap<(String, String), ThreadEvents>,
    /// GPU intervals (kernels, copies, sets), sorted by start.
    gpu: Vec<Span>,
    /// `gpu_memcpy` names by correlation id.
    memcpy_by_corr: BTreeMap<u64, String>,
    any_runtime: bool,
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn is_profiler_step(name: &str) -> bool {
    name.strip_prefix("ProfilerStep#")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl Trace {
    fn parse(file: &str, text: &str) -> Result<Trace> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| anyhow!("{file}: not a JSON trace: {e}"))?;
        let events = match &root {
            Value::Array(events) => events,
            Value::Object(map) => match map.get("traceEvents") {
                Some(Value::Array(events)) => events,
                Some(other) => {
                    return Err(anyhow!(
                        "{file}: `traceEvents` is {}, not an array of events",
                        json_kind(other)
                    ))
                }
                None => {
                    return Err(anyhow!(
                        "{file}: no `traceEvents` array: not a Chrome trace (torch.profiler's export_chrome_trace writes one)"
                    ))
                }
            },
            other => {
                return Err(anyhow!(
                    "{file}: the trace is {}, not an object with `traceEvents` or an array of events",
                    json_kind(other)
                ))
            }
        };
        let mut trace = Trace {
            threads: BTreeMap::new(),
            gpu: Vec::new(),
            memcpy_by_corr: BTreeMap::new(),
            any_runtime: false,
        };
        for (i, event) in events.iter().enumerate() {
            let Some(obj) = event.as_object() else {
                return Err(anyhow!(
                    "{file}: traceEvents[{i}] is {}, not an event object",
                    json_kind(event)
                ));
            };
            if obj.get("ph").and_then(Value::as_str) != Some("X") {
                continue;
            }
            let Some(cat) = obj.get("cat").and_then(Value::as_str).and_then(Cat::of) else {
                continue;
            };
            let at = |what: &str| format!("{file}: traceEvents[{i}] ({what})");
            let name = match obj.get("name") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => {
                    return Err(anyhow!(
                        "{}: `name` is {}, not a string",
                        at("a complete event"),
                        json_kind(v)
                    ))
                }
                None => return Err(anyhow!("{}: no `name`", at("a complete event"))),
            };
            let number = |key: &str| -> Result<f64> {
                match obj.get(key) {
                    Some(Value::Number(n)) => n
                        .as_f64()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| anyhow!("{}: `{key}` = {n} is not finite", at(&name))),
                    Some(v) => Err(anyhow!(
                        "{}: `{key}` is {}, not a number",
                        at(&name),
                        json_kind(v)
                    )),
                    None => Err(anyhow!("{}: no `{key}`", at(&name))),
                }
            };
            let ts = number("ts")?;
            let dur = number("dur")?;
            if dur < 0.0 {
                return Err(anyhow!("{}: negative `dur` {dur}", at(&name)));
            }
            let span = Span { ts, end: ts + dur };
            let corr = match obj.get("args").and_then(|a| a.get("correlation")) {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) => Some(n.as_u64().ok_or_else(|| {
                    anyhow!(
                        "{}: `args.correlation` = {n} is not a whole number",
                        at(&name)
                    )
                })?),
                Some(v) => {
                    return Err(anyhow!(
                        "{}: `args.correlation` is {}, not a number",
                        at(&name),
                        json_kind(v)
                    ))
                }
            };
            if cat.is_host() {
                let id = |key: &str| -> Result<String> {
                    match obj.get(key) {
                        Some(Value::Number(n)) => Ok(n.to_string()),
                        Some(Value::String(s)) => Ok(s.clone()),
                        Some(v) => Err(anyhow!(
                            "{}: `{key}` is {}, not a number or a string",
                            at(&name),
                            json_kind(v)
                        )),
                        None => Err(anyhow!("{}: no `{key}`", at(&name))),
                    }
                };
                let thread = trace.threads.entry((id("pid")?, id("tid")?)).or_default();
                let event = HostEvent { name, span, corr };
                match cat {
                    Cat::CpuOp if is_profiler_step(&event.name) => thread.annotations.push(event),
                    Cat::CpuOp => thread.ops.push(event),
                    Cat::Annotation => thread.annotations.push(event),
                    _ => {
                        trace.any_runtime = true;
                        thread.runtime.push(event)
                    }
                }
            } else {
                if cat == Cat::Memcpy {
                    if let Some(c) = corr {
                        trace.memcpy_by_corr.insert(c, name);
                    }
                }
                trace.gpu.push(span);
            }
        }
        let by_start = |a: &HostEvent, b: &HostEvent| {
            a.span
                .ts
                .total_cmp(&b.span.ts)
                .then(b.span.end.total_cmp(&a.span.end))
        };
        for thread in trace.threads.values_mut() {
            thread.ops.sort_by(by_start);
            thread.annotations.sort_by(by_start);
            thread.runtime.sort_by(by_start);
        }
        trace.gpu.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        Ok(trace)
    }
}

/// What a runtime (or driver) call is, by name.
#[derive(Debug, Clone, Copy, Default)]
struct RtKind {
    launch: bool,
    graph: bool,
    sync: bool,
    memcpy: bool,
}

fn rt_kind(name: &str) -> RtKind {
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
struct Rt {
    span: Span,
    kind: RtKind,
    corr: Option<u64>,
}

/// A top-level op on the main thread and what lies inside it.
#[derive(Debug, Clone)]
struct TopOp {
    name: String,
    span: Span,
    sync: bool,
    upload: bool,
    /// Launch calls inside (driver calls inside a runtime launch not counted twice).
    launches: usize,
    graph: bool,
}

impl TopOp {
    fn read(&self) -> bool {
        self.sync && !self.upload
    }
}

/// A point where the host waited for the GPU: a syncing op or a bare sync call.
#[derive(Debug, Clone)]
struct SyncPoint {
    name: String,
    span: Span,
}

/// Indices of sorted-by-start items whose span lies inside `outer`.
fn inside<T>(items: &[T], span: impl Fn(&T) -> Span, outer: Span) -> Vec<usize> {
    let lo = items.partition_point(|x| span(x).ts < outer.ts - tol(outer.ts));
    let hi = items.partition_point(|x| span(x).ts <= outer.end + tol(outer.end));
    (lo..hi.max(lo))
        .filter(|&i| outer.contains(span(&items[i])))
        .collect()
}

/// The `p`-th percentile (0..=100) with linear interpolation between ranks.
fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (rank - lo as f64))
}

/// A derived value with its source, or the base profile's where the trace has none.
fn derived(
    value: Option<f64>,
    source: impl FnOnce() -> String,
    base: &Sourced<f64>,
    kept: &str,
) -> Sourced<f64> {
    match value {
        Some(v) => Sourced {
            value: round3(v),
            source: source(),
        },
        None => Sourced {
            value: base.value,
            source: format!("{kept}; {}", base.source),
        },
    }
}

fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// Median of counts, rounded (half away from zero).
fn median_count(values: impl IntoIterator<Item = usize>) -> u32 {
    let v: Vec<f64> = values.into_iter().map(|c| c as f64).collect();
    median(&v).map_or(0, |m| m.round() as u32)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Total length of the union of `spans` clipped to `window`.
fn union_len(spans: &[Span], window: Span) -> f64 {
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

/// One step's numbers for the table.
#[derive(Debug, Clone)]
struct StepRow {
    span: Span,
    host_busy: f64,
    syncs: usize,
    launches: usize,
    graph_launches: usize,
    gpu_busy: f64,
}

/// One prep annotation in one step.
#[derive(Debug, Clone, Copy)]
struct PrepStep {
    dur: f64,
    /// Host time its reads spent waiting for the GPU to drain.
    waits: f64,
    ops: usize,
    graph_ops: usize,
    launches: usize,
    launch_calls: usize,
    reads: usize,
    ops_before_read: usize,
    graph_launches: usize,
}

struct Analysis<'t> {
    file: &'t str,
    trace: &'t Trace,
    main: (String, String),
    main_ops: usize,
    threads_with_ops: usize,
    rts: Vec<Rt>,
    /// Launch calls, driver calls nested in runtime launches dropped.
    launches: Vec<Span>,
    tops: Vec<TopOp>,
    annotations: &'t [HostEvent],
    sync_points: Vec<SyncPoint>,
    steps: Vec<Span>,
    step_kind: &'static str,
    max_gpu_dur: f64,
}

impl<'t> Analysis<'t> {
    fn new(file: &'t str, trace: &'t Trace) -> Result<Analysis<'t>> {
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
        let rts: Vec<Rt> = thread
            .runtime
            .iter()
            .map(|e| Rt {
                span: e.span,
                kind: rt_kind(&e.name),
                corr: e.corr,
            })
            .collect();
        let mut launches: Vec<Span> = Vec::new();
        for r in rts.iter().filter(|r| r.kind.launch) {
            if launches.last().is_some_and(|l| l.contains(r.span)) {
                continue;
            }
            launches.push(r.span);
        }

        // Top-level ops: ops are sorted by start, longest first, so a nested op always
        // comes after the op that holds it.
        let mut tops: Vec<TopOp> = Vec::new();
        for op in &thread.ops {
            if tops.last().is_some_and(|t| t.span.contains(op.span)) {
                continue;
            }
            let within = inside(&rts, |r| r.span, op.span);
            let mut sync = false;
            let mut graph = false;
            let (mut htod, mut other_copy) = (false, false);
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
        let max_gpu_dur = trace.gpu.iter().map(|s| s.dur()).fold(0.0, f64::max);
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
            sync_points,
            steps,
            step_kind,
            max_gpu_dur,
        })
    }

    fn tops_in(&self, span: Span) -> Vec<&TopOp> {
        inside(&self.tops, |t| t.span, span)
            .into_iter()
            .map(|i| &self.tops[i])
            .collect()
    }

    fn rts_in(&self, span: Span) -> Vec<&Rt> {
        inside(&self.rts, |r| r.span, span)
            .into_iter()
            .map(|i| &self.rts[i])
            .collect()
    }

    /// The annotations directly inside `step` (not inside another one inside it), in order.
    fn children(&self, step: Span) -> Vec<&'t HostEvent> {
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

    fn gpu_busy(&self, window: Span) -> f64 {
        let gpu = &self.trace.gpu;
        let from = window.ts - self.max_gpu_dur;
        let lo = gpu.partition_point(|s| s.ts < from);
        let hi = gpu.partition_point(|s| s.ts <= window.end);
        union_len(&gpu[lo..hi.max(lo)], window)
    }

    /// How long a read waited for the GPU: from its start to the end of the last earlier GPU
    /// work (started before the read) that finished while it was blocked; 0 when the GPU was
    /// already idle. The read's own copy starts after it and is part of its cost.
    fn read_wait(&self, read: Span) -> f64 {
        let gpu = &self.trace.gpu;
        let hi = gpu.partition_point(|s| s.ts < read.ts);
        let drained = gpu[..hi]
            .iter()
            .filter(|g| g.end >= read.ts && g.end <= read.end)
            .map(|g| g.end)
            .fold(read.ts, f64::max);
        drained - read.ts
    }

    fn step_row(&self, step: Span) -> StepRow {
        let tops = self.tops_in(step);
        let mut host_busy: f64 = tops.iter().map(|t| t.span.dur()).sum();
        for child in self.children(step) {
            if self.tops_in(child.span).is_empty() {
                host_busy += child.span.dur();
            }
        }
        StepRow {
            span: step,
            host_busy,
            syncs: inside(&self.sync_points, |s| s.span, step).len(),
            launches: inside(&self.launches, |s| *s, step).len(),
            graph_launches: self.rts_in(step).iter().filter(|r| r.kind.graph).count(),
            gpu_busy: self.gpu_busy(step),
        }
    }

    fn prep_step(&self, span: Span) -> PrepStep {
        let tops = self.tops_in(span);
        let reads = tops.iter().filter(|t| t.read()).count();
        let ops: Vec<&&TopOp> = tops.iter().filter(|t| !t.read()).collect();
        let ops_before_read = match tops.iter().position(|t| t.read()) {
            Some(first) => tops[..first].len(),
            None => 0,
        };
        PrepStep {
            dur: span.dur(),
            waits: tops
                .iter()
                .filter(|t| t.read())
                .map(|t| self.read_wait(t.span))
                .sum(),
            ops: ops.len(),
            graph_ops: ops.iter().filter(|t| !t.graph).count(),
            launches: ops.iter().filter(|t| t.launches > 0).count(),
            launch_calls: inside(&self.launches, |s| *s, span).len(),
            reads,
            ops_before_read,
            graph_launches: self.rts_in(span).iter().filter(|r| r.kind.graph).count(),
        }
    }

    fn calibrate(&self, path: &Path, base: &HostProfile) -> Result<Calibration> {
        let file = self.file;
        let n_steps = self.steps.len();
        let step_tops: Vec<&TopOp> = self.steps.iter().flat_map(|&s| self.tops_in(s)).collect();
        let step_rts: Vec<&Rt> = self.steps.iter().flat_map(|&s| self.rts_in(s)).collect();
        let from = format!("metaprep calibrate {file}");
        let kept =
            |what: &str| format!("kept from base profile `{}`: {file} has {what}", base.name);

        let plain: Vec<f64> = step_tops
            .iter()
            .filter(|t| !t.sync)
            .map(|t| t.span.dur())
            .collect();
        let op_us = derived(
            median(&plain),
            || {
                format!(
                "{from}: median duration of {} top-level cpu_ops that do not sync, main thread, {n_steps} steps",
                plain.len()
            )
            },
            &base.op_us,
            &kept("no top-level cpu_op that does not sync inside its steps"),
        );
        let reads: Vec<f64> = step_tops
            .iter()
            .filter(|t| t.read())
            .map(|t| t.span.dur() - self.read_wait(t.span))
            .collect();
        let read_us = derived(
            median(&reads),
            || {
                format!(
                "{from}: median over {} reads (top-level cpu_ops that sync and are not uploads) in {n_steps} steps of each read's duration less its wait for the GPU (until the last GPU work that ended while it blocked)",
                reads.len()
            )
            },
            &base.read_us,
            &kept("no read inside its steps"),
        );
        let graphs: Vec<f64> = step_rts
            .iter()
            .filter(|r| r.kind.graph)
            .map(|r| r.span.dur())
            .collect();
        let graph_launch_us = derived(
            median(&graphs),
            || {
                format!(
                    "{from}: median duration of {} cudaGraphLaunch calls in {n_steps} steps",
                    graphs.len()
                )
            },
            &base.graph_launch_us,
            &kept("no cudaGraphLaunch inside its steps"),
        );
        // GPU work launched from the steps: the host side is in the steps, the GPU side may
        // run later, so take GPU intervals that start inside a step.
        let gpu_durs: Vec<f64> = self
            .trace
            .gpu
            .iter()
            .filter(|g| self.steps.iter().any(|s| g.ts >= s.ts && g.ts <= s.end))
            .map(|g| g.dur())
            .collect();
        let kernel_us = derived(
            median(&gpu_durs),
            || {
                format!(
                "{from}: median duration of {} GPU kernels and copies starting inside {n_steps} steps",
                gpu_durs.len()
            )
            },
            &base.kernel_us,
            &kept("no GPU event inside its steps"),
        );
        let uploads: Vec<&TopOp> = step_tops.iter().copied().filter(|t| t.upload).collect();
        let upload_durs: Vec<f64> = uploads.iter().map(|t| t.span.dur()).collect();
        let (upload_us, upload_syncs) = match median(&upload_durs) {
            Some(v) => {
                let syncing = uploads.iter().filter(|t| t.sync).count();
                (
                    Sourced {
                        value: round3(v),
                        source: format!(
                            "{from}: median duration of {} uploads (top-level cpu_ops with an HtoD cudaMemcpyAsync) in {n_steps} steps",
                            uploads.len()
                        ),
                    },
                    Sourced {
                        value: syncing > 0,
                        source: format!(
                            "{from}: {syncing} of {} uploads hold a stream sync",
                            uploads.len()
                        ),
                    },
                )
            }
            None => (
                Sourced {
                    value: base.upload_us.value,
                    source: format!(
                        "{}; {}",
                        kept("no HtoD upload inside its steps"),
                        base.upload_us.source
                    ),
                },
                Sourced {
                    value: base.upload_syncs.value,
                    source: format!(
                        "{}; {}",
                        kept("no HtoD upload inside its steps"),
                        base.upload_syncs.source
                    ),
                },
            ),
        };

        // The annotation sequence most steps share.
        let sequences: Vec<Vec<&HostEvent>> =
            self.steps.iter().map(|&s| self.children(s)).collect();
        let mut counts: BTreeMap<Vec<&str>, (usize, usize)> = BTreeMap::new();
        for (i, seq) in sequences.iter().enumerate() {
            let names: Vec<&str> = seq.iter().map(|a| a.name.as_str()).collect();
            counts.entry(names).or_insert((0, i)).0 += 1;
        }
        let (modal, _) = counts
            .iter()
            .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1)))
            .map(|(k, v)| (k.clone(), *v))
            .expect("at least one step");
        let typical: Vec<&Vec<&HostEvent>> = sequences
            .iter()
            .filter(|seq| {
                seq.iter()
                    .map(|a| a.name.as_str())
                    .eq(modal.iter().copied())
            })
            .collect();
        let n_typical = typical.len();
        let foreign = !modal
            .iter()
            .any(|n| *n == "draft prep" || *n == "verify prep");

        let mut program: Vec<Item> = Vec::new();
        let mut program_rows: Vec<String> = Vec::new();
        if foreign {
            program = base.program.clone();
        } else {
            for (j, name) in modal.iter().enumerate() {
                let spans: Vec<Span> = typical.iter().map(|seq| seq[j].span).collect();
                let op_counts = || spans.iter().map(|&s| self.tops_in(s).len());
                let dur_med =
                    median(&spans.iter().map(|s| s.dur()).collect::<Vec<_>>()).unwrap_or(0.0);
                let ops = median_count(op_counts());
                let item = match *name {
                    "draft prep" => Item::DraftPrep,
                    "draft forward" => Item::DraftForward,
                    "verify prep" => Item::VerifyPrep,
                    "verify forward" => Item::VerifyForward,
                    "accept" => Item::Accept { ops },
                    _ if ops > 0 => Item::Host {
                        name: name.to_string(),
                        us: 0.0,
                        ops,
                        source: format!(
                            "{from}: median {ops} top-level cpu_ops inside `{name}` over {n_typical} steps"
                        ),
                    },
                    _ => Item::Host {
                        name: name.to_string(),
                        us: round3(dur_med),
                        ops: 0,
                        source: format!(
                            "{from}: median duration of `{name}` over {n_typical} steps (no cpu_op inside: host busy in Python)"
                        ),
                    },
                };
                let (us, ops_cell) = match &item {
                    Item::Host { us, ops, .. } => (format!("{us:.3}"), ops.to_string()),
                    Item::Accept { ops } => ("".into(), ops.to_string()),
                    _ => ("".into(), "".into()),
                };
                program_rows.push(format!(
                    "| {} | `{name}` | {} | {ops_cell} | {us} | {dur_med:.3} |",
                    j + 1,
                    item_kind(&item)
                ));
                program.push(item);
            }
        }

        let mut preps = base.preps.clone();
        let mut prep_rows: Vec<String> = Vec::new();
        if !foreign {
            for (ann, family) in [
                ("draft prep", "dspark_draft_block"),
                ("verify prep", "dsa_target_verify"),
            ] {
                let Some(j) = modal.iter().position(|n| *n == ann) else {
                    continue;
                };
                let per: Vec<PrepStep> = typical
                    .iter()
                    .map(|seq| self.prep_step(seq[j].span))
                    .collect();
                let med = |f: fn(&PrepStep) -> usize| median_count(per.iter().map(f));
                let dur = median(&per.iter().map(|p| p.dur).collect::<Vec<_>>()).unwrap_or(0.0);
                let reads = med(|p| p.reads);
                let graph_launches = med(|p| p.graph_launches);
                let (arm, mut ops) = if reads > 0 {
                    (
                        "eager_sync",
                        ArmOps {
                            ops: med(|p| p.ops),
                            launches: med(|p| p.launches),
                            reads,
                            ops_before_read: med(|p| p.ops_before_read),
                            op_us: None,
                        },
                    )
                } else if graph_launches > 0 {
                    (
                        "graph",
                        ArmOps {
                            ops: med(|p| p.graph_ops),
                            launches: med(|p| p.launches),
                            ..ArmOps::default()
                        },
                    )
                } else {
                    (
                        "eager_device",
                        ArmOps {
                            ops: med(|p| p.ops),
                            launches: med(|p| p.launches),
                            ..ArmOps::default()
                        },
                    )
                };
                // A graph arm's replay-holding op (rare) is not an op; never more launches.
                ops.launches = ops.launches.min(ops.ops);
                let waits = median(&per.iter().map(|p| p.waits).collect::<Vec<_>>()).unwrap_or(0.0);
                let host = dur
                    - waits
                    - f64::from(reads) * read_us.value
                    - f64::from(graph_launches) * graph_launch_us.value;
                if ops.ops > 0 {
                    ops.op_us = Some(round3((host / f64::from(ops.ops)).max(0.0)));
                }
                let base_prep = base.preps.get(family).cloned().unwrap_or(PrepOps {
                    source: String::new(),
                    eager_sync: ArmOps::default(),
                    eager_device: ArmOps::default(),
                    graph: ArmOps::default(),
                    graph_upload: None,
                    kernel_us: None,
                    kernel_us_by_batch: None,
                });
                let mut prep = base_prep.clone();
                match arm {
                    "eager_sync" => prep.eager_sync = ops,
                    "graph" => prep.graph = ops,
                    _ => prep.eager_device = ops,
                }
                prep.source = format!(
                    "{from}: `{ann}` over {} steps is the {arm} arm (medians: {} ops, {} launching, {} reads, {} ops before the first read, {dur:.3} us); op_us = ({dur:.3} - {waits:.3} us waiting in reads - {reads} x read_us - {graph_launches} x graph_launch_us) / ops; the other arms kept from base profile `{}` ({})",
                    per.len(),
                    ops.ops,
                    ops.launches,
                    ops.reads,
                    ops.ops_before_read,
                    base.name,
                    base_prep.source
                );
                prep_rows.push(format!(
                    "| `{ann}` | {family} | {arm} | {} | {} ({} calls) | {} | {} | {} | {graph_launches} | {dur:.3} |",
                    ops.ops,
                    ops.launches,
                    median_count(per.iter().map(|p| p.launch_calls)),
                    ops.reads,
                    ops.ops_before_read,
                    ops.op_us.map_or("-".to_string(), |v| format!("{v:.3}")),
                ));
                preps.insert(family.to_string(), prep);
            }
        }

        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into());
        let profile = HostProfile {
            name: format!("calibrated-{stem}"),
            source: format!("metaprep calibrate {file}: {n_steps} steps"),
            op_us,
            kernel_us,
            read_us,
            graph_launch_us,
            upload_us,
            upload_syncs,
            preps,
            program,
            // A trace does not time the other read paths: a profile for eager-pinned or
            // eager-mapped needs scripts/torch_read_paths.py.
            pinned_read_us: None,
            mapped_read_us: None,
        };
        let profile = HostProfile::parse(&profile.to_json())
            .map_err(|e| anyhow!("{file}: the derived profile is not valid: {e:#}"))?;

        // The report.
        let mut r = String::new();
        let _ = writeln!(r, "# Host calibration from `{file}`\n");
        let _ = writeln!(
            r,
            "* main thread: pid {}, tid {} ({} cpu_ops; {} thread(s) hold cpu_ops)",
            self.main.0, self.main.1, self.main_ops, self.threads_with_ops
        );
        let _ = writeln!(r, "* steps: {n_steps} ({})", self.step_kind);
        let _ = writeln!(
            r,
            "* annotation sequence of {n_typical} of {n_steps} steps: {}",
            if modal.is_empty() {
                "(none)".to_string()
            } else {
                modal.join(" → ")
            }
        );
        let _ = writeln!(r, "* profile `{}`, base `{}`\n", profile.name, base.name);
        let _ = writeln!(r, "## Derived values\n");
        let _ = writeln!(r, "| value | | how |\n|---|---|---|");
        for (name, v) in [
            ("op_us", &profile.op_us),
            ("read_us", &profile.read_us),
            ("graph_launch_us", &profile.graph_launch_us),
            ("upload_us", &profile.upload_us),
        ] {
            let _ = writeln!(r, "| {name} | {:.3} | {} |", v.value, v.source);
        }
        let _ = writeln!(
            r,
            "| upload_syncs | {} | {} |\n",
            profile.upload_syncs.value, profile.upload_syncs.source
        );
        let _ = writeln!(
            r,
            "Rules: top-level op = a cpu_op not inside another; a syncing op holds a cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize / blocking cudaMemcpy; an upload holds an HtoD copy; a read is a syncing op that is not an upload. read_us leaves out each read's wait for the GPU, which is time the GPU, not the host, decides.\n"
        );
        let _ = writeln!(r, "## Program\n");
        if foreign {
            let _ = writeln!(
                r,
                "No step holds `draft prep` or `verify prep`: not a metaprep-annotated engine, so the program and preps are kept from base profile `{}`.\n",
                base.name
            );
        } else {
            let _ = writeln!(
                r,
                "| # | annotation | item | ops | us | median µs |\n|---|---|---|---|---|---|"
            );
            for row in &program_rows {
                let _ = writeln!(r, "{row}");
            }
            let _ = writeln!(r, "\n## Preps\n");
            let _ = writeln!(
                r,
                "| annotation | family | arm | ops | launches | reads | ops before read | op_us | graph replays | median µs |\n|---|---|---|---|---|---|---|---|---|---|"
            );
            for row in &prep_rows {
                let _ = writeln!(r, "{row}");
            }
            let _ = writeln!(
                r,
                "\nArms not seen in the trace keep base profile `{}`'s entries.\n",
                base.name
            );
        }
        let _ = writeln!(r, "## Steps\n");
        let _ = writeln!(
            r,
            "| step | wall µs | host busy µs | syncs | launches | graph launches | GPU busy µs | GPU idle µs |\n|---|---|---|---|---|---|---|---|"
        );
        for (i, &step) in self.steps.iter().enumerate() {
            let row = self.step_row(step);
            let _ = writeln!(
                r,
                "| {i} | {:.3} | {:.3} | {} | {} | {} | {:.3} | {:.3} |",
                row.span.dur(),
                row.host_busy,
                row.syncs,
                row.launches,
                row.graph_launches,
                row.gpu_busy,
                (row.span.dur() - row.gpu_busy).max(0.0)
            );
        }
        if foreign {
            let _ = writeln!(r, "\n{}", self.segments_report());
        }
        Ok(Calibration { profile, report: r })
    }

    /// Host segments between consecutive syncs, medians over the steps that have the most
    /// common number of segments.
    fn segments_report(&self) -> String {
        struct Seg {
            until: String,
            dur: f64,
            launches: usize,
            ops: usize,
        }
        let per_step: Vec<Vec<Seg>> = self
            .steps
            .iter()
            .map(|&step| {
                let syncs = inside(&self.sync_points, |s| s.span, step);
                let mut segs = Vec::new();
                let mut from = step.ts;
                let ends = syncs
                    .iter()
                    .map(|&i| {
                        let s = &self.sync_points[i];
                        (s.span.ts, s.span.end, format!("`{}`", s.name))
                    })
                    .chain(std::iter::once((
                        step.end,
                        step.end,
                        "step end".to_string(),
                    )));
                for (ts, end, until) in ends {
                    let span = Span {
                        ts: from,
                        end: ts.max(from),
                    };
                    segs.push(Seg {
                        until,
                        dur: span.dur(),
                        launches: inside(&self.launches, |s| *s, span).len(),
                        ops: self.tops_in(span).len(),
                    });
                    from = end.max(from);
                }
                segs
            })
            .collect();
        let mut by_len: BTreeMap<usize, usize> = BTreeMap::new();
        for segs in &per_step {
            *by_len.entry(segs.len()).or_default() += 1;
        }
        let len = by_len
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map_or(0, |(l, _)| *l);
        let same: Vec<&Vec<Seg>> = per_step.iter().filter(|s| s.len() == len).collect();
        let mut r = String::new();
        let _ = writeln!(
            r,
            "## Host segments between syncs\n\n{} of {} steps have {} segment(s); medians over those.\n",
            same.len(),
            self.steps.len(),
            len
        );
        let _ = writeln!(
            r,
            "| # | until | median µs | launches | top-level ops |\n|---|---|---|---|---|"
        );
        for k in 0..len {
            let durs: Vec<f64> = same.iter().map(|s| s[k].dur).collect();
            let _ = writeln!(
                r,
                "| {k} | {} | {:.3} | {} | {} |",
                same[0][k].until,
                median(&durs).unwrap_or(0.0),
                median_count(same.iter().map(|s| s[k].launches)),
                median_count(same.iter().map(|s| s[k].ops)),
            );
        }
        r
    }
}

fn item_kind(item: &Item) -> &'static str {
    match item {
        Item::Host { .. } => "host",
        Item::DraftPrep => "draft_prep",
        Item::DraftForward => "draft_forward",
        Item::VerifyPrep => "verify_prep",
        Item::VerifyForward => "verify_forward",
        Item::Accept { .. } => "accept",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A base profile with distinctive values, so kept values are recognisable.
    const BASE: &str = r#"{
      "name": "base",
      "source": "test base",
      "op_us": { "value": 1.5, "source": "base op" },
      "kernel_us": { "value": 2.5, "source": "base kernel" },
      "read_us": { "value": 2.5, "source": "base read" },
      "graph_launch_us": { "value": 3.5, "source": "base graph" },
      "upload_us": { "value": 4.5, "source": "base upload" },
      "upload_syncs": { "value": false, "source": "base upload syncs" },
      "preps": {
        "dspark_draft_block": {
          "source": "base draft",
          "eager_sync": { "ops": 12, "launches": 9, "reads": 2, "ops_before_read": 3 },
          "eager_device": { "ops": 11, "launches": 9 },
          "graph": { "ops": 5, "launches": 1 }
        },
        "dsa_target_verify": {
          "source": "base verify",
          "eager_sync": { "ops": 7, "launches": 5, "reads": 1, "ops_before_read": 2 },
          "eager_device": { "ops": 6, "launches": 5 },
          "graph": { "ops": 4, "launches": 2 }
        }
      },
      "program": [
        { "kind": "host", "name": "base scheduler", "us": 77.0, "source": "base" },
        { "kind": "draft_prep" },
        { "kind": "draft_forward" },
        { "kind": "verify_prep" },
        { "kind": "verify_forward" },
        { "kind": "accept", "ops": 3 }
      ]
    }"#;

    fn base() -> HostProfile {
        HostProfile::parse(BASE).unwrap()
    }

    fn fixture_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_trace_small.json")
    }

    fn fixture_json() -> Value {
        serde_json::from_str(&std::fs::read_to_string(fixture_path()).unwrap()).unwrap()
    }

    fn fixture() -> Calibration {
        calibrate_trace(&fixture_path(), &base()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Calibrate `text` as if read from `trace.json`; the error, checked to be one line
    /// that names the file.
    fn err_of(text: &str) -> String {
        let e = calibrate_text(Path::new("/tmp/x/trace.json"), text, &base())
            .map(|_| ())
            .unwrap_err();
        let e = format!("{e:#}");
        assert!(!e.contains('\n'), "not one line: {e}");
        assert!(e.starts_with("/tmp/x/trace.json: "), "{e}");
        e
    }

    /// The fixture with the annotations `drop` removed.
    fn without_annotations(drop: &[&str]) -> String {
        let mut v = fixture_json();
        v["traceEvents"].as_array_mut().unwrap().retain(|e| {
            !(e["cat"] == "user_annotation"
                && drop.iter().any(|d| {
                    let name = e["name"].as_str().unwrap();
                    name == *d || (*d == "ProfilerStep" && is_profiler_step(name))
                }))
        });
        v.to_string()
    }

    #[test]
    fn derives_the_costs_by_hand_arithmetic() {
        let p = fixture().profile;
        // Top-level non-syncing ops in the 3 steps (the warm-up aten::zeros and the other
        // thread's ops are outside): arange 8 ×3, cumsum 8.5/9/9.5, add 10 ×3, argmax 12 ×3,
        // softmax 11 ×3, copy_ 6 ×3, add_ 7 ×4 → 22 values; the 11th and 12th sorted are
        // 8.5 and 9 → median 8.75.
        assert!(close(p.op_us.value, 8.75), "{}", p.op_us.value);
        // Reads (aten::item): 30, 24, 36, none waiting (the GPU was idle before each; its
        // own DtoH copy is part of it) → median 30. The syncing uploads (aten::to, HtoD)
        // are not reads.
        assert!(close(p.read_us.value, 30.0), "{}", p.read_us.value);
        // cudaGraphLaunch: 6,7,8 (draft forward) 5,6,9 (verify prep) 7,7,10 (verify
        // forward) → sorted 5,6,6,7,7,7,8,9,10 → 7.
        assert!(close(p.graph_launch_us.value, 7.0));
        // Uploads 15, 17, 16 → 16, and they sync.
        assert!(close(p.upload_us.value, 16.0));
        assert!(p.upload_syncs.value);
        for s in [
            &p.op_us.source,
            &p.read_us.source,
            &p.graph_launch_us.source,
        ] {
            assert!(s.contains("torch_trace_small.json"), "{s}");
        }
        assert_eq!(p.name, "calibrated-torch_trace_small");
        assert!(p.source.ends_with(": 3 steps"), "{}", p.source);
    }

    #[test]
    fn program_follows_the_annotations_in_order() {
        let p = fixture().profile;
        let kinds: Vec<&str> = p.program.iter().map(item_kind).collect();
        assert_eq!(
            kinds,
            [
                "host",
                "draft_prep",
                "draft_forward",
                "host",
                "verify_prep",
                "verify_forward",
                "accept"
            ]
        );
        // scheduler: no ops, durations 50, 52, 48 → us = 50.
        match &p.program[0] {
            Item::Host {
                name,
                us,
                ops,
                source,
            } => {
                assert_eq!((name.as_str(), *ops), ("scheduler", 0));
                assert!(close(*us, 50.0));
                assert!(source.contains("torch_trace_small.json"));
            }
            other => panic!("{other:?}"),
        }
        // sampling: argmax and softmax (holding _softmax) → 2 ops, us 0.
        match &p.program[3] {
            Item::Host { name, us, ops, .. } => {
                assert_eq!((name.as_str(), *ops), ("sampling", 2));
                assert_eq!(*us, 0.0);
            }
            other => panic!("{other:?}"),
        }
        // accept: 1, 1, 2 add_ → median 1.
        assert_eq!(p.program[6], Item::Accept { ops: 1 });
    }

    #[test]
    fn preps_are_counted_per_arm_and_the_rest_kept() {
        let p = fixture().profile;
        let b = base();
        let draft = &p.preps["dspark_draft_block"];
        // item (the read, first) then to (upload), arange, cumsum, add: 4 ops, 3 launching.
        assert_eq!(
            (
                draft.eager_sync.ops,
                draft.eager_sync.launches,
                draft.eager_sync.reads,
                draft.eager_sync.ops_before_read
            ),
            (4, 3, 1, 0)
        );
        // Durations read + upload + cumsum + 28: 81.5, 78, 89.5 → 81.5;
        // (81.5 − 0 waiting − 1 × 30) / 4 = 12.875.
        assert!(close(draft.eager_sync.op_us.unwrap(), 12.875));
        assert_eq!(
            draft.eager_device,
            b.preps["dspark_draft_block"].eager_device
        );
        assert_eq!(draft.graph, b.preps["dspark_draft_block"].graph);
        let verify = &p.preps["dsa_target_verify"];
        // copy_ then a replay: the graph arm, 1 op launching; durations 9 + 5/6/9 → 15;
        // (15 − 0 − 1 × 7) / 1 = 8.
        assert_eq!(
            (verify.graph.ops, verify.graph.launches, verify.graph.reads),
            (1, 1, 0)
        );
        assert!(close(verify.graph.op_us.unwrap(), 8.0));
        assert_eq!(verify.eager_sync, b.preps["dsa_target_verify"].eager_sync);
        assert_eq!(
            verify.eager_device,
            b.preps["dsa_target_verify"].eager_device
        );
        assert!(verify.source.contains("graph arm"), "{}", verify.source);
    }

    #[test]
    fn report_has_the_thread_and_a_row_per_step() {
        let c = fixture();
        assert!(c.report.contains("pid 2314, tid 2314"), "{}", c.report);
        assert!(c.report.contains("steps: 3 (`step` annotations)"));
        let rows = c
            .report
            .lines()
            .filter(|l| l.starts_with("| 0 |") || l.starts_with("| 1 |") || l.starts_with("| 2 |"))
            .count();
        assert!(rows >= 3, "{}", c.report);
        assert_eq!(HostProfile::parse(&c.profile.to_json()).unwrap(), c.profile);
    }

    #[test]
    fn gpu_busy_is_a_union_clipped_to_the_window() {
        let s = |ts, end| Span { ts, end };
        let spans = [
            s(0.0, 10.0),
            s(5.0, 15.0),
            s(20.0, 30.0),
            s(28.0, 29.0),
            s(40.0, 60.0),
        ];
        // [0,15] ∪ [20,30] ∪ [40,60] clipped to [2,50]: 13 + 10 + 10.
        assert!(close(union_len(&spans, s(2.0, 50.0)), 33.0));
        assert_eq!(union_len(&[], s(0.0, 1.0)), 0.0);
    }

    #[test]
    fn a_bare_array_of_events_works() {
        let events = fixture_json()["traceEvents"].to_string();
        let c = calibrate_text(&fixture_path(), &events, &base()).unwrap();
        assert_eq!(c.profile, fixture().profile);
    }

    #[test]
    fn profiler_steps_stand_in_for_step_annotations() {
        let text = without_annotations(&["step"]);
        let c = calibrate_text(&fixture_path(), &text, &base()).unwrap();
        assert!(c.report.contains("ProfilerStep#N"));
        assert!(close(c.profile.read_us.value, 30.0));
        assert_eq!(c.profile.program, fixture().profile.program);
    }

    #[test]
    fn foreign_traces_keep_the_base_program_and_list_segments() {
        let text = without_annotations(&[
            "draft prep",
            "draft forward",
            "verify prep",
            "verify forward",
            "accept",
        ]);
        let c = calibrate_text(&fixture_path(), &text, &base()).unwrap();
        let b = base();
        assert_eq!(c.profile.program, b.program);
        assert_eq!(c.profile.preps, b.preps);
        assert!(close(c.profile.op_us.value, 8.75));
        // Per step: the read and the upload sync → 3 segments.
        assert!(
            c.report.contains("Host segments between syncs"),
            "{}",
            c.report
        );
        assert!(
            c.report.contains("3 of 3 steps have 3 segment(s)"),
            "{}",
            c.report
        );
    }

    #[test]
    fn failures_are_one_line_naming_the_file() {
        assert!(err_of("{not json").contains("not a JSON trace"));
        assert!(err_of("{}").contains("no `traceEvents` array"));
        let no_ops = r#"{"traceEvents": [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 2}
        ]}"#;
        assert!(err_of(no_ops).contains(
            "no cpu_op events: not a PyTorch profiler trace (record with torch.profiler and export_chrome_trace)"
        ));
        let no_runtime = r#"[{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]"#;
        assert!(err_of(no_runtime).contains("no cuda_runtime events"));

        let mut v = fixture_json();
        let ev = v["traceEvents"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|e| e["name"] == "aten::arange")
            .unwrap();
        ev["dur"] = serde_json::json!("8");
        let e = err_of(&v.to_string());
        assert!(
            e.contains("aten::arange") && e.contains("`dur` is a string, not a number"),
            "{e}"
        );
        ev_set(&mut v, "aten::arange", "dur", serde_json::json!(-8.0));
        assert!(err_of(&v.to_string()).contains("negative `dur`"));
        ev_set(&mut v, "aten::arange", "dur", serde_json::json!(8.0));
        ev_set(&mut v, "aten::arange", "ts", serde_json::json!(null));
        assert!(err_of(&v.to_string()).contains("`ts` is null, not a number"));

        let e = err_of(&without_annotations(&["step", "ProfilerStep"]));
        assert!(
            e.ends_with("no steps: wrap each decode step in torch.profiler.record_function(\"step\") or call prof.step()"),
            "{e}"
        );
        assert!(err_of("[1, 2]").contains("traceEvents[0] is a number"));
        assert!(err_of("\"trace\"").contains("is a string"));
    }

    fn ev_set(v: &mut Value, name: &str, key: &str, to: Value) {
        for e in v["traceEvents"].as_array_mut().unwrap() {
            if e["name"] == name {
                e[key] = to.clone();
            }
        }
    }

    #[test]
    fn an_inconsistent_program_is_an_error() {
        // Without `accept` the program misses an item the step model needs.
        let e = err_of_at(&without_annotations(&["accept"]));
        assert!(
            e.contains("the derived profile is not valid") && e.contains("accept"),
            "{e}"
        );
    }

    fn err_of_at(text: &str) -> String {
        let e = calibrate_text(&fixture_path(), text, &base()).unwrap_err();
        let e = format!("{e:#}");
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn cannot_read_names_the_file() {
        let e = calibrate_trace(Path::new("/nonexistent/t.json"), &base()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("/nonexistent/t.json: cannot read"));
    }
}
