//! What the profiler adds, per event, in the process that recorded a trace.
//!
//! `scripts/metaprep_host.py` times a few small workloads bare and while the profiler
//! records, and writes both into the trace's probe file (`x.probe.json` beside `x.json`); the
//! profiled timings sit in the trace too, each inside a `record_function("metaprep probe
//! NAME")`. Counting what each workload left in the trace per repetition (cpu ops, runtime
//! calls, annotations, graph kernel nodes) and what it cost beyond its bare time gives one
//! small linear system; its non-negative least-squares solution, each workload weighted by
//! the precision of its overhead, is what one event of each kind costs the host while
//! profiling. The workloads' event mixes differ (an op with and without a launch, nested ops,
//! bare annotations, a graph replay), which is what lets the four costs be told apart; the
//! fit's residuals are reported.

use crate::model::post_wait::PostWait;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The probe file's schema version this reader knows.
pub const PROBE_SCHEMA: u32 = 1;

/// The probe file beside a trace: `x.json` → `x.probe.json`.
pub fn probe_path(trace: &Path) -> PathBuf {
    let name = trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = (name.strip_suffix(".json.gz"))
        .or_else(|| name.strip_suffix(".json"))
        .unwrap_or(&name);
    trace.with_file_name(format!("{stem}.probe.json"))
}

/// How scripts/metaprep_host.py names the region around each profiled probe
/// (`metaprep probe NAME`).
pub const PROBE_MARK: &str = "metaprep probe";

/// The annotation of the probe's `range` workload's own empty ranges (metaprep_host.py).
pub const EMPTY_RANGE: &str = "metaprep empty range";

/// Whether an annotation is one of a probe's own: around a profiled probe, or the `range`
/// probe's empty ranges inside it.
pub fn is_probe_region(name: &str) -> bool {
    name.starts_with(PROBE_MARK) || name == EMPTY_RANGE
}

/// `x.probe.json` as scripts/metaprep_host.py writes it.
#[derive(Debug, Clone, Deserialize)]
pub struct ProbeFile {
    pub metaprep_probe: u32,
    #[serde(default)]
    pub torch: String,
    #[serde(default)]
    pub date: String,
    /// Repetitions per timing.
    pub reps: u32,
    /// The annotations' name prefix (`metaprep probe`).
    pub mark: String,
    /// This process's host speed around the trace: µs per op of metaprep_host's `mixed`
    /// pass, from the bare probes before the profiler started.
    pub host_speed_us: f64,
    /// Workload → µs per repetition of each bare timing.
    pub bare_us: BTreeMap<String, Vec<f64>>,
    /// Workload → µs per repetition of each timing while the profiler recorded.
    pub profiled_us: BTreeMap<String, Vec<f64>>,
    /// Whether a profiler had already run in this process before this trace: its CUDA
    /// calls then carry the profiler's leftover hooks even bare.
    #[serde(default)]
    pub profiler_ran_before: bool,
    /// What host work cost right after a wait for the GPU, bare, in this process
    /// (metaprep_host.py `post_wait_probe`), when the probe file has it.
    #[serde(default)]
    pub post_wait: Option<PostWaitProbe>,
}

/// metaprep_host.py `post_wait_probe`'s record: per gap, per timed segment after the wait,
/// the extra µs over no wait, and host_speed() taken around the probe (its other fields are
/// not read: its `host_speed_us` is its no-wait pass's, another meter than the file's).
#[derive(Debug, Clone, Deserialize)]
pub struct PostWaitProbe {
    pub gaps_us: Vec<f64>,
    pub segment_ops: Vec<u32>,
    pub extra_us: Vec<Vec<f64>>,
    /// µs per op of host_speed() before and after the probe, the meter of the file's own
    /// `host_speed_us`; absent in older probe files, whose extras count as at the file's speed.
    #[serde(default)]
    pub around_speed_us: Option<f64>,
}

impl PostWaitProbe {
    /// The extras as a table in µs at `speed` (the probe file's host speed: its trace's),
    /// moved from the speed measured around the probe: the host's level can switch between
    /// the file's bare probes and the post-wait probe.
    pub fn table_at(&self, speed: f64) -> PostWait {
        let mut table = PostWait {
            gaps_us: self.gaps_us.clone(),
            segment_ops: self.segment_ops.clone(),
            extra_us: self.extra_us.clone(),
        };
        if let Some(own) = self.around_speed_us.filter(|s| s.is_finite() && *s > 0.0) {
            table.scale(speed / own);
        }
        table
    }
}

