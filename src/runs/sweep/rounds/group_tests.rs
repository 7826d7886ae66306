//! Tests of a group's rounds: intervals, pairing, bytes, read costs, round lines and
//! the stopping rule, the GPU-paced arms' rounds past --max-rounds among them.

use super::*;
use crate::axes::floor_item::HOST_REFERENCE;
use crate::runs::sweep::rounds::fixtures::*;
use crate::runs::sweep::rounds::HARNESS;
use crate::stats::rounds::ONE_PROCESS;
use crate::stats::stopping::StoppingRule;

#[test]
fn a_cells_interval_spans_the_drift_between_rounds() {
    let (group, floor) = drifting();
    assert_eq!(group.rounds(), 6);
    let rows = rows_of(&group, &floor, RoundsStop::MaxRounds);
    let step = find(&rows, "graph", "step_us");
    // Six round medians: the interval is their whole range, 0.9 to 1.1 times 10 µs
    // (each round's median is its level times 1.001).
    assert!((step.ci_lo - 9.0 * 1.001).abs() < 1e-9, "{step:?}");
    assert!((step.ci_hi - 11.0 * 1.001).abs() < 1e-9, "{step:?}");
    assert!(step.ci_lo < step.median && step.median < step.ci_hi);
    assert_eq!((step.rounds, step.samples), (6, 60));
    assert_eq!(step.stop_reason, "max-rounds");
    // Every metric of every arm is a rounds row; host_blocked_us only for the reader.
    assert_eq!(
        metrics_of(&rows, "eager-sync"),
        [
            "step_us",
            "step_fwd_us",
            "host_issue_us",
            "host_blocked_us",
            "gpu_prep_us",
            "floor_multiple",
            "read_cost_us"
        ]
    );
    let mut graph = GRAPH_METRICS.to_vec();
    graph.retain(|m| !["bytes", "gb_s"].contains(m));
    assert_eq!(
        metrics_of(&rows, "graph"),
        graph,
        "the GPU paces a graph arm's times but its host issue"
    );
    assert!(!rows
        .iter()
        .any(|r| r.arm == "graph" && r.metric == "host_blocked_us"));
    assert!(
        rows.iter().all(|r| r.rounds == 6),
        "every row says its rounds"
    );
}

#[test]
fn differences_are_paired_inside_each_round() {
    let (group, floor) = drifting();
    let rows = rows_of(&group, &floor, RoundsStop::Precision);
    // The read cost is 18 µs times the round's drift: paired, its interval spans only
    // that (0.9 to 1.1 times 18 µs), not the 40-µs and 22-µs cells' ranges combined.
    let cost = find(&rows, "eager-sync", "read_cost_us");
    assert_eq!(cost.stop_reason, "derived");
    assert!((cost.ci_lo - 0.9 * 18.0 * 1.001).abs() < 1e-9, "{cost:?}");
    assert!((cost.ci_hi - 1.1 * 18.0 * 1.001).abs() < 1e-9, "{cost:?}");
    // Ratios cancel the drift: graph is 10/40 of eager-sync in every round, eager arms
    // 20x the empty kernel and DSA decode's two-kernel graph 2x the empty graph of two
    // nodes.
    for (arm, metric, value) in [
        ("graph", STEP_RATIO_VS_EAGER_SYNC, 0.25),
        ("eager-device", STEP_RATIO_VS_EAGER_SYNC, 0.55),
        ("eager-sync", "floor_multiple", 20.0),
        ("eager-device", "floor_multiple", 11.0),
        ("graph", "floor_multiple", 2.0),
    ] {
        let r = find(&rows, arm, metric);
        assert!((r.median - value).abs() < 1e-9, "{arm} {metric}: {r:?}");
        assert!(r.ci_hi - r.ci_lo < 1e-9, "{arm} {metric}: {r:?}");
        assert_eq!((r.unit.as_str(), r.rounds), ("x", 6));
    }
    assert!(!rows
        .iter()
        .any(|r| r.arm == "eager-sync" && r.metric == STEP_RATIO_VS_EAGER_SYNC));
}

