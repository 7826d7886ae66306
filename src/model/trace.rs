//! A Chrome trace-event JSON writer for step timelines; the file opens in Perfetto
//! (ui.perfetto.dev) and chrome://tracing.
//!
//! Layout of the trace: process 1 is the host, with one thread per [`HostLane`]; process 2
//! is the GPU as its device timers saw it, with thread `n` for stream `n`. Spans are "X"
//! (complete) events with `ts` and `dur` in µs (fractional µs are kept, hence
//! `displayTimeUnit: "ns"`), and `args` carrying the step index and the arm.

use crate::results::atomic::write_atomic;
use anyhow::{ensure, Result};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

pub const HOST_PID: u32 = 1;
pub const GPU_PID: u32 = 2;

/// What the host thread was doing during a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostLane {
    /// Host work with no GPU work of its own (scheduler, sampling, ...).
    Scheduler,
    /// Issuing kernels, copies and graph launches.
    Launch,
    /// Waiting for a device-to-host read of `seq_lens` (the eager-sync arm's cost).
    BlockedInRead,
}

impl HostLane {
    const ALL: [HostLane; 3] = [
        HostLane::Scheduler,
        HostLane::Launch,
        HostLane::BlockedInRead,
    ];

    /// Thread id in the host process; also the lane's display order.
    pub fn tid(self) -> u32 {
        match self {
            HostLane::Scheduler => 1,
            HostLane::Launch => 2,
            HostLane::BlockedInRead => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HostLane::Scheduler => "host work",
            HostLane::Launch => "launch",
            HostLane::BlockedInRead => "blocked in read",
        }
    }
}

/// Collects spans, then renders or writes the trace.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    /// Written as `otherData.title`: what the trace shows (arm, cell, host profile).
    title: Option<String>,
    arm: Option<String>,
    spans: Vec<Value>,
    gpu_streams: BTreeSet<u32>,
}

impl TraceBuilder {
    pub fn new() -> TraceBuilder {
        TraceBuilder::default()
    }

    /// Tags the spans added from now on with `arm` (one trace may hold several arms run one
    /// after another).
    pub fn set_arm(&mut self, arm: &str) {
        self.arm = Some(arm.to_string());
    }

    /// Names the trace (the timeline chart's panel title).
    pub fn set_title(&mut self, title: &str) {
        self.title = Some(title.to_string());
    }

    pub fn host_span(
        &mut self,
        lane: HostLane,
        name: &str,
        start_us: f64,
        dur_us: f64,
        step: u64,
    ) -> Result<()> {
        self.span(HOST_PID, lane.tid(), "host", name, start_us, dur_us, step)
    }

    /// A GPU interval on stream `stream`, from device timers mapped onto the host clock:
    /// named by the program item that issued it, with the kernel or copy as `args.op` where
    /// the timer saw each one.
    #[allow(clippy::too_many_arguments)] // one span's fields; a struct would only rename them
    pub fn gpu_span(
        &mut self,
        stream: u32,
        name: &str,
        op: Option<&str>,
        start_us: f64,
        dur_us: f64,
        step: u64,
    ) -> Result<()> {
        self.span(GPU_PID, stream, "gpu", name, start_us, dur_us, step)?;
        if let (Some(op), Some(span)) = (op, self.spans.last_mut()) {
            span["args"]["op"] = json!(op);
        }
        self.gpu_streams.insert(stream);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)] // private; the public wrappers fix pid and cat
    fn span(
        &mut self,
        pid: u32,
        tid: u32,
        cat: &str,
        name: &str,
        start_us: f64,
        dur_us: f64,
        step: u64,
    ) -> Result<()> {
        ensure!(
            start_us.is_finite() && start_us >= 0.0,
            "trace span `{name}` (step {step}) starts at {start_us} µs: timestamps must be \
             finite and measured from an origin at or before the first event"
        );
        ensure!(
            dur_us.is_finite() && dur_us >= 0.0,
            "trace span `{name}` (step {step}) lasts {dur_us} µs: durations must be finite \
             and not negative"
        );
        let mut args = json!({ "step": step });
        if let Some(arm) = &self.arm {
            args["arm"] = json!(arm);
        }
        self.spans.push(json!({
            "name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": start_us, "dur": dur_us, "args": args,
        }));
        Ok(())
    }

    /// The trace as JSON: metadata naming processes and lanes first, then the spans.
    pub fn to_json(&self) -> String {
        let mut events = vec![
            metadata("process_name", HOST_PID, 0, json!({ "name": "host" })),
            metadata(
                "process_sort_index",
                HOST_PID,
                0,
                json!({ "sort_index": 1 }),
            ),
            metadata(
                "process_name",
                GPU_PID,
                0,
                json!({ "name": "GPU (device timers)" }),
            ),
            metadata("process_sort_index", GPU_PID, 0, json!({ "sort_index": 2 })),
        ];
        for lane in HostLane::ALL {
            events.push(thread_name(HOST_PID, lane.tid(), lane.name()));
        }
        for &stream in &self.gpu_streams {
            events.push(thread_name(GPU_PID, stream, &format!("stream {stream}")));
        }
        events.extend(self.spans.iter().cloned());
        let mut trace = json!({ "traceEvents": events, "displayTimeUnit": "ns" });
        if let Some(title) = &self.title {
            trace["otherData"] = json!({ "title": title });
        }
        trace.to_string()
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.to_json().as_bytes())
    }
}

