//! The comparison as markdown: the report for a pull request (a verdict line, the findings,
//! what the pair can see, one `step_us` table of family × arm, then only the rows called,
//! capped to fit a pull request's body), and the details (every row).

use super::comparison::{Comparison, FloorMove, Matched};
use super::side::{Entry, Side};
use crate::axes::floor_item::HOST_REFERENCE;
use crate::report::change::{better_direction, Better, Change, Verdict};
use crate::report::format::{arm_rank, fmt_interval, fmt_num, fmt_pct, table_cell};
use crate::results::env::{code, describe, Difference};
use crate::stats::summary::quantile;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The first line of every markdown report `compare` writes: `--out` and `--details` replace
/// only such a file.
pub const REPORT_HEADER: &str = "## metaprep compare";

/// The most characters the pull-request report holds: a pull request's body takes 65,536.
pub const MAX_REPORT_CHARS: usize = 60_000;

/// Names listed at most per kind of finding in the pull-request report (the details list all).
const LISTED_FINDINGS: usize = 12;

/// What a report says beside the comparison: warnings from the inputs and how the machines
/// differ.
pub struct Context<'a> {
    pub warnings: &'a [String],
    pub machine: &'a [Difference],
    /// The exit status the comparison gives.
    pub exit_code: u8,
    pub allow_missing: bool,
}

/// The one line of verdict counts every report and the terminal lead with.
pub fn verdict_line(c: &Comparison, exit_code: u8) -> String {
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .filter_map(|&v| {
            let n = c.count(v);
            let always = matches!(
                v,
                Verdict::Slower | Verdict::Faster | Verdict::Same | Verdict::Uncertain
            );
            (always || n > 0).then(|| format!("{n} {}", v.as_str()))
        })
        .collect();
    let missing = match c.arms {
        Some(_) => format!(
            "{} only in BASE (arms hold different metrics: not a finding)",
            c.only_in_base.len()
        ),
        None => format!("{} missing (only in BASE)", c.missing().len()),
    };
    format!(
        "**{}** ({} matched; {missing}, {} only in NEW) → exit {exit_code}",
        counts.join(" · "),
        c.matched.len(),
        c.only_in_new.len(),
    )
}

/// The report for a pull request: under [`MAX_REPORT_CHARS`], saying what it left out.
pub fn pull_request(c: &Comparison, context: &Context) -> String {
    let mut head = String::new();
    write_header(&mut head, c, context);
    write_findings(&mut head, c, context, Some(LISTED_FINDINGS));
    write_host_and_floors(&mut head, c);
    write_power(&mut head, c);
    write_headline(&mut head, c);
    let mut tail = String::new();
    write_environment(&mut tail, c, context.machine);
    write_only_in_new(&mut tail, c, Some(LISTED_FINDINGS));

    let called: Vec<&Matched> = CALLED
        .iter()
        .flat_map(|&v| c.matched.iter().filter(move |m| m.verdict == v))
        .collect();
    let mut table = String::new();
    writeln!(table, "### Rows called\n").unwrap();
    if called.is_empty() {
        writeln!(
            table,
            "_No row was called slower, faster, changed or explained by a floor or the host._\n"
        )
        .unwrap();
    } else {
        writeln!(
            table,
            "Every row called, by verdict ({}); `same` and `uncertain` rows are in `--details`.\n",
            CALLED.map(Verdict::as_str).join(", ")
        )
        .unwrap();
        // Room for the note saying what was left out.
        let budget =
            MAX_REPORT_CHARS.saturating_sub(chars(&head) + chars(&tail) + chars(&table) + 400);
        let mut rows = String::new();
        write_table_head(&mut rows);
        let (mut used, mut shown) = (chars(&rows), 0);
        for m in &called {
            let mut line = String::new();
            write_row(&mut line, c, m);
            used += chars(&line);
            if used > budget {
                break;
            }
            rows.push_str(&line);
            shown += 1;
        }
        if shown > 0 {
            table.push_str(&rows);
            table.push('\n');
        }
        if shown < called.len() {
            let left: Vec<&Matched> = called[shown..].to_vec();
            let by_verdict: Vec<String> = CALLED
                .iter()
                .filter_map(|&v| {
                    let n = left.iter().filter(|m| m.verdict == v).count();
                    (n > 0).then(|| format!("{n} {}", v.as_str()))
                })
                .collect();
            writeln!(
                table,
                "_Left out to keep this report under {MAX_REPORT_CHARS} characters: {} more \
                 rows called ({}). `--details FILE` writes every row, `--json FILE` the same \
                 for scripts._\n",
                left.len(),
                by_verdict.join(", ")
            )
            .unwrap();
        }
    }
    [head, table, tail].concat()
}

/// The details: everything the comparison found, every row.
pub fn details(c: &Comparison, context: &Context) -> String {
    let mut out = String::new();
    write_header(&mut out, c, context);
    write_findings(&mut out, c, context, None);
    write_host_and_floors(&mut out, c);
    write_power(&mut out, c);
    write_headline(&mut out, c);
    writeln!(out, "### Every row\n").unwrap();
    write_table_head(&mut out);
    for m in &c.matched {
        write_row(&mut out, c, m);
    }
    out.push('\n');
    write_environment(&mut out, c, context.machine);
    write_only_in_new(&mut out, c, None);
    out
}

