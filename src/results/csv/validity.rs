//! What no row metaprep wrote can be: a kind, family, arm or layout it does not know, a metric
//! that is no name, a time in another unit than µs, a stop reason no writer gives, a size of
//! 0, a median that is no number, an infinite value, a negative measurement, a median outside
//! its own interval, a telemetry reading that is negative, not finite or over 100%, or a host
//! scale that is no factor. Each error names the column.

use super::row::{CellKey, Row};
use super::{KIND_FLOOR, KIND_PREP, KIND_STEP};
use crate::axes::floor_item::{HARNESS, HOST_REFERENCE};
use crate::axes::{Arm, Drafter, Family, FloorItem, Layout};
use crate::results::telemetry::reading_problem;

/// The longest time a row may hold, µs.
const MAX_US: f64 = 1e9;

/// Why a row cannot be one metaprep wrote: a kind, family, arm or layout it does not know
/// (each checked by its own parser, so a new arm is known as soon as it exists), a median
/// that is not a number, an infinite value, a negative time, rate or ratio (a derived row,
/// a difference, may be negative), or a median outside its own interval.
pub(super) fn check_row(row: &Row) -> std::result::Result<(), String> {
    check_names(&row.kind, &row.family, &row.arm, &row.layout)?;
    // A floor item has no block: its rows' block_size is not read.
    let block = (row.kind != KIND_FLOOR).then_some(row.block_size);
    for (name, v) in [("batch_size", Some(row.batch_size)), ("block_size", block)] {
        if v == Some(0) {
            return Err(format!("column `{name}`: 0 is no size: sizes start at 1"));
        }
    }
    check_labels(row)?;
    check_telemetry(row)?;
    if row.median.is_nan() {
        return Err("column `median`: the median is not a number".into());
    }
    let values = [
        ("median", row.median),
        ("p10", row.p10),
        ("p90", row.p90),
        ("ci_lo", row.ci_lo),
        ("ci_hi", row.ci_hi),
    ];
    if let Some((name, v)) = values.iter().find(|(_, v)| v.is_infinite()) {
        return Err(format!("column `{name}`: {v} is not a measurement"));
    }
    if row.unit == "us" {
        if let Some((name, v)) = values.iter().find(|(_, v)| v.abs() > MAX_US) {
            return Err(format!(
                "column `{name}`: {v:e} us is over {MAX_US:e} us (1000 s), longer than any step \
                 or prep metaprep times"
            ));
        }
    }
    if row.stop_reason != "derived" {
        if let Some((name, v)) = values.iter().find(|(_, v)| *v < 0.0) {
            return Err(format!("column `{name}`: {v} {} is negative", row.unit));
        }
    }
    // A spread is both percentiles or neither, the lower first.
    if row.p10.is_nan() != row.p90.is_nan() || row.p10 > row.p90 {
        return Err(format!(
            "columns `p10`, `p90`: {} <= {} does not hold: the 10th percentile is at most the \
             90th, and both are numbers or neither",
            row.p10, row.p90
        ));
    }
    // An interval is both bounds or neither.
    if row.ci_lo.is_nan() != row.ci_hi.is_nan() {
        return Err(format!(
            "columns `ci_lo`, `ci_hi`: {} and {}: an interval has both bounds or neither",
            row.ci_lo, row.ci_hi
        ));
    }
    // NaN bounds are no interval (too few samples); a median outside its own is no row.
    if !(row.ci_lo.is_nan()
        || row.ci_hi.is_nan()
        || row.ci_lo <= row.median && row.median <= row.ci_hi)
    {
        return Err(format!(
            "columns `ci_lo`, `median`, `ci_hi`: {} <= {} <= {} does not hold: an interval \
             holds its median",
            row.ci_lo, row.median, row.ci_hi
        ));
    }
    Ok(())
}

