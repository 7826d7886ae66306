//! The profile's tests: built-in profiles, refusals, costs, scaling, the EAGLE step.

use super::*;
use crate::axes::{Arm, Drafter, ReadPath};

#[test]
fn built_in_profiles_parse_and_name_themselves() {
    for (name, _) in BUILT_IN {
        let p = HostProfile::load(name).unwrap();
        assert_eq!(p.name, name);
        assert!(!p.source.is_empty());
    }
}

#[test]
fn a_prep_s_source_claims_no_gpu_figure_it_lacks() {
    // A source that says where `kernel_us_by_batch` came from must sit beside one: the
    // EAGLE preps (decode, draft-extend) were never timed on the GPU and take the
    // profile's `kernel_us`, which their sources must say instead.
    for (name, _) in BUILT_IN {
        let p = HostProfile::load(name).unwrap();
        for (family, prep) in &p.preps {
            assert!(
                !prep.source.contains("kernel_us_by_batch =") || prep.kernel_us_by_batch.is_some(),
                "{name}: preps.{family}: its source gives a kernel_us_by_batch it lacks"
            );
            if prep.kernel_us_by_batch.is_none() && prep.kernel_us.is_none() {
                assert_eq!(p.prep_kernel_us(phase_of(family), 8), p.kernel_us.value);
            }
        }
    }
}

/// The phase whose prep computes `family` (by name).
fn phase_of(family: &str) -> Phase {
    [Phase::Draft, Phase::Verify, Phase::Decode, Phase::Extend]
        .into_iter()
        .find(|&p| family_of(p).name() == family)
        .unwrap()
}

#[test]
fn native_adds_no_host_cost_to_the_preps() {
    let p = HostProfile::load("native").unwrap();
    for (phase, _) in STEP_FAMILIES {
        for arm in Arm::ALL {
            assert_eq!(p.arm_ops(phase, arm).ops, 0, "{arm}");
        }
    }
}

#[test]
fn unknown_names_and_files_are_refused_with_the_choices() {
    let e = HostProfile::load("tensorflow").unwrap_err().to_string();
    assert!(e.contains("native, pytorch"), "{e}");
}

fn native_json() -> serde_json::Value {
    serde_json::from_str(BUILT_IN[0].1).unwrap()
}

fn parse_err(v: &serde_json::Value) -> String {
    format!("{:#}", HostProfile::parse(&v.to_string()).unwrap_err())
}

#[test]
fn a_program_must_hold_each_gpu_item_once_and_in_order() {
    let mut v = native_json();
    let program = v["program"].as_array_mut().unwrap();
    program.retain(|i| i["kind"] != "accept");
    assert!(parse_err(&v).contains("exactly one `accept`"));

    let mut v = native_json();
    let program = v["program"].as_array_mut().unwrap();
    let draft = program
        .iter()
        .position(|i| i["kind"] == "draft_prep")
        .unwrap();
    let fwd = program
        .iter()
        .position(|i| i["kind"] == "draft_forward")
        .unwrap();
    program.swap(draft, fwd);
    assert!(parse_err(&v).contains("must order"), "{}", parse_err(&v));
}

#[test]
fn bad_numbers_and_unknown_fields_are_refused() {
    let mut v = native_json();
    v["op_us"]["value"] = serde_json::json!(-1.0);
    assert!(parse_err(&v).contains("op_us"));
    let mut v = native_json();
    v["preps"]["dsa_target_verify"]["eager_sync"]["reads"] = serde_json::json!(0);
    assert!(parse_err(&v).contains("reads at least once"));
    let mut v = native_json();
    v["preps"]["dsa_target_verify"]["eager_device"]["launches"] = serde_json::json!(99);
    assert!(parse_err(&v).contains("more launches than ops"));
    let mut v = native_json();
    v["opus"] = serde_json::json!(1);
    assert!(parse_err(&v).contains("opus"), "{}", parse_err(&v));
    let mut v = native_json();
    v["preps"]
        .as_object_mut()
        .unwrap()
        .remove("dspark_draft_block");
    assert!(parse_err(&v).contains("dspark_draft_block"));
}

