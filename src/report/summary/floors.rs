//! The floor table (every floor item's rows in fixed order) and what queuing a read behind
//! running GPU work added over the same read on an idle GPU.

use super::index::Index;
use crate::axes::floor_item::BUSY_BEFORE_READ_US;
use crate::axes::FloorItem;
use crate::report::format::{floor_median, floor_rank, fmt_num, layout_rank, table_cell};
use crate::results::csv::{Row, KIND_FLOOR};
use std::fmt::{self, Write};

pub(super) fn write_floors(out: &mut String, index: &Index) -> fmt::Result {
    let mut floors: Vec<&Row> = index.rows.iter().filter(|r| r.kind == KIND_FLOOR).collect();
    if floors.is_empty() {
        return Ok(());
    }
    floors.sort_by(|a, b| {
        (
            floor_rank(&a.arm),
            &a.arm,
            layout_rank(&a.layout),
            &a.layout,
            &a.metric,
        )
            .cmp(&(
                floor_rank(&b.arm),
                &b.arm,
                layout_rank(&b.layout),
                &b.layout,
                &b.metric,
            ))
    });
    writeln!(out, "### Floor\n")?;
    writeln!(
        out,
        "| item | metric | unit | median | p10 | p90 | 95% CI of median | samples |"
    )?;
    writeln!(out, "|---|---|---|---:|---:|---:|---|---:|")?;
    for row in floors {
        let item = if row.throttled {
            format!("{} ⚠ throttled", table_cell(&row.arm))
        } else {
            table_cell(&row.arm)
        };
        writeln!(
            out,
            "| {item} | {} | {} | {} | {} | {} | [{}, {}] | {} |",
            table_cell(&row.metric),
            table_cell(&row.unit),
            fmt_num(row.median),
            fmt_num(row.p10),
            fmt_num(row.p90),
            fmt_num(row.ci_lo),
            fmt_num(row.ci_hi),
            row.samples
        )?;
    }
    writeln!(out)?;
    write_read_behind_work(out, index)
}

/// What queuing the read behind running GPU work added: `d2h-int-busy` over `d2h-int` and
/// the work itself. A host read of lengths in an engine lands that way, behind the forward.
fn write_read_behind_work(out: &mut String, index: &Index) -> fmt::Result {
    let step = |item| floor_median(index.rows, item, "step_us");
    let (Some(idle), Some(busy)) = (step(FloorItem::D2hInt), step(FloorItem::D2hIntBusy)) else {
        return Ok(());
    };
    let extra = busy - idle - BUSY_BEFORE_READ_US;
    let beyond = if extra > 0.0 {
        format!(
            "{} µs more than the read and the work added up",
            fmt_num(extra)
        )
    } else {
        "no more than the read and the work added up".to_string()
    };
    writeln!(
        out,
        "A small read queued behind {} µs of running GPU work (`{}`, the work's launch \
         included) took {} µs against {} µs on an idle GPU (`{}`): {beyond}. On the H200 a \
         copy queued behind running work returned in steps of about 8 µs after the work, and \
         eager-sync's read cost moved in such steps with where its read landed \
         (docs/read-paths.md).\n",
        fmt_num(BUSY_BEFORE_READ_US),
        FloorItem::D2hIntBusy.name(),
        fmt_num(busy),
        fmt_num(idle),
        FloorItem::D2hInt.name(),
    )
}

#[cfg(test)]
mod tests {

    use crate::results::csv::KIND_FLOOR;

    use crate::report::summary::fixtures::prep;
    use crate::report::summary::render_summary;
    use crate::results::csv::test_rows::row;
    use crate::results::env::test_env;

    #[test]
    fn a_read_behind_running_work_is_set_against_one_on_an_idle_gpu() {
        let floors = |busy: Option<f64>| {
            let mut rows = vec![
                prep("graph", 22.5),
                row(KIND_FLOOR, "floor", "d2h-int", 1, "step_us", 9.5),
            ];
            rows.extend(busy.map(|us| row(KIND_FLOOR, "floor", "d2h-int-busy", 1, "step_us", us)));
            render_summary(&rows, &test_env())
        };
        // 19.75 = 9.5 on an idle GPU + 2 µs of work + 8.25 µs of waiting.
        let text = floors(Some(19.75));
        assert!(
            text.contains(
                "queued behind 2.00 µs of running GPU work (`d2h-int-busy`, the work's launch \
                 included) took 19.8 µs against 9.50 µs on an idle GPU (`d2h-int`): 8.25 µs \
                 more than the read and the work added up"
            ),
            "{text}"
        );
        // A read that cost no more than the work and the idle read says so, not "-0.5 µs".
        assert!(floors(Some(11.0)).contains(": no more than the read and the work added up."));
        // A run without the busy read (from before it) says nothing of it.
        assert!(!floors(None).contains("queued behind"));
    }
}
