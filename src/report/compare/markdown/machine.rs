//! What the pair can see of the machine: the host-speed reference, the floors, the environment.

use super::super::comparison::{Comparison, FloorMove};
use super::table::{change_cells, throttled_mark};
use crate::axes::floor_item::HOST_REFERENCE;
use crate::report::change::Verdict;
use crate::report::format::{fmt_interval, fmt_num, fmt_pct, table_cell};
use crate::results::env::{describe, Difference};
use crate::results::pacing::TwinReference;
use std::fmt::Write;

/// The host-speed reference and the floors that moved, and how many calls each explained.
pub(super) fn write_host_and_floors(out: &mut String, c: &Comparison) {
    let moved = c.moved_floors();
    let explained = c.count(Verdict::FloorMoved) + c.count(Verdict::HostMoved);
    let shown_same = c.shown_same();
    if moved.is_empty() && explained == 0 && shown_same == 0 && c.host().is_none() {
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
    if shown_same > 0 {
        writeln!(
            out,
            "- {shown_same} GPU-paced rows (graph arms' step and device time, and their \
             bandwidth) that the raw change left `uncertain` are `same`: their change per unit of \
             the same round's two-node empty graph (`{}`, how fast the GPU starts a graph's \
             work, which each process draws anew) is within ±{t}%, and so is the raw median.",
            TwinReference::EmptyGraph2.floor_arm()
        )
        .unwrap();
    }
    writeln!(
        out,
        "- Calls explained: {} `floor moved` (own floor moved that way, change over it within \
         ±{t}%), {} `host moved` (the twin's reference moved that way, change per unit of it \
         within ±{t}%); neither fails the comparison.\n",
        c.count(Verdict::FloorMoved),
        c.count(Verdict::HostMoved)
    )
    .unwrap();
}

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
