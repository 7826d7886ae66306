//! Missing and broken rows, and rows only NEW holds: the findings, listed by name.

use super::comparison::{Comparison, Matched};
use super::markdown::Context;
use super::side::Entry;
use crate::report::change::Verdict;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Missing and broken rows, named first: arms and cells NEW lacks as a whole, then single
/// rows, then rows that lost their interval. `listed` caps each list (`None`: all).
pub(super) fn write_findings(
    out: &mut String,
    c: &Comparison,
    context: &Context,
    listed: Option<usize>,
) {
    let broken: Vec<&Matched> = c
        .matched
        .iter()
        .filter(|m| m.verdict == Verdict::Broken)
        .collect();
    let missing = c.missing();
    if missing.is_empty() && broken.is_empty() {
        return;
    }
    let gate = if context.allow_missing {
        "reported, not failed: --allow-missing"
    } else {
        "each fails the comparison unless --allow-missing"
    };
    writeln!(out, "### Missing and broken ({gate})\n").unwrap();
    let base = &c.base.entries;
    let new_arms: BTreeSet<&str> = c.new.entries.iter().map(|e| &*e.arm).collect();
    let new_cells: BTreeSet<String> = c.new.entries.iter().map(|e| e.cell().to_string()).collect();
    let mut arms: BTreeMap<&str, usize> = BTreeMap::new();
    let mut cells: BTreeMap<String, usize> = BTreeMap::new();
    let mut rows: Vec<String> = Vec::new();
    for &i in &missing {
        let e = &base[i];
        let cell = e.cell().to_string();
        if !new_arms.contains(&*e.arm) {
            *arms.entry(&e.arm).or_default() += 1;
        } else if !new_cells.contains(&cell) {
            *cells.entry(cell).or_default() += 1;
        } else {
            rows.push(format!("{cell} `{}`", e.metric));
        }
    }
    for (arm, n) in &arms {
        writeln!(
            out,
            "- arm `{arm}`: absent from NEW ({n} rows only in BASE)"
        )
        .unwrap();
    }
    let cells: Vec<String> = cells
        .into_iter()
        .map(|(cell, n)| format!("{cell} ({n} rows)"))
        .collect();
    write_list(out, "cells absent from NEW", &cells, listed);
    write_list(out, "rows NEW lacks in cells it holds", &rows, listed);
    let broken: Vec<String> = broken
        .iter()
        .map(|m| {
            let (b, _) = c.entries(m);
            format!("{} `{}`", b.cell(), b.metric)
        })
        .collect();
    write_list(
        out,
        "rows without an interval in NEW where BASE has one (`broken`)",
        &broken,
        listed,
    );
    writeln!(out).unwrap();
}

fn write_list(out: &mut String, what: &str, items: &[String], listed: Option<usize>) {
    if items.is_empty() {
        return;
    }
    let shown = listed.unwrap_or(items.len()).min(items.len());
    let more = match items.len() - shown {
        0 => String::new(),
        n => format!("; and {n} more (`--details` lists them all)"),
    };
    writeln!(
        out,
        "- {} {what}: {}{more}",
        items.len(),
        items[..shown].join(", ")
    )
    .unwrap();
}

/// Rows one side holds that are not findings: NEW's extra rows, and BASE's that are not
/// missing (between two arms, which hold different metrics, all of them; else its floors).
pub(super) fn write_only_in_new(out: &mut String, c: &Comparison, listed: Option<usize>) {
    let label = |e: &Entry| format!("{} `{}`", e.cell(), e.metric);
    let base_title = match c.arms {
        Some(_) => "Only in BASE's arm (not a finding between arms)",
        None => "Floors only in BASE (not a finding)",
    };
    for (side, indices, title) in [
        (&c.new, c.only_in_new.clone(), "Only in NEW (not a finding)"),
        (&c.base, c.base_extras(), base_title),
    ] {
        if indices.is_empty() {
            continue;
        }
        let labels: Vec<String> = indices.iter().map(|&i| label(&side.entries[i])).collect();
        writeln!(out, "### {title}\n").unwrap();
        write_list(out, "rows", &labels, listed);
        writeln!(out).unwrap();
    }
}
