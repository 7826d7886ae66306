//! The summary of the fixture run: its tables must show the fixture's numbers.

use metaprep::report::summary::{render_compact, render_summary, write_summary};
use metaprep::results::csv::Row;
use metaprep::results::run_dir::RunDir;
use std::path::Path;

fn fixture() -> RunDir {
    RunDir::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run_small")).unwrap()
}

/// The text of the section under `heading`, up to the next `### `.
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let start = markdown
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in\n{markdown}"));
    let rest = &markdown[start + heading.len()..];
    &rest[..rest.find("\n### ").unwrap_or(rest.len())]
}

#[test]
fn the_first_line_is_the_answer() {
    let run = fixture();
    let md = render_summary(&run.rows, &run.env);
    // step,…,eager-sync/graph,1,3,tp1: ITL and throughput of graph against eager-sync at the
    // smallest batch and the middle of blocks {3, 5} (the lower one), intervals by MOVER.
    assert_eq!(
        md.lines().next().unwrap(),
        "**graph replay against eager-sync** at tp1 bs 1 block 3: ITL -4.1% [-4.9, -3.2], \
         throughput +4.2% [+3.3, +5.2]"
    );
    let headlines: Vec<&str> = md
        .lines()
        .take_while(|l| !l.starts_with("**Environment"))
        .collect();
    assert!(
        headlines.contains(
            &"**graph replay against eager-sync** at tp8 (emulated) bs 1 block 3: ITL -25.0% \
              [-25.7, -24.3], throughput +33.3% [+32.1, +34.5]"
        ),
        "{md}"
    );
    // One per prep family and layout, with the host read beside it.
    assert_eq!(
        headlines.iter().filter(|l| l.contains(" prep at ")).count(),
        4,
        "{md}"
    );
}

#[test]
fn environment_line_names_the_setup() {
    let run = fixture();
    let md = render_summary(&run.rows, &run.env);
    assert!(md.contains(
        "**Environment:** 1× NVIDIA H200 (compute capability 9.0, 132 SMs) · driver 580.159.03 · \
         CUDA 13.0 · 2026-11-29T14:03:10Z · git `d9d035d` · metaprep 0.1.0"
    ), "{md}");
    assert!(md.contains(
        "**Command:** `metaprep sweep --tp tp1,tp8 --batch-sizes 1,8,64 --out results/run_small`"
    ));
}

#[test]
fn step_tables_show_the_fixture_numbers() {
    let run = fixture();
    let md = render_summary(&run.rows, &run.env);
    let tp8 = section(
        &md,
        "### Decode step — tp8 (emulated), dspark+dsa_target_verify",
    );
    // The caveat is said once, above the tables.
    assert_eq!(
        md.matches("⚠ emulated: tp8 ran one rank on 1 GPU").count(),
        1
    );
    // step,…,graph,8,5,tp8: throughput 61525.23 tok/s, ITL 130.03 µs (p90 140.43),
    // occupancy 0.9782, gap 9.9433 µs; against eager-sync 46,488 tok/s and 172 µs.
    let row = tp8
        .lines()
        .find(|l| l.starts_with("| 8 | 5 | graph |"))
        .unwrap();
    assert_eq!(
        row,
        "| 8 | 5 | graph | 61,525 | +32.3% [+31.1, +33.6] | 130 | 140 | -24.4% [-25.1, -23.7] | 97.8% | 9.94 |"
    );
    assert!(
        tp8.contains("| 8 | 5 | eager-sync | 46,488 | baseline | 172 |"),
        "{tp8}"
    );

    let tp1 = section(&md, "### Decode step — tp1, dspark+dsa_target_verify\n");
    assert!(!tp1.contains("emulated"));
    assert!(tp1.contains("| 64 | 5 | graph ⚠ throttled |"), "{tp1}");
}

#[test]
fn prep_tables_show_cost_floor_multiple_and_host_read() {
    let run = fixture();
    let md = render_summary(&run.rows, &run.env);
    let dspark = section(&md, "### Metadata prep — dspark_draft_block, tp1\n");
    assert!(
        dspark.contains(
            "eager arms over empty-kernel 4.50 µs; graph and graph-upload, fused over empty-graph"
        ),
        "{dspark}"
    );
    assert!(dspark.contains("| bs | block | eager-sync | eager-device | graph | host read (µs) |"));
    // eager-sync 62.1284 µs (13.8×), eager-device 45.5795, graph 26.4; host read
    // 62.1284 − 45.5795 = 16.55 with MOVER bounds from ci 61.8177–62.4856 and 45.3516–45.8416.
    assert!(
        dspark
            .contains("| 64 | 5 | 62.1 (13.8×) | 45.6 (10.1×) | 26.4 (5.9×) | 16.5 [16.1, 17.0] |"),
        "{dspark}"
    );
    let floor = section(&md, "### Floor");
    assert!(floor
        .contains("| empty-kernel | step_us | us | 4.50 | 4.37 | 4.77 | [4.48, 4.52] | 5000 |"));
}

