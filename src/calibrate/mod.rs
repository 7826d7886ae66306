//! `metaprep calibrate`: a [`HostProfile`] from PyTorch profiler traces of an engine, with
//! the profiler's own cost taken off; and `metaprep validate`, which holds `steps` with a
//! profile against an engine's untraced step times.
//!
//! How a trace is read, the definitions and each value's derivation: docs/calibration.md,
//! "How `calibrate` reads a trace".

mod analysis;
mod derive;
pub(crate) mod probe;
pub mod profiler_cost;
mod report;
pub mod trace;
pub mod validate;

#[cfg(test)]
mod by_batch_tests;
#[cfg(test)]
pub(crate) mod synthetic;

use crate::model::host_profile::HostProfile;
use analysis::Analysis;
use anyhow::{anyhow, bail, Result};
use derive::{GpuTrace, Traced};
use probe::ProbeFile;
use std::path::{Path, PathBuf};
use trace::Trace;

pub use probe::{probe_path, EventCosts, FitRow};

/// What `metaprep calibrate` was asked for.
#[derive(Debug, Clone)]
pub struct CalibrateRequest {
    /// One trace per arm, at the calibrated cell.
    pub traces: Vec<PathBuf>,
    /// The batch size the traces ran at.
    pub batch: u32,
    /// Traces at other batch sizes whose preps' GPU time gives `kernel_us_by_batch`, and
    /// whose Python host segments give their `us_by_batch`.
    pub gpu_traces: Vec<(u32, PathBuf)>,
    /// Calibrate traces without probe files, the profiler's own cost left in.
    pub keep_profiler_costs: bool,
    /// Take the probe files' post-wait cost off the trace's ops and into the profile.
    pub post_wait: bool,
}

/// A derived profile and a markdown report of how.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub profile: HostProfile,
    pub report: String,
}

/// Reads, analyses and derives; every failure is one line naming the file.
pub fn calibrate(req: &CalibrateRequest, base: &HostProfile) -> Result<Calibration> {
    if req.traces.is_empty() {
        bail!("give at least one trace");
    }
    let names: Vec<String> = req.traces.iter().map(|p| p.display().to_string()).collect();
    let traces: Vec<Trace> = req
        .traces
        .iter()
        .map(|p| Trace::read(p))
        .collect::<Result<_>>()?;
    let mut traced = Vec::new();
    for ((path, name), trace) in req.traces.iter().zip(&names).zip(&traces) {
        traced.push(analyse(path, name, trace, req)?);
    }
    let gpu_names: Vec<String> = req
        .gpu_traces
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    let gpu_read: Vec<Trace> = req
        .gpu_traces
        .iter()
        .map(|(_, p)| Trace::read(p))
        .collect::<Result<_>>()?;
    let gpu_traces: Vec<GpuTrace> = req
        .gpu_traces
        .iter()
        .zip(&gpu_names)
        .zip(&gpu_read)
        .map(|(((batch, path), name), trace)| {
            // Host times are read from it as from the traced files (its probe's costs taken
            // off, or every trace's left in); without a probe it gives GPU times only.
            let host_times = probe_path(path).exists() || req.keep_profiler_costs;
            let analysis = match host_times {
                true => analyse(path, name, trace, req)?.analysis,
                false => Analysis::new(name, trace)?,
            };
            Ok(GpuTrace {
                batch: *batch,
                analysis,
                host_times,
            })
        })
        .collect::<Result<_>>()?;
    let derivation = derive::derive(&traced, &gpu_traces, req.batch, base)?;
    let profile = HostProfile::parse(&derivation.profile.to_json())
        .map_err(|e| anyhow!("{}: the derived profile is not valid: {e:#}", names[0]))?;
    let report = report::render(&traced, &derivation, base);
    Ok(Calibration { profile, report })
}

