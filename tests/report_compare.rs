//! `metaprep compare` on the fixture runs: verdicts, exit codes, refusals, floors, bad input,
//! and (on real H200 pairs, whose intervals are as wide as real runs') planted regressions,
//! missing rows and lost intervals.

use clap::{CommandFactory, Parser};
use metaprep::report::compare::{run_compare, CompareArgs, CompareOutcome};
use metaprep::results::compressed::run_file;
use metaprep::results::csv::{read_rows, write_rows, Row};
use metaprep::results::env::EnvRecord;
use metaprep::results::settings::Settings;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: CompareArgs,
}

fn args(argv: &[&str]) -> CompareArgs {
    Cli::try_parse_from(std::iter::once("compare").chain(argv.iter().copied()))
        .unwrap()
        .args
}

fn compare(argv: &[&str]) -> anyhow::Result<CompareOutcome> {
    run_compare(&args(argv))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The table line of one cell and metric.
fn line<'a>(markdown: &'a str, cell: &str, metric: &str) -> &'a str {
    markdown
        .lines()
        .find(|l| l.starts_with(cell) && l.contains(&format!("| {metric} (")))
        .unwrap_or_else(|| panic!("no line for {cell} {metric} in\n{markdown}"))
}

/// The report with every row (`--details`), and the outcome.
fn details(argv: &[&str]) -> (String, CompareOutcome) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("details.md");
    let mut all: Vec<&str> = argv.to_vec();
    all.extend(["--details", path(&file)]);
    let outcome = compare(&all).unwrap();
    (std::fs::read_to_string(&file).unwrap(), outcome)
}

/// A copy of the fixture run in a temporary directory, to damage.
fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

#[test]
fn a_run_against_itself_is_all_same() {
    let run = fixture("run_small");
    let outcome = compare(&[path(&run), path(&run)]).unwrap();
    assert_eq!(outcome.exit_code(), 0);
    assert!(outcome.markdown.contains("**0 slower · 0 faster · 0 uncertain · 432 same** (432 matched; 0 missing (only in BASE), 0 only in NEW) → exit 0"), "{}", outcome.markdown);
    assert!(outcome
        .markdown
        .contains("_No row was called slower, faster or changed._"));
    assert!(!outcome.markdown.contains("### Missing and broken"));
}

#[test]
fn the_regression_is_found_and_fails_the_gate() {
    let (base, slower) = (fixture("run_small"), fixture("run_small_slower"));
    let (all, outcome) = details(&[path(&base), path(&slower)]);
    let md = &outcome.markdown;
    assert_eq!(outcome.exit_code(), 1);
    assert!(outcome.slower > 0);
    // 12 dspark graph prep cells × (step_us, floor_multiple) + 2 tp8 bs=1 graph step cells
    // × 4 metrics are slower; one tp1 step cell improved in 3 metrics; one prep cell is noisy.
    // The 5 floor rows get no verdict.
    assert!(
        md.starts_with("## metaprep compare\n")
            && md.contains("\n**32 slower · 3 faster · 2 uncertain · 395 same** (432 matched"),
        "{md}"
    );
    // prep,dspark_draft_block,graph,1,3,tp1: step_us 20.3 µs → 23.4 µs (+15%)
    let prep = line(
        md,
        "| prep | dspark_draft_block | tp1 | 1 | 3 | graph |",
        "step_us",
    );
    assert!(
        prep.ends_with(
            "| 20.3 | 23.4 | +15.0% | [+14.1, +15.9] | +14.8% [+13.7, +15.9] | +2.8% | **slower** |"
        ),
        "{prep}"
    );
    // Throughput went down: slower although the number is lower; the smallest call is a fall.
    let tokps = line(
        md,
        "| step | dspark+dsa_target_verify | tp8 (emulated) | 1 | 5 | graph |",
        "throughput_tok_s",
    );
    assert!(
        tokps.ends_with("| 7,941 | 7,233 | -8.9% | [-9.7, -8.1] | — | −2.9% | **slower** |"),
        "{tokps}"
    );
    let better = line(
        md,
        "| step | dspark+dsa_target_verify | tp1 | 64 | 3 | eager-device |",
        "throughput_tok_s",
    );
    assert!(
        better.ends_with("| +5.2% | [+4.3, +6.2] | — | −2.9% | **faster** |"),
        "{better}"
    );
    // Rows neither slower nor faster are only in the details.
    let noisy = "| prep | dsa_target_verify | tp1 | 8 | 4 | eager-sync |";
    assert!(!md.contains(noisy), "{md}");
    assert!(
        line(&all, noisy, "step_us")
            .ends_with("| +2.5% | [-0.6, +6.1] | +2.4% [-0.7, +6.1] | +5.2% | uncertain |"),
        "{all}"
    );
    assert!(line(
        &all,
        "| prep | dsa_target_verify | tp1 | 1 | 2 | graph |",
        "step_us"
    )
    .ends_with("| same |"));
    // One step_us table of family × arm: the regressed arm stands out.
    assert!(
        md.contains("| prep | dspark_draft_block | tp1 | -0.1% (6 same) | +0.0% (6 same) | +15.0% (6 **slower**) |"),
        "{md}"
    );
    // What each class could see.
    assert!(
        md.contains("| prep | step_us | GPU | 24 | 2.8% | 2.8% | 0 |"),
        "{md}"
    );
    // Driver and revision differ between the fixtures: allowed, and shown.
    assert!(md.contains("driver 580.159.03") && md.contains("driver 580.172.01"));
    assert!(
        md.contains("(shown, never refused): driver: `580.159.03` vs `580.172.01`; git revision: `d9d035d` vs `e4f5a6b`."),
        "{md}"
    );
    assert!(!md.contains("settings differ"));
}

/// The small run against its slower copy at a 20% threshold, with `more` flags.
fn slower_at_20(more: &[&str]) -> CompareOutcome {
    let (base, new) = (fixture("run_small"), fixture("run_small_slower"));
    let args = [path(&base), path(&new), "--threshold", "20"];
    compare(&[&args[..], more].concat()).unwrap()
}

#[test]
fn the_threshold_moves_the_verdicts() {
    let outcome = slower_at_20(&["--gate", "all"]);
    assert_eq!(
        outcome.exit_code(),
        1,
        "the +438% host-bound gap stays slower"
    );
    assert!(
        outcome
            .markdown
            .contains("**2 slower · 0 faster · 0 uncertain · 430 same**"),
        "{}",
        outcome.markdown
    );
}

#[test]
fn a_steps_gap_is_the_hosts_and_the_default_gate_leaves_it() {
    // The GPU idles in a step's gap waiting for the host, whatever the arm: graph-upload's
    // gap moved 50-109 µs across four H100 steps runs.
    let outcome = slower_at_20(&[]);
    assert_eq!(outcome.exit_code(), 0, "{}", outcome.markdown);
    assert!(
        outcome
            .markdown
            .contains("2 slower host-paced rows do not fail it"),
        "{}",
        outcome.markdown
    );
}

