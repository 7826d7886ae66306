//! Renders every chart from a small synthetic run and checks the files themselves: PNGs
//! decode to the stated size and are not blank, SVGs carry their text, bad input is an
//! error or a skip, never a panic.

use metaprep::report::charts::{
    itl_chart, parse_traces, render_all, speedup_chart, telemetry_chart, timeline_chart, ChartSet,
    Rendered, Trace, CHARTS, PANEL_CHART_SIZE, WIDE_CHART_SIZE,
};
use metaprep::report::{ReportTarget, Written};
use metaprep::results::csv::{Row, KIND_FLOOR, KIND_PREP, KIND_STEP};
use metaprep::results::env::EnvRecord;
use metaprep::results::run_dir::RunDir;
use metaprep::results::telemetry::TelemetrySample;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

const ARMS: [&str; 4] = ["eager-sync", "eager-device", "graph", "fused"];
const BATCHES: [u32; 6] = [1, 2, 4, 8, 16, 32];

#[allow(clippy::too_many_arguments)]
fn row(
    kind: &str,
    family: &str,
    arm: &str,
    bs: u32,
    block: u32,
    layout: &str,
    metric: &str,
    median: f64,
) -> Row {
    Row {
        kind: kind.into(),
        family: family.into(),
        arm: arm.into(),
        batch_size: bs,
        block_size: block,
        layout: layout.into(),
        emulated: layout == "tp8",
        metric: metric.into(),
        unit: match metric {
            "throughput_tok_s" => "tok/s",
            "gb_s" => "GB/s",
            _ => "us",
        }
        .into(),
        median,
        p10: median * 0.92,
        p90: median * 1.12,
        ci_lo: median * 0.98,
        ci_hi: median * 1.02,
        samples: 500,
        rounds: 0,
        stop_reason: "ci".into(),
        throttled: false,
        clock_event_reasons: "0x0000000000000000".into(),
        sm_clock_mhz: Some(1980.0),
        mem_clock_mhz: Some(3201.0),
        power_w: Some(420.0),
        temp_c: Some(48.0),
        gpu_util_pct: Some(97.0),
        gpm_sm_util_pct: None,
        gpm_dram_bw_util_pct: None,
        gpm_nvlink_rx_mib_s: None,
        gpm_nvlink_tx_mib_s: None,
        gpm_cell_share_pct: None,
        host_scale: None,
    }
}

/// Extra host cost per step of each arm, in µs: the sync read costs most.
fn arm_overhead(arm: &str) -> f64 {
    match arm {
        "eager-sync" => 18.0,
        "eager-device" => 6.0,
        "graph" => 2.0,
        _ => 1.0,
    }
}