#[test]
fn kernel_time_follows_the_batch_size_between_measured_points() {
    let mut v = native_json();
    v["preps"]["dsa_target_verify"]["kernel_us"] = serde_json::json!(9.0);
    v["preps"]["dsa_target_verify"]["kernel_us_by_batch"] =
        serde_json::json!({"1": 2.0, "8": 3.4, "64": 8.0});
    let p = HostProfile::parse(&v.to_string()).unwrap();
    let at = |bs| p.prep_kernel_us(Phase::Verify, bs);
    assert_eq!(at(1), 2.0);
    assert!((at(4) - 2.6).abs() < 1e-12, "{}", at(4)); // 2 + 1.4 * 3/7
    assert_eq!(at(64), 8.0);
    assert_eq!(at(256), 8.0, "beyond the last point: the nearest");
    // The per-batch table wins over the single value; the other family keeps its own.
    assert_eq!(
        p.prep_kernel_us(Phase::Draft, 8),
        p.preps["dspark_draft_block"]
            .kernel_us
            .unwrap_or(p.kernel_us.value)
    );

    v["preps"]["dsa_target_verify"]["kernel_us_by_batch"] = serde_json::json!({"0": 1.0});
    assert!(
        parse_err(&v).contains("batch sizes start at 1"),
        "{}",
        parse_err(&v)
    );
    v["preps"]["dsa_target_verify"]["kernel_us_by_batch"] = serde_json::json!({"8": -1.0});
    assert!(
        parse_err(&v).contains("kernel_us_by_batch.8"),
        "{}",
        parse_err(&v)
    );
}

#[test]
fn scaling_multiplies_host_durations_only() {
    let p = HostProfile::load("pytorch").unwrap();
    let s = p.scaled(2.0).unwrap();
    assert_eq!(s.op_us.value, 2.0 * p.op_us.value);
    assert_eq!(s.read_us, p.read_us);
    assert_eq!(s.graph_launch_us, p.graph_launch_us);
    for (a, b) in p.program.iter().zip(&s.program) {
        if let (Item::Host { us: x, ops: n, .. }, Item::Host { us: y, ops: m, .. }) = (a, b) {
            assert_eq!(*y, 2.0 * x);
            assert_eq!(n, m);
        }
    }
    let (eagle, scaled_eagle) = (
        p.step_items(Drafter::Eagle, 5, 1).unwrap(),
        s.step_items(Drafter::Eagle, 5, 1).unwrap(),
    );
    let scheduler = |items: &[Item]| match &items[0] {
        Item::Host { us, .. } => *us,
        other => panic!("{other:?}"),
    };
    assert_eq!(scheduler(&scaled_eagle), 2.0 * scheduler(&eagle));
    for bad in [0.0, -1.0, f64::NAN, 1e9] {
        assert!(p.scaled(bad).is_err(), "{bad}");
    }
}

#[test]
fn each_read_path_has_its_own_cost_and_a_missing_one_refuses_its_arm() {
    let mut p = HostProfile::load("native").unwrap();
    assert_eq!(p.read_cost(ReadPath::Pageable), Some(&p.read_us));
    p.pinned_read_us = None;
    p.mapped_read_us = Some(Sourced {
        value: 3.5,
        source: "test".into(),
    });
    p.require_read_costs(&[Arm::EagerSync, Arm::EagerMapped, Arm::Graph])
        .unwrap();
    let e = p
        .require_read_costs(&[Arm::EagerSync, Arm::EagerPinned])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pinned_read_us") && e.contains("eager-pinned") && e.contains("native"),
        "{e}"
    );
    let note = p
        .read_paths_note(&[Arm::EagerSync, Arm::EagerPinned, Arm::EagerMapped])
        .unwrap();
    assert!(
        note.starts_with("host profile `native` read paths: "),
        "{note}"
    );
    assert!(note.contains("eager-pinned pinned_read_us: none"), "{note}");
    assert!(
        note.contains("eager-mapped mapped_read_us 3.5 us (test)"),
        "{note}"
    );
    assert_eq!(p.read_paths_note(&[Arm::EagerSync, Arm::Graph]), None);
    // The reading arms issue eager-sync's framework ops; only the read differs.
    for arm in [Arm::EagerPinned, Arm::EagerMapped] {
        assert_eq!(
            p.arm_ops(Phase::Verify, arm),
            p.arm_ops(Phase::Verify, Arm::EagerSync)
        );
    }
    let mut v = native_json();
    v["mapped_read_us"] = serde_json::json!({"value": -2.0, "source": "x"});
    assert!(
        parse_err(&v).contains("mapped_read_us"),
        "{}",
        parse_err(&v)
    );
}

