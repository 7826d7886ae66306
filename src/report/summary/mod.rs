//! `summary.md`: a run's results as a pull request's speed section, the answer first: one
//! line per layout (per family for a sweep) with graph replay's change against eager-sync at
//! the smallest batch and middle block size and its interval; then the run, its caveats once,
//! a compact table of each arm's paired change against eager-sync, and the long tables after.
//!
//! Changes of a decode step against `eager-sync` are the change of the median with a 95%
//! interval computed as in `compare` (MOVER on the log scale, from each median's 95%
//! interval). A sweep's prep arms are set against `eager-sync` by its paired rows instead:
//! `step_ratio_vs_eager_sync`, each arm's step time over eager-sync's formed inside each
//! round, where both ran back to back (see [`crate::runs::sweep::rounds`]), with the
//! verdict `compare` would give at its default threshold. The host-read cost
//! (eager-sync − eager-device) is the sweep's paired `read_cost_us`, or for a run without
//! one the difference of the medians with its interval by MOVER. Every table is sorted by
//! fixed keys, so the same rows always give the same text.
//!
//! One section a file, in the order the summary has them: `headline` (the answer first),
//! `header` (environment, command line, callouts and notes), `against` (the compact tables
//! against eager-sync, and graph-upload against graph), `steps` (the decode-step tables),
//! `preps` (the metadata-prep tables) and `floors` (the floor table and the read behind
//! work); `index` is the one pass over the rows every section asks, `figures` the cell
//! figures several sections print (changes, read costs, differences by MOVER).

mod against;
mod figures;
mod floors;
mod header;
mod headline;
mod index;
mod preps;
pub mod read_paths;
mod steps;

#[cfg(test)]
mod fixtures;

pub(crate) use figures::{change_text, read_cost};
pub use header::{portable_command, ENVIRONMENT_LINE};
pub(crate) use index::Index;

use crate::results::atomic::write_atomic;
use crate::results::csv::Row;
use crate::results::env::EnvRecord;
use anyhow::Result;
use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

pub const SUMMARY_FILE: &str = "summary.md";
/// Every block size's tables, beside the summary that shows the middle one.
pub const TABLES_FILE: &str = "tables.md";