fn fixture_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for layout in ["tp1", "tp2", "tp8"] {
        let tp: f64 = layout[2..].parse().unwrap();
        for arm in ["eager-sync", "graph", "fused"] {
            for bs in BATCHES {
                let step_us = 40.0 / tp + 1.5 * f64::from(bs) + arm_overhead(arm);
                let itl = step_us / 3.5;
                let family = "dspark+dsa_target_verify";
                rows.push(row(KIND_STEP, family, arm, bs, 5, layout, "itl_us", itl));
                rows.push(row(
                    KIND_STEP, family, arm, bs, 5, layout, "step_us", step_us,
                ));
                let throughput = 1e6 * f64::from(bs) / itl;
                let metric = "throughput_tok_s";
                rows.push(row(
                    KIND_STEP, family, arm, bs, 5, layout, metric, throughput,
                ));
            }
        }
    }
    // A what-if over the host scale: eager-sync's host overhead grows with it.
    for scale in [0.5, 2.0, 4.0] {
        let family = metaprep::axes::Drafter::Dspark.step_family();
        for layout in ["tp1", "tp8"] {
            for arm in ["eager-sync", "graph"] {
                for bs in [1, 8] {
                    let host = if arm == "eager-sync" {
                        30.0 * scale
                    } else {
                        2.0
                    };
                    let step_us = 40.0 + 1.5 * f64::from(bs) + host;
                    let throughput = 3.5e6 * f64::from(bs) / step_us;
                    let metric = "throughput_tok_s";
                    rows.push(Row {
                        host_scale: Some(scale),
                        ..row(KIND_STEP, family, arm, bs, 5, layout, metric, throughput)
                    });
                }
            }
        }
    }
    for family in ["dspark_draft_block", "dsa_decode"] {
        for block in [3, 5, 8] {
            for arm in ARMS {
                for bs in BATCHES {
                    let us = 3.0 + 0.05 * f64::from(bs * block) + 4.0 * arm_overhead(arm);
                    rows.push(row(KIND_PREP, family, arm, bs, block, "tp1", "step_us", us));
                    // 40 kB a request and token over the device time (a part of the step).
                    let gb_s = 40e3 * f64::from(bs * block) / (us / 2.0) / 1e3;
                    rows.push(row(KIND_PREP, family, arm, bs, block, "tp1", "gb_s", gb_s));
                }
            }
        }
    }
    // The read paths: each reading arm's read cost against eager-device (the sync read
    // blocking longest), and in the steps each arm's paired ratio to eager-sync.
    for family in ["dspark_draft_block", "dsa_decode"] {
        for block in [3, 5, 8] {
            for (arm, us) in [
                ("eager-sync", 18.0),
                ("eager-pinned", 15.0),
                ("eager-mapped", 7.0),
            ] {
                for bs in BATCHES {
                    let cost = us + 0.1 * f64::from(bs);
                    let metric = "read_cost_us";
                    rows.push(row(KIND_PREP, family, arm, bs, block, "tp1", metric, cost));
                }
            }
        }
    }
    for layout in ["tp1", "tp8"] {
        for (arm, ratio) in [
            ("graph", 0.8),
            ("eager-pinned", 0.97),
            ("eager-mapped", 0.9),
        ] {
            for bs in BATCHES {
                let family = "dspark+dsa_target_verify";
                let metric = "step_ratio_vs_eager_sync";
                let mut r = row(KIND_STEP, family, arm, bs, 5, layout, metric, ratio);
                (r.unit, r.ci_lo, r.ci_hi) = ("x".into(), ratio - 0.005, ratio + 0.005);
                rows.push(r);
            }
        }
    }
    // One cell whose speedup is exactly 2, to find in the heatmap's annotations.
    rows.retain(|r| !(r.kind == KIND_PREP && r.batch_size == 1 && r.block_size == 3));
    for (arm, us) in [("eager-sync", 80.0), ("graph", 40.0)] {
        rows.push(row(
            KIND_PREP,
            "dsa_decode",
            arm,
            1,
            3,
            "tp1",
            "step_us",
            us,
        ));
    }
    for (item, us) in [
        ("empty-kernel", 2.2),
        ("empty-graph", 2.9),
        ("d2h-int", 11.5),
        ("d2h-int-busy", 20.5),
    ] {
        rows.push(row(KIND_FLOOR, "floor", item, 1, 0, "tp1", "step_us", us));
    }
    let copy = "d2d-copy";
    rows.push(row(KIND_FLOOR, "floor", copy, 1, 0, "tp1", "gb_s", 4100.0));
    rows
}

fn fixture_env() -> EnvRecord {
    EnvRecord {
        metaprep_version: "0.1.0".into(),
        git_revision: "d9d035d".into(),
        date: "2026-11-29T10:00:00Z".into(),
        gpu_name: "NVIDIA H200".into(),
        gpu_count: 1,
        driver_version: "580.159.03".into(),
        cuda_driver_version: "13.0".into(),
        sm_clock_max_mhz: Some(1980),
        power_limit_w: Some(700.0),
        ..Default::default()
    }
}

fn fixture_telemetry() -> Vec<TelemetrySample> {
    (0..120)
        .map(|i| {
            let t = f64::from(i) * 0.25;
            let busy = (10..100).contains(&i);
            TelemetrySample {
                t_s: t,
                cell: String::new(),
                sm_clock_mhz: if busy {
                    1980.0 - f64::from(i % 7) * 15.0
                } else {
                    345.0
                },
                mem_clock_mhz: 3201.0,
                power_w: if busy {
                    420.0 + f64::from(i % 11) * 8.0
                } else {
                    75.0
                },
                temp_c: 45.0,
                gpu_util_pct: if busy { 97.0 } else { 0.0 },
                clock_event_reasons: match i {
                    60..=63 => "0x0000000000000004".into(),
                    _ if busy => "0x0000000000000000".into(),
                    _ => "0x0000000000000001".into(),
                },
            }
        })
        .collect()
}

