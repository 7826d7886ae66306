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

/// A file or folder of `tests/fixtures`.
fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `metaprep calibrate` of the small torch trace, writing `--out out` over whatever is there
/// (`--force`), with `extra` flags.
fn calibrate_small_trace(out: &str, extra: &[&str]) -> Output {
    let trace = fixture("torch_trace_small.json");
    let mut args = vec!["calibrate", trace.to_str().unwrap(), "--out", out];
    args.extend(["--force", "--keep-profiler-costs"]);
    args.extend(extra);
    metaprep(&args)
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
    let cases: [(&[&str], &str); 53] = [
        (
            &["sweep", "--cpu", "99999"],
            "--cpu 99999 is not one of the CPUs this process may run on",
        ),
        (
            &["steps", "--cpu", "99999"],
            "--cpu 99999 is not one of the CPUs this process may run on",
        ),
        (
            &["collectives", "--gpus", "0"],
            "--gpus 0: a world needs one rank at least",
        ),
        (
            &["collectives", "--sizes-kib", "8,4294967295"],
            "--sizes-kib: 4294967295 KiB is more than 16777216 KiB (16 GiB) per buffer",
        ),
        (
            &["info", "--device", "-1"],
            "`-1` is not a device ordinal: give 0 for the first GPU",
        ),
        (&["check", "--device", "-1"], "`-1` is not a device ordinal"),
        (
            &["steps", "--full", "--batch-sizes", "1"],
            "the argument '--full' cannot be used with '--batch-sizes <SIZES>'",
        ),
        (
            &["steps", "--gpu-memory-gib", "1e30"],
            "--gpu-memory-gib: 1000000000000000000000000000000 is not a memory size: give the \
             GiB of one GPU, above 0 and at most 10000",
        ),
        (
            &["steps", "--precision-pct", "1e30"],
            "--precision-pct: 1000000000000000000000000000000 is no precision: give a positive \
             number of percent, at most 100",
        ),
        (
            &["sweep", "--precision-pct", "1e30"],
            "--precision-pct: 1000000000000000000000000000000 is no precision",
        ),
        // sweep's old name, a hidden alias: its errors name the flag as it is now called.
        (
            &["sweep", "--rel-ci-pct", "1e30"],
            "--precision-pct: 1000000000000000000000000000000 is no precision",
        ),
        (
            &["steps", "--max-rounds", "4000000000"],
            "--max-rounds: 4000000000 must be between --min-rounds (6) and 100",
        ),
        (
            &["check", "--token-budget", "0"],
            "--token-budget 0: a batch of 1024 needs a token per request at least",
        ),
        (
            &["check", "--token-budget", "7", "--batch-sizes", "1,8"],
            "--token-budget 7: a batch of 8 needs",
        ),
        (
            &["steps", "--model", "moe-large", "--forward-us", "-3"],
            "--forward-us: -3 is not a duration",
        ),
        (
            &["sweep", "--forward-us", "-3"],
            "--forward-us: -3 is not a duration",
        ),
        (
            &["check", "--soak", "1000"],
            "--soak soaks one shape per family and arm: give one --batch-sizes and one --block-sizes value",
        ),
        (
            &["check", "--soak", "1000", "--dump", "d"],
            "the argument '--soak <STEPS>' cannot be used with '--dump <DIR>'",
        ),
        (&["check", "--soak", "0"], "invalid value '0' for '--soak <STEPS>'"),
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
            "invalid value '0' for '--batch-sizes <SIZES>': 0 is not a valid value",
        ),
        (
            &["sweep", "--batch-sizes", "1,,8"],
            "for '--batch-sizes <SIZES>': an empty item",
        ),
        (
            &["steps", "--batch-sizes", "8,1,8"],
            "--batch-sizes: 8 appears more than once in `8,1,8`",
        ),
        (&["check", "--families", "dsa"], "unknown family 'dsa'"),
        (
            &["sweep", "--tp", "tp3"],
            "invalid value 'tp3' for '--tp <TP>': `tp3` is not a layout",
        ),
        (&["steps", "--tp", "tp1,tp1"], "--tp: tp1 appears more than once"),
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
            "--accept-length: accept length 5 is impossible with 3 drafted tokens a step",
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
        (&["sweep", "--time-cap-ms", "0"], "--cell-time-cap-ms: 0"),
        (&["sweep", "--cell-time-cap-ms", "0"], "--cell-time-cap-ms: 0"),
        (
            &["sweep", "--min-samples", "0"],
            "--min-samples: 0 is too few",
        ),
        (
            &["sweep", "--rounds", "5"],
            "--min-rounds: 5 is too few: the medians of 6 rounds",
        ),
        (
            &["steps", "--min-rounds", "5"],
            "--min-rounds: 5 is too few: the medians of 6 rounds",
        ),
        (
            &["sweep", "--min-rounds", "8", "--max-rounds", "7"],
            "--max-rounds: 7 must be between --min-rounds (8) and 100",
        ),
        (
            &["sweep", "--max-rounds", "1000"],
            "--max-rounds: 1000 must be between",
        ),
        (
            &["sweep", "--processes", "0"],
            "--processes: 0 must be between 1 (every round in this process) and --max-rounds (12)",
        ),
        (
            &["sweep", "--processes", "21"],
            "--processes: 21 must be between",
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
    // --forward-us replaces both forwards: its error names it alone, not a --model the user
    // never passed.
    let out = metaprep(&["steps", "--forward-us", "0"]);
    assert_clean_failure(
        &out,
        2,
        "metaprep: error: --forward-us: 0 is not a duration in µs between 0 and a second",
    );
    assert!(!stderr(&out).contains("--model"), "{}", stderr(&out));
}

/// A worker whose `--settings` file (`settings`, of a `command` config) is missing, then
/// malformed (cut short, or JSON without the config's fields), exits 2 naming the file (not
/// 3: no GPU was looked for) and writes nothing to stdout; `worker` runs it.
fn assert_settings_file_refused(settings: &Path, command: &str, worker: impl Fn() -> Output) {
    let missing = format!("reading the {command} settings {}", settings.display());
    let malformed = format!("{}: not a {command} config", settings.display());
    let refused = |needle: &str| {
        let out = worker();
        assert_clean_failure(&out, 2, needle);
        assert!(out.stdout.is_empty(), "nothing ran: {out:?}");
    };
    refused(&missing);
    for text in ["{\"arms\": [\"eager-sync\"], \"seed\": ", "{\"seed\": 1}"] {
        std::fs::write(settings, text).unwrap();
        refused(&malformed);
    }
}

/// A rank worker's `--settings` file missing or malformed: refused, and no rank folder made.
#[test]
fn a_rank_worker_refuses_a_missing_or_malformed_settings_file_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("steps-config.json");
    let rank = dir.path().join("rank0");
    assert_settings_file_refused(&settings, "steps", || {
        metaprep(&[
            "rank-worker",
            "--rank",
            "0",
            "--layout",
            "tp2",
            "--nccl-lib",
            "libnccl.so.2",
            "--id-file",
            "id",
            "--out",
            rank.to_str().unwrap(),
            "--settings",
            settings.to_str().unwrap(),
        ])
    });
    assert!(!rank.exists(), "nothing ran");
}

