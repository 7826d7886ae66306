//! The long metadata-prep tables: per shape, each arm's per-step cost as a multiple of its
//! launch floor, each reading arm's read cost beside eager-device, and each arm's bandwidth
//! with its share of the d2d-copy ceiling.

use super::figures::read_cost;
use super::index::{group_title, Index, SortedCell};
use crate::axes::{Arm, ReadPath};
use crate::report::format::{
    copy_ceiling, floor_of, fmt_num, launch_floors, table_cell, BASELINE_ARM, DEVICE_ARM,
};
use crate::results::csv::{CellKey, Row, KIND_PREP};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write};

/// Every prep group's table, one row per shape (batch, block).
pub(super) fn write_preps(out: &mut String, index: &Index) -> fmt::Result {
    let floors = launch_floors(index.rows);
    let ceiling = copy_ceiling(index.rows);
    for (group, cells) in index.groups(KIND_PREP) {
        let table = PrepTable::of(index, cells);
        writeln!(
            out,
            "### Metadata prep — {}\n",
            group_title(index, KIND_PREP, group)
        )?;
        table.write_caption(out, &floors, &group.family, ceiling)?;
        table.write_header(out)?;
        table.write_rows(out, index, cells, &floors, ceiling)?;
        writeln!(out)?;
    }
    Ok(())
}