#[test]
fn a_group_with_known_bytes_gets_bytes_and_bandwidth_rows() {
    let (mut group, floor) = drifting();
    group.bytes = Some(8_000);
    let rows = rows_of(&group, &floor, RoundsStop::Precision);
    for arm in ARMS {
        let bytes = find(&rows, arm.name(), "bytes");
        assert_eq!(
            (bytes.median, bytes.ci_lo, bytes.ci_hi, bytes.unit.as_str()),
            (8000.0, 8000.0, 8000.0, "B"),
            "the same for every arm"
        );
        assert_eq!((bytes.rounds, bytes.stop_reason.as_str()), (6, "derived"));
        // 8 kB over the 4-µs device time (middle samples 1.001 times it): 2 GB/s.
        let gb_s = find(&rows, arm.name(), "gb_s");
        assert!((gb_s.median - 2.0 / 1.001).abs() < 1e-12, "{gb_s:?}");
        assert_eq!(
            (gb_s.unit.as_str(), gb_s.stop_reason.as_str()),
            ("GB/s", "precision")
        );
    }
    assert_eq!(metrics_of(&rows, "graph"), GRAPH_METRICS);
}

/// A group of the reading arms with eager-device: eager-sync 40 µs, eager-device 22,
/// eager-pinned 31 and eager-mapped 27 µs, each times `drift(arm index, round drift)`.
fn readers(drift: impl Fn(usize, f64) -> f64) -> (GroupRounds, Vec<CellId>) {
    let arms = [
        Arm::EagerSync,
        Arm::EagerDevice,
        Arm::EagerPinned,
        Arm::EagerMapped,
    ];
    let mut group = GroupRounds::new(Family::DsaDecode, &arms);
    for d in DRIFT {
        for (i, us) in [40.0, 22.0, 31.0, 27.0].into_iter().enumerate() {
            group.push(i, measurement(us * drift(i, d)).into());
        }
    }
    let cells = arms
        .iter()
        .map(|arm| CellId {
            key: cells()[0].key.with_arm(arm.name()),
            ..cells()[0].clone()
        })
        .collect();
    (group, cells)
}

#[test]
fn every_reading_arm_gets_its_read_cost_against_eager_device() {
    let (group, cells) = readers(|_, d| d);
    let (_, floor) = drifting();
    let rows = group.rows(
        &cells,
        &floor,
        RoundsStop::Precision,
        &[None, None, None, None],
        ONE_PROCESS,
    );
    // Paired in each round: (arm − 22 µs) times the round's drift; the median of six
    // drifts is 1.025, each round's middle sample 1.001 times its level.
    for (arm, cost) in [
        ("eager-sync", 18.0),
        ("eager-pinned", 9.0),
        ("eager-mapped", 5.0),
    ] {
        let r = find(&rows, arm, "read_cost_us");
        assert!(
            (r.median - cost * 1.001 * 1.025).abs() < 1e-9,
            "{arm}: {r:?}"
        );
        assert_eq!(r.stop_reason, "derived");
    }
    // eager-sync's metrics, and the ratio over it.
    let mut like_sync = metrics_of(&rows, "eager-sync");
    like_sync.push(STEP_RATIO_VS_EAGER_SYNC);
    assert_eq!(metrics_of(&rows, "eager-pinned"), like_sync);
    let ratio = find(&rows, "eager-mapped", STEP_RATIO_VS_EAGER_SYNC);
    assert!((ratio.median - 27.0 / 40.0).abs() < 1e-12, "{ratio:?}");
    assert!(!rows
        .iter()
        .any(|r| r.arm == "eager-device" && r.metric == "read_cost_us"));
}

#[test]
fn a_group_waits_for_its_least_precise_read_cost() {
    let rule = RoundsRule {
        min_rounds: 6,
        max_rounds: 8,
        step: StoppingRule {
            rel_ci: 0.2,
            ..StoppingRule::default()
        },
        time_cap: Duration::from_secs(60),
        gpu_paced_max_rounds: 8,
        gpu_paced_rel_ci: 0.007,
    };
    // Every cell steady but eager-mapped, whose ±10% drift leaves its 5-µs read cost
    // between 2.3 and 7.7 µs: the others' read costs are exact, and still no stop.
    let (group, _) = readers(|i, d| if i == 3 { d } else { 1.0 });
    assert_eq!(group.stop(&rule, ONE_PROCESS), None);
    let (steady, _) = readers(|_, _| 1.0);
    assert_eq!(steady.stop(&rule, ONE_PROCESS), Some(RoundsStop::Precision));
}

