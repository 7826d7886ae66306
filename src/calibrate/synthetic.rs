//! Synthetic profiler traces with a known profiler cost, for the calibration tests: a host
//! thread issuing ops, reads, uploads and graph replays onto one GPU stream, each either
//! bare or with every recorded event costing what `EventCosts` says, laid out as
//! torch.profiler lays it out (an op's own record after its span, its nested events' inside
//! it; an annotation's in-range share `EMPTY_IN_RANGE` inside, the rest around it).

use super::probe::EMPTY_RANGE;
use super::probe::{EventCosts, EventCounts};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The share of an annotation's own cost that lands inside its recorded span.
pub const EMPTY_IN_RANGE: f64 = 0.8;
/// What `record_function` costs the host bare (the probe's `range` workload without a
/// profiler): paid only where an annotation exists.
const RANGE_BARE: f64 = 6.0;

/// What one recorded event costs in the synthetic traces: of the sizes a profiler probe saw
/// on an H200 (docs/h200-findings.md#profiler-and-calibration).
pub const COSTS: EventCosts = EventCosts {
    cpu_op: 1.9,
    runtime: 4.0,
    annotation: 1.1,
    graph_launch: 18.0,
    graph_node: 1.2,
    runtime_busy: 9.0,
    graph_launch_busy: 20.0,
};

pub struct Synth {
    events: Vec<Value>,
    now: f64,
    gpu_free: f64,
    corr: u64,
    /// None: the engine bare (its annotations still recorded, costing nothing extra).
    costs: Option<EventCosts>,
}

/// One op to issue: its bare host µs, nested cpu ops, and the GPU µs of each kernel it
/// launches (one runtime call each).
pub struct Op<'a> {
    pub name: &'a str,
    pub bare_us: f64,
    pub nested: u32,
    pub kernels: &'a [f64],
}

impl Synth {
    pub fn new(costs: Option<EventCosts>) -> Synth {
        Synth {
            events: Vec::new(),
            now: 5_257_213_846_604.0, // torch's epoch-based µs
            gpu_free: 0.0,
            corr: 1,
            costs,
        }
    }

    fn cost(&self, f: impl Fn(&EventCosts) -> f64) -> f64 {
        self.costs.as_ref().map_or(0.0, f)
    }

    fn host_event(&mut self, cat: &str, name: &str, ts: f64, dur: f64, corr: Option<u64>) {
        let mut e =
            json!({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 7, "tid": 7});
        if let Some(c) = corr {
            e["args"] = json!({"correlation": c});
        }
        self.events.push(e);
    }

    fn kernel(&mut self, launched_at: f64, us: f64, corr: u64) {
        let start = launched_at.max(self.gpu_free) + 1.0;
        self.gpu_free = start + us;
        self.events.push(json!({"ph": "X", "cat": "kernel", "name": "k", "ts": start, "dur": us, "args": {"correlation": corr}}));
    }

    /// Pure Python host work of `us`.
    pub fn host(&mut self, us: f64) {
        self.now += us;
    }

    /// An annotation around `body`.
    pub fn range(&mut self, name: &str, body: impl FnOnce(&mut Synth)) {
        let around = RANGE_BARE + self.cost(|c| c.annotation) - EMPTY_IN_RANGE;
        self.now += around / 2.0;
        let ts = self.now;
        self.now += EMPTY_IN_RANGE / 2.0;
        body(self);
        self.now += EMPTY_IN_RANGE / 2.0;
        self.host_event("user_annotation", name, ts, self.now - ts, None);
        self.now += around / 2.0;
    }

    /// What a launch at `at` costs the profiled host: more when the GPU is still busy.
    fn launch_cost(
        &self,
        at: f64,
        idle: fn(&EventCosts) -> f64,
        busy: fn(&EventCosts) -> f64,
    ) -> f64 {
        if self.gpu_free > at {
            self.cost(busy)
        } else {
            self.cost(idle)
        }
    }

