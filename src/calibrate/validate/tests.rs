//! validate's tests: the reference CSV, the estimators and the pass bars by hand.

use super::reference::COLUMNS;
use super::*;
use crate::axes::Arm;
use std::collections::BTreeMap;

const REF: &str = "forward_us,batch_size,block,arm,step_us,step_us_p10,step_us_p90,samples,rounds,host_speed_us\n\
    1000,1,5,eager-sync,2700,2600,2800,150,6,8.0\n\
    1000,1,5,graph,2080,2070,2090,150,6,7.6\n\
    1000,1,5,eager-device,2110,,,,,\n";

fn step(m: f64) -> ModelStep {
    ModelStep {
        median: m,
        ci_lo: m - 1.0,
        ci_hi: m + 1.0,
    }
}

#[test]
fn the_reference_reads_with_optional_columns_and_refuses_what_it_cannot_use() {
    let r = Reference::parse("r.csv", REF).unwrap();
    assert_eq!(r.cells.len(), 1);
    let (cell, rows) = &r.cells[0];
    assert_eq!(
        (cell.forward_us, cell.batch_size, cell.block),
        (1000.0, 1, 5)
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[&Arm::EagerDevice].host_speed_us, None);
    // The cell's host speed is the median of its arms' recorded ones.
    assert_eq!(cell_host_speed(rows), Some(7.8));
    let bad = |text: &str| format!("{:#}", Reference::parse("r.csv", text).unwrap_err());
    let head = "forward_us,batch_size,block,arm,step_us\n";
    assert!(bad(&format!("{head}1000,1,5,eager-sync,27")).contains("newline"));
    assert!(bad(&format!("{head}1000,1,5,eager-fast,2700\n")).contains("line 2: `arm`"));
    assert!(bad(&format!("{head}0,1,5,graph,2700\n")).contains("`forward_us`"));
    assert!(bad(&format!("{head}1000,1,5,graph,-1\n")).contains("`step_us`"));
    assert!(bad(&format!("{head}1000,1,5,graph,9\n1000,1,5,graph,9\n"))
        .contains("line 3: a second row"));
    assert!(bad(head).contains("no rows"));
    assert!(bad("forward_us,batch_size\n1,2\n").contains("line 2"));
}

#[test]
fn every_reference_column_reads_and_a_misspelt_one_is_refused_naming_its_match() {
    // Every column the reader knows, as scripts/metaprep_host.py writes them.
    let all = format!(
        "{}\n1000,1,5,graph,2080,2070,2090,150,6,7.6,7.4,7.9,7.5;7.7,2079;2081,1001,1980\n",
        COLUMNS.join(",")
    );
    let r = Reference::parse("r.csv", &all).unwrap();
    let row = &r.cells[0].1[&Arm::Graph];
    assert_eq!(
        (row.host_speed_p90, row.sm_clock_mhz),
        (Some(7.9), Some(1980.0))
    );
    assert_eq!(row.chunks, vec![(7.5, 2079.0), (7.7, 2081.0)]);
    let head = "forward_us,batch_size,block,arm,step_us";
    let bad = |text: &str| format!("{:#}", Reference::parse("r.csv", text).unwrap_err());
    for (column, known) in [
        ("host_speed", "host_speed_us"),
        ("step_us_p1O", "step_us_p10"),
        ("Samples", "samples"),
        ("sm_clock", "sm_clock_mhz"),
    ] {
        let e = bad(&format!("{head},{column}\n1000,1,5,graph,2080,8\n"));
        assert!(
            e.contains(&format!("line 1: column `{column}`")) && e.contains(&format!("`{known}`?")),
            "{e}"
        );
    }
    // A column of the engine's own, far from every reference column, is read past.
    let engine = format!("{head},tokens_per_s\n1000,1,5,graph,2080,512\n");
    assert_eq!(Reference::parse("r.csv", &engine).unwrap().cells.len(), 1);
}