fn labels(items: &[Item]) -> Vec<&str> {
    items.iter().map(Item::label).collect()
}

#[test]
fn the_eagle_step_drafts_then_verifies_then_extends_then_accepts() {
    let p = HostProfile::load("pytorch").unwrap();
    // Block 5: N = 5 verify tokens, speculative_num_steps 4, three draft passes.
    let items = p.step_items(Drafter::Eagle, 5, 1).unwrap();
    assert_eq!(
        labels(&items),
        [
            "scheduler",
            "draft input",
            "decode prep",
            "decode prep",
            "decode prep",
            "draft forward",
            "draft forward",
            "draft forward",
            "verify input",
            "verify prep",
            "verify forward",
            "accept sampling",
            "draft-extend input",
            "extend prep",
            "extend forward",
            "next draft input",
            "accept",
        ]
    );
    let count = |items: &[Item], want: &str| labels(items).iter().filter(|&&l| l == want).count();
    for (block, passes) in [(2, 0), (3, 1), (8, 6)] {
        let items = p.step_items(Drafter::Eagle, block, 1).unwrap();
        assert_eq!(count(&items, "decode prep"), passes, "block {block}");
        assert_eq!(count(&items, "draft forward"), passes, "block {block}");
        assert_eq!(count(&items, "extend prep"), 1, "block {block}");
    }
    // The seams are framework ops, with the ops the count found launching.
    let seams: Vec<(&str, u32, Option<u32>)> = items
        .iter()
        .filter_map(|i| match i {
            Item::Host {
                name,
                ops,
                launches,
                ..
            } if *ops > 0 => Some((name.as_str(), *ops, *launches)),
            _ => None,
        })
        .collect();
    assert_eq!(
        seams,
        [
            ("draft input", 3, Some(1)),
            ("verify input", 5, Some(1)),
            ("accept sampling", 16, Some(6)),
            ("draft-extend input", 6, Some(1)),
            ("next draft input", 2, Some(2)),
        ]
    );
    // DSpark's step is the profile's `program`, at every block.
    assert_eq!(p.step_items(Drafter::Dspark, 8, 1).unwrap(), p.program);
    // The three preps' counts are SGLang's own (scripts/count_sglang_ops.py;
    // host-profiles/README.md).
    let sync = |phase| p.arm_ops(phase, Arm::EagerSync);
    assert_eq!(
        (sync(Phase::Decode).ops, sync(Phase::Decode).reads),
        (19, 1)
    );
    assert_eq!(
        (sync(Phase::Verify).ops, sync(Phase::Verify).reads),
        (30, 1)
    );
    assert_eq!(
        (sync(Phase::Extend).ops, sync(Phase::Extend).reads),
        (30, 3)
    );
    let native = HostProfile::load("native").unwrap();
    assert_eq!(
        labels(&native.step_items(Drafter::Eagle, 3, 1).unwrap()),
        [
            "scheduler",
            "decode prep",
            "draft forward",
            "verify prep",
            "verify forward",
            "extend prep",
            "extend forward",
            "accept"
        ]
    );
    let e = HostProfile::load("pytorch-transcription")
        .unwrap()
        .step_items(Drafter::Eagle, 5, 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no `eagle_program`") && e.contains("--drafter eagle"),
        "{e}"
    );
}

