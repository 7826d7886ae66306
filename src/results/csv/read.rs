//! Reading a results CSV into checked [`Row`]s: each line parsed by column name, old rows
//! brought to today's form (or skipped, where no metaprep reads them any more), impossible
//! values and a cell's metric written twice refused with the line named, and the rows a
//! `--resume` starts from.

use super::records::{check_header, describe_field_error, visit_records};
use super::row::{Row, COLUMNS, OPTIONAL_COLUMNS};
use super::validity::check_row;
use crate::stats::summary::MIN_CI_SAMPLES;
use anyhow::{bail, Result};
use std::collections::HashMap;
use std::path::Path;

/// How the metric ends of a row older sweeps wrote of a time over a reference timed in the
/// same round (`step_us_per_host_ref`), which nothing reads now.
const RETIRED_SUFFIXES: [&str; 3] = ["_per_host_ref", "_per_empty_graph", "_per_empty_graph_2"];

/// Whether `metric` is a row older sweeps wrote that is skipped on reading.
fn retired(metric: &str) -> bool {
    RETIRED_SUFFIXES.iter().any(|s| metric.ends_with(s))
}

/// Reads a results CSV written by [`write_rows`](super::write_rows), skipping the rows older
/// sweeps wrote that nothing reads now. Every failure names the file, the line and what to do
/// about it.
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let name = path.display().to_string();
    let (mut rows, mut lines) = (Vec::new(), Vec::new());
    visit_records(
        path,
        |headers| check_header(&name, headers, COLUMNS, OPTIONAL_COLUMNS),
        |headers, line, record| {
            let row = parse_row(&name, line, headers, &record)?;
            if !retired(&row.metric) {
                rows.push(row);
                lines.push(line);
            }
            Ok(())
        },
    )?;
    // Every writer writes a cell's metric once; a second one is two runs' rows mixed.
    let mut seen = HashMap::with_capacity(rows.len());
    for (row, line) in rows.iter().zip(&lines) {
        // Borrowed, so 200k rows cost no key strings; the cell as `CellKey` names it.
        let key = (row.cell_name(), row.metric.as_str());
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
    if row.stop_reason != "derived" && (row.samples as usize) < MIN_CI_SAMPLES {
        row.ci_lo = f64::NAN;
        row.ci_hi = f64::NAN;
    }
    check_row(&row).map_err(|why| format!("{} {}: {why}", row.cell_key(), row.metric))?;
    Ok(row)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::fixtures::{error_of, good_text, sample_rows, write_file};
    use crate::results::csv::test_rows::row;
    use crate::results::csv::*;

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
    fn a_cell_without_a_host_scale_is_the_same_cell_at_scale_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let mut rows = sample_rows();
        let mut scaled = rows[0].clone();
        scaled.host_scale = Some(1.0);
        assert_eq!(scaled.cell_key(), rows[0].cell_key());
        rows.push(scaled.clone());
        write_rows(&path, &rows).unwrap();
        assert!(error_of(&path).contains("is on line 2 already"));
        // At another scale it is another cell.
        scaled.host_scale = Some(2.0);
        let mut rows = sample_rows();
        rows.push(scaled);
        write_rows(&path, &rows).unwrap();
        assert_eq!(read_rows(&path).unwrap().len(), rows.len());
    }

    #[test]
    fn rows_of_a_time_over_a_reference_older_sweeps_wrote_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let mut rows = sample_rows();
        for metric in [
            "host_issue_us_per_host_ref",
            "host_issue_us_per_empty_graph",
            "step_us_per_empty_graph_2",
        ] {
            let mut old = row("prep", "dsa_decode", "graph", 8, metric, 0.7);
            old.unit = "x".into();
            rows.push(old);
        }
        write_rows(&path, &rows).unwrap();
        assert_eq!(read_rows(&path).unwrap(), sample_rows());
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
