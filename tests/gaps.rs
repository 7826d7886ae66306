//! `metaprep gaps` as a user meets it: a trace in, summary.md and gaps.json out; every bad
//! trace refused (exit 2) with what is missing and how to record it, nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn metaprep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(args)
        .output()
        .expect("running metaprep")
}

fn small_trace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_trace_small.json")
}

fn succeeded(o: &Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
}

fn refused(args: &[&str], out: &Path, needle: &str) {
    let o = metaprep(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: wanted `{needle}` in {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "{args:?} wrote {}", out.display());
}

#[test]
fn a_trace_gives_the_answer_first_and_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g");
    let trace = small_trace();
    let o = metaprep(&[
        "gaps",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    succeeded(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.starts_with(
            "**The step's reads and uploads cost it 47.2 µs**, the costliest read \
             `Tensor.tolist()` in `draft prep`"
        ),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("summary.md")).unwrap(),
        stdout
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("gaps.json")).unwrap()).unwrap();
    assert_eq!(json[0]["sites"][0]["site"]["kind"], "read");
    assert!(
        stdout.contains("![Three typical steps](timeline.png)"),
        "{stdout}"
    );
    assert!(std::fs::read(out.join("timeline.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
    assert!(out.join("timeline.svg").is_file());
    // The README quotes this run's first paragraph as its literal output (wrapped).
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let quoted = readme
        .split("## From your engine's trace")
        .nth(1)
        .and_then(|s| s.split("```\n").nth(1))
        .expect("README's gaps section has a code block");
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words(quoted), words(stdout.split("\n\n").next().unwrap()));
    // Two traces: a before and an after, side by side first.
    let out2 = dir.path().join("g2");
    let t = trace.to_str().unwrap();
    let o = metaprep(&["gaps", t, t, "--out", out2.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.starts_with("**Before → after**"), "{stdout}");
    assert!(stdout.contains("## Before") && stdout.contains("## After"));
    for name in ["timeline-before.png", "timeline-after.svg"] {
        assert!(out2.join(name).is_file(), "{name}");
    }
}

#[test]
fn an_untraced_step_a_trace_scales_each_runs_host_time_to_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g");
    let t = small_trace();
    let t = t.to_str().unwrap();
    let o = metaprep(&[
        "gaps",
        t,
        t,
        "--untraced-step-us",
        "800,1200",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    succeeded(&o);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (run, step) in [(0, 800.0), (1, 1200.0)] {
        assert_eq!(json[run]["untraced_step_us"], step);
        let median = json[run]["period_us"]["median"].as_f64().unwrap();
        assert!((median - step).abs() < 1e-6, "run {run}: {median}");
        let scale = json[run]["host_scale"].as_f64().unwrap();
        assert!((scale < 1.0) == (step < 1000.0), "run {run}: x{scale}");
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("where it has several) lasts the 1,200 µs measured without"),
        "{summary}"
    );
}

#[test]
fn a_folder_is_one_run_of_ranks_read_together() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = dir.path().join("profile");
    std::fs::create_dir(&ranks).unwrap();
    for rank in ["TP-0.trace.json", "TP-1.trace.json"] {
        std::fs::copy(small_trace(), ranks.join(rank)).unwrap();
    }
    // A probe file and other files beside the ranks are no ranks.
    std::fs::write(ranks.join("notes.txt"), "not a trace").unwrap();
    let out = dir.path().join("g");
    let o = metaprep(&[
        "gaps",
        ranks.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    succeeded(&o);
    assert!(stdout.starts_with("**Across 2 ranks**"), "{stdout}");
    assert!(
        stdout.contains("### The slowest rank most often: `"),
        "{stdout}"
    );
    let across: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("ranks.json")).unwrap()).unwrap();
    assert_eq!(across[0]["files"].as_array().unwrap().len(), 2);
    let traces: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("gaps.json")).unwrap()).unwrap();
    assert_eq!(traces.as_array().unwrap().len(), 2);
    // With the run's untraced step, one factor for both ranks, and the step across them meets
    // it; a step shorter than their GPU work is refused naming the folder.
    let scaled = dir.path().join("scaled");
    let (r, s) = (ranks.to_str().unwrap(), scaled.to_str().unwrap());
    let o = metaprep(&["gaps", r, "--untraced-step-us", "900", "--out", s]);
    succeeded(&o);
    let traces: serde_json::Value =
        serde_json::from_slice(&std::fs::read(scaled.join("gaps.json")).unwrap()).unwrap();
    assert_eq!(traces[0]["host_scale"], traces[1]["host_scale"]);
    let across: serde_json::Value =
        serde_json::from_slice(&std::fs::read(scaled.join("ranks.json")).unwrap()).unwrap();
    let step = across[0]["period_us"]["median"].as_f64().unwrap();
    assert!((step - 900.0).abs() < 1e-6, "{step}");
    let never = dir.path().join("never-scaled");
    let n = never.to_str().unwrap();
    refused(
        &["gaps", r, "--untraced-step-us", "100", "--out", n],
        &never,
        &format!("the ranks of {r}: --untraced-step-us 100 is no longer"),
    );
    // A single trace writes no ranks.json.
    let one = dir.path().join("one");
    let o = metaprep(&[
        "gaps",
        small_trace().to_str().unwrap(),
        "--out",
        one.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!one.join("ranks.json").exists());
    // A folder with no trace is refused, nothing written.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let never = dir.path().join("never");
    refused(
        &[
            "gaps",
            empty.to_str().unwrap(),
            "--out",
            never.to_str().unwrap(),
        ],
        &never,
        "no trace in the folder",
    );
}

#[test]
fn bad_traces_are_refused_naming_what_is_missing_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let o = out.to_str().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let small: serde_json::Value =
        serde_json::from_slice(&std::fs::read(small_trace()).unwrap()).unwrap();
    // Recorded without ProfilerActivity.CUDA: host events only.
    let mut cpu_only = small.clone();
    let events = cpu_only["traceEvents"].as_array_mut().unwrap();
    events.retain(|e| {
        !["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "ac2g"]
            .contains(&e["cat"].as_str().unwrap_or(""))
    });
    let cpu_only = write(
        "cpu.json",
        serde_json::to_string(&cpu_only).unwrap().as_bytes(),
    );
    refused(
        &["gaps", &cpu_only, "--out", o],
        &out,
        "ProfilerActivity.CUDA",
    );
    // No region repeats and no graph is replayed: no steps.
    let mut flat = small.clone();
    let events = flat["traceEvents"].as_array_mut().unwrap();
    events.retain(|e| e["cat"] != "user_annotation" && e["name"] != "cudaGraphLaunch");
    let flat = write(
        "flat.json",
        serde_json::to_string(&flat).unwrap().as_bytes(),
    );
    refused(&["gaps", &flat, "--out", o], &out, "--step-marker NAME");
    // Gzip's magic, then garbage; a file cut short; another tool's JSON.
    let garbage = write("bad.json.gz", &[0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5]);
    refused(&["gaps", &garbage, "--out", o], &out, "bad.json.gz");
    let text = std::fs::read_to_string(small_trace()).unwrap();
    let cut = write("cut.json", &text.as_bytes()[..text.len() / 2]);
    refused(&["gaps", &cut, "--out", o], &out, "cut.json");
    let nsys = write("nsys.json", br#"{"data": [{"Type": 48, "CudaEvent": {}}]}"#);
    refused(&["gaps", &nsys, "--out", o], &out, "not a Chrome trace");
    let other = write(
        "other.json",
        br#"{"traceEvents": [{"ph": "X", "cat": "CUDA API", "name": "cudaLaunchKernel", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}"#,
    );
    refused(
        &["gaps", &other, "--out", o],
        &out,
        "no torch.profiler events",
    );
    // Flags.
    let t = small_trace();
    let t = t.to_str().unwrap();
    refused(&["gaps", t, t, t, "--out", o], &out, "one run, or two");
    refused(
        &["gaps", "no-such.json", "--out", o],
        &out,
        "no such trace file",
    );
    refused(
        &["gaps", t, "--step-marker", " ", "--out", o],
        &out,
        "--step-marker",
    );
    for (steps, needle) in [
        ("2800,2900", "gives 2 steps for 1 TRACE arguments"),
        ("0", "--untraced-step-us 0.0 is not a step in µs"),
        ("nan", "--untraced-step-us NaN is not a step in µs"),
        ("1e-300", "--untraced-step-us 1e-300 is not a step in µs"),
        (
            "2.8e9",
            "--untraced-step-us 2800000000.0 is not a step in µs",
        ),
        (
            "1",
            "--untraced-step-us 1 is no longer than the traced steps' GPU work alone",
        ),
    ] {
        refused(
            &["gaps", t, "--untraced-step-us", steps, "--out", o],
            &out,
            needle,
        );
    }
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine"), "a user's").unwrap();
    let o2 = metaprep(&["gaps", t, "--out", o]);
    assert_eq!(o2.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(out.join("mine")).unwrap(),
        "a user's"
    );
}
