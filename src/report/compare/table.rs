//! The tables: the `step_us` headline of family × arm, and one line per matched row.

use super::comparison::{Comparison, Matched};
use super::side::Entry;
use crate::report::change::{better_direction, Better, Change, Verdict};
use crate::report::format::{arm_rank, fmt_interval, fmt_num, fmt_pct, table_cell};
use crate::stats::summary::quantile;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One table of `step_us` by (kind, family, layout) × arm, then each reading arm's read cost:
/// each entry the median change over the cells and their verdicts.
pub(super) fn write_headline(out: &mut String, c: &Comparison) {
    type Group<'e> = (u8, &'e str, &'e str, &'e str);
    // Columns: the step times by arm, then the read costs by arm.
    type Column = (bool, u8, String);
    let mut groups: BTreeMap<Group, BTreeMap<Column, Vec<&Matched>>> = BTreeMap::new();
    for m in &c.matched {
        let (b, n) = c.entries(m);
        let column = match (&*n.metric, &c.arms) {
            ("step_us", Some((base_arm, new_arm))) => (false, 0, format!("{base_arm} → {new_arm}")),
            ("step_us", None) => (false, arm_rank(&n.arm), n.arm.to_string()),
            ("read_cost_us", None) => (
                true,
                arm_rank(&n.arm),
                format!("read cost ({} − eager-device)", n.arm),
            ),
            _ => continue,
        };
        let group = (
            crate::report::format::kind_rank(&b.kind),
            &*b.kind,
            &*b.family,
            &*b.layout,
        );
        groups
            .entry(group)
            .or_default()
            .entry(column)
            .or_default()
            .push(m);
    }
    if groups.is_empty() {
        return;
    }
    let columns: BTreeSet<&Column> = groups.values().flat_map(|g| g.keys()).collect();
    writeln!(out, "### step_us by family × arm\n").unwrap();
    writeln!(
        out,
        "Each entry: the median change over the cells (batch × block), then their verdicts.\n"
    )
    .unwrap();
    let names: Vec<&str> = columns.iter().map(|(_, _, name)| name.as_str()).collect();
    writeln!(out, "| kind | family | layout | {} |", names.join(" | ")).unwrap();
    writeln!(out, "|---|---|---|{}", "---|".repeat(names.len())).unwrap();
    for ((_, kind, family, layout), by_column) in &groups {
        let entries: Vec<String> = columns
            .iter()
            .map(|column| match by_column.get(*column) {
                Some(rows) => summary_of(rows),
                None => "—".to_string(),
            })
            .collect();
        writeln!(
            out,
            "| {kind} | {} | {layout} | {} |",
            table_cell(family),
            entries.join(" | ")
        )
        .unwrap();
    }
    writeln!(out).unwrap();
}

/// `+0.4% (11 same, 1 uncertain)`: the median change of `rows` and their verdict counts.
fn summary_of(rows: &[&Matched]) -> String {
    let changes: Vec<f64> = rows
        .iter()
        .filter_map(|m| m.change.map(|c| c.pct))
        .collect();
    let median = quantile(&changes, 0.5).map_or_else(|| "n/a".to_string(), fmt_pct);
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .filter_map(|&v| {
            let n = rows.iter().filter(|m| m.verdict == v).count();
            (n > 0).then(|| format!("{n} {}", v.marked()))
        })
        .collect();
    format!("{median} ({})", counts.join(", "))
}

pub(super) fn write_table_head(out: &mut String) {
    writeln!(
        out,
        "| kind | family | layout | bs | block | arm | metric | BASE | NEW | change | 95% interval | vs floor | could call | verdict |"
    )
    .unwrap();
    writeln!(
        out,
        "|---|---|---|---:|---:|---|---|---:|---:|---:|---|---|---:|---|"
    )
    .unwrap();
}

pub(super) fn write_row(out: &mut String, c: &Comparison, m: &Matched) {
    let (b, n) = c.entries(m);
    let arm = match &c.arms {
        Some((base_arm, new_arm)) => format!("{base_arm} → {new_arm}"),
        None => b.arm.to_string(),
    };
    let layout = if b.emulated || n.emulated {
        format!("{} (emulated)", b.layout)
    } else {
        b.layout.to_string()
    };
    let (change, interval) = change_cells(m.change);
    let vs_floor = m.vs_floor.map_or("—".to_string(), |c| {
        format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct))
    });
    let could_call =
        m.smallest_callable_pct.map_or("—".to_string(), |p| {
            match better_direction(&n.metric, &n.unit) {
                Better::Higher => format!("−{p:.1}%"),
                _ => format!("+{p:.1}%"),
            }
        });
    writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {change} | {interval} | {vs_floor} | {could_call} | {}{} |",
        table_cell(&b.kind),
        table_cell(&b.family),
        table_cell(&layout),
        b.batch_size,
        b.block_size,
        table_cell(&arm),
        table_cell(&format!("{} ({})", b.metric, b.unit)),
        fmt_num(b.median),
        fmt_num(n.median),
        verdict_cell(c, m),
        throttled_mark(b, n)
    )
    .unwrap();
}

/// A row's verdict as its table shows it: a `slower` row the gate does not fail on says so.
fn verdict_cell(c: &Comparison, m: &Matched) -> String {
    match c.not_gated(m) {
        true => format!("{} (not gated)", m.verdict.as_str()),
        false => m.verdict.marked(),
    }
}

/// The change and its interval as two table cells, `n/a` without one.
pub(super) fn change_cells(change: Option<Change>) -> (String, String) {
    match change {
        Some(c) => (fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct)),
        None => ("n/a".to_string(), "n/a".to_string()),
    }
}

pub(super) fn throttled_mark(base: &Entry, new: &Entry) -> &'static str {
    match (base.throttled, new.throttled) {
        (true, true) => " ⚠ both throttled",
        (true, false) => " ⚠ BASE throttled",
        (false, true) => " ⚠ NEW throttled",
        (false, false) => "",
    }
}
