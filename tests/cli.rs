//! The command line as a user meets it: exit codes and one-line errors, no panics, with or
//! without a GPU.

use std::path::Path;
use std::process::{Command, Output};

fn metaprep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(args)
        .output()
        .expect("running metaprep")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_clean_failure(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "a panic: {err}"
    );
}

#[test]
fn gpu_commands_without_a_driver_exit_3_with_one_line() {
    // SAFETY: only probes whether libcuda can be loaded.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    for command in ["info", "check"] {
        let out = metaprep(&[command]);
        if driver {
            // On a GPU host the same command must simply work.
            assert!(
                out.status.code() == Some(0),
                "{command} on a GPU host: {}",
                stderr(&out)
            );
        } else {
            assert_clean_failure(&out, 3, "no CUDA driver found");
            assert_eq!(
                stderr(&out).lines().count(),
                1,
                "one line: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn bad_flags_are_refused_before_any_gpu_work() {
    let cases: [(&[&str], &str); 30] = [
        (
            &["steps", "--tp", "tp2", "--read-skew-rank", "2"],
            "--read-skew-rank 2: no layout of the run has that rank",
        ),
        (
            &["steps", "--timer", "nsys"],
            "`nsys` is not a timer: use events or cupti",
        ),
        (
            &["steps", "--cupti-lib", "/x/libcupti.so.13"],
            "give --timer cupti too",
        ),
        (
            &["steps", "--ranks", "some"],
            "--ranks: `some` is not a ranks mode",
        ),
        (
            &["steps", "--nccl-lib", "/nonexistent/libnccl.so.2"],
            "--nccl-lib /nonexistent/libnccl.so.2 is not a file",
        ),
        (&["steps", "--read-skew-rank", "x"], "`x` is not a rank"),
        (&["steps", "--read-skew-us", "-5"], "--read-skew-us: -5"),
        (
            &["check", "--batch-sizes", "0"],
            "--batch-sizes: 0 is not a valid value",
        ),
        (&["check", "--families", "dsa"], "unknown family 'dsa'"),
        (&["sweep", "--tp", "tp3"], "--tp: `tp3` is not a layout"),
        (
            &["sweep", "--arms", "graph,graph"],
            "--arms: graph appears more than once",
        ),
        (
            &["sweep", "--seq-lens", "9000-100"],
            "--seq-lens: 9000 is above 100",
        ),
        (
            &["steps", "--accept-length", "5", "--block-sizes", "3"],
            "--accept-length: accept length 5 is impossible with block 3",
        ),
        (
            &["steps", "--trace", "t.json", "--trace-cell", "tp4:x:5"],
            "--trace-cell: `x` is not a positive integer",
        ),
        (
            &["steps", "--trace", "t.json", "--trace-cell", "tp4:3:5"],
            "is not a cell of this run",
        ),
        (
            &["steps", "--trace-cell", "tp1:1:5"],
            "give --trace FILE too",
        ),
        (
            &["steps", "--resume"],
            "--resume continues the run in --out DIR",
        ),
        (
            &["sweep", "--resume"],
            "--resume continues the run in --out DIR",
        ),
        (&["sweep", "--forward-us", "1e12"], "more than a second"),
        (&["sweep", "--time-cap-ms", "0"], "--time-cap-ms: 0"),
        (
            &["sweep", "--min-samples", "0"],
            "--min-samples: 0 is too few",
        ),
        (
            &["sweep", "--rounds", "5"],
            "--rounds: 5 is too few: the medians of 6 rounds",
        ),
        (
            &["sweep", "--rounds", "8", "--max-rounds", "7"],
            "--max-rounds: 7 must be between --rounds (8) and 100",
        ),
        (
            &["sweep", "--max-rounds", "1000"],
            "--max-rounds: 1000 must be between",
        ),
        (
            &["sweep", "--processes", "0"],
            "--processes: 0 must be between 1 (every round in this process) and --max-rounds (20)",
        ),
        (
            &["sweep", "--processes", "21"],
            "--processes: 21 must be between",
        ),
        (
            &[
                "sweep-worker",
                "--first-round",
                "0",
                "--rounds",
                "1",
                "--groups",
                "0",
                "--",
                "--bogus",
            ],
            "the parent's sweep arguments",
        ),
        (&["steps", "--forward-us", "1e12"], "between 0 and a second"),
        (&["steps", "--host-work-us", "1e12"], "--host-work-us"),
        (
            &["steps", "--cell-time-cap-ms", "0"],
            "--cell-time-cap-ms: 0",
        ),
    ];
    for (args, needle) in cases {
        assert_clean_failure(&metaprep(args), 2, needle);
    }
    assert_eq!(
        metaprep(&["sweep", "--bogus"]).status.code(),
        Some(2),
        "clap's own usage error"
    );
}

#[test]
fn a_missing_cupti_exits_3_before_the_gpu_opens() {
    let out = metaprep(&[
        "steps",
        "--timer",
        "cupti",
        "--cupti-lib",
        "/nonexistent/libcupti.so.13",
    ]);
    assert_clean_failure(
        &out,
        3,
        "--cupti-lib /nonexistent/libcupti.so.13: no such file",
    );
}

#[test]
fn layouts_a_gpu_cannot_hold_are_refused_before_any_gpu_work() {
    // moe-large + draft-small at tp1 hold 668 GiB per GPU; an H200 of 141 GiB leaves 126.9.
    let out = metaprep(&["steps", "--tp", "tp1", "--gpu-memory-gib", "141"]);
    assert_clean_failure(&out, 2, "tp1 at bs 1 needs 668.2 GiB per GPU");
    let err = stderr(&out);
    for needle in [
        "126.9 GiB left for them on a GPU of 141.0 GiB (--gpu-memory-gib)",
        "use tp8, or pass --gpu-memory-gib",
    ] {
        assert!(err.contains(needle), "expected `{needle}` in: {err}");
    }
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    // tp8 holds the weights, but not the MLA cache of 256 requests of 5120 tokens.
    assert_clean_failure(
        &metaprep(&[
            "steps",
            "--tp",
            "tp8",
            "--batch-sizes",
            "256",
            "--gpu-memory-gib",
            "141",
        ]),
        2,
        "tp8 at bs 256 needs 170.7 GiB per GPU",
    );
    assert_clean_failure(
        &metaprep(&[
            "steps",
            "--tp",
            "tp8",
            "--batch-sizes",
            "1,256",
            "--gpu-memory-gib",
            "141",
            "--trace",
            "t.json",
            "--trace-cell",
            "tp8:256:5",
        ]),
        2,
        "--trace-cell tp8:256:5 names a cell left out",
    );
    for (bad, shown) in [("0", "0"), ("-1", "-1"), ("nan", "NaN"), ("inf", "inf")] {
        assert_clean_failure(
            &metaprep(&["steps", "--gpu-memory-gib", bad]),
            2,
            &format!("--gpu-memory-gib: {shown} is not a memory size"),
        );
    }
}

#[test]
fn report_writes_charts_and_summary_and_refuses_bad_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run_small");
    for file in ["metaprep.csv", "env.json", "telemetry.csv", "trace.json"] {
        std::fs::copy(fixture.join(file), dir.path().join(file)).unwrap();
    }
    let out = metaprep(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("summary.md").exists());
    assert!(
        dir.path().join("charts/itl.png").exists() && dir.path().join("charts/itl.svg").exists()
    );

    let empty = tempfile::tempdir().unwrap();
    assert_clean_failure(
        &metaprep(&["report", empty.path().to_str().unwrap()]),
        1,
        "has no metaprep.csv",
    );
    std::fs::write(empty.path().join("metaprep.csv"), "kind,family\nprep,x\n").unwrap();
    assert_clean_failure(
        &metaprep(&["report", empty.path().to_str().unwrap()]),
        1,
        "metaprep.csv",
    );
    assert!(
        !empty.path().join("summary.md").exists(),
        "no half-written output"
    );
}

#[test]
fn compare_gates_on_slower_cells() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (base, slower) = (
        fixtures.join("run_small"),
        fixtures.join("run_small_slower"),
    );
    let out = metaprep(&["compare", base.to_str().unwrap(), slower.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a regression fails the gate: {}",
        stderr(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("**slower**"));
    let same = metaprep(&["compare", base.to_str().unwrap(), base.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert_clean_failure(
        &metaprep(&["compare", "/nonexistent", base.to_str().unwrap()]),
        2,
        "/nonexistent",
    );
}

#[test]
fn sweep_help_explains_rounds() {
    let out = metaprep(&["sweep", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for text in [
        "--rounds <ROUNDS>",
        "6 is the fewest whose medians give a distribution-free 95% interval",
        "[default: 6]",
        "--max-rounds <MAX_ROUNDS>",
        "precision, max-rounds, time-cap",
        "[default: 20]",
        "each round's sampling stops at this / --rounds",
        "Samples per metric of a cell in each round",
        "--processes <PROCESSES>",
        "ceil(--max-rounds / N) rounds of the groups still open",
        "[default: 5]",
    ] {
        assert!(help.contains(text), "sweep --help lacks {text:?}:\n{help}");
    }
}

#[test]
fn kernel_image_and_sync_are_flags_of_every_gpu_command_and_bad_values_exit_2() {
    for command in ["info", "check", "sweep", "steps"] {
        let out = metaprep(&[command, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        for text in [
            "--kernel-image <KERNEL_IMAGE>",
            "JIT-compiled by the driver",
            "[default: auto]",
            "--sync <SYNC>",
            "sleep until the GPU signals",
            "- blocking: Sleep until the GPU signals (CU_CTX_SCHED_BLOCKING_SYNC)",
        ] {
            assert!(
                help.contains(text),
                "{command} --help lacks {text:?}:\n{help}"
            );
        }
        assert_clean_failure(
            &metaprep(&[command, "--kernel-image", "sass"]),
            2,
            "invalid value 'sass' for '--kernel-image <KERNEL_IMAGE>'",
        );
        assert_clean_failure(
            &metaprep(&[command, "--sync", "poll"]),
            2,
            "invalid value 'poll' for '--sync <SYNC>'",
        );
    }
}

/// `--help` explains every flag of every command: no option is listed with only its default.
#[test]
fn every_flag_of_every_command_has_a_description() {
    for command in [
        "info",
        "check",
        "sweep",
        "steps",
        "report",
        "calibrate",
        "compare",
        "collectives",
    ] {
        let out = metaprep(&[command, "--help"]);
        assert!(out.status.success(), "{command} --help failed");
        let help = String::from_utf8_lossy(&out.stdout).to_string();
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            // An option's header line: `-x, --flag <V>` or `--flag <V>`, indented 2 to 6
            // (possible values, `- name: ...`, sit deeper).
            let indent = line.len() - trimmed.len();
            let header = (2..=6).contains(&indent)
                && (trimmed.starts_with("--")
                    || trimmed.as_bytes().get(2) == Some(&b',') && trimmed.starts_with('-'));
            if !header || trimmed.starts_with("-h,") || trimmed.starts_with("-V,") {
                continue;
            }
            // Clap puts the description on the header line (short help) or on the next
            // non-empty line (long help); a bare `[default: ...]` there means none was written.
            let inline = trimmed.split("  ").filter(|s| !s.trim().is_empty()).count() > 1;
            let next = lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty());
            assert!(
                inline || next.is_some_and(|n| !n.starts_with('[') && !n.starts_with('-')),
                "`metaprep {command} --help`: `{trimmed}` has no description"
            );
        }
    }
}