/// Three decode steps: host prep then GPU draft, verify and accept, with the host read in
/// the eager step leaving the GPU idle.
fn fixture_trace() -> String {
    let mut events = vec![
        r#"{"ph":"M","name":"process_name","pid":1,"args":{"name":"host"}}"#.to_string(),
        r#"{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"scheduler"}}"#.into(),
        r#"{"ph":"M","name":"thread_name","pid":2,"tid":7,"args":{"name":"stream 7"}}"#.into(),
    ];
    let mut t = 1_000.0;
    for _ in 0..3 {
        let spans = [
            (1, 1, "schedule", t, 6.0),
            (1, 1, "prep (sync read)", t + 6.0, 22.0),
            (2, 7, "draft fwd", t + 30.0, 35.0),
            (2, 7, "verify fwd", t + 70.0, 60.0),
            (2, 7, "accept", t + 131.0, 4.0),
        ];
        for (pid, tid, name, ts, dur) in spans {
            events.push(format!(
                r#"{{"ph":"X","name":"{name}","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur}}}"#
            ));
        }
        t += 140.0;
    }
    format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))
}

/// A trace of two real ranks as `steps --ranks real` merges them (rank r's GPU is process
/// 2r+2): rank 1's verify forward waits 30 µs for rank 0 in every step.
fn fixture_rank_trace() -> String {
    let mut events = Vec::new();
    for step in 0..4 {
        let t = 1_000.0 + 200.0 * step as f64;
        for (pid, verify) in [(2, 60.0), (4, 90.0)] {
            for (name, ts, dur) in [
                ("draft forward", t, 30.0),
                ("verify forward", t + 40.0, verify),
            ] {
                events.push(format!(
                    r#"{{"ph":"X","name":"{name}","pid":{pid},"tid":0,"ts":{ts},"dur":{dur},"args":{{"step":{step}}}}}"#
                ));
            }
        }
    }
    format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))
}

/// Decodes a PNG and returns its size and the number of distinct colours in it.
fn png_facts(path: &Path) -> ((u32, u32), usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let colours: HashSet<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    ((info.width, info.height), colours.len())
}

fn svg_text(set: &ChartSet, name: &str) -> String {
    let path = set
        .files
        .iter()
        .find(|p| p.file_name().unwrap() == format!("{name}.svg").as_str())
        .unwrap_or_else(|| panic!("{name}.svg not written: {set:?}"));
    std::fs::read_to_string(path).unwrap()
}

fn render_fixture(dir: &Path) -> ChartSet {
    render_all(
        dir,
        &fixture_rows(),
        &fixture_env(),
        &fixture_telemetry(),
        &[
            ("trace.json", &fixture_trace()),
            ("trace-ranks.json", &fixture_rank_trace()),
        ],
    )
    .unwrap()
}

