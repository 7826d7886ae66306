//! The tidy results CSV: one row per (cell, metric).
//!
//! A *cell* is one point of a sweep: (kind, family, arm, batch size, block size, layout).
//! Every metric of a cell is its own row so that charts, summaries and `compare` can filter
//! without knowing which metrics exist.

use crate::axes::floor_item::{HARNESS, HOST_REFERENCE};
use crate::axes::{Arm, Drafter, Family, FloorItem, Layout};
use crate::results::atomic::write_atomic;
use crate::stats::summary::MIN_CI_SAMPLES;
use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

/// Which harness produced a row.
pub const KIND_PREP: &str = "prep"; // one arm's metadata prep, timed per step
pub const KIND_FLOOR: &str = "floor"; // empty launch, empty graph, bare D2H/H2D round trips
pub const KIND_STEP: &str = "step"; // the whole decode-step model

/// The paired ratio of an arm's step time over eager-sync's, formed inside each round.
pub const STEP_RATIO_VS_EAGER_SYNC: &str = "step_ratio_vs_eager_sync";

/// The `family` column of DSpark's step rows: the draft and verify metadata a step
/// prepares (every step row before `--drafter`). [`Drafter::step_family`] names each.
pub const STEP_FAMILY: &str = "dspark+dsa_target_verify";
/// How a cell's name shows a what-if host scale after its family:
/// `dspark+dsa_target_verify host x2`. Rows keep the scale in their own `host_scale` column;
/// a CSV of a metaprep before it has the scale only in the family (the old-row path).
const HOST_SCALE_MARK: &str = " host x";

/// A cell's family as its key and every table name it: `family`, with ` host x<scale>` after
/// it for a what-if host scale other than 1.
pub fn cell_family(family: &str, host_scale: Option<f64>) -> String {
    match host_scale {
        Some(scale) if scale != 1.0 => format!("{family}{HOST_SCALE_MARK}{scale}"),
        _ => family.to_string(),
    }
}

/// The `host_scale` a row records for the what-if factor `scale`: none at 1.
pub fn host_scale_column(scale: f64) -> Option<f64> {
    (scale != 1.0).then_some(scale)
}

/// The cell family of `drafter`'s step rows run at host scale `scale` ([`cell_family`]).
pub fn step_family(drafter: Drafter, scale: f64) -> String {
    cell_family(drafter.step_family(), host_scale_column(scale))
}

/// True when a step row's family names a drafter other than DSpark's (at any host scale):
/// titles name such a family even where it is the run's only one (DSpark's, the step every
/// run had before `--drafter`, they may leave unnamed).
pub fn names_another_drafter(family: &str) -> bool {
    drafter_of(family).is_some_and(|d| d != Drafter::Dspark)
}

/// The drafter a step row's family names, whatever its host scale; `None` for a family no
/// step row has.
pub fn drafter_of(family: &str) -> Option<Drafter> {
    family
        .split(HOST_SCALE_MARK)
        .next()
        .and_then(Drafter::of_step_family)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `prep`, `floor` or `step`.
    pub kind: String,
    /// Metadata family (`dspark_draft_block`, `dsa_decode`, ...); `floor` for floor rows;
    /// for step rows, the family pair the step prepares (`dspark+dsa_target_verify`), with
    /// ` host x<scale>` after it for what-if host scales other than 1.
    pub family: String,
    /// `eager-sync`, `eager-device`, `graph`, `graph-upload`, `fused`; for floor rows the
    /// floor item ([`crate::axes::FloorItem::name`]) or `harness`.
    pub arm: String,
    pub batch_size: u32,
    /// Draft block size (gamma) for dspark, draft tokens per request (N) for the DSA families.
    pub block_size: u32,
    /// `tp1`, `tp2`, `tp4`, `tp8`, `dep2`, `dep4`.
    pub layout: String,
    /// A step row's what-if factor on every host cost (`steps --host-scale`); empty at 1, on
    /// every other row, and in CSVs of a metaprep before the column (whose step rows name the
    /// scale in `family`, read back into this column).
    #[serde(default)]
    pub host_scale: Option<f64>,
    /// True when the layout needs more GPUs than the run had and one rank ran on one GPU.
    pub emulated: bool,
    /// Metric name, e.g. `step_us`, `gpu_prep_us`, `host_issue_us`, `host_blocked_us`,
    /// `floor_multiple`, `read_cost_us`, `step_ratio_vs_eager_sync`, `bytes`, `gb_s`,
    /// `itl_us`, `throughput_tok_s`, `occupancy`, `gap_us`.
    pub metric: String,
    /// `us`, `tok/s`, `ratio`, `x`, `B`, `GB/s`.
    pub unit: String,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    /// 95% confidence interval of the median.
    pub ci_lo: f64,
    pub ci_hi: f64,
    /// Finite samples behind the median (over all rounds of a row measured in rounds).
    pub samples: u64,
    /// Rounds the row was measured in (`sweep`: its median is the median of the rounds'
    /// medians and its interval spans the rounds); 0 for a row measured in one stretch
    /// (`steps`, and every row of a sweep by a metaprep before rounds, whose CSV has no such
    /// column).
    #[serde(default)]
    pub rounds: u32,
    /// Measured in rounds: `precision`, `max-rounds` or `time-cap` (what stopped the cell's
    /// rounds); in one stretch: `ci` (converged), `time-cap`, `sample-cap` or `fixed`;
    /// `derived` for a difference or ratio of other rows.
    pub stop_reason: String,
    /// NVML saw a throttle / clock-event reason other than idle during the cell.
    pub throttled: bool,
    /// Raw NVML clock-event (throttle) reason bits OR-ed over the cell, hex; empty without NVML.
    pub clock_event_reasons: String,
    /// NVML medians over the cell; empty without NVML.
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
    /// NVML GPM over the cell (Hopper and newer), each the mean over the GPM intervals the
    /// cell ran in, weighted by its time in each: SM activity (% of time an SM had a warp),
    /// DRAM bandwidth utilisation (% of peak), NVLink receive / transmit over all links
    /// (MiB/s). Empty where GPM is unavailable (env.json's notes say why) and in CSVs of a
    /// metaprep before GPM.
    #[serde(default)]
    pub gpm_sm_util_pct: Option<f64>,
    #[serde(default)]
    pub gpm_dram_bw_util_pct: Option<f64>,
    #[serde(default)]
    pub gpm_nvlink_rx_mib_s: Option<f64>,
    #[serde(default)]
    pub gpm_nvlink_tx_mib_s: Option<f64>,
    /// The cell's share (%) of the time covered by the GPM intervals behind those figures:
    /// GPM needs 100 ms between samples, so a cell visited for a few ms at a time is blended
    /// with the cells around it, and this says by how much.
    #[serde(default)]
    pub gpm_cell_share_pct: Option<f64>,
}

