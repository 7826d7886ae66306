//! What each read path costs and how much of graph replay's gain over eager-sync it wins
//! back (docs/read-paths.md): the `summary.md` section "Read paths" and the rows the
//! `read_recovery` chart draws.
//!
//! A reading arm X (eager-pinned, eager-mapped) **recovers** the share
//! (1 − X/eager-sync) / (1 − graph/eager-sync) of graph's gain, from the run's paired ratios
//! (`step_ratio_vs_eager_sync`) of X and of graph in the same cell: 0% is eager-sync's read,
//! 100% all of what graph replay wins. Its interval puts the two ratios' 95% intervals at their
//! least and most favourable corners, so it is wider than a share paired round by round would
//! be (rounds.csv holds the rounds for that). Where graph's interval reaches no gain, there is
//! no gain to share, and the cell says so.

use super::{change_text, read_cost, Index};
use crate::axes::floor_item::BUSY_BEFORE_READ_US;
use crate::axes::{Arm, FloorItem};
use crate::report::change::change_of_ratio;
use crate::report::format::{
    arm_rank, floor_median, fmt_num, layout_rank, AFTER_ARM, BASELINE_ARM, DEVICE_ARM,
};
use crate::results::csv::{CellKey, Row, KIND_PREP, KIND_STEP, STEP_RATIO_VS_EAGER_SYNC};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write};

/// The metric of the derived rows: the share of graph's gain an arm recovers, in percent.
pub const RECOVERED: &str = "recovered_pct";

/// A share of graph's gain, in percent, with its (conservative) interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub pct: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The share of graph's gain that the arm of ratio row `arm` recovers, `graph` being graph's
/// ratio row of the same cell; `None` when graph's interval reaches no gain (or either row
/// has no finite interval), so no share can be told.
pub fn recovered_share(arm: &Row, graph: &Row) -> Option<Share> {
    let finite = |r: &Row| [r.median, r.ci_lo, r.ci_hi].iter().all(|v| v.is_finite());
    if !(finite(arm) && finite(graph)) {
        return None;
    }
    // Gains: 1 − ratio, the interval's bounds swapped.
    let (g, g_lo, g_hi) = (1.0 - graph.median, 1.0 - graph.ci_hi, 1.0 - graph.ci_lo);
    if g_lo <= 0.0 {
        return None;
    }
    let (x, x_lo, x_hi) = (1.0 - arm.median, 1.0 - arm.ci_hi, 1.0 - arm.ci_lo);
    // With the gain to share positive, the share falls with it; which end of it gives the
    // extreme depends on the sign of the arm's own gain at that end.
    let lo = x_lo / if x_lo >= 0.0 { g_hi } else { g_lo };
    let hi = x_hi / if x_hi >= 0.0 { g_lo } else { g_hi };
    Some(Share {
        pct: 100.0 * x / g,
        lo: 100.0 * lo,
        hi: 100.0 * hi,
    })
}

/// The reading arms other than eager-sync, by name: the arms a share is told for.
fn recovering(arm: &str) -> bool {
    arm.parse::<Arm>()
        .is_ok_and(|a| a.reads_host() && a != Arm::EagerSync)
}

/// One row per cell of a reading arm (other than eager-sync) with a paired ratio and a graph
/// ratio beside it: metric [`RECOVERED`], unit `%`, the share as median and its interval as
/// both the interval and the p10–p90 band (what a chart shades).
pub fn recovered_rows(rows: &[Row]) -> Vec<Row> {
    let ratios: HashMap<CellKey, &Row> = rows
        .iter()
        .filter(|r| r.metric == STEP_RATIO_VS_EAGER_SYNC)
        .map(|r| (r.cell_key(), r))
        .collect();
    let mut out = Vec::new();
    for row in ratios.values().filter(|r| recovering(&r.arm)) {
        let graph_cell = row.cell_key().with_arm(AFTER_ARM);
        let Some(share) = ratios
            .get(&graph_cell)
            .and_then(|g| recovered_share(row, g))
        else {
            continue;
        };
        let mut derived = (*row).clone();
        derived.metric = RECOVERED.into();
        derived.unit = "%".into();
        derived.stop_reason = "derived".into();
        (derived.median, derived.ci_lo, derived.ci_hi) = (share.pct, share.lo, share.hi);
        (derived.p10, derived.p90) = (share.lo, share.hi);
        out.push(derived);
    }
    out.sort_by_key(sort_key);
    out
}