#[test]
fn every_chart_is_written_as_a_real_png_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let set = render_fixture(dir.path());
    assert!(set.skipped.is_empty(), "{:?}", set.skipped);
    let names = [
        ("itl", PANEL_CHART_SIZE),
        ("throughput", PANEL_CHART_SIZE),
        ("throughput_change", PANEL_CHART_SIZE),
        ("itl_change", PANEL_CHART_SIZE),
        ("host_scale", PANEL_CHART_SIZE),
        ("speedup_prep", PANEL_CHART_SIZE),
        ("speedup_step", PANEL_CHART_SIZE),
        ("prep_floor", PANEL_CHART_SIZE),
        ("bandwidth", PANEL_CHART_SIZE),
        ("read_cost", PANEL_CHART_SIZE),
        ("read_recovery", PANEL_CHART_SIZE),
        ("telemetry", WIDE_CHART_SIZE),
        // Two traces, two stacked panels of 300 px under 180 px of title and legend.
        ("timeline", (WIDE_CHART_SIZE.0, 180 + 2 * 300)),
        ("stragglers", WIDE_CHART_SIZE),
    ];
    assert_eq!(set.files.len(), 2 * names.len());
    for (name, size) in names {
        let png = dir.path().join("charts").join(format!("{name}.png"));
        assert!(set.files.contains(&png), "{name}.png missing from {set:?}");
        let (dims, colours) = png_facts(&png);
        assert_eq!(dims, size, "{name}.png");
        // Lines, text antialiasing and fills give hundreds of colours; a blank or
        // single-colour canvas gives one or two.
        assert!(colours > 50, "{name}.png has only {colours} colours");
        let svg = svg_text(&set, name);
        assert!(svg.starts_with("<svg"), "{name}.svg");
        for part in ["NVIDIA H200", "580.159.03", "2026-11-29", "metaprep 0.1.0"] {
            assert!(svg.contains(part), "{name}.svg lacks the footer's {part}");
        }
    }
    // Only the finished files: no temporary file is left beside them.
    let mut listed: Vec<PathBuf> = std::fs::read_dir(dir.path().join("charts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    listed.sort();
    let mut written = set.files.clone();
    written.sort();
    assert_eq!(listed, written);
}

#[test]
fn svgs_hold_series_names_axis_labels_and_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let set = render_fixture(dir.path());
    let expect = [
        (
            "itl",
            vec![
                "eager-sync",
                "graph",
                "fused",
                "batch size",
                "ITL (µs per token)",
                "tp8 (emulated)",
                "band: its 95% interval",
            ],
        ),
        (
            "throughput",
            vec![
                "eager-sync",
                "graph",
                "fused",
                "output throughput (tok/s)",
                "tp2",
            ],
        ),
        (
            "prep_floor",
            vec![
                "eager-device",
                "empty-kernel",
                "empty-graph",
                "d2h-int",
                "prep time per step (µs",
                "dsa_decode · block 5",
            ],
        ),
        (
            "bandwidth",
            vec![
                "eager-device",
                "fused",
                "d2d-copy ceiling (100%)",
                "4.1k GB/s",
                "share of the d2d-copy ceiling (%)",
                "dspark_draft_block · block 5",
                "dsa_decode · block 5",
            ],
        ),
        (
            "speedup_prep",
            vec![
                "2.00×",
                "batch size",
                "block size",
                "tp1 · dsa_decode",
                "eager-sync",
            ],
        ),
        (
            "speedup_step",
            vec!["tp8 (emulated) · dspark+dsa_target_verify", "batch size"],
        ),
        (
            "telemetry",
            vec![
                "SM clock (MHz)",
                "power (W)",
                "time since start of run (s)",
                "power limit 700 W",
                "throttle reason other than idle",
            ],
        ),
        (
            "timeline",
            vec![
                "host: scheduler",
                "GPU: stream 7",
                "verify fwd",
                "time from the first span shown (µs)",
            ],
        ),
        (
            "throughput_change",
            vec!["eager-sync (0%)", "95% interval of the change"],
        ),
        (
            "host_scale",
            vec!["bs 1", "bs 8", "tp1", "tp8", "host cost scale", "4x"],
        ),
    ];
    for (name, parts) in expect {
        let svg = svg_text(&set, name);
        for part in parts {
            assert!(svg.contains(part), "{name}.svg lacks {part:?}");
        }
    }
    // Arms that exist only in prep rows stay out of the step charts' legends.
    assert!(!svg_text(&set, "itl").contains("eager-device"));
}

#[test]
fn a_malformed_trace_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broken = r#"{"traceEvents":[{"ph":"X","name":"prep","pid":1,"tid":1,"ts":0}]}"#;
    let err = render_all(
        dir.path(),
        &fixture_rows(),
        &fixture_env(),
        &[],
        &[("trace.json", broken)],
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("\"dur\""), "{err:#}");
    assert!(format!("{err:#}").contains("trace.json"), "{err:#}");
    assert!(!dir.path().join("charts").exists());

    let err = timeline_chart(dir.path(), "{\"traceEvents\": 3}", &fixture_env()).unwrap_err();
    assert!(format!("{err:#}").contains("traceEvents"), "{err:#}");
}

/// A run held in memory, as `report` reads one, with the fixture's telemetry and traces.
fn fixture_run(dir: &Path, rows: Vec<Row>) -> (RunDir, Vec<Trace>) {
    let traces = parse_traces(&[
        ("trace.json", &fixture_trace()),
        ("trace-ranks.json", &fixture_rank_trace()),
    ])
    .unwrap();
    let run = RunDir {
        path: dir.to_path_buf(),
        rows,
        env: fixture_env(),
        telemetry: fixture_telemetry(),
        traces: Vec::new(),
    };
    (run, traces)
}

/// `report`'s writing: the charts and the summary through a staging folder.
fn report(dir: &Path, rows: Vec<Row>, with_traces: bool) -> anyhow::Result<Written> {
    let (run, traces) = fixture_run(dir, rows);
    let traces = if with_traces { traces } else { Vec::new() };
    let run = RunDir {
        telemetry: if with_traces {
            run.telemetry
        } else {
            Vec::new()
        },
        ..run
    };
    ReportTarget::new(dir)?.write(&run, &traces)
}

