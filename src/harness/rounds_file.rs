//! `rounds.csv` kept current during a sweep: every round's median of every cell and metric,
//! and the process that measured it ([`RoundLine`]), rewritten (atomically) after each round.
//! On `--resume` the lines of the cell groups the run keeps are carried over, so the file
//! always covers the same cells as the results CSV; a file from before the `process` column
//! reads with process 0.

use super::rows::RoundLine;
use crate::results::csv::{
    check_cell_key, read_table, write_records, CellKey, CELL_KEY_COLUMNS, COLUMNS,
};
use crate::results::run_dir::ROUNDS_CSV;
use anyhow::{Context, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// `rounds.csv`'s header: the cell key's columns as the results CSV names them, then
/// [`RoundLine`]'s own.
pub fn round_columns() -> Vec<&'static str> {
    COLUMNS[..CELL_KEY_COLUMNS]
        .iter()
        .copied()
        .chain(["metric", "round", "median", "samples", PROCESS_COLUMN])
        .collect()
}

/// The column a metaprep before worker processes did not write.
const PROCESS_COLUMN: &str = "process";

/// One line of the file as read back, by column name: the cell key's fields, then the
/// line's own ([`RoundLine`] writes the cell nested, which the reader cannot read back).
#[derive(serde::Deserialize)]
struct Record {
    kind: String,
    family: String,
    arm: String,
    batch_size: u32,
    block_size: u32,
    layout: String,
    metric: String,
    round: u32,
    median: f64,
    samples: u64,
    #[serde(default)]
    process: u32,
}

impl From<Record> for RoundLine {
    fn from(r: Record) -> Self {
        RoundLine {
            // `family` as rounds.csv names the cell (any host scale after it): its key all the
            // same, as keys compare the cell family.
            cell: CellKey::new(
                &r.kind,
                &r.family,
                &r.arm,
                (r.batch_size, r.block_size),
                &r.layout,
            ),
            metric: r.metric,
            round: r.round,
            median: r.median,
            samples: r.samples,
            process: r.process,
        }
    }
}

pub struct RoundsFile {
    path: PathBuf,
    /// Lines an earlier invocation wrote for the cells this one keeps.
    kept: Vec<RoundLine>,
}

impl RoundsFile {
    /// The rounds file in `dir`. On `resume`, an earlier file's lines of the cells in `keep`
    /// are kept (the others' groups are measured again); a file that is not a rounds file
    /// is an error, never overwritten.
    pub fn open(dir: &Path, resume: bool, keep: &HashSet<CellKey>) -> Result<Self> {
        let path = dir.join(ROUNDS_CSV);
        let kept = if resume && path.exists() {
            read_kept(&path, keep).with_context(|| {
                format!(
                    "reading {} to resume it (move it away to resume without it)",
                    path.display()
                )
            })?
        } else {
            Vec::new()
        };
        Ok(Self { path, kept })
    }

    /// Rewrites the file: the kept lines, then `lines`.
    pub fn write(&self, lines: &[RoundLine]) -> Result<()> {
        write_records(
            &self.path,
            &round_columns(),
            self.kept.iter().chain(lines),
            |l| format!("round {} of {} {}", l.round, l.cell, l.metric),
        )
    }
}