#[test]
fn a_reference_error_names_the_line_the_row_is_on_and_impossible_values() {
    let head = "forward_us,batch_size,block,arm,step_us";
    let bad = |text: &str| format!("{:#}", Reference::parse("r.csv", text).unwrap_err());
    // Blank lines count, with either line end.
    let rows = "1000,1,5,graph,2080\n\n\n1000,1,5,graphs,2080\n";
    assert!(bad(&format!("{head}\n\n{rows}")).contains("line 6: `arm`"));
    let crlf = format!("{head}\n\n{rows}").replace('\n', "\r\n");
    assert!(bad(&crlf).contains("line 6: `arm`"), "{}", bad(&crlf));
    for (columns, values, needle) in [
        (
            "host_speed_us",
            "1e308",
            "`host_speed_us` 1e308 is not a measured",
        ),
        ("host_speed_us", "0", "`host_speed_us` 0 is not a measured"),
        (
            "host_speed_p10,host_speed_p90",
            "9,7",
            "`host_speed_p10` 9 is above",
        ),
        (
            "forward_dev_us",
            "-5",
            "`forward_dev_us` -5 is not a positive",
        ),
        (
            "sm_clock_mhz",
            "NaN",
            "`sm_clock_mhz` NaN is not a positive",
        ),
        ("samples", "-3", "`samples` -3 is not a count"),
        ("rounds", "2.5", "`rounds` 2.5 is not a count"),
    ] {
        let e = bad(&format!("{head},{columns}\n1000,1,5,graph,2080,{values}\n"));
        assert!(e.contains(&format!("line 2: {needle}")), "{columns}: {e}");
    }
}

#[test]
fn errors_and_the_pass_bars_by_hand() {
    let r = Reference::parse("r.csv", REF).unwrap();
    let (cell, rows) = &r.cells[0];
    let model = ModelCell {
        // eager-sync +5.56% (2850 vs 2700), graph −3.85% (2000 vs 2080), eager-device +10.9%.
        at_speed: BTreeMap::from([
            (Arm::EagerSync, step(2850.0)),
            (Arm::Graph, step(2000.0)),
            (Arm::EagerDevice, step(2340.0)),
        ]),
        raw: BTreeMap::from([
            (Arm::EagerSync, step(3300.0)),
            (Arm::Graph, step(2010.0)),
            (Arm::EagerDevice, step(2300.0)),
        ]),
        host_ratio: Some(0.9),
        ..ModelCell::default()
    };
    let bars = Bars {
        step_pct: 10.0,
        diff_pct: 15.0,
    };
    let lines = compare_cell(*cell, rows, &model, None, bars).unwrap();
    assert_eq!(lines.len(), 4);
    let by = |arm: &str| lines.iter().find(|l| l.arm == arm).unwrap();
    assert!((by("eager-sync").error_pct - 5.555_555).abs() < 1e-3);
    assert!(by("eager-sync").pass && by("graph").pass);
    assert!(!by("eager-device").pass, "+10.9% is outside ±10%");
    // Difference: reference 620, model 850: +37.1%, fails; raw 1290 (+108%).
    let d = by("eager-sync − graph");
    assert_eq!(d.quantity, Quantity::SyncMinusGraphUs);
    assert!((d.reference_us - 620.0).abs() < 1e-9 && (d.model_us - 850.0).abs() < 1e-9);
    assert!(!d.pass && (d.raw_error_pct - 108.06).abs() < 0.01, "{d:?}");
    assert_eq!(d.host_ratio, 0.9);
    // At exactly the bar it passes; a hair beyond it fails.
    let mut edge = model.clone();
    edge.at_speed.insert(Arm::EagerDevice, step(2110.0 * 1.1));
    let l = compare_cell(*cell, rows, &edge, None, bars).unwrap();
    assert!(l.iter().find(|l| l.arm == "eager-device").unwrap().pass);
    edge.at_speed
        .insert(Arm::EagerDevice, step(2110.0 * 1.1001));
    let l = compare_cell(*cell, rows, &edge, None, bars).unwrap();
    assert!(!l.iter().find(|l| l.arm == "eager-device").unwrap().pass);
    let md = markdown("r.csv", "p", &lines, bars, None);
    assert!(
        md.contains("**FAIL**") && md.contains("2 of 3 (cell, arm)"),
        "{md}"
    );
    assert!(csv_text(&lines).unwrap().lines().count() == 5);
    // Fitted: the note names the fit and its factors, and marks the fit cell's rows.
    let note = FitNote {
        file: "fit/reference.csv".into(),
        cell: *cell,
        factors: vec!["eager-device x1.300 (+0.10% there)".into()],
        unconverged: Vec::new(),
        post_wait: None,
    };
    let fitted = markdown("r.csv", "p", &lines, bars, Some(&note));
    assert!(
        fitted.contains("**fitted**") && fitted.contains("`fit/reference.csv`"),
        "{fitted}"
    );
    assert!(fitted.contains("eager-device x1.300") && fitted.contains("batch 1, block 5"));
    assert_eq!(fitted.matches("(fit cell) |").count(), 4, "{fitted}");
    let elsewhere = FitNote {
        cell: Cell {
            forward_us: 100.0,
            ..*cell
        },
        ..note
    };
    let other = markdown("r.csv", "p", &lines, bars, Some(&elsewhere));
    assert_eq!(other.matches("(fit cell)").count(), 0, "{other}");
    assert!(!md.contains("fit"));
    // An unconverged fit fails a validation whose cells all pass, and says why first.
    let passing: Vec<Line> = lines.iter().filter(|l| l.pass).cloned().collect();
    let converged = markdown("r.csv", "p", &passing, bars, Some(&elsewhere));
    assert!(converged.contains("**PASS**") && !converged.contains("did not converge"));
    let unconverged = FitNote {
        unconverged: vec!["graph-upload (+5.26% at best)".into()],
        ..elsewhere
    };
    let failed = markdown("r.csv", "p", &passing, bars, Some(&unconverged));
    assert!(failed.contains("**FAIL**"), "{failed}");
    assert!(
        failed.contains("**The fit did not converge** for graph-upload (+5.26% at best)"),
        "{failed}"
    );
}

