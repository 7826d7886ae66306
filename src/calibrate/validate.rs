//! `metaprep validate`: a reference's untraced step times (an engine, or a loop written like
//! one) against `steps` run on the same grid with a host profile, in the same call.
//!
//! The reference is a CSV (scripts/metaprep_host.py `write_reference` writes it): one row per
//! (forward µs, batch size, block, arm) with the untraced median step time, and optionally
//! the host speed the engine's process had while that cell ran. Where a row has one and the
//! profile records its own, the model runs at the reference's host speed (`steps
//! --host-speed-us`); the model at the profile's own host speed is shown beside it ("raw").
//! A cell passes when every arm's step time is within `step_pct` of the reference and, where
//! both arms ran, eager-sync − graph within `diff_pct` of the reference's difference.

use crate::axes::Arm;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// One row of a reference CSV.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReferenceRow {
    pub forward_us: f64,
    pub batch_size: u32,
    pub block: u32,
    pub arm: String,
    /// Median µs of one decode step, untraced.
    pub step_us: f64,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub step_us_p10: Option<f64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub step_us_p90: Option<f64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub samples: Option<f64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub rounds: Option<f64>,
    /// µs per op of scripts/metaprep_host.py host_speed() in the engine's process while the cell ran.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub host_speed_us: Option<f64>,
}

fn empty_as_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => v.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// A cell of the grid: (forward µs, batch size, block).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Cell {
    pub forward_us: f64,
    pub batch_size: u32,
    pub block: u32,
}

/// The reference, by cell: each arm's row.
#[derive(Debug, Clone)]
pub struct Reference {
    pub cells: Vec<(Cell, BTreeMap<Arm, ReferenceRow>)>,
}

impl Reference {
    pub fn read(path: &Path) -> Result<Reference> {
        let file = path.display();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{file}: cannot read the reference"))?;
        Self::parse(&file.to_string(), &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<Reference> {
        if !text.is_empty() && !text.ends_with('\n') {
            bail!("{file}: the last line does not end in a newline: the file was cut short");
        }
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .map_err(|e| anyhow::anyhow!("{file}: line 1: {e}"))?
            .clone();
        let mut cells: Vec<(Cell, BTreeMap<Arm, ReferenceRow>)> = Vec::new();
        for (i, rec) in reader.records().enumerate() {
            let line = i + 2;
            let rec = rec.map_err(|e| anyhow::anyhow!("{file}: line {line}: {e}"))?;
            let row: ReferenceRow = rec.deserialize(Some(&headers)).map_err(|e| {
                crate::results::csv::describe_field_error(file, line as u64, &headers, &rec, &e)
            })?;
            let arm: Arm = row
                .arm
                .parse()
                .map_err(|e| anyhow::anyhow!("{file}: line {line}: `arm`: {e}"))?;
            let positive = |v: f64| v.is_finite() && v > 0.0;
            if !(positive(row.forward_us) && row.forward_us <= 1e6) {
                bail!(
                    "{file}: line {line}: `forward_us` {} is not a forward in µs (0 to 1e6)",
                    row.forward_us
                );
            }
            if row.batch_size == 0 || row.block == 0 {
                bail!("{file}: line {line}: `batch_size` and `block` must be at least 1");
            }
            if !positive(row.step_us) {
                bail!(
                    "{file}: line {line}: `step_us` {} is not a positive time",
                    row.step_us
                );
            }
            if let (Some(p10), Some(p90)) = (row.step_us_p10, row.step_us_p90) {
                if !(p10 <= row.step_us && row.step_us <= p90) {
                    bail!(
                        "{file}: line {line}: `step_us_p10` {p10} <= `step_us` {} <= \
                         `step_us_p90` {p90} does not hold: the percentiles hold their median",
                        row.step_us
                    );
                }
            }
            if let Some(h) = row.host_speed_us.filter(|h| !positive(*h)) {
                bail!("{file}: line {line}: `host_speed_us` {h} is not a positive µs per op");
            }
            let cell = Cell {
                forward_us: row.forward_us,
                batch_size: row.batch_size,
                block: row.block,
            };
            let at = match cells.iter().position(|(c, _)| *c == cell) {
                Some(at) => at,
                None => {
                    cells.push((cell, BTreeMap::new()));
                    cells.len() - 1
                }
            };
            if cells[at].1.insert(arm, row).is_some() {
                bail!(
                    "{file}: line {line}: a second row for forward {} µs, batch {}, block {}, {arm}",
                    cell.forward_us,
                    cell.batch_size,
                    cell.block
                );
            }
        }
        if cells.is_empty() {
            bail!("{file}: no rows: a reference needs at least one (forward_us, batch_size, block, arm, step_us) row");
        }
        Ok(Reference { cells })
    }
}

/// The model's step time of one arm in one cell: median and 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelStep {
    pub median: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
}

/// The model at the reference's host speed (`at_speed`) and at the profile's own (`raw`).
#[derive(Debug, Clone, Default)]
pub struct ModelCell {
    pub at_speed: BTreeMap<Arm, ModelStep>,
    pub raw: BTreeMap<Arm, ModelStep>,
    /// The reference's host speed over the profile's, when both are known.
    pub host_ratio: Option<f64>,
}

/// What is compared: one arm's step, or eager-sync − graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    StepUs,
    SyncMinusGraphUs,
}