/// A sweep worker's `--settings` file missing or malformed: refused before any round.
#[test]
fn a_sweep_worker_refuses_a_missing_or_malformed_settings_file_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("sweep-config.json");
    assert_settings_file_refused(&settings, "sweep", || {
        metaprep(&[
            "sweep-worker",
            "--first-round",
            "0",
            "--rounds",
            "1",
            "--groups",
            "0",
            "--settings",
            settings.to_str().unwrap(),
        ])
    });
}

/// `--out` at a file, under a file or where nothing can be written, and a `--trace` or
/// `--dump` that cannot be written, exit 2 with one line naming the flag, before any GPU
/// work, and create nothing.
#[test]
fn unusable_output_paths_are_refused_before_any_gpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, "mine").unwrap();
    let (f, under) = (file.to_str().unwrap(), file.join("run"));
    let under = under.to_str().unwrap();
    let trace_under = file.join("t.json");
    let trace_under = trace_under.to_str().unwrap();
    let folder = dir.path().to_str().unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["sweep", "--out", f],
            format!("--out {f}: {f} is a file, not a folder"),
        ),
        (
            vec!["steps", "--out", f],
            format!("--out {f}: {f} is a file, not a folder"),
        ),
        (
            vec!["sweep", "--out", under],
            format!("--out {under}: {f} is a file, so no folder can be made under it"),
        ),
        (
            vec!["steps", "--out", under],
            format!("--out {under}: {f} is a file, so no folder can be made under it"),
        ),
        (
            vec!["collectives", "--out", under],
            format!("--out {under}: {f} is a file"),
        ),
        (
            vec!["sweep", "--out", "/sys/metaprep-run"],
            "--out /sys/metaprep-run: cannot write in /sys".into(),
        ),
        (
            vec!["steps", "--out", "/sys/metaprep-run"],
            "--out /sys/metaprep-run: cannot write in /sys".into(),
        ),
        (
            vec!["steps", "--trace", trace_under],
            format!("--trace {trace_under}: {f} is a file, not a folder"),
        ),
        (
            vec!["steps", "--trace", folder],
            format!("--trace {folder} is a folder: name a file in it"),
        ),
        (
            vec!["steps", "--trace", "/sys/t.json"],
            "--trace /sys/t.json: cannot write in /sys".into(),
        ),
        (
            vec!["check", "--dump", f, "--cpu-only"],
            format!("--dump {f} is a file: name a folder for the cases"),
        ),
        (
            vec!["check", "--dump", f],
            format!("--dump {f} is a file: name a folder for the cases"),
        ),
        (
            vec!["check", "--dump", under, "--cpu-only"],
            format!("--dump {under}: {f} is a file, so no folder can be made under it"),
        ),
        (
            vec!["check", "--dump", "/sys/metaprep-dump", "--cpu-only"],
            "--dump /sys: cannot write there".into(),
        ),
    ];
    for (args, needle) in &cases {
        let out = metaprep(args);
        assert_clean_failure(&out, 2, needle);
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing created"
    );
    // Permission bits bind everyone but root (who writes anyway, so nothing is lost there).
    // SAFETY: a plain query.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let run = locked.join("run");
        assert_clean_failure(
            &metaprep(&["sweep", "--out", run.to_str().unwrap()]),
            2,
            "cannot write in",
        );
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A run folder that holds `metaprep.csv` (a fixture's) and the env.json of a default sweep
/// measured on an H200, with its settings.
fn run_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("run_small").join("metaprep.csv"),
        dir.path().join("metaprep.csv"),
    )
    .unwrap();
    std::fs::copy(
        fixture("h200_aa_s10/aa1").join("env.json"),
        dir.path().join("env.json"),
    )
    .unwrap();
    dir
}

