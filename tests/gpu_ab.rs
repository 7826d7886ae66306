//! `metaprep ab` on a real GPU: an A/A of one build passes, and a planted host slowdown in one
//! arm is caught on that arm's rows and nothing else; over the steps grid, an A/A passes and
//! a slower host is caught on eager-sync, whose read puts the host's work on the step. Run on a GPU host: `cargo test --release
//! --test gpu_ab -- --ignored --nocapture --test-threads 1`, or the bundle's `tests/gpu_ab-*`
//! (it finds `../metaprep`, or $METAPREP_BIN).

use std::path::Path;
use std::process::Command;

// Only the binary's path: one GPU is all these need.
#[allow(dead_code)]
mod support;

/// One family's four arms at bs 8: 4 cells.
const GRID: &[&str] = &["--families", "dsa_decode", "--batch-sizes", "8"];

/// The steps grid's bs 1 alone: 3 cells.
const STEPS_GRID: &[&str] = &["--batch-sizes", "1"];

fn ab(out: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    ab_of(GRID, out, extra)
}

fn ab_of(grid: &[&str], out: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut c = Command::new(support::metaprep_bin());
    c.args(["ab", "--pairs", "6", "--processes", "6", "--json", "--out"])
        .arg(out)
        .args(extra)
        .arg("--")
        .args(grid);
    let output = c.output().expect("running metaprep ab");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let json = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("ab printed no JSON ({e}); stderr: {stderr}"));
    (output.status.code().unwrap_or(-1), json, stderr)
}

fn called(json: &serde_json::Value) -> Vec<String> {
    (json["rows"].as_array().unwrap().iter())
        .filter(|r| ["slower", "faster"].contains(&r["call"].as_str().unwrap()))
        .map(|r| {
            format!(
                "{} {}",
                r["cell"]["arm"].as_str().unwrap(),
                r["metric"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_a_a_passes_and_a_planted_host_slowdown_is_caught_on_its_arm_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (code, json, stderr) = ab(&dir.path().join("aa"), &[]);
    println!(
        "RESULT a/a: exit {code}, called {:?}, {}",
        called(&json),
        json["verdict"]
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["cells"], 4);
    for name in ["summary.md", "ab.json", "pairs.csv"] {
        assert!(dir.path().join("aa").join(name).is_file(), "{name}");
    }
    // Every cell has its step, host issue and device time; eager-sync its blocked time.
    let rows = json["rows"].as_array().unwrap();
    for arm in ["eager-sync", "eager-device", "graph", "fused"] {
        for metric in ["step_us", "step_fwd_us", "host_issue_us", "gpu_prep_us"] {
            let row = rows
                .iter()
                .find(|r| r["cell"]["arm"] == arm && r["metric"] == metric);
            let row = row.unwrap_or_else(|| panic!("no {arm} {metric}"));
            assert!(row["base"].as_f64().unwrap() > 0.0, "{row}");
            assert_eq!(
                (row["pairs"].as_u64(), row["processes"].as_u64()),
                (Some(6), Some(6)),
                "{row}"
            );
        }
    }
    assert!(rows.iter().any(|r| r["metric"] == "read_cost_us"));
    // A fifth of eager-sync's step: four times the host-paced margin.
    let (code, json, stderr) = ab(
        &dir.path().join("planted"),
        &["--new-flags", "--plant-host eager-sync=20%"],
    );
    let calls = called(&json);
    println!("RESULT planted: exit {code}, called {calls:?}");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        calls.contains(&"eager-sync step_us".to_string()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"eager-sync host_issue_us".to_string()),
        "{calls:?}"
    );
    let others: Vec<&String> = (calls.iter())
        .filter(|c| !c.starts_with("eager-sync ") && !c.starts_with("eager-sync - eager-device "))
        .collect();
    assert!(
        others.is_empty(),
        "rows the plant cannot move were called: {others:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn over_the_steps_grid_an_a_a_passes_and_a_slower_host_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (code, json, stderr) = ab_of(STEPS_GRID, &dir.path().join("aa"), &["--steps"]);
    println!(
        "RESULT steps a/a: exit {code}, called {:?}, {}, {} s",
        called(&json),
        json["verdict"],
        json["seconds"]
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["cells"], 3);
    assert_eq!(json["emulated"][0], "tp8");
    let rows = json["rows"].as_array().unwrap();
    for arm in ["eager-sync", "eager-device", "graph"] {
        for metric in ["itl_us", "step_us", "throughput_tok_s"] {
            let row = (rows.iter()).find(|r| r["cell"]["arm"] == arm && r["metric"] == metric);
            let row = row.unwrap_or_else(|| panic!("no {arm} {metric}"));
            assert!(row["base"].as_f64().unwrap() > 0.0, "{row}");
            assert_eq!(row["pairs"].as_u64(), Some(6), "{row}");
        }
    }
    // Every host cost twice as long: eager-sync waits out its host work each step. (Half
    // again as long moved its step by about the 5% margin at tp8, too close to call.)
    let (code, json, stderr) = ab_of(
        STEPS_GRID,
        &dir.path().join("host"),
        &["--steps", "--new-flags", "--host-scale 2"],
    );
    let calls = called(&json);
    println!("RESULT steps host x2: exit {code}, called {calls:?}");
    assert_eq!(code, 1, "{stderr}");
    for metric in ["step_us", "itl_us", "throughput_tok_s"] {
        let call = format!("eager-sync {metric}");
        assert!(calls.contains(&call), "{call} not called: {calls:?}");
    }
}