/// One line of validation.csv.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub forward_us: f64,
    pub batch_size: u32,
    pub block: u32,
    /// The arm (`eager-sync − graph` for the difference).
    pub arm: String,
    pub quantity: Quantity,
    pub reference_us: f64,
    pub model_us: f64,
    pub error_pct: f64,
    pub model_raw_us: f64,
    pub raw_error_pct: f64,
    /// The reference's host speed for this cell (µs per op), if it recorded one.
    pub host_speed_us: Option<f64>,
    /// Reference host speed / profile host speed: what the model's framework costs were
    /// multiplied by (1 when either is unknown).
    pub host_ratio: f64,
    pub bar_pct: f64,
    pub pass: bool,
}

/// The pass bars, percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bars {
    pub step_pct: f64,
    pub diff_pct: f64,
}

fn error_pct(model: f64, reference: f64) -> f64 {
    (model / reference - 1.0) * 100.0
}

/// The host speed a cell's model runs at: the median of its arms' recorded ones.
pub fn cell_host_speed(rows: &BTreeMap<Arm, ReferenceRow>) -> Option<f64> {
    let v: Vec<f64> = rows.values().filter_map(|r| r.host_speed_us).collect();
    crate::stats::summary::quantile(&v, 0.5)
}

/// Compares one cell: a line per arm and one for eager-sync − graph where both ran.
pub fn compare_cell(
    cell: Cell,
    reference: &BTreeMap<Arm, ReferenceRow>,
    model: &ModelCell,
    bars: Bars,
) -> Result<Vec<Line>> {
    let speed = cell_host_speed(reference);
    let mut lines = Vec::new();
    let line = |arm: String, q: Quantity, r: f64, m: f64, raw: f64, bar: f64| Line {
        forward_us: cell.forward_us,
        batch_size: cell.batch_size,
        block: cell.block,
        arm,
        quantity: q,
        reference_us: r,
        model_us: m,
        error_pct: error_pct(m, r),
        model_raw_us: raw,
        raw_error_pct: error_pct(raw, r),
        host_speed_us: speed,
        host_ratio: model.host_ratio.unwrap_or(1.0),
        bar_pct: bar,
        // A hair of rounding (2110 × 1.1) must not fail a value at the bar.
        pass: error_pct(m, r).abs() <= bar + 1e-9,
    };
    let get = |map: &BTreeMap<Arm, ModelStep>, arm: Arm| {
        map.get(&arm).copied().with_context(|| {
            format!(
                "the model has no step_us for {arm} at forward {} µs, batch {}, block {}",
                cell.forward_us, cell.batch_size, cell.block
            )
        })
    };
    for (&arm, row) in reference {
        let (m, raw) = (get(&model.at_speed, arm)?, get(&model.raw, arm)?);
        lines.push(line(
            arm.name().to_string(),
            Quantity::StepUs,
            row.step_us,
            m.median,
            raw.median,
            bars.step_pct,
        ));
    }
    if let (Some(s), Some(g)) = (reference.get(&Arm::EagerSync), reference.get(&Arm::Graph)) {
        let diff = |map: &BTreeMap<Arm, ModelStep>| -> Result<f64> {
            Ok(get(map, Arm::EagerSync)?.median - get(map, Arm::Graph)?.median)
        };
        let r = s.step_us - g.step_us;
        if r > 0.0 {
            lines.push(line(
                "eager-sync − graph".to_string(),
                Quantity::SyncMinusGraphUs,
                r,
                diff(&model.at_speed)?,
                diff(&model.raw)?,
                bars.diff_pct,
            ));
        }
    }
    Ok(lines)
}