#[test]
fn round_lines_give_each_rounds_median_in_order() {
    let (group, floor) = drifting();
    let lines = group.round_lines(&cells(), &[1, 1, 1, 2, 2, 2]);
    let of = |arm: &str, metric: &str| -> Vec<(u32, f64)> {
        lines
            .iter()
            .filter(|l| l.cell.arm == arm && l.metric == metric)
            .map(|l| (l.round, l.median))
            .collect()
    };
    // The middle of a round's samples (level, 1.001 level, 1.002 level, ...) is 1.001 level.
    let expected: Vec<(u32, f64)> = (1..)
        .zip(DRIFT)
        .map(|(round, d)| (round, 40.0 * d * 1.001))
        .collect();
    let got = of("eager-sync", "step_us");
    assert_eq!(got.len(), expected.len());
    for ((r, m), (er, em)) in got.iter().zip(&expected) {
        assert_eq!(r, er);
        assert!((m - em).abs() < 1e-9, "round {r}: {m} vs {em}");
    }
    assert_eq!(of("eager-sync", "host_blocked_us").len(), 6);
    assert!(
        of("graph", "host_blocked_us").is_empty(),
        "graph reads nothing"
    );
    assert!(lines.iter().all(|l| l.samples == 10));
    assert_eq!(
        lines.iter().filter(|l| l.process == 2).count() * 2,
        lines.len(),
        "rounds 4 to 6 in the second process"
    );
    let floor_lines = floor.round_lines(&[]);
    assert_eq!(floor_lines.len(), (FloorItem::ALL.len() + 2) * DRIFT.len());
    assert!(floor_lines
        .iter()
        .any(|l| l.cell.arm == HARNESS && l.round == 6));
    assert!(floor_lines
        .iter()
        .any(|l| l.cell.arm == HOST_REFERENCE && l.round == 6));
}

/// `drifting()`'s six rounds, the group stopped there for the round maximum, then
/// `extra` rounds of steady cells (each visiting every arm: only the graph's are kept).
fn past_max_rounds(rule: &RoundsRule, extra: usize) -> (GroupRounds, FloorRounds, usize) {
    let (mut group, mut floor) = drifting();
    assert!(!group.update(rule, ONE_PROCESS), "the graph arm goes on");
    let mut rounds = 0;
    while rounds < extra {
        push_floor_round(&mut floor, 1.0);
        for (i, us) in [40.0, 22.0, 10.0].into_iter().enumerate() {
            // The GPU-paced rounds run no forward.
            let m = ArmRound {
                step_fwd: None,
                ..measurement(us).into()
            };
            group.push(i, m);
        }
        rounds += 1;
        if group.update(rule, ONE_PROCESS) {
            break;
        }
    }
    (group, floor, rounds)
}