/// One prep group's columns: its arms in table order, the reading arms that get a read
/// column, and whether it has bandwidth rows.
struct PrepTable<'a> {
    arms: BTreeSet<(u8, &'a str)>,
    /// The reading arms each get a read column (their step − eager-device's) beside
    /// eager-device; eager-sync's is the "host read".
    readers: Vec<(&'a str, ReadPath)>,
    has_bandwidth: bool,
}

impl<'a> PrepTable<'a> {
    fn of(index: &Index, cells: &'a BTreeSet<SortedCell>) -> Self {
        let arms: BTreeSet<(u8, &str)> = cells
            .iter()
            .map(|c| (c.arm_rank, c.cell.arm.as_str()))
            .collect();
        let has_device = arms.iter().any(|(_, arm)| *arm == DEVICE_ARM);
        let readers: Vec<(&str, ReadPath)> = (arms.iter())
            .filter(|_| has_device)
            .filter_map(|(_, arm)| Some((*arm, arm.parse::<Arm>().ok()?.read_path()?)))
            .collect();
        let has_bandwidth = cells.iter().any(|c| index.get(&c.cell, "gb_s").is_some());
        PrepTable {
            arms,
            readers,
            has_bandwidth,
        }
    }

    /// What the columns are: each class of arm over its launch floor, the read columns, the
    /// bandwidth and its ceiling.
    fn write_caption(
        &self,
        out: &mut String,
        floors: &BTreeMap<&str, &Row>,
        family: &str,
        ceiling: Option<f64>,
    ) -> fmt::Result {
        let has_host_read = self.readers.iter().any(|(arm, _)| *arm == BASELINE_ARM);
        write!(
            out,
            "Per-step cost, median µs (multiple of the arm's launch floor"
        )?;
        // Each class of arm over its like floor; classes sharing an item (graph arms of a run
        // from before the chained empty graphs) are named together.
        let mut read_against: Vec<(&str, Vec<&str>, f64)> = Vec::new();
        for (arms, arm) in [
            ("eager arms", BASELINE_ARM),
            ("graph and graph-upload", "graph"),
            ("fused", "fused"),
        ] {
            if let Some((item, floor)) = floor_of(floors, arm, family) {
                match read_against.iter_mut().find(|(i, _, _)| *i == item) {
                    Some((_, names, _)) => names.push(arms),
                    None => read_against.push((item, vec![arms], floor.median)),
                }
            }
        }
        for (item, arms, us) in read_against {
            write!(out, "; {} over {item} {} µs", arms.join(", "), fmt_num(us))?;
        }
        write!(out, ")")?;
        if has_host_read {
            write!(
                out,
                ". Host read = {BASELINE_ARM} − {DEVICE_ARM}, median µs [95% interval]"
            )?;
        }
        for (arm, path) in self.readers.iter().filter(|(arm, _)| *arm != BASELINE_ARM) {
            write!(out, "; {path} read = {arm} − {DEVICE_ARM}")?;
        }
        if self.has_bandwidth {
            write!(
                out,
                ". Bandwidth = the bytes the prep reads and writes over its device time \
                 (gpu_prep_us), each arm in column order"
            )?;
            match ceiling {
                Some(c) => write!(
                    out,
                    ", with its share of the d2d-copy ceiling, {} GB/s",
                    fmt_num(c)
                )?,
                None => write!(out, " (no d2d-copy ceiling in this run)")?,
            }
        }
        writeln!(out, ".\n")
    }

    /// The table's header and alignment lines.
    fn write_header(&self, out: &mut String) -> fmt::Result {
        write!(out, "| bs | block |")?;
        for (_, arm) in &self.arms {
            write!(out, " {} |", table_cell(arm))?;
        }
        for (arm, path) in &self.readers {
            match *arm {
                BASELINE_ARM => write!(out, " host read (µs) |")?,
                _ => write!(out, " {path} read (µs) |")?,
            }
        }
        if self.has_bandwidth {
            write!(out, " bandwidth (% of copy) |")?;
        }
        writeln!(out)?;
        write!(out, "|---:|---:|{}", "---:|".repeat(self.arms.len()))?;
        write!(out, "{}", "---|".repeat(self.readers.len()))?;
        writeln!(out, "{}", if self.has_bandwidth { "---|" } else { "" })
    }

    /// One table row per shape; any cell of the shape names it, the arm is swapped in.
    fn write_rows(
        &self,
        out: &mut String,
        index: &Index,
        cells: &BTreeSet<SortedCell>,
        floors: &BTreeMap<&str, &Row>,
        ceiling: Option<f64>,
    ) -> fmt::Result {
        let mut shapes: BTreeMap<(u32, u32), &SortedCell> = BTreeMap::new();
        for sorted in cells {
            shapes
                .entry((sorted.batch_size, sorted.block_size))
                .or_insert(sorted);
        }
        for ((bs, block), sorted) in shapes {
            write!(out, "| {bs} | {block} |")?;
            for (_, arm) in &self.arms {
                let cell = sorted.with_arm(arm);
                let floor = floor_of(floors, arm, &cell.family).map(|(_, r)| r.median);
                write!(out, " {} |", prep_cost(index, &cell, floor))?;
            }
            for (arm, _) in &self.readers {
                let text = read_cost(index, &sorted.with_arm(arm)).unwrap_or("—".to_string());
                write!(out, " {text} |")?;
            }
            if self.has_bandwidth {
                let by_arm: Vec<String> = self
                    .arms
                    .iter()
                    .map(|(_, arm)| bandwidth(index, &sorted.with_arm(arm), ceiling))
                    .collect();
                write!(out, " {} |", by_arm.join(" · "))?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// "45.2 (10.0×)": the arm's per-step cost and its multiple of the floor, taken from the
/// cell's `floor_multiple` row when the run wrote one, else computed from the floor rows.
fn prep_cost(index: &Index, cell: &CellKey, floor_us: Option<f64>) -> String {
    let Some(step) = index.get(cell, "step_us") else {
        return "—".to_string();
    };
    let multiple = index
        .get(cell, "floor_multiple")
        .map(|r| r.median)
        .or_else(|| floor_us.filter(|f| *f > 0.0).map(|f| step.median / f));
    let mut text = fmt_num(step.median);
    if let Some(multiple) = multiple {
        let _ = write!(text, " ({multiple:.1}×)");
    }
    if index.throttled(cell) {
        text.push_str(" ⚠");
    }
    text
}

/// "812 GB/s (19.3%)": an arm's achieved bandwidth and its share of the copy ceiling.
fn bandwidth(index: &Index, cell: &CellKey, ceiling: Option<f64>) -> String {
    let Some(row) = index.get(cell, "gb_s") else {
        return "—".to_string();
    };
    let mut text = format!("{} GB/s", fmt_num(row.median));
    if let Some(ceiling) = ceiling {
        let _ = write!(text, " ({}%)", fmt_num(row.median / ceiling * 100.0));
    }
    text
}

#[cfg(test)]
mod tests {

    use crate::results::csv::{Row, KIND_FLOOR, KIND_PREP};
    use crate::results::env::EnvRecord;

    use crate::report::summary::fixtures::prep;
    use crate::report::summary::render_summary;
    use crate::results::csv::test_rows::row;
    use crate::results::env::test_env;

    #[test]
    fn the_sweeps_own_read_cost_estimate_is_preferred() {
        let mut cost = prep("eager-sync", 18.3);
        cost.metric = "read_cost_us".into();
        (cost.ci_lo, cost.ci_hi) = (18.0, 18.6);
        let rows = vec![prep("eager-sync", 40.0), prep("eager-device", 25.0), cost];
        let md = render_summary(&rows, &EnvRecord::default());
        assert!(md.contains("18.3 [18.0, 18.6]"), "{md}");
    }

    #[test]
    fn every_reading_arm_gets_its_read_column_beside_eager_device() {
        let mut rows = Vec::new();
        for (arm, step, cost) in [
            ("eager-sync", 40.0, Some(18.0)),
            ("eager-pinned", 37.0, Some(15.0)),
            ("eager-mapped", 30.0, None),
            ("eager-device", 22.0, None),
        ] {
            rows.push(prep(arm, step));
            if let Some(cost) = cost {
                let mut r = prep(arm, cost);
                r.metric = "read_cost_us".into();
                rows.push(r);
            }
        }
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains(
                "| bs | block | eager-sync | eager-pinned | eager-mapped | eager-device | host \
                 read (µs) | pinned read (µs) | mapped read (µs) |\n|---:|---:|---:|---:|---:|---:|---|---|---|\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("; pinned read = eager-pinned − eager-device"),
            "{md}"
        );
        // The paired rows where the run has them, the difference of medians where not.
        assert!(
            md.contains("| 18.0 [17.8, 18.2] | 15.0 [14.8, 15.2] | 8.00 ["),
            "{md}"
        );
    }

    #[test]
    fn prep_tables_show_each_arms_bandwidth_and_share_of_the_copy_ceiling() {
        let verify = |arm: &str, bs: u32, metric: &str, median: f64| {
            row(KIND_PREP, "dsa_target_verify", arm, bs, metric, median)
        };
        let mut rows = vec![
            prep("graph", 10.0), // a dsa_decode group without bandwidth rows
            row(KIND_FLOOR, "floor", "d2d-copy", 1, "step_us", 32.0),
            row(KIND_FLOOR, "floor", "d2d-copy", 1, "gb_s", 4000.0),
        ];
        for (bs, arm, us, gb_s) in [
            (8, "eager-sync", 40.0, Some(50.0)),
            (8, "graph", 12.0, Some(120.0)),
            (8, "fused", 6.0, Some(812.0)),
            (256, "eager-sync", 60.0, None),
            (256, "graph", 16.0, Some(2400.0)),
            (256, "fused", 14.0, Some(3520.0)),
        ] {
            rows.push(verify(arm, bs, "step_us", us));
            rows.push(verify(arm, bs, "bytes", 4e7));
            rows.extend(gb_s.map(|g| verify(arm, bs, "gb_s", g)));
        }
        // Through the CSV, as `report` reads a run.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        crate::results::csv::write_rows(&path, &rows).unwrap();
        let rows = crate::results::csv::read_rows(&path).unwrap();
        let md = render_summary(&rows, &test_env());
        let table = &md[md.find("### Metadata prep — dsa_target_verify").unwrap()..];
        assert!(
            table.contains("with its share of the d2d-copy ceiling, 4,000 GB/s."),
            "{table}"
        );
        assert!(
            table.contains(
                "| bs | block | eager-sync | graph | fused | bandwidth (% of copy) |\n\
                 |---:|---:|---:|---:|---:|---|\n"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| 8 | 5 | 40.0 | 12.0 | 6.00 | 50.0 GB/s (1.25%) · 120 GB/s (3.00%) · 812 GB/s (20.3%) |"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| 256 | 5 | 60.0 | 16.0 | 14.0 | — · 2,400 GB/s (60.0%) · 3,520 GB/s (88.0%) |"
            ),
            "{table}"
        );
        let decode = &md[md.find("### Metadata prep — dsa_decode").unwrap()..];
        let decode = &decode[..decode.find("### Metadata prep — dsa_target").unwrap()];
        assert!(!decode.contains("bandwidth"), "{decode}");
        // The copy is a floor item, listed after the copies.
        let floor = &md[md.find("### Floor").unwrap()..];
        assert!(
            floor.contains("| d2d-copy | gb_s | GB/s | 4,000 |"),
            "{floor}"
        );

        // Without the ceiling, the bandwidth alone.
        let no_copy: Vec<Row> = rows.into_iter().filter(|r| r.arm != "d2d-copy").collect();
        let md = render_summary(&no_copy, &test_env());
        assert!(md.contains("(no d2d-copy ceiling in this run)."), "{md}");
        assert!(md.contains("| 50.0 GB/s · 120 GB/s · 812 GB/s |"), "{md}");
    }

    #[test]
    fn floor_multiple_is_computed_from_floor_rows_when_absent() {
        let rows = vec![
            prep("graph", 22.5),
            row(KIND_FLOOR, "floor", "empty-graph", 1, "step_us", 6.0),
            row(KIND_FLOOR, "floor", "empty-graph-2", 1, "step_us", 9.0),
            row(KIND_FLOOR, "floor", "empty-kernel", 1, "step_us", 4.5),
            row(KIND_FLOOR, "floor", "d2h-int", 1, "step_us", 2.0), // not a launch floor
        ];
        let text = render_summary(&rows, &test_env());
        assert!(
            text.contains(
                "eager arms over empty-kernel 4.50 µs; graph and graph-upload over \
                 empty-graph-2 9.00 µs; fused over empty-graph 6.00 µs"
            ),
            "{text}"
        );
        // The graph arm of DSA decode (two kernels) is read against the empty graph of two
        // nodes: 22.5 / 9.0.
        assert!(text.contains("| 4 | 5 | 22.5 (2.5×) |"), "{text}");
        // Only eager-sync and eager-device together give a host-read column.
        assert!(!text.contains("host read (µs)"), "{text}");
        let kernel = text.find("| empty-kernel |").unwrap();
        let graph = text.find("| empty-graph |").unwrap();
        let d2h = text.find("| d2h-int |").unwrap();
        assert!(kernel < graph && graph < d2h, "floor items in fixed order");
    }

    #[test]
    fn floor_multiple_rows_take_precedence() {
        let mut multiple = prep("graph", 7.5);
        multiple.metric = "floor_multiple".into();
        let rows = vec![
            prep("graph", 22.5),
            multiple,
            row(KIND_FLOOR, "floor", "empty-kernel", 1, "step_us", 4.5),
        ];
        let text = render_summary(&rows, &test_env());
        assert!(text.contains("| 22.5 (7.5×) |"), "{text}");
    }
}