    /// A kernel launched with no framework op around it (the probe's spin).
    pub fn spin(&mut self, us: f64) {
        let at = self.now;
        let corr = self.corr;
        self.corr += 1;
        let extra = self.launch_cost(at, |c| c.runtime, |c| c.runtime_busy);
        self.host_event(
            "cuda_runtime",
            "cudaLaunchKernel",
            at,
            0.5 + extra,
            Some(corr),
        );
        self.kernel(at, us, corr);
        self.now = at + 3.0 + extra;
    }

    /// One top-level op. Its nested ops and runtime calls inflate its span; its own record
    /// lands after it.
    pub fn op(&mut self, op: Op) {
        let ts = self.now;
        let slice = op.bare_us / (op.kernels.len() + 1) as f64;
        let mut inner = self.cost(|c| c.cpu_op) * f64::from(op.nested);
        for (i, &k) in op.kernels.iter().enumerate() {
            let at = ts + slice * (i as f64 + 0.5) + inner;
            inner += self.launch_cost(at, |c| c.runtime, |c| c.runtime_busy);
            let corr = self.corr;
            self.corr += 1;
            self.host_event("cuda_runtime", "cudaLaunchKernel", at, 0.5, Some(corr));
            self.kernel(at, k, corr);
        }
        for i in 0..op.nested {
            let at = ts + 0.05 + 0.01 * f64::from(i);
            self.host_event("cpu_op", "aten::nested", at, 0.01, None);
        }
        let dur = op.bare_us + inner;
        self.host_event("cpu_op", op.name, ts, dur, None);
        self.now = ts + dur + self.cost(|c| c.cpu_op);
    }

    /// A read: waits for the stream to drain, then costs `bare_us` (a DtoH copy and sync).
    pub fn read(&mut self, bare_us: f64) {
        self.sync_op(
            "aten::_local_scalar_dense",
            "Memcpy DtoH (Device -> Pageable)",
            bare_us,
        );
    }

    /// An upload that syncs (`torch.tensor(list, device=...)`): `bare_us` plus its wait.
    pub fn upload(&mut self, bare_us: f64) {
        self.sync_op("aten::to", "Memcpy HtoD (Pageable -> Device)", bare_us);
    }

    /// A syncing op: its copy's and sync's runtime calls are recorded as it begins (their
    /// profiler cost paid then, so it overlaps any wait), then it waits for the stream to
    /// drain, then its own `bare_us`.
    fn sync_op(&mut self, name: &str, copy: &str, bare_us: f64) {
        let ts = self.now;
        let inner =
            self.launch_cost(ts, |c| c.runtime, |c| c.runtime_busy) + self.cost(|c| c.runtime);
        let corr = self.corr;
        self.corr += 1;
        self.host_event("cuda_runtime", "cudaMemcpyAsync", ts + 0.2, 0.3, Some(corr));
        let drained = (ts + inner).max(self.gpu_free);
        self.host_event(
            "cuda_runtime",
            "cudaStreamSynchronize",
            ts + 0.6,
            drained - ts,
            None,
        );
        self.events.push(json!({"ph": "X", "cat": "gpu_memcpy", "name": copy, "ts": drained, "dur": 1.0, "args": {"correlation": corr}}));
        let dur = (drained - ts) + bare_us;
        self.host_event("cpu_op", name, ts, dur, None);
        self.now = ts + dur + self.cost(|c| c.cpu_op);
    }

    /// A graph replay of `nodes` kernels of `node_us` each, costing `bare_us` of host time.
    pub fn replay(&mut self, bare_us: f64, nodes: usize, node_us: f64) {
        let ts = self.now;
        let corr = self.corr;
        self.corr += 1;
        let extra = self.launch_cost(
            ts + bare_us / 2.0,
            |c| c.graph_launch,
            |c| c.graph_launch_busy,
        ) + self.cost(|c| c.graph_node) * nodes as f64;
        self.host_event(
            "cuda_runtime",
            "cudaGraphLaunch",
            ts + bare_us / 2.0,
            1.0 + extra,
            Some(corr),
        );
        for _ in 0..nodes {
            self.kernel(ts + bare_us / 2.0, node_us, corr);
        }
        self.now = ts + bare_us + extra;
    }