/// One trace with its probe: the per-event costs fitted and applied.
fn analyse<'t>(
    path: &Path,
    name: &'t str,
    trace: &'t Trace,
    req: &CalibrateRequest,
) -> Result<Traced<'t>> {
    let keep = req.keep_profiler_costs;
    let mut analysis = Analysis::new(name, trace)?;
    let probe_file = probe_path(path);
    if !probe_file.exists() {
        if keep {
            return Ok(Traced {
                analysis,
                probe: None,
            });
        }
        bail!(
            "{name}: no probe file {} beside it, so the profiler's own cost (1.5-2.5x per op on an H200) cannot be taken off: record the trace with scripts/metaprep_host.py (README: calibration recipe), or pass --keep-profiler-costs to calibrate with that cost left in",
            probe_file.display()
        );
    }
    let mut probe = ProbeFile::read(&probe_file)?;
    if !req.post_wait {
        probe.post_wait = None;
    }
    let fit =
        probe::fit(&probe, &analysis.probe_counts(&probe)).map_err(|e| anyhow!("{name}: {e:#}"))?;
    analysis.deflate_with(fit.costs);
    if let Some(pw) = &probe.post_wait {
        let table = pw.table_at(probe.host_speed_us);
        table
            .check_well_formed()
            .map_err(|e| anyhow!("{}: its post_wait: {e:#}", probe_file.display()))?;
        analysis.without_post_wait(&table);
    }
    Ok(Traced {
        analysis,
        probe: Some((probe, fit)),
    })
}

#[cfg(test)]
mod tests {
    use super::synthetic::{probe_file, Op, Synth, COSTS};
    use super::*;
    use crate::model::host_profile::Item;
    use probe::EventCosts;
    const OP: f64 = 10.0;
    const READ: f64 = 15.0;
    const UPLOAD: f64 = 19.0;
    const REPLAY: f64 = 5.0;

    fn op(s: &mut Synth, nested: u32, kernels: &[f64]) {
        s.op(Op {
            name: "aten::add",
            bare_us: OP,
            nested,
            kernels,
        });
    }

    /// One arm's prep: eager-sync reads after 2 ops and uploads once, eager-device issues
    /// the same ops, graph replays 6 nodes.
    fn prep(s: &mut Synth, arm: Arm) {
        match arm {
            Arm::EagerSync | Arm::EagerDevice => {
                op(s, 0, &[]);
                op(s, 2, &[]);
                if arm == Arm::EagerSync {
                    s.read(READ);
                    s.upload(UPLOAD);
                }
                for i in 0..6 {
                    op(s, i % 3, &[2.0]);
                }
            }
            _ => s.replay(REPLAY, 6, 2.0),
        }
    }

    /// A trace of 4 steps of `arm`, profiled at `COSTS` (or bare), with its probes.
    fn engine(arm: Arm, costs: Option<EventCosts>) -> (String, String) {
        let mut s = Synth::new(costs);
        let (probes, _) = s.probes(50);
        for _ in 0..4 {
            s.range("step", |s| {
                s.range("scheduler", |s| s.host(50.0));
                s.range("draft prep", |s| prep(s, arm));
                s.range("draft forward", |s| s.replay(REPLAY, 1, 1000.0));
                s.range("sampling", |s| {
                    for _ in 0..4 {
                        op(s, 1, &[1.5]);
                    }
                });
                s.range("verify prep", |s| prep(s, arm));
                s.range("verify forward", |s| s.replay(REPLAY, 1, 1000.0));
                s.range("accept", |s| op(s, 0, &[1.0]));
            });
        }
        (s.into_json(), probe_file(&probes, 7.5))
    }

    /// Calibrates `traces` at batch 1 against the built-in pytorch profile.
    fn calibrate_paths(traces: Vec<PathBuf>, keep_profiler_costs: bool) -> Result<Calibration> {
        calibrate_with(traces, keep_profiler_costs, true)
    }

    fn calibrate_with(
        traces: Vec<PathBuf>,
        keep_profiler_costs: bool,
        post_wait: bool,
    ) -> Result<Calibration> {
        let req = CalibrateRequest {
            traces,
            batch: 1,
            gpu_traces: Vec::new(),
            keep_profiler_costs,
            post_wait,
        };
        calibrate(&req, &HostProfile::load("pytorch").unwrap())
    }

    /// The three arms' traces written into `dir` (with probe files unless `bare_probes`
    /// is false), calibrated.
    fn calibrated(dir: &Path, with_probes: bool) -> Result<Calibration> {
        let mut traces = Vec::new();
        for arm in [Arm::EagerSync, Arm::EagerDevice, Arm::Graph] {
            let (trace, probe) = engine(arm, Some(COSTS));
            let path = dir.join(format!("trace-{arm}.json"));
            std::fs::write(&path, trace).unwrap();
            if with_probes {
                std::fs::write(probe_path(&path), probe).unwrap();
            }
            traces.push(path);
        }
        calibrate_paths(traces, !with_probes)
    }

    use crate::axes::Arm;

    fn close(got: f64, want: f64, tol: f64) -> bool {
        (got - want).abs() <= tol
    }