/// What stopped a row's samples or rounds, as the writers name it: [`RoundsStop`] and
/// [`StopReason`] (`crate::stats::stopping`), `fixed` (a set count), `timeline` (a steps
/// timeline's pass), `derived` (a difference or ratio of other rows).
///
/// [`RoundsStop`]: crate::stats::stopping::RoundsStop
/// [`StopReason`]: crate::stats::stopping::StopReason
pub(crate) const STOP_REASONS: &[&str] = &[
    "precision",
    "max-rounds",
    "time-cap",
    "gpu-paced-max-rounds",
    "ci",
    "sample-cap",
    "fixed",
    "timeline",
    "derived",
];

/// A metric's name is a word of `[a-z0-9_]`, a time (`_us`) is in µs, and its stop reason is
/// one the writers give.
fn check_labels(row: &Row) -> std::result::Result<(), String> {
    let word = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if !word(&row.metric) {
        return Err(format!(
            "column `metric`: `{}` is no metric name (lowercase letters, digits and `_`)",
            row.metric
        ));
    }
    if row.metric.ends_with("_us") && row.unit != "us" {
        return Err(format!(
            "column `unit`: `{}` for `{}`, a time metaprep writes in `us`",
            row.unit, row.metric
        ));
    }
    if row.unit.is_empty() {
        return Err(format!("column `unit`: empty for `{}`", row.metric));
    }
    if !STOP_REASONS.contains(&row.stop_reason.as_str()) {
        return Err(format!(
            "column `stop_reason`: `{}` is no stop reason: one of {}",
            row.stop_reason,
            STOP_REASONS.join(", ")
        ));
    }
    Ok(())
}

/// The cell's NVML and GPM readings, where present, are readings ([`reading_problem`]), and
/// a what-if host scale is a positive factor.
fn check_telemetry(row: &Row) -> std::result::Result<(), String> {
    if let Some(scale) = row.host_scale.filter(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(format!(
            "column `host_scale`: {scale} is no host scale (a factor above 0)"
        ));
    }
    let readings = [
        ("sm_clock_mhz", row.sm_clock_mhz),
        ("mem_clock_mhz", row.mem_clock_mhz),
        ("power_w", row.power_w),
        ("temp_c", row.temp_c),
        ("gpu_util_pct", row.gpu_util_pct),
        ("gpm_sm_util_pct", row.gpm_sm_util_pct),
        ("gpm_dram_bw_util_pct", row.gpm_dram_bw_util_pct),
        ("gpm_nvlink_rx_mib_s", row.gpm_nvlink_rx_mib_s),
        ("gpm_nvlink_tx_mib_s", row.gpm_nvlink_tx_mib_s),
        ("gpm_cell_share_pct", row.gpm_cell_share_pct),
    ];
    // A missing reading is an empty field (`None`); NaN in one is none.
    if let Some(problem) =
        (readings.iter()).find_map(|&(name, v)| v.and_then(|v| reading_problem(name, v)))
    {
        return Err(problem);
    }
    Ok(())
}

/// A cell's kind, family, arm and layout, each one metaprep writes; the error names the column.
pub(crate) fn check_cell_key(key: &CellKey) -> std::result::Result<(), String> {
    check_names(&key.kind, &key.family, &key.arm, &key.layout)
}