/// An existing run without --resume, and a --resume whose settings differ from the run's
/// (another command, seed, axes or rounds), exit 2 before any GPU work.
#[test]
fn an_existing_run_and_a_mismatched_resume_are_refused_before_any_gpu_work() {
    let run = run_folder();
    let out = run.path().to_str().unwrap();
    for command in ["sweep", "steps"] {
        assert_clean_failure(
            &metaprep(&[command, "--out", out]),
            2,
            "metaprep.csv already exists: pass --resume to continue that run",
        );
    }
    let resume = |command: &str, extra: &[&str]| {
        let mut args = vec![command, "--out", out, "--resume"];
        args.extend(extra);
        metaprep(&args)
    };
    for (extra, named) in [
        (&["--seed", "2"][..], "seed: `1` vs `2`"),
        (
            &["--batch-sizes", "1,8"],
            "batch_sizes: `1,8,64,256` vs `1,8`",
        ),
        (&["--rounds", "8"], "rounds: `6` vs `8`"),
        (&["--min-rounds", "8"], "rounds: `6` vs `8`"),
        (
            &["--families", "dsa_decode"],
            "families: `dspark_draft_block,dsa_decode,dsa_target_verify,dsa_draft_extend_v2` \
             vs `dsa_decode`",
        ),
    ] {
        assert_clean_failure(&resume("sweep", extra), 2, named);
    }
    assert_clean_failure(&resume("steps", &[]), 2, "command: `sweep` vs `steps`");
    // A damaged CSV is refused by line before the GPU opens.
    std::fs::write(run.path().join("metaprep.csv"), "kind,family\nprep").unwrap();
    assert_clean_failure(&resume("sweep", &[]), 2, "metaprep.csv line 2");
}