    /// The probe's workloads, `reps` each, inside their `metaprep probe NAME` annotations;
    /// returns their counts per rep and bare / profiled µs per rep.
    pub fn probes(&mut self, reps: u32) -> (BTreeMap<String, (EventCounts, f64, f64)>, f64) {
        let start = self.now;
        let mut out = BTreeMap::new();
        let workloads: [(&str, u32, usize, f64); 4] = [
            ("cuda_add", 0, 1, 7.5),
            ("cpu_add", 4, 0, 3.6),
            ("cuda_index", 3, 1, 9.5),
            ("cuda_repeat", 10, 1, 12.4),
        ];
        // Each timing covers its repetitions only, as perf_counter inside the annotation does.
        let timed = |s: &mut Synth, name: &str, rep: &dyn Fn(&mut Synth)| {
            let mut per = 0.0;
            s.range(&format!("metaprep probe {name}"), |s| {
                let before = s.now;
                for _ in 0..reps {
                    rep(s);
                }
                per = (s.now - before) / f64::from(reps);
            });
            per
        };
        for (name, nested, launches, bare) in workloads {
            let kernels = vec![1.0; launches];
            let per = timed(self, name, &|s| {
                s.op(Op {
                    name: "aten::probe",
                    bare_us: bare,
                    nested,
                    kernels: &kernels,
                })
            });
            let counts = EventCounts {
                cpu_ops: f64::from(nested + 1),
                runtime: launches as f64,
                ..EventCounts::default()
            };
            out.insert(name.to_string(), (counts, bare, per));
        }
        let per = timed(self, "range", &|s| s.range(EMPTY_RANGE, |_| {}));
        let ann = EventCounts {
            annotations: 1.0,
            ..EventCounts::default()
        };
        out.insert("range".into(), (ann, RANGE_BARE, per));
        for (name, nodes) in [("graph1", 1usize), ("graph16", 16)] {
            let per = timed(self, name, &|s| {
                s.replay(5.0, nodes, 1.0);
                s.gpu_free = 0.0;
            });
            let counts = EventCounts {
                graph_launches: 1.0,
                graph_nodes: nodes as f64,
                ..EventCounts::default()
            };
            out.insert(name.to_string(), (counts, 5.0, per));
        }
        for (name, bare) in [
            ("spin", 3.0),
            ("cuda_add_busy", 3.0 + 7.5),
            ("graph1_busy", 3.0 + 5.0),
        ] {
            let per = timed(self, name, &|s| {
                s.spin(60.0);
                match name {
                    "cuda_add_busy" => s.op(Op {
                        name: "aten::probe",
                        bare_us: 7.5,
                        nested: 0,
                        kernels: &[1.0],
                    }),
                    "graph1_busy" => s.replay(5.0, 1, 1.0),
                    _ => {}
                }
            });
            let counts = EventCounts {
                cpu_ops: f64::from(u8::from(name == "cuda_add_busy")),
                runtime_busy: 1.0 + f64::from(u8::from(name == "cuda_add_busy")),
                graph_launches_busy: f64::from(u8::from(name == "graph1_busy")),
                graph_nodes: f64::from(u8::from(name == "graph1_busy")),
                ..EventCounts::default()
            };
            out.insert(name.to_string(), (counts, bare, per));
            self.gpu_free = 0.0;
        }
        (out, self.now - start)
    }

    pub fn into_json(self) -> String {
        json!({"traceEvents": self.events}).to_string()
    }
}

/// The probe file for a trace whose probes `probes` gave: bare and profiled µs per rep.
pub fn probe_file(probes: &BTreeMap<String, (EventCounts, f64, f64)>, host_speed: f64) -> String {
    let bare: BTreeMap<&str, Vec<f64>> = probes
        .iter()
        .map(|(k, v)| (k.as_str(), vec![v.1; 5]))
        .collect();
    let profiled: BTreeMap<&str, Vec<f64>> = probes
        .iter()
        .map(|(k, v)| (k.as_str(), vec![v.2; 5]))
        .collect();
    json!({
        "metaprep_probe": 1, "torch": "synthetic", "date": "2026-12-01", "reps": 50,
        "mark": "metaprep probe", "host_speed_us": host_speed,
        "bare_us": bare, "profiled_us": profiled, "profiler_ran_before": false
    })
    .to_string()
}
