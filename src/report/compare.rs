//! `metaprep compare BASE NEW`: the before/after table of two runs, or of two arms of one
//! run, with a verdict per cell and metric that can gate CI.
//!
//! **Interval of a change.** Each row carries a 95% confidence interval of its median. The
//! change NEW/BASE − 1 gets its interval by MOVER (method of variance estimates recovery,
//! Zou & Donner 2008) on the log scale: the two medians' intervals are combined as if
//! independent, keeping their asymmetry. It is close to a true 95% interval and narrower
//! than the "box" bound `[lo_new/hi_base, hi_new/lo_base] − 1`, which would push verdicts
//! needlessly towards `uncertain`.
//!
//! **Direction.** "Faster" means better: lower is better for times (unit `us`, metrics
//! ending in `_us`) and for `floor_multiple`; higher is better for throughput (`tok/s`) and
//! forward `occupancy`. A metric of unknown direction that moved beyond the threshold is
//! reported as `changed` and does not fail the comparison.

use crate::report::atomic::write_atomic;
use crate::report::csv::{read_rows, Row};
use crate::report::env::EnvRecord;
use crate::report::run_dir::RunDir;
use crate::report::summary::{
    arm_rank, code, fmt_interval, fmt_num, fmt_pct, kind_rank, layout_rank, table_cell,
};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Exit status for bad input (unreadable runs, mismatched setups, nothing to compare).
pub const EXIT_BAD_INPUT: u8 = 2;

/// Compare two runs (or two arms of one run) cell by cell.
///
/// Each matched cell and metric gets the change of its median in percent with a 95%
/// interval and a verdict: `same` (interval inside ±threshold), `faster` / `slower` (the
/// whole interval beyond the threshold in the better / worse direction; lower is better for
/// times, higher for throughput and occupancy) or `uncertain`. Exit status: 0, or 1 when
/// any cell got slower (to gate CI), or 2 on bad input.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct CompareArgs {
    /// The "before" run: a run directory (`results/<run>/`) or a results CSV file.
    pub base: PathBuf,
    /// The "after" run: a run directory or a results CSV file. With --base-arm/--new-arm it
    /// may be the same as BASE.
    pub new: PathBuf,
    /// Compare two arms instead of two runs: the rows of this arm in BASE (e.g.
    /// `eager-sync`) are the baseline. Needs --new-arm.
    #[arg(long, value_name = "ARM", requires = "new_arm")]
    pub base_arm: Option<String>,
    /// The arm of NEW compared against --base-arm (e.g. `graph`). Needs --base-arm.
    #[arg(long, value_name = "ARM", requires = "base_arm")]
    pub new_arm: Option<String>,
    /// Change in percent that counts as noise: a cell is `same` when its whole interval lies
    /// within ±PCT, and `faster`/`slower` only when its whole interval lies beyond it.
    #[arg(long, value_name = "PCT", default_value_t = 2.0)]
    pub threshold: f64,
    /// Also write the markdown report to FILE (replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Compare even when the two runs' env.json differ in GPU model, GPU count or compute
    /// capability (driver and git revision may always differ); the report says so.
    #[arg(long)]
    pub allow_mismatch: bool,
}

/// What a comparison found. The caller prints `markdown` and exits with `exit_code()`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOutcome {
    pub markdown: String,
    pub any_slower: bool,
}

impl CompareOutcome {
    /// 1 when something got slower beyond the threshold, else 0. Bad input is an `Err` from
    /// [`run_compare`]; exit with [`EXIT_BAD_INPUT`] then.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.any_slower)
    }
}

/// Relative change of NEW's median over BASE's, in percent, with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub pct: f64,
    pub lo_pct: f64,
    pub hi_pct: f64,
}

