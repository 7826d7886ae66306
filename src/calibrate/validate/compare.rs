//! One cell held against the reference: the model's steps per arm, the host speeds it runs
//! at, the chunk-mean estimator, and the lines with their pass bars.

use super::{Cell, ReferenceRow};
use crate::axes::Arm;
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;

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
        map.get(&arm)
            .copied()
            .with_context(|| format!("the model has no step_us for {arm} at {cell}"))
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
