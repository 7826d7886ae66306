//! `ranks.csv`: every rank's rows of a run with real ranks, the results CSV's columns with a
//! `rank` column in front. `metaprep.csv` holds one row set per cell (the slowest rank's,
//! see [`slowest_rank_rows`]), so every reader of it works unchanged.

use crate::results::csv::{
    check_header, parse_row, read_records, write_records, CellKey, Row, COLUMNS, OPTIONAL_COLUMNS,
};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::path::Path;

pub const RANKS_CSV: &str = "ranks.csv";

/// One rank's row.
#[derive(Debug, Clone, PartialEq)]
pub struct RankRow {
    pub rank: u32,
    pub row: Row,
}

pub fn write_rank_rows(path: &Path, rows: &[RankRow]) -> Result<()> {
    let header: Vec<&str> = std::iter::once("rank")
        .chain(COLUMNS.iter().copied())
        .collect();
    let records = rows.iter().map(|r| (r.rank, &r.row));
    write_records(path, &header, records, |(rank, row)| {
        format!("rank {rank} of {}", row.cell_key())
    })
}

pub fn read_rank_rows(path: &Path) -> Result<Vec<RankRow>> {
    let name = path.display().to_string();
    let table = read_records(path)?;
    if table.headers.get(0) != Some("rank") {
        bail!("{name} line 1: it does not start with a `rank` column");
    }
    let row_headers: csv::StringRecord = table.headers.iter().skip(1).collect();
    check_header(&name, &row_headers, COLUMNS, OPTIONAL_COLUMNS)?;
    table
        .records
        .iter()
        .map(|(line, record)| {
            let rank = record[0].parse().map_err(|_| {
                anyhow::anyhow!(
                    "{name} line {line}, column `rank`: `{}` is not a rank: fix or delete that line",
                    &record[0]
                )
            })?;
            let rest: csv::StringRecord = record.iter().skip(1).collect();
            let row = parse_row(&name, *line, &row_headers, &rest)?;
            Ok(RankRow { rank, row })
        })
        .collect()
}

/// A rank and its `step_us` median.
type RankMedian = (u32, f64);

/// The metric that decides which rank is slowest in a cell.
const SLOWEST_BY: &str = "step_us";