/// A copy of a fixture run as a metaprep before rounds wrote it: no `rounds` column.
fn before_rounds(name: &str) -> tempfile::TempDir {
    let dir = copy_of(name);
    let csv_path = dir.path().join("metaprep.csv");
    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    let headers = reader.headers().unwrap().clone();
    let at = headers.iter().position(|h| h == "rounds").unwrap();
    let drop = |record: &csv::StringRecord| {
        let mut fields: Vec<String> = record.iter().map(String::from).collect();
        fields.remove(at);
        fields
    };
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(drop(&headers)).unwrap();
    for record in reader.records() {
        writer.write_record(drop(&record.unwrap())).unwrap();
    }
    std::fs::write(&csv_path, writer.into_inner().unwrap()).unwrap();
    dir
}

#[test]
fn a_sweep_from_before_rounds_is_refused_by_name() {
    let old = before_rounds("run_small");
    assert!(read_rows(&old.path().join("metaprep.csv"))
        .unwrap()
        .iter()
        .all(|r| r.rounds == 0));
    let fresh = fixture("run_small");
    for (args, side) in [
        ([path(old.path()), path(&fresh)], "BASE"),
        ([path(&fresh), path(old.path())], "NEW"),
    ] {
        let Err(err) = compare(&args) else {
            panic!("a side without rounds was compared")
        };
        let err = format!("{err:#}");
        assert!(
            err.contains(&format!("{side} (")) && err.contains("measured without rounds"),
            "{err}"
        );
    }
    // Two runs measured in rounds compare as ever.
    assert!(compare(&[path(&fresh), path(&fresh)]).is_ok());
}

#[test]
fn two_arms_of_one_run() {
    let run = fixture("run_small");
    let (all, outcome) = details(&[
        path(&run),
        path(&run),
        "--base-arm",
        "eager-sync",
        "--new-arm",
        "graph",
    ]);
    let md = &outcome.markdown;
    assert!(
        md.contains("**Arms:** `eager-sync` (BASE) → `graph` (NEW)"),
        "{md}"
    );
    // prep,dspark_draft_block,{eager-sync 62.1284, graph 26.4},64,5,tp1
    let prep = line(
        md,
        "| prep | dspark_draft_block | tp1 | 64 | 5 | eager-sync → graph |",
        "step_us",
    );
    assert!(
        prep.contains("| 62.1 | 26.4 | -57.5% |") && prep.ends_with("**faster** |"),
        "{prep}"
    );
    // The throttled graph cell at tp1 bs=64 block=5 gains nothing and is flagged.
    let hot = line(
        &all,
        "| step | dspark+dsa_target_verify | tp1 | 64 | 5 | eager-sync → graph |",
        "itl_us",
    );
    assert!(hot.ends_with("| same ⚠ NEW throttled |"), "{hot}");
    // eager-sync's read cost and host-blocked time have no graph counterpart: listed, but
    // two arms hold different metrics by design, so nothing is missing.
    assert!(
        md.contains("0 only in BASE (arms hold different metrics: not a finding)"),
        "{md}"
    );
    assert!(!md.contains("### Missing and broken"), "{md}");
    assert!(
        md.contains("| kind | family | layout | eager-sync → graph |"),
        "{md}"
    );
    assert_eq!(outcome.exit_code(), 0, "{md}");
}

/// Rewrites the env.json of a run directory.
fn edit_env(dir: &Path, edit: impl FnOnce(&mut EnvRecord)) {
    let mut env = EnvRecord::read(dir).unwrap();
    edit(&mut env);
    env.write(dir).unwrap();
}

/// A default sweep's settings as an H200 run recorded them, edited by `edit`.
fn recorded_settings(edit: impl FnOnce(&mut serde_json::Value)) -> Settings {
    let env = EnvRecord::read(&fixture("h200_aa_s10/aa1")).unwrap();
    let mut settings = serde_json::to_value(env.settings.unwrap()).unwrap();
    edit(&mut settings);
    serde_json::from_value(settings).unwrap()
}

/// run_small and run_small_slower recorded with settings that differ in seed and batch sizes;
/// NEW lists the layouts in another order and names another --out and --trace.
fn runs_of_other_settings() -> (tempfile::TempDir, tempfile::TempDir) {
    let base = copy_of("run_small");
    edit_env(base.path(), |env| {
        env.settings = Some(recorded_settings(|_| {}));
    });
    let other = copy_of("run_small_slower");
    edit_env(other.path(), |env| {
        env.command_line = "metaprep sweep --batch-sizes 1,8 --seed 7 --out results/elsewhere \
                            --trace t.json"
            .into();
        env.settings = Some(recorded_settings(|s| {
            s["seed"] = 7.into();
            s["batch_sizes"] = serde_json::json!([8, 1]);
            s["families"].as_array_mut().unwrap().reverse();
        }));
    });
    (base, other)
}

/// The differences `runs_of_other_settings` makes, BASE first.
const SETTING_DIFFERENCES: [&str; 2] = ["batch_sizes: `1,8,64,256` vs `8,1`", "seed: `1` vs `7`"];

