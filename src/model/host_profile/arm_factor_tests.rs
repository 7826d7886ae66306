//! The arm host factors' tests: what `for_arm` scales and what it leaves, its composition with
//! the host scale and host speed, the field's round trip and its refusals.

use super::*;
use crate::axes::Arm;
use crate::model::post_wait::PostWait;

fn sourced(value: f64) -> Sourced<f64> {
    Sourced {
        value,
        source: "test".into(),
    }
}

/// The built-in `pytorch` profile with every kind of host cost set (a prep arm's own op
/// cost, a post-wait table, a host segment by batch in a draft-passes group), and factors
/// for eager-device (1.5) and graph (0.5).
fn factored() -> HostProfile {
    let mut p = HostProfile::load("pytorch").unwrap();
    let prep = p.preps.get_mut("dspark_draft_block").unwrap();
    prep.eager_device.op_us = Some(7.0);
    prep.graph_upload = Some(ArmOps {
        ops: 2,
        op_us: Some(3.0),
        ..ArmOps::default()
    });
    p.post_wait = Some(Sourced {
        value: PostWait {
            gaps_us: vec![0.0, 1000.0],
            segment_ops: vec![1, 24],
            extra_us: vec![vec![0.0, 0.0], vec![10.0, 40.0]],
        },
        source: "test".into(),
    });
    p.pinned_read_us = Some(sourced(21.0));
    if let Item::Host { us_by_batch, .. } = &mut p.program[0] {
        *us_by_batch = Some([(1, 50.0), (64, 120.0)].into());
    }
    let eagle = p.eagle_program.as_mut().unwrap();
    let at = eagle
        .iter()
        .position(|i| matches!(i, Item::DraftPasses { .. }))
        .unwrap();
    eagle[at] = Item::DraftPasses {
        items: vec![
            Item::Host {
                name: "pass bookkeeping".into(),
                us: 8.0,
                us_by_batch: None,
                ops: 1,
                launches: None,
                source: "test".into(),
            },
            Item::DecodePrep,
        ],
    };
    p.arm_host_factors = Some(
        [
            ("eager-device".to_string(), sourced(1.5)),
            ("graph".to_string(), sourced(0.5)),
        ]
        .into(),
    );
    p.check_well_formed().unwrap();
    p
}

/// Every host segment's µs (nested ones too) times `k`, written out here rather than
/// through the code under test.
fn times_hosts(items: &mut [Item], k: f64) {
    for item in items {
        match item {
            Item::Host {
                us, us_by_batch, ..
            } => {
                *us *= k;
                for v in us_by_batch.iter_mut().flat_map(|m| m.values_mut()) {
                    *v *= k;
                }
            }
            Item::DraftPasses { items } => times_hosts(items, k),
            _ => {}
        }
    }
}

#[test]
fn for_arm_scales_every_host_duration_of_the_arm_and_nothing_else() {
    let p = factored();
    let k = 1.5;
    let mut want = p.clone();
    want.arm_host_factors = None;
    want.op_us.value *= k;
    for cost in [
        &mut want.read_us,
        &mut want.graph_launch_us,
        &mut want.upload_us,
        want.pinned_read_us.as_mut().unwrap(),
        want.mapped_read_us.as_mut().unwrap(),
    ] {
        cost.value *= k;
    }
    for row in &mut want.post_wait.as_mut().unwrap().value.extra_us {
        row.iter_mut().for_each(|v| *v *= k);
    }
    let prep = want.preps.get_mut("dspark_draft_block").unwrap();
    prep.eager_device.op_us = Some(7.0 * k);
    prep.graph_upload.as_mut().unwrap().op_us = Some(3.0 * k);
    times_hosts(&mut want.program, k);
    times_hosts(want.eagle_program.as_mut().unwrap(), k);
    let got = p.for_arm(Arm::EagerDevice);
    assert_eq!(got, want);
    // The factor is in the costs now: applying it again changes nothing.
    assert_eq!(got.for_arm(Arm::EagerDevice), got);
    // GPU times and counts are not host durations.
    assert_eq!(got.kernel_us, p.kernel_us);
    assert_eq!(got.preps["dspark_draft_block"].eager_device.ops, 26);
}

#[test]
fn an_arm_without_a_factor_runs_at_the_profile_s_costs() {
    let p = factored();
    let mut want = p.clone();
    want.arm_host_factors = None;
    for arm in [Arm::EagerSync, Arm::GraphUpload, Arm::Fused] {
        assert_eq!(p.arm_host_factor(arm), None, "{arm}");
        assert_eq!(p.for_arm(arm), want, "{arm}");
    }
    assert_eq!(p.arm_host_factor(Arm::Graph), Some(0.5));
    let plain = HostProfile::load("pytorch").unwrap();
    assert_eq!(plain.for_arm(Arm::EagerDevice), plain);
}