#[test]
fn a_library_named_that_is_no_file_exits_2_before_the_gpu_opens() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap();
    for cupti in ["/nonexistent/libcupti.so.13", folder] {
        let out = metaprep(&["steps", "--timer", "cupti", "--cupti-lib", cupti]);
        assert_clean_failure(&out, 2, &format!("--cupti-lib {cupti} is not a file"));
    }
    // The environment's library is named on purpose too, where NCCL would be loaded.
    let nccl = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_metaprep"))
            .args(args)
            .env("METAPREP_NCCL", "/nonexistent/libnccl.so.2")
            .output()
            .expect("running metaprep")
    };
    let needle = "METAPREP_NCCL /nonexistent/libnccl.so.2 is not a file";
    assert_clean_failure(&nccl(&["collectives"]), 2, needle);
    assert_clean_failure(
        &nccl(&["steps", "--ranks", "real", "--tp", "tp2"]),
        2,
        needle,
    );
    // Emulated ranks load no NCCL: the variable is not read.
    let emulated = nccl(&["steps", "--ranks", "emulated", "--batch-sizes", "1"]);
    assert!(
        !stderr(&emulated).contains("METAPREP_NCCL"),
        "{}",
        stderr(&emulated)
    );
}

#[test]
fn standard_output_that_cannot_be_written_is_an_error_not_a_panic() {
    let run = fixture("run_small");
    let run = run.to_str().unwrap();
    let full = std::fs::File::create("/dev/full").expect("/dev/full");
    let out = Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(["compare", run, run])
        .stdout(full)
        .output()
        .expect("running metaprep");
    assert_clean_failure(&out, 1, "metaprep: error: writing to standard output");
}

#[test]
fn outputs_at_a_fifo_or_a_device_are_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let run = fixture("run_small");
    let (run, fifo) = (run.to_str().unwrap(), fifo.to_str().unwrap());
    for (flag, path) in [
        ("--out", fifo),
        ("--json", "/dev/null"),
        ("--details", fifo),
    ] {
        // A reader of the FIFO would block: the command must refuse it before reading it.
        let mut child = Command::new(env!("CARGO_BIN_EXE_metaprep"))
            .args(["compare", run, run, flag, path])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("running metaprep");
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(30) {
                child.kill().unwrap();
                panic!("compare {flag} {path} hung");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        assert_clean_failure(
            &out,
            2,
            &format!("{flag} {path} is a device, FIFO or socket"),
        );
    }
    assert!(Path::new(fifo).exists(), "the FIFO is left as it was");
    let out = calibrate_small_trace(fifo, &[]);
    assert_clean_failure(
        &out,
        2,
        &format!("--out {fifo} is a device, FIFO or socket"),
    );
    assert!(
        Path::new(fifo).exists(),
        "calibrate --force left the FIFO in place"
    );
}

#[test]
fn calibrate_refuses_to_write_its_profile_over_its_base() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let builtin = Path::new(env!("CARGO_MANIFEST_DIR")).join("host-profiles/pytorch.json");
    std::fs::copy(&builtin, &base).unwrap();
    let before = std::fs::read(&base).unwrap();
    let base = base.to_str().unwrap();
    let out = calibrate_small_trace(base, &["--base", base]);
    assert_clean_failure(&out, 2, &format!("--out {base} is the input {base}"));
    assert_eq!(
        std::fs::read(base).unwrap(),
        before,
        "the base is untouched"
    );
}

#[test]
fn a_validate_that_fails_before_writing_leaves_no_folder_so_it_can_be_rerun() {
    // SAFETY: only probes whether libcuda can be loaded.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return; // on a GPU host the run would go on: this is the no-GPU path
    }
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("r.csv");
    std::fs::write(
        &reference,
        "forward_us,batch_size,block,arm,step_us\n1000,1,5,graph,2000\n1000,1,5,eager-sync,2500\n",
    )
    .unwrap();
    let out = dir.path().join("v");
    let args = [
        "validate",
        reference.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    for _ in 0..2 {
        assert_clean_failure(&metaprep(&args), 3, "no CUDA driver found");
        assert!(!out.exists(), "a failed validate left {}", out.display());
    }
}