/// NEW/BASE − 1 in percent, interval by MOVER on the log scale (see the module docs).
/// `None` when a median or interval bound is not positive: a ratio means nothing there.
pub fn relative_change(base: &Row, new: &Row) -> Option<Change> {
    let log_bounds = |row: &Row| -> Option<(f64, f64, f64)> {
        // No interval (too few samples: NaN bounds) means no change can be called; checked
        // before min/max, which would quietly replace a NaN bound by the median.
        if !(row.ci_lo.is_finite() && row.ci_hi.is_finite()) {
            return None;
        }
        // A median outside its own interval would make a negative width; widen to hold it.
        let (lo, hi) = (row.ci_lo.min(row.median), row.ci_hi.max(row.median));
        let all_positive = [lo, row.median, hi]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0);
        all_positive.then(|| (lo.ln(), row.median.ln(), hi.ln()))
    };
    let (base_lo, base_mid, base_hi) = log_bounds(base)?;
    let (new_lo, new_mid, new_hi) = log_bounds(new)?;
    let log_ratio = new_mid - base_mid;
    let lower = log_ratio - (new_mid - new_lo).hypot(base_hi - base_mid);
    let upper = log_ratio + (new_hi - new_mid).hypot(base_mid - base_lo);
    let pct = |log: f64| log.exp_m1() * 100.0;
    Some(Change {
        pct: pct(log_ratio),
        lo_pct: pct(lower),
        hi_pct: pct(upper),
    })
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    Unknown,
}

pub fn better_direction(metric: &str, unit: &str) -> Better {
    match (metric, unit) {
        (_, "us" | "ns" | "ms" | "s") | ("floor_multiple", _) => Better::Lower,
        (_, "tok/s") | ("occupancy", _) => Better::Higher,
        (m, _) if m.ends_with("_us") => Better::Lower,
        (m, _) if m.ends_with("_tok_s") => Better::Higher,
        _ => Better::Unknown,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Slower,
    Uncertain,
    Changed,
    Faster,
    Same,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Uncertain => "uncertain",
            Verdict::Changed => "changed",
        }
    }
}

/// The verdict of one cell and metric. Without a change interval (a zero or negative
/// median) identical medians are `same` and anything else is `uncertain`.
pub fn judge(base: &Row, new: &Row, threshold_pct: f64) -> (Option<Change>, Verdict) {
    let Some(change) = relative_change(base, new) else {
        let verdict = if base.median == new.median {
            Verdict::Same
        } else {
            Verdict::Uncertain
        };
        return (None, verdict);
    };
    let t = threshold_pct;
    let verdict = if change.lo_pct >= -t && change.hi_pct <= t {
        Verdict::Same
    } else if change.lo_pct > t || change.hi_pct < -t {
        let went_up = change.lo_pct > t;
        match (better_direction(&new.metric, &new.unit), went_up) {
            (Better::Higher, true) | (Better::Lower, false) => Verdict::Faster,
            (Better::Higher, false) | (Better::Lower, true) => Verdict::Slower,
            (Better::Unknown, _) => Verdict::Changed,
        }
    } else {
        Verdict::Uncertain
    };
    (Some(change), verdict)
}

/// One matched cell and metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub base: Row,
    pub new: Row,
    pub change: Option<Change>,
    pub verdict: Verdict,
}

/// Everything [`compare_rows`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// In table order: kind, family, layout, batch size, block size, arm, metric.
    pub matched: Vec<Matched>,
    /// Cells and metrics present on one side only, as readable labels.
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.matched.iter().filter(|m| m.verdict == verdict).count()
    }
}

