//! Real ranks on real GPUs: `steps --ranks real` through the metaprep binary (it starts one
//! process per GPU). Run on a GPU host with NCCL: `cargo test --release -- --ignored`, or the
//! bundle's `tests/gpu_ranks-*` with `--ignored` (it finds `../metaprep`, or $METAPREP_BIN).
//! Tests needing two GPUs print `SKIPPED` and the GPU count on a host with fewer, and pass:
//! a one-GPU host cannot say anything about them.

use metaprep::results::csv::{read_rows, Row};
use metaprep::results::env::EnvRecord;
use metaprep::results::rank_rows::{read_rank_rows, RANKS_CSV};
use std::path::Path;
use std::process::Command;

mod support;
use support::{metaprep_bin, skipped};

/// A short steps run: 6 rounds of 20 steps per arm, a 10-step timeline.
const QUICK: &[&str] = &[
    "--batch-sizes",
    "1",
    "--block-sizes",
    "5",
    "--min-rounds",
    "6",
    "--max-rounds",
    "6",
    "--round-steps",
    "20",
    "--warmup-steps",
    "3",
    "--timeline-steps",
    "10",
    "--cell-time-cap-ms",
    "5000",
];

fn steps(out: &Path, args: &[&str]) {
    let status = Command::new(metaprep_bin())
        .arg("steps")
        .args(QUICK)
        .args(args)
        .arg("--out")
        .arg(out)
        .status()
        .expect("running metaprep");
    assert!(status.success(), "metaprep steps {args:?}: {status}");
}

fn median(rows: &[Row], arm: &str, metric: &str) -> f64 {
    rows.iter()
        .find(|r| r.arm == arm && r.metric == metric)
        .unwrap_or_else(|| panic!("no {metric} row for {arm}"))
        .median
}

/// tp1 as a world of one rank (NCCL loaded, the rank a worker process, its forwards
/// captured graphs) measures what tp1 in this process measures.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_world_of_one_rank_measures_what_tp1_in_process_does() {
    let dir = tempfile::tempdir().unwrap();
    let fixed = [
        "--tp",
        "tp1",
        "--forward-us",
        "300",
        "--arms",
        "eager-sync,graph",
    ];
    let (here, real) = (dir.path().join("here"), dir.path().join("real"));
    steps(&here, &[&fixed[..], &["--ranks", "emulated"]].concat());
    steps(&real, &[&fixed[..], &["--ranks", "real"]].concat());
    let a = read_rows(&here.join("metaprep.csv")).unwrap();
    let b = read_rows(&real.join("metaprep.csv")).unwrap();
    let keys = |rows: &[Row]| {
        let mut k: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {} {}", r.cell_key(), r.metric, r.emulated))
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(&a), keys(&b), "the same cells and metrics");
    for arm in ["eager-sync", "graph"] {
        let (x, y) = (median(&a, arm, "step_us"), median(&b, arm, "step_us"));
        assert!(
            // Two runs of one binary drift by a few percent (GPU-NOTES.md): 15% is "same".
            (y / x - 1.0).abs() < 0.15,
            "{arm}: {x} µs in process, {y} µs as a world of one"
        );
    }
    assert!(median(&b, "eager-sync", "step_us") > median(&b, "graph", "step_us"));
    let ranks = read_rank_rows(&real.join(RANKS_CSV)).unwrap();
    assert!(!ranks.is_empty() && ranks.iter().all(|r| r.rank == 0));
    let env = EnvRecord::read(&real).unwrap();
    assert!(
        env.notes
            .iter()
            .any(|n| n.starts_with("real ranks: tp1 ran 1 ranks")),
        "{:?}",
        env.notes
    );
}

/// tp2 and dep2 run one process per GPU with real collectives: every rank reports every
/// cell, the summary keeps one rank per cell, and the trace holds both ranks.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tp2_and_dep2_run_real_ranks_in_lock_step() {
    if skipped(2) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let trace = dir.path().join("trace.json");
    steps(
        &out,
        &[
            "--tp",
            "tp2,dep2",
            "--ranks",
            "real",
            "--gpu-memory-gib",
            "1000",
            "--arms",
            "eager-sync,graph",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    let rows = read_rows(&out.join("metaprep.csv")).unwrap();
    for layout in ["tp2", "dep2"] {
        let of: Vec<&Row> = rows.iter().filter(|r| r.layout == layout).collect();
        assert!(!of.is_empty() && of.iter().all(|r| !r.emulated), "{layout}");
    }
    let ranks = read_rank_rows(&out.join(RANKS_CSV)).unwrap();
    for rank in [0, 1] {
        let n = ranks.iter().filter(|r| r.rank == rank).count();
        assert_eq!(n * 2, ranks.len(), "rank {rank} reports every cell");
    }
    let text = std::fs::read_to_string(&trace).unwrap();
    for needle in ["rank 0 host", "rank 1 host", "rank 1 GPU", "verify forward"] {
        assert!(text.contains(needle), "the trace lacks {needle}");
    }
    let env = EnvRecord::read(&out).unwrap();
    for layout in ["tp2", "dep2"] {
        let note = format!("real ranks: {layout} ran 2 ranks");
        assert!(
            env.notes.iter().any(|n| n.starts_with(&note)),
            "{:?}",
            env.notes
        );
    }
}

/// A slower host read on rank 1 lengthens rank 0's steps too: rank 0 waits at the next
/// all-reduce for rank 1 (the straggler amplification real ranks exist to show).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_slow_read_on_one_rank_slows_every_rank() {
    if skipped(2) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, skew: &str| {
        let out = dir.path().join(name);
        let args = [
            "--tp",
            "tp2",
            "--ranks",
            "real",
            "--model",
            "custom",
            "--draft-model",
            "custom",
            "--gpu-memory-gib",
            "1000",
            "--arms",
            "eager-sync",
            "--read-skew-us",
            skew,
            "--read-skew-rank",
            "1",
        ];
        steps(&out, &args);
        let ranks = read_rank_rows(&out.join(RANKS_CSV)).unwrap();
        let step = |rank: u32| {
            ranks
                .iter()
                .find(|r| r.rank == rank && r.row.metric == "step_us")
                .unwrap()
                .row
                .median
        };
        (step(0), step(1))
    };
    let (plain0, plain1) = run("plain", "0");
    let (skew0, skew1) = run("skewed", "500");
    println!("step_us rank 0: {plain0} → {skew0}; rank 1: {plain1} → {skew1}");
    // Two reads a step on rank 1, 500 µs each; rank 0's own host is untouched.
    assert!(skew1 > plain1 + 600.0, "rank 1: {plain1} → {skew1}");
    assert!(
        skew0 > plain0 + 600.0,
        "rank 0 waited for rank 1: {plain0} → {skew0}"
    );
}
