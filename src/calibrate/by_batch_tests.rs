//! Host segments at other batch sizes, from `--gpu-trace`s (synthetic traces, no GPU).

use super::probe_path;
use super::synthetic::{probe_file, Op, Synth, COSTS};
use super::{calibrate, CalibrateRequest};
use crate::axes::{Arm, Drafter};
use crate::model::host_profile::{HostProfile, Item};
use std::path::{Path, PathBuf};

/// Profiled steps of `arm`: a Python segment `first` (`scheduler`, or another name in its
/// place) of each `scheduler_us` in turn, the DSpark program's preps (eager ops, or a graph
/// replay), forwards as replays. Returns the trace and its probe file.
fn engine(arm: Arm, scheduler_us: &[(&str, f64)]) -> (String, String) {
    let mut s = Synth::new(Some(COSTS));
    let (probes, _) = s.probes(50);
    let add = |s: &mut Synth| {
        s.op(Op {
            name: "aten::add",
            bare_us: 10.0,
            nested: 0,
            kernels: &[2.0],
        })
    };
    let prep = |s: &mut Synth| match arm {
        Arm::Graph => s.replay(5.0, 6, 2.0),
        _ => (0..6).for_each(|_| add(s)),
    };
    for &(first, us) in scheduler_us {
        s.range("step", |s| {
            s.range(first, |s| s.host(us));
            s.range("draft prep", |s| prep(s));
            s.range("draft forward", |s| s.replay(5.0, 1, 1000.0));
            s.range("sampling", |s| (0..4).for_each(|_| add(s)));
            s.range("verify prep", |s| prep(s));
            s.range("verify forward", |s| s.replay(5.0, 1, 1000.0));
            s.range("accept", |s| add(s));
        });
    }
    (s.into_json(), probe_file(&probes, 7.5))
}

fn steady(us: f64) -> Vec<(&'static str, f64)> {
    vec![("scheduler", us); 4]
}

/// Writes `trace` (and its probe file, where `probe`) into `dir`.
fn write(dir: &Path, name: &str, (trace, probe): (String, String), with_probe: bool) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, trace).unwrap();
    if with_probe {
        std::fs::write(probe_path(&path), probe).unwrap();
    }
    path
}

/// A batch trace for [`calibrated`]: its batch, its steps' schedulers, whether it has a probe.
struct At<'a> {
    batch: u32,
    steps: &'a [(&'a str, f64)],
    probe: bool,
}

fn at<'a>(batch: u32, steps: &'a [(&'a str, f64)], probe: bool) -> At<'a> {
    At {
        batch,
        steps,
        probe,
    }
}

/// Calibrates eager-device and graph traces at batch 1 (their schedulers `traced`) with the
/// batch traces `gpu`.
fn calibrated(dir: &Path, traced: &[(&str, f64)], gpu: &[At]) -> HostProfile {
    let traces = [Arm::EagerDevice, Arm::Graph]
        .iter()
        .map(|&arm| write(dir, &format!("trace-{arm}.json"), engine(arm, traced), true))
        .collect();
    let gpu_traces = gpu
        .iter()
        .map(|g| {
            let name = format!("trace-graph-bs{}.json", g.batch);
            let trace = engine(Arm::Graph, g.steps);
            (g.batch, write(dir, &name, trace, g.probe))
        })
        .collect();
    let req = CalibrateRequest {
        traces,
        batch: 1,
        gpu_traces,
        keep_profiler_costs: false,
        post_wait: false,
    };
    calibrate(&req, &HostProfile::load("pytorch").unwrap())
        .unwrap()
        .profile
}

fn scheduler(items: &[Item]) -> (f64, Option<Vec<(u32, f64)>>, String) {
    match &items[0] {
        Item::Host {
            name,
            us,
            us_by_batch,
            source,
            ..
        } => {
            assert_eq!(name, "scheduler");
            let by_batch = us_by_batch
                .as_ref()
                .map(|m| m.iter().map(|(&b, &v)| (b, v)).collect());
            (*us, by_batch, source.clone())
        }
        other => panic!("{other:?}"),
    }
}

/// Within the synthetic range's own bare share (0.01 µs) of `want`.
fn near(got: f64, want: f64) -> bool {
    (got - want).abs() < 0.1
}

#[test]
fn a_python_segment_takes_its_time_at_each_traced_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (bs8, bs64) = (steady(58.0), steady(114.0));
    let gpu = [at(8, &bs8, true), at(64, &bs64, true)];
    let p = calibrated(dir.path(), &steady(50.0), &gpu);
    let (us, by_batch, source) = scheduler(&p.program);
    let by_batch = by_batch.expect("us_by_batch from the batch traces");
    // Every point with the profiler's annotation cost taken off, as the traced batch's is.
    assert!(near(us, 50.0), "{us}");
    assert_eq!(by_batch.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 8, 64]);
    for ((_, got), want) in by_batch.iter().zip([50.0, 58.0, 114.0]) {
        assert!(near(*got, want), "{by_batch:?}");
    }
    assert!(
        source.contains("trace-graph-bs64.json at batch 64"),
        "{source}"
    );
    // A step resolves it at its batch: the traced points, linear between, the last beyond.
    let at = |bs| scheduler(&p.step_items(Drafter::Dspark, 5, bs).unwrap()).0;
    assert!(near(at(8), 58.0) && near(at(64), 114.0) && near(at(512), 114.0));
    let (b8, b64) = (by_batch[1].1, by_batch[2].1);
    assert!(
        (at(36) - (b8 + (b64 - b8) * 28.0 / 56.0)).abs() < 1e-9,
        "{}",
        at(36)
    );
    // The what-if scale moves every point.
    let doubled = p.scaled(2.0).unwrap();
    assert_eq!(
        scheduler(&doubled.step_items(Drafter::Dspark, 5, 64).unwrap()).0,
        2.0 * b64
    );
}