/// Matches rows on (kind, family, batch size, block size, layout, metric) and arm. With
/// `arms = Some((base_arm, new_arm))` only those arms are taken from each side and matched
/// with each other. Fails when a side holds a cell twice or when nothing matches.
pub fn compare_rows(
    base: &[Row],
    new: &[Row],
    arms: Option<(&str, &str)>,
    threshold_pct: f64,
) -> Result<Comparison> {
    // Each arm is read against its own floor (an empty graph replay for graph arms, an empty
    // kernel launch for eager ones), so multiples of the floor do not compare across arms.
    let across_arms = arms.is_some_and(|(b, n)| b != n);
    let comparable = |rows: &[Row]| -> Vec<Row> {
        rows.iter()
            .filter(|r| !(across_arms && r.metric == "floor_multiple"))
            .cloned()
            .collect()
    };
    let (base, new) = (comparable(base), comparable(new));
    let base_index = index_side(&base, "BASE", arms.map(|(b, _)| b))?;
    let new_index = index_side(&new, "NEW", arms.map(|(_, n)| n))?;
    let mut comparison = Comparison::default();
    for (key, base_row) in &base_index {
        match new_index.get(key) {
            Some(new_row) => {
                let (change, verdict) = judge(base_row, new_row, threshold_pct);
                comparison.matched.push(Matched {
                    base: (*base_row).clone(),
                    new: (*new_row).clone(),
                    change,
                    verdict,
                });
            }
            None => comparison.only_in_base.push(label(base_row)),
        }
    }
    comparison.only_in_new = new_index
        .iter()
        .filter(|(key, _)| !base_index.contains_key(key))
        .map(|(_, row)| label(row))
        .collect();
    if comparison.matched.is_empty() {
        let arms_of = |rows: &[Row]| {
            let arms: BTreeSet<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
            arms.into_iter().collect::<Vec<_>>().join(", ")
        };
        bail!(
            "no cell of BASE matches a cell of NEW on (kind, family, batch size, block size, \
             layout, metric{}): are they runs of the same sweep? (arms in BASE: {}; in NEW: {})",
            if arms.is_some() { "" } else { ", arm" },
            arms_of(&base),
            arms_of(&new)
        );
    }
    Ok(comparison)
}

/// The key a row is matched on; its field order is the table order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct MatchKey {
    kind_rank: u8,
    kind: String,
    family: String,
    layout_rank: u8,
    layout: String,
    batch_size: u32,
    block_size: u32,
    arm_rank: u8,
    arm: String,
    metric: String,
}

fn index_side<'a>(
    rows: &'a [Row],
    side: &str,
    arm: Option<&str>,
) -> Result<BTreeMap<MatchKey, &'a Row>> {
    let mut index = BTreeMap::new();
    for row in rows.iter().filter(|r| arm.is_none_or(|a| r.arm == a)) {
        // In arm mode the arm is what differs between the sides, so it is not matched on.
        let matched_arm = if arm.is_some() { "" } else { row.arm.as_str() };
        let key = MatchKey {
            kind_rank: kind_rank(&row.kind),
            kind: row.kind.clone(),
            family: row.family.clone(),
            layout_rank: layout_rank(&row.layout),
            layout: row.layout.clone(),
            batch_size: row.batch_size,
            block_size: row.block_size,
            arm_rank: arm_rank(matched_arm),
            arm: matched_arm.to_string(),
            metric: row.metric.clone(),
        };
        if index.insert(key, row).is_some() {
            bail!(
                "{side} holds two rows for {} metric `{}`: the CSV was merged or appended twice; \
                 keep one of them",
                row.cell_key(),
                row.metric
            );
        }
    }
    if index.is_empty() {
        if let Some(arm) = arm {
            let arms: BTreeSet<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
            bail!(
                "{side} has no rows for arm `{arm}`; its arms are: {}",
                arms.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        bail!("{side} has no result rows: nothing to compare");
    }
    Ok(index)
}

fn label(row: &Row) -> String {
    format!("{} metric `{}`", row.cell_key(), row.metric)
}

/// One side of a comparison as loaded from disk.
struct Input {
    path: PathBuf,
    rows: Vec<Row>,
    /// `None` for a bare CSV file without an `env.json` beside it.
    env: Option<EnvRecord>,
}

fn load_input(path: &Path) -> Result<Input> {
    if path.is_file() {
        let rows = read_rows(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let env = if dir.join(crate::report::env::ENV_FILE).is_file() {
            Some(EnvRecord::read(dir)?)
        } else {
            None
        };
        return Ok(Input {
            path: path.to_path_buf(),
            rows,
            env,
        });
    }
    let run = RunDir::open(path)?;
    Ok(Input {
        path: path.to_path_buf(),
        rows: run.rows,
        env: Some(run.env),
    })
}

/// The first line of every report `compare` writes: `--out` replaces only such a file.
const REPORT_HEADER: &str = "## metaprep compare";

/// Refuses an `--out` that would overwrite an input, a file `compare` did not write (a run's
/// CSV or env.json among them), or need folders created (a typo should not grow a tree).
fn check_out(out: &Path, inputs: &[&Path]) -> Result<()> {
    let name = out.display();
    let resolved = |p: &Path| std::fs::canonicalize(p).ok();
    if let Some(out_real) = resolved(out) {
        if inputs
            .iter()
            .any(|input| resolved(input).as_ref() == Some(&out_real))
        {
            bail!("--out {name} is one of the compared inputs: choose another file");
        }
    }
    match out.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) if !parent.is_dir() => bail!(
            "--out {name}: the folder {} does not exist; create it first",
            parent.display()
        ),
        _ => {}
    }
    if out.is_dir() {
        bail!("--out {name} is a directory: name a markdown file");
    }
    if out.exists() {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        if !text.starts_with(REPORT_HEADER) {
            bail!(
                "--out {name} exists and is not a report `compare` wrote: choose another file \
                 (compare replaces only its own reports)"
            );
        }
    }
    Ok(())
}