/// The header of a results CSV, in `Row` field order. `read_rows` checks a file's header
/// against it so that a CSV from another tool or version fails with the columns named.
pub const COLUMNS: &[&str] = &[
    "kind",
    "family",
    "arm",
    "batch_size",
    "block_size",
    "layout",
    "host_scale",
    "emulated",
    "metric",
    "unit",
    "median",
    "p10",
    "p90",
    "ci_lo",
    "ci_hi",
    "samples",
    "rounds",
    "stop_reason",
    "throttled",
    "clock_event_reasons",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "gpu_util_pct",
    "gpm_sm_util_pct",
    "gpm_dram_bw_util_pct",
    "gpm_nvlink_rx_mib_s",
    "gpm_nvlink_tx_mib_s",
    "gpm_cell_share_pct",
];

/// Columns an older metaprep did not write: a file without them reads with their defaults.
pub(crate) const OPTIONAL_COLUMNS: &[&str] = &[
    "host_scale",
    "rounds",
    "gpm_sm_util_pct",
    "gpm_dram_bw_util_pct",
    "gpm_nvlink_rx_mib_s",
    "gpm_nvlink_tx_mib_s",
    "gpm_cell_share_pct",
];

/// How many of [`COLUMNS`], from the first, are a [`CellKey`]'s fields, in its field order.
pub const CELL_KEY_COLUMNS: usize = 6;

/// Identifies one cell of a sweep: every metric row of a cell shares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CellKey {
    pub kind: String,
    pub family: String,
    pub arm: String,
    pub batch_size: u32,
    pub block_size: u32,
    pub layout: String,
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{} bs={} block={} {}",
            self.kind, self.family, self.arm, self.batch_size, self.block_size, self.layout
        )
    }
}

impl Row {
    /// The row's family with its host scale ([`cell_family`]): what its cell is keyed and
    /// named by.
    pub fn cell_family(&self) -> String {
        cell_family(&self.family, self.host_scale)
    }

    /// The what-if host scale of the row (1 for every row not at one).
    pub fn host_scale(&self) -> f64 {
        self.host_scale.unwrap_or(1.0)
    }

    pub fn cell_key(&self) -> CellKey {
        CellKey {
            kind: self.kind.clone(),
            family: self.cell_family(),
            arm: self.arm.clone(),
            batch_size: self.batch_size,
            block_size: self.block_size,
            layout: self.layout.clone(),
        }
    }
}

/// The cells that already have rows. A sweep writes the whole file atomically after each
/// cell, so a cell present in the file is complete and `--resume` can skip it.
pub fn completed_cells(rows: &[Row]) -> HashSet<CellKey> {
    rows.iter().map(Row::cell_key).collect()
}

/// Writes `rows` as a results CSV, replacing `path` atomically: a crash or a failed write
/// leaves the previous file as it was. The header is written even with no rows.
pub fn write_rows(path: &Path, rows: &[Row]) -> Result<()> {
    write_records(path, COLUMNS, rows, |row| {
        format!("cell {} for {}", row.cell_key(), path.display())
    })
}

/// Writes `header` and each record serialised after it, atomically (the whole file or none
/// of it); `what` names a record that fails to serialise.
pub fn write_records<T: Serialize>(
    path: &Path,
    header: &[&str],
    records: impl IntoIterator<Item = T>,
    what: impl Fn(&T) -> String,
) -> Result<()> {
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    writer.write_record(header)?;
    for record in records {
        writer
            .serialize(&record)
            .with_context(|| format!("serialising {}", what(&record)))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| anyhow::anyhow!("buffering {}: {}", path.display(), e.error()))?;
    write_atomic(path, &bytes)
}

/// Reads a results CSV written by [`write_rows`]. Every failure names the file, the line
/// and what to do about it.
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let name = path.display().to_string();
    let (mut rows, mut lines) = (Vec::new(), Vec::new());
    visit_records(
        path,
        |headers| check_header(&name, headers, COLUMNS, OPTIONAL_COLUMNS),
        |headers, line, record| {
            rows.push(parse_row(&name, line, headers, &record)?);
            lines.push(line);
            Ok(())
        },
    )?;
    // Every writer writes a cell's metric once; a second one is two runs' rows mixed.
    let mut seen = HashMap::with_capacity(rows.len());
    for (row, line) in rows.iter().zip(&lines) {
        // Borrowed, so 200k rows cost no key strings; the host scale is part of the cell.
        let key = (
            row.kind.as_str(),
            row.family.as_str(),
            row.host_scale.map(f64::to_bits),
            row.arm.as_str(),
            row.batch_size,
            row.block_size,
            row.layout.as_str(),
            row.metric.as_str(),
        );
        if let Some(first) = seen.insert(key, line) {
            bail!(
                "{name} line {line}: {} {} is on line {first} already: a cell's metric appears \
                 once in a run; delete one of the two lines",
                row.cell_key(),
                row.metric
            );
        }
    }
    Ok(rows)
}