#[test]
fn an_eagle_program_is_checked_as_dspark_s_is() {
    let pytorch = || -> serde_json::Value { serde_json::from_str(BUILT_IN[1].1).unwrap() };
    // The pytorch profile with its EAGLE program edited by `edit`: the parse error.
    let refused = |edit: &dyn Fn(&mut Vec<serde_json::Value>)| -> String {
        let mut v = pytorch();
        let mut items = v["eagle_program"].as_array().unwrap().clone();
        edit(&mut items);
        v["eagle_program"] = serde_json::json!(items);
        parse_err(&v)
    };
    let at = |items: &[serde_json::Value], kind: &str| {
        items.iter().position(|i| i["kind"] == kind).unwrap()
    };
    type Edit<'a> = &'a dyn Fn(&mut Vec<serde_json::Value>);
    let cases: [(Edit, &str); 5] = [
        (
            &|items| {
                let (v, e) = (at(items, "verify_prep"), at(items, "extend_prep"));
                items.swap(v, e)
            },
            "`eagle_program` must order decode prep",
        ),
        (
            &|items| items.retain(|i| i["kind"] != "extend_forward"),
            "exactly one `extend forward`",
        ),
        (
            &|items| items.insert(1, serde_json::json!({"kind": "decode_prep"})),
            "inside a `draft_passes` group",
        ),
        (
            &|items| {
                let group = serde_json::json!({"kind": "draft_passes",
                                               "items": [{"kind": "verify_prep"}]});
                items.insert(1, group)
            },
            "group holds host items, decode preps and draft forwards only, not `verify prep`",
        ),
        (
            &|items| items[1]["launches"] = serde_json::json!(99),
            "more launches than ops",
        ),
    ];
    for (edit, why) in cases {
        let e = refused(edit);
        assert!(e.contains(why), "{why}: {e}");
    }
    // DSpark's program holds no EAGLE item.
    let mut v = pytorch();
    v["program"]
        .as_array_mut()
        .unwrap()
        .insert(1, serde_json::json!({"kind": "extend_prep"}));
    assert!(
        parse_err(&v).contains("cannot hold a `extend prep`"),
        "{}",
        parse_err(&v)
    );
    // The EAGLE step's preps must be in `preps`, and are not needed without its program.
    let mut v = pytorch();
    v["preps"].as_object_mut().unwrap().remove("dsa_decode");
    assert!(
        parse_err(&v).contains("no entry for dsa_decode"),
        "{}",
        parse_err(&v)
    );
    let mut v = native_json();
    v.as_object_mut().unwrap().remove("eagle_program");
    v["preps"].as_object_mut().unwrap().remove("dsa_decode");
    assert!(HostProfile::parse(&v.to_string()).is_ok());
}

#[test]
fn graph_upload_uploads_before_the_draft_extend_replay_only_in_the_eagle_step() {
    for phase in [Phase::Decode, Phase::Verify] {
        assert_eq!(
            prep_arm(Drafter::Eagle, phase, Arm::GraphUpload),
            Arm::Graph
        );
    }
    assert_eq!(
        prep_arm(Drafter::Eagle, Phase::Extend, Arm::GraphUpload),
        Arm::GraphUpload
    );
    for phase in [Phase::Draft, Phase::Verify] {
        assert_eq!(
            prep_arm(Drafter::Dspark, phase, Arm::GraphUpload),
            Arm::GraphUpload
        );
    }
    for arm in Arm::ALL.into_iter().filter(|&a| a != Arm::GraphUpload) {
        for phase in [Phase::Decode, Phase::Verify, Phase::Extend] {
            assert_eq!(prep_arm(Drafter::Eagle, phase, arm), arm);
        }
    }
    assert_eq!(
        phases_of(Drafter::Eagle),
        [Phase::Decode, Phase::Verify, Phase::Extend]
    );
    assert_eq!(phases_of(Drafter::Dspark), [Phase::Draft, Phase::Verify]);
}

#[test]
fn round_trips_through_json() {
    let p = HostProfile::load("pytorch").unwrap();
    assert_eq!(HostProfile::parse(&p.to_json()).unwrap(), p);
}