/// Runs `metaprep compare`: loads both sides, refuses mismatched setups unless allowed,
/// compares, writes `--out` if given, and returns the markdown for the caller to print.
pub fn run_compare(args: &CompareArgs) -> Result<CompareOutcome> {
    if !args.threshold.is_finite() || !(0.0..=100.0).contains(&args.threshold) {
        bail!(
            "--threshold {} is not a percentage between 0 and 100: pass e.g. `--threshold 2`",
            args.threshold
        );
    }
    if let Some(out) = &args.out {
        check_out(out, &[&args.base, &args.new])?;
    }
    let base = load_input(&args.base)?;
    let new = load_input(&args.new)?;
    let mut warnings = Vec::new();
    match (&base.env, &new.env) {
        (Some(base_env), Some(new_env)) => {
            if let Err(difference) = base_env.same_setup(new_env) {
                if !args.allow_mismatch {
                    bail!(
                        "BASE and NEW ran on different setups (BASE vs NEW: {difference}), so \
                         their numbers are not comparable: compare runs of the same GPU model \
                         and count, or pass --allow-mismatch to compare anyway"
                    );
                }
                warnings.push(format!(
                    "⚠ setups differ (BASE vs NEW: {difference}); compared because of \
                     --allow-mismatch"
                ));
            }
        }
        _ => warnings
            .push("⚠ setup not checked: a side is a CSV without an env.json beside it".to_string()),
    }
    let arms = args.base_arm.as_deref().zip(args.new_arm.as_deref());
    let comparison = compare_rows(&base.rows, &new.rows, arms, args.threshold)?;
    let markdown = render_comparison(&comparison, &base, &new, arms, args.threshold, &warnings)?;
    if let Some(out) = &args.out {
        write_atomic(out, markdown.as_bytes())?;
    }
    Ok(CompareOutcome {
        markdown,
        any_slower: comparison.count(Verdict::Slower) > 0,
    })
}