fn read_kept(path: &Path, keep: &HashSet<CellKey>) -> Result<Vec<RoundLine>> {
    // Files written before worker processes lack `process`: they read as process 0.
    let lines: Vec<(u64, Record)> = read_table(path, &round_columns(), &["process"])?;
    let mut kept = Vec::new();
    for (at, record) in lines {
        let line = RoundLine::from(record);
        check_cell_key(&line.cell)
            .map_err(|why| anyhow::anyhow!("{} line {at}: {why}", path.display()))?;
        if keep.contains(&line.cell) {
            kept.push(line);
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(arm: &str, round: u32) -> RoundLine {
        RoundLine {
            cell: CellKey::new("prep", "dsa_decode", arm, (8, 5), "tp1"),
            metric: "step_us".into(),
            round,
            median: 2.0 + f64::from(round),
            samples: 10,
            process: round.div_ceil(2),
        }
    }

    #[test]
    fn lines_are_written_under_the_cell_key_columns() {
        let dir = tempfile::tempdir().unwrap();
        let file = RoundsFile::open(dir.path(), false, &HashSet::new()).unwrap();
        file.write(&[line("graph", 1), line("graph", 3)]).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(ROUNDS_CSV)).unwrap(),
            "kind,family,arm,batch_size,block_size,layout,metric,round,median,samples,process\n\
             prep,dsa_decode,graph,8,5,tp1,step_us,1,3.0,10,1\n\
             prep,dsa_decode,graph,8,5,tp1,step_us,3,5.0,10,2\n"
        );
    }

    #[test]
    fn a_file_from_before_the_process_column_resumes_with_process_0() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(ROUNDS_CSV),
            "kind,family,arm,batch_size,block_size,layout,metric,round,median,samples\n\
             prep,dsa_decode,graph,8,5,tp1,step_us,1,3.0,10\n",
        )
        .unwrap();
        let keep: HashSet<CellKey> = [line("graph", 1).cell].into();
        let resumed = RoundsFile::open(dir.path(), true, &keep).unwrap();
        assert_eq!(resumed.kept.len(), 1);
        assert_eq!((resumed.kept[0].round, resumed.kept[0].process), (1, 0));
    }

    #[test]
    fn resume_keeps_the_kept_cells_lines_and_drops_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let first = RoundsFile::open(dir.path(), false, &HashSet::new()).unwrap();
        first
            .write(&[line("graph", 1), line("fused", 1), line("graph", 2)])
            .unwrap();
        let keep: HashSet<CellKey> = [line("graph", 1).cell].into();
        let resumed = RoundsFile::open(dir.path(), true, &keep).unwrap();
        resumed.write(&[line("fused", 1)]).unwrap();
        let text = std::fs::read_to_string(dir.path().join(ROUNDS_CSV)).unwrap();
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            rows,
            [
                "prep,dsa_decode,graph,8,5,tp1,step_us,1,3.0,10,1",
                "prep,dsa_decode,graph,8,5,tp1,step_us,2,4.0,10,1",
                "prep,dsa_decode,fused,8,5,tp1,step_us,1,3.0,10,1",
            ]
        );
        // Without --resume an earlier file is replaced, not carried over.
        let fresh = RoundsFile::open(dir.path(), false, &keep).unwrap();
        fresh.write(&[]).unwrap();
        let text = std::fs::read_to_string(dir.path().join(ROUNDS_CSV)).unwrap();
        assert_eq!(text.lines().count(), 1);
    }

    #[test]
    fn resuming_over_a_file_that_is_not_a_rounds_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ROUNDS_CSV);
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        let err = RoundsFile::open(dir.path(), true, &HashSet::new())
            .err()
            .expect("a foreign file is refused");
        let text = format!("{err:#}");
        assert!(
            text.contains("rounds.csv") && text.contains("header"),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a,b\n1,2\n");
        // A damaged line is named.
        std::fs::write(
            &path,
            "kind,family,arm,batch_size,block_size,layout,metric,round,median,samples\n\
             prep,dsa_decode,graph,eight,5,tp1,step_us,1,3.0,10\n",
        )
        .unwrap();
        let err = RoundsFile::open(dir.path(), true, &HashSet::new())
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        // A file cut while it was written, and a cell no metaprep writes.
        let good = "kind,family,arm,batch_size,block_size,layout,metric,round,median,samples\n\
                    prep,dsa_decode,graph,8,5,tp1,step_us,1,3.0,10\n";
        for (text, why) in [
            (
                &good[..good.len() - 3],
                "line 2: the last line has no final newline",
            ),
            (
                &good.replace(",tp1,", ",tp9,")[..],
                "line 2: column `layout`: `tp9`",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = RoundsFile::open(dir.path(), true, &HashSet::new())
                .err()
                .unwrap();
            assert!(format!("{err:#}").contains(why), "{err:#}");
        }
    }
}
