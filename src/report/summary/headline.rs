//! The summary's first lines: for each step group (layout) and each prep group (family),
//! graph replay's change against eager-sync at the smallest batch and the middle block size
//! both ran, with its interval.

use super::figures::{change_text, read_cost};
use super::index::{layout_label, Index, SortedCell};
use crate::report::change::{change_of_ratio, relative_change};
use crate::report::format::{fmt_num, AFTER_ARM, BASELINE_ARM, DEVICE_ARM};
use crate::results::csv::{
    names_another_drafter, CellKey, KIND_PREP, KIND_STEP, STEP_RATIO_VS_EAGER_SYNC,
};
use std::collections::BTreeSet;
use std::fmt::{self, Write};

/// The answer first: for each step group (layout) and each prep group (family), graph
/// replay's change against eager-sync at the smallest batch size and the middle block size
/// both ran ([`headline_shape`]), with its 95% interval.
pub(super) fn write_headlines(out: &mut String, index: &Index) -> fmt::Result {
    let step_families: BTreeSet<String> = index
        .groups(KIND_STEP)
        .keys()
        .map(|g| g.family.clone())
        .collect();
    let mut lines = Vec::new();
    for kind in [KIND_STEP, KIND_PREP] {
        for (group, cells) in index.groups(kind) {
            let Some((bs, block, base, after)) = headline_shape(cells) else {
                continue;
            };
            let layout = layout_label(index, kind, group);
            let paired = index
                .get(&after, STEP_RATIO_VS_EAGER_SYNC)
                .map(|r| change_text(change_of_ratio(r), r.median * 100.0 - 100.0));
            let unpaired = |metric: &str| between(index, &base, &after, metric);
            let lead = format!("**{AFTER_ARM} replay against {BASELINE_ARM}**");
            let line = if kind == KIND_STEP {
                let family = if step_families.len() > 1 || names_another_drafter(&group.family) {
                    format!(" ({})", group.family)
                } else {
                    String::new()
                };
                let mut parts = Vec::new();
                parts.extend(unpaired("itl_us").map(|c| format!("ITL {c}")));
                parts.extend(unpaired("throughput_tok_s").map(|c| format!("throughput {c}")));
                let mut line = format!(
                    "{lead} at {layout}{family} bs {bs} block {block}: {}",
                    parts.join(", ")
                );
                if let Some(paired) = paired {
                    line.push_str(&format!(" (step time {paired}, paired in rounds)"));
                }
                if let Some(split) = two_wins(index, &base, &after) {
                    line.push_str(&format!("\n\n{split}"));
                }
                line
            } else {
                let step = match paired {
                    Some(paired) => format!("{paired}, paired in rounds"),
                    None => unpaired("step_us").unwrap_or_else(|| "n/a".into()),
                };
                let mut line = format!(
                    "{lead}, {} prep at {layout} bs {bs} block {block}: step time {step}",
                    group.family
                );
                if let Some(read) = read_cost(index, &base) {
                    line.push_str(&format!(
                        "; host read ({BASELINE_ARM} − {DEVICE_ARM}) {read} µs"
                    ));
                }
                if let Some(per_arm) = prep_per_arm(index, &base) {
                    line.push_str(&format!("; a prep's step: {per_arm}"));
                }
                line
            };
            lines.push(line);
        }
    }
    if lines.is_empty() {
        writeln!(
            out,
            "_No headline: this run has no {AFTER_ARM} and {BASELINE_ARM} cells side by side._\n"
        )
    } else {
        writeln!(out, "{}\n", lines.join("\n\n"))
    }
}

/// Each arm's median prep step at `base`'s cell, in the arms' shown order: `eager-sync 24.4
/// µs, eager-device 6.77, graph 4.85`.
fn prep_per_arm(index: &Index, base: &CellKey) -> Option<String> {
    let steps: Vec<String> = (crate::axes::Arm::SHOWN.iter())
        .filter_map(|arm| {
            let row = index.get(&base.with_arm(arm.name()), "step_us")?;
            Some(format!("{arm} {}", fmt_num(row.median)))
        })
        .collect();
    let (first, rest) = steps.split_first()?;
    Some(format!(
        "{first} µs{}",
        rest.iter().map(|s| format!(", {s}")).collect::<String>()
    ))
}

/// `metric`'s change from cell `from` to cell `to`, its two medians' intervals taken apart.
fn between(index: &Index, from: &CellKey, to: &CellKey, metric: &str) -> Option<String> {
    let (a, b) = (index.get(from, metric)?, index.get(to, metric)?);
    Some(change_text(
        relative_change(a, b),
        (b.median / a.median - 1.0) * 100.0,
    ))
}

/// The step's two wins told apart, where eager-device ran beside eager-sync and graph: the
/// read's cost in µs a step, what removing it wins (eager-device against eager-sync), and
/// what graph replay adds on top (graph against eager-device), in ITL and throughput.
fn two_wins(index: &Index, base: &CellKey, after: &CellKey) -> Option<String> {
    let device = base.with_arm(DEVICE_ARM);
    let change = |from: &CellKey, to: &CellKey| -> Option<String> {
        Some(format!(
            "ITL {}, throughput {}",
            between(index, from, to, "itl_us")?,
            between(index, from, to, "throughput_tok_s")?
        ))
    };
    let removing = change(base, &device)?;
    let on_top = change(&device, after)?;
    let read = read_cost(index, base).unwrap_or_else(|| "n/a".into());
    Some(format!(
        "the host read costs {read} µs a step ({BASELINE_ARM} − {DEVICE_ARM}); removing it \
         ({DEVICE_ARM} against {BASELINE_ARM}): {removing}; {AFTER_ARM} replay on top \
         ({AFTER_ARM} against {DEVICE_ARM}): {on_top}"
    ))
}

