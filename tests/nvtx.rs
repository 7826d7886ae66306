//! NVTX ranges reach a tool. Nsight Systems is not needed: NVTX3 loads any library named by
//! `NVTX_INJECTION64_PATH` at the first NVTX call of a process, and `fixtures/nvtx_recorder.c`
//! is such a tool that writes every push and pop to `METAPREP_NVTX_RECORD`. Since that happens
//! once per process, each test runs a `child_*` test of this executable in a child process with
//! the injection set, and reads what the recorder wrote.
//!
//! The recorder is compiled with `cc`; on a host without a C compiler (a GPU host running the
//! bundle), `METAPREP_NVTX_RECORDER` names the prebuilt one (`scripts/bundle.sh` ships it).

mod profiles;
use metaprep::gpu::nvtx::{name, set_enabled, Range};
use std::path::{Path, PathBuf};
use std::process::Command;

const RECORDER_SOURCE: &str = include_str!("fixtures/nvtx_recorder.c");
/// Set in the child: without it, a `child_*` test does nothing.
const CHILD: &str = "METAPREP_NVTX_CHILD";

/// The recorder library: `METAPREP_NVTX_RECORDER`, or compiled into `dir` with `cc`.
fn recorder(dir: &Path) -> PathBuf {
    if let Some(path) = std::env::var_os("METAPREP_NVTX_RECORDER") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "METAPREP_NVTX_RECORDER: no file {}",
            path.display()
        );
        return path;
    }
    let source = dir.join("nvtx_recorder.c");
    std::fs::write(&source, RECORDER_SOURCE).unwrap();
    let library = dir.join("libnvtx_recorder.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run cc ({e}) to build the NVTX recorder: install a C compiler, or set \
                 METAPREP_NVTX_RECORDER to a prebuilt libnvtx_recorder.so (the bundle has one)"
            )
        });
    assert!(status.success(), "cc failed on the NVTX recorder: {status}");
    library
}

/// Runs `child` (a test of this executable) with the recorder injected, and returns the
/// lines it recorded: `push NAME` and `pop`.
fn recorded_by(child: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("ranges.txt");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            child,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("NVTX_INJECTION64_PATH", recorder(dir.path()))
        .env("METAPREP_NVTX_RECORD", &record)
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{child} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&record).unwrap_or_else(|e| {
        panic!(
            "the recorder wrote no {} ({e}): NVTX never loaded it",
            record.display()
        )
    });
    text.lines().map(str::to_string).collect()
}

fn in_child() -> bool {
    let child = std::env::var_os(CHILD).is_some();
    if !child {
        println!("runs only as a child of its parent test, with the NVTX recorder injected");
    }
    child
}

/// Every push has its pop, in order, and what was pushed.
fn pushed(lines: &[String]) -> Vec<&str> {
    let mut depth = 0i64;
    for line in lines {
        depth += if line.starts_with("push ") { 1 } else { -1 };
        assert!(depth >= 0, "a pop without a push: {lines:?}");
    }
    assert_eq!(depth, 0, "a range left open");
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("push "))
        .collect()
}

#[test]
fn nested_ranges_reach_an_injected_tool_and_off_sends_none() {
    let lines = recorded_by("child_pushes_nested_ranges");
    assert_eq!(
        lines,
        [
            "push step (graph)",
            "push draft prep (graph)",
            "pop",
            "push seq_lens.tolist()",
            "pop",
            "pop",
        ]
    );
}

#[test]
#[ignore = "a child process of nested_ranges_reach_an_injected_tool_and_off_sends_none"]
fn child_pushes_nested_ranges() {
    if !in_child() {
        return;
    }
    let step = Range::push(c"step (graph)");
    drop(Range::push(&name("draft prep (graph)")));
    set_enabled(false);
    drop(Range::push(c"not sent: --nvtx off"));
    set_enabled(true);
    drop(Range::push(metaprep::axes::ReadPath::Pageable.range()));
    drop(step);
}