/// Every file under `dir`, by path, with its bytes.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn a_chart_without_data_this_time_is_kept_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let written = report(dir.path(), fixture_rows(), true).unwrap();
    assert!(
        written.charts.skipped.is_empty(),
        "{:?}",
        written.charts.skipped
    );
    assert_eq!(written.charts.files.len(), 2 * CHARTS.len());
    let charts = dir.path().join("charts");
    assert!(charts.join("itl.png").exists() && charts.join("timeline.svg").exists());
    assert!(written
        .charts
        .files
        .iter()
        .all(|f| f.starts_with(&charts) && f.exists()));
    assert_eq!(written.summary, dir.path().join("summary.md"));
    let user_file = charts.join("notes.txt");
    std::fs::write(&user_file, "mine").unwrap();
    let before = std::fs::read(charts.join("telemetry.svg")).unwrap();
    let prep_only: Vec<Row> = fixture_rows()
        .into_iter()
        .filter(|r| r.kind != KIND_STEP)
        .collect();
    // No step rows, telemetry or trace this time: those charts are skipped, and the files an
    // earlier report drew from data it had stay as they were.
    let written = report(dir.path(), prep_only.clone(), false).unwrap();
    for name in ["itl", "throughput", "timeline", "telemetry"] {
        assert!(
            written.charts.skipped.iter().any(|(n, _)| n == name),
            "{name}"
        );
        for ext in ["png", "svg"] {
            assert!(
                charts.join(format!("{name}.{ext}")).exists(),
                "{name}.{ext} deleted"
            );
        }
    }
    assert_eq!(std::fs::read(charts.join("telemetry.svg")).unwrap(), before);
    assert!(written
        .charts
        .files
        .contains(&charts.join("prep_floor.png")));
    assert!(user_file.exists(), "a file of the user's in charts/ stays");
    // A run without the copy ceiling (a sweep from before it) draws no bandwidth chart; the
    // one drawn before stays.
    let no_copy: Vec<Row> = prep_only
        .into_iter()
        .filter(|r| r.arm != "d2d-copy")
        .collect();
    let written = report(dir.path(), no_copy, false).unwrap();
    assert!(written.charts.skipped.iter().any(|(n, _)| n == "bandwidth"));
    assert!(charts.join("bandwidth.svg").exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left.len(),
        3,
        "charts/, summary.md and tables.md, no staging left: {left:?}"
    );
}

/// A chart that fails to draw (two rows for one cell) fails the report after others were
/// drawn: the run keeps its old charts and summary, every file as it was.
#[test]
fn a_report_that_fails_midway_leaves_the_old_charts_and_summary_whole() {
    let dir = tempfile::tempdir().unwrap();
    report(dir.path(), fixture_rows(), true).unwrap();
    let before = snapshot(dir.path());
    let mut rows: Vec<Row> = fixture_rows()
        .into_iter()
        .filter(|r| r.kind != KIND_STEP)
        .collect();
    let twice = rows
        .iter()
        .find(|r| r.kind == KIND_PREP && r.metric == "step_us")
        .unwrap()
        .clone();
    rows.push(twice);
    let error = report(dir.path(), rows, false).err().expect("a cell twice");
    assert!(
        format!("{error:#}").contains("merge or drop duplicates"),
        "{error:#}"
    );
    assert_eq!(
        snapshot(dir.path()),
        before,
        "nothing changed, nothing left"
    );
}

#[test]
fn a_folder_where_report_writes_a_file_is_refused_before_drawing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("charts/itl.png")).unwrap();
    let error = ReportTarget::new(dir.path()).err().unwrap();
    assert!(
        format!("{error:#}").contains("charts/itl.png is a folder where report writes a file"),
        "{error:#}"
    );
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("charts"), "a file").unwrap();
    let error = ReportTarget::new(other.path()).err().unwrap();
    assert!(
        format!("{error:#}").contains("charts is not a folder"),
        "{error:#}"
    );
    assert_eq!(snapshot(other.path()).len(), 1, "nothing written");
}