/// Line `line` of file `name` as a [`Row`], checked ([`checked_row`]); errors name both.
pub(crate) fn parse_row(
    name: &str,
    line: u64,
    headers: &csv::StringRecord,
    record: &csv::StringRecord,
) -> Result<Row> {
    let row: Row = record
        .deserialize(Some(headers))
        .map_err(|e| describe_field_error(name, line, headers, record, &e))?;
    checked_row(row)
        .map_err(|why| anyhow::anyhow!("{name} line {line}: {why}: fix or delete that line"))
}

/// `row` as read from a file, checked ([`check_row`]). A measured median with fewer samples
/// than any 95% interval needs has no CI, whatever an older writer put there (a one-sample
/// "interval" of zero width claims certainty).
fn checked_row(mut row: Row) -> std::result::Result<Row, String> {
    old_scaled_family(&mut row)?;
    if row.stop_reason != "derived" && (row.samples as usize) < MIN_CI_SAMPLES {
        row.ci_lo = f64::NAN;
        row.ci_hi = f64::NAN;
    }
    check_row(&row).map_err(|why| format!("{} {}: {why}", row.cell_key(), row.metric))?;
    Ok(row)
}

/// The old-row path: a step row of a metaprep before the `host_scale` column names its scale
/// in its family (`dspark+dsa_target_verify host x2`); it moves into the column. A row with
/// both is no row metaprep wrote.
fn old_scaled_family(row: &mut Row) -> std::result::Result<(), String> {
    if row.kind != KIND_STEP {
        return Ok(());
    }
    let Some((family, scale)) = row.family.split_once(HOST_SCALE_MARK) else {
        return Ok(());
    };
    // A scale that does not read leaves the family as it is, which no step row has.
    let Some(scale) = scale
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
    else {
        return Ok(());
    };
    if row.host_scale.is_some() {
        return Err(format!(
            "columns `family`, `host_scale`: `{}` names a host scale beside the column's",
            row.family
        ));
    }
    row.family = family.to_string();
    row.host_scale = host_scale_column(scale);
    Ok(())
}

/// Why a row cannot be one metaprep wrote: a kind, family, arm or layout it does not know
/// (each checked by its own parser, so a new arm is known as soon as it exists), a median
/// that is not a number, an infinite value, a negative time, rate or ratio (a derived row,
/// a difference, may be negative), or a median outside its own interval.
fn check_row(row: &Row) -> std::result::Result<(), String> {
    check_names(&row.kind, &row.family, &row.arm, &row.layout)?;
    // A floor item has no block: its rows' block_size is not read.
    let block = (row.kind != KIND_FLOOR).then_some(row.block_size);
    for (name, v) in [("batch_size", Some(row.batch_size)), ("block_size", block)] {
        if v == Some(0) {
            return Err(format!("column `{name}`: 0 is no size: sizes start at 1"));
        }
    }
    if row.median.is_nan() {
        return Err("column `median`: the median is not a number".into());
    }
    let values = [
        ("median", row.median),
        ("p10", row.p10),
        ("p90", row.p90),
        ("ci_lo", row.ci_lo),
        ("ci_hi", row.ci_hi),
    ];
    if let Some((name, v)) = values.iter().find(|(_, v)| v.is_infinite()) {
        return Err(format!("column `{name}`: {v} is not a measurement"));
    }
    if row.stop_reason != "derived" {
        if let Some((name, v)) = values.iter().find(|(_, v)| *v < 0.0) {
            return Err(format!("column `{name}`: {v} {} is negative", row.unit));
        }
    }
    // A spread is both percentiles or neither, the lower first.
    if row.p10.is_nan() != row.p90.is_nan() || row.p10 > row.p90 {
        return Err(format!(
            "columns `p10`, `p90`: {} <= {} does not hold: the 10th percentile is at most the \
             90th, and both are numbers or neither",
            row.p10, row.p90
        ));
    }
    // NaN bounds are no interval (too few samples); a median outside its own is no row.
    if !(row.ci_lo.is_nan()
        || row.ci_hi.is_nan()
        || row.ci_lo <= row.median && row.median <= row.ci_hi)
    {
        return Err(format!(
            "columns `ci_lo`, `median`, `ci_hi`: {} <= {} <= {} does not hold: an interval \
             holds its median",
            row.ci_lo, row.median, row.ci_hi
        ));
    }
    Ok(())
}

/// A cell's kind, family, arm and layout, each one metaprep writes; the error names the column.
pub(crate) fn check_cell_key(key: &CellKey) -> std::result::Result<(), String> {
    check_names(&key.kind, &key.family, &key.arm, &key.layout)
}