/// The smallest batch size at which both eager-sync and graph ran, and the middle of the
/// block sizes they ran there (the lower of two middles, as the charts take it), with the
/// two cells.
fn headline_shape(cells: &BTreeSet<SortedCell>) -> Option<(u32, u32, CellKey, CellKey)> {
    let shapes_of = |arm: &str| -> BTreeSet<(u32, u32)> {
        cells
            .iter()
            .filter(|c| c.cell.arm == arm)
            .map(|c| (c.batch_size, c.block_size))
            .collect()
    };
    let both: Vec<(u32, u32)> = shapes_of(BASELINE_ARM)
        .intersection(&shapes_of(AFTER_ARM))
        .copied()
        .collect();
    let bs = both.iter().map(|(bs, _)| *bs).min()?;
    let blocks: Vec<u32> = both
        .iter()
        .filter(|(b, _)| *b == bs)
        .map(|(_, k)| *k)
        .collect();
    let block = blocks[(blocks.len() - 1) / 2];
    let sorted = cells
        .iter()
        .find(|c| (c.batch_size, c.block_size) == (bs, block))?;
    Some((
        bs,
        block,
        sorted.with_arm(BASELINE_ARM),
        sorted.with_arm(AFTER_ARM),
    ))
}

#[cfg(test)]
mod tests {

    use crate::results::csv::{Row, STEP_RATIO_VS_EAGER_SYNC};

    use crate::report::summary::fixtures::{prep, step};
    use crate::report::summary::render_summary;

    use crate::results::env::test_env;

    /// A step group's eager-sync and graph cells at bs 1 and 8, blocks 3, 5 and 8, with
    /// ITL, throughput and graph's paired ratio; `spread` is each interval's half-width.
    fn headline_rows(layout: &str) -> Vec<Row> {
        let mut rows = Vec::new();
        for bs in [8, 1] {
            for block in [8, 3, 5] {
                let cell = |arm: &str, metric: &str, median: f64, half: f64| Row {
                    layout: layout.into(),
                    batch_size: bs,
                    block_size: block,
                    ci_lo: median - half,
                    ci_hi: median + half,
                    ..step(arm, metric, median)
                };
                let graph_itl = if (bs, block) == (1, 5) { 926.0 } else { 990.0 };
                rows.extend([
                    cell("eager-sync", "itl_us", 1094.0, 4.0),
                    cell("graph", "itl_us", graph_itl, 3.0),
                    cell("eager-sync", "throughput_tok_s", 624.0, 1.0),
                    cell("graph", "throughput_tok_s", 735.0, 1.0),
                    Row {
                        unit: "x".into(),
                        stop_reason: "derived".into(),
                        ..cell("graph", STEP_RATIO_VS_EAGER_SYNC, 0.849, 0.001)
                    },
                ]);
            }
        }
        rows
    }

    #[test]
    fn the_first_line_is_graphs_change_against_eager_sync_with_its_interval() {
        let mut rows = headline_rows("tp8");
        rows.iter_mut().for_each(|r| r.emulated = true);
        rows.extend(headline_rows("tp1"));
        let text = render_summary(&rows, &test_env());
        let mut lines = text.lines();
        // One line per layout, tp1 first; the smallest batch and the middle block size.
        assert_eq!(
            lines.next().unwrap(),
            "**graph replay against eager-sync** at tp1 bs 1 block 5: ITL -15.4% [-15.8, -14.9], \
             throughput +17.8% [+17.5, +18.0] (step time -15.1% [-15.2, -15.0], paired in rounds)"
        );
        assert_eq!(lines.next(), Some(""));
        assert!(
            lines.next().unwrap().starts_with(
                "**graph replay against eager-sync** at tp8 (emulated) bs 1 block 5: ITL -15.4%"
            ),
            "{text}"
        );
        assert_eq!(lines.next(), Some(""));
        assert!(lines.next().unwrap().starts_with("**Environment:**"));
    }

    #[test]
    fn a_sweeps_headline_is_per_family_with_the_host_read() {
        let mut rows = vec![
            prep("eager-sync", 40.0),
            prep("eager-device", 22.0),
            prep("graph", 10.0),
        ];
        for r in &mut rows {
            (r.ci_lo, r.ci_hi) = (r.median - 1.0, r.median + 1.0);
        }
        let text = render_summary(&rows, &test_env());
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with(
                "**graph replay against eager-sync**, dsa_decode prep at tp1 bs 4 block 5: \
                 step time -75.0% ["
            ),
            "{first}"
        );
        assert!(
            first.contains("; host read (eager-sync − eager-device) 18.0 ["),
            "{first}"
        );
        assert!(
            first.ends_with("; a prep's step: eager-sync 40.0 µs, eager-device 22.0, graph 10.0"),
            "{first}"
        );
        // No graph cell, no headline: the run says so instead of guessing another pair.
        let text = render_summary(&rows[..2], &test_env());
        assert!(text.starts_with(
            "_No headline: this run has no graph and eager-sync cells side by side._\n"
        ));
    }
}