/// Per cell, the rows of its slowest rank (the highest `step_us` median; the step waits for
/// it), and that rank per cell, in first-seen cell order.
pub fn slowest_rank_rows(rows: &[RankRow]) -> (Vec<Row>, Vec<(CellKey, u32)>) {
    // Cells in first-seen order, each with its rows (indices into `rows`) and its slowest
    // rank so far: one pass over the rows, then one over each cell's own.
    let mut cells: Vec<(CellKey, Vec<usize>, Option<RankMedian>)> = Vec::new();
    let mut index: BTreeMap<CellKey, usize> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        let key = r.row.cell_key();
        let at = *index.entry(key.clone()).or_insert_with(|| {
            cells.push((key, Vec::new(), None));
            cells.len() - 1
        });
        let (_, members, slowest) = &mut cells[at];
        members.push(i);
        if r.row.metric == SLOWEST_BY {
            // A NaN median never wins against a number.
            let median = if r.row.median.is_nan() {
                f64::NEG_INFINITY
            } else {
                r.row.median
            };
            if slowest.is_none_or(|(_, m)| median > m) {
                *slowest = Some((r.rank, median));
            }
        }
    }
    let mut picked = Vec::new();
    let mut out = Vec::new();
    for (key, members, slowest) in cells {
        // A cell without step_us (none today) keeps rank 0's rows.
        let rank = slowest.map_or(0, |(rank, _)| rank);
        out.extend(
            members
                .iter()
                .map(|&i| &rows[i])
                .filter(|r| r.rank == rank)
                .map(|r| r.row.clone()),
        );
        picked.push((key, rank));
    }
    (out, picked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::KIND_STEP;

    fn row(arm: &str, metric: &str, median: f64) -> Row {
        // Without an interval: NaN bounds must survive the file.
        Row {
            layout: "tp2".into(),
            ci_lo: f64::NAN,
            ci_hi: f64::NAN,
            ..crate::results::csv::test_rows::row(
                KIND_STEP,
                "dspark+dsa_target_verify",
                arm,
                1,
                metric,
                median,
            )
        }
    }

    fn rank_rows() -> Vec<RankRow> {
        let r = |rank, arm, metric, v| RankRow {
            rank,
            row: row(arm, metric, v),
        };
        vec![
            r(0, "eager-sync", "step_us", 100.0),
            r(0, "eager-sync", "gap_us", 10.0),
            r(1, "eager-sync", "step_us", 120.0),
            r(1, "eager-sync", "gap_us", 30.0),
            r(0, "graph", "step_us", 90.0),
            r(0, "graph", "gap_us", 1.0),
            r(1, "graph", "step_us", 80.0),
            r(1, "graph", "gap_us", 2.0),
        ]
    }

    #[test]
    fn a_nan_step_never_wins_and_a_cell_without_steps_keeps_rank_0() {
        let r = |rank, arm, metric, v| RankRow {
            rank,
            row: row(arm, metric, v),
        };
        let rows = vec![
            r(0, "graph", "gap_us", 4.0),
            r(2, "fused", "gap_us", 7.0),
            r(1, "graph", "step_us", f64::NAN),
            r(2, "graph", "step_us", 50.0),
            r(0, "fused", "gap_us", 5.0),
            r(2, "graph", "gap_us", 6.0),
        ];
        let (out, picked) = slowest_rank_rows(&rows);
        assert_eq!(picked.iter().map(|p| p.1).collect::<Vec<_>>(), [2, 0]);
        let medians: Vec<f64> = out.iter().map(|r| r.median).collect();
        assert_eq!(
            medians,
            [50.0, 6.0, 5.0],
            "graph's rank-2 rows, then fused's rank 0"
        );
    }

    #[test]
    fn each_cell_takes_its_slowest_ranks_rows() {
        let (rows, picked) = slowest_rank_rows(&rank_rows());
        assert_eq!(picked.iter().map(|p| p.1).collect::<Vec<_>>(), [1, 0]);
        let gaps: Vec<f64> = rows
            .iter()
            .filter(|r| r.metric == "gap_us")
            .map(|r| r.median)
            .collect();
        assert_eq!(gaps, [30.0, 1.0]);
        assert_eq!(rows.len(), 4);
    }

    #[test]
    fn rank_rows_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RANKS_CSV);
        write_rank_rows(&path, &rank_rows()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("rank,kind,family,"), "{text}");
        let back = read_rank_rows(&path).unwrap();
        assert_eq!(back.len(), 8);
        for (a, b) in back.iter().zip(rank_rows()) {
            assert_eq!(a.rank, b.rank);
            assert_eq!(a.row.cell_key(), b.row.cell_key());
            assert_eq!(
                (a.row.median, a.row.sm_clock_mhz),
                (b.row.median, b.row.sm_clock_mhz)
            );
            assert!(a.row.ci_lo.is_nan());
        }
    }

    #[test]
    fn a_cut_or_unknown_rank_row_is_refused_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RANKS_CSV);
        write_rank_rows(&path, &rank_rows()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() - 3]).unwrap();
        let error = format!("{:#}", read_rank_rows(&path).unwrap_err());
        assert!(
            error.contains("ranks.csv line 9: the last line has no final newline"),
            "{error}"
        );
        std::fs::write(&path, text.replacen(",graph,", ",graphs,", 1)).unwrap();
        let error = format!("{:#}", read_rank_rows(&path).unwrap_err());
        assert!(
            error.contains("line 6: step") && error.contains("unknown arm 'graphs'"),
            "{error}"
        );
        std::fs::write(&path, text.replacen("\n0,", "\nzero,", 1)).unwrap();
        let error = format!("{:#}", read_rank_rows(&path).unwrap_err());
        assert!(error.contains("line 2, column `rank`: `zero`"), "{error}");
    }
}