#[test]
fn floor_multiples_are_computed_when_the_run_has_none() {
    let run = fixture();
    let rows: Vec<Row> = run
        .rows
        .iter()
        .filter(|r| r.metric != "floor_multiple")
        .cloned()
        .collect();
    let md = render_summary(&rows, &run.env);
    // 62.1284 / 4.50 = 13.8
    assert!(
        md.contains("| 64 | 5 | 62.1 (13.8×) | 45.6 (10.1×) |"),
        "{md}"
    );
}

#[test]
fn sections_come_in_a_fixed_order_whatever_the_row_order() {
    let run = fixture();
    let md = render_summary(&run.rows, &run.env);
    let mut reversed = run.rows.clone();
    reversed.reverse();
    assert_eq!(render_summary(&reversed, &run.env), md);
    let order = [
        "### Decode step — tp1",
        "### Decode step — tp8",
        "### Metadata prep — dsa_target_verify, tp1",
        "### Metadata prep — dsa_target_verify, tp8 (emulated)",
        "### Metadata prep — dspark_draft_block, tp1",
        "### Floor",
    ];
    let positions: Vec<usize> = order.iter().map(|h| md.find(h).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
}

#[test]
fn every_table_row_has_as_many_cells_as_its_header() {
    let run = fixture();
    let md = render_summary(&run.rows, &run.env);
    let mut columns = 0;
    for line in md.lines() {
        if !line.starts_with('|') {
            columns = 0;
            continue;
        }
        // An escaped `\\|` is text inside a cell, not a border.
        let cells = line.replace("\\|", "").matches('|').count();
        if columns == 0 {
            columns = cells;
        }
        assert_eq!(cells, columns, "ragged row: {line}");
    }
}

#[test]
fn write_summary_writes_the_middle_block_and_every_block_beside_it() {
    let run = fixture();
    let dir = tempfile::tempdir().unwrap();
    let [summary, tables] = write_summary(dir.path(), &run.rows, &run.env).unwrap();
    assert_eq!(summary, dir.path().join("summary.md"));
    assert_eq!(tables, dir.path().join("tables.md"));
    let (compact, whole) = (
        std::fs::read_to_string(summary).unwrap(),
        std::fs::read_to_string(tables).unwrap(),
    );
    assert_eq!(compact, render_compact(&run.rows, &run.env));
    assert_eq!(whole, render_summary(&run.rows, &run.env));
    // The same headline leads both; the summary points to the tables of every block.
    assert_eq!(compact.lines().next(), whole.lines().next());
    assert!(
        compact.len() < whole.len(),
        "{} against {}",
        compact.len(),
        whole.len()
    );
    // A sweep's fixture: its per-prep tables and read paths are in tables.md alone.
    assert!(compact.contains("Every block size's tables, each prep's cost over its floor"));
    assert!(!compact.contains("### Metadata prep") && whole.contains("### Metadata prep"));
}

#[test]
fn the_default_steps_and_sweep_summaries_fit_twelve_kilobytes() {
    // The H200's steps run as committed (3 blocks x 4 batches x 6 arms, more than the
    // default's 4) and its default sweep.
    for run in [
        "results/2026-12-01-h200-steps",
        "results/2026-12-01-h200-sweep",
    ] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(run);
        let run = metaprep::results::run_dir::RunDir::open(&dir).unwrap();
        let compact = render_compact(&run.rows, &run.env);
        assert!(compact.len() <= 12 * 1024, "{} bytes", compact.len());
    }
}

#[test]
fn fixture_run_has_every_part() {
    let run = fixture();
    assert_eq!(run.rows.len(), 437);
    assert_eq!(run.telemetry.len(), 60);
    let trace: serde_json::Value = serde_json::from_str(&run.traces[0].1).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "X" && e["pid"] == 1));
    assert!(events.iter().any(|e| e["ph"] == "X" && e["pid"] == 2));
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["name"] == "thread_name"));
}
