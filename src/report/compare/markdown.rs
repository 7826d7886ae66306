//! The comparison as markdown: the report for a pull request (a verdict line, the findings,
//! what the pair can see, one `step_us` table of family × arm, then only the rows called,
//! capped to fit a pull request's body), and the details (every row).
//!
//! The report's parts: the header in `header`, missing and broken rows in `findings`, the
//! floors and environment in `machine`, the power in `power_table`, the tables in `table`.

use super::comparison::{Comparison, Matched};
use super::findings::{write_findings, write_only_in_new};
use super::header::write_header;
use super::machine::write_environment;
use super::power_table::write_power;
use super::table::{write_headline, write_row, write_table_head};
use crate::report::change::Verdict;
use crate::results::env::Difference;
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
    let ungated = c.matched.iter().filter(|m| c.not_gated(m)).count();
    let gate = match ungated {
        0 => String::new(),
        n => format!(
            " (`--gate {}`: {n} slower host-paced rows do not fail it: two runs made apart \
             cannot gate what the host paces; `metaprep ab` runs the two sides paired in time)",
            c.gate.as_str()
        ),
    };
    format!(
        "**{}** ({} matched; {missing}, {} only in NEW) → exit {exit_code}{gate}",
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
    write_power(&mut head, c);
    write_headline(&mut head, c);
    let mut tail = String::new();
    write_environment(&mut tail, c, context.machine);
    write_only_in_new(&mut tail, c, Some(LISTED_FINDINGS));

    // By verdict, and slower rows the gate does not fail on last: what fails the job is
    // never cut for them.
    let mut called: Vec<&Matched> = CALLED
        .iter()
        .flat_map(|&v| c.matched.iter().filter(move |m| m.verdict == v))
        .collect();
    called.sort_by_key(|m| c.not_gated(m));
    let mut table = String::new();
    writeln!(table, "### Rows called\n").unwrap();
    if called.is_empty() {
        writeln!(table, "_No row was called slower, faster or changed._\n").unwrap();
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
const CALLED: [Verdict; 3] = [Verdict::Slower, Verdict::Faster, Verdict::Changed];

fn chars(text: &str) -> usize {
    text.chars().count()
}