/// Writes `<dir>/summary.md` (the middle block size of each group, sized for a pull request)
/// and `<dir>/tables.md` (every block size) atomically and returns their paths.
pub fn write_summary(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<[PathBuf; 2]> {
    let (summary, tables) = (dir.join(SUMMARY_FILE), dir.join(TABLES_FILE));
    write_atomic(&summary, render_compact(rows, env).as_bytes())?;
    write_atomic(&tables, render_summary(rows, env).as_bytes())?;
    Ok([summary, tables])
}

/// The summary of each group's middle block size (the headline's; the lower of two middles),
/// every floor row kept: a run's answer in a page, where the whole holds each block's tables
/// ([`render_summary`], `tables.md`).
pub fn render_compact(rows: &[Row], env: &EnvRecord) -> String {
    let middle = middle_blocks(rows);
    let kept: Vec<Row> = (rows.iter())
        .filter(|r| r.kind == crate::results::csv::KIND_FLOOR || middle.contains(&group_block(r)))
        .cloned()
        .collect();
    let mut out = String::new();
    write_summary_text(&mut out, &kept, env, Detail::Compact)
        .expect("writing to a String cannot fail");
    let what = match has_preps(rows) {
        true => {
            "Every block size's tables, each prep's cost over its floor with its bandwidth, \
                 and the read paths"
        }
        false if kept.len() < rows.len() => "Every block size's tables",
        false => return out,
    };
    out.push_str(&format!("\n{what}: `{TABLES_FILE}` beside this file.\n"));
    out
}

/// How much a summary holds: the page a pull request quotes, or every table.
#[derive(Clone, Copy, PartialEq)]
enum Detail {
    Compact,
    Full,
}

/// A sweep's rows: their per-prep tables and read paths go to `tables.md` alone.
fn has_preps(rows: &[Row]) -> bool {
    rows.iter()
        .any(|r| r.kind == crate::results::csv::KIND_PREP)
}

/// A row's group (kind, family, layout) and block size.
fn group_block(r: &Row) -> (String, String, String, u32) {
    (
        r.kind.clone(),
        r.family.clone(),
        r.layout.clone(),
        r.block_size,
    )
}

/// Each group's middle block size, as [`group_block`]s.
fn middle_blocks(rows: &[Row]) -> Vec<(String, String, String, u32)> {
    let mut by_group: std::collections::BTreeMap<(String, String, String), Vec<u32>> =
        Default::default();
    for r in rows
        .iter()
        .filter(|r| r.kind != crate::results::csv::KIND_FLOOR)
    {
        let blocks = by_group
            .entry((r.kind.clone(), r.family.clone(), r.layout.clone()))
            .or_default();
        if !blocks.contains(&r.block_size) {
            blocks.push(r.block_size);
        }
    }
    (by_group.into_iter())
        .map(|((kind, family, layout), mut blocks)| {
            blocks.sort_unstable();
            let middle = blocks[(blocks.len() - 1) / 2];
            (kind, family, layout, middle)
        })
        .collect()
}

pub fn render_summary(rows: &[Row], env: &EnvRecord) -> String {
    let mut out = String::new();
    write_summary_text(&mut out, rows, env, Detail::Full).expect("writing to a String cannot fail");
    out
}

fn write_summary_text(
    out: &mut String,
    rows: &[Row],
    env: &EnvRecord,
    detail: Detail,
) -> fmt::Result {
    let index = Index::new(rows);
    headline::write_headlines(out, &index)?;
    header::write_environment(out, env)?;
    header::write_callouts(out, rows, env)?;
    if rows.is_empty() {
        writeln!(out, "_This run has no results._\n")?;
        return header::write_notes(out, env, true);
    }
    against::write_against_eager_sync(out, &index)?;
    against::write_upload_against_graph(out, &index)?;
    steps::write_steps(out, &index)?;
    if detail == Detail::Full || !has_preps(rows) {
        preps::write_preps(out, &index)?;
        read_paths::write_read_paths(out, &index)?;
    }
    floors::write_floors(out, &index)?;
    header::write_notes(out, env, detail == Detail::Full)
}

#[cfg(test)]
mod tests {
    use crate::report::format::{fmt_interval, fmt_num, fmt_pct, table_cell};

    use crate::results::env::code;

    use crate::report::summary::render_summary;

    use crate::results::env::test_env;

    #[test]
    fn numbers_get_digits_by_size() {
        assert_eq!(fmt_num(351_476.4), "351,476");
        assert_eq!(fmt_num(2280.0), "2,280");
        assert_eq!(fmt_num(-1234.0), "-1,234");
        assert_eq!(fmt_num(412.4), "412");
        assert_eq!(fmt_num(45.23), "45.2");
        assert_eq!(fmt_num(4.5), "4.50");
        assert_eq!(fmt_num(f64::NAN), "n/a");
        assert_eq!(fmt_pct(13.44), "+13.4%");
        assert_eq!(fmt_pct(-2.0), "-2.0%");
        assert_eq!(fmt_interval(-1.04, 2.96), "[-1.0, +3.0]");
    }

    #[test]
    fn markdown_escapes_hold() {
        assert_eq!(table_cell("a|b"), "a\\|b");
        assert_eq!(code("metaprep sweep"), "`metaprep sweep`");
        // CommonMark strips one space from each end only when both ends have one.
        assert_eq!(code("echo `x`"), "`` echo `x` ``");
    }

    #[test]
    fn no_rows_says_so() {
        let text = render_summary(&[], &test_env());
        assert!(text.contains("**Environment:** 1× NVIDIA H200"), "{text}");
        assert!(text.contains("_This run has no results._"), "{text}");
    }
}