/// Every number of `a` within a relative 1e-12 of `b`'s, every other value equal.
fn assert_close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{at}: {x} vs {y}"
            );
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}"
            );
            for (k, v) in x {
                assert_close(v, &y[k], &format!("{at}.{k}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                assert_close(v, w, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn the_factor_composes_with_the_host_scale_and_the_host_speed() {
    let p = factored();
    let own = p.host_speed_us.as_ref().unwrap().value;
    let arm = Arm::Graph;
    let json = |p: &HostProfile| serde_json::to_value(p).unwrap();
    // In any order, as steps (speed, then scale, then arm) and validate do.
    let steps_order = p
        .at_host_speed(2.0 * own)
        .unwrap()
        .scaled(3.0)
        .unwrap()
        .for_arm(arm);
    let arm_first = p
        .for_arm(arm)
        .scaled(3.0)
        .unwrap()
        .at_host_speed(2.0 * own)
        .unwrap();
    assert_close(&json(&steps_order), &json(&arm_first), "profile");
    // Framework costs take all three, a read (not scaled by --host-scale) speed and arm,
    // a host segment (not moved by the host speed) scale and arm.
    let close = |x: f64, y: f64| assert!((x - y).abs() < 1e-9 * y, "{x} vs {y}");
    close(steps_order.op_us.value, p.op_us.value * 2.0 * 3.0 * 0.5);
    close(steps_order.read_us.value, p.read_us.value * 2.0 * 0.5);
    let host_us = |p: &HostProfile| match &p.program[0] {
        Item::Host { us, .. } => *us,
        other => panic!("{other:?}"),
    };
    close(host_us(&steps_order), host_us(&p) * 3.0 * 0.5);
}

#[test]
fn arm_host_factors_round_trip_and_a_profile_without_them_writes_none() {
    let p = factored();
    assert_eq!(HostProfile::parse(&p.to_json()).unwrap(), p);
    let plain = HostProfile::load("pytorch").unwrap();
    assert!(!plain.to_json().contains("arm_host_factors"));
    // steps' profile line names them.
    let line = p.describe();
    assert!(
        line.contains("arm host factors eager-device x1.500 graph x0.500"),
        "{line}"
    );
    assert!(!plain.describe().contains("factor"));
}

/// `factors` (JSON) in the `pytorch` profile, written to a file and loaded: the error.
fn load_err(factors: serde_json::Value) -> (String, String) {
    let mut v: serde_json::Value = serde_json::from_str(BUILT_IN[1].1).unwrap();
    v["arm_host_factors"] = factors;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fitted.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let e = HostProfile::load(path.to_str().unwrap()).unwrap_err();
    (format!("{e:#}"), path.display().to_string())
}

#[test]
fn a_bad_factor_is_refused_naming_the_arm_and_the_file() {
    let entry = |arm: &str, v: f64| serde_json::json!({ arm: { "value": v, "source": "x" } });
    for (arm, v) in [
        ("eager-device", 0.0),
        ("graph", -1.0),
        ("graph-upload", 101.0),
    ] {
        let (e, file) = load_err(entry(arm, v));
        assert!(
            e.contains(&format!("arm_host_factors.{arm}")) && e.contains(&file),
            "{e}"
        );
    }
    let (e, file) = load_err(entry("eager_device", 1.2));
    assert!(
        e.contains("eager_device") && e.contains("eager-device") && e.contains(&file),
        "{e}"
    );
    // The entry's own fields are checked as every sourced value's.
    let (e, _) = load_err(serde_json::json!({ "graph": { "value": 1.1 } }));
    assert!(e.contains("arm_host_factors"), "{e}");
}

#[test]
fn a_fitted_post_wait_scale_round_trips_and_without_fits_undoes_it_and_the_factors() {
    let mut p = factored();
    p.post_wait.as_mut().unwrap().value.scale(0.5);
    p.post_wait_scale = Some(sourced(0.5));
    let back = HostProfile::parse(&p.to_json()).unwrap();
    assert_eq!(back, p);
    // Before a fit: the table as calibrate wrote it, no scale, no factors.
    let plain = p.without_fits();
    assert_eq!(plain.post_wait_scale, None);
    assert_eq!(plain.arm_host_factors, None);
    assert_eq!(
        plain.post_wait.as_ref().unwrap().value.extra_us[1],
        vec![10.0, 40.0]
    );
    // Undoing twice changes nothing more; a profile that never had one writes none.
    assert_eq!(plain.without_fits(), plain);
    assert!(!plain.to_json().contains("post_wait_scale"));
}

#[test]
fn a_post_wait_scale_without_a_table_or_out_of_range_is_refused() {
    for (table, scale, needle) in [
        (false, 0.5, "without a post_wait table"),
        (true, 0.0, "post_wait_scale = 0"),
        (true, 1000.0, "post_wait_scale = 1000"),
    ] {
        let mut p = factored();
        if !table {
            p.post_wait = None;
        }
        p.post_wait_scale = Some(sourced(scale));
        let e = HostProfile::parse(&p.to_json()).map(|_| ()).unwrap_err();
        assert!(format!("{e:#}").contains(needle), "{e:#}");
    }
}