/// The bandwidth chart from a small synthetic CSV, read back as `report` reads a run: one
/// panel per family, each arm's share of the copy ceiling against batch size.
#[test]
fn the_bandwidth_chart_reads_its_rows_from_a_csv() {
    use metaprep::results::csv::{read_rows, write_rows};
    let mut rows = vec![row(
        KIND_FLOOR, "floor", "d2d-copy", 1, 0, "tp1", "gb_s", 4000.0,
    )];
    for family in ["dsa_target_verify", "dsa_draft_extend_v2"] {
        for (arm, share) in [("graph", 0.4), ("fused", 0.8)] {
            for bs in [64, 256, 1024] {
                let gb_s = 4000.0 * share * f64::from(bs) / 1024.0;
                rows.push(row(KIND_PREP, family, arm, bs, 8, "tp1", "gb_s", gb_s));
                rows.push(row(KIND_PREP, family, arm, bs, 8, "tp1", "bytes", 4e7));
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metaprep.csv");
    write_rows(&path, &rows).unwrap();
    let rows = read_rows(&path).unwrap();
    let set = render_all(dir.path(), &rows, &fixture_env(), &[], &[]).unwrap();
    let svg = svg_text(&set, "bandwidth");
    for part in [
        "dsa_target_verify · block 8",
        "dsa_draft_extend_v2 · block 8",
        "graph",
        "fused",
        "4k GB/s",
        "1024",
    ] {
        assert!(svg.contains(part), "bandwidth.svg lacks {part:?}");
    }
    // The y axis is in percent of the ceiling: fused reaches 80% at bs 1024, so the axis
    // runs past it (to 110%, above the 100% line), never to the GB/s values themselves.
    assert!(svg.contains("\n100\n") && !svg.contains("\n2k\n"), "{svg}");
}

#[test]
fn the_read_path_charts_draw_each_path_against_the_floors_reads_and_graphs_gain() {
    let dir = tempfile::tempdir().unwrap();
    let set = render_fixture(dir.path());
    let cost = svg_text(&set, "read_cost");
    for text in [
        "eager-sync",
        "eager-pinned",
        "eager-mapped",
        "d2h-int 11.5",
        "d2h-int-busy 20.5",
    ] {
        assert!(cost.contains(text), "read_cost.svg lacks {text}");
    }
    // Steps: pinned wins back 3% of graph's 20% (15%), mapped 10% (50%), per layout.
    let recovery = svg_text(&set, "read_recovery");
    for text in [
        "eager-pinned",
        "eager-mapped",
        "eager-sync (0%)",
        "graph (100%)",
        "tp8",
    ] {
        assert!(recovery.contains(text), "read_recovery.svg lacks {text}");
    }
    assert!(
        !recovery.contains(">eager-device<"),
        "only the read paths get a share"
    );
}

#[test]
fn empty_input_skips_every_chart_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let set = render_all(dir.path(), &[], &EnvRecord::default(), &[], &[]).unwrap();
    assert!(set.files.is_empty());
    let names: Vec<&str> = set.skipped.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, CHARTS);
    assert!(set.skipped.iter().all(|(_, reason)| !reason.is_empty()));
    assert!(!dir.path().join("charts").exists());

    let no_spans =
        r#"{"traceEvents":[{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"x"}}]}"#;
    assert!(matches!(
        timeline_chart(dir.path(), no_spans, &EnvRecord::default()).unwrap(),
        Rendered::Skipped { .. }
    ));
    assert!(matches!(
        telemetry_chart(dir.path(), &[], &EnvRecord::default()).unwrap(),
        Rendered::Skipped { .. }
    ));
}

#[test]
fn charts_without_their_rows_are_skipped_not_drawn_empty() {
    let dir = tempfile::tempdir().unwrap();
    let prep_only: Vec<Row> = fixture_rows()
        .into_iter()
        .filter(|r| r.kind == KIND_PREP)
        .collect();
    let env = fixture_env();
    match itl_chart(dir.path(), &prep_only, &env).unwrap() {
        Rendered::Skipped { reason } => assert!(reason.contains("itl_us"), "{reason}"),
        other => panic!("expected a skip, got {other:?}"),
    }
    // Only graph rows: no eager-sync partner, so no speedup to show.
    let graph_only: Vec<Row> = prep_only.into_iter().filter(|r| r.arm == "graph").collect();
    assert!(matches!(
        speedup_chart(dir.path(), &graph_only, &env, KIND_PREP).unwrap(),
        Rendered::Skipped { .. }
    ));
    assert!(speedup_chart(dir.path(), &graph_only, &env, KIND_FLOOR).is_err());
}

#[test]
fn non_finite_values_render_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = fixture_rows();
    for r in rows.iter_mut().filter(|r| r.batch_size == 4) {
        r.median = f64::NAN;
    }
    let mut telemetry = fixture_telemetry();
    telemetry[30].power_w = f64::NAN;
    telemetry[31].sm_clock_mhz = f64::INFINITY;
    let set = render_all(dir.path(), &rows, &fixture_env(), &telemetry, &[]).unwrap();
    assert_eq!(set.files.len(), 24, "{set:?}");
    for png in set.files.iter().filter(|p| p.extension().unwrap() == "png") {
        assert!(png_facts(png).1 > 50, "{}", png.display());
    }
}
