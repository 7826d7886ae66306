//! `metaprep calibrate` and `metaprep validate` through the binary, with no GPU: what they
//! refuse (one line, exit 2, before any GPU work) and what they write.

use metaprep::model::host_profile::HostProfile;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small torch.profiler trace (3 steps of an annotated loop) with no probe file.
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_trace_small.json")
}

fn metaprep(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `args`, which must fail with exit 2 and one stderr line holding `needle`.
fn refused(args: &[&str], needle: &str) {
    let o = metaprep(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn calibrate_refuses_bad_input_with_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("broken.json");
    std::fs::write(&not_json, "{\"traceEvents\": [").unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::copy(fixture(), &trace).unwrap();
    let link = dir.path().join("link.json");
    std::fs::hard_link(&trace, &link).unwrap();
    let out = dir.path().join("profile.json");
    let (out_s, trace_s) = (out.to_str().unwrap(), trace.to_str().unwrap());
    let keep = "--keep-profiler-costs";
    refused(
        &[
            "calibrate",
            not_json.to_str().unwrap(),
            "--out",
            out_s,
            keep,
        ],
        "broken.json",
    );
    refused(
        &["calibrate", "/nonexistent/t.json", "--out", out_s, keep],
        "t.json",
    );
    refused(
        &["calibrate", trace_s, "--out", out_s, "--base", "nope", keep],
        "--base",
    );
    // The trace to --out with `extra`, refused naming `needle`.
    let refused_with = |extra: &[&str], needle: &str| {
        let mut args = vec!["calibrate", trace_s, "--out", out_s];
        args.extend_from_slice(extra);
        refused(&args, needle);
    };
    refused_with(&["--gpu-trace", "64"], "BATCH:FILE");
    refused_with(&["--gpu-trace", "x:a.json"], "batch size");
    // One trace per batch size, and none at the traced batch.
    refused_with(&["--gpu-trace", "1:a.json", keep], "is the traced batch");
    refused_with(
        &["--gpu-trace", "8:a.json", "--gpu-trace", "8:b.json", keep],
        "batch 8 has a trace already",
    );
    // No probe file beside the trace: refused, naming the recipe and the way out.
    refused(
        &["calibrate", trace_s, "--out", out_s],
        "--keep-profiler-costs",
    );
    assert!(!out.exists());
    // --out may not be the trace, by another path or a hard link.
    let other_path = format!("{}/./trace.json", dir.path().display());
    refused(
        &["calibrate", trace_s, "--out", &other_path, "--force", keep],
        "is the input",
    );
    refused(
        &[
            "calibrate",
            trace_s,
            "--out",
            link.to_str().unwrap(),
            "--force",
            keep,
        ],
        "is the input",
    );
    // Kept costs: a profile that loads; a second run refuses to overwrite it.
    let o = metaprep(&["calibrate", trace_s, "--out", out_s, keep]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = HostProfile::load(out_s).unwrap();
    assert!(
        p.op_us.source.contains("AS THE PROFILER SAW THEM"),
        "{}",
        p.op_us.source
    );
    refused(&["calibrate", trace_s, "--out", out_s, keep], "--force");
}

/// `--out` naming the trace under another spelling or link is refused even with --force, and
/// an --out that cannot be written is refused naming the flag, before the trace is read.
#[test]
fn calibrate_never_replaces_its_trace_and_names_an_unwritable_out() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    std::fs::copy(fixture(), &trace).unwrap();
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
        assert!(err.contains("is the input t.json"), "{out}: {err}");
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
fn steps_refuses_bad_host_profiles_scales_and_acceptance_before_any_gpu_work() {
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
        // The native profile records no host speed to move from.
        (
            vec!["--host-profile", "native", "--host-speed-us", "9"],
            "--host-speed-us",
        ),
        (vec!["--host-speed-us=-1"], "--host-speed-us"),
        (vec!["--accept-rate", "1.5"], "--accept-rate"),
        (vec!["--accept-length", "3.51"], "--accept-rate"),
        (
            vec!["--accept-length", "7", "--block-sizes", "5"],
            "--accept-length",
        ),
    ] {
        let mut all = vec!["steps", "--out", out_s];
        all.extend(args.iter().copied());
        refused(&all, needle);
        assert!(!out.exists(), "{args:?} created the run directory");
    }
    let o = metaprep(&["steps", "--accept-rate", "0.7", "--accept-length", "3"]);
    assert_eq!(o.status.code(), Some(2), "conflicting flags");
}

#[test]
fn validate_refuses_a_bad_reference_and_axis_flags_before_any_gpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v");
    let out_s = out.to_str().unwrap();
    let good = dir.path().join("ref.csv");
    std::fs::write(
        &good,
        "forward_us,batch_size,block,arm,step_us\n1000,1,5,graph,2080\n",
    )
    .unwrap();
    let cut = dir.path().join("cut.csv");
    std::fs::write(
        &cut,
        "forward_us,batch_size,block,arm,step_us\n1000,1,5,graph,20",
    )
    .unwrap();
    let arm = dir.path().join("arm.csv");
    std::fs::write(
        &arm,
        "forward_us,batch_size,block,arm,step_us\n1000,1,5,warp,2080\n",
    )
    .unwrap();
    let g = good.to_str().unwrap();
    refused(
        &["validate", "/nonexistent.csv", "--out", out_s],
        "nonexistent.csv",
    );
    refused(
        &["validate", cut.to_str().unwrap(), "--out", out_s],
        "newline",
    );
    refused(
        &["validate", arm.to_str().unwrap(), "--out", out_s],
        "line 2",
    );
    refused(
        &["validate", g, "--out", out_s, "--forward-us", "100"],
        "--forward-us",
    );
    refused(&["validate", g, "--out", out_s, "--tp", "tp8"], "--tp");
    refused(
        &["validate", g, "--out", out_s, "--step-pct", "0"],
        "--step-pct",
    );
    refused(
        &["validate", g, "--out", out_s, "--host-profile", "nope"],
        "--host-profile",
    );
    assert!(!out.exists());
}