#[test]
fn a_missing_model_arm_is_an_error_not_a_pass() {
    let r = Reference::parse("r.csv", REF).unwrap();
    let (cell, rows) = &r.cells[0];
    let model = ModelCell {
        at_speed: BTreeMap::from([(Arm::EagerSync, step(2700.0))]),
        raw: BTreeMap::from([(Arm::EagerSync, step(2700.0))]),
        host_ratio: None,
        ..ModelCell::default()
    };
    let bars = Bars {
        step_pct: 10.0,
        diff_pct: 15.0,
    };
    let e = compare_cell(*cell, rows, &model, None, bars)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no step_us for"), "{e}");
}

/// A cell of two arms whose host speed switched between 12 and 22 µs per op: eager-sync
/// host-bound (step = 1900 + 70·speed, ±8% from chunk to chunk), graph flat at 2110.
fn bimodal() -> String {
    let speeds = [12.1, 21.8, 12.3, 22.4, 21.9, 12.0, 11.8, 22.1, 21.7, 12.2];
    let jitter = [1.08, 0.94, 1.0, 1.05, 0.92, 0.97, 1.03, 1.0, 0.95, 1.06];
    let join = |v: Vec<f64>| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    let sync: Vec<f64> = speeds
        .iter()
        .zip(jitter)
        .map(|(s, j)| (1900.0 + 70.0 * s) * j)
        .collect();
    let graph: Vec<f64> = jitter
        .iter()
        .map(|j| 2110.0 * (1.0 + (j - 1.0) / 20.0))
        .collect();
    let s = join(speeds.to_vec());
    format!(
        "forward_us,batch_size,block,arm,step_us,host_speed_us,host_speed_p10,host_speed_p90,chunk_host_speed_us,chunk_step_us,forward_dev_us\n\
         1000,1,5,eager-sync,3000,17,12,22,{s},{},1040\n\
         1000,1,5,graph,2110,17,12,22,{s},{},1000.5\n",
        join(sync),
        join(graph)
    )
}

#[test]
fn chunks_parse_and_mismatched_or_bad_lists_are_refused() {
    let r = Reference::parse("r.csv", &bimodal()).unwrap();
    let rows = &r.cells[0].1;
    assert_eq!(rows[&Arm::EagerSync].chunks.len(), 10);
    assert_eq!(rows[&Arm::EagerSync].chunks[1].0, 21.8);
    let head = "forward_us,batch_size,block,arm,step_us,chunk_host_speed_us,chunk_step_us\n";
    let bad = |t: &str| format!("{:#}", Reference::parse("r.csv", t).unwrap_err());
    assert!(bad(&format!("{head}1000,1,5,graph,9,12;22,9\n")).contains("2 values"));
    assert!(bad(&format!("{head}1000,1,5,graph,9,12;x,9;9\n")).contains("`x`"));
    assert!(bad(&format!("{head}1000,1,5,graph,9,12;-1,9;9\n")).contains("positive"));
    // Old files (no chunk columns) still read, with no chunks.
    assert!(
        Reference::parse("r.csv", REF).unwrap().cells[0].1[&Arm::Graph]
            .chunks
            .is_empty()
    );
}

#[test]
fn the_model_runs_at_the_extreme_chunk_speeds_not_near_its_own() {
    let r = Reference::parse("r.csv", &bimodal()).unwrap();
    let rows = &r.cells[0].1;
    // Own speed 12: the slowest chunk (11.8) is within 3% of it, the fastest is not.
    assert_eq!(chunk_run_speeds(rows, Some(12.0)), vec![22.4]);
    // Own speed 16, between the levels: both extremes.
    assert_eq!(chunk_run_speeds(rows, Some(16.0)), vec![11.8, 22.4]);
    assert!(chunk_run_speeds(rows, None).is_empty());
    let plain = Reference::parse("r.csv", REF).unwrap();
    assert!(chunk_run_speeds(&plain.cells[0].1, Some(12.0)).is_empty());
    // Interpolation: linear between runs, flat outside them.
    let p = [(22.0, 3440.0), (12.0, 2740.0)];
    assert!((interpolate(&p, 17.0) - 3090.0).abs() < 1e-9);
    assert_eq!(interpolate(&p, 30.0), 3440.0);
    assert_eq!(interpolate(&p, 5.0), 2740.0);
    assert_eq!(interpolate(&[(12.0, 7.0)], 20.0), 7.0);
}