    #[test]
    fn a_known_profiler_cost_is_taken_off_every_value() {
        let dir = tempfile::tempdir().unwrap();
        let c = calibrated(dir.path(), true).unwrap();
        let p = &c.profile;
        assert!(close(p.op_us.value, OP, 0.05), "op_us {}", p.op_us.value);
        assert!(
            close(p.read_us.value, READ, 0.05),
            "read_us {}",
            p.read_us.value
        );
        assert!(
            close(p.graph_launch_us.value, REPLAY, 0.1),
            "graph {}",
            p.graph_launch_us.value
        );
        assert!(
            close(p.upload_us.value, UPLOAD, 0.05),
            "upload {}",
            p.upload_us.value
        );
        assert!(p.upload_syncs.value);
        assert_eq!(p.host_speed_us.as_ref().unwrap().value, 7.5);
        let draft = &p.preps["dspark_draft_block"];
        // eager-sync: 8 ops + the upload (an op, not a read), 1 read after 2 ops; its op_us
        // is (8 × 10 + 19) / 9, the read at read_us not among them.
        assert_eq!(
            (
                draft.eager_sync.ops,
                draft.eager_sync.reads,
                draft.eager_sync.ops_before_read
            ),
            (9, 1, 2)
        );
        assert_eq!(draft.eager_sync.launches, 6);
        let sync_op = draft.eager_sync.op_us.unwrap();
        assert!(close(sync_op, (8.0 * OP + UPLOAD) / 9.0, 0.05), "{sync_op}");
        assert!(
            close(draft.eager_device.op_us.unwrap(), OP, 0.05),
            "{:?}",
            draft.eager_device
        );
        assert_eq!((draft.graph.ops, draft.graph.launches), (0, 0));
        // The prep's kernels: 2 µs each, from the eager-device launches.
        assert!(close(draft.kernel_us.unwrap(), 2.0, 1e-6));
        // The program as annotated; the scheduler's 50 µs of Python left as measured.
        let labels: Vec<&str> = p.program.iter().map(Item::label).collect();
        assert_eq!(
            labels,
            [
                "scheduler",
                "draft prep",
                "draft forward",
                "sampling",
                "verify prep",
                "verify forward",
                "accept"
            ]
        );
        match &p.program[0] {
            Item::Host { us, ops: 0, .. } => assert!(close(*us, 50.0, 0.05), "{us}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(p.program[3], Item::Host { ops: 4, .. }));
        assert!(p.op_us.source.contains("taken off"), "{}", p.op_us.source);
        assert!(
            c.report.contains("graph launch 18.000 µs (19.9"),
            "{}",
            c.report
        );
    }

    #[test]
    fn without_probes_the_costs_stay_inflated_and_say_so() {
        let dir = tempfile::tempdir().unwrap();
        // Kept: every framework cost carries the profiler's.
        let c = calibrated(dir.path(), false).unwrap();
        let p = &c.profile;
        assert!(p.op_us.value > OP + 1.0, "{}", p.op_us.value);
        assert!(
            p.graph_launch_us.value > REPLAY + 15.0,
            "{}",
            p.graph_launch_us.value
        );
        assert!(p.host_speed_us.is_none());
        assert!(
            p.op_us.source.contains("AS THE PROFILER SAW THEM"),
            "{}",
            p.op_us.source
        );
        // Not asked to keep them: refused, naming the fix.
        let result = calibrate_paths(vec![dir.path().join("trace-eager-sync.json")], false);
        let e = format!("{:#}", result.unwrap_err());
        assert!(
            e.contains("no probe file") && e.contains("--keep-profiler-costs"),
            "{e}"
        );
    }

    #[test]
    fn each_trace_is_moved_to_one_host_speed() {
        let dir = tempfile::tempdir().unwrap();
        let mut traces = Vec::new();
        // The eager-device trace's process ran at 10 µs per probe op, the graph's at 5.
        for (arm, speed) in [(Arm::EagerDevice, 10.0), (Arm::Graph, 5.0)] {
            let (trace, probe) = engine(arm, Some(COSTS));
            let probe = probe.replace(
                "\"host_speed_us\":7.5",
                &format!("\"host_speed_us\":{speed}"),
            );
            let path = dir.path().join(format!("t-{arm}.json"));
            std::fs::write(&path, trace).unwrap();
            std::fs::write(probe_path(&path), probe).unwrap();
            traces.push(path);
        }
        let result = calibrate_paths(traces, false);
        let p = result.unwrap().profile;
        // Reference speed: the median, 7.5. Eager-device's 10 µs ops at speed 10 → 7.5 µs.
        assert_eq!(p.host_speed_us.as_ref().unwrap().value, 7.5);
        let dev = p.preps["dspark_draft_block"].eager_device.op_us.unwrap();
        assert!(close(dev, OP * 7.5 / 10.0, 0.05), "{dev}");
        // Replays of 5 µs: the graph trace's (at speed 5) → 7.5, the eager-device's (at 10) →
        // 3.75; the median of the pooled samples lies between.
        let g = p.graph_launch_us.value;
        assert!((3.7..=7.6).contains(&g), "{g}");
        // Moving the profile to another measured host speed scales framework costs only.
        let slow = p.at_host_speed(15.0).unwrap();
        assert!(close(slow.op_us.value, p.op_us.value * 2.0, 1e-9));
        assert!(close(slow.read_us.value, p.read_us.value * 2.0, 1e-9));
        match (&slow.program[0], &p.program[0]) {
            (Item::Host { us: a, .. }, Item::Host { us: b, .. }) => assert_eq!(a, b),
            other => panic!("{other:?}"),
        }
        assert!(p.at_host_speed(0.0).is_err());
        assert!(HostProfile::load("native")
            .unwrap()
            .at_host_speed(7.0)
            .is_err());
    }

    #[test]
    fn the_post_wait_probes_are_moved_to_the_profiles_speed_and_pooled() {
        let dir = tempfile::tempdir().unwrap();
        let mut traces = Vec::new();
        // Three processes at 10, 5 and 7.5 µs per probe op (their probe files' host speed),
        // each seeing the same extras in its own µs: 20 and 48 at 7.5. Each post-wait probe
        // ran at another speed level than its file's bare probes (host_speed() around it 0.6,
        // 1.7 and 1.3 times theirs), its extras in its own µs: read at the file's speed they
        // would pool to 26. Its own pass meter (`host_speed_us`) is not read.
        // (A record with no speed of its own counts as at its file's speed:
        // engine_paying_after_reads' tables.)
        for (arm, speed, level) in [
            (Arm::EagerDevice, 10.0, 0.6),
            (Arm::Graph, 5.0, 1.7),
            (Arm::EagerSync, 7.5, 1.3),
        ] {
            let (trace, probe) = engine(arm, Some(COSTS));
            let own = speed * level;
            let post_wait = format!(
                "\"post_wait\":{{\"gaps_us\":[0,3000],\"segment_ops\":[1,24],\
                 \"extra_us\":[[0,0],[{},{}]],\"host_speed_us\":99,\"around_speed_us\":{own},\
                 \"reps\":60}},",
                20.0 * own / 7.5,
                48.0 * own / 7.5
            );
            let probe = probe
                .replace(
                    "\"host_speed_us\":7.5",
                    &format!("\"host_speed_us\":{speed}"),
                )
                .replacen("\"mark\"", &format!("{post_wait}\"mark\""), 1);
            let path = dir.path().join(format!("t-{arm}.json"));
            std::fs::write(&path, trace).unwrap();
            std::fs::write(probe_path(&path), probe).unwrap();
            traces.push(path);
        }
        let p = calibrate_paths(traces.clone(), false).unwrap().profile;
        let speed = p.host_speed_us.as_ref().unwrap().value;
        assert_eq!(speed, 7.5);
        let pw = &p.post_wait.as_ref().expect("a post-wait table").value;
        assert_eq!(pw.gaps_us, vec![0.0, 3000.0]);
        // Each moved to its file's speed, then by its trace's factor (7.5 over that): 20 and
        // 48 from every one.
        for (got, want) in pw.extra_us[1].iter().zip([20.0, 48.0]) {
            assert!((got - want).abs() < 1e-9, "{:?}", pw.extra_us);
        }
        assert!(p
            .post_wait
            .as_ref()
            .unwrap()
            .source
            .contains("post_wait_probe"));
        // A profile moved to a slower host pays more after a wait.
        let slow = p.at_host_speed(15.0).unwrap();
        assert_eq!(slow.post_wait.unwrap().value.extra_us[1], vec![40.0, 96.0]);
        // Probes with other gaps cannot be pooled.
        let other = std::fs::read_to_string(probe_path(&traces[0]))
            .unwrap()
            .replace("[0,3000]", "[0,1000]");
        std::fs::write(probe_path(&traces[0]), other).unwrap();
        let e = format!("{:#}", calibrate_paths(traces, false).unwrap_err());
        assert!(e.contains("other gaps or segments"), "{e}");
    }

    /// An eager-sync engine whose ops after each read cost what a post-wait table says
    /// (the first 12 µs more, the next four 2 µs more each), traced at `COSTS`; with the
    /// table in its probe file, or without.
    fn engine_paying_after_reads(with_table: bool) -> (String, String) {
        let mut s = Synth::new(Some(COSTS));
        let (probes, _) = s.probes(50);
        let prep = |s: &mut Synth| {
            op(s, 0, &[3000.0]); // a long kernel: the read waits ~3 ms for it
            s.read(READ);
            // A syncing upload next, as in both reference loops; its wait is ~0 (the read
            // drained the GPU), so the read's sequence runs on and the upload is its first.
            s.upload(UPLOAD + 12.0);
            for extra in [2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0] {
                s.op(Op {
                    name: "aten::add",
                    bare_us: OP + extra,
                    nested: 0,
                    kernels: &[],
                });
            }
        };
        for _ in 0..4 {
            s.range("step", |s| {
                s.range("draft prep", prep);
                s.range("draft forward", |s| s.replay(REPLAY, 1, 1000.0));
                s.range("verify prep", prep);
                s.range("verify forward", |s| s.replay(REPLAY, 1, 1000.0));
                s.range("accept", |s| op(s, 0, &[1.0]));
            });
        }
        let mut probe = probe_file(&probes, 7.5);
        if with_table {
            let table = "\"post_wait\":{\"gaps_us\":[0,100],\"segment_ops\":[1,4],\
                         \"extra_us\":[[0,0],[12,8]],\"host_speed_us\":7.5},";
            probe = probe.replacen("\"mark\"", &format!("{table}\"mark\""), 1);
        }
        (s.into_json(), probe)
    }

    #[test]
    fn a_known_post_wait_cost_is_taken_off_the_ops_after_a_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut op_us = Vec::new();
        for with_table in [false, true] {
            let (trace, probe) = engine_paying_after_reads(with_table);
            let path = dir.path().join(format!("sync-{with_table}.json"));
            std::fs::write(&path, trace).unwrap();
            std::fs::write(probe_path(&path), probe).unwrap();
            let p = calibrate_paths(vec![path], false).unwrap().profile;
            assert_eq!(p.post_wait.is_some(), with_table);
            op_us.push(p.preps["dspark_draft_block"].eager_sync.op_us.unwrap());
        }
        // The upload and 8 ops paying 20 µs after the read: 20/9 µs an op left in without
        // the table; with it, the back-to-back cost (within what a gap of a few µs more than
        // TRACE_GAP_US before the prep's first op takes off: under 0.35 µs an op). Had the
        // upload's short wait replaced the read's sequence instead of running beside it (the
        // largest live extra is paid), 8 µs would stay in (0.9 an op).
        let back_to_back = (8.0 * OP + UPLOAD) / 9.0;
        assert!(
            close(op_us[0], back_to_back + 20.0 / 9.0, 0.05),
            "{op_us:?}"
        );
        assert!(close(op_us[1], back_to_back, 0.35), "{op_us:?}");
        // --no-post-wait: the table is there, but left out.
        let (trace, probe) = engine_paying_after_reads(true);
        let path = dir.path().join("sync-off.json");
        std::fs::write(&path, trace).unwrap();
        std::fs::write(probe_path(&path), probe).unwrap();
        let p = calibrate_with(vec![path], false, false).unwrap().profile;
        assert!(p.post_wait.is_none());
        let off = p.preps["dspark_draft_block"].eager_sync.op_us.unwrap();
        assert!(close(off, back_to_back + 20.0 / 9.0, 0.05), "{off}");
    }

    #[test]
    fn two_traces_of_one_arm_or_of_two_programs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut traces = Vec::new();
        for i in 0..2 {
            let (trace, probe) = engine(Arm::Graph, Some(COSTS));
            let path = dir.path().join(format!("g{i}.json"));
            std::fs::write(&path, trace).unwrap();
            std::fs::write(probe_path(&path), probe).unwrap();
            traces.push(path);
        }
        let result = calibrate_paths(traces, false);
        let e = format!("{:#}", result.unwrap_err());
        assert!(
            e.contains("already showed") && e.contains("one trace per arm"),
            "{e}"
        );
    }
}