/// validation.csv's text.
pub fn csv_text(lines: &[Line]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for l in lines {
        w.serialize(l)?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// validation.md's text.
pub fn markdown(reference: &str, profile: &str, lines: &[Line], bars: Bars) -> String {
    let mut r = String::new();
    let steps: Vec<&Line> = lines
        .iter()
        .filter(|l| l.quantity == Quantity::StepUs)
        .collect();
    let diffs: Vec<&Line> = lines
        .iter()
        .filter(|l| l.quantity == Quantity::SyncMinusGraphUs)
        .collect();
    let passed = |v: &[&Line]| v.iter().filter(|l| l.pass).count();
    let _ = writeln!(r, "# Validation of `{profile}` against `{reference}`\n");
    let _ = writeln!(
        r,
        "**{}**: step time within ±{}% in {} of {} (cell, arm); eager-sync − graph within ±{}% in {} of {} cells.\n",
        if lines.iter().all(|l| l.pass) { "PASS" } else { "FAIL" },
        bars.step_pct,
        passed(&steps),
        steps.len(),
        bars.diff_pct,
        passed(&diffs),
        diffs.len()
    );
    let _ = writeln!(
        r,
        "The model ran each cell at the host speed the reference recorded for it (its framework costs times the ratio to the profile's own host speed); \"raw\" is the model at the profile's own host speed.\n"
    );
    let _ = writeln!(
        r,
        "| forward µs | bs | block | arm | reference µs | model µs | error | raw model µs | raw error | host speed ratio | pass |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"
    );
    for l in lines {
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:+.1}% | {:.1} | {:+.1}% | {:.3} | {} |",
            l.forward_us,
            l.batch_size,
            l.block,
            l.arm,
            l.reference_us,
            l.model_us,
            l.error_pct,
            l.model_raw_us,
            l.raw_error_pct,
            l.host_ratio,
            if l.pass { "yes" } else { "**no**" }
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

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
        };
        let bars = Bars {
            step_pct: 10.0,
            diff_pct: 15.0,
        };
        let lines = compare_cell(*cell, rows, &model, bars).unwrap();
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
        let l = compare_cell(*cell, rows, &edge, bars).unwrap();
        assert!(l.iter().find(|l| l.arm == "eager-device").unwrap().pass);
        edge.at_speed
            .insert(Arm::EagerDevice, step(2110.0 * 1.1001));
        let l = compare_cell(*cell, rows, &edge, bars).unwrap();
        assert!(!l.iter().find(|l| l.arm == "eager-device").unwrap().pass);
        let md = markdown("r.csv", "p", &lines, bars);
        assert!(
            md.contains("**FAIL**") && md.contains("2 of 3 (cell, arm)"),
            "{md}"
        );
        assert!(csv_text(&lines).unwrap().lines().count() == 5);
    }

    #[test]
    fn a_missing_model_arm_is_an_error_not_a_pass() {
        let r = Reference::parse("r.csv", REF).unwrap();
        let (cell, rows) = &r.cells[0];
        let model = ModelCell {
            at_speed: BTreeMap::from([(Arm::EagerSync, step(2700.0))]),
            raw: BTreeMap::from([(Arm::EagerSync, step(2700.0))]),
            host_ratio: None,
        };
        let bars = Bars {
            step_pct: 10.0,
            diff_pct: 15.0,
        };
        let e = compare_cell(*cell, rows, &model, bars)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no step_us for"), "{e}");
    }
}