#[test]
fn differing_settings_are_refused_with_exit_2_naming_each() {
    let (base, other) = runs_of_other_settings();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(["compare", path(base.path()), path(other.path())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "no report on refusal");
    assert!(
        stderr.contains(&format!(
            "different settings (BASE vs NEW: {})",
            SETTING_DIFFERENCES.join("; ")
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-mismatch"), "{stderr}");
    // Families in another order, another --out and --trace: none of them is a setting that
    // differs.
    for not_named in ["families", "--out", "--trace", "trace"] {
        assert!(
            !stderr.contains(not_named),
            "{not_named} named in: {stderr}"
        );
    }
}

#[test]
fn allow_mismatch_compares_and_lists_the_differences_at_the_top() {
    let (base, other) = runs_of_other_settings();
    let outcome = compare(&[path(base.path()), path(other.path()), "--allow-mismatch"]).unwrap();
    let md = &outcome.markdown;
    let warning = md
        .find("> ⚠ settings differ (BASE vs NEW); compared because of --allow-mismatch:")
        .unwrap_or_else(|| panic!("{md}"));
    // The verdict line leads; the warning follows it, above everything else.
    let verdict = md.find(" slower").unwrap_or_else(|| panic!("{md}"));
    assert!(verdict < warning, "{md}");
    for difference in SETTING_DIFFERENCES {
        let item = md
            .find(&format!("> - {difference}\n"))
            .unwrap_or_else(|| panic!("{difference} in {md}"));
        assert!(
            item < md.find("### What this pair can see").unwrap(),
            "{md}"
        );
    }
    assert_eq!(
        outcome.exit_code(),
        1,
        "the regression still fails the gate"
    );
}

#[test]
fn another_machine_is_shown_not_refused() {
    let other = copy_of("run_small");
    edit_env(other.path(), |env| {
        env.gpu_name = "NVIDIA H100 80GB HBM3".into();
        env.gpu_count = 8;
        env.cpu_model = "Intel(R) Xeon(R) Platinum 8468".into();
    });
    let base = fixture("run_small");
    let outcome = compare(&[path(&base), path(other.path())]).unwrap();
    assert!(
        outcome.markdown.contains(
            "(shown, never refused): GPU: `NVIDIA H200` vs `NVIDIA H100 80GB HBM3`; GPU count: \
             `1` vs `8`; CPU: not recorded vs `Intel(R) Xeon(R) Platinum 8468`."
        ),
        "{}",
        outcome.markdown
    );
    assert_eq!(outcome.exit_code(), 0);
}

/// Scales a row's median and every quantile and bound with it.
fn scale(row: &mut Row, factor: f64) {
    for v in [
        &mut row.median,
        &mut row.p10,
        &mut row.p90,
        &mut row.ci_lo,
        &mut row.ci_hi,
    ] {
        *v *= factor;
    }
}

#[test]
fn floors_get_no_verdict_and_never_fail_the_gate() {
    let slower_machine = copy_of("run_small");
    let csv = slower_machine.path().join("metaprep.csv");
    let mut rows = read_rows(&csv).unwrap();
    for row in rows.iter_mut().filter(|r| r.kind == "floor") {
        scale(row, 1.5);
    }
    write_rows(&csv, &rows).unwrap();
    let base = fixture("run_small");
    let (all, outcome) = details(&[path(&base), path(slower_machine.path())]);
    let md = &outcome.markdown;
    assert_eq!(outcome.exit_code(), 0, "{md}");
    assert!(
        md.contains("**0 slower · 0 faster · 0 uncertain · 432 same**"),
        "{md}"
    );
    assert!(
        md.contains("| empty-kernel | step_us (us) | 4.50 | 6.75 | +50.0% | [+49.1, +50.9] |\n"),
        "{md}"
    );
    assert!(
        md.contains("| d2h-int | step_us (us) | 17.9 | 26.8 | +50.0% |"),
        "{md}"
    );
    assert!(
        !all.contains("| floor | floor |"),
        "no floor row among the cells: {all}"
    );
    // The arms stood still while the floors rose by half: against their floor they fell by
    // a third.
    let eager = line(
        &all,
        "| prep | dspark_draft_block | tp1 | 1 | 3 | eager-sync |",
        "step_us",
    );
    assert!(
        eager.contains("| +0.0% | [-0.8, +0.8] | -33.3% [-34.0, -32.7] |"),
        "{eager}"
    );
    assert!(eager.ends_with("| same |"), "{eager}");
}

/// A run of one prep cell's eager-sync and graph step_us rows and the two launch floors,
/// cut from run_small, with these medians.
fn synthetic_run(empty_kernel: f64, empty_graph: f64, eager: f64, graph: f64) -> tempfile::TempDir {
    let dir = copy_of("run_small");
    let csv = dir.path().join("metaprep.csv");
    let rows = read_rows(&csv).unwrap();
    let pick = |kind: &str, arm: &str, median: f64| {
        let mut row = rows
            .iter()
            .find(|r| {
                r.kind == kind
                    && r.arm == arm
                    && r.metric == "step_us"
                    && (kind == "floor" || (r.family == "dsa_target_verify" && r.batch_size == 8))
            })
            .unwrap()
            .clone();
        let factor = median / row.median;
        scale(&mut row, factor);
        (row.ci_lo, row.ci_hi) = (median * 0.99, median * 1.01);
        row
    };
    let picked = vec![
        pick("floor", "empty-kernel", empty_kernel),
        pick("floor", "empty-graph", empty_graph),
        pick("prep", "eager-sync", eager),
        pick("prep", "graph", graph),
    ];
    write_rows(&csv, &picked).unwrap();
    dir
}

#[test]
fn change_vs_floor_reads_each_arm_against_its_own_floor() {
    // Both arms 20% slower; the empty kernel doubled, the empty graph stood still.
    let base = synthetic_run(5.0, 2.0, 50.0, 10.0);
    let new = synthetic_run(10.0, 2.0, 60.0, 12.0);
    let outcome = compare(&[path(base.path()), path(new.path()), "--gate", "all"]).unwrap();
    let md = &outcome.markdown;
    // Eager against the empty kernel: (60 / 10) / (50 / 5) − 1 = −40%; four ±1% intervals
    // make ±0.02 on the log scale: 0.6·e^∓0.02 − 1. The change over the floor is shown beside
    // the row's; the verdict is the row's own.
    let eager = line(md, "| prep | dsa_target_verify | tp1 | 8 |", "step_us");
    assert!(eager.contains("| eager-sync |"), "{eager}");
    assert!(
        eager.ends_with(
            "| 50.0 | 60.0 | +20.0% | [+18.3, +21.7] | -40.0% [-41.2, -38.8] | +3.5% | **slower** |"
        ),
        "{eager}"
    );
    // Graph against the empty graph: (12 / 2) / (10 / 2) − 1 = +20%.
    let graph = md
        .lines()
        .find(|l| l.contains("| dsa_target_verify |") && l.contains("| graph |"))
        .unwrap();
    assert!(
        graph.ends_with(
            "| 10.0 | 12.0 | +20.0% | [+18.3, +21.7] | +20.0% [+17.6, +22.4] | +3.5% | **slower** |"
        ),
        "{graph}"
    );
    assert!(
        md.contains("| empty-kernel | step_us (us) | 5.00 | 10.0 | +100.0% |"),
        "{md}"
    );
    assert!(
        md.contains("**2 slower · 0 faster · 0 uncertain · 0 same** (2 matched"),
        "{md}"
    );
    assert_eq!(outcome.exit_code(), 1);
}

#[test]
fn csv_files_work_with_and_without_env_json_beside_them() {
    let base = fixture("run_small").join("metaprep.csv");
    let new = fixture("run_small_slower").join("metaprep.csv");
    let outcome = compare(&[path(&base), path(&new)]).unwrap();
    assert_eq!(outcome.exit_code(), 1);
    assert!(!outcome.markdown.contains("settings not checked"));

    let bare = tempfile::tempdir().unwrap();
    let csv = bare.path().join("before.csv");
    std::fs::copy(&base, &csv).unwrap();
    let outcome = compare(&[path(&csv), path(&base)]).unwrap();
    assert!(
        outcome.markdown.contains("⚠ settings not checked"),
        "{}",
        outcome.markdown
    );
    assert_eq!(outcome.exit_code(), 0);
}

#[test]
fn out_file_gets_the_report_and_the_terminal_only_the_verdict_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("compare.md");
    let run = fixture("run_small");
    let outcome = compare(&[path(&run), path(&run), "--out", path(&out)]).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), outcome.markdown);
    assert_eq!(
        outcome.terminal,
        format!(
            "**0 slower · 0 faster · 0 uncertain · 432 same** (432 matched; 0 missing (only in \
             BASE), 0 only in NEW) → exit 0\nreport in {} ({} characters)\n",
            out.display(),
            outcome.markdown.chars().count()
        )
    );
    // Its own report is replaced; anything else is refused and left as it was.
    compare(&[path(&run), path(&run), "--out", path(&out)]).unwrap();
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "my notes").unwrap();
    for flag in ["--out", "--details", "--json"] {
        let error = format!(
            "{:#}",
            compare(&[path(&run), path(&run), flag, path(&notes)]).unwrap_err()
        );
        assert!(error.contains("not a file `compare` wrote"), "{error}");
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes");
    // One file for two outputs is refused; a JSON file compare wrote is replaced.
    let json = dir.path().join("compare.json");
    let error = format!(
        "{:#}",
        compare(&[
            path(&run),
            path(&run),
            "--out",
            path(&json),
            "--json",
            path(&json)
        ])
        .unwrap_err()
    );
    assert!(error.contains("is also --out's file"), "{error}");
    compare(&[path(&run), path(&run), "--json", path(&json)]).unwrap();
    compare(&[path(&run), path(&run), "--json", path(&json)]).unwrap();
    let error = format!(
        "{:#}",
        compare(&[path(&run), path(&run), "--out", path(&json)]).unwrap_err()
    );
    assert!(
        error.contains("not a file `compare` wrote"),
        "a JSON is not a report: {error}"
    );
}

#[test]
fn details_hold_every_row_and_json_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let (all, json) = (dir.path().join("all.md"), dir.path().join("all.json"));
    let (base, slower) = (fixture("run_small"), fixture("run_small_slower"));
    let outcome = compare(&[
        path(&base),
        path(&slower),
        "--details",
        path(&all),
        "--json",
        path(&json),
    ])
    .unwrap();
    let details = std::fs::read_to_string(&all).unwrap();
    let table_rows = |md: &str| {
        md.lines()
            .filter(|l| l.starts_with("| prep |") || l.starts_with("| step |"))
            .count()
    };
    // 432 rows, plus the step_us table's lines of family × arm.
    assert!(table_rows(&details) >= 432, "{details}");
    assert!(table_rows(&outcome.markdown) < 100, "only what was called");
    assert_eq!(
        outcome.written,
        [
            format!("every row in {}", all.display()),
            format!("JSON in {}", json.display())
        ]
    );
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(value["report"], "metaprep compare");
    assert_eq!(value["exit_code"], 1);
    let rows = value["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 432);
    let slower_rows = rows.iter().filter(|r| r["verdict"] == "slower").count();
    assert_eq!(slower_rows, 32);
    let prep = rows
        .iter()
        .find(|r| {
            r["family"] == "dspark_draft_block"
                && r["arm"] == "graph"
                && r["batch_size"] == 1
                && r["block_size"] == 3
                && r["layout"] == "tp1"
                && r["metric"] == "step_us"
        })
        .unwrap();
    assert!(
        (prep["change"]["pct"].as_f64().unwrap() - 15.0).abs() < 0.05,
        "{prep}"
    );
    assert!(prep["smallest_callable_pct"].as_f64().unwrap() > 2.0);
    assert_eq!(
        value["counts"][0],
        serde_json::json!({"verdict": "slower", "rows": 32})
    );
    assert!(value["power"].as_array().unwrap().len() > 5);
}

#[test]
fn out_never_overwrites_an_input_or_creates_folders() {
    let copy = tempfile::tempdir().unwrap();
    for file in ["metaprep.csv", "env.json", "telemetry.csv"] {
        std::fs::copy(fixture("run_small").join(file), copy.path().join(file)).unwrap();
    }
    let csv = copy.path().join("metaprep.csv");
    let before = std::fs::read(&csv).unwrap();
    let other = tempfile::tempdir().unwrap();
    for (out, needle) in [
        (csv.clone(), "one of the compared inputs"),
        (copy.path().join("env.json"), "not a file `compare` wrote"),
        (copy.path().join("new/dir/compare.md"), "does not exist"),
        (copy.path().to_path_buf(), "one of the compared inputs"),
        (other.path().to_path_buf(), "is a directory"),
    ] {
        let error = format!(
            "{:#}",
            compare(&[path(&csv), path(copy.path()), "--out", path(&out)]).unwrap_err()
        );
        assert!(error.contains(needle), "{}: {error}", out.display());
    }
    assert_eq!(
        std::fs::read(&csv).unwrap(),
        before,
        "the input is untouched"
    );
    assert!(!copy.path().join("new").exists());
    let error = format!(
        "{:#}",
        compare(&[path(&csv), path(&csv), "--threshold", "1e9"]).unwrap_err()
    );
    assert!(error.contains("between 0 and 100"), "{error}");
}

#[test]
fn bad_input_is_an_error_that_says_what_to_do() {
    let run = fixture("run_small");
    let empty = tempfile::tempdir().unwrap();
    let error = format!(
        "{:#}",
        compare(&[path(&run), path(empty.path())]).unwrap_err()
    );
    assert!(
        error.contains("has no metaprep.csv: run `metaprep sweep --out DIR`"),
        "{error}"
    );

    let missing = empty.path().join("nope");
    let error = format!("{:#}", compare(&[path(&missing), path(&run)]).unwrap_err());
    assert!(error.contains("nope does not exist"), "{error}");

    let damaged = copy_of("run_small");
    let csv = damaged.path().join("metaprep.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    std::fs::write(&csv, text.replacen(",46.8418,", ",46.8.418,", 1)).unwrap();
    let error = format!(
        "{:#}",
        compare(&[path(&run), path(damaged.path())]).unwrap_err()
    );
    assert!(
        error.contains("metaprep.csv line 2, column `median`: cannot read `46.8.418`"),
        "{error}"
    );

    let error = format!(
        "{:#}",
        compare(&[path(&run), path(&run), "--threshold=-1"]).unwrap_err()
    );
    assert!(
        error.contains("--threshold -1 is not a percentage"),
        "{error}"
    );

    let error = format!(
        "{:#}",
        compare(&[
            path(&run),
            path(&run),
            "--base-arm",
            "eager",
            "--new-arm",
            "graph"
        ])
        .unwrap_err()
    );
    assert!(
        error.contains("--base-arm eager: BASE has no rows for that arm; its arms are: d2h-int"),
        "{error}"
    );
}

#[test]
fn arm_flags_come_in_pairs() {
    let parsed = Cli::try_parse_from(["compare", "a", "b", "--base-arm", "eager-sync"]);
    assert!(parsed.is_err());
    let parsed = Cli::try_parse_from(["compare", "a", "b"]).unwrap().args;
    assert_eq!(parsed.threshold, 2.0);
    assert!(!parsed.allow_mismatch);
}

#[test]
fn help_explains_every_flag() {
    let help = Cli::command().render_long_help().to_string();
    for text in [
        "<BASE>",
        "<NEW>",
        "--base-arm <ARM>",
        "--new-arm <ARM>",
        "--threshold <PCT>",
        "within ±PCT",
        "[default: 2]",
        "--out <FILE>",
        "the terminal then gets only the verdict line",
        "--details <FILE>",
        "--json <FILE>",
        "--allow-missing",
        "a regression can hide in what NEW no longer measures",
        "--allow-mismatch",
        "lists the differences at the top",
        "Machine differences (GPU, driver, CPU, git revision) never need it",
    ] {
        assert!(help.contains(text), "help lacks {text:?}:\n{help}");
    }
}

#[derive(Parser)]
struct WithSubcommand {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    Compare(CompareArgs),
}

#[test]
fn as_a_subcommand_the_help_explains_verdicts_and_exit_status() {
    let mut cli = WithSubcommand::command();
    let help = cli
        .find_subcommand_mut("compare")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(help.contains("Exit status: 0, or 1 when"), "{help}");
    assert!(help.contains("`uncertain`"), "{help}");
    assert!(help.contains("Runs whose settings differ"), "{help}");
    assert!(help.contains("floors get no verdict"), "{help}");
    assert!(help.contains("change vs floor"), "{help}");
    assert!(help.contains("under 60,000 characters"), "{help}");
    assert!(
        help.contains("lost its interval (unless --allow-missing)"),
        "{help}"
    );
}

// ---------------------------------------------------------------------------------------------
// Regressions planted in a real A/A pair of default sweeps (block 5 of
// results/2026-11-29-h200-read-landing/aa-call3; tests/fixtures/make_h200_pairs.py): each is
// called or named whatever the floors did, and missing rows and lost intervals fail.

const AA1: &str = "h200_aa/aa1";
const AA2: &str = "h200_aa/aa2";

/// A copy of fixture run `name` with its rows edited (written plain, which a gzipped copy
/// gives way to).
fn edited(name: &str, edit: impl FnOnce(&mut Vec<Row>)) -> tempfile::TempDir {
    let dir = copy_of(name);
    let mut rows = read_rows(&run_file(dir.path(), "metaprep.csv")).unwrap();
    edit(&mut rows);
    write_rows(&dir.path().join("metaprep.csv"), &rows).unwrap();
    dir
}

fn is_launch_floor(r: &Row) -> bool {
    r.kind == "floor" && r.metric == "step_us" && r.arm.starts_with("empty-")
}

fn of(r: &Row, arm: &str, metric: &str) -> bool {
    r.kind == "prep" && r.arm == arm && r.metric == metric
}

/// The comparison as JSON, and the outcome.
fn json_of(argv: &[&str]) -> (serde_json::Value, CompareOutcome) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.json");
    let mut all: Vec<&str> = argv.to_vec();
    all.extend(["--json", path(&file)]);
    let outcome = compare(&all).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    (serde_json::from_str(&text).unwrap(), outcome)
}

/// The verdicts of the rows of `arm`'s `metric`, counted.
fn verdicts_of(json: &serde_json::Value, arm: &str, metric: &str) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for r in json["rows"].as_array().unwrap() {
        if r["arm"] == arm && r["metric"] == metric {
            *counts
                .entry(r["verdict"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    counts.into_iter().collect()
}

/// The real A/A pair with NEW edited: it exits 1, and the verdicts of eager-sync's `metric`.
fn aa_pair_edited(edit: impl FnOnce(&mut Vec<Row>), metric: &str) -> Vec<(String, usize)> {
    let new = edited(AA2, edit);
    let (json, outcome) = json_of(&[path(&fixture(AA1)), path(new.path())]);
    assert_eq!(outcome.exit_code(), 1);
    verdicts_of(&json, "eager-sync", metric)
}

fn counted(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
    pairs.iter().map(|(v, n)| (v.to_string(), *n)).collect()
}

#[test]
fn the_fixture_pair_has_real_widths() {
    // The empty kernel's interval in a real sweep is several percent wide, a host time's tens:
    // a fixture of ±1% would pass rules real data breaks.
    let rows = read_rows(&fixture(AA1).join("metaprep.csv")).unwrap();
    let half_width = |r: &Row| (r.ci_hi - r.ci_lo) / 2.0 / r.median * 100.0;
    let kernel = rows
        .iter()
        .find(|r| r.kind == "floor" && r.arm == "empty-kernel")
        .unwrap();
    assert!(half_width(kernel) > 3.0, "{kernel:?}");
    let widest_host = rows
        .iter()
        .filter(|r| of(r, "graph", "host_issue_us"))
        .map(half_width)
        .fold(0.0, f64::max);
    assert!(widest_host > 20.0, "{widest_host}");
    // The run against itself: nothing called, nothing missing.
    let run = fixture(AA1);
    let outcome = compare(&[path(&run), path(&run)]).unwrap();
    assert_eq!(outcome.exit_code(), 0);
    assert!(
        outcome.markdown.contains("**0 slower · 0 faster · "),
        "{}",
        outcome.markdown
    );
}

#[test]
fn one_cell_20_percent_slower_is_caught() {
    let new = edited(AA1, |rows| {
        let r = rows
            .iter_mut()
            .find(|r| of(r, "eager-sync", "step_us"))
            .unwrap();
        scale(r, 1.2);
    });
    let (json, outcome) = json_of(&[path(&fixture(AA1)), path(new.path()), "--gate", "all"]);
    assert_eq!(outcome.exit_code(), 1);
    assert_eq!(outcome.slower, 1);
    // Host-paced: separate runs do not gate it by default.
    let (_, default) = json_of(&[path(&fixture(AA1)), path(new.path())]);
    assert_eq!((default.exit_code(), default.slower), (0, 0));
    assert!(verdicts_of(&json, "eager-sync", "step_us").contains(&("slower".into(), 1)));
}

/// The verdict of one cell's row.
fn verdict_at(json: &serde_json::Value, family: &str, bs: u32, arm: &str, metric: &str) -> String {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["family"] == family
                && r["batch_size"] == bs
                && r["arm"] == arm
                && r["metric"] == metric
        })
        .unwrap_or_else(|| panic!("no {family} bs={bs} {arm} {metric}"))["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn graph_floors_moving_do_not_excuse_an_eager_row() {
    // The real A/A pair, NEW's eager-sync step_us +20% in one cell and only the empty graphs
    // of 2 and 3 nodes 3% slower (the empty kernel, eager-sync's floor, as it was).
    let new = edited(AA2, |rows| {
        let r = rows
            .iter_mut()
            .find(|r| of(r, "eager-sync", "step_us"))
            .unwrap();
        assert_eq!((r.family.as_str(), r.batch_size), ("dspark_draft_block", 1));
        scale(r, 1.2);
        for r in rows
            .iter_mut()
            .filter(|r| r.kind == "floor" && (r.arm == "empty-graph-2" || r.arm == "empty-graph-3"))
        {
            scale(r, 1.03);
        }
    });
    let (json, outcome) = json_of(&[path(&fixture(AA1)), path(new.path())]);
    assert_eq!(outcome.exit_code(), 1);
    assert_eq!(
        verdict_at(&json, "dspark_draft_block", 1, "eager-sync", "step_us"),
        "slower"
    );
}

#[test]
fn a_row_that_moved_further_than_its_floor_is_called() {
    // The real A/A pair, NEW's launch floors +10% and eager-sync's step_us +30% (+18% over
    // its own floor) in every cell.
    let verdicts = aa_pair_edited(
        |rows| {
            for r in rows.iter_mut() {
                if is_launch_floor(r) {
                    scale(r, 1.1);
                } else if of(r, "eager-sync", "step_us") {
                    scale(r, 1.3);
                }
            }
        },
        "step_us",
    );
    assert_eq!(verdicts, counted(&[("slower", 16)]));
}

#[test]
fn a_read_cost_25_percent_higher_is_called_though_the_floors_moved() {
    // The real A/A pair, NEW's read_cost_us +25% in every cell and every floor +10%.
    let verdicts = aa_pair_edited(
        |rows| {
            for r in rows.iter_mut() {
                if r.kind == "floor" {
                    scale(r, 1.1);
                } else if of(r, "eager-sync", "read_cost_us") {
                    scale(r, 1.25);
                }
            }
        },
        "read_cost_us",
    );
    assert!(verdicts.contains(&("slower".into(), 10)), "{verdicts:?}");
}

#[test]
fn twenty_percent_on_every_eager_sync_step_of_a_real_aa_pair_is_caught() {
    let verdicts = aa_pair_edited(
        |rows| {
            for r in rows.iter_mut().filter(|r| of(r, "eager-sync", "step_us")) {
                scale(r, 1.2);
            }
        },
        "step_us",
    );
    assert_eq!(verdicts, counted(&[("slower", 16)]));
}

#[test]
fn an_arm_missing_from_new_fails_and_is_named_first() {
    // NEW without the fused arm. Build 0ff8bee: exit 0.
    let new = edited(AA1, |rows| rows.retain(|r| r.arm != "fused"));
    let outcome = compare(&[path(&fixture(AA1)), path(new.path())]).unwrap();
    let md = &outcome.markdown;
    assert_eq!(outcome.exit_code(), 1, "{md}");
    assert_eq!(outcome.slower, 0);
    let named = md
        .find("- arm `fused`: absent from NEW (")
        .unwrap_or_else(|| panic!("{md}"));
    let missing = md.find("### Missing and broken").unwrap();
    for later in [
        "### What this pair can see",
        "### step_us by family × arm",
        "### Rows called",
    ] {
        assert!(
            missing < named && named < md.find(later).unwrap(),
            "{later}: {md}"
        );
    }
    // A missing cell and a missing row are named too; --allow-missing reports, passes.
    let fewer = edited(AA1, |rows| {
        rows.retain(|r| !(r.arm == "graph" && r.batch_size == 8));
        let at = rows
            .iter()
            .position(|r| of(r, "eager-sync", "read_cost_us"))
            .unwrap();
        rows.remove(at);
    });
    let outcome = compare(&[path(&fixture(AA1)), path(fewer.path())]).unwrap();
    assert!(
        outcome
            .markdown
            .contains("- 4 cells absent from NEW: prep dsa_decode/graph bs=8 block=5 tp1 ("),
        "{}",
        outcome.markdown
    );
    assert!(outcome.markdown.contains("- 1 rows NEW lacks in cells it holds: prep dspark_draft_block/eager-sync bs=1 block=5 tp1 `read_cost_us`"), "{}", outcome.markdown);
    assert_eq!(outcome.exit_code(), 1);
    let allowed = compare(&[path(&fixture(AA1)), path(fewer.path()), "--allow-missing"]).unwrap();
    assert_eq!(allowed.exit_code(), 0);
    assert!(allowed
        .markdown
        .contains("### Missing and broken (reported, not failed: --allow-missing)"));
}

#[test]
fn rows_that_lost_their_interval_fail_and_are_named() {
    // Every graph step_us 30% slower with no interval. Build 0ff8bee: `uncertain`, exit 0.
    let new = edited(AA1, |rows| {
        for r in rows.iter_mut().filter(|r| of(r, "graph", "step_us")) {
            scale(r, 1.3);
            (r.ci_lo, r.ci_hi) = (f64::NAN, f64::NAN);
        }
    });
    let (json, outcome) = json_of(&[path(&fixture(AA1)), path(new.path())]);
    assert_eq!(outcome.exit_code(), 1);
    assert_eq!(
        verdicts_of(&json, "graph", "step_us"),
        counted(&[("broken", 16)])
    );
    assert!(outcome.markdown.contains(
        "- 16 rows without an interval in NEW where BASE has one (`broken`): prep dsa_decode/graph bs=1 block=5 tp1 `step_us`, "
    ), "{}", outcome.markdown);
    assert!(outcome
        .markdown
        .contains("; and 4 more (`--details` lists them all)"));
}

#[test]
fn a_slower_forward_is_caught_in_every_cell_the_gpu_paces() {
    // `sweep --forward-us 20` against `--forward-us 22` (results/2026-11-29-h200-rounds): the
    // arms whose step with the forward the GPU paces must call step_fwd_us slower in ≥ 95% of
    // their cells.
    let (fwd20, fwd22) = (fixture("h200_fwd/fwd20"), fixture("h200_fwd/fwd22"));
    let (json, outcome) = json_of(&[path(&fwd20), path(&fwd22), "--allow-mismatch"]);
    assert_eq!(outcome.exit_code(), 1);
    for arm in ["eager-device", "graph-upload", "graph", "fused"] {
        assert_eq!(
            verdicts_of(&json, arm, "step_fwd_us"),
            counted(&[("slower", 16)]),
            "{arm}"
        );
    }
}

#[test]
fn the_report_of_a_large_regression_stays_under_a_pull_requests_limit() {
    // Every prep row of a real run 30% slower (or lower, where higher is better): hundreds
    // of rows called, more than fit.
    let new = edited(AA1, |rows| {
        for r in rows.iter_mut().filter(|r| r.kind == "prep") {
            scale(r, if r.unit == "GB/s" { 0.7 } else { 1.3 });
        }
    });
    let (all, outcome) = details(&[path(&fixture(AA1)), path(new.path())]);
    let md = &outcome.markdown;
    assert!(md.chars().count() < 60_000, "{}", md.chars().count());
    assert!(
        md.contains("_Left out to keep this report under 60000 characters: "),
        "{md}"
    );
    assert!(all.chars().count() > 60_000, "the details hold every row");
    // The head is whole: the verdict line first, then the findings and the tables.
    assert!(md.lines().nth(5).unwrap().starts_with("**"), "{md}");
    assert!(md.contains("### step_us by family × arm") && md.contains("### Environment"));
}

#[test]
fn each_reading_arms_read_cost_has_its_own_headline_column() {
    // Both runs get an eager-pinned read cost beside eager-sync's (a copy of its rows); only
    // NEW's eager-pinned one is 25% higher. Mixed into one column, the eager-sync entry
    // would carry the pinned arm's calls.
    let with_pinned = |factor: f64| {
        move |rows: &mut Vec<Row>| {
            let pinned: Vec<Row> = rows
                .iter()
                .filter(|r| of(r, "eager-sync", "read_cost_us"))
                .map(|r| {
                    let mut p = r.clone();
                    p.arm = "eager-pinned".into();
                    scale(&mut p, factor);
                    p
                })
                .collect();
            rows.extend(pinned);
        }
    };
    let base = edited(AA1, with_pinned(1.0));
    let new = edited(AA1, with_pinned(1.25));
    let outcome = compare(&[path(base.path()), path(new.path())]).unwrap();
    let md = &outcome.markdown;
    let head = md
        .lines()
        .find(|l| l.starts_with("| kind | family | layout |"))
        .unwrap_or_else(|| panic!("{md}"));
    let columns: Vec<&str> = head.split('|').map(str::trim).collect();
    let sync = columns
        .iter()
        .position(|c| *c == "read cost (eager-sync − eager-device)")
        .unwrap_or_else(|| panic!("{head}"));
    let pinned = columns
        .iter()
        .position(|c| *c == "read cost (eager-pinned − eager-device)")
        .unwrap_or_else(|| panic!("{head}"));
    assert!(sync < pinned, "arm order: {head}");
    let table: Vec<Vec<&str>> = md
        .lines()
        .skip_while(|l| *l != head)
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    let eager_rows: Vec<&Vec<&str>> = table.iter().filter(|r| r[pinned] != "—").collect();
    assert!(!eager_rows.is_empty(), "{md}");
    for row in eager_rows {
        assert!(row[pinned].contains("**slower**"), "{row:?}");
        assert!(!row[sync].contains("slower"), "{row:?}");
    }
}

#[test]
fn a_floor_only_base_holds_is_listed_and_never_fails_the_gate() {
    // NEW from a build that did not time the d2h-int-busy floor: the cells all match, so
    // the gate passes, and the floor is named as BASE's alone.
    let new = edited(AA1, |rows| {
        rows.retain(|r| !(r.kind == "floor" && r.arm == "d2h-int-busy"))
    });
    let outcome = compare(&[path(&fixture(AA1)), path(new.path())]).unwrap();
    let md = &outcome.markdown;
    assert_eq!(outcome.exit_code(), 0, "{md}");
    assert!(md.contains("0 missing (only in BASE)"), "{md}");
    let listed = md
        .find("### Floors only in BASE (not a finding)")
        .unwrap_or_else(|| panic!("{md}"));
    assert!(md[listed..].contains("d2h-int-busy"), "{md}");
    assert!(!md.contains("### Missing and broken"), "{md}");
    // A cell's row NEW lacks still fails.
    let fewer = edited(AA1, |rows| {
        rows.retain(|r| !(r.kind == "floor" && r.arm == "d2h-int-busy"));
        let at = rows.iter().position(|r| of(r, "graph", "step_us")).unwrap();
        rows.remove(at);
    });
    let outcome = compare(&[path(&fixture(AA1)), path(fewer.path())]).unwrap();
    assert_eq!(outcome.exit_code(), 1, "{}", outcome.markdown);
    assert!(outcome.markdown.contains("1 missing (only in BASE)"));
}

// ---------------------------------------------------------------------------------------------
// A real A/A pair of default sweeps of build 6278e0b, back to back on one H200, each its own
// process tree (results/2026-12-02-h200-compare-aa/): every row as wide as the host made it.

const S8_AA1: &str = "h200_aa_s8/aa1";
const S8_AA2: &str = "h200_aa_s8/aa2";

fn gpu_paced_row(r: &serde_json::Value) -> bool {
    let (arm, metric) = (r["arm"].as_str().unwrap(), r["metric"].as_str().unwrap());
    r["kind"] == "prep" && !metaprep::results::pacing::host_paced(arm, metric)
}

#[test]
fn a_real_aa_pair_calls_no_gpu_paced_row_and_passes_the_gpu_paced_gate() {
    let (a, b) = (fixture(S8_AA1), fixture(S8_AA2));
    let (json, all) = json_of(&[path(&a), path(&b), "--gate", "all"]);
    // The host's state moved between the runs: host-paced rows are called, and `--gate all`
    // fails on them.
    assert_eq!(all.exit_code(), 1);
    assert!(all.slower > 0);
    assert_eq!(json["gate"], "all");
    let rows = json["rows"].as_array().unwrap();
    let gpu_paced: Vec<_> = rows.iter().filter(|r| gpu_paced_row(r)).collect();
    assert!(gpu_paced.len() > 700, "{}", gpu_paced.len());
    let called: Vec<_> = (gpu_paced.iter())
        .filter(|r| ["slower", "faster"].contains(&r["verdict"].as_str().unwrap()))
        .collect();
    assert!(called.is_empty(), "{called:?}");
    // The default gate is the GPU-paced one.
    let (json, gated) = json_of(&[path(&a), path(&b)]);
    assert_eq!(gated.exit_code(), 0, "{}", gated.markdown);
    assert_eq!(json["gate"], "gpu-paced");
    let line = gated
        .markdown
        .lines()
        .find(|l| l.contains("→ exit 0"))
        .unwrap();
    assert!(
        line.contains(&format!(
            "`--gate gpu-paced`: {} slower host-paced rows",
            all.slower
        )),
        "{line}"
    );
    assert!(gated.markdown.chars().count() < 60_000);
}

#[test]
fn the_gpu_paced_gate_fails_a_ten_percent_slower_graph_step_and_a_missing_arm() {
    // A graph step 10% slower: its floor multiple (over the empty graphs, which did not
    // move) and its ratio over eager-sync rise with it.
    let slower = edited(S8_AA2, |rows| {
        for r in rows.iter_mut().filter(|r| {
            ["step_us", "floor_multiple", "step_ratio_vs_eager_sync"]
                .iter()
                .any(|m| of(r, "graph", m))
        }) {
            scale(r, 1.1);
        }
    });
    let base = fixture(S8_AA1);
    let (json, outcome) = json_of(&[path(&base), path(slower.path()), "--gate", "gpu-paced"]);
    assert_eq!(outcome.exit_code(), 1);
    let slower_of = |metric| {
        let verdicts = verdicts_of(&json, "graph", metric);
        let n = (verdicts.iter().find(|(v, _)| v == "slower")).map_or(0, |(_, n)| *n);
        (n, verdicts)
    };
    let (steps, verdicts) = slower_of("step_us");
    assert!(steps >= 46, "at least 95% of 48 cells: {verdicts:?}");
    let (multiples, verdicts) = slower_of("floor_multiple");
    assert!(multiples >= 46, "{verdicts:?}");
    // The ratio over eager-sync is host-paced: called (with the step), but not gated.
    let (ratios, verdicts) = slower_of("step_ratio_vs_eager_sync");
    assert!(ratios >= 24, "{verdicts:?}");
    assert_eq!(
        outcome.slower,
        steps + multiples,
        "only the GPU-paced planted rows fail it"
    );
    assert_eq!(json["gated_slower"], outcome.slower);
    let rows = json["rows"].as_array().unwrap();
    let failing = rows.iter().filter(|r| r["fails"] == true).count();
    assert_eq!(failing, outcome.slower);
    assert!(rows
        .iter()
        .filter(|r| r["fails"] == true)
        .all(|r| r["arm"] == "graph" && r["verdict"] == "slower"));
    // The report lists every row that fails it, first; the details mark what does not.
    let md = &outcome.markdown;
    assert_eq!(md.matches("| **slower** |").count(), outcome.slower, "{md}");
    let last_failing = md.rfind("| **slower** |").unwrap();
    assert!(md
        .find("slower (not gated)")
        .is_none_or(|first| last_failing < first));
    let (all, _) = details(&[path(&base), path(slower.path()), "--gate", "gpu-paced"]);
    assert!(all.contains("| slower (not gated) |"), "{all}");
    // Missing rows fail whatever the gate.
    let without = edited(S8_AA2, |rows| rows.retain(|r| r.arm != "eager-sync"));
    let outcome = compare(&[path(&base), path(without.path()), "--gate", "gpu-paced"]).unwrap();
    assert_eq!((outcome.exit_code(), outcome.slower), (1, 0));
}

// ---------------------------------------------------------------------------------------------
// A real A/A pair of default sweeps, back to back on one H200, each its own process tree
// (results/2026-12-02-h200-gpu-floor-twin/): the floors and the graph arms' rows. Its CSVs hold
// the rows of a time over a reference measured in the same round that sweeps wrote then
// (`step_us_per_empty_graph_2`): reading skips them.

const S10_AA1: &str = "h200_aa_s10/aa1";
const S10_AA2: &str = "h200_aa_s10/aa2";

/// The fixture's GPU-paced rows: every one of the graph arms' but the host issue, the ratio
/// over eager-sync, fused's floor multiple and the bytes (no time).
fn gpu_paced_rows(json: &serde_json::Value) -> Vec<&serde_json::Value> {
    let rows = json["rows"].as_array().unwrap();
    (rows.iter())
        .filter(|r| gpu_paced_row(r) && r["metric"] != "bytes")
        .collect()
}

#[test]
fn a_real_aa_pair_calls_no_gpu_paced_row_and_each_verdict_is_its_change() {
    let (json, outcome) = json_of(&[path(&fixture(S10_AA1)), path(&fixture(S10_AA2))]);
    assert_eq!(outcome.exit_code(), 0, "{}", outcome.markdown);
    let gpu_paced = gpu_paced_rows(&json);
    assert_eq!(
        gpu_paced.len(),
        672,
        "14 GPU-paced rows of a group × 48 groups"
    );
    let count = |verdict: &str| {
        (gpu_paced.iter())
            .filter(|r| r["verdict"] == verdict)
            .count()
    };
    assert_eq!(count("uncertain"), 212);
    assert_eq!(count("slower") + count("faster"), 0);
    assert!(gpu_paced.iter().all(|r| r["verdict"] == r["called"]));
    // Nothing is missing: the skipped rows are no rows of either side.
    assert_eq!(json["missing"].as_array().unwrap().len(), 0);
    let rows = json["rows"].as_array().unwrap();
    assert!(!rows
        .iter()
        .any(|r| r["metric"].as_str().unwrap().contains("_per_")));
}

#[test]
fn a_run_with_the_rows_older_sweeps_wrote_lacks_nothing_against_one_without() {
    // NEW written again without them (as a sweep writes it now), BASE as committed.
    let new = edited(S10_AA2, |_| {});
    let written = std::fs::read_to_string(new.path().join("metaprep.csv")).unwrap();
    assert!(!written.contains("_per_empty_graph_2"));
    let (json, outcome) = json_of(&[path(&fixture(S10_AA1)), path(new.path())]);
    assert_eq!(outcome.exit_code(), 0, "{}", outcome.markdown);
    assert_eq!(json["missing"].as_array().unwrap().len(), 0);
    assert_eq!(json["only_in_new"].as_array().unwrap().len(), 0);
}

#[test]
fn a_regression_of_the_graph_arms_steps_is_called() {
    let graph_arm = |r: &Row| ["graph", "graph-upload", "fused"].contains(&r.arm.as_str());
    let planted = |factor: f64| {
        edited(S10_AA2, |rows| {
            for r in rows.iter_mut().filter(|r| r.kind == "prep" && graph_arm(r)) {
                if r.metric == "step_us" {
                    scale(r, factor);
                }
            }
        })
    };
    let base = fixture(S10_AA1);
    for (factor, fewest_slower) in [(1.03, 60), (1.05, 137), (1.20, 144)] {
        let new = planted(factor);
        let (json, outcome) = json_of(&[path(&base), path(new.path()), "--gate", "gpu-paced"]);
        assert_eq!(outcome.exit_code(), 1, "×{factor}");
        let steps: Vec<_> = (json["rows"].as_array().unwrap().iter())
            .filter(|r| r["metric"] == "step_us")
            .collect();
        assert_eq!(steps.len(), 144);
        let slower = steps.iter().filter(|r| r["verdict"] == "slower").count();
        let same = steps.iter().filter(|r| r["verdict"] == "same").count();
        assert!(slower >= fewest_slower, "×{factor}: {slower} slower");
        assert_eq!(same, 0, "×{factor}");
    }
}