fn sort_key(r: &Row) -> (String, u8, String, u32, u32, u8) {
    (
        r.kind.clone(),
        layout_rank(&r.layout),
        r.cell_family(),
        r.batch_size,
        r.block_size,
        arm_rank(&r.arm),
    )
}

/// "62.0% [48.1, 75.3]", or why there is no share.
fn fmt_share(share: Option<Share>) -> String {
    match share {
        Some(s) => format!("{:.1}% [{:.1}, {:.1}]", s.pct, s.lo, s.hi),
        None => "n/a (graph's gain not told apart from 0)".into(),
    }
}

/// A paired ratio as a change against eager-sync: "-12.0% [-12.4, -11.7]".
fn fmt_change(row: Option<&Row>) -> String {
    row.map_or("—".into(), |r| {
        change_text(change_of_ratio(r), (r.median - 1.0) * 100.0)
    })
}

/// The shapes of one (kind, layout, family) group and the arms present in it.
#[derive(Default)]
struct Group {
    shapes: BTreeSet<(u32, u32)>,
    arms: BTreeSet<(u8, String)>,
}

impl Group {
    fn has(&self, arm: &str) -> bool {
        self.arms.iter().any(|(_, a)| a == arm)
    }

    /// The reading arms present, in table order.
    fn readers(&self) -> impl Iterator<Item = &str> {
        (self.arms.iter())
            .map(|(_, a)| a.as_str())
            .filter(|a| a.parse::<Arm>().is_ok_and(|a| a.reads_host()))
    }
}

/// Groups by (kind, layout rank, layout, family).
type Groups = BTreeMap<(String, u8, String, String), Group>;

/// `metric` of `arm` in the cell of `shape`.
fn of_arm<'r>(index: &Index<'r>, shape: &CellKey, arm: &str, metric: &str) -> Option<&'r Row> {
    index.get(&shape.with_arm(arm), metric)
}

/// The share `arm` recovers in the cell of `shape`, formatted; a dash without its ratios.
fn share(index: &Index, shape: &CellKey, arm: &str) -> String {
    match (
        of_arm(index, shape, arm, STEP_RATIO_VS_EAGER_SYNC),
        of_arm(index, shape, AFTER_ARM, STEP_RATIO_VS_EAGER_SYNC),
    ) {
        (Some(x), Some(g)) => fmt_share(recovered_share(x, g)),
        _ => "—".into(),
    }
}