impl ProbeFile {
    pub fn read(path: &Path) -> Result<ProbeFile> {
        let file = path.display();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{file}: cannot read the probe file"))?;
        let probe: ProbeFile = serde_json::from_str(&text)
            .map_err(|e| anyhow!("{file}: not a metaprep probe file: {e}"))?;
        if probe.metaprep_probe != PROBE_SCHEMA {
            bail!(
                "{file}: probe schema {} is not {PROBE_SCHEMA}: record it with this checkout's scripts/metaprep_host.py",
                probe.metaprep_probe
            );
        }
        if probe.reps == 0 || !(probe.host_speed_us.is_finite() && probe.host_speed_us > 0.0) {
            bail!("{file}: `reps` and `host_speed_us` must be positive");
        }
        for (name, values) in probe.bare_us.iter().chain(&probe.profiled_us) {
            if values.is_empty() || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                bail!("{file}: workload `{name}`: every timing must be a positive number of µs");
            }
        }
        Ok(probe)
    }
}

/// Events one repetition of a workload left in the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EventCounts {
    /// Every cpu_op, nested ones included.
    pub cpu_ops: f64,
    /// cuda_runtime / cuda_driver calls other than graph launches, made with the GPU idle.
    pub runtime: f64,
    /// The same, made while earlier GPU work was still running: under CUPTI a launch into a
    /// busy stream costs the host far more (docs/h200-findings.md#profiler-and-calibration).
    pub runtime_busy: f64,
    /// user_annotation ranges (the probe's own range around the timing not counted).
    pub annotations: f64,
    /// `cudaGraphLaunch` calls with the GPU idle.
    pub graph_launches: f64,
    /// `cudaGraphLaunch` calls while earlier GPU work was still running.
    pub graph_launches_busy: f64,
    /// GPU kernels of graph replays (one record per node, which the profiler pays for).
    pub graph_nodes: f64,
}

/// The kinds of event a cost is fitted for.
const KINDS: usize = 7;

impl EventCounts {
    fn as_row(self) -> [f64; KINDS] {
        [
            self.cpu_ops,
            self.runtime,
            self.runtime_busy,
            self.annotations,
            self.graph_launches,
            self.graph_launches_busy,
            self.graph_nodes,
        ]
    }
}

/// Host µs one recorded event of each kind costs while the profiler runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EventCosts {
    pub cpu_op: f64,
    pub runtime: f64,
    pub runtime_busy: f64,
    pub annotation: f64,
    pub graph_launch: f64,
    pub graph_launch_busy: f64,
    pub graph_node: f64,
}

impl EventCosts {
    /// What `counts` of events cost the host while profiling.
    pub fn of(&self, counts: EventCounts) -> f64 {
        counts
            .as_row()
            .iter()
            .zip(self.as_row())
            .map(|(n, c)| n * c)
            .sum()
    }

    fn as_row(&self) -> [f64; KINDS] {
        [
            self.cpu_op,
            self.runtime,
            self.runtime_busy,
            self.annotation,
            self.graph_launch,
            self.graph_launch_busy,
            self.graph_node,
        ]
    }
}

/// One workload's line of the fit, µs a repetition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitRow {
    pub workload: String,
    pub counts: EventCounts,
    pub bare_us: f64,
    pub profiled_us: f64,
    /// profiled − bare, per repetition.
    pub overhead_us: f64,
    /// The standard error of `overhead_us`, from the spread of the timings.
    pub overhead_se_us: f64,
    /// What the fitted costs give for it.
    pub fitted_us: f64,
}

impl FitRow {
    /// fitted − measured overhead, in percent of measured; `None` where the profiled timing
    /// came out no slower than the bare one (no overhead to be a share of).
    pub fn miss_pct(&self) -> Option<f64> {
        (self.overhead_us > 0.0).then(|| 100.0 * (self.fitted_us / self.overhead_us - 1.0))
    }
}

#[derive(Debug, Clone)]
pub struct Fit {
    pub costs: EventCosts,
    pub rows: Vec<FitRow>,
}