fn check_names(
    kind: &str,
    family: &str,
    arm: &str,
    layout: &str,
) -> std::result::Result<(), String> {
    let column = |name: &str, why: String| Err(format!("column `{name}`: {why}"));
    if let Err(e) = layout.parse::<Layout>() {
        return column("layout", e.to_string());
    }
    match kind {
        KIND_PREP => {
            if let Err(e) = family.parse::<Family>() {
                return column("family", e);
            }
            if let Err(e) = arm.parse::<Arm>() {
                return column("arm", e);
            }
        }
        KIND_STEP => {
            if Drafter::of_step_family(family).is_none() {
                let names: Vec<&str> = Drafter::ALL.iter().map(|d| d.step_family()).collect();
                return column(
                    "family",
                    format!(
                        "`{}` is not a step row's family: `{}`, or one of them with \
                         `{HOST_SCALE_MARK}<scale>` after it for a what-if host scale",
                        family,
                        names.join("` or `")
                    ),
                );
            }
            if let Err(e) = arm.parse::<Arm>() {
                return column("arm", e);
            }
        }
        KIND_FLOOR => {
            if family != KIND_FLOOR {
                return column(
                    "family",
                    format!("`{}` is not a floor row's family: `floor`", family),
                );
            }
            // The harness's overhead and the host-speed reference are floor rows of their own.
            if arm != HARNESS && arm != HOST_REFERENCE {
                if let Err(e) = arm.parse::<FloorItem>() {
                    return column("arm", format!("{e} (or {HARNESS}, {HOST_REFERENCE})"));
                }
            }
        }
        other => {
            return column(
                "kind",
                format!("`{other}` is not a kind: use {KIND_PREP}, {KIND_FLOOR} or {KIND_STEP}"),
            )
        }
    }
    Ok(())
}

/// Reads the rows a `--resume` starts from: none when the file does not exist yet (the first
/// run into a directory), an error when it exists but cannot be read, so a damaged file is
/// never silently overwritten.
pub fn rows_for_resume(path: &Path) -> Result<Vec<Row>> {
    if path.exists() {
        read_rows(path)
    } else {
        Ok(Vec::new())
    }
}

/// Reads a CSV whose header must hold exactly `columns` (in any order), less any of
/// `optional` (which `T` must default), into `T`s.
pub(crate) fn read_table<T: DeserializeOwned>(
    path: &Path,
    columns: &[&str],
    optional: &[&str],
) -> Result<Vec<T>> {
    let name = path.display().to_string();
    let table = read_records(path)?;
    check_header(&name, &table.headers, columns, optional)?;
    table
        .records
        .iter()
        .map(|(line, record)| {
            record
                .deserialize(Some(&table.headers))
                .map_err(|e| describe_field_error(&name, *line, &table.headers, record, &e))
        })
        .collect()
}

/// A CSV file read whole: its header and each record with its line number.
pub(crate) struct Records {
    pub headers: csv::StringRecord,
    pub records: Vec<(u64, csv::StringRecord)>,
}

/// Reads every record of a CSV, each as long as the header. A file must end in a newline:
/// every writer here ends each record with one, so a file without it was cut while being
/// written (a last number `72.0` cut to `7` would otherwise read as a smaller number).
pub(crate) fn read_records(path: &Path) -> Result<Records> {
    let mut headers = csv::StringRecord::new();
    let mut records = Vec::new();
    visit_records(
        path,
        |h| {
            headers = h.clone();
            Ok(())
        },
        |_, line, record| {
            records.push((line, record));
            Ok(())
        },
    )?;
    Ok(Records { headers, records })
}

/// [`read_records`]' checks, handing the header to `header` and then each record (with the
/// header and its line) to `each` as it is read, so a caller that turns records into rows holds one record
/// at a time rather than all of them beside the rows.
pub(crate) fn visit_records(
    path: &Path,
    mut header: impl FnMut(&csv::StringRecord) -> Result<()>,
    mut each: impl FnMut(&csv::StringRecord, u64, csv::StringRecord) -> Result<()>,
) -> Result<()> {
    let name = path.display();
    let bytes = match crate::results::compressed::read_file(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{name} does not exist: check the path (results are written by \
             `metaprep sweep --out DIR` and `metaprep steps --out DIR`)"
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {name}")),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        bail!(
            "{name} is empty (no header line): the run that wrote it stopped before its first \
             result; rerun it"
        );
    }
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(bytes.as_slice());
    let headers = reader
        .headers()
        .with_context(|| format!("{name} line 1: cannot read the header"))?
        .clone();
    let read = |record: csv::Result<csv::StringRecord>| {
        record
            .map(|r| (r.position().map_or(0, |p| p.line()), r))
            .map_err(|e| {
                let line = e.position().map_or(0, |p| p.line());
                anyhow::anyhow!("{name} line {line}: {e}: fix or delete that line")
            })
    };
    if bytes.last() != Some(&b'\n') {
        // Cut while being written: the last line is named, whatever else is wrong before it.
        let mut last = None;
        for record in reader.records() {
            last = Some(read(record)?);
        }
        let Some((line, record)) = last else {
            bail!(
                "{name} line 1: the file ends inside its header (no final newline): it was cut \
                 while being written; regenerate it"
            );
        };
        bail!(
            "{name} line {line}: the last line has no final newline ({} of {} fields): the \
             file was cut while being written, so its last value may be cut too; delete that \
             line and rerun the missing cell (`--resume` reruns only cells absent from the file)",
            record.len(),
            headers.len()
        );
    }
    header(&headers)?;
    for record in reader.records() {
        let (line, record) = read(record)?;
        if record.len() != headers.len() {
            bail!(
                "{name} line {line}: {} fields where the header has {}: fix or delete that line",
                record.len(),
                headers.len()
            );
        }
        each(&headers, line, record)?;
    }
    Ok(())
}

