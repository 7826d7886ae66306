//! `metaprep compare` on the fixture runs: verdicts, exit codes, refusals, floors, bad input.

use clap::{CommandFactory, Parser};
use metaprep::report::compare::{run_compare, CompareArgs, CompareOutcome};
use metaprep::results::csv::{read_rows, write_rows, Row};
use metaprep::results::env::EnvRecord;
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
    assert!(outcome.markdown.contains("**0 slower · 0 faster · 432 same · 0 uncertain** (432 matched; 0 only in BASE, 0 only in NEW)"), "{}", outcome.markdown);
    assert!(outcome.markdown.contains("_No cell changed beyond ±2%._"));
    assert!(!outcome.markdown.contains("The machine moved"));
}

#[test]
fn the_regression_is_found_and_fails_the_gate() {
    let outcome = compare(&[
        path(&fixture("run_small")),
        path(&fixture("run_small_slower")),
    ])
    .unwrap();
    let md = &outcome.markdown;
    assert_eq!(outcome.exit_code(), 1);
    assert!(outcome.any_slower);
    // 12 dspark graph prep cells × (step_us, floor_multiple) + 2 tp8 bs=1 graph step cells
    // × 4 metrics are slower; one tp1 step cell improved in 3 metrics; one prep cell is noisy.
    // The 5 floor rows get no verdict.
    assert!(
        md.contains("**32 slower · 3 faster · 395 same · 2 uncertain**"),
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
            "| 20.3 | 23.4 | +15.0% | [+14.1, +15.9] | +14.8% [+13.7, +15.9] | **slower** |"
        ),
        "{prep}"
    );
    // Throughput went down: slower although the number is lower.
    let tokps = line(
        md,
        "| step | dspark+dsa_target_verify | tp8 (emulated) | 1 | 5 | graph |",
        "throughput_tok_s",
    );
    assert!(
        tokps.ends_with("| 7,941 | 7,233 | -8.9% | [-9.7, -8.1] | — | **slower** |"),
        "{tokps}"
    );
    // Throughput went up: faster.
    let better = line(
        md,
        "| step | dspark+dsa_target_verify | tp1 | 64 | 3 | eager-device |",
        "throughput_tok_s",
    );
    assert!(
        better.ends_with("| +5.2% | [+4.3, +6.2] | — | **faster** |"),
        "{better}"
    );
    let noisy = line(
        md,
        "| prep | dsa_target_verify | tp1 | 8 | 4 | eager-sync |",
        "step_us",
    );
    assert!(
        noisy.ends_with("| +2.5% | [-0.6, +6.1] | +2.4% [-0.7, +6.1] | uncertain |"),
        "{noisy}"
    );
    let same = line(
        md,
        "| prep | dsa_target_verify | tp1 | 1 | 2 | graph |",
        "step_us",
    );
    assert!(same.ends_with("| same |"), "{same}");
    // Driver and revision differ between the fixtures: allowed, and shown.
    assert!(md.contains("driver 580.159.03") && md.contains("driver 580.172.01"));
    assert!(
        md.contains("(shown, never refused): driver: `580.159.03` vs `580.172.01`; git revision: `d9d035d` vs `e4f5a6b`."),
        "{md}"
    );
    assert!(!md.contains("settings differ"));
}

