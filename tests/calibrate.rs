//! `metaprep calibrate` on a real trace: the PyTorch reference loop recorded on the H200 by
//! scripts/calibrate_torch.py (committed under results/), and the CLI's refusals.

use metaprep::model::calibrate::calibrate_trace;
use metaprep::model::host_profile::{HostProfile, Item};
use std::path::Path;
use std::process::Command;

const H200_TRACE: &str = "results/2026-11-29-h200-host-program/calibration/trace.json";

fn h200_trace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(H200_TRACE)
}

#[test]
fn the_h200_reference_trace_gives_the_loops_program_and_eager_sync_preps() {
    let base = HostProfile::load("native").unwrap();
    let c = calibrate_trace(&h200_trace(), &base).unwrap();
    let p = &c.profile;
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
    // The loop's sampling is four real ops; the scheduler a pure busy-wait of 50 µs.
    assert!(matches!(p.program[3], Item::Host { ops: 4, .. }));
    match &p.program[0] {
        Item::Host { us, ops: 0, .. } => assert!((50.0..80.0).contains(us), "{us}"),
        other => panic!("{other:?}"),
    }
    // Both preps ran eager-sync in this trace: they read, after two ops (`.tolist()` resolves
    // conj and neg first), and launch kernels.
    for family in ["dspark_draft_block", "dsa_target_verify"] {
        let sync = p.preps[family].eager_sync;
        assert!(sync.reads >= 1, "{family}: {sync:?}");
        assert_eq!(sync.ops_before_read, 2, "{family}: {sync:?}");
        assert!(sync.ops > 20 && sync.launches > 10, "{family}: {sync:?}");
        assert!(p.preps[family].source.contains(H200_TRACE), "{family}");
    }
    // Host costs in µs, as the profiler saw them (its own overhead included).
    for (name, v) in [
        ("op_us", p.op_us.value),
        ("read_us", p.read_us.value),
        ("graph_launch_us", p.graph_launch_us.value),
    ] {
        assert!((1.0..100.0).contains(&v), "{name} = {v}");
    }
    assert!(p.upload_syncs.value, "torch.tensor(list, device=...) syncs");
    assert!(c.report.contains("| step |"), "{}", c.report);
}

fn metaprep(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn calibrate_refuses_bad_input_with_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("broken.json");
    std::fs::write(&not_json, "{\"traceEvents\": [").unwrap();
    let out = dir.path().join("profile.json");
    let out_s = out.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["calibrate", not_json.to_str().unwrap(), "--out", out_s],
            "broken.json",
        ),
        (
            vec!["calibrate", "/nonexistent/trace.json", "--out", out_s],
            "trace.json",
        ),
        (
            vec![
                "calibrate",
                h200_trace().to_str().unwrap(),
                "--out",
                out_s,
                "--base",
                "nope",
            ],
            "--base",
        ),
    ] {
        let o = metaprep(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote a profile");
    }
    // A written profile loads as a --host-profile; a second run refuses to overwrite it.
    let o = metaprep(&["calibrate", h200_trace().to_str().unwrap(), "--out", out_s]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    HostProfile::load(out_s).unwrap();
    let o = metaprep(&["calibrate", h200_trace().to_str().unwrap(), "--out", out_s]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
}

/// `--out` naming the trace under another spelling or link is refused even with --force, and
/// an --out that cannot be written is refused naming the flag, before the trace is read.
#[test]
fn calibrate_never_replaces_its_trace_and_names_an_unwritable_out() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    std::fs::copy(h200_trace(), &trace).unwrap();
    let original = std::fs::read(&trace).unwrap();
    let link = dir.path().join("link.json");
    std::fs::hard_link(&trace, &link).unwrap();
    let symlink = dir.path().join("sym.json");
    std::os::unix::fs::symlink(&trace, &symlink).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_metaprep"))
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let absolute = trace.to_str().unwrap();
    for out in [
        "./t.json",
        absolute,
        "link.json",
        "sym.json",
        "../{}/t.json",
    ] {
        let name = dir.path().file_name().unwrap().to_str().unwrap();
        let out = out.replace("{}", name);
        let o = run(&["calibrate", "t.json", "--out", &out, "--force"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(err.contains("is the trace t.json itself"), "{out}: {err}");
        assert_eq!(
            std::fs::read(&trace).unwrap(),
            original,
            "{out} replaced the trace"
        );
    }
    std::fs::write(dir.path().join("afile"), "x").unwrap();
    for (out, needle) in [
        (
            "afile/p.json",
            "--out afile/p.json: afile is a file, not a folder",
        ),
        (
            "afile/deeper/p.json",
            "--out afile/deeper/p.json: afile is a file, so no folder",
        ),
        (".", "--out . is a folder: name a file in it"),
        ("/sys/p.json", "--out /sys/p.json: cannot write in /sys"),
    ] {
        let o = run(&["calibrate", "t.json", "--out", out]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{out}: {err}");
        assert!(err.contains(needle), "{out}: {err}");
    }
}

#[test]
fn steps_refuses_bad_host_profiles_and_scales_before_any_gpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad-profile.json");
    std::fs::write(&bad, "{\"name\": \"x\"}").unwrap();
    let out = dir.path().join("run");
    let out_s = out.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--host-profile", bad.to_str().unwrap()],
            "bad-profile.json",
        ),
        (vec!["--host-profile", "tensorflow"], "native, pytorch"),
        (vec!["--host-scale", "0"], "--host-scale"),
        (vec!["--host-scale", "1,2,1"], "twice"),
        (vec!["--host-work-us=-5"], "--host-work-us"),
        (
            vec!["--collective-latency-us", "nan"],
            "--collective-latency-us",
        ),
    ] {
        let mut all = vec!["steps", "--out", out_s];
        all.extend(args.iter().copied());
        let o = metaprep(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} created the run directory");
    }
}