/// Fits the per-event costs from each workload's counts (per repetition) and the probe
/// file's timings, each workload weighted by how precisely its overhead was measured (an
/// unweighted fit follows the one large workload, `mixed`, and misses the small ones; see
/// docs/calibration.md). A kind of event no workload produced costs 0 (the report says so).
pub fn fit(probe: &ProbeFile, counts: &BTreeMap<String, EventCounts>) -> Result<Fit> {
    let mut rows = Vec::new();
    for (name, bare) in &probe.bare_us {
        let (Some(profiled), Some(&c)) = (probe.profiled_us.get(name), counts.get(name)) else {
            continue;
        };
        let (b, p) = (median(bare), median(profiled));
        rows.push(FitRow {
            workload: name.clone(),
            counts: c,
            bare_us: b,
            profiled_us: p,
            overhead_us: p - b,
            overhead_se_us: (median_se(bare).powi(2) + median_se(profiled).powi(2))
                .sqrt()
                .max(SE_FLOOR * p),
            fitted_us: 0.0,
        });
    }
    if rows.len() < 2 {
        bail!(
            "the probe's workloads are not in the trace (found {} of {}): the probe file does not belong to this trace, or its `{}` annotations were not recorded",
            rows.len(),
            probe.bare_us.len(),
            probe.mark
        );
    }
    let a: Vec<[f64; KINDS]> = (rows.iter())
        .map(|r| r.counts.as_row().map(|n| n / r.overhead_se_us))
        .collect();
    let y: Vec<f64> = rows
        .iter()
        .map(|r| r.overhead_us / r.overhead_se_us)
        .collect();
    let [cpu_op, runtime, runtime_busy, annotation, graph_launch, graph_launch_busy, graph_node] =
        nonnegative_least_squares(&a, &y);
    let costs = EventCosts {
        cpu_op,
        runtime,
        runtime_busy,
        annotation,
        graph_launch,
        graph_launch_busy,
        graph_node,
    };
    for r in &mut rows {
        r.fitted_us = costs.of(r.counts);
    }
    Ok(Fit { costs, rows })
}

/// The least standard error a workload's overhead is given, as a share of its profiled time:
/// timings that agree exactly (or a single one) would otherwise weigh infinitely.
const SE_FLOOR: f64 = 1e-3;

fn median(v: &[f64]) -> f64 {
    crate::stats::summary::quantile(v, 0.5).expect("checked non-empty")
}

/// The standard error of the median of `v`, from its median absolute deviation (robust to
/// the slow first timing a probe often has): 1.4826·MAD is σ for normal data, and the
/// median's error is √(π/2)·σ/√n.
fn median_se(v: &[f64]) -> f64 {
    let m = median(v);
    let deviations: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    let sigma = 1.4826 * median(&deviations);
    (std::f64::consts::PI / 2.0).sqrt() * sigma / (v.len() as f64).sqrt()
}

/// min ‖A x − y‖ subject to x ≥ 0, for a handful of columns: least squares on the columns
/// still free, the most negative one fixed at 0 until none is negative (the active-set
/// method of Lawson and Hanson, which converges in at most one pass per column here).
/// Columns that are all zero stay at 0.
fn nonnegative_least_squares(a: &[[f64; KINDS]], y: &[f64]) -> [f64; KINDS] {
    let mut free: Vec<usize> = (0..KINDS)
        .filter(|&j| a.iter().any(|row| row[j] != 0.0))
        .collect();
    loop {
        let x = least_squares(a, y, &free);
        match free
            .iter()
            .copied()
            .filter(|&j| x[j] < 0.0)
            .min_by(|&i, &j| x[i].total_cmp(&x[j]))
        {
            Some(worst) => free.retain(|&j| j != worst),
            None => return x,
        }
    }
}

