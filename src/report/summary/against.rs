//! The compact tables of paired changes: every group's arms against eager-sync from the
//! run's paired ratios with `compare`'s verdict, and graph-upload against graph (what caching
//! the uploaded list is worth) in every step group that ran both.

use super::figures::{change_text, difference};
use super::index::{group_title, Index, SortedCell};
use crate::axes::Drafter;
use crate::report::change::{
    better_direction, change_of_ratio, relative_change, verdict_on_change, Verdict,
    DEFAULT_THRESHOLD_PCT,
};
use crate::report::format::{fmt_interval, fmt_num, fmt_pct, table_cell, AFTER_ARM, BASELINE_ARM};
use crate::results::csv::{
    drafter_of, CellKey, Row, KIND_PREP, KIND_STEP, STEP_RATIO_VS_EAGER_SYNC,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write};

/// The compact tables: every group's arms against eager-sync from the run's paired ratios
/// (`step_ratio_vs_eager_sync`: each arm's step time over eager-sync's, formed in every round
/// where the two ran back to back), step groups first. Nothing for a run without those rows.
pub(super) fn write_against_eager_sync(out: &mut String, index: &Index) -> fmt::Result {
    let mut intro = false;
    for kind in [KIND_STEP, KIND_PREP] {
        for (group, cells) in index.groups(kind) {
            let ratio = |cell: &CellKey| index.get(cell, STEP_RATIO_VS_EAGER_SYNC);
            let arms: BTreeSet<(u8, &str)> = cells
                .iter()
                .filter(|c| ratio(&c.cell).is_some())
                .map(|c| (c.arm_rank, c.cell.arm.as_str()))
                .collect();
            if arms.is_empty() {
                continue;
            }
            if !intro {
                writeln!(
                    out,
                    "### Against {BASELINE_ARM}\n\nEach arm's step time over {BASELINE_ARM}'s, \
                     formed in every round (the two ran back to back) and summarised over \
                     rounds: change [95% interval between rounds] and the verdict `compare` \
                     gives at ±{DEFAULT_THRESHOLD_PCT}%.\n"
                )?;
                intro = true;
            }
            let what = if kind == KIND_STEP {
                "Decode step"
            } else {
                "Metadata prep"
            };
            writeln!(out, "**{what} — {}**\n", group_title(index, kind, group))?;
            write!(out, "| bs | block |")?;
            for (_, arm) in &arms {
                write!(out, " {} |", table_cell(arm))?;
            }
            writeln!(out)?;
            writeln!(out, "|---:|---:|{}", "---|".repeat(arms.len()))?;
            let shapes: BTreeMap<(u32, u32), &SortedCell> = cells
                .iter()
                .map(|c| ((c.batch_size, c.block_size), c))
                .collect();
            for ((bs, block), sorted) in shapes {
                write!(out, "| {bs} | {block} |")?;
                for (_, arm) in &arms {
                    let text = ratio(&sorted.with_arm(arm)).map_or("—".to_string(), paired_change);
                    write!(out, " {text} |")?;
                }
                writeln!(out)?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// graph-upload against graph in every step group that ran both: what the host-built list
/// graph-upload copies up before its replays costs a step, so what caching it as a device
/// constant is worth (EAGLE: `extend_seq_lens`, `[N] * bs`, before each draft-extend replay,
/// as SGLang's merged draft-extend path uploads it (docs/arms.md); DSpark: before both
/// replays). The change is of the two arms' ratios to eager-sync, each paired in rounds; the
/// difference in µs is of their step times.
pub(super) fn write_upload_against_graph(out: &mut String, index: &Index) -> fmt::Result {
    const UPLOAD_ARM: &str = "graph-upload";
    let mut intro = false;
    for (group, cells) in index.groups(KIND_STEP) {
        let shapes: BTreeMap<(u32, u32), &SortedCell> = cells
            .iter()
            .map(|c| ((c.batch_size, c.block_size), c))
            .collect();
        let mut lines = Vec::new();
        for ((bs, block), sorted) in shapes {
            let (up, graph) = (sorted.with_arm(UPLOAD_ARM), sorted.with_arm(AFTER_ARM));
            let (Some(u), Some(g)) = (index.get(&up, "step_us"), index.get(&graph, "step_us"))
            else {
                continue;
            };
            let (d, lo, hi) = difference(u, g);
            let change = match (
                index.get(&up, STEP_RATIO_VS_EAGER_SYNC),
                index.get(&graph, STEP_RATIO_VS_EAGER_SYNC),
            ) {
                (Some(ur), Some(gr)) => change_text(
                    relative_change(gr, ur),
                    (ur.median / gr.median - 1.0) * 100.0,
                ),
                _ => format!(
                    "{} (unpaired)",
                    change_text(relative_change(g, u), (u.median / g.median - 1.0) * 100.0)
                ),
            };
            lines.push(format!(
                "| {bs} | {block} | {} | {} | {} [{}, {}] | {change} |",
                fmt_num(g.median),
                fmt_num(u.median),
                fmt_num(d),
                fmt_num(lo),
                fmt_num(hi)
            ));
        }
        if lines.is_empty() {
            continue;
        }
        if !intro {
            writeln!(
                out,
                "### {UPLOAD_ARM} against {AFTER_ARM}: what caching the uploaded list is worth\n\n\
                 {UPLOAD_ARM} is {AFTER_ARM} replay with the host-built `[N] * bs` copied up \
                 from pageable memory before its replays (a syncing copy); caching that list as \
                 a device constant makes it {AFTER_ARM}. Step change: {UPLOAD_ARM}'s ratio to \
                 {BASELINE_ARM} over {AFTER_ARM}'s, each paired in rounds [95% interval].\n"
            )?;
            intro = true;
        }
        let where_ = match drafter_of(&group.family) {
            Some(Drafter::Eagle) => {
                "before each draft-extend replay only, where sgl-project/sglang#32219's merged \
                 DSA path uploads it (`extend_seq_lens`; SGLang 0.5.23 fills it on the device, \
                 as graph does)"
            }
            _ => "before both the draft and the verify replay",
        };
        writeln!(
            out,
            "**Decode step — {}** (upload {where_})\n",
            group_title(index, KIND_STEP, group)
        )?;
        writeln!(
            out,
            "| bs | block | {AFTER_ARM} step (µs) | {UPLOAD_ARM} step (µs) | {UPLOAD_ARM} − {AFTER_ARM} (µs) | step change |"
        )?;
        writeln!(out, "|---:|---:|---:|---:|---:|---|")?;
        for line in lines {
            writeln!(out, "{line}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// "-42.0% [-43.1, -40.8] **faster**": a paired ratio row as a change with its verdict.
fn paired_change(row: &Row) -> String {
    let better = better_direction(&row.metric, &row.unit);
    match change_of_ratio(row) {
        Some(c) => format!(
            "{} {} {}",
            fmt_pct(c.pct),
            fmt_interval(c.lo_pct, c.hi_pct),
            verdict_on_change(&c, better, DEFAULT_THRESHOLD_PCT).marked()
        ),
        None => format!(
            "{} [n/a] {}",
            fmt_pct((row.median - 1.0) * 100.0),
            Verdict::Uncertain.as_str()
        ),
    }
}

#[cfg(test)]
mod tests {

    use crate::results::csv::{KIND_PREP, KIND_STEP, STEP_RATIO_VS_EAGER_SYNC};

    use crate::report::summary::render_summary;
    use crate::results::csv::test_rows::row;
    use crate::results::env::test_env;

    #[test]
    fn graph_upload_against_graph_names_where_each_drafter_uploads() {
        let eagle = crate::axes::Drafter::Eagle.step_family();
        let mut rows = Vec::new();
        for family in [eagle, "dspark+dsa_target_verify"] {
            for (arm, step_us, ratio) in [
                ("eager-sync", 1000.0, None),
                ("graph", 800.0, Some(0.80)),
                ("graph-upload", 820.0, Some(0.82)),
            ] {
                rows.push(row(KIND_STEP, family, arm, 1, "step_us", step_us));
                rows.push(row(KIND_STEP, family, arm, 1, "itl_us", step_us / 3.0));
                if let Some(r) = ratio {
                    let mut paired = row(KIND_STEP, family, arm, 1, STEP_RATIO_VS_EAGER_SYNC, r);
                    paired.unit = "x".into();
                    rows.push(paired);
                }
            }
        }
        let md = render_summary(&rows, &test_env());
        let section = &md[md
            .find("### graph-upload against graph: what caching the uploaded list is worth")
            .unwrap_or_else(|| panic!("{md}"))..];
        let eagle_at = section
            .find(&format!(
                "**Decode step — tp1, {eagle}** (upload before each draft-extend replay only"
            ))
            .unwrap_or_else(|| panic!("{section}"));
        let dspark_at = section
            .find("**Decode step — tp1, dspark+dsa_target_verify** (upload before both the draft and the verify replay)")
            .unwrap_or_else(|| panic!("{section}"));
        // 0.82 / 0.80: +2.5%; 820 − 800 µs.
        for at in [eagle_at, dspark_at] {
            let table = &section[at..];
            assert!(table.contains("| 1 | 5 | 800 | 820 | 20.0 ["), "{table}");
            assert!(
                table.lines().nth(4).unwrap().contains("| +2.5% ["),
                "{table}"
            );
        }
        // Headlines name the drafter of a run of EAGLE steps alone.
        rows.retain(|r| r.family == eagle);
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains(&format!("at tp1 ({eagle}) bs 1 block 5")),
            "{md}"
        );
        // Without graph-upload there is nothing to answer.
        rows.retain(|r| r.arm != "graph-upload");
        assert!(!render_summary(&rows, &test_env()).contains("### graph-upload against graph"));
    }

    #[test]
    fn prep_arms_are_set_against_eager_sync_by_their_paired_ratios() {
        let ratio = |arm: &str, bs: u32, median: f64, lo: f64, hi: f64| {
            let mut r = row(
                KIND_PREP,
                "dsa_decode",
                arm,
                bs,
                STEP_RATIO_VS_EAGER_SYNC,
                median,
            );
            (r.unit, r.ci_lo, r.ci_hi, r.stop_reason) = ("x".into(), lo, hi, "derived".into());
            (r.p10, r.p90) = (f64::NAN, f64::NAN);
            r
        };
        let step = |arm: &str, bs: u32, median: f64| {
            row(KIND_PREP, "dsa_decode", arm, bs, "step_us", median)
        };
        let rows = vec![
            step("eager-sync", 1, 40.0),
            step("eager-device", 1, 22.0),
            step("graph", 1, 10.0),
            step("eager-sync", 8, 40.0),
            step("graph", 8, 40.0),
            ratio("eager-device", 1, 0.55, 0.54, 0.56),
            ratio("graph", 1, 0.25, 0.245, 0.26),
            ratio("graph", 8, 1.0, 0.995, 1.01),
            ratio("eager-device", 8, 1.1, 1.05, 1.15),
            step("eager-device", 8, 44.0),
        ];
        // Through the CSV, as `report` reads a run.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        crate::results::csv::write_rows(&path, &rows).unwrap();
        let rows = crate::results::csv::read_rows(&path).unwrap();
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains(
                "**Metadata prep — dsa_decode, tp1**\n\n| bs | block | eager-device | graph |\n|---:|---:|---|---|\n"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 1 | 5 | -45.0% [-46.0, -44.0] **faster** | -75.0% [-75.5, -74.0] **faster** |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 8 | 5 | +10.0% [+5.0, +15.0] **slower** | +0.0% [-0.5, +1.0] same |"),
            "{md}"
        );
        // An interval straddling the threshold is uncertain; a cell without a ratio is a dash.
        let mut rows = rows;
        rows.retain(|r| !(r.arm == "eager-device" && r.batch_size == 8));
        rows.iter_mut()
            .filter(|r| {
                r.arm == "graph" && r.metric == STEP_RATIO_VS_EAGER_SYNC && r.batch_size == 8
            })
            .for_each(|r| (r.median, r.ci_lo, r.ci_hi) = (0.99, 0.97, 1.01));
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains("| 8 | 5 | — | -1.0% [-3.0, +1.0] uncertain |"),
            "{md}"
        );
        // A run without paired rows (steps, or a sweep before rounds) gets no such table.
        rows.retain(|r| r.metric != STEP_RATIO_VS_EAGER_SYNC);
        assert!(!render_summary(&rows, &test_env()).contains("### Against eager-sync"));
    }
}