#[test]
fn gpu_paced_arms_take_rounds_past_max_rounds_and_host_paced_arms_stop_there() {
    let rule = rule_past_max();
    // ±10% drift in the first six rounds: the graph arm's interval stays wide, and it
    // stops at its own cap, three rounds past its group's.
    let (group, floor, extra) = past_max_rounds(&rule, 100);
    assert_eq!(extra, 3);
    assert_eq!(group.group_stop(), Some(RoundsStop::MaxRounds));
    let rows = rows_of(&group, &floor, RoundsStop::MaxRounds);
    let of = |arm, metric| of_rows(&rows, arm, metric);
    for arm in ["eager-sync", "eager-device"] {
        assert_eq!(of(arm, "step_us"), (6, "max-rounds"), "{arm}");
        assert_eq!(of(arm, "gpu_prep_us"), (6, "max-rounds"), "{arm}");
    }
    for metric in ["step_us", "gpu_prep_us"] {
        assert_eq!(of("graph", metric), (9, "gpu-paced-max-rounds"), "{metric}");
    }
    // The forward's rounds are the group's, and so are the host's times; the floor multiple
    // pairs all nine with the floor's, the ratio over eager-sync the six eager-sync has.
    for metric in ["step_fwd_us", "host_issue_us"] {
        assert_eq!(of("graph", metric), (6, "max-rounds"), "{metric}");
    }
    // The host issue keeps the drifting rounds' interval, not the steady rounds' after it.
    let issue = find(&rows, "graph", "host_issue_us");
    let drifting_issue = find(&drifting_rows(), "graph", "host_issue_us").clone();
    assert_eq!(
        (issue.median, issue.ci_lo, issue.ci_hi),
        (
            drifting_issue.median,
            drifting_issue.ci_lo,
            drifting_issue.ci_hi
        )
    );
    assert_eq!(find(&rows, "graph", "floor_multiple").rounds, 9);
    assert_eq!(find(&rows, "graph", STEP_RATIO_VS_EAGER_SYNC).rounds, 6);
    // At ±8.5% it stops for precision at the ninth round, the first whose interval
    // leaves the two extremes (9.2 to 10.8 µs, ±8%; the six drifting rounds: ±10%).
    let loose = RoundsRule {
        gpu_paced_rel_ci: 0.085,
        ..rule.clone()
    };
    let (group, floor, extra) = past_max_rounds(&loose, 100);
    assert_eq!(extra, 3);
    let rows = rows_of(&group, &floor, RoundsStop::MaxRounds);
    assert_eq!(of_rows(&rows, "graph", "step_us"), (9, "precision"));
    assert_eq!(of_rows(&rows, "eager-sync", "step_us"), (6, "max-rounds"));
    // No cap past the group's: every arm stops with its group, as before.
    let none = RoundsRule {
        gpu_paced_max_rounds: 6,
        ..rule
    };
    let (mut group, _) = drifting();
    assert!(group.update(&none, ONE_PROCESS));
    assert_eq!(group.arm_stops, [Some(RoundsStop::MaxRounds); 3]);
}

/// `drifting()`'s rows at its six rounds.
fn drifting_rows() -> Vec<Row> {
    let (group, floor) = drifting();
    rows_of(&group, &floor, RoundsStop::MaxRounds)
}

fn of_rows<'a>(rows: &'a [Row], arm: &str, metric: &str) -> (u32, &'a str) {
    let r = find(rows, arm, metric);
    (r.rounds, r.stop_reason.as_str())
}

#[test]
fn a_group_stops_by_its_rounds_rule() {
    let (group, floor) = drifting();
    let rule = RoundsRule {
        min_rounds: 6,
        max_rounds: 8,
        step: StoppingRule::default(),
        time_cap: Duration::from_secs(60),
        gpu_paced_max_rounds: 8,
        gpu_paced_rel_ci: 0.007,
    };
    // ±10% drift between rounds: far from ±1%, so not precise; more rounds.
    assert_eq!(group.stop(&rule, ONE_PROCESS), None);
    assert_eq!(floor.stop(&rule, ONE_PROCESS), None);
    let tight = RoundsRule {
        step: StoppingRule {
            rel_ci: 0.2,
            ..StoppingRule::default()
        },
        ..rule.clone()
    };
    // At ±20% the arms pass, and the read cost's ±1.8 µs on 18 µs does not.
    assert_eq!(group.stop(&tight, ONE_PROCESS), None);
    assert_eq!(floor.stop(&tight, ONE_PROCESS), Some(RoundsStop::Precision));
    let mut spent = group.clone();
    spent.elapsed = rule.time_cap;
    assert_eq!(spent.stop(&rule, ONE_PROCESS), Some(RoundsStop::TimeCap));
    let five = GroupRounds {
        by_arm: group
            .by_arm
            .iter()
            .map(|a| ArmRounds {
                step: a.step[..5].to_vec(),
                ..a.clone()
            })
            .collect(),
        ..spent
    };
    assert_eq!(five.rounds(), 5);
    assert_eq!(
        five.stop(&rule, ONE_PROCESS),
        None,
        "no stop before min rounds"
    );
}