/// Ordinary least squares over the columns `free` (normal equations, Gaussian elimination
/// with partial pivoting); the other coefficients are 0. A singular system (two columns
/// that never differ) keeps the earlier column.
fn least_squares(a: &[[f64; KINDS]], y: &[f64], free: &[usize]) -> [f64; KINDS] {
    let n = free.len();
    let mut m = vec![vec![0.0; n + 1]; n];
    for (row, &yi) in a.iter().zip(y) {
        for (i, &ci) in free.iter().enumerate() {
            for (j, &cj) in free.iter().enumerate() {
                m[i][j] += row[ci] * row[cj];
            }
            m[i][n] += row[ci] * yi;
        }
    }
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))
            .expect("a column to pivot on");
        m.swap(col, pivot);
        if m[col][col].abs() < 1e-12 {
            continue;
        }
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (v, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *v -= f * p;
                }
            }
        }
    }
    let mut x = [0.0; KINDS];
    for (i, &c) in free.iter().enumerate() {
        if m[i][i].abs() >= 1e-12 {
            x[c] = m[i][n] / m[i][i];
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(
        cpu_ops: f64,
        runtime: f64,
        annotations: f64,
        graphs: f64,
        nodes: f64,
    ) -> EventCounts {
        EventCounts {
            cpu_ops,
            runtime,
            annotations,
            graph_launches: graphs,
            graph_nodes: nodes,
            ..EventCounts::default()
        }
    }

    /// The busy workloads: a spin's launch (busy after the first) and an op behind it.
    fn busy(cpu_ops: f64, runtime: f64, graphs: f64, nodes: f64) -> EventCounts {
        EventCounts {
            cpu_ops,
            runtime_busy: runtime,
            graph_launches_busy: graphs,
            graph_nodes: nodes,
            ..EventCounts::default()
        }
    }

    /// A probe file whose profiled timings are the bare ones plus `truth` per event, with
    /// ±`noise` µs of jitter: the fit must recover `truth` to within the noise's reach.
    fn synthetic(truth: EventCosts, noise: f64) -> (ProbeFile, BTreeMap<String, EventCounts>) {
        let work: [(&str, EventCounts, f64); 10] = [
            ("spin", busy(0.0, 1.0, 0.0, 0.0), 3.0),
            ("cuda_add_busy", busy(1.0, 2.0, 0.0, 0.0), 11.0),
            ("graph1_busy", busy(0.0, 1.0, 1.0, 1.0), 8.0),
            ("cuda_add", counts(1.0, 1.0, 0.0, 0.0, 0.0), 7.5),
            ("cpu_add", counts(5.0, 0.0, 0.0, 0.0, 0.0), 3.6),
            ("range", counts(0.0, 0.0, 1.0, 0.0, 0.0), 7.4),
            ("cuda_index", counts(4.0, 1.0, 0.0, 0.0, 0.0), 9.5),
            ("cuda_repeat", counts(11.0, 1.0, 0.0, 0.0, 0.0), 12.4),
            ("graph1", counts(0.0, 0.0, 0.0, 1.0, 1.0), 5.0),
            ("graph16", counts(0.0, 0.0, 0.0, 1.0, 16.0), 6.0),
        ];
        let mut bare = BTreeMap::new();
        let mut profiled = BTreeMap::new();
        let mut map = BTreeMap::new();
        for (k, (name, c, b)) in work.iter().enumerate() {
            let jitter = |i: usize| noise * (((k * 7 + i * 3) % 5) as f64 - 2.0) / 2.0;
            bare.insert(name.to_string(), (0..5).map(|i| b + jitter(i)).collect());
            profiled.insert(
                name.to_string(),
                (0..5).map(|i| b + truth.of(*c) + jitter(i + 1)).collect(),
            );
            map.insert(name.to_string(), *c);
        }
        let probe = ProbeFile {
            metaprep_probe: 1,
            torch: String::new(),
            date: String::new(),
            reps: 200,
            mark: PROBE_MARK.into(),
            host_speed_us: 7.5,
            bare_us: bare,
            profiled_us: profiled,
            profiler_ran_before: false,
            post_wait: None,
        };
        (probe, map)
    }

    #[test]
    fn the_fit_recovers_known_per_event_costs() {
        // Costs of the size an H200 profiler probe showed: ~2 µs per cpu op, several per
        // runtime call, a fraction per node.
        let truth = EventCosts {
            cpu_op: 1.9,
            runtime: 7.0,
            annotation: 6.4,
            graph_launch: 15.0,
            graph_node: 1.2,
            runtime_busy: 12.0,
            graph_launch_busy: 17.0,
        };
        let (probe, map) = synthetic(truth, 0.0);
        let f = fit(&probe, &map).unwrap();
        for (got, want) in [
            (f.costs.cpu_op, truth.cpu_op),
            (f.costs.runtime, truth.runtime),
            (f.costs.annotation, truth.annotation),
            (f.costs.graph_launch, truth.graph_launch),
            (f.costs.graph_node, truth.graph_node),
            (f.costs.runtime_busy, truth.runtime_busy),
            (f.costs.graph_launch_busy, truth.graph_launch_busy),
        ] {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
        // With jitter as large as a real host's (±0.5 µs on 7-12 µs timings), within a few
        // tenths.
        let (probe, map) = synthetic(truth, 0.5);
        let f = fit(&probe, &map).unwrap();
        assert!((f.costs.cpu_op - 1.9).abs() < 0.3, "{:?}", f.costs);
        assert!((f.costs.runtime - 7.0).abs() < 1.0, "{:?}", f.costs);
    }

    #[test]
    fn a_loosely_measured_large_workload_does_not_pull_the_fit_off_the_precise_ones() {
        let truth = EventCosts {
            cpu_op: 2.0,
            runtime: 10.0,
            runtime_busy: 6.0,
            annotation: 7.0,
            graph_launch: 3.0,
            graph_launch_busy: 4.0,
            graph_node: 1.0,
        };
        let (mut probe, mut map) = synthetic(truth, 0.2);
        // A ~1 ms pass whose events cost more than the small workloads' (a varied op sequence
        // does), timed with a spread of tens of µs, as on a real host.
        let mixed = counts(90.0, 33.0, 0.0, 0.0, 0.0);
        map.insert("mixed".into(), mixed);
        probe
            .bare_us
            .insert("mixed".into(), vec![280.0, 300.0, 290.0, 284.0, 296.0]);
        let over = truth.of(mixed) + 250.0;
        let profiled = [-60.0, 40.0, -20.0, 70.0, 0.0, 30.0, -45.0].map(|d| 290.0 + over + d);
        probe.profiled_us.insert("mixed".into(), profiled.to_vec());
        let f = fit(&probe, &map).unwrap();
        assert!((f.costs.cpu_op - 2.0).abs() < 0.2, "{:?}", f.costs);
        assert!((f.costs.runtime - 10.0).abs() < 1.0, "{:?}", f.costs);
        let mixed_row = f.rows.iter().find(|r| r.workload == "mixed").unwrap();
        assert!(mixed_row.overhead_se_us > 10.0, "{mixed_row:?}");
        assert!(
            mixed_row.overhead_us - mixed_row.fitted_us > 200.0,
            "{mixed_row:?}"
        );
    }

    #[test]
    fn a_cost_the_data_makes_negative_is_held_at_zero() {
        // The profiled graph replay is *faster* than bare: its node cost cannot be negative.
        let truth = EventCosts {
            cpu_op: 1.0,
            runtime: 1.5,
            annotation: 0.7,
            graph_launch: 10.0,
            graph_node: 0.0,
            runtime_busy: 3.0,
            graph_launch_busy: 12.0,
        };
        let (mut probe, map) = synthetic(truth, 0.0);
        // The 16-node replay cost *less* over bare than the one-node one: a node cannot
        // cost less than nothing.
        for v in probe.profiled_us.get_mut("graph16").unwrap() {
            *v -= 3.0;
        }
        let f = fit(&probe, &map).unwrap();
        assert_eq!(f.costs.graph_node, 0.0, "{:?}", f.costs);
        assert!(f.costs.cpu_op > 0.0 && f.costs.runtime >= 0.0);
    }

    #[test]
    fn a_kind_no_workload_produced_costs_nothing_and_too_few_workloads_are_refused() {
        let truth = EventCosts {
            cpu_op: 1.0,
            runtime: 2.0,
            annotation: 0.5,
            graph_launch: 0.0,
            graph_node: 0.0,
            runtime_busy: 0.0,
            graph_launch_busy: 0.0,
        };
        let (probe, mut map) = synthetic(truth, 0.0);
        for w in ["graph1", "graph16", "graph1_busy"] {
            map.remove(w);
        }
        let f = fit(&probe, &map).unwrap();
        assert_eq!((f.costs.graph_launch, f.costs.graph_node), (0.0, 0.0));
        assert!((f.costs.runtime - 2.0).abs() < 1e-9);
        map.retain(|k, _| k == "cuda_add");
        assert!(fit(&probe, &map).is_err());
    }

    #[test]
    fn the_probe_file_sits_beside_its_trace() {
        assert_eq!(
            probe_path(Path::new("/r/trace-eager-sync.json")),
            Path::new("/r/trace-eager-sync.probe.json")
        );
        assert_eq!(
            probe_path(Path::new("t.trace")),
            Path::new("t.trace.probe.json")
        );
        // A gzipped trace's probe is the plain one beside it.
        assert_eq!(
            probe_path(Path::new("/r/t.json.gz")),
            Path::new("/r/t.probe.json")
        );
    }
}
