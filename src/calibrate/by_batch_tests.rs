//! Host segments at other batch sizes, from `--gpu-trace`s (synthetic traces, no GPU).

use super::synthetic::{Op, Synth};
use super::{calibrate, CalibrateRequest};
use crate::axes::{Arm, Drafter};
use crate::model::host_profile::{HostProfile, Item};
use std::path::{Path, PathBuf};

/// Four bare steps of `arm`: a Python scheduler of `scheduler_us`, the DSpark program's
/// preps (eager ops, or a graph replay), forwards as replays; `extra` adds a segment the
/// other traces lack.
fn engine(arm: Arm, scheduler_us: f64, extra: bool) -> String {
    let mut s = Synth::new(None);
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
    for _ in 0..4 {
        s.range("step", |s| {
            s.range("scheduler", |s| s.host(scheduler_us));
            if extra {
                s.range("logging", |s| s.host(30.0));
            }
            s.range("draft prep", |s| prep(s));
            s.range("draft forward", |s| s.replay(5.0, 1, 1000.0));
            s.range("sampling", |s| (0..4).for_each(|_| add(s)));
            s.range("verify prep", |s| prep(s));
            s.range("verify forward", |s| s.replay(5.0, 1, 1000.0));
            s.range("accept", |s| add(s));
        });
    }
    s.into_json()
}

fn write(dir: &Path, name: &str, trace: String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, trace).unwrap();
    path
}

/// Calibrates eager-device and graph traces at batch 1 (scheduler 50 µs) with `gpu` traces:
/// (batch, scheduler µs, extra segment).
fn calibrated(dir: &Path, gpu: &[(u32, f64, bool)]) -> HostProfile {
    let traces = [Arm::EagerDevice, Arm::Graph]
        .iter()
        .map(|&arm| write(dir, &format!("trace-{arm}.json"), engine(arm, 50.0, false)))
        .collect();
    let gpu_traces = gpu
        .iter()
        .map(|&(bs, us, extra)| {
            let name = format!("trace-graph-bs{bs}.json");
            (bs, write(dir, &name, engine(Arm::Graph, us, extra)))
        })
        .collect();
    let req = CalibrateRequest {
        traces,
        batch: 1,
        gpu_traces,
        keep_profiler_costs: true,
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

#[test]
fn a_python_segment_takes_its_time_at_each_traced_batch() {
    let dir = tempfile::tempdir().unwrap();
    let p = calibrated(dir.path(), &[(8, 58.0, false), (64, 114.0, false)]);
    let (us, by_batch, source) = scheduler(&p.program);
    let by_batch = by_batch.expect("us_by_batch from the batch traces");
    // Bare traces: a range's own bare cost (under 1 µs) stays in each value.
    let near = |got: f64, want: f64| (got - want).abs() < 1.0;
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
    // Written and read back, the profile keeps the points.
    let again = HostProfile::parse(&p.to_json()).unwrap();
    assert_eq!(scheduler(&again.program).1, scheduler(&p.program).1);
}

#[test]
fn a_batch_trace_of_another_program_is_named_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let p = calibrated(dir.path(), &[(64, 114.0, true)]);
    let (us, by_batch, source) = scheduler(&p.program);
    assert_eq!(by_batch, None, "{source}");
    assert!((us - 50.0).abs() < 1.0, "{us}");
    assert!(
        source.contains("not from") && source.contains("trace-graph-bs64.json"),
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
    ] {
        v["program"][host]["us_by_batch"] = bad;
        let err = format!("{:#}", HostProfile::parse(&v.to_string()).unwrap_err());
        assert!(err.contains(says), "{err}");
    }
}