#[test]
fn a_failed_validate_with_a_fit_or_under_new_folders_leaves_nothing_and_runs_again_alike() {
    // SAFETY: only probes whether libcuda can be loaded.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return; // on a GPU host the run would go on: this is the no-GPU path
    }
    let dir = tempfile::tempdir().unwrap();
    let head = "forward_us,batch_size,block,arm,step_us,host_speed_us\n";
    let reference = dir.path().join("r.csv");
    std::fs::write(
        &reference,
        format!("{head}1000,1,5,graph,2000,8\n1000,1,5,eager-sync,2500,8\n"),
    )
    .unwrap();
    let fit = dir.path().join("fit.csv");
    std::fs::write(
        &fit,
        format!("{head}100,1,5,graph,300,8\n100,1,5,eager-sync,500,8\n"),
    )
    .unwrap();
    // The same reference gzipped and named .csv.gz, and gzipped under a plain name: read alike.
    let gz = |name: &str| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&std::fs::read(&reference).unwrap()).unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, e.finish().unwrap()).unwrap();
        path
    };
    let (gzipped, renamed) = (gz("r.csv.gz"), gz("gzipped-r.csv"));
    let nested = dir.path().join("a/b/c");
    for (reference, extra) in [
        (&reference, vec!["--fit", fit.to_str().unwrap()]),
        (&reference, vec![]),
        (&gzipped, vec![]),
        (&renamed, vec!["--fit", fit.to_str().unwrap()]),
    ] {
        let mut args = vec![
            "validate",
            reference.to_str().unwrap(),
            "--out",
            nested.to_str().unwrap(),
        ];
        args.extend(extra);
        for _ in 0..2 {
            assert_clean_failure(&metaprep(&args), 3, "no CUDA driver found");
            assert!(
                !dir.path().join("a").exists(),
                "a failed validate left {:?}",
                args
            );
        }
    }
}

#[test]
fn a_gzipped_trace_calibrates_whatever_its_name() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&std::fs::read(fixture("torch_trace_small.json")).unwrap())
        .unwrap();
    let bytes = e.finish().unwrap();
    for name in ["t.json", "t.json.gz", "trace"] {
        let trace = dir.path().join(name);
        std::fs::write(&trace, &bytes).unwrap();
        let out = dir.path().join(format!("{name}.profile.json"));
        let run = metaprep(&[
            "calibrate",
            trace.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--keep-profiler-costs",
        ]);
        assert_eq!(run.status.code(), Some(0), "{name}: {}", stderr(&run));
        assert!(out.is_file(), "{name}");
    }
}

#[test]
fn steps_with_no_layout_or_model_flags_plans_for_any_gpu() {
    // SAFETY: only probes whether libcuda can be loaded.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return; // on a GPU host these would run: this checks they pass planning
    }
    for gib in ["16", "40", "80"] {
        for drafter in ["dspark", "eagle"] {
            let out = metaprep(&["steps", "--gpu-memory-gib", gib, "--drafter", drafter]);
            assert_clean_failure(&out, 3, "no CUDA driver found");
        }
    }
    // A named layout or model that fits nothing is still refused, before the GPU.
    let named = metaprep(&["steps", "--tp", "tp8", "--gpu-memory-gib", "80"]);
    assert_clean_failure(&named, 2, "--tp tp8 holds no batch of the run");
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
    let fixture = fixture("run_small");
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
        2,
        "has no metaprep.csv",
    );
    std::fs::write(empty.path().join("metaprep.csv"), "kind,family\nprep,x\n").unwrap();
    assert_clean_failure(
        &metaprep(&["report", empty.path().to_str().unwrap()]),
        2,
        "metaprep.csv",
    );
    assert!(
        !empty.path().join("summary.md").exists(),
        "no half-written output"
    );
}

