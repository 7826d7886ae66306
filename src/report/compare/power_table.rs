//! The power section: the smallest change each class of rows could have called.

use super::comparison::Comparison;
use crate::report::format::table_cell;
use std::fmt::Write;

/// What size of slower change each class of rows could have called.
pub(super) fn write_power(out: &mut String, c: &Comparison) {
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