fn check_names(
    kind: &str,
    family: &str,
    arm: &str,
    layout: &str,
) -> std::result::Result<(), String> {
    let column = |name: &str, why: String| Err(format!("column `{name}`: {why}"));
    if let Err(e) = layout.parse::<Layout>() {
        return column("layout", e.to_string());
    }
    match kind {
        KIND_PREP => {
            if let Err(e) = family.parse::<Family>() {
                return column("family", e);
            }
            if let Err(e) = arm.parse::<Arm>() {
                return column("arm", e);
            }
        }
        KIND_STEP => {
            if Drafter::of_step_family(family).is_none() {
                let names: Vec<&str> = Drafter::ALL.iter().map(|d| d.step_family()).collect();
                return column(
                    "family",
                    format!(
                        "`{}` is not a step row's family: `{}` (a what-if host scale has \
                         its own column, `host_scale`)",
                        family,
                        names.join("` or `")
                    ),
                );
            }
            if let Err(e) = arm.parse::<Arm>() {
                return column("arm", e);
            }
        }
        KIND_FLOOR => {
            if family != KIND_FLOOR {
                return column(
                    "family",
                    format!("`{}` is not a floor row's family: `floor`", family),
                );
            }
            // The harness's overhead and the host-speed reference are floor rows of their own.
            if arm != HARNESS && arm != HOST_REFERENCE {
                if let Err(e) = arm.parse::<FloorItem>() {
                    return column("arm", format!("{e} (or {HARNESS}, {HOST_REFERENCE})"));
                }
            }
        }
        other => {
            return column(
                "kind",
                format!("`{other}` is not a kind: use {KIND_PREP}, {KIND_FLOOR} or {KIND_STEP}"),
            )
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axes::floor_item::{HARNESS, HOST_REFERENCE};
    use crate::results::csv::fixtures::{error_of, good_text, write_file};
    use crate::results::csv::test_rows::row;
    use crate::results::csv::*;

    #[test]
    fn unknown_names_are_refused_naming_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let text = good_text();
        let cases = [
            (
                ",graph,4,5,",
                ",graphs,4,5,",
                "line 2: prep dspark_draft_block/graphs",
                "column `arm`: unknown arm 'graphs'",
            ),
            (
                "prep,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "prep,dspark_draft_block,graph,4,5,tp3,,false,step_us",
                "line 2",
                "column `layout`: `tp3` is not a layout",
            ),
            (
                "prep,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "prep,dspark,graph,4,5,tp1,,false,step_us",
                "line 2",
                "column `family`: unknown family 'dspark'",
            ),
            (
                "prep,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "bench,dspark_draft_block,graph,4,5,tp1,,false,step_us",
                "line 2",
                "column `kind`: `bench` is not a kind",
            ),
            (
                "floor,floor,empty-kernel",
                "floor,floor,empty-kernels",
                "line 4",
                "column `arm`: unknown floor item 'empty-kernels'",
            ),
            (
                "floor,floor,empty-kernel",
                "floor,prep,empty-kernel",
                "line 4",
                "column `family`: `prep` is not a floor row's family",
            ),
        ];
        for (from, to, line, why) in cases {
            assert!(text.contains(from), "{from}");
            let error = error_of(&write_file(&dir, &text.replacen(from, to, 1)));
            assert!(error.contains(line) && error.contains(why), "{to}: {error}");
        }
    }

    #[test]
    fn the_harness_and_the_host_reference_are_floor_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");

        // The harness row and the host-speed reference are floor rows.
        let harness = row("floor", "floor", HARNESS, 1, "overhead_us", 0.2);
        let host = row("floor", "floor", HOST_REFERENCE, 1, "step_us", 21.0);
        write_rows(&path, &[harness, host]).unwrap();
        assert_eq!(read_rows(&path).unwrap().len(), 2);
    }

    #[test]
    fn a_median_outside_its_interval_and_impossible_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let good = row("prep", "dsa_decode", "graph", 8, "step_us", 20.0);
        let cases: [(Spoil, &str); 16] = [
            (
                |r| r.metric = String::new(),
                "column `metric`: `` is no metric name",
            ),
            (
                |r| r.metric = "Step us".into(),
                "column `metric`: `Step us`",
            ),
            (
                |r| r.unit = "ms".into(),
                "column `unit`: `ms` for `step_us`",
            ),
            (
                |r| r.stop_reason = "whatever".into(),
                "column `stop_reason`: `whatever`",
            ),
            (
                |r| r.sm_clock_mhz = Some(-5.0),
                "column `sm_clock_mhz`: -5 is no reading",
            ),
            (
                |r| r.power_w = Some(f64::NAN),
                "column `power_w`: NaN is no reading",
            ),
            (
                |r| r.gpu_util_pct = Some(999.0),
                "column `gpu_util_pct`: 999 is no reading (0 to 105)",
            ),
            (|r| r.p10 = 30.0, "columns `p10`, `p90`: 30 <= "),
            (|r| r.p90 = f64::NAN, "columns `p10`, `p90`"),
            (|r| r.block_size = 0, "column `block_size`: 0 is no size"),
            (|r| r.ci_lo = 20.5, "20.5 <= 20 <= 20.2 does not hold"),
            (|r| r.ci_hi = 19.0, "19.8 <= 20 <= 19 does not hold"),
            (
                |r| r.median = f64::NAN,
                "column `median`: the median is not a number",
            ),
            (
                |r| r.p90 = f64::INFINITY,
                "column `p90`: inf is not a measurement",
            ),
            (
                |r| r.median = f64::NEG_INFINITY,
                "column `median`: -inf is not a measurement",
            ),
            (|r| r.p10 = -1.0, "column `p10`: -1 us is negative"),
        ];
        refused_spoiled(&path, &good, &cases);
        // A what-if host scale is a factor above 0 (the cell's name shows it).
        for scale in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
            let mut bad = good.clone();
            bad.host_scale = Some(scale);
            write_rows(&path, &[bad]).unwrap();
            let error = error_of(&path);
            assert!(
                error.contains(&format!("column `host_scale`: {scale} is no host scale")),
                "{error}"
            );
        }
        // A derived row (a difference) may be negative, its interval still holds it.
        let mut diff = good.clone();
        (diff.stop_reason, diff.median, diff.ci_lo, diff.ci_hi) =
            ("derived".into(), -2.0, -3.0, -1.0);
        (diff.p10, diff.p90) = (-3.5, -0.5);
        write_rows(&path, &[diff.clone()]).unwrap();
        assert_eq!(read_rows(&path).unwrap(), vec![diff.clone()]);
        diff.median = -0.5;
        diff.ci_hi = -1.0;
        write_rows(&path, &[diff]).unwrap();
        assert!(error_of(&path).contains("does not hold"));
    }

    #[test]
    fn half_an_interval_and_times_past_a_thousand_seconds_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let good = row("prep", "dsa_decode", "graph", 8, "step_us", 20.0);
        let cases: [(Spoil, &str); 4] = [
            (
                |r| r.ci_lo = f64::NAN,
                "an interval has both bounds or neither",
            ),
            (
                |r| r.ci_hi = f64::NAN,
                "an interval has both bounds or neither",
            ),
            (
                |r| {
                    (r.median, r.p10, r.p90, r.ci_lo, r.ci_hi) = (1e308, 1e308, 1e308, 1e308, 1e308)
                },
                "column `median`: 1e308 us is over 1e9 us",
            ),
            (|r| r.ci_hi = 2e9, "column `ci_hi`: 2e9 us is over 1e9 us"),
        ];
        refused_spoiled(&path, &good, &cases);
    }

    /// A change that makes a good row bad.
    type Spoil = fn(&mut Row);

    /// Each spoiled copy of `good`, written after `good`, is refused naming its line and why.
    fn refused_spoiled(path: &std::path::Path, good: &Row, cases: &[(Spoil, &str)]) {
        for (spoil, why) in cases {
            let mut bad = good.clone();
            spoil(&mut bad);
            write_rows(path, &[good.clone(), bad]).unwrap();
            let error = error_of(path);
            assert!(
                error.contains("line 3: prep dsa_decode/graph bs=8") && error.contains(why),
                "{why}: {error}"
            );
        }
    }

    #[test]
    fn every_stop_reason_a_writer_gives_is_one_the_check_knows() {
        use crate::stats::stopping::{RoundsStop, StopReason};
        let written = [
            RoundsStop::Precision.as_str(),
            RoundsStop::MaxRounds.as_str(),
            RoundsStop::TimeCap.as_str(),
            RoundsStop::GpuPacedMaxRounds.as_str(),
            StopReason::Converged.as_str(),
            StopReason::TimeCap.as_str(),
            StopReason::SampleCap.as_str(),
        ];
        assert!(
            written.iter().all(|w| STOP_REASONS.contains(w)),
            "{written:?}"
        );
    }
}