/// "Read paths": for a sweep, per family and batch at its middle block, each reading arm's
/// read cost against eager-device and the share of graph's gain the pinned and mapped reads
/// recover, with the floor's reads beside; for steps, per layout and cell, each reading arm's
/// step change against eager-sync and its share. Nothing for a run without those arms.
pub(crate) fn write_read_paths(out: &mut String, index: &Index) -> fmt::Result {
    let rows = index.rows;
    let mut groups = Groups::new();
    for r in rows
        .iter()
        .filter(|r| r.kind == KIND_PREP || r.kind == KIND_STEP)
    {
        let key = (
            r.kind.clone(),
            layout_rank(&r.layout),
            r.layout.clone(),
            r.cell_family(),
        );
        let group = groups.entry(key).or_default();
        group.shapes.insert((r.batch_size, r.block_size));
        group.arms.insert((arm_rank(&r.arm), r.arm.clone()));
    }
    if !groups.values().any(|g| g.readers().any(recovering)) {
        return Ok(());
    }
    writeln!(out, "### Read paths\n")?;
    writeln!(
        out,
        "How the lengths reach the host (docs/read-paths.md): eager-sync's `.tolist()` \
         (pageable copy, stream sync), eager-pinned's pinned copy and event wait, eager-mapped's \
         kernel store into mapped host memory and flag poll. Recovers = the share of graph's \
         gain over {BASELINE_ARM} the arm wins back, (1 − arm/{BASELINE_ARM}) / \
         (1 − graph/{BASELINE_ARM}) from the paired ratios, its interval from both ratios' 95% \
         intervals at their extremes (wider than a paired one).\n"
    )?;
    let step = |item| floor_median(rows, item, "step_us");
    if let (Some(idle), Some(busy)) = (step(FloorItem::D2hInt), step(FloorItem::D2hIntBusy)) {
        writeln!(
            out,
            "The floor's one-int pageable read took {} µs on an idle GPU (`{}`) and {} µs \
             queued behind {} µs of running work (`{}`).\n",
            fmt_num(idle),
            FloorItem::D2hInt.name(),
            fmt_num(busy),
            fmt_num(BUSY_BEFORE_READ_US),
            FloorItem::D2hIntBusy.name(),
        )?;
    }
    write_prep_paths(out, &groups, index)?;
    write_step_paths(out, &groups, index)
}

fn write_prep_paths(out: &mut String, groups: &Groups, index: &Index) -> fmt::Result {
    let preps: Vec<_> = (groups.iter())
        .filter(|((kind, ..), g)| kind == KIND_PREP && g.has(DEVICE_ARM))
        .filter(|(_, g)| g.readers().next().is_some())
        .collect();
    let mut arms: Vec<(u8, &str)> = (preps.iter())
        .flat_map(|(_, g)| g.readers())
        .map(|a| (arm_rank(a), a))
        .collect();
    arms.sort();
    arms.dedup();
    if arms.is_empty() {
        return Ok(());
    }
    let recovering_arms: Vec<&str> = arms
        .iter()
        .map(|&(_, a)| a)
        .filter(|a| recovering(a))
        .collect();
    writeln!(
        out,
        "Prep (`sweep`), each family at its middle block size: read cost = the arm's step_us − \
         {DEVICE_ARM}'s, paired in each round, median µs [95% interval].\n"
    )?;
    write!(out, "| family | layout | bs | block |")?;
    for (_, arm) in &arms {
        write!(out, " {arm} read (µs) |")?;
    }
    for arm in &recovering_arms {
        write!(out, " {arm} recovers |")?;
    }
    writeln!(out)?;
    let columns = arms.len() + recovering_arms.len();
    writeln!(out, "|---|---|---:|---:|{}", "---|".repeat(columns))?;
    for ((_, _, layout, family), group) in preps {
        let blocks: BTreeSet<u32> = group.shapes.iter().map(|&(_, b)| b).collect();
        let middle = blocks
            .iter()
            .nth((blocks.len() - 1) / 2)
            .copied()
            .unwrap_or(0);
        for &shape in group.shapes.iter().filter(|(_, b)| *b == middle) {
            let cell = CellKey::new(KIND_PREP, family, "", shape, layout);
            write!(out, "| {family} | {layout} | {} | {} |", shape.0, shape.1)?;
            for (_, arm) in &arms {
                let cost = read_cost(index, &cell.with_arm(arm));
                write!(out, " {} |", cost.as_deref().unwrap_or("—"))?;
            }
            for arm in &recovering_arms {
                write!(out, " {} |", share(index, &cell, arm))?;
            }
            writeln!(out)?;
        }
    }
    writeln!(out)
}