/// Every input `report` cannot use exits 2 with one line naming the file, line or field,
/// before anything is drawn; the run's earlier charts and summary stay as they were.
#[test]
fn report_refuses_bad_input_with_exit_2_and_leaves_the_old_report() {
    let fixture = fixture("run_small");
    let good = |name: &str| std::fs::read_to_string(fixture.join(name)).unwrap();
    let csv = good("metaprep.csv");
    let cut = &csv[..csv.len() - 3];
    let spoilt_median = csv.replacen(",step_us,us,", ",step_us,us,nan", 1);
    let negative = {
        let mut lines: Vec<String> = csv.lines().map(String::from).collect();
        let fields: Vec<&str> = lines[1].split(',').collect();
        let mut fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        fields[9] = "-4.0".into();
        lines[1] = fields.join(",");
        lines.join("\n") + "\n"
    };
    let steps_env = good("env.json").replace("metaprep sweep ", "metaprep steps ");
    let cases: [(&str, String, &str); 8] = [
        ("metaprep.csv", cut.to_string(), "metaprep.csv line 438: the last line has no final newline"),
        ("metaprep.csv", spoilt_median, "metaprep.csv line 2, column `median`: cannot read"),
        ("metaprep.csv", negative, "metaprep.csv line 2: prep dspark_draft_block/eager-sync bs=1 block=3 tp1 step_us: column `median`: -4 us is negative"),
        ("metaprep.csv", csv.replacen(",tp1,", ",tp3,", 1), "column `layout`: `tp3` is not a layout"),
        ("metaprep.csv", csv.replacen("kind,", "kinds,", 1), "metaprep.csv line 1: the header does not match"),
        ("env.json", "{\"gpu_name\": ".into(), "env.json: not a metaprep environment record"),
        ("env.json", steps_env, "beside an env.json of `metaprep steps`"),
        ("trace.json", "{\"traceEvents\": 3}".into(), "reading the trace trace.json"),
    ];
    for (file, text, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        for name in ["metaprep.csv", "env.json", "telemetry.csv", "trace.json"] {
            std::fs::copy(fixture.join(name), dir.path().join(name)).unwrap();
        }
        let run = dir.path().to_str().unwrap();
        assert_eq!(metaprep(&["report", run]).status.code(), Some(0));
        let summary = std::fs::read(dir.path().join("summary.md")).unwrap();
        let chart = std::fs::read(dir.path().join("charts/itl.svg")).unwrap();
        std::fs::write(dir.path().join(file), &text).unwrap();
        let out = metaprep(&["report", run]);
        assert_clean_failure(&out, 2, needle);
        assert_eq!(stderr(&out).lines().count(), 1, "{file}: {}", stderr(&out));
        assert_eq!(
            std::fs::read(dir.path().join("summary.md")).unwrap(),
            summary
        );
        assert_eq!(
            std::fs::read(dir.path().join("charts/itl.svg")).unwrap(),
            chart
        );
    }
    // A run folder where the charts cannot go.
    let dir = tempfile::tempdir().unwrap();
    for name in ["metaprep.csv", "env.json"] {
        std::fs::copy(fixture.join(name), dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join("charts"), "a file").unwrap();
    assert_clean_failure(
        &metaprep(&["report", dir.path().to_str().unwrap()]),
        2,
        "charts is not a folder",
    );
    assert!(!dir.path().join("summary.md").exists(), "nothing written");
}

/// A dump replaces an earlier dump whole (a smaller one leaves no stale cases) when asked to
/// (--force), and refuses a folder that holds other files.
#[test]
fn a_dump_replaces_an_earlier_dump_whole_when_asked_and_refuses_other_folders() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    let d = dump.to_str().unwrap();
    let write = |cases: &str, force: bool| {
        let mut argv = vec![
            "check",
            "--dump",
            d,
            "--cpu-only",
            "--dump-cases",
            cases,
            "--seed",
            "3",
        ];
        if force {
            argv.push("--force");
        }
        metaprep(&argv)
    };
    assert_eq!(write("12", false).status.code(), Some(0));
    // Not asked to: the earlier dump stays whole.
    assert_clean_failure(
        &write("3", false),
        2,
        "holds an earlier dump (12 cases, seed 3)",
    );
    assert_eq!(std::fs::read_dir(&dump).unwrap().count(), 12 + 3);
    let out = write("3", true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("it replaces the dump there (12 cases, seed 3)"));
    let mut files: Vec<String> = std::fs::read_dir(&dump)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "case-00000.safetensors",
            "case-00001.safetensors",
            "case-00002.safetensors",
            "cases.json",
            "env.json",
            "full_to_swa.safetensors"
        ]
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no staging left"
    );
    let other = dir.path().join("notes");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("mine.txt"), "mine").unwrap();
    assert_clean_failure(
        &metaprep(&["check", "--dump", other.to_str().unwrap(), "--cpu-only"]),
        2,
        "holds files and is not a dump",
    );
    assert_eq!(
        std::fs::read_to_string(other.join("mine.txt")).unwrap(),
        "mine"
    );
}