#[test]
fn the_threshold_moves_the_verdicts() {
    let outcome = compare(&[
        path(&fixture("run_small")),
        path(&fixture("run_small_slower")),
        "--threshold",
        "20",
    ])
    .unwrap();
    assert_eq!(
        outcome.exit_code(),
        1,
        "the +438% host-bound gap stays slower"
    );
    assert!(
        outcome
            .markdown
            .contains("**2 slower · 0 faster · 430 same · 0 uncertain**"),
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
fn a_sweep_from_before_rounds_is_read_with_a_warning_and_capped_verdicts() {
    let old = before_rounds("run_small");
    assert!(read_rows(&old.path().join("metaprep.csv"))
        .unwrap()
        .iter()
        .all(|r| r.rounds == 0));
    // Against itself: its 288 prep rows cannot be called the same, its 144 step rows can.
    let outcome = compare(&[path(old.path()), path(old.path())]).unwrap();
    let md = &outcome.markdown;
    assert!(
        md.contains("**0 slower · 0 faster · 144 same · 288 uncertain** (432 matched"),
        "{md}"
    );
    let warning = md
        .lines()
        .find(|l| l.starts_with("> ⚠ BASE and NEW were measured without rounds"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        warning.contains("±35% (step_us, step_fwd_us) or ±75%"),
        "{warning}"
    );
    assert_eq!(outcome.exit_code(), 0);

    // Against the regressed run measured in rounds: the +15% graph prep is within the
    // run-to-run noise of the old side; the steps' regression still fails the gate.
    let outcome = compare(&[path(old.path()), path(&fixture("run_small_slower"))]).unwrap();
    let md = &outcome.markdown;
    assert!(md.contains("> ⚠ BASE was measured without rounds"), "{md}");
    let prep = line(
        md,
        "| prep | dspark_draft_block | tp1 | 1 | 3 | graph |",
        "step_us",
    );
    assert!(
        prep.ends_with("| +15.0% | [+14.1, +15.9] | +14.8% [+13.7, +15.9] | uncertain |"),
        "{prep}"
    );
    // The steps' 8 slower and 3 faster stand; all 288 prep rows are uncertain.
    assert!(
        md.contains("**8 slower · 3 faster · 133 same · 288 uncertain**"),
        "{md}"
    );
    assert_eq!(outcome.exit_code(), 1);
    // Two runs measured in rounds get no such warning.
    let fresh = compare(&[path(&fixture("run_small")), path(&fixture("run_small"))]).unwrap();
    assert!(!fresh.markdown.contains("without rounds"));
}

#[test]
fn two_arms_of_one_run() {
    let run = fixture("run_small");
    let outcome = compare(&[
        path(&run),
        path(&run),
        "--base-arm",
        "eager-sync",
        "--new-arm",
        "graph",
    ])
    .unwrap();
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
        md,
        "| step | dspark+dsa_target_verify | tp1 | 64 | 5 | eager-sync → graph |",
        "itl_us",
    );
    assert!(hot.ends_with("| same ⚠ NEW throttled |"), "{hot}");
    assert_eq!(outcome.exit_code(), 0, "{md}");
}

/// Rewrites the env.json of a run directory.
fn edit_env(dir: &Path, edit: impl FnOnce(&mut EnvRecord)) {
    let mut env = EnvRecord::read(dir).unwrap();
    edit(&mut env);
    env.write(dir).unwrap();
}

/// A copy of run_small_slower's step rows recorded as a steps run with other axes, seed and
/// host profile; its --tp lists run_small's layouts in another order, and it names another
/// --trace.
fn other_settings() -> tempfile::TempDir {
    let other = copy_of("run_small_slower");
    let csv = other.path().join("metaprep.csv");
    let steps: Vec<Row> = read_rows(&csv)
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == "step")
        .collect();
    write_rows(&csv, &steps).unwrap();
    edit_env(other.path(), |env| {
        env.command_line = "metaprep steps --tp tp8,tp1 --batch-sizes 1,8 --seed 7 \
                            --out results/elsewhere --trace t.json"
            .into();
        env.notes.push("host profile `pytorch` (op 7.9 us)".into());
    });
    other
}

/// The differences `other_settings` makes against run_small, BASE first.
const SETTING_DIFFERENCES: [&str; 4] = [
    "command: `sweep` vs `steps`",
    "--batch-sizes: `1,8,64` vs `1,8`",
    "--seed: not given (its default) vs `7`",
    "host profile: not recorded vs `` `pytorch` (op 7.9 us) ``",
];

#[test]
fn differing_settings_are_refused_with_exit_2_naming_each() {
    let other = other_settings();
    let base = fixture("run_small");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .args(["compare", path(&base), path(other.path())])
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
    // Layouts in another order, another --out and --trace, another driver and revision:
    // none of them is a setting that differs.
    for not_named in ["--tp", "--out", "--trace", "driver", "git"] {
        assert!(
            !stderr.contains(not_named),
            "{not_named} named in: {stderr}"
        );
    }
}

#[test]
fn allow_mismatch_compares_and_lists_the_differences_at_the_top() {
    let other = other_settings();
    let base = fixture("run_small");
    let outcome = compare(&[path(&base), path(other.path()), "--allow-mismatch"]).unwrap();
    let md = &outcome.markdown;
    let warning = md
        .find("> ⚠ settings differ (BASE vs NEW); compared because of --allow-mismatch:")
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        warning < md.find("**8 slower").unwrap_or_else(|| panic!("{md}")),
        "{md}"
    );
    for difference in SETTING_DIFFERENCES {
        let item = md
            .find(&format!("> - {difference}\n"))
            .unwrap_or_else(|| panic!("{difference} in {md}"));
        assert!(item < md.find("### Cells").unwrap(), "{md}");
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
    let outcome = compare(&[path(&base), path(slower_machine.path())]).unwrap();
    let md = &outcome.markdown;
    assert_eq!(outcome.exit_code(), 0, "{md}");
    assert!(
        md.contains("**0 slower · 0 faster · 432 same · 0 uncertain**"),
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
        !md.contains("| floor | floor |"),
        "no floor row among the cells: {md}"
    );
    // Every floor moved: the report says so above the cells, though nothing was called.
    assert!(
        md.contains("> **The machine moved between the runs**: ")
            && md.contains("empty-kernel +50.0% [+49.1, +50.9]")
            && md.contains(
                "the host got slower, and rows it paces move with it: 0 of the 216 \
                 host-paced rows"
            ),
        "{md}"
    );
    // The arms stood still while the floors rose by half: against their floor they fell by
    // a third.
    let eager = line(
        md,
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
    let outcome = compare(&[path(base.path()), path(new.path())]).unwrap();
    let md = &outcome.markdown;
    // Eager against the empty kernel: (60 / 10) / (50 / 5) − 1 = −40%; four ±1% intervals
    // make ±0.02 on the log scale: 0.6·e^∓0.02 − 1. A floor time moved, so the eager arm,
    // which the host paces, is `floor moved`, not slower.
    let eager = line(md, "| prep | dsa_target_verify | tp1 | 8 |", "step_us");
    assert!(eager.contains("| eager-sync |"), "{eager}");
    assert!(
        eager.ends_with(
            "| 50.0 | 60.0 | +20.0% | [+18.3, +21.7] | -40.0% [-41.2, -38.8] | floor moved |"
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
            "| 10.0 | 12.0 | +20.0% | [+18.3, +21.7] | +20.0% [+17.6, +22.4] | **slower** |"
        ),
        "{graph}"
    );
    assert!(
        md.contains("| empty-kernel | step_us (us) | 5.00 | 10.0 | +100.0% |"),
        "{md}"
    );
    assert!(
        md.contains("**1 slower · 0 faster · 0 same · 0 uncertain · 1 floor moved** (2 matched"),
        "{md}"
    );
    // The empty kernel moved, the empty graph did not; eager-sync's row is the one the host
    // paces.
    assert!(
        md.contains(
            "> **The machine moved between the runs**: 1 of 2 floor times beyond ±2% (empty-kernel \
             +100.0%"
        ) && md.contains("1 of the 1 host-paced rows (host")
            && md.contains("are `floor moved`, those called slower and not beyond their own floor"),
        "{md}"
    );
    assert_eq!(
        outcome.exit_code(),
        1,
        "the graph arm's step, which the GPU paces, still fails it"
    );
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
fn out_file_gets_the_same_markdown_and_replaces_only_its_own_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("compare.md");
    let run = fixture("run_small");
    let outcome = compare(&[path(&run), path(&run), "--out", path(&out)]).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), outcome.markdown);
    // Its own report is replaced; anything else is refused and left as it was.
    compare(&[path(&run), path(&run), "--out", path(&out)]).unwrap();
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "my notes").unwrap();
    let error = format!(
        "{:#}",
        compare(&[path(&run), path(&run), "--out", path(&notes)]).unwrap_err()
    );
    assert!(error.contains("not a report `compare` wrote"), "{error}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes");
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
        (copy.path().join("env.json"), "not a report `compare` wrote"),
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
        error.contains("BASE has no rows for arm `eager`; its arms are: d2h-int"),
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
}