/// Names the missing and unexpected columns; the order of columns does not matter because
/// fields are matched by name.
pub(crate) fn check_header(
    name: &str,
    headers: &csv::StringRecord,
    columns: &[&str],
    optional: &[&str],
) -> Result<()> {
    let found: Vec<&str> = headers.iter().collect();
    let missing: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !found.contains(c) && !optional.contains(c))
        .collect();
    let unexpected: Vec<&str> = found
        .iter()
        .copied()
        .filter(|c| !columns.contains(c))
        .collect();
    let duplicated: Vec<&str> = found
        .iter()
        .enumerate()
        .filter(|(i, c)| found[..*i].contains(c))
        .map(|(_, c)| *c)
        .collect();
    if missing.is_empty() && unexpected.is_empty() && duplicated.is_empty() {
        return Ok(());
    }
    let quote = |cols: &[&str]| {
        cols.iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing column(s) {}", quote(&missing)));
    }
    if !unexpected.is_empty() {
        problems.push(format!("unexpected column(s) {}", quote(&unexpected)));
    }
    if !duplicated.is_empty() {
        problems.push(format!("repeated column(s) {}", quote(&duplicated)));
    }
    bail!(
        "{name} line 1: the header does not match this metaprep version's schema ({}): \
         regenerate the file with this version, or pass a metaprep results file",
        problems.join("; ")
    )
}

pub(crate) fn describe_field_error(
    name: &str,
    line: u64,
    headers: &csv::StringRecord,
    record: &csv::StringRecord,
    error: &csv::Error,
) -> anyhow::Error {
    let csv::ErrorKind::Deserialize { err, .. } = error.kind() else {
        return anyhow::anyhow!("{name} line {line}: {error}: fix or delete that line");
    };
    let Some(index) = err.field().map(|i| i as usize) else {
        return anyhow::anyhow!("{name} line {line}: {err}: fix or delete that line");
    };
    let column = headers.get(index).unwrap_or("?");
    let value = record.get(index).unwrap_or("");
    let expected = match err.kind() {
        csv::DeserializeErrorKind::ParseFloat(_) => "a number",
        csv::DeserializeErrorKind::ParseInt(_) => "a whole number",
        csv::DeserializeErrorKind::ParseBool(_) => "`true` or `false`",
        _ => "the expected type",
    };
    anyhow::anyhow!(
        "{name} line {line}, column `{column}`: cannot read `{value}` as {expected} ({err}): \
         fix the value or regenerate the file"
    )
}

/// Rows for unit tests across the report modules.
#[cfg(test)]
pub(crate) mod test_rows {
    use super::Row;

    /// A converged, unthrottled row with a ±1% interval around `median`; measured in six
    /// rounds unless it is a `step` row (steps has no rounds).
    pub fn row(kind: &str, family: &str, arm: &str, bs: u32, metric: &str, median: f64) -> Row {
        let unit = match metric {
            "throughput_tok_s" => "tok/s",
            "occupancy" => "ratio",
            "floor_multiple" => "x",
            "gb_s" => "GB/s",
            "bytes" => "B",
            _ => "us",
        };
        Row {
            kind: kind.into(),
            family: family.into(),
            arm: arm.into(),
            batch_size: bs,
            block_size: 5,
            layout: "tp1".into(),
            emulated: false,
            metric: metric.into(),
            unit: unit.into(),
            median,
            p10: median * 0.97,
            p90: median * 1.05,
            ci_lo: median * 0.99,
            ci_hi: median * 1.01,
            samples: 500,
            rounds: if kind == super::KIND_STEP { 0 } else { 6 },
            stop_reason: "ci".into(),
            throttled: false,
            clock_event_reasons: "0x0000000000000000".into(),
            sm_clock_mhz: Some(1980.0),
            mem_clock_mhz: Some(3201.0),
            power_w: Some(412.5),
            temp_c: Some(48.0),
            gpu_util_pct: None,
            gpm_sm_util_pct: None,
            gpm_dram_bw_util_pct: None,
            gpm_nvlink_rx_mib_s: None,
            gpm_nvlink_tx_mib_s: None,
            gpm_cell_share_pct: None,
            host_scale: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_rows::row;
    use super::*;

    fn sample_rows() -> Vec<Row> {
        let mut floor = row("floor", "floor", "empty-kernel", 1, "step_us", 4.5);
        floor.throttled = true;
        floor.clock_event_reasons = "0x0000000000000004".into();
        floor.stop_reason = "ci, with \"quotes\"".into(); // must survive CSV quoting
        vec![
            row("prep", "dspark_draft_block", "graph", 4, "step_us", 21.25),
            row(
                "prep",
                "dspark_draft_block",
                "graph",
                4,
                "floor_multiple",
                4.72,
            ),
            floor,
        ]
    }

    fn write_file(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
        let path = dir.path().join("metaprep.csv");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn error_of(path: &Path) -> String {
        format!("{:#}", read_rows(path).unwrap_err())
    }

    fn good_text() -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &sample_rows()).unwrap();
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn columns_match_the_row_serialisation() {
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.serialize(&sample_rows()[0]).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
    }

    #[test]
    fn rows_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/metaprep.csv");
        write_rows(&path, &sample_rows()).unwrap();
        assert_eq!(read_rows(&path).unwrap(), sample_rows());
    }

    #[test]
    fn too_few_samples_read_back_without_a_ci() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let mut rows = sample_rows();
        rows[0].samples = 1;
        rows[0].stop_reason = "fixed".into();
        (rows[0].ci_lo, rows[0].ci_hi) = (rows[0].median, rows[0].median);
        write_rows(&path, &rows).unwrap();
        let back = read_rows(&path).unwrap();
        assert!(back[0].ci_lo.is_nan() && back[0].ci_hi.is_nan());
        assert_eq!(
            back[1..],
            rows[1..],
            "rows with enough samples are untouched"
        );
    }