/// `check --dump DIR --cpu-only` records what the dump holds in DIR/env.json (its seed, its
/// cases as cases.json lists them, no arm), the GPU fields empty; the check's own axes, which
/// a dump would ignore, are refused with it.
#[test]
fn a_cpu_only_dump_records_its_settings_in_env_json() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    let out = metaprep(&[
        "check",
        "--dump",
        dump.to_str().unwrap(),
        "--cpu-only",
        "--dump-cases",
        "2",
        "--seed",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dump.join(name)).unwrap()).unwrap()
    };
    let (env, cases) = (read("env.json"), read("cases.json"));
    let settings = &env["settings"];
    assert_eq!(settings["command"], "check");
    assert_eq!(
        (
            &settings["seed"],
            &settings["dump_cases"],
            &settings["cpu_only"],
            &settings["arms"]
        ),
        (&5.into(), &2.into(), &true.into(), &serde_json::json!([]))
    );
    assert_eq!(cases["seed"], settings["seed"], "{cases}");
    assert_eq!(
        cases["cases"].as_array().map(Vec::len),
        Some(2),
        "cases.json holds the cases env.json counts"
    );
    assert_eq!(
        (&env["gpu_name"], &env["gpu_count"]),
        (&"".into(), &0.into())
    );
    assert_eq!(env["metaprep_version"], env!("CARGO_PKG_VERSION"));
    assert!(
        env["command_line"]
            .as_str()
            .unwrap()
            .contains("check --dump"),
        "{env}"
    );
}

/// The check's own axes mean nothing to a dump (its cases span every family, batch 1-8,
/// blocks 1-8): each is refused with --dump, naming it, and nothing is written.
#[test]
fn a_dump_refuses_the_axes_it_would_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    let d = dump.to_str().unwrap();
    for (flag, value) in [
        ("--families", "dsa_decode"),
        ("--batch-sizes", "1,8"),
        ("--block-sizes", "5"),
        ("--token-budget", "4096"),
        ("--steps", "8"),
    ] {
        let out = metaprep(&["check", "--dump", d, "--cpu-only", flag, value]);
        assert_clean_failure(&out, 2, flag);
        assert!(!dump.exists(), "{flag}: nothing written");
    }
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

/// One vocabulary for `sweep` and `steps`: each takes the new names and, hidden, sweep's old
/// ones (committed scripts, docs and recorded command lines use them), and either spelling
/// reaches the same check, whose error names the flag as it is called now.
#[test]
fn old_flag_names_are_hidden_aliases_of_the_new_in_both_commands() {
    for command in ["sweep", "steps"] {
        for (flags, needle) in [
            (
                &["--rounds", "9", "--max-rounds", "8"][..],
                "--max-rounds: 8 must be between --min-rounds (9) and 100",
            ),
            (
                &["--min-rounds", "9", "--max-rounds", "8"],
                "--max-rounds: 8 must be between --min-rounds (9) and 100",
            ),
            (
                &["--rel-ci-pct", "200"],
                "--precision-pct: 200 is no precision",
            ),
            (
                &["--precision-pct", "200"],
                "--precision-pct: 200 is no precision",
            ),
            (
                &["--time-cap-ms", "0"],
                "--cell-time-cap-ms: 0 is not a time cap",
            ),
            (
                &["--cell-time-cap-ms", "0"],
                "--cell-time-cap-ms: 0 is not a time cap",
            ),
        ] {
            let mut args = vec![command];
            args.extend(flags);
            assert_clean_failure(&metaprep(&args), 2, needle);
        }
        let help = metaprep(&[command, "--help-all"]);
        let help = String::from_utf8_lossy(&help.stdout);
        for new in [
            "--min-rounds <ROUNDS>",
            "--max-rounds <ROUNDS>",
            "--precision-pct <PCT>",
            "--cell-time-cap-ms <MS>",
        ] {
            assert!(help.contains(new), "{command} --help lacks {new}");
        }
        for old in ["--rounds <", "--rel-ci-pct", "--time-cap-ms"] {
            assert!(!help.contains(old), "{command} --help offers {old}");
        }
    }
}