/// The verdicts the pull-request report lists row by row, in that order.
const CALLED: [Verdict; 5] = [
    Verdict::Slower,
    Verdict::Faster,
    Verdict::Changed,
    Verdict::FloorMoved,
    Verdict::HostMoved,
];

fn chars(text: &str) -> usize {
    text.chars().count()
}

fn write_header(out: &mut String, c: &Comparison, context: &Context) {
    writeln!(out, "{REPORT_HEADER}\n").unwrap();
    for side in [&c.base, &c.new] {
        write_side(out, side);
    }
    if let Some((base_arm, new_arm)) = &c.arms {
        writeln!(
            out,
            "**Arms:** {} (BASE) → {} (NEW)  ",
            code(base_arm),
            code(new_arm)
        )
        .unwrap();
    }
    writeln!(out).unwrap();
    writeln!(out, "{}\n", verdict_line(c, context.exit_code)).unwrap();
    for warning in context.warnings {
        writeln!(out, "> {warning}\n").unwrap();
    }
    writeln!(
        out,
        "Change = NEW / BASE − 1 with a 95% interval; `same` inside ±{t}%, `faster` / `slower` \
         wholly beyond it, `uncertain` otherwise. A call is `floor moved` or `host moved` only \
         where the row's own floor (or the host-speed reference) moved beyond ±{t}% the same way \
         and the row's change over it is shown within ±{t}%. \"could call\" is the smallest \
         slower change the row's intervals could have called. How to read it: docs/compare.md.\n",
        t = c.threshold_pct
    )
    .unwrap();
}

fn write_side(out: &mut String, side: &Side) {
    write!(
        out,
        "**{}** {}",
        side.which.as_str(),
        code(&side.path.display().to_string())
    )
    .unwrap();
    if let Some(env) = &side.env {
        write!(
            out,
            " — git {}, {}, {} ×{}, driver {}",
            code(&env.git_revision),
            env.date,
            env.gpu_name,
            env.gpu_count,
            env.driver_version
        )
        .unwrap();
    }
    writeln!(out, "  ").unwrap();
}

/// Missing and broken rows, named first: arms and cells NEW lacks as a whole, then single
/// rows, then rows that lost their interval. `listed` caps each list (`None`: all).
fn write_findings(out: &mut String, c: &Comparison, context: &Context, listed: Option<usize>) {
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

/// The host-speed reference and the floors that moved, and how many calls each explained.
fn write_host_and_floors(out: &mut String, c: &Comparison) {
    let moved = c.moved_floors();
    let explained = c.count(Verdict::FloorMoved) + c.count(Verdict::HostMoved);
    if moved.is_empty() && explained == 0 && c.host().is_none() {
        return;
    }
    writeln!(out, "### Host and floors\n").unwrap();
    let t = c.threshold_pct;
    match c.host().and_then(|h| h.change.map(|ch| (h, ch))) {
        Some((_, change)) => {
            let ratio = 1.0 + change.pct / 100.0;
            let speed = match change.beyond(t) {
                Some(_) if ratio > 1.0 => {
                    format!("**NEW's host ran {ratio:.2}× as slow as BASE's**")
                }
                Some(_) => format!("**NEW's host ran {:.2}× as fast as BASE's**", 1.0 / ratio),
                None if change.within(t) => format!("the hosts ran alike (within ±{t}%)"),
                None => "the hosts' speeds cannot be told apart or alike".to_string(),
            };
            writeln!(
                out,
                "- Host-speed reference (fixed CPU work on the measuring core, `{HOST_REFERENCE}`): \
                 {} {}: {speed}. Host-paced rows show their change per unit of host speed beside \
                 the raw change.",
                fmt_pct(change.pct),
                fmt_interval(change.lo_pct, change.hi_pct),
            )
            .unwrap();
        }
        None => writeln!(
            out,
            "- No host-speed reference on both sides (a sweep before it): host-paced rows are \
             read raw."
        )
        .unwrap(),
    }
    if !moved.is_empty() {
        let floors: Vec<String> = moved
            .iter()
            .filter_map(|f| {
                let ch = f.change?;
                let (b, _) = c.floor_entries(f);
                Some(format!(
                    "{} {} {}",
                    b.arm,
                    fmt_pct(ch.pct),
                    fmt_interval(ch.lo_pct, ch.hi_pct)
                ))
            })
            .collect();
        writeln!(
            out,
            "- Floor times beyond ±{t}%: {}. A floor excuses only the rows read against it.",
            floors.join(", ")
        )
        .unwrap();
    }
    writeln!(
        out,
        "- Calls explained: {} `floor moved` (own floor moved that way, change over it within \
         ±{t}%), {} `host moved` (the host reference moved that way, change per unit of host \
         speed within ±{t}%); neither fails the comparison.\n",
        c.count(Verdict::FloorMoved),
        c.count(Verdict::HostMoved)
    )
    .unwrap();
}

/// What size of slower change each class of rows could have called.
fn write_power(out: &mut String, c: &Comparison) {
    let classes = c.power();
    if classes.is_empty() {
        return;
    }
    writeln!(out, "### What this pair can see\n").unwrap();
    writeln!(
        out,
        "The smallest slower change each row's intervals could have called at ±{}% (a \
         regression smaller than this passes as `same` or `uncertain`):\n",
        c.threshold_pct
    )
    .unwrap();
    writeln!(
        out,
        "| kind | metric | paced by | rows | median row | 90% of rows | no interval |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---:|---:|---:|---:|").unwrap();
    let pct = |v: Option<f64>| v.map_or("—".to_string(), |p| format!("{p:.1}%"));
    for class in &classes {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            table_cell(&class.kind),
            table_cell(&class.metric),
            class.paced_by,
            class.rows,
            pct(class.median_pct),
            pct(class.p90_pct),
            class.without_interval
        )
        .unwrap();
    }
    writeln!(out).unwrap();
}

