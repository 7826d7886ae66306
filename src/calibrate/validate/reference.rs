//! The reference CSV: one row per (forward µs, batch size, block, arm), its optional spread,
//! host speed and chunk columns, read into cells.

use crate::axes::Arm;
use crate::model::host_profile::MAX_HOST_SPEED_US;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The columns a reference may hold: [`ReferenceRow`]'s fields, as
/// `scripts/metaprep_host.py` writes them.
pub(super) const COLUMNS: &[&str] = &[
    "forward_us",
    "batch_size",
    "block",
    "arm",
    "step_us",
    "step_us_p10",
    "step_us_p90",
    "samples",
    "rounds",
    "host_speed_us",
    "host_speed_p10",
    "host_speed_p90",
    "chunk_host_speed_us",
    "chunk_step_us",
    "forward_dev_us",
    "sm_clock_mhz",
];

/// Refuses a column that looks like a misspelt reference column (within two edits of one, or
/// a start of one): read as written it would be dropped, and the run would go on without
/// what it holds. Returns the other columns not the reader's (an engine's own), which the
/// reader ignores and names once the file has read whole.
fn foreign_columns(file: &str, headers: &csv::StringRecord) -> Result<Vec<String>> {
    let mut foreign = Vec::new();
    for column in headers.iter().filter(|c| !COLUMNS.contains(c)) {
        let near = COLUMNS.iter().find(|known| {
            strsim::damerau_levenshtein(column, known) <= 2
                || (column.len() >= 4 && known.starts_with(column))
        });
        match near {
            Some(known) => bail!(
                "{file}: line 1: column `{column}` is no reference column: did you mean \
                 `{known}`? (the columns: {})",
                COLUMNS.join(", ")
            ),
            None => foreign.push(column.to_string()),
        }
    }
    Ok(foreign)
}

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

impl ReferenceRow {
    /// Refuses values no measured step has (its arm is checked where it is parsed).
    fn check(&self) -> Result<()> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !(positive(self.forward_us) && self.forward_us <= 1e6) {
            bail!(
                "`forward_us` {} is not a forward in µs (0 to 1e6)",
                self.forward_us
            );
        }
        if self.batch_size == 0 || self.block == 0 {
            bail!("`batch_size` and `block` must be at least 1");
        }
        if !positive(self.step_us) {
            bail!("`step_us` {} is not a positive time", self.step_us);
        }
        if let (Some(p10), Some(p90)) = (self.step_us_p10, self.step_us_p90) {
            if !(p10 <= self.step_us && self.step_us <= p90) {
                bail!(
                    "`step_us_p10` {p10} <= `step_us` {} <= \
                     `step_us_p90` {p90} does not hold: the percentiles hold their median",
                    self.step_us
                );
            }
        }
        for (name, value) in [
            ("host_speed_us", self.host_speed_us),
            ("host_speed_p10", self.host_speed_p10),
            ("host_speed_p90", self.host_speed_p90),
        ] {
            if let Some(h) = value.filter(|&h| !(positive(h) && h <= MAX_HOST_SPEED_US)) {
                bail!(
                    "`{name}` {} is not a measured µs per op (above 0, \
                     at most {MAX_HOST_SPEED_US})",
                    shown(h)
                );
            }
        }
        if let (Some(p10), Some(p90)) = (self.host_speed_p10, self.host_speed_p90) {
            if p10 > p90 {
                bail!(
                    "`host_speed_p10` {p10} is above `host_speed_p90` \
                     {p90}: the percentiles are swapped"
                );
            }
        }
        for (name, value) in [
            ("forward_dev_us", self.forward_dev_us),
            ("sm_clock_mhz", self.sm_clock_mhz),
        ] {
            if let Some(v) = value.filter(|&v| !positive(v)) {
                bail!("`{name}` {} is not a positive number", shown(v));
            }
        }
        for (name, value) in [("samples", self.samples), ("rounds", self.rounds)] {
            if let Some(v) = value.filter(|&v| !(v.is_finite() && v >= 1.0 && v.fract() == 0.0)) {
                bail!(
                    "`{name}` {} is not a count (a whole number, 1 or more)",
                    shown(v)
                );
            }
        }
        Ok(())
    }
}

/// A number as an error shows it: in full, or in exponent form where it is huge.
fn shown(v: f64) -> String {
    match v.abs() >= 1e9 {
        true => format!("{v:e}"),
        false => format!("{v}"),
    }
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

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "forward {} µs, batch {}, block {}",
            self.forward_us, self.batch_size, self.block
        )
    }
}

/// The reference, by cell: each arm's row.
#[derive(Debug, Clone)]
pub struct Reference {
    pub cells: Vec<(Cell, BTreeMap<Arm, ReferenceRow>)>,
}

impl Reference {
    /// Reads `path`, gzipped or plain, as every run file is read.
    pub fn read(path: &Path) -> Result<Reference> {
        let file = path.display();
        let bytes = crate::results::compressed::read_file(path)
            .with_context(|| format!("{file}: cannot read the reference"))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "{file}: not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            )
        })?;
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
        let foreign = foreign_columns(file, &headers)?;
        let mut cells: Vec<(Cell, BTreeMap<Arm, ReferenceRow>)> = Vec::new();
        let mut lines = crate::results::csv::RecordLines::default();
        for rec in reader.records() {
            let rec = rec.map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
            let line = lines.of(text.as_bytes(), &rec);
            let mut row: ReferenceRow = rec.deserialize(Some(&headers)).map_err(|e| {
                crate::results::csv::describe_field_error(file, line, &headers, &rec, &e)
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
            row.check()
                .map_err(|e| anyhow::anyhow!("{file}: line {line}: {e}"))?;
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
                bail!("{file}: line {line}: a second row for {cell}, {arm}");
            }
        }
        if cells.is_empty() {
            bail!("{file}: no rows: a reference needs at least one (forward_us, batch_size, block, arm, step_us) row");
        }
        if !foreign.is_empty() {
            eprintln!(
                "metaprep: warning: {file}: {} no reference column: ignored",
                match foreign.len() {
                    1 => format!("column `{}` is", foreign[0]),
                    _ => format!("columns `{}` are", foreign.join("`, `")),
                }
            );
        }
        Ok(Reference { cells })
    }
}