/// Fused's floor multiple is over the one-node empty graph, which the host's launch rate
/// paces: it keeps the group's rounds, where fused's step takes its own past them.
#[test]
fn fused_s_floor_multiple_keeps_its_group_s_rounds() {
    let arms = [Arm::EagerSync, Arm::Fused];
    let mut group = GroupRounds::new(Family::DsaDecode, &arms);
    let mut floor = FloorRounds::default();
    let mut round = |group: &mut GroupRounds, d: f64| {
        push_floor_round(&mut floor, d);
        for (i, us) in [40.0, 4.0].into_iter().enumerate() {
            group.push(i, measurement(us * d).into());
        }
    };
    for d in DRIFT {
        round(&mut group, d);
    }
    let rule = rule_past_max();
    assert!(
        !group.update(&rule, ONE_PROCESS),
        "fused goes on past its group"
    );
    for _ in 0..3 {
        round(&mut group, 1.0);
        if group.update(&rule, ONE_PROCESS) {
            break;
        }
    }
    let cells: Vec<CellId> = (cells().into_iter().take(2).zip(arms))
        .map(|(cell, arm)| CellId {
            key: cell.key.with_arm(arm.name()),
            ..cell
        })
        .collect();
    let rows = group.rows(
        &cells,
        &floor,
        RoundsStop::MaxRounds,
        &[None, None],
        ONE_PROCESS,
    );
    assert_eq!(find(&rows, "fused", "step_us").rounds, 9);
    assert_eq!(find(&rows, "fused", "floor_multiple").rounds, 6);
}

#[test]
fn rounds_of_a_process_each_are_the_rows_of_one_process() {
    let (group, floor) = drifting();
    let rows = |processes: &[u32]| {
        let rows = group_and_floor_rows(&group, &floor, RoundsStop::MaxRounds, processes);
        format!("{rows:?}")
    };
    let one = rows(ONE_PROCESS);
    // One round a process: each process is a unit holding one round.
    assert_eq!(rows(&[1, 2, 3, 4, 5, 6]), one);
    // Five processes are too few for an interval over processes: the rounds stay the units.
    assert_eq!(rows(&[1, 1, 2, 3, 4, 5]), one);
}

#[test]
fn a_process_of_several_rounds_is_one_unit_in_the_rows_and_the_stop_rule() {
    // Eight rounds, the last three in process 6 at a level of their own.
    let levels = [1.0, 1.1, 0.92, 1.05, 0.9, 1.08, 1.2, 1.2];
    let processes = [1, 2, 3, 4, 5, 6, 6, 6];
    let (group, floor) = drifting_by(&levels);
    let rows = |p: &[u32]| group_and_floor_rows(&group, &floor, RoundsStop::MaxRounds, p);
    let (by_round, by_process) = (rows(ONE_PROCESS), rows(&processes));
    // By round the median is between rounds 4 and 6 of eight (10.51, 10.81 µs); by process
    // between the third and fourth of six units (10.01, 10.51), process 6 one unit at 12.
    let step = |rows: &[Row]| find(rows, "graph", "step_us").clone();
    assert!(
        (step(&by_round).median - 10.66).abs() < 0.01,
        "{:?}",
        step(&by_round)
    );
    assert!(
        (step(&by_process).median - 10.26).abs() < 0.01,
        "{:?}",
        step(&by_process)
    );
    assert_eq!(step(&by_process).rounds, 8, "rounds still count rounds");
    // Paired rows (the read cost: 18 µs times each round's level) and the floor's follow
    // the same units.
    for (arm, metric) in [("eager-sync", "read_cost_us"), ("empty-kernel", "step_us")] {
        let (a, b) = (find(&by_round, arm, metric), find(&by_process, arm, metric));
        assert_ne!((a.median, a.ci_lo), (b.median, b.ci_lo), "{arm} {metric}");
    }
    // The GPU-paced stop rule judges the interval the rows report.
    let graph = &group.by_arm[2];
    let [judged, _] = graph.gpu_paced_metrics(&processes);
    let judged = judged.unwrap();
    assert_eq!((judged.ci_lo, judged.ci_hi), {
        let s = step(&by_process);
        (s.ci_lo, s.ci_hi)
    });
}
