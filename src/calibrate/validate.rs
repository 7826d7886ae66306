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
//!
//! A row with chunks (`chunk_host_speed_us`, `chunk_step_us`: the steps between two host-speed
//! probes of `metaprep_host.StepSampler`, each with the mean of the probes around it) is
//! compared chunk by chunk: the model runs at the extremes of the cell's chunk speeds (and at
//! the profile's own), each chunk is predicted by interpolating those runs at its own speed,
//! and the mean over chunks of the prediction is held against the mean of the chunks' median
//! steps ("chunk mean"). A host whose speed switches between two levels puts the median of all
//! steps in whichever level held most of them; the chunk mean moves with the mix of levels as
//! a model linear in the host speed does (docs/calibration.md, "Host speed").

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
    #[serde(default, deserialize_with = "empty_as_none")]
    pub host_speed_p10: Option<f64>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub host_speed_p90: Option<f64>,
    /// `;`-separated host speed of each chunk (µs per op).
    #[serde(default)]
    pub chunk_host_speed_us: Option<String>,
    /// `;`-separated median step of each chunk (µs).
    #[serde(default)]
    pub chunk_step_us: Option<String>,
    /// Median device µs of the forward the loop marked (nominally `forward_us`).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub forward_dev_us: Option<f64>,
    /// Median NVML SM clock at the probes (MHz).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub sm_clock_mhz: Option<f64>,
    /// (host speed, median step) per chunk, parsed from the two chunk columns.
    #[serde(skip)]
    pub chunks: Vec<(f64, f64)>,
}

/// The chunks of a row from its two `;`-separated columns (both or neither).
fn parse_chunks(speeds: Option<&str>, steps: Option<&str>) -> Result<Vec<(f64, f64)>> {
    let list = |text: Option<&str>, name: &str| -> Result<Vec<f64>> {
        let text = text.map(str::trim).unwrap_or("");
        if text.is_empty() {
            return Ok(Vec::new());
        }
        text.split(';')
            .map(|v| match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => bail!("`{name}`: `{v}` is not a positive number"),
            })
            .collect()
    };
    let (speeds, steps) = (
        list(speeds, "chunk_host_speed_us")?,
        list(steps, "chunk_step_us")?,
    );
    if speeds.len() != steps.len() {
        bail!(
            "`chunk_host_speed_us` has {} values and `chunk_step_us` {}: give one of each per chunk",
            speeds.len(),
            steps.len()
        );
    }
    Ok(speeds.into_iter().zip(steps).collect())
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
            let mut row: ReferenceRow = rec.deserialize(Some(&headers)).map_err(|e| {
                crate::results::csv::describe_field_error(file, line as u64, &headers, &rec, &e)
            })?;
            row.chunks = parse_chunks(
                row.chunk_host_speed_us.as_deref(),
                row.chunk_step_us.as_deref(),
            )
            .map_err(|e| anyhow::anyhow!("{file}: line {line}: {e}"))?;
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
    /// The model run at each of `chunk_run_speeds` (µs per op), for rows with chunks.
    pub by_speed: Vec<(f64, BTreeMap<Arm, ModelStep>)>,
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
    /// How reference and model were reduced: `chunk_mean` or `median`.
    pub estimator: &'static str,
    /// The spread of the cell's chunk host speeds (µs per op), when chunks were recorded.
    pub host_speed_p10: Option<f64>,
    pub host_speed_p90: Option<f64>,
    /// The marked forward's measured device µs over its nominal `forward_us`.
    pub forward_stretch: Option<f64>,
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

/// Speeds closer than this (relative) share one model run.
pub const SPEED_MERGE: f64 = 0.03;

/// The host speeds the model runs at for a cell whose rows have chunks, besides the profile's
/// own (`own`, the raw run): the slowest and fastest chunk speed of any arm, each left out
/// when within `SPEED_MERGE` of `own` or of the other. Empty without chunks or `own`.
pub fn chunk_run_speeds(rows: &BTreeMap<Arm, ReferenceRow>, own: Option<f64>) -> Vec<f64> {
    let Some(own) = own else { return Vec::new() };
    let all: Vec<f64> = rows
        .values()
        .flat_map(|r| r.chunks.iter().map(|c| c.0))
        .collect();
    let (Some(lo), Some(hi)) = (
        all.iter().copied().reduce(f64::min),
        all.iter().copied().reduce(f64::max),
    ) else {
        return Vec::new();
    };
    let mut out: Vec<f64> = Vec::new();
    for s in [lo, hi] {
        let near = |o: f64| (s / o - 1.0).abs() <= SPEED_MERGE;
        if !near(own) && !out.iter().any(|&o| near(o)) {
            out.push(s);
        }
    }
    out
}

/// The model's step at host speed `s`: linear between the runs around it (sorted by speed),
/// the nearest run's outside them. A host-bound step is ~linear in the speed, a GPU-bound one
/// flat; where a step turns host-bound between two runs the chord over-predicts a little.
pub fn interpolate(points: &[(f64, f64)], s: f64) -> f64 {
    let mut p = points.to_vec();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    match p.iter().position(|q| q.0 >= s) {
        None => p.last().map_or(f64::NAN, |q| q.1),
        Some(0) => p[0].1,
        Some(i) => {
            let ((s0, m0), (s1, m1)) = (p[i - 1], p[i]);
            m0 + (m1 - m0) * (s - s0) / (s1 - s0)
        }
    }
}