/// The traces of one world's ranks (rank r's at index r) as one trace: rank r's host and
/// GPU become processes 2r+1 and 2r+2 (rank 0 keeps [`HOST_PID`] and [`GPU_PID`]), named
/// `rank r host` and `rank r GPU ...`. Each rank's times are from its own origin, taken
/// right after a barrier, so the ranks line up to within the barrier's exit skew.
pub fn merge_rank_traces(traces: &[String]) -> Result<String> {
    let mut events = Vec::new();
    let mut other = None;
    for (rank, text) in traces.iter().enumerate() {
        let trace: Value = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("rank {rank}'s trace is not JSON: {e}"))?;
        let Some(list) = trace["traceEvents"].as_array() else {
            anyhow::bail!("rank {rank}'s trace has no traceEvents");
        };
        let shift = 2 * rank as u64;
        for event in list {
            let mut event = event.clone();
            if let Some(pid) = event["pid"].as_u64() {
                event["pid"] = json!(pid + shift);
            }
            match event["name"].as_str() {
                Some("process_name") => {
                    let name = event["args"]["name"].as_str().unwrap_or("").to_string();
                    event["args"]["name"] = json!(format!("rank {rank} {name}"));
                }
                Some("process_sort_index") => {
                    let index = event["args"]["sort_index"].as_u64().unwrap_or(0);
                    event["args"]["sort_index"] = json!(index + shift);
                }
                _ => {}
            }
            events.push(event);
        }
        if rank == 0 {
            other = trace.get("otherData").cloned();
        }
    }
    let mut merged = json!({ "traceEvents": events, "displayTimeUnit": "ns" });
    if let Some(mut other) = other {
        if let Some(title) = other["title"].as_str() {
            other["title"] = json!(format!("{title}, {} ranks", traces.len()));
        }
        merged["otherData"] = other;
    }
    Ok(merged.to_string())
}

fn metadata(name: &str, pid: u32, tid: u32, args: Value) -> Value {
    json!({ "name": name, "ph": "M", "pid": pid, "tid": tid, "args": args })
}

