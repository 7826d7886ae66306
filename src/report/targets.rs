//! The speed the suite itself must reach, read from a sweep's own rows (never asserted in
//! a timed test): the graph arm near the empty-graph floor, a small harness overhead, a
//! tightly resolved host-read cost, and a short default sweep.

use crate::results::csv::{Row, KIND_FLOOR, KIND_PREP};
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub measured: String,
    pub limit: String,
    /// None when the run has no rows to judge it by.
    pub met: Option<bool>,
}

fn worst<'a>(
    rows: impl Iterator<Item = &'a Row>,
    key: impl Fn(&Row) -> f64,
) -> Option<(&'a Row, f64)> {
    rows.map(|r| (r, key(r)))
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn describe(r: &Row) -> String {
    format!(
        "{} bs {} block {} {}",
        r.cell_family(),
        r.batch_size,
        r.block_size,
        r.layout
    )
}

pub fn speed_targets(rows: &[Row], sweep_seconds: Option<f64>) -> Vec<Target> {
    let mut out = Vec::new();
    let graph = worst(
        rows.iter().filter(|r| {
            r.kind == KIND_PREP
                && r.arm == "graph"
                && r.metric == "floor_multiple"
                && r.batch_size <= 64
                && r.block_size == 5
        }),
        |r| r.median,
    );
    out.push(Target {
        name: "graph arm per step, bs <= 64, block 5, over the empty-graph floor (worst cell)"
            .into(),
        measured: graph.map_or("no rows".into(), |(r, v)| {
            format!("{v:.2}x ({})", describe(r))
        }),
        limit: "<= 1.20x".into(),
        met: graph.map(|(_, v)| v <= 1.2),
    });
    let overhead = rows
        .iter()
        .find(|r| r.kind == KIND_FLOOR && r.metric == "overhead_us");
    out.push(Target {
        name: "harness overhead per step over the empty-graph floor".into(),
        measured: overhead.map_or("no rows".into(), |r| {
            format!("{:.3} us [{:.3}, {:.3}]", r.median, r.ci_lo, r.ci_hi)
        }),
        limit: "<= 1 us".into(),
        met: overhead.map(|r| r.median <= 1.0),
    });
    // Half-width over the allowance max(2% of the cost, 0.3 us): <= 1 means resolved.
    let read = worst(rows.iter().filter(|r| r.metric == "read_cost_us"), |r| {
        let half = (r.ci_hi - r.ci_lo) / 2.0;
        half / (0.02 * r.median.abs()).max(0.3)
    });
    out.push(Target {
        name: "host-read cost (each reading arm - eager-device), 95% CI half-width (worst cell)"
            .into(),
        measured: read.map_or("no rows".into(), |(r, _)| {
            let half = (r.ci_hi - r.ci_lo) / 2.0;
            format!(
                "+/-{half:.3} us on {:.2} us ({:.1}%, {} {})",
                r.median,
                100.0 * half / r.median.abs(),
                r.arm,
                describe(r)
            )
        }),
        limit: "<= max(2%, 0.3 us)".into(),
        met: read.map(|(_, ratio)| ratio <= 1.0),
    });
    out.push(Target {
        name: "sweep wall time".into(),
        measured: sweep_seconds.map_or("n/a".into(), |s| format!("{s:.0} s")),
        limit: "<= 300 s (default sweep)".into(),
        met: sweep_seconds.map(|s| s <= 300.0),
    });
    out
}

pub fn render(targets: &[Target]) -> String {
    let mut md = String::from("| target | measured | limit | met |\n|---|---|---|---|\n");
    for t in targets {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "n/a",
        };
        let _ = writeln!(md, "| {} | {} | {} | {met} |", t.name, t.measured, t.limit);
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: &str, arm: &str, metric: &str, bs: u32, median: f64, lo: f64, hi: f64) -> Row {
        let mut row =
            crate::results::csv::test_rows::row(kind, "dsa_decode", arm, bs, metric, median);
        (row.ci_lo, row.ci_hi, row.stop_reason) = (lo, hi, "derived".into());
        row
    }

    #[test]
    fn targets_judge_the_worst_cell() {
        let rows = vec![
            row("prep", "graph", "floor_multiple", 8, 1.1, 1.0, 1.2),
            row("prep", "graph", "floor_multiple", 64, 1.5, 1.4, 1.6),
            row("prep", "graph", "floor_multiple", 256, 9.0, 8.0, 10.0), // bs > 64: not judged
            row("floor", "harness", "overhead_us", 1, 0.2, 0.1, 0.3),
            row("prep", "eager-sync", "read_cost_us", 8, 20.0, 19.8, 20.2), // +/-0.2 <= 0.4
            row("prep", "eager-sync", "read_cost_us", 64, 10.0, 9.0, 11.0), // +/-1.0 > 0.3
        ];
        let t = speed_targets(&rows, Some(120.0));
        assert_eq!(t[0].met, Some(false));
        assert!(t[0].measured.starts_with("1.50x"), "{}", t[0].measured);
        assert_eq!(t[1].met, Some(true));
        assert_eq!(t[2].met, Some(false));
        assert!(
            t[2].measured.contains("eager-sync dsa_decode bs 64"),
            "{}",
            t[2].measured
        );
        assert_eq!(t[3].met, Some(true));
        let md = render(&t);
        assert!(md.contains("**no**") && md.contains("| yes |"));
        let none = speed_targets(&[], None);
        assert!(none.iter().all(|t| t.met.is_none()));
    }
}