fn write_step_paths(out: &mut String, groups: &Groups, index: &Index) -> fmt::Result {
    for ((kind, _, layout, family), group) in groups {
        let arms: Vec<&str> = group.readers().filter(|a| recovering(a)).collect();
        if kind != KIND_STEP || arms.is_empty() {
            continue;
        }
        writeln!(
            out,
            "Decode step (`steps`), {layout}, {family}: each arm's step change against \
             {BASELINE_ARM}, paired in each round [95% interval], and the share of graph's \
             gain it recovers.\n"
        )?;
        write!(out, "| bs | block | graph vs {BASELINE_ARM} |")?;
        for arm in &arms {
            write!(out, " {arm} vs {BASELINE_ARM} | {arm} recovers |")?;
        }
        writeln!(out)?;
        writeln!(out, "|---:|---:|---|{}", "---|---|".repeat(arms.len()))?;
        for &shape in &group.shapes {
            // The family as the group names it, its host scale after it: the cell's key all
            // the same ([`CellKey`] compares the cell family).
            let cell = CellKey::new(KIND_STEP, family, "", shape, layout);
            let graph = of_arm(index, &cell, AFTER_ARM, STEP_RATIO_VS_EAGER_SYNC);
            write!(out, "| {} | {} | {} |", shape.0, shape.1, fmt_change(graph))?;
            for arm in &arms {
                let ratio = of_arm(index, &cell, arm, STEP_RATIO_VS_EAGER_SYNC);
                write!(
                    out,
                    " {} | {} |",
                    fmt_change(ratio),
                    share(index, &cell, arm)
                )?;
            }
            writeln!(out)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::test_rows::row;
    use crate::results::csv::KIND_FLOOR;

    fn ratio(kind: &str, arm: &str, bs: u32, median: f64, lo: f64, hi: f64) -> Row {
        let mut r = row(
            kind,
            "dsa_decode",
            arm,
            bs,
            STEP_RATIO_VS_EAGER_SYNC,
            median,
        );
        (r.unit, r.ci_lo, r.ci_hi) = ("x".into(), lo, hi);
        r
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_share_is_the_arms_gain_over_graphs_with_the_extreme_corners() {
        // graph 0.6 [0.58, 0.62] of eager-sync: a 40% gain [38, 42]; the arm 0.8 [0.79, 0.82]:
        // 20% [18, 21]. Share 50%, from 18/42 to 21/38.
        let s = recovered_share(
            &ratio(KIND_PREP, "eager-mapped", 1, 0.8, 0.79, 0.82),
            &ratio(KIND_PREP, "graph", 1, 0.6, 0.58, 0.62),
        )
        .unwrap();
        assert!(close(s.pct, 50.0), "{s:?}");
        assert!(
            close(s.lo, 100.0 * 0.18 / 0.42) && close(s.hi, 100.0 * 0.21 / 0.38),
            "{s:?}"
        );
        // An arm slower than eager-sync at one end: its negative gain over the smaller gain.
        let s = recovered_share(
            &ratio(KIND_PREP, "eager-pinned", 1, 0.99, 0.97, 1.02),
            &ratio(KIND_PREP, "graph", 1, 0.6, 0.58, 0.62),
        )
        .unwrap();
        assert!(
            close(s.lo, 100.0 * -0.02 / 0.38) && close(s.hi, 100.0 * 0.03 / 0.38),
            "{s:?}"
        );
        assert!(s.lo < s.pct && s.pct < s.hi);
        // Graph's interval reaching no gain: no share.
        let flat = ratio(KIND_PREP, "graph", 1, 0.99, 0.97, 1.0);
        assert_eq!(
            recovered_share(&ratio(KIND_PREP, "eager-mapped", 1, 0.99, 0.98, 1.0), &flat),
            None
        );
        let mut no_ci = ratio(KIND_PREP, "graph", 1, 0.6, 0.58, 0.62);
        no_ci.ci_lo = f64::NAN;
        assert_eq!(
            recovered_share(
                &ratio(KIND_PREP, "eager-mapped", 1, 0.8, 0.79, 0.82),
                &no_ci
            ),
            None
        );
    }

    #[test]
    fn recovered_rows_are_the_pinned_and_mapped_arms_only() {
        let rows = vec![
            ratio(KIND_STEP, "graph", 1, 0.8, 0.79, 0.81),
            ratio(KIND_STEP, "eager-pinned", 1, 0.9, 0.89, 0.91),
            ratio(KIND_STEP, "eager-device", 1, 0.95, 0.94, 0.96),
            ratio(KIND_STEP, "eager-mapped", 4, 0.9, 0.89, 0.91), // no graph at bs 4
        ];
        let derived = recovered_rows(&rows);
        assert_eq!(derived.len(), 1, "{derived:?}");
        let r = &derived[0];
        assert_eq!(
            (r.arm.as_str(), r.metric.as_str(), r.unit.as_str()),
            ("eager-pinned", RECOVERED, "%")
        );
        assert!(
            close(r.median, 50.0) && r.p10 == r.ci_lo && r.p90 == r.ci_hi,
            "{r:?}"
        );
    }

    #[test]
    fn the_section_sets_each_read_against_eager_device_and_graphs_gain() {
        let cost = |arm: &str, bs: u32, us: f64| {
            let mut r = row(KIND_PREP, "dsa_decode", arm, bs, "read_cost_us", us);
            (r.ci_lo, r.ci_hi) = (us - 1.0, us + 1.0);
            r
        };
        let mut rows = vec![
            row(KIND_PREP, "dsa_decode", "eager-device", 8, "step_us", 22.0),
            cost("eager-sync", 8, 18.0),
            cost("eager-pinned", 8, 15.0),
            cost("eager-mapped", 8, 6.0),
            ratio(KIND_PREP, "graph", 8, 0.25, 0.24, 0.26),
            ratio(KIND_PREP, "eager-pinned", 8, 0.925, 0.92, 0.93),
            ratio(KIND_PREP, "eager-mapped", 8, 0.7, 0.69, 0.71),
            row(KIND_FLOOR, "floor", "d2h-int", 1, "step_us", 8.5),
            row(KIND_FLOOR, "floor", "d2h-int-busy", 1, "step_us", 20.5),
        ];
        let mut md = String::new();
        write_read_paths(&mut md, &Index::new(&rows)).unwrap();
        assert!(md.contains("### Read paths"), "{md}");
        assert!(
            md.contains("8.50 µs on an idle GPU (`d2h-int`) and 20.5 µs"),
            "{md}"
        );
        assert!(
            md.contains(
                "| family | layout | bs | block | eager-sync read (µs) | eager-pinned read (µs) | \
                 eager-mapped read (µs) | eager-pinned recovers | eager-mapped recovers |"
            ),
            "{md}"
        );
        // pinned: 7.5% of 75% is 10%; mapped: 30% of 75% is 40%.
        assert!(
            md.contains("| dsa_decode | tp1 | 8 | 5 | 18.0 [17.0, 19.0] | 15.0 [14.0, 16.0] | 6.00 [5.00, 7.00] | 10.0% ["),
            "{md}"
        );
        assert!(md.contains("| 40.0% ["), "{md}");
        // A run with eager-sync as its only reader has no section.
        rows.retain(|r| !r.arm.starts_with("eager-pinned") && !r.arm.starts_with("eager-mapped"));
        let mut none = String::new();
        write_read_paths(&mut none, &Index::new(&rows)).unwrap();
        assert!(none.is_empty(), "{none}");
    }

    #[test]
    fn steps_get_each_arms_change_and_share_per_cell() {
        let rows = vec![
            ratio(KIND_STEP, "graph", 1, 0.8, 0.79, 0.81),
            ratio(KIND_STEP, "eager-mapped", 1, 0.9, 0.89, 0.91),
            row(KIND_STEP, "dsa_decode", "eager-sync", 1, "step_us", 500.0),
        ];
        let mut md = String::new();
        write_read_paths(&mut md, &Index::new(&rows)).unwrap();
        assert!(
            md.contains("Decode step (`steps`), tp1, dsa_decode"),
            "{md}"
        );
        assert!(
            md.contains("| 1 | 5 | -20.0% [-21.0, -19.0] | -10.0% [-11.0, -9.0] | 50.0% ["),
            "{md}"
        );
    }
}