/// Names a lane and pins its display order to its id.
fn thread_name(pid: u32, tid: u32, name: &str) -> Value {
    let mut events = metadata("thread_name", pid, tid, json!({ "name": name }));
    events["args"]["sort_index"] = json!(tid);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_traces_merge_as_one_process_pair_per_rank() {
        let one = |title: &str| {
            let mut t = TraceBuilder::new();
            t.set_title(title);
            t.host_span(HostLane::Launch, "verify forward", 1.0, 2.0, 0)
                .unwrap();
            t.gpu_span(0, "verify forward", None, 2.0, 5.0, 0).unwrap();
            t.to_json()
        };
        let merged: Value =
            serde_json::from_str(&merge_rank_traces(&[one("a"), one("b")]).unwrap()).unwrap();
        let events = merged["traceEvents"].as_array().unwrap();
        let names: Vec<(u64, &str)> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                (1, "rank 0 host"),
                (2, "rank 0 GPU (device timers)"),
                (3, "rank 1 host"),
                (4, "rank 1 GPU (device timers)")
            ]
        );
        let spans: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["pid"].as_u64().unwrap())
            .collect();
        assert_eq!(spans, [1, 2, 3, 4]);
        assert_eq!(merged["otherData"]["title"], "a, 2 ranks");
        assert!(merge_rank_traces(&["{}".into()]).is_err());
    }

    fn sample() -> TraceBuilder {
        let mut t = TraceBuilder::new();
        t.set_arm("eager-sync");
        t.host_span(HostLane::Scheduler, "schedule", 0.0, 5.5, 0)
            .unwrap();
        t.host_span(HostLane::BlockedInRead, "seq_lens.tolist()", 6.0, 18.25, 0)
            .unwrap();
        t.gpu_span(0, "draft forward", Some("stream_kernel"), 7.0, 20.0, 0)
            .unwrap();
        t.set_arm("graph");
        t.host_span(HostLane::Launch, "graph launch", 100.0, 2.0, 1)
            .unwrap();
        t.gpu_span(3, "verify forward", None, 101.5, 0.0, 1)
            .unwrap();
        t
    }

    fn parsed(t: &TraceBuilder) -> Value {
        serde_json::from_str(&t.to_json()).unwrap()
    }

    fn events<'a>(v: &'a Value, ph: &str) -> Vec<&'a Value> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == ph)
            .collect()
    }

    fn named<'a>(v: &'a Value, kind: &str, pid: u32) -> Vec<(u64, &'a str)> {
        events(v, "M")
            .into_iter()
            .filter(|e| e["name"] == kind && e["pid"] == pid)
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn has_top_level_shape() {
        let v = parsed(&sample());
        assert_eq!(v["displayTimeUnit"], "ns");
        assert!(v["traceEvents"].is_array());
    }

    #[test]
    fn names_processes_and_lanes() {
        let mut t = sample();
        t.set_title("eager-sync: tp4 bs 1 block 5");
        let v = parsed(&t);
        assert_eq!(v["otherData"]["title"], "eager-sync: tp4 bs 1 block 5");
        assert_eq!(named(&v, "process_name", HOST_PID), vec![(0, "host")]);
        assert_eq!(
            named(&v, "process_name", GPU_PID),
            vec![(0, "GPU (device timers)")]
        );
        assert_eq!(
            named(&v, "thread_name", HOST_PID),
            vec![(1, "host work"), (2, "launch"), (3, "blocked in read")]
        );
        // Only the streams that carried spans are named.
        assert_eq!(
            named(&v, "thread_name", GPU_PID),
            vec![(0, "stream 0"), (3, "stream 3")]
        );
    }

    #[test]
    fn spans_are_complete_events_with_numeric_times_and_args() {
        let v = parsed(&sample());
        let spans = events(&v, "X");
        assert_eq!(spans.len(), 5);
        for e in &spans {
            let ts = e["ts"].as_f64().unwrap();
            let dur = e["dur"].as_f64().unwrap();
            assert!(ts >= 0.0 && dur >= 0.0, "{e}");
            assert!(e["name"].is_string() && e["args"]["step"].is_u64(), "{e}");
        }
        let blocked = spans
            .iter()
            .find(|e| e["name"] == "seq_lens.tolist()")
            .unwrap();
        assert_eq!(
            (blocked["pid"].as_u64(), blocked["tid"].as_u64()),
            (Some(1), Some(3))
        );
        assert_eq!(blocked["cat"], "host");
        assert_eq!(blocked["dur"].as_f64(), Some(18.25));
        assert_eq!(blocked["args"]["arm"], "eager-sync");
        let verify = spans
            .iter()
            .find(|e| e["name"] == "verify forward")
            .unwrap();
        assert_eq!(
            (verify["pid"].as_u64(), verify["tid"].as_u64()),
            (Some(2), Some(3))
        );
        assert_eq!(verify["cat"], "gpu");
        assert_eq!(verify["args"]["arm"], "graph");
        assert_eq!(verify["args"]["step"], 1);
        assert!(verify["args"].get("op").is_none());
        let draft = spans.iter().find(|e| e["name"] == "draft forward").unwrap();
        assert_eq!(draft["args"]["op"], "stream_kernel");
    }

    #[test]
    fn spans_without_an_arm_omit_it() {
        let mut t = TraceBuilder::new();
        t.gpu_span(0, "k", None, 1.0, 1.0, 7).unwrap();
        let v = parsed(&t);
        let span = events(&v, "X")[0];
        assert!(span["args"].get("arm").is_none());
        assert_eq!(span["args"]["step"], 7);
    }

    #[test]
    fn rejects_bad_times() {
        let mut t = TraceBuilder::new();
        for (start, dur) in [
            (-1.0, 1.0),
            (1.0, -0.5),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
        ] {
            let e = t
                .host_span(HostLane::Launch, "x", start, dur, 2)
                .unwrap_err()
                .to_string();
            assert!(e.contains("trace span `x` (step 2)"), "{e}");
            assert!(t.gpu_span(0, "x", None, start, dur, 2).is_err());
        }
        assert!(events(&parsed(&t), "X").is_empty());
        // A rejected GPU span does not name its stream.
        assert!(named(&parsed(&t), "thread_name", GPU_PID).is_empty());
    }

    #[test]
    fn writes_a_file_that_parses_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traces/step.json");
        let t = sample();
        t.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, t.to_json());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(events(&v, "X").len(), 5);
    }
}