/// One table of `step_us` by (kind, family, layout) × arm, then each reading arm's read cost:
/// each entry the median change over the cells and their verdicts.
fn write_headline(out: &mut String, c: &Comparison) {
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

fn write_table_head(out: &mut String) {
    writeln!(
        out,
        "| kind | family | layout | bs | block | arm | metric | BASE | NEW | change | 95% interval | per host speed | vs floor | could call | verdict |"
    )
    .unwrap();
    writeln!(
        out,
        "|---|---|---|---:|---:|---|---|---:|---:|---:|---|---|---|---:|---|"
    )
    .unwrap();
}

fn write_row(out: &mut String, c: &Comparison, m: &Matched) {
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
    let with_interval = |c: Option<Change>| {
        c.map_or("—".to_string(), |c| {
            format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct))
        })
    };
    let could_call =
        m.smallest_callable_pct.map_or("—".to_string(), |p| {
            match better_direction(&n.metric, &n.unit) {
                Better::Higher => format!("−{p:.1}%"),
                _ => format!("+{p:.1}%"),
            }
        });
    writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {change} | {interval} | {} | {} | {could_call} | {}{} |",
        table_cell(&b.kind),
        table_cell(&b.family),
        table_cell(&layout),
        b.batch_size,
        b.block_size,
        table_cell(&arm),
        table_cell(&format!("{} ({})", b.metric, b.unit)),
        fmt_num(b.median),
        fmt_num(n.median),
        with_interval(m.per_host),
        with_interval(m.vs_floor),
        m.verdict.marked(),
        throttled_mark(b, n)
    )
    .unwrap();
}

/// The change and its interval as two table cells, `n/a` without one.
fn change_cells(change: Option<Change>) -> (String, String) {
    match change {
        Some(c) => (fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct)),
        None => ("n/a".to_string(), "n/a".to_string()),
    }
}

fn throttled_mark(base: &Entry, new: &Entry) -> &'static str {
    match (base.throttled, new.throttled) {
        (true, true) => " ⚠ both throttled",
        (true, false) => " ⚠ BASE throttled",
        (false, true) => " ⚠ NEW throttled",
        (false, false) => "",
    }
}

/// The machine's differences and how each floor moved: no verdicts here.
fn write_environment(out: &mut String, c: &Comparison, machine: &[Difference]) {
    if machine.is_empty() && c.floors.is_empty() {
        return;
    }
    writeln!(out, "### Environment\n").unwrap();
    if !machine.is_empty() {
        writeln!(
            out,
            "Machine and build, BASE vs NEW (shown, never refused): {}.\n",
            describe(machine)
        )
        .unwrap();
    }
    if c.floors.is_empty() {
        return;
    }
    writeln!(
        out,
        "The floors and the host-speed reference measure the machine, not the code: they get no \
         verdict and never fail the comparison.\n"
    )
    .unwrap();
    writeln!(
        out,
        "| floor | metric | BASE | NEW | change | 95% interval |"
    )
    .unwrap();
    writeln!(out, "|---|---|---:|---:|---:|---|").unwrap();
    for floor in &c.floors {
        write_floor(out, c, floor);
    }
    writeln!(out).unwrap();
}

fn write_floor(out: &mut String, c: &Comparison, floor: &FloorMove) {
    let (b, n) = c.floor_entries(floor);
    let (change, interval) = change_cells(floor.change);
    writeln!(
        out,
        "| {}{} | {} | {} | {} | {change} | {interval} |",
        table_cell(&b.arm),
        throttled_mark(b, n),
        table_cell(&format!("{} ({})", b.metric, b.unit)),
        fmt_num(b.median),
        fmt_num(n.median),
    )
    .unwrap();
}

/// Rows one side holds that are not findings: NEW's extra rows, and BASE's that are not
/// missing (between two arms, which hold different metrics, all of them; else its floors).
fn write_only_in_new(out: &mut String, c: &Comparison, listed: Option<usize>) {
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