#[test]
fn a_batch_trace_of_another_program_or_without_a_probe_is_named_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let other = [("logging", 30.0); 4];
    let bs64 = steady(114.0);
    let gpu = [at(8, &other, true), at(64, &bs64, false)];
    let p = calibrated(dir.path(), &steady(50.0), &gpu);
    let (us, by_batch, source) = scheduler(&p.program);
    assert_eq!(by_batch, None, "{source}");
    assert!(near(us, 50.0), "{us}");
    assert!(
        source.contains("trace-graph-bs8.json (its steps run another program)")
            && source.contains("trace-graph-bs64.json (no probe file)"),
        "{source}"
    );
}

#[test]
fn a_step_of_another_sequence_lends_no_segment_its_time() {
    // Two of three steps run the program; the third has another segment in the scheduler's
    // place, as long as the program. Only the program's steps count: (110 + 118) / 2.
    let dir = tempfile::tempdir().unwrap();
    let bs64 = [
        ("scheduler", 110.0),
        ("logging", 500.0),
        ("scheduler", 118.0),
    ];
    let gpu = [at(64, &bs64, true)];
    let p = calibrated(dir.path(), &steady(50.0), &gpu);
    let by_batch = scheduler(&p.program).1.expect("a point at batch 64");
    assert!(near(by_batch[1].1, 114.0), "{by_batch:?}");
}

#[test]
fn a_batch_point_inside_the_traced_spread_is_not_taken() {
    // The traced batch's steps spread 30-70 µs; batch 8's 47-55 sit inside its interquartile
    // range: one process's few steps, not the batch's effect. Batch 64's 150s clear it.
    let dir = tempfile::tempdir().unwrap();
    let traced = [
        ("scheduler", 30.0),
        ("scheduler", 70.0),
        ("scheduler", 40.0),
        ("scheduler", 60.0),
    ];
    let bs8 = [
        ("scheduler", 47.0),
        ("scheduler", 55.0),
        ("scheduler", 52.0),
    ];
    let bs64 = steady(150.0);
    let gpu = [at(8, &bs8, true), at(64, &bs64, true)];
    let p = calibrated(dir.path(), &traced, &gpu);
    let (_, by_batch, source) = scheduler(&p.program);
    let by_batch = by_batch.expect("batch 64's point");
    assert_eq!(by_batch.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 64]);
    assert!(
        source.contains("trace-graph-bs8.json at batch 8") && source.contains("not a batch point"),
        "{source}"
    );
}

#[test]
fn a_bad_batch_table_is_refused() {
    let base = HostProfile::load("pytorch").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&base.to_json()).unwrap();
    let host = v["program"]
        .as_array()
        .unwrap()
        .iter()
        .position(|i| i["kind"] == "host")
        .expect("the pytorch program has a host item");
    for (bad, says) in [
        (serde_json::json!({}), "at least one batch size"),
        (serde_json::json!({"0": 5.0}), "batch sizes start at 1"),
        (serde_json::json!({"8": -1.0}), "us_by_batch.8"),
        (
            serde_json::json!({"eight": 5.0}),
            "`eight` is not a batch size",
        ),
        (serde_json::json!({"08": 5.0}), "`08` is not a batch size"),
    ] {
        v["program"][host]["us_by_batch"] = bad;
        let err = format!("{:#}", HostProfile::parse(&v.to_string()).unwrap_err());
        assert!(err.contains(says), "{err}");
    }
    // Written and read back, a good table is kept.
    v["program"][host]["us_by_batch"] = serde_json::json!({"1": 50.0, "64": 150.0});
    let p = HostProfile::parse(&v.to_string()).unwrap();
    let again = HostProfile::parse(&p.to_json()).unwrap();
    assert_eq!(again, p);
    assert_eq!(
        scheduler(&again.step_items(Drafter::Dspark, 5, 64).unwrap()).0,
        150.0
    );
}