/// A `steps` cell of every arm and a small sweep, with the recorder injected: every phase of
/// a step and every arm's prep is a range named as in the CSV.
#[test]
#[ignore = "needs a CUDA GPU"]
fn steps_and_sweep_name_every_phase_and_prep_in_nvtx_ranges() {
    let lines = recorded_by("child_runs_a_steps_cell_and_a_sweep");
    let names: std::collections::BTreeSet<&str> = pushed(&lines).into_iter().collect();
    println!("{} ranges, names: {names:?}", lines.len() / 2);
    let mut expected: Vec<String> = metaprep::axes::ReadPath::ALL
        .iter()
        .map(|path| path.range().to_string_lossy().into_owned())
        .collect();
    expected.extend([
        "draft forward".to_string(),
        "verify forward".into(),
        "accept".into(),
        "harness (empty graph)".into(),
        "dsa_decode prep (eager-sync)".into(),
        "dsa_decode prep (graph)".into(),
    ]);
    for arm in metaprep::axes::Arm::ALL {
        expected.push(format!("step ({arm})"));
        expected.push(format!("draft prep ({arm})"));
        expected.push(format!("verify prep ({arm})"));
    }
    for name in &expected {
        assert!(
            names.contains(name.as_str()),
            "no range {name:?} in {names:?}"
        );
    }
}

#[test]
#[ignore = "a child process of steps_and_sweep_name_every_phase_and_prep_in_nvtx_ranges"]
fn child_runs_a_steps_cell_and_a_sweep() {
    use metaprep::axes::layout::Layout;
    use metaprep::axes::{Arm, Family};
    use metaprep::model::profile::ForwardModel;
    use metaprep::model::stop::StepRounds;
    use metaprep::prep::inputs::LengthRange;
    use metaprep::stats::stopping::StoppingRule;
    use std::time::Duration;

    if !in_child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seq_lens = LengthRange {
        min: 2048,
        max: 8192,
    };
    let steps = metaprep::runs::steps::StepsConfig {
        gpu: metaprep::gpu::GpuChoice::default(),
        cpu: metaprep::harness::pin::CpuPin::Off,
        arms: Arm::ALL.to_vec(),
        batch_sizes: vec![1],
        block_sizes: vec![3],
        layouts: vec![Layout::Tp(1)],
        layouts_named: true,
        models_named: true,
        gpu_memory: None,
        target: ForwardModel::FixedUs(100.0),
        draft: ForwardModel::FixedUs(100.0),
        acceptance: metaprep::prep::accept::Acceptance::Length(2.0),
        // A pinned read cost where the profile has none, so eager-pinned runs too: these
        // ranges are what is checked, not that figure.
        host: profiles::pytorch_with_every_read_path(),
        drafter: metaprep::axes::Drafter::Dspark,
        host_scales: vec![1.0],
        link_gb_s: 450.0,
        collective_latency_us: None,
        rounds: StepRounds::new(6, 6, 10, 5.0, Duration::from_millis(500)).unwrap(),
        warmup_steps: 2,
        timeline_steps: 4,
        timeline_cap: Duration::from_millis(200),
        max_context: 32768,
        seq_lens,
        seed: 1,
        out: dir.path().join("steps"),
        resume: false,
        trace: None,
        timer: metaprep::harness::timer::TimerKind::Events,
        cupti_lib: None,
        ranks: metaprep::runs::rank_world::RanksMode::Emulated,
        nccl_lib: None,
        rank: None,
        read_skew: metaprep::runs::rank_world::ReadSkew::NONE,
    };
    metaprep::runs::steps::run(&steps).unwrap();
    let sweep = metaprep::runs::sweep::SweepConfig {
        gpu: metaprep::gpu::GpuChoice::default(),
        cpu: metaprep::harness::pin::CpuPin::Off,
        families: vec![Family::DsaDecode],
        arms: vec![Arm::EagerSync, Arm::Graph],
        batch_sizes: vec![1],
        block_sizes: vec![5],
        layouts: vec![Layout::Tp(1)],
        forward_us: 0.0,
        max_context: 32768,
        seq_lens,
        rule: StoppingRule {
            time_cap: Duration::from_millis(100),
            ..StoppingRule::default()
        },
        rounds: 6,
        max_rounds: 6,
        gpu_paced_max_rounds: 6,
        gpu_paced_rel_ci: 0.007,
        steps_per_sample: 20,
        seed: 1,
        out: dir.path().join("sweep"),
        resume: false,
        processes: 1,
    };
    metaprep::runs::sweep::run(&sweep).unwrap();
}