    #[test]
    fn bandwidth_rows_read_back_with_their_units() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let gb_s = row("prep", "dsa_target_verify", "fused", 256, "gb_s", 3125.5);
        let mut bytes = row("prep", "dsa_target_verify", "fused", 256, "bytes", 42e6);
        // As the sweep writes it: exact, derived, no samples of its own.
        (bytes.p10, bytes.p90, bytes.ci_lo, bytes.ci_hi) = (f64::NAN, f64::NAN, 42e6, 42e6);
        (bytes.samples, bytes.stop_reason) = (0, "derived".into());
        let copy = row("floor", "floor", "d2d-copy", 1, "gb_s", 4100.0);
        write_rows(&path, &[gb_s.clone(), bytes, copy.clone()]).unwrap();
        let back = read_rows(&path).unwrap();
        assert_eq!((&back[0], &back[2]), (&gb_s, &copy));
        assert_eq!(
            (back[0].unit.as_str(), back[1].unit.as_str()),
            ("GB/s", "B")
        );
        assert_eq!(
            (back[1].median, back[1].ci_lo, back[1].ci_hi),
            (42e6, 42e6, 42e6),
            "a derived row keeps its interval without samples"
        );
        assert!(back[1].p10.is_nan() && back[1].p90.is_nan());
    }

    #[test]
    fn no_rows_still_writes_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().trim_end(),
            COLUMNS.join(",")
        );
        assert!(read_rows(&path).unwrap().is_empty());
    }

    #[test]
    fn columns_in_another_order_are_read_by_name() {
        let text = good_text();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let headers = reader.headers().unwrap().clone();
        let mut writer = csv::Writer::from_writer(Vec::new());
        let reversed: Vec<&str> = headers.iter().rev().collect();
        writer.write_record(&reversed).unwrap();
        for record in reader.records() {
            let record = record.unwrap();
            writer
                .write_record(record.iter().rev().collect::<Vec<_>>())
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(
            &dir,
            &String::from_utf8(writer.into_inner().unwrap()).unwrap(),
        );
        assert_eq!(read_rows(&path).unwrap(), sample_rows());
    }

    /// `text` (a results CSV) without the columns named.
    fn without_columns(text: &str, names: &[&str]) -> String {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let headers = reader.headers().unwrap().clone();
        let keep: Vec<usize> = (0..headers.len())
            .filter(|&i| !names.contains(&&headers[i]))
            .collect();
        assert_eq!(keep.len(), headers.len() - names.len(), "{names:?}");
        let kept = |record: &csv::StringRecord| -> Vec<String> {
            keep.iter().map(|&i| record[i].to_string()).collect()
        };
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.write_record(kept(&headers)).unwrap();
        for record in reader.records() {
            writer.write_record(kept(&record.unwrap())).unwrap();
        }
        String::from_utf8(writer.into_inner().unwrap()).unwrap()
    }

    #[test]
    fn a_csv_from_before_rounds_reads_with_zero_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let old = without_columns(&good_text(), &["rounds"]);
        assert!(!old.lines().next().unwrap().contains("rounds"));
        assert!(sample_rows().iter().all(|r| r.rounds == 6));
        let rows = read_rows(&write_file(&dir, &old)).unwrap();
        let without_rounds: Vec<Row> = sample_rows()
            .into_iter()
            .map(|r| Row { rounds: 0, ..r })
            .collect();
        assert_eq!(rows, without_rounds);
    }

    const GPM_COLUMNS: [&str; 5] = [
        "gpm_sm_util_pct",
        "gpm_dram_bw_util_pct",
        "gpm_nvlink_rx_mib_s",
        "gpm_nvlink_tx_mib_s",
        "gpm_cell_share_pct",
    ];

    fn with_gpm(row: Row) -> Row {
        Row {
            gpm_sm_util_pct: Some(87.5),
            gpm_dram_bw_util_pct: Some(41.25),
            gpm_nvlink_rx_mib_s: Some(0.0),
            gpm_nvlink_tx_mib_s: None, // a metric NVML did not give stays empty
            gpm_cell_share_pct: Some(62.5),
            ..row
        }
    }

    #[test]
    fn gpm_columns_round_trip_and_empty_ones_read_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let rows: Vec<Row> = sample_rows().into_iter().map(with_gpm).collect();
        write_rows(&path, &rows).unwrap();
        assert_eq!(read_rows(&path).unwrap(), rows);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text
            .lines()
            .next()
            .unwrap()
            .ends_with(&GPM_COLUMNS.join(",")));
        assert!(text
            .lines()
            .nth(1)
            .unwrap()
            .ends_with(",87.5,41.25,0.0,,62.5"));
    }

    #[test]
    fn a_csv_from_before_gpm_reads_with_empty_gpm() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<Row> = sample_rows().into_iter().map(with_gpm).collect();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &rows).unwrap();
        let old = without_columns(&std::fs::read_to_string(&path).unwrap(), &GPM_COLUMNS);
        assert!(!old.contains("gpm_"));
        assert_eq!(read_rows(&write_file(&dir, &old)).unwrap(), sample_rows());
        // Before rounds and before GPM at once.
        let older = without_columns(&old, &["rounds"]);
        assert!(read_rows(&write_file(&dir, &older))
            .unwrap()
            .iter()
            .all(|r| r.rounds == 0 && r.gpm_sm_util_pct.is_none()));
    }

    #[test]
    fn missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.csv");
        let error = error_of(&path);
        assert!(error.contains("nope.csv does not exist"), "{error}");
        assert!(error.contains("metaprep sweep --out"), "{error}");
    }

    #[test]
    fn empty_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, "\n"));
        assert!(error.contains("is empty"), "{error}");
    }

    #[test]
    fn header_names_missing_and_unexpected_columns() {
        let text = good_text().replacen("median,", "middle,", 1);
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &text));
        assert!(error.contains("line 1"), "{error}");
        assert!(error.contains("missing column(s) `median`"), "{error}");
        assert!(error.contains("unexpected column(s) `middle`"), "{error}");
    }

    #[test]
    fn foreign_csv_is_refused_with_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, "a,b\n1,2\n"));
        assert!(error.contains("unexpected column(s) `a`, `b`"), "{error}");
        assert!(error.contains("`kind`"), "{error}");
    }

    #[test]
    fn truncated_last_line_is_reported() {
        let text = good_text();
        let cut = &text[..text.trim_end().rfind(',').unwrap() - 10];
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, cut));
        assert!(error.contains("line 4"), "{error}");
        assert!(
            error.contains("the last line has no final newline (23 of 30 fields)"),
            "{error}"
        );
    }

    /// A file cut inside the last field of its last line has every field, and the cut
    /// value still parses (`72.0` read as `7`): only the missing newline tells.
    #[test]
    fn a_last_line_cut_inside_its_last_value_is_refused() {
        let mut rows = sample_rows();
        rows[2].gpm_cell_share_pct = Some(72.0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(",72.0\n"), "{text}");
        let cut = &text[..text.len() - 4];
        let error = error_of(&write_file(&dir, cut));
        assert!(
            error.contains(
                "metaprep.csv line 4: the last line has no final newline (30 of 30 fields)"
            ),
            "{error}"
        );
        // A header alone, cut before its newline, is refused too.
        let header = text.lines().next().unwrap();
        let error = error_of(&write_file(&dir, header));
        assert!(
            error.contains("line 1: the file ends inside its header"),
            "{error}"
        );
    }

    #[test]
    fn unknown_names_are_refused_naming_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let text = good_text();
        let cases = [
            (
                ",graph,4,5,",
                ",graphs,4,5,",
                "line 2: prep dspark_draft_block/graphs",
                "column `arm`: unknown arm 'graphs'",
            ),
            (
                "prep,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "prep,dspark_draft_block,graph,4,5,tp3,,false,step_us",
                "line 2",
                "column `layout`: `tp3` is not a layout",
            ),
            (
                "prep,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "prep,dspark,graph,4,5,tp1,,false,step_us",
                "line 2",
                "column `family`: unknown family 'dspark'",
            ),
            (
                "prep,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "bench,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "line 2",
                "column `kind`: `bench` is not a kind",
            ),
            (
                "floor,floor,empty-kernel",
                "floor,floor,empty-kernels",
                "line 4",
                "column `arm`: unknown floor item 'empty-kernels'",
            ),
            (
                "floor,floor,empty-kernel",
                "floor,prep,empty-kernel",
                "line 4",
                "column `family`: `prep` is not a floor row's family",
            ),
        ];
        for (from, to, line, why) in cases {
            assert!(text.contains(from), "{from}");
            let error = error_of(&write_file(&dir, &text.replacen(from, to, 1)));
            assert!(error.contains(line) && error.contains(why), "{to}: {error}");
        }
        // A step row's family names the step's pair, or a what-if host scale of it.
        let mut step = row("step", STEP_FAMILY, "graph", 1, "itl_us", 100.0);
        step.block_size = 3;
        let mut scaled = step.clone();
        scaled.family = step_family(Drafter::Dspark, 2.0);
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &[step.clone(), scaled.clone()]).unwrap();
        assert_eq!(read_rows(&path).unwrap().len(), 2);
        // EAGLE's step rows name their drafter in the family, and read back as its.
        let mut eagle = step.clone();
        eagle.family = step_family(Drafter::Eagle, 1.0);
        let mut eagle_scaled = step.clone();
        eagle_scaled.family = step_family(Drafter::Eagle, 0.5);
        write_rows(&path, &[step.clone(), eagle.clone(), eagle_scaled.clone()]).unwrap();
        let back = read_rows(&path).unwrap();
        let drafters: Vec<Option<Drafter>> = back.iter().map(|r| drafter_of(&r.family)).collect();
        assert_eq!(
            drafters,
            [
                Some(Drafter::Dspark),
                Some(Drafter::Eagle),
                Some(Drafter::Eagle)
            ]
        );
        assert_eq!(back[2].host_scale, Some(0.5));
        // Rows of this metaprep keep the scale in its column and the family plain.
        let new_form = Row {
            host_scale: Some(0.5),
            ..eagle.clone()
        };
        write_rows(&path, &[step.clone(), eagle.clone(), new_form.clone()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(HOST_SCALE_MARK), "{text}");
        assert_eq!(read_rows(&path).unwrap()[2], new_form);
        assert_eq!(
            new_form.cell_key(),
            back[2].cell_key(),
            "old and new forms: one cell"
        );
        assert_eq!(back[2].family, Drafter::Eagle.step_family());
        assert_eq!(back[2].cell_family(), eagle_scaled.family);
        assert_eq!(
            completed_cells(&back).len(),
            3,
            "the two drafters' rows are different cells"
        );
        for bad in [
            "dspark",
            "dspark+dsa_target_verify host xfast",
            "eagle",
            "eagle+dsa_target_verify",
        ] {
            scaled.family = bad.into();
            write_rows(&path, &[step.clone(), scaled.clone()]).unwrap();
            let error = error_of(&path);
            assert!(
                error.contains("line 3") && error.contains("is not a step row's family"),
                "{error}"
            );
        }
        // The harness row and the host-speed reference are floor rows, and an arm's time per
        // unit of host speed is a metric of its own.
        let harness = row("floor", "floor", HARNESS, 1, "overhead_us", 0.2);
        let host = row("floor", "floor", HOST_REFERENCE, 1, "step_us", 21.0);
        let twin = row(
            "prep",
            "dsa_decode",
            "eager-sync",
            8,
            "host_issue_us_per_host_ref",
            0.4,
        );
        write_rows(&path, &[harness, host, twin]).unwrap();
        assert_eq!(read_rows(&path).unwrap().len(), 3);
    }

    #[test]
    fn a_cells_metric_twice_is_refused_naming_both_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let mut rows = sample_rows();
        rows.push(rows[0].clone());
        write_rows(&path, &rows).unwrap();
        let error = error_of(&path);
        assert!(
            error.contains("line 5: prep dspark_draft_block/graph bs=4 block=5 tp1 step_us is on line 2 already"),
            "{error}"
        );
    }

    #[test]
    fn a_median_outside_its_interval_and_impossible_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let good = row("prep", "dsa_decode", "graph", 8, "step_us", 20.0);
        type Spoil = fn(&mut Row);
        let cases: [(Spoil, &str); 9] = [
            (|r| r.p10 = 30.0, "columns `p10`, `p90`: 30 <= "),
            (|r| r.p90 = f64::NAN, "columns `p10`, `p90`"),
            (|r| r.block_size = 0, "column `block_size`: 0 is no size"),
            (|r| r.ci_lo = 20.5, "20.5 <= 20 <= 20.2 does not hold"),
            (|r| r.ci_hi = 19.0, "19.8 <= 20 <= 19 does not hold"),
            (
                |r| r.median = f64::NAN,
                "column `median`: the median is not a number",
            ),
            (
                |r| r.p90 = f64::INFINITY,
                "column `p90`: inf is not a measurement",
            ),
            (
                |r| r.median = f64::NEG_INFINITY,
                "column `median`: -inf is not a measurement",
            ),
            (|r| r.p10 = -1.0, "column `p10`: -1 us is negative"),
        ];
        for (spoil, why) in cases {
            let mut bad = good.clone();
            spoil(&mut bad);
            write_rows(&path, &[good.clone(), bad]).unwrap();
            let error = error_of(&path);
            assert!(
                error.contains("line 3: prep dsa_decode/graph bs=8") && error.contains(why),
                "{why}: {error}"
            );
        }
        // A derived row (a difference) may be negative, its interval still holds it.
        let mut diff = good.clone();
        (diff.stop_reason, diff.median, diff.ci_lo, diff.ci_hi) =
            ("derived".into(), -2.0, -3.0, -1.0);
        (diff.p10, diff.p90) = (-3.5, -0.5);
        write_rows(&path, &[diff.clone()]).unwrap();
        assert_eq!(read_rows(&path).unwrap(), vec![diff.clone()]);
        diff.median = -0.5;
        diff.ci_hi = -1.0;
        write_rows(&path, &[diff]).unwrap();
        assert!(error_of(&path).contains("does not hold"));
    }

    #[test]
    fn short_line_in_the_middle_is_not_called_truncation() {
        let text = good_text();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = "prep,x,graph";
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &(lines.join("\n") + "\n")));
        assert!(
            error.contains("line 3: 3 fields where the header has 30"),
            "{error}"
        );
    }

    #[test]
    fn unparsable_number_names_line_column_and_value() {
        let text = good_text().replacen(",21.25,", ",21.2x5,", 1);
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &text));
        assert!(
            error.contains("line 2, column `median`: cannot read `21.2x5` as a number"),
            "{error}"
        );
    }

    #[test]
    fn unparsable_count_and_flag_are_reported() {
        let text = good_text().replacen(",500,", ",-3,", 1);
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(&write_file(&dir, &text));
        assert!(
            error.contains("column `samples`: cannot read `-3` as a whole number"),
            "{error}"
        );
        let text = good_text().replacen(",false,", ",maybe,", 1);
        let error = error_of(&write_file(&dir, &text));
        assert!(error.contains("column `emulated`"), "{error}");
        assert!(error.contains("`true` or `false`"), "{error}");
    }

    #[test]
    fn failed_write_leaves_the_old_file_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &sample_rows()).unwrap();
        // Block write_atomic's temporary file with a directory of the same name, so the
        // write fails even for root (permission tricks do not).
        let tmp = dir
            .path()
            .join(format!(".metaprep.csv.tmp{}", std::process::id()));
        std::fs::create_dir(&tmp).unwrap();
        assert!(write_rows(&path, &sample_rows()[..1]).is_err());
        assert_eq!(read_rows(&path).unwrap(), sample_rows());
    }

    #[test]
    fn completed_cells_group_metrics_of_a_cell() {
        let cells = completed_cells(&sample_rows());
        assert_eq!(cells.len(), 2);
        assert!(cells.contains(&sample_rows()[0].cell_key()));
        let mut other = sample_rows()[0].clone();
        other.batch_size = 8;
        assert!(!cells.contains(&other.cell_key()));
    }

    #[test]
    fn resume_starts_empty_without_a_file_but_not_from_a_damaged_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(rows_for_resume(&dir.path().join("metaprep.csv"))
            .unwrap()
            .is_empty());
        let path = write_file(&dir, "garbage\n");
        assert!(rows_for_resume(&path).is_err());
    }
}