/// The chunk-mean estimator for one row: (mean of the chunks' median steps, mean of the
/// model interpolated at each chunk's speed); None without chunks or runs.
fn chunk_mean(
    arm: Arm,
    row: &ReferenceRow,
    model: &ModelCell,
    own: Option<f64>,
) -> Option<(f64, f64)> {
    let own = own?;
    if row.chunks.is_empty() {
        return None;
    }
    let mut points = vec![(own, model.raw.get(&arm)?.median)];
    for (s, run) in &model.by_speed {
        points.push((*s, run.get(&arm)?.median));
    }
    let n = row.chunks.len() as f64;
    let reference = row.chunks.iter().map(|c| c.1).sum::<f64>() / n;
    let predicted = row
        .chunks
        .iter()
        .map(|c| interpolate(&points, c.0))
        .sum::<f64>()
        / n;
    Some((reference, predicted))
}

/// Compares one cell: a line per arm and one for eager-sync − graph where both ran. `own`:
/// the profile's own host speed (the raw run's), which the chunk-mean estimator needs.
pub fn compare_cell(
    cell: Cell,
    reference: &BTreeMap<Arm, ReferenceRow>,
    model: &ModelCell,
    own: Option<f64>,
    bars: Bars,
) -> Result<Vec<Line>> {
    let speed = cell_host_speed(reference);
    let spread = |f: fn(&ReferenceRow) -> Option<f64>| {
        let v: Vec<f64> = reference.values().filter_map(f).collect();
        crate::stats::summary::quantile(&v, 0.5)
    };
    let (p10, p90) = (spread(|r| r.host_speed_p10), spread(|r| r.host_speed_p90));
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
        estimator: "median",
        host_speed_p10: p10,
        host_speed_p90: p90,
        forward_stretch: None,
    };
    let get = |map: &BTreeMap<Arm, ModelStep>, arm: Arm| {
        map.get(&arm).copied().with_context(|| {
            format!(
                "the model has no step_us for {arm} at forward {} µs, batch {}, block {}",
                cell.forward_us, cell.batch_size, cell.block
            )
        })
    };
    // (reference, model) of one arm: by chunk mean where its row has chunks and `by_chunks`
    // allows, else medians.
    let pair = |arm: Arm, row: &ReferenceRow, by_chunks: bool| -> Result<(f64, f64, bool)> {
        get(&model.raw, arm)?;
        Ok(
            match chunk_mean(arm, row, model, own).filter(|_| by_chunks) {
                Some((r, m)) => (r, m, true),
                None => (row.step_us, get(&model.at_speed, arm)?.median, false),
            },
        )
    };
    let estimator = |chunked: bool| if chunked { "chunk_mean" } else { "median" };
    for (&arm, row) in reference {
        let (r, m, chunked) = pair(arm, row, true)?;
        let mut l = line(
            arm.name().to_string(),
            Quantity::StepUs,
            r,
            m,
            get(&model.raw, arm)?.median,
            bars.step_pct,
        );
        l.estimator = estimator(chunked);
        l.forward_stretch = row.forward_dev_us.map(|f| f / cell.forward_us);
        lines.push(l);
    }
    if let (Some(s), Some(g)) = (reference.get(&Arm::EagerSync), reference.get(&Arm::Graph)) {
        // One estimator for both sides of the difference: a chunk mean less a median is
        // neither, so where only one arm has chunks both take medians.
        let both = !s.chunks.is_empty() && !g.chunks.is_empty();
        let ((rs, ms, cs), (rg, mg, cg)) =
            (pair(Arm::EagerSync, s, both)?, pair(Arm::Graph, g, both)?);
        let raw = get(&model.raw, Arm::EagerSync)?.median - get(&model.raw, Arm::Graph)?.median;
        if rs - rg > 0.0 {
            let mut l = line(
                "eager-sync − graph".to_string(),
                Quantity::SyncMinusGraphUs,
                rs - rg,
                ms - mg,
                raw,
                bars.diff_pct,
            );
            l.estimator = estimator(cs && cg);
            lines.push(l);
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
        "The model ran each cell at the host speed the reference recorded for it (its framework costs times the ratio to the profile's own host speed); \"raw\" is the model at the profile's own host speed. Rows marked \"chunk mean\" recorded a host-speed probe every few steps: their reference is the mean over chunks of each chunk's median step, and their model the mean over the same chunks of the model interpolated at each chunk's own speed (between runs at the cell's slowest and fastest chunk speed and the profile's own). \"host speed\" is the cell's median chunk speed over the profile's, with the chunks' p10–p90 in µs per op; \"forward\" is the marked forward's measured device time over its nominal µs (a `torch.cuda._sleep` forward runs longer when the SM clock drops; the model's forward is wall-clock).\n"
    );
    let _ = writeln!(
        r,
        "| forward µs | bs | block | arm | reference µs | model µs | error | raw model µs | raw error | host speed ratio | speeds p10–p90 | forward | estimator | pass |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|"
    );
    for l in lines {
        let speeds = match (l.host_speed_p10, l.host_speed_p90) {
            (Some(a), Some(b)) => format!("{a:.1}–{b:.1}"),
            _ => "–".to_string(),
        };
        let fwd = l
            .forward_stretch
            .map_or("–".to_string(), |f| format!("{f:.3}"));
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:+.1}% | {:.1} | {:+.1}% | {:.3} | {} | {} | {} | {} |",
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
            speeds,
            fwd,
            l.estimator.replace('_', " "),
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
        let md = markdown("r.csv", "p", &lines, bars);
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
}