fn render_comparison(
    comparison: &Comparison,
    base: &Input,
    new: &Input,
    arms: Option<(&str, &str)>,
    threshold: f64,
    warnings: &[String],
) -> Result<String> {
    let mut out = String::new();
    writeln!(out, "{REPORT_HEADER}\n")?;
    for (side, input) in [("BASE", base), ("NEW", new)] {
        write!(
            out,
            "**{side}** {}",
            code(&input.path.display().to_string())
        )?;
        if let Some(env) = &input.env {
            write!(
                out,
                " — git {}, {}, {} ×{}, driver {}",
                code(&env.git_revision),
                env.date,
                env.gpu_name,
                env.gpu_count,
                env.driver_version
            )?;
        }
        writeln!(out, "  ")?;
    }
    if let Some((base_arm, new_arm)) = arms {
        writeln!(
            out,
            "**Arms:** {} (BASE) → {} (NEW)  ",
            code(base_arm),
            code(new_arm)
        )?;
    }
    writeln!(out)?;
    for warning in warnings {
        writeln!(out, "> {warning}\n")?;
    }
    writeln!(
        out,
        "Change = NEW median / BASE median − 1, with a 95% interval (MOVER on the log scale, \
         from each median's 95% interval). Threshold ±{threshold}%: `same` = interval inside \
         it; `faster` / `slower` = whole interval beyond it in the better / worse direction \
         (lower is better for times and floor multiples, higher for throughput and \
         occupancy); `uncertain` otherwise.\n"
    )?;
    writeln!(
        out,
        "**{} slower · {} faster · {} same · {} uncertain{}** ({} matched; {} only in BASE, {} only in NEW)\n",
        comparison.count(Verdict::Slower),
        comparison.count(Verdict::Faster),
        comparison.count(Verdict::Same),
        comparison.count(Verdict::Uncertain),
        match comparison.count(Verdict::Changed) {
            0 => String::new(),
            n => format!(" · {n} changed"),
        },
        comparison.matched.len(),
        comparison.only_in_base.len(),
        comparison.only_in_new.len(),
    )?;
    let (same, changed): (Vec<&Matched>, Vec<&Matched>) = comparison
        .matched
        .iter()
        .partition(|m| m.verdict == Verdict::Same);
    if changed.is_empty() {
        writeln!(out, "_No cell changed beyond ±{threshold}%._\n")?;
    } else {
        write_table(&mut out, &changed, arms)?;
    }
    if !same.is_empty() {
        writeln!(
            out,
            "<details><summary>{} cells and metrics the same</summary>\n",
            same.len()
        )?;
        write_table(&mut out, &same, arms)?;
        writeln!(out, "</details>\n")?;
    }
    for (side, labels) in [
        ("BASE", &comparison.only_in_base),
        ("NEW", &comparison.only_in_new),
    ] {
        if labels.is_empty() {
            continue;
        }
        writeln!(
            out,
            "<details><summary>{} only in {side}</summary>\n",
            labels.len()
        )?;
        for label in labels {
            writeln!(out, "- {label}")?;
        }
        writeln!(out, "\n</details>\n")?;
    }
    Ok(out)
}

