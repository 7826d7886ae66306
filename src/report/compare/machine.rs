//! What the pair can see of the machine: the environment and every floor's move.

use super::comparison::{Comparison, FloorMove};
use super::table::{change_cells, throttled_mark};
use crate::report::format::{fmt_num, table_cell};
use crate::results::env::{describe, Difference};
use std::fmt::Write;

/// The machine's differences and how each floor moved: no verdicts here.
pub(super) fn write_environment(out: &mut String, c: &Comparison, machine: &[Difference]) {
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