#[test]
fn sweep_help_explains_rounds() {
    let out = metaprep(&["sweep", "--help-all"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for text in [
        "--min-rounds <ROUNDS>",
        "6 is the fewest whose medians give a distribution-free 95% interval",
        "[default: 6]",
        "--max-rounds <ROUNDS>",
        "precision, max-rounds, time-cap",
        "[default: 12]",
        "--precision-pct <PCT>",
        "[default: 1]",
        "--cell-time-cap-ms <MS>",
        "[default: 500]",
        "each round's sampling stopping at this / --min-rounds",
        "Samples per metric of a cell in each round",
        "--processes <PROCESSES>",
        "the first --min-rounds over up to N workers",
        "has its interval over processes",
        "Default: 9, or --max-rounds where that is fewer",
        "--batch-sizes <SIZES>",
        "[default: 1,8,64,256]",
        "[default: 131072]",
    ] {
        assert!(help.contains(text), "sweep --help lacks {text:?}:\n{help}");
    }
    // The old names still work (tests above) but are not offered.
    for text in ["--rounds <", "--rel-ci-pct", "--time-cap-ms"] {
        assert!(!help.contains(text), "sweep --help shows {text:?}:\n{help}");
    }
}

#[test]
fn kernel_image_and_sync_are_flags_of_every_gpu_command_and_bad_values_exit_2() {
    for command in ["info", "check", "sweep", "steps"] {
        let out = metaprep(&[command, "--help-all"]);
        let help = String::from_utf8_lossy(&out.stdout);
        for text in [
            "--kernel-image <IMAGE>",
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
            "invalid value 'sass' for '--kernel-image <IMAGE>'",
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
        let out = metaprep(&[command, "--help-all"]);
        assert!(out.status.success(), "{command} --help-all failed");
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

#[test]
fn report_refuses_to_write_into_another_runs_folder() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    for file in ["metaprep.csv", "env.json"] {
        std::fs::copy(fixture("run_small_slower").join(file), other.join(file)).unwrap();
    }
    std::fs::write(other.join("summary.md"), "the other run's summary\n").unwrap();
    let (run, other) = (fixture("run_small"), other.to_str().unwrap());
    let out = metaprep(&["report", run.to_str().unwrap(), "--out", other]);
    assert_clean_failure(&out, 2, &format!("--out {other} is another run's folder"));
    let summary = std::fs::read_to_string(Path::new(other).join("summary.md")).unwrap();
    assert_eq!(
        summary, "the other run's summary\n",
        "the other run's summary is kept"
    );
    // A new folder takes the report.
    let fresh = dir.path().join("fresh");
    let out = metaprep(&[
        "report",
        run.to_str().unwrap(),
        "--out",
        fresh.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(fresh.join("summary.md").exists());
}

/// Every command's `-h` and `--help` fit a screen: at most 4 KB, one line a flag with its
/// description on it; `--help-all` still holds every flag, and names the long docs.
#[test]
fn every_commands_help_fits_a_screen_and_help_all_holds_every_flag() {
    for command in [
        "info",
        "doctor",
        "check",
        "sweep",
        "steps",
        "report",
        "calibrate",
        "validate",
        "compare",
        "ab",
        "gaps",
        "collectives",
    ] {
        for flag in ["-h", "--help"] {
            let out = metaprep(&[command, flag]);
            assert_eq!(out.status.code(), Some(0), "{command} {flag}");
            let help = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(
                help.len() <= 4096,
                "`{command} {flag}` is {} bytes:\n{help}",
                help.len()
            );
            assert!(help.contains("--help-all"), "{command} {flag}:\n{help}");
            assert!(
                help.contains("docs/commands.md"),
                "{command} {flag}:\n{help}"
            );
            let options = help.split("Options:").nth(1).expect("an Options section");
            let options: Vec<&str> = (options.lines().skip(1))
                .take_while(|l| !l.is_empty())
                .collect();
            for line in options.iter().filter(|l| l.trim_start().starts_with('-')) {
                let parts = line.trim().split("  ").filter(|p| !p.trim().is_empty());
                assert!(
                    parts.count() >= 2,
                    "`{command} {flag}`: `{line}` has no description on its line"
                );
            }
            // No flag's description runs onto a line of its own.
            let lone = (options.iter())
                .filter(|l| !l.trim_start().starts_with('-'))
                .count();
            assert_eq!(lone, 0, "`{command} {flag}` wraps:\n{help}");
        }
        let all = metaprep(&[command, "--help-all"]);
        let all = String::from_utf8_lossy(&all.stdout).to_string();
        let short = String::from_utf8_lossy(&metaprep(&[command, "-h"]).stdout).to_string();
        let flags = |h: &str| {
            h.lines()
                .filter_map(|l| l.trim_start().strip_prefix("--"))
                .map(|l| l.split([' ', ',']).next().unwrap().to_string())
                .collect::<std::collections::BTreeSet<_>>()
        };
        let (all_flags, short_flags) = (flags(&all), flags(&short));
        assert!(
            short_flags.is_subset(&all_flags) && all_flags.len() >= short_flags.len(),
            "{command}: -h shows flags --help-all lacks"
        );
    }
}