fn write_table(out: &mut String, rows: &[&Matched], arms: Option<(&str, &str)>) -> Result<()> {
    writeln!(
        out,
        "| kind | family | layout | bs | block | arm | metric | BASE | NEW | change | 95% interval | verdict |"
    )?;
    writeln!(
        out,
        "|---|---|---|---:|---:|---|---|---:|---:|---:|---|---|"
    )?;
    for m in rows {
        let arm = match arms {
            Some((base_arm, new_arm)) => format!("{base_arm} → {new_arm}"),
            None => m.base.arm.clone(),
        };
        let layout = if m.base.emulated || m.new.emulated {
            format!("{} (emulated)", m.base.layout)
        } else {
            m.base.layout.clone()
        };
        let verdict = match m.verdict {
            Verdict::Slower | Verdict::Faster => format!("**{}**", m.verdict.as_str()),
            v => v.as_str().to_string(),
        };
        let throttled = match (m.base.throttled, m.new.throttled) {
            (true, true) => " ⚠ both throttled",
            (true, false) => " ⚠ BASE throttled",
            (false, true) => " ⚠ NEW throttled",
            (false, false) => "",
        };
        let (change, interval) = match m.change {
            Some(c) => (fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct)),
            None => ("n/a".to_string(), "n/a".to_string()),
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
            table_cell(&m.base.kind),
            table_cell(&m.base.family),
            table_cell(&layout),
            m.base.batch_size,
            m.base.block_size,
            table_cell(&arm),
            table_cell(&format!("{} ({})", m.base.metric, m.base.unit)),
            fmt_num(m.base.median),
            fmt_num(m.new.median),
            change,
            interval,
            verdict,
            throttled
        )?;
    }
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::csv::test_rows::row;

    /// A row with an explicit interval.
    fn with_ci(metric: &str, median: f64, lo: f64, hi: f64) -> Row {
        let mut r = row("prep", "dsa_decode", "graph", 4, metric, median);
        (r.ci_lo, r.ci_hi) = (lo, hi);
        r
    }

    fn verdict_of(base: &Row, new: &Row) -> Verdict {
        judge(base, new, 2.0).1
    }

    #[test]
    fn change_interval_is_mover_on_the_log_scale() {
        let base = with_ci("step_us", 100.0, 99.0, 101.0);
        let new = with_ci("step_us", 110.0, 109.0, 111.0);
        let c = relative_change(&base, &new).unwrap();
        assert!((c.pct - 10.0).abs() < 1e-9);
        // ln 1.1 ∓ hypot of the reaching log half-widths, worked by hand.
        assert!((c.lo_pct - 8.524).abs() < 0.005, "{c:?}");
        assert!((c.hi_pct - 11.498).abs() < 0.005, "{c:?}");
        // Narrower than the box [lo_new/hi_base, hi_new/lo_base] − 1.
        assert!(c.lo_pct > (109.0 / 101.0 - 1.0) * 100.0);
        assert!(c.hi_pct < (111.0 / 99.0 - 1.0) * 100.0);
    }

    #[test]
    fn change_is_undefined_without_positive_values() {
        let zero = with_ci("gap_us", 0.0, 0.0, 0.5);
        let some = with_ci("gap_us", 5.0, 4.5, 5.5);
        assert!(relative_change(&zero, &some).is_none());
        assert_eq!(verdict_of(&zero, &some), Verdict::Uncertain);
        assert_eq!(verdict_of(&zero, &zero), Verdict::Same);
    }

    #[test]
    fn direction_follows_unit_and_metric() {
        assert_eq!(better_direction("step_us", "us"), Better::Lower);
        assert_eq!(better_direction("gap_us", "us"), Better::Lower);
        assert_eq!(better_direction("floor_multiple", "x"), Better::Lower);
        assert_eq!(
            better_direction("throughput_tok_s", "tok/s"),
            Better::Higher
        );
        assert_eq!(better_direction("occupancy", "ratio"), Better::Higher);
        assert_eq!(better_direction("launches", "count"), Better::Unknown);
    }

    #[test]
    fn verdicts_for_times() {
        let base = with_ci("step_us", 100.0, 99.0, 101.0);
        let same = with_ci("step_us", 100.5, 99.5, 101.5);
        let slower = with_ci("step_us", 110.0, 109.0, 111.0);
        let faster = with_ci("step_us", 90.0, 89.0, 91.0);
        let noisy = with_ci("step_us", 102.5, 99.0, 106.0);
        assert_eq!(verdict_of(&base, &same), Verdict::Same);
        assert_eq!(verdict_of(&base, &slower), Verdict::Slower);
        assert_eq!(verdict_of(&base, &faster), Verdict::Faster);
        assert_eq!(verdict_of(&base, &noisy), Verdict::Uncertain);
        // A big enough threshold makes a 10% change noise.
        assert_eq!(judge(&base, &slower, 20.0).1, Verdict::Same);
    }

    #[test]
    fn verdicts_for_throughput_and_occupancy_point_the_other_way() {
        let base = with_ci("throughput_tok_s", 1000.0, 990.0, 1010.0);
        let up = with_ci("throughput_tok_s", 1100.0, 1090.0, 1110.0);
        let down = with_ci("throughput_tok_s", 900.0, 890.0, 910.0);
        assert_eq!(verdict_of(&base, &up), Verdict::Faster);
        assert_eq!(verdict_of(&base, &down), Verdict::Slower);
        let busy = with_ci("occupancy", 0.9, 0.89, 0.91);
        let idle = with_ci("occupancy", 0.7, 0.69, 0.71);
        assert_eq!(verdict_of(&busy, &idle), Verdict::Slower);
    }

    #[test]
    fn unknown_direction_is_changed_not_slower() {
        let mut base = with_ci("launches", 10.0, 9.9, 10.1);
        let mut new = with_ci("launches", 12.0, 11.9, 12.1);
        base.unit = "count".into();
        new.unit = "count".into();
        assert_eq!(verdict_of(&base, &new), Verdict::Changed);
    }

    #[test]
    fn cells_match_on_arm_and_report_one_sided_ones() {
        let base = vec![
            row("prep", "dsa_decode", "graph", 4, "step_us", 20.0),
            row("prep", "dsa_decode", "eager-sync", 4, "step_us", 40.0),
        ];
        let new = vec![
            row("prep", "dsa_decode", "graph", 4, "step_us", 25.0),
            row("prep", "dsa_decode", "graph", 8, "step_us", 21.0),
        ];
        let comparison = compare_rows(&base, &new, None, 2.0).unwrap();
        assert_eq!(comparison.matched.len(), 1);
        assert_eq!(comparison.matched[0].verdict, Verdict::Slower);
        assert_eq!(comparison.only_in_base.len(), 1);
        assert!(comparison.only_in_base[0].contains("eager-sync bs=4"));
        assert!(comparison.only_in_new[0].contains("graph bs=8"));
    }

    #[test]
    fn two_arms_of_one_run_match_each_other() {
        let rows = vec![
            row("prep", "dsa_decode", "eager-sync", 4, "step_us", 40.0),
            row("prep", "dsa_decode", "graph", 4, "step_us", 20.0),
            row("prep", "dsa_decode", "eager-device", 4, "step_us", 25.0),
        ];
        let comparison = compare_rows(&rows, &rows, Some(("eager-sync", "graph")), 2.0).unwrap();
        assert_eq!(comparison.matched.len(), 1);
        assert_eq!(comparison.matched[0].base.arm, "eager-sync");
        assert_eq!(comparison.matched[0].new.arm, "graph");
        assert_eq!(comparison.matched[0].verdict, Verdict::Faster);
        let error = compare_rows(&rows, &rows, Some(("eager-sync", "fused")), 2.0).unwrap_err();
        assert_eq!(
            error.to_string(),
            "NEW has no rows for arm `fused`; its arms are: eager-device, eager-sync, graph"
        );
    }

    #[test]
    fn a_missing_interval_is_uncertain_not_certain() {
        let base = with_ci("throughput_tok_s", 207.0, f64::NAN, f64::NAN);
        let new = with_ci("throughput_tok_s", 198.0, f64::NAN, f64::NAN);
        assert!(relative_change(&base, &new).is_none());
        assert_eq!(verdict_of(&base, &new), Verdict::Uncertain);
        assert_eq!(
            verdict_of(&base, &base),
            Verdict::Same,
            "identical medians are the same"
        );
    }

    #[test]
    fn floor_multiples_do_not_compare_across_arms() {
        let rows = vec![
            row(
                "prep",
                "dsa_decode",
                "eager-sync",
                4,
                "floor_multiple",
                10.0,
            ),
            row("prep", "dsa_decode", "graph", 4, "floor_multiple", 12.0),
            row("prep", "dsa_decode", "eager-sync", 4, "step_us", 40.0),
            row("prep", "dsa_decode", "graph", 4, "step_us", 20.0),
        ];
        let across = compare_rows(&rows, &rows, Some(("eager-sync", "graph")), 2.0).unwrap();
        assert_eq!(
            across.matched.len(),
            1,
            "only step_us: each arm has its own floor"
        );
        assert!(across.only_in_base.is_empty() && across.only_in_new.is_empty());
        let same_arm = compare_rows(&rows, &rows, None, 2.0).unwrap();
        assert_eq!(same_arm.matched.len(), 4, "a run against itself keeps them");
    }

    #[test]
    fn duplicates_and_disjoint_runs_are_bad_input() {
        let a = row("prep", "dsa_decode", "graph", 4, "step_us", 20.0);
        let error =
            compare_rows(&[a.clone(), a.clone()], std::slice::from_ref(&a), None, 2.0).unwrap_err();
        assert!(error
            .to_string()
            .contains("BASE holds two rows for prep dsa_decode/graph bs=4"));
        let mut b = a.clone();
        b.family = "dsa_target_verify".into();
        let error = compare_rows(&[a], &[b], None, 2.0).unwrap_err();
        assert!(error
            .to_string()
            .contains("no cell of BASE matches a cell of NEW"));
    }

    #[test]
    fn exit_code_gates_on_slower() {
        let outcome = |any_slower| CompareOutcome {
            markdown: String::new(),
            any_slower,
        };
        assert_eq!(outcome(false).exit_code(), 0);
        assert_eq!(outcome(true).exit_code(), 1);
    }
}