#[test]
fn a_right_model_passes_chunk_by_chunk_and_a_wrong_one_fails() {
    let r = Reference::parse("r.csv", &bimodal()).unwrap();
    let (cell, rows) = &r.cells[0];
    let bars = Bars {
        step_pct: 10.0,
        diff_pct: 15.0,
    };
    // The model is exactly the world's: sync 1900 + 70·speed, graph 2110, run at the
    // profile's own speed (12) and at the fastest chunk's (22.4).
    let at = |s: f64| {
        BTreeMap::from([
            (Arm::EagerSync, step(1900.0 + 70.0 * s)),
            (Arm::Graph, step(2110.0)),
        ])
    };
    let model = ModelCell {
        raw: at(12.0),
        by_speed: vec![(22.4, at(22.4))],
        ..ModelCell::default()
    };
    let lines = compare_cell(*cell, rows, &model, Some(12.0), bars).unwrap();
    assert!(lines.iter().all(|l| l.pass), "{lines:?}");
    let d = lines
        .iter()
        .find(|l| l.arm == "eager-sync − graph")
        .unwrap();
    assert_eq!(d.estimator, "chunk_mean");
    assert!(d.error_pct.abs() < 3.0, "{d:?}");
    let sync = lines.iter().find(|l| l.arm == "eager-sync").unwrap();
    assert!((sync.forward_stretch.unwrap() - 1.04).abs() < 1e-9);
    assert_eq!(
        (sync.host_speed_p10, sync.host_speed_p90),
        (Some(12.0), Some(22.0))
    );
    // A wrong model (its host costs 30% low) fails by chunk mean too.
    let low = |s: f64| {
        BTreeMap::from([
            (Arm::EagerSync, step(1900.0 + 0.7 * 70.0 * s)),
            (Arm::Graph, step(2110.0)),
        ])
    };
    let wrong = ModelCell {
        raw: low(12.0),
        by_speed: vec![(22.4, low(22.4))],
        ..ModelCell::default()
    };
    let lines = compare_cell(*cell, rows, &wrong, Some(12.0), bars).unwrap();
    assert!(
        !lines
            .iter()
            .find(|l| l.arm == "eager-sync − graph")
            .unwrap()
            .pass
    );
    let md = markdown("r.csv", "p", &lines, bars, None);
    assert!(md.contains("chunk mean") && md.contains("12.0–22.0") && md.contains("1.040"));
}

#[test]
fn a_difference_with_chunks_on_one_side_only_takes_medians_on_both() {
    // Graph's row without chunks: its chunk columns emptied.
    let text = bimodal();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let graph: Vec<&str> = lines[2].split(',').collect();
    lines[2] = [&graph[..8], &["", "", graph[10]]].concat().join(",");
    let r = Reference::parse("r.csv", &(lines.join("\n") + "\n")).unwrap();
    let (cell, rows) = &r.cells[0];
    assert!(rows[&Arm::Graph].chunks.is_empty() && !rows[&Arm::EagerSync].chunks.is_empty());
    let at = |s: f64| {
        BTreeMap::from([
            (Arm::EagerSync, step(1900.0 + 70.0 * s)),
            (Arm::Graph, step(2110.0)),
        ])
    };
    let model = ModelCell {
        at_speed: at(17.0),
        raw: at(12.0),
        by_speed: vec![(22.4, at(22.4))],
        ..ModelCell::default()
    };
    let bars = Bars {
        step_pct: 10.0,
        diff_pct: 15.0,
    };
    let out = compare_cell(*cell, rows, &model, Some(12.0), bars).unwrap();
    let d = out.iter().find(|l| l.arm == "eager-sync − graph").unwrap();
    assert_eq!(d.estimator, "median");
    // The rows' medians (3000 − 2110) against the model at the cell's speed.
    assert!((d.reference_us - 890.0).abs() < 1e-9, "{d:?}");
    assert!(
        (d.model_us - 70.0 * 17.0 - 1900.0 + 2110.0).abs() < 1e-9,
        "{d:?}"
    );
    // eager-sync's own line keeps its chunk mean.
    let sync = out.iter().find(|l| l.arm == "eager-sync").unwrap();
    assert_eq!(sync.estimator, "chunk_mean");
}
