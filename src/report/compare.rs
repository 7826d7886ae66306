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
//! **Which noise the intervals hold.** A sweep measures every cell in rounds spread over
//! the run (see [`crate::stats::rounds`]): its rows' intervals come from the spread between
//! rounds, so they hold the drift of the host and GPU during a run, and two runs compare as
//! above. A sweep by a metaprep before rounds (its CSV has no `rounds` column, read as 0) took
//! each cell's interval from consecutive batches of one stretch, which misses that drift:
//! two back-to-back default sweeps of one binary on an H200 then called 34% (unpinned) and
//! 43% (pinned) of rows faster or slower (`results/2026-11-29-h200-pinning/compare-*.md`). A prep
//! row without rounds on either side is therefore read with a warning, and its verdict is
//! `uncertain` unless it is `faster`, `slower` or `changed` with the whole interval beyond a
//! noise floor: [`NOISE_FLOOR_STEP_PCT`] for `step_us` and `step_fwd_us`,
//! [`NOISE_FLOOR_HOST_PCT`] for the other metrics (host-side, or host-paced like an eager
//! arm's `gpu_prep_us` and `floor_multiple`). Rows of `steps` runs are not measured in
//! rounds and are compared as before.
//!
//! **Direction.** "Faster" means better: lower is better for times (unit `us`, metrics
//! ending in `_us`), for `floor_multiple` and for `step_ratio_vs_eager_sync`; higher is
//! better for throughput (`tok/s`), bandwidth (`gb_s`, unit `GB/s`) and forward `occupancy`.
//! A metric of unknown direction that moved beyond the threshold is reported as `changed`
//! and does not fail the comparison: so are a prep's `bytes`, which follow the shape and
//! lengths, not the code's speed.
//!
//! **Settings and machine.** Two runs compare only when they were asked to measure the same
//! thing: the settings `--resume` also checks ([`EnvRecord::setting_differences`]) must
//! agree unless `--allow-mismatch`. The machine (GPU, driver, CPU, build) may differ: it is
//! shown, and the floors (rows of kind `floor`) say how it moved. They get no verdict; an
//! arm's "change vs floor" divides its metric by the floor it is read against first. A
//! `floor_multiple` that moved only because its floor moved is `floor moved`, not `slower`
//! or `faster`: its floor's own change lies beyond the threshold the way that explains it,
//! and the arm's `step_us` in the same cell was not called the same way. When the launch
//! floors moved one way beyond the threshold the host moved ([`Comparison::host_moved`]), and
//! rows it paces move with it: a host-paced row (see `host_paced`) of one arm called the way
//! the host pushes it, and not beyond its own floor that way, is then `floor moved` too. When
//! any floor time moved, a warning above the cells names the floors and counts those rows
//! ([`Comparison::host_paced_floor_moved`]). On the H200 host two back-to-back sweeps of one
//! binary moved the launch floors 10–17%, and host-paced rows with them, while the rows the
//! GPU paces were called in 3–6 of about 960 (results/2026-11-29-h200-read-landing/).

use crate::axes::Arm;
use crate::report::change::{
    is_time, judge, ratio_change, relative_change, Change, Moved, Verdict, DEFAULT_THRESHOLD_PCT,
};
use crate::report::format::{
    arm_rank, floor_of, floor_rank, fmt_interval, fmt_num, fmt_pct, is_launch_floor, kind_rank,
    launch_floors, layout_rank, table_cell,
};
use crate::results::atomic::write_atomic;
use crate::results::csv::{
    read_rows, CellKey, Row, KIND_FLOOR, KIND_PREP, STEP_RATIO_VS_EAGER_SYNC,
};
use crate::results::env::{code, describe, Difference, EnvRecord};
use crate::results::run_dir::RunDir;
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Exit status for bad input (unreadable runs, mismatched settings, nothing to compare).
pub const EXIT_BAD_INPUT: u8 = 2;

/// How far a `step_us` or `step_fwd_us` of a sweep without rounds must move for a verdict:
/// the widest A/A change seen, by the end of its interval nearer zero, between two
/// back-to-back default sweeps of one binary on an H200 was 21.9% pinned (eager-device
/// `step_us` at bs 256) and 30.3% unpinned (`step_fwd_us` reached 11.6% and 14.1%;
/// `results/2026-11-29-h200-pinning/compare-{pinned,unpinned}.md`), rounded up.
pub const NOISE_FLOOR_STEP_PCT: f64 = 35.0;

/// The same for every other metric of such a sweep: there `host_issue_us` reached 55.4%
/// pinned and 72.0% unpinned, `gpu_prep_us` 36.6% and 25.7%, `floor_multiple` 25.9% and
/// 27.8%, `read_cost_us` 22.2% and 30.8%, `host_blocked_us` 9.1% and 49.4%; rounded up.
pub const NOISE_FLOOR_HOST_PCT: f64 = 75.0;

/// Compare two runs (or two arms of one run) cell by cell.
///
/// Each matched cell and metric gets the change of its median in percent with a 95%
/// interval and a verdict: `same` (interval inside ±threshold), `faster` / `slower` (the
/// whole interval beyond the threshold in the better / worse direction; lower is better for
/// times, higher for throughput and occupancy) or `uncertain`. An arm's times also show
/// their "change vs floor": the change of the metric divided by the floor the arm is read
/// against (eager arms the empty kernel, graph arms the empty graph of as many kernel nodes).
///
/// Runs whose settings differ (sweep vs steps, any flag that changes what is measured: seed,
/// axes, forward model, host profile, ...; not --out, --trace, --trace-cell, --device or
/// --resume) are refused, naming each difference, unless --allow-mismatch. The machine
/// (GPU, driver, CPU, git revision) may differ: the report's Environment section shows it
/// and how each floor moved; floors get no verdict and never fail the comparison.
///
/// Exit status: 0, or 1 when any cell got slower (to gate CI; `floor moved` rows, which
/// the machine explains, do not count), or 2 on bad input or differing settings.
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
    /// within ±PCT, and `faster`/`slower` only when its whole interval lies beyond it. A
    /// sweep by a metaprep before measurement rounds is read with a warning: its prep cells
    /// are `uncertain` unless they moved beyond the run-to-run noise measured on an H200
    /// (35% for step_us and step_fwd_us, 75% for the other metrics).
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_THRESHOLD_PCT)]
    pub threshold: f64,
    /// Also write the markdown report to FILE (replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Compare even when the two runs' settings differ (their env.json's command, flags and
    /// axes, forward model or host profile); the report lists the differences at the top.
    /// Machine differences (GPU, driver, CPU, git revision) never need it: they are shown.
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

/// Whether a row's interval misses the drift between rounds: a prep row of a sweep by a
/// metaprep before rounds (see the module docs).
fn without_rounds(row: &Row) -> bool {
    row.kind == KIND_PREP && row.rounds == 0
}

/// Whether a side holds prep rows measured without rounds.
fn measured_without_rounds(rows: &[Row]) -> bool {
    rows.iter().any(without_rounds)
}

/// The noise floor of a metric of a sweep without rounds.
pub fn noise_floor_pct(metric: &str) -> f64 {
    match metric {
        "step_us" | "step_fwd_us" => NOISE_FLOOR_STEP_PCT,
        _ => NOISE_FLOOR_HOST_PCT,
    }
}

/// A verdict on a row without rounds: kept when it calls a move and the whole interval lies
/// beyond the metric's noise floor, `uncertain` otherwise.
fn capped(change: Option<Change>, verdict: Verdict, metric: &str) -> Verdict {
    let floor = noise_floor_pct(metric);
    let beyond = change.is_some_and(|c| c.beyond(floor).is_some());
    let calls_a_move = matches!(
        verdict,
        Verdict::Faster | Verdict::Slower | Verdict::Changed
    );
    if beyond && calls_a_move {
        verdict
    } else {
        Verdict::Uncertain
    }
}

/// One matched cell and metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub base: Row,
    pub new: Row,
    pub change: Option<Change>,
    /// The change of the metric over the floor each side's arm is read against; `None` for
    /// rows not read against a floor (no prep time, a side without that floor, or two arms
    /// read against different floors).
    pub vs_floor: Option<Change>,
    pub verdict: Verdict,
}

/// One floor item and metric on both sides: how the machine moved, with no verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct FloorMove {
    pub base: Row,
    pub new: Row,
    pub change: Option<Change>,
}

/// Everything [`compare_rows`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// In table order: kind, family, layout, batch size, block size, arm, metric. Floor
    /// rows are not here but in `floors`.
    pub matched: Vec<Matched>,
    /// In the summary's floor order: empty kernel, empty graph, D2H, H2D, the rest.
    pub floors: Vec<FloorMove>,
    /// Cells and metrics present on one side only, as readable labels.
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    /// Which way the host moved ([`Comparison::host_moved`] at the comparison's threshold),
    /// found once: the verdicts and the report's warning both read it.
    pub host: Option<Moved>,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.matched.iter().filter(|m| m.verdict == verdict).count()
    }

    /// The floor items' times (`step_us`; not the harness's overhead, a difference of two
    /// times, nor the copy's bandwidth, its time again).
    fn floor_times(&self) -> impl Iterator<Item = &FloorMove> {
        self.floors.iter().filter(|f| f.base.metric == "step_us")
    }

    /// The floor items whose time's whole interval moved beyond ±`threshold_pct`: the machine
    /// changed between the runs.
    pub fn moved_floors(&self, threshold_pct: f64) -> Vec<&FloorMove> {
        self.floor_times()
            .filter(|f| f.change.is_some_and(|c| c.beyond(threshold_pct).is_some()))
            .collect()
    }

    /// Which way the host moved between the runs, as its launch floors (the empty kernel and
    /// the empty graphs) say: `Up` (slower) when every one whose whole interval moved beyond
    /// ±`threshold_pct` moved up, `Down` when every one moved down, `None` when none did or
    /// they disagree. The copies and reads are not the host's launch path: the d2d copy is
    /// the GPU's bandwidth, and `d2h-int-busy` moves in the copy engine's ~8 µs steps.
    pub fn host_moved(&self, threshold_pct: f64) -> Option<Moved> {
        let moves: Vec<Moved> = self
            .floor_times()
            .filter(|f| is_launch_floor(&f.base.arm))
            .filter_map(|f| f.change?.beyond(threshold_pct))
            .collect();
        let first = *moves.first()?;
        moves.iter().all(|&m| m == first).then_some(first)
    }

    /// Rows whose metric the host paces that are `floor moved`, and all such rows.
    pub fn host_paced_floor_moved(&self) -> (usize, usize) {
        let paced: Vec<&Matched> = self.matched.iter().filter(|m| host_paced_prep(m)).collect();
        let moved = paced
            .iter()
            .filter(|m| m.verdict == Verdict::FloorMoved)
            .count();
        (moved, paced.len())
    }
}

/// Whether a prep row's value is set by the host's speed more than by the GPU's: the host's
/// own times and the read cost, every metric of an eager arm (its launches pace its prep, and
/// eager-sync waits on a read) but eager-device's `step_fwd_us`, and the ratios over
/// eager-sync. On the H200 host these moved 8–17% between two back-to-back runs while the
/// GPU-bound rows held (results/2026-11-29-h200-rounds/, results/2026-11-29-h200-read-landing/).
/// Eager-device's step with the forward is the GPU's, prep and forward back to back: in A/A
/// pairs it was called only at batch 256, by about 1 µs, as the graph arms' `step_fwd_us`
/// there; it was `slower` in 48 of 48 cells for 2 µs more forward.
fn host_paced(row: &Row) -> bool {
    let arm = row.arm.parse::<Arm>().ok();
    let eager = arm.is_some_and(|arm| !arm.uses_graph());
    let gpu_paced_eager = arm == Some(Arm::EagerDevice) && row.metric == "step_fwd_us";
    matches!(
        row.metric.as_str(),
        "host_issue_us" | "host_blocked_us" | "read_cost_us" | STEP_RATIO_VS_EAGER_SYNC
    ) || (eager && row.metric != "bytes" && !gpu_paced_eager)
}

/// A prep row of one arm on both sides whose metric the host paces.
fn host_paced_prep(m: &Matched) -> bool {
    m.new.kind == KIND_PREP && m.base.arm == m.new.arm && host_paced(&m.new)
}

/// Turns a host-paced call into `floor moved` where the host explains it: the launch floors
/// moved one way beyond the threshold (`host`), the row (a time read against a floor) was
/// called the way such a host pushes it (slower for a slower host), and its change over its
/// own floor is not itself beyond the threshold that way. A host 20% faster explains no row
/// called slower, a row that moved further than its floor keeps its call, and so does a row
/// with no floor to set it against (a ratio, a bandwidth).
fn explain_by_host(matched: &mut [Matched], host: Option<Moved>, threshold_pct: f64) {
    let Some(host) = host else {
        return;
    };
    let pushed = host.for_time();
    for m in matched.iter_mut() {
        // vs_floor is a time's change, so Up is slower, as for the floors.
        let within_its_floor = m
            .vs_floor
            .is_some_and(|c| c.beyond(threshold_pct) != Some(host));
        if host_paced_prep(m) && m.verdict == pushed && within_its_floor {
            m.verdict = Verdict::FloorMoved;
        }
    }
}

/// Matches rows on (kind, family, batch size, block size, layout, metric) and arm. With
/// `arms = Some((base_arm, new_arm))` only those arms are taken from each side and matched
/// with each other. Floor rows are matched apart, item with item, and get no verdict. Fails
/// when a side holds a cell twice or when no cell but floors matches.
pub fn compare_rows(
    base: &[Row],
    new: &[Row],
    arms: Option<(&str, &str)>,
    threshold_pct: f64,
) -> Result<Comparison> {
    // Each arm is read against its own floor (an empty graph replay of its node count for
    // graph arms, an empty kernel launch for eager ones), so multiples of the floor do not compare across arms;
    // an arm's ratio to eager-sync is already an arm against an arm.
    let across_arms = arms.is_some_and(|(b, n)| b != n);
    let comparable = |rows: &[Row]| -> Vec<Row> {
        rows.iter()
            .filter(|r| {
                !(across_arms
                    && (r.metric == "floor_multiple" || r.metric == STEP_RATIO_VS_EAGER_SYNC))
            })
            .cloned()
            .collect()
    };
    let (base, new) = (comparable(base), comparable(new));
    let is_floor = |r: &&Row| r.kind == KIND_FLOOR;
    let base_index = index_side(
        base.iter().filter(|r| !is_floor(r)),
        "BASE",
        arms.map(|(b, _)| b),
    )?;
    let new_index = index_side(
        new.iter().filter(|r| !is_floor(r)),
        "NEW",
        arms.map(|(_, n)| n),
    )?;
    for (index, rows, side, arm) in [
        (&base_index, &base, "BASE", arms.map(|(b, _)| b)),
        (&new_index, &new, "NEW", arms.map(|(_, n)| n)),
    ] {
        if !index.is_empty() {
            continue;
        }
        if let Some(arm) = arm {
            bail!(
                "{side} has no rows for arm `{arm}`; its arms are: {}",
                arms_of(rows)
            );
        }
        bail!("{side} has no result rows (floors aside): nothing to compare");
    }
    // Floors match item with item whichever arms are compared.
    let base_floor_index = index_side(base.iter().filter(is_floor), "BASE", None)?;
    let new_floor_index = index_side(new.iter().filter(is_floor), "NEW", None)?;
    let (base_floors, new_floors) = (launch_floors(&base), launch_floors(&new));
    let vs_floor = |base_row: &Row, new_row: &Row| -> Option<Change> {
        if base_row.kind != KIND_PREP || !is_time(&new_row.metric, &new_row.unit) {
            return None;
        }
        let (base_floor, new_floor) = shared_floor(&base_floors, &new_floors, base_row, new_row)?;
        ratio_change(&[new_row, base_floor], &[base_row, new_floor])
    };

    let mut comparison = Comparison::default();
    let (pairs, only_in_base, only_in_new) = pair_up(&base_index, &new_index);
    for (base_row, new_row) in pairs {
        let (change, mut verdict) = judge(base_row, new_row, threshold_pct);
        if without_rounds(base_row) || without_rounds(new_row) {
            verdict = capped(change, verdict, &new_row.metric);
        }
        comparison.matched.push(Matched {
            base: base_row.clone(),
            new: new_row.clone(),
            change,
            vs_floor: vs_floor(base_row, new_row),
            verdict,
        });
    }
    explain_by_floors(
        &mut comparison.matched,
        &base_floors,
        &new_floors,
        threshold_pct,
    );
    let (floors, floors_only_in_base, floors_only_in_new) =
        pair_up(&base_floor_index, &new_floor_index);
    comparison.floors = floors
        .into_iter()
        .map(|(base_row, new_row)| FloorMove {
            base: base_row.clone(),
            new: new_row.clone(),
            change: relative_change(base_row, new_row),
        })
        .collect();
    comparison
        .floors
        .sort_by_key(|f| (floor_rank(&f.base.arm), f.base.arm.clone()));
    comparison.only_in_base = [only_in_base, floors_only_in_base].concat();
    comparison.only_in_new = [only_in_new, floors_only_in_new].concat();
    comparison.host = comparison.host_moved(threshold_pct);
    explain_by_host(&mut comparison.matched, comparison.host, threshold_pct);
    if comparison.matched.is_empty() {
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

/// The floor rows each side's cell is read against, when both sides read it against the same
/// floor item: an eager arm against a graph arm has no common floor, nor has a run with graph
/// floors of several nodes against one without.
fn shared_floor<'r>(
    base_floors: &BTreeMap<&str, &'r Row>,
    new_floors: &BTreeMap<&str, &'r Row>,
    base_row: &Row,
    new_row: &Row,
) -> Option<(&'r Row, &'r Row)> {
    let (item, base_floor) = floor_of(base_floors, &base_row.arm, &base_row.family)?;
    let (new_item, new_floor) = floor_of(new_floors, &new_row.arm, &new_row.family)?;
    (item == new_item).then_some((base_floor, new_floor))
}

/// Turns a `floor_multiple` call into `floor moved` where the floor explains it: the floor
/// the arm is read against (the same item on both sides) moved beyond the threshold the
/// other way (a faster floor raises the multiple), and the arm's own `step_us` in that cell
/// was not called in the multiple's direction.
fn explain_by_floors(
    matched: &mut [Matched],
    base_floors: &BTreeMap<&str, &Row>,
    new_floors: &BTreeMap<&str, &Row>,
    threshold_pct: f64,
) {
    let step_verdicts: BTreeMap<CellKey, Verdict> = matched
        .iter()
        .filter(|m| m.new.metric == "step_us")
        .map(|m| (m.new.cell_key(), m.verdict))
        .collect();
    for m in matched.iter_mut() {
        if m.new.metric != "floor_multiple"
            || !matches!(m.verdict, Verdict::Slower | Verdict::Faster)
        {
            continue;
        }
        let Some(floor) = shared_floor(base_floors, new_floors, &m.base, &m.new)
            .and_then(|(base_floor, new_floor)| relative_change(base_floor, new_floor))
        else {
            continue;
        };
        // A faster floor raises the multiple, a slower one lowers it.
        let explaining = match m.verdict {
            Verdict::Slower => Moved::Down,
            _ => Moved::Up,
        };
        let explains = floor.beyond(threshold_pct) == Some(explaining);
        let own = step_verdicts.get(&m.new.cell_key());
        if explains && own != Some(&m.verdict) {
            m.verdict = Verdict::FloorMoved;
        }
    }
}

fn arms_of(rows: &[Row]) -> String {
    let arms: BTreeSet<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
    arms.into_iter().collect::<Vec<_>>().join(", ")
}

/// The rows both sides hold, paired in table order, and labels of those one side holds.
type Paired<'a> = (Vec<(&'a Row, &'a Row)>, Vec<String>, Vec<String>);

fn pair_up<'a>(
    base: &BTreeMap<MatchKey, &'a Row>,
    new: &BTreeMap<MatchKey, &'a Row>,
) -> Paired<'a> {
    let pairs = base
        .iter()
        .filter_map(|(key, b)| new.get(key).map(|n| (*b, *n)))
        .collect();
    let only = |side: &BTreeMap<MatchKey, &Row>, other: &BTreeMap<MatchKey, &Row>| {
        side.iter()
            .filter(|(key, _)| !other.contains_key(*key))
            .map(|(_, row)| label(row))
            .collect()
    };
    (pairs, only(base, new), only(new, base))
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

/// A side's rows by match key, only those of `arm` when given; fails on a cell held twice.
fn index_side<'a>(
    rows: impl Iterator<Item = &'a Row>,
    side: &str,
    arm: Option<&str>,
) -> Result<BTreeMap<MatchKey, &'a Row>> {
    let mut index = BTreeMap::new();
    for row in rows.filter(|r| arm.is_none_or(|a| r.arm == a)) {
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
        let env = if dir.join(crate::results::env::ENV_FILE).is_file() {
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

/// Runs `metaprep compare`: loads both sides, refuses differing settings unless allowed,
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
    let mut machine = Vec::new();
    match (&base.env, &new.env) {
        (Some(base_env), Some(new_env)) => {
            let settings = base_env.setting_differences(new_env);
            if !settings.is_empty() {
                if !args.allow_mismatch {
                    bail!(
                        "BASE and NEW were run with different settings (BASE vs NEW: {}), so \
                         they did not measure the same thing: rerun one with the other's \
                         settings, or pass --allow-mismatch to compare anyway",
                        describe(&settings)
                    );
                }
                let mut warning = "⚠ settings differ (BASE vs NEW); compared because of \
                                   --allow-mismatch:"
                    .to_string();
                for difference in &settings {
                    write!(warning, "\n> - {difference}")?;
                }
                warnings.push(warning);
            }
            machine = base_env.machine_differences(new_env);
        }
        _ => warnings.push(
            "⚠ settings not checked: a side is a CSV without an env.json beside it".to_string(),
        ),
    }
    let sides_without_rounds: Vec<&str> = [("BASE", &base), ("NEW", &new)]
        .into_iter()
        .filter(|(_, input)| measured_without_rounds(&input.rows))
        .map(|(side, _)| side)
        .collect();
    if !sides_without_rounds.is_empty() {
        warnings.push(format!(
            "⚠ {} {} measured without rounds (a sweep by a metaprep before them): intervals \
             from one stretch miss the drift between runs, so prep cells are `uncertain` \
             unless they moved beyond ±{NOISE_FLOOR_STEP_PCT}% (step_us, step_fwd_us) or \
             ±{NOISE_FLOOR_HOST_PCT}% (other metrics), the A/A noise measured on an H200.",
            sides_without_rounds.join(" and "),
            if sides_without_rounds.len() == 1 {
                "was"
            } else {
                "were"
            }
        ));
    }
    let arms = args.base_arm.as_deref().zip(args.new_arm.as_deref());
    let comparison = compare_rows(&base.rows, &new.rows, arms, args.threshold)?;
    let markdown = render_comparison(
        &comparison,
        [&base, &new],
        arms,
        args.threshold,
        &warnings,
        &machine,
    )?;
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
    [base, new]: [&Input; 2],
    arms: Option<(&str, &str)>,
    threshold: f64,
    warnings: &[String],
    machine: &[Difference],
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
         occupancy); `uncertain` otherwise. Change vs floor = the same change of an arm's time \
         over the floor it is read against (eager arms: empty-kernel; graph arms: the empty \
         graph of as many kernel nodes as theirs), so what the machine did cancels out; \
         verdicts are on the time itself. `floor moved` = a floor multiple that moved because \
         its floor moved beyond the threshold (see Environment) while the arm's own step time \
         was not called that way, or a host-paced row called the way the launch floors moved \
         (slower when they got slower) and not beyond its own floor that way: the machine, \
         not the code; it does not fail the comparison.\n"
    )?;
    writeln!(
        out,
        "**{} slower · {} faster · {} same · {} uncertain{}{}** ({} matched; {} only in BASE, {} only in NEW)\n",
        comparison.count(Verdict::Slower),
        comparison.count(Verdict::Faster),
        comparison.count(Verdict::Same),
        comparison.count(Verdict::Uncertain),
        match comparison.count(Verdict::Changed) {
            0 => String::new(),
            n => format!(" · {n} changed"),
        },
        match comparison.count(Verdict::FloorMoved) {
            0 => String::new(),
            n => format!(" · {n} floor moved"),
        },
        comparison.matched.len(),
        comparison.only_in_base.len(),
        comparison.only_in_new.len(),
    )?;
    write_machine_moved(&mut out, comparison, threshold)?;
    write_environment(&mut out, comparison, machine)?;
    writeln!(out, "### Cells\n")?;
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

/// A warning above the cells when the floors say the machine moved between the runs: which
/// floors, and how many of the calls are on rows the host paces, which move with it.
fn write_machine_moved(out: &mut String, comparison: &Comparison, threshold: f64) -> Result<()> {
    let moved = comparison.moved_floors(threshold);
    if moved.is_empty() {
        return Ok(());
    }
    let floors: Vec<String> = moved
        .iter()
        .filter_map(|f| {
            let c = f.change?;
            Some(format!(
                "{} {} {}",
                f.base.arm,
                fmt_pct(c.pct),
                fmt_interval(c.lo_pct, c.hi_pct)
            ))
        })
        .collect();
    let (floor_moved, paced) = comparison.host_paced_floor_moved();
    let host = match comparison.host {
        Some(host) => {
            let way = host.for_time().as_str();
            format!(
                "The launch floors say the host got {way}, and rows it paces move with it: \
                 {floor_moved} of the {paced} host-paced rows (host times, the read cost, eager \
                 arms, ratios over eager-sync) are `floor moved`, those called {way} and not \
                 beyond their own floor that way. To judge host-side code, compare runs whose \
                 launch floors held (on the H200 host even back-to-back runs in one device call \
                 moved 10–17%)."
            )
        }
        None => format!(
            "The launch floors did not move one way, so the {paced} host-paced rows keep their \
             verdicts; read them against their change vs floor."
        ),
    };
    writeln!(
        out,
        "> **The machine moved between the runs**: {} of {} floor times beyond ±{threshold}% \
         ({}). {host}\n",
        moved.len(),
        comparison.floor_times().count(),
        floors.join(", "),
    )?;
    Ok(())
}

/// The machine's differences and how each floor moved: no verdicts here.
fn write_environment(
    out: &mut String,
    comparison: &Comparison,
    machine: &[Difference],
) -> Result<()> {
    if machine.is_empty() && comparison.floors.is_empty() {
        return Ok(());
    }
    writeln!(out, "### Environment\n")?;
    if !machine.is_empty() {
        writeln!(
            out,
            "Machine and build, BASE vs NEW (shown, never refused): {}.\n",
            describe(machine)
        )?;
    }
    if comparison.floors.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "The floors measure the machine, not the code: they get no verdict and never fail the \
         comparison.\n"
    )?;
    writeln!(
        out,
        "| floor | metric | BASE | NEW | change | 95% interval |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---|")?;
    for floor in &comparison.floors {
        let (change, interval) = change_cells(floor.change);
        writeln!(
            out,
            "| {}{} | {} | {} | {} | {change} | {interval} |",
            table_cell(&floor.base.arm),
            throttled_mark(&floor.base, &floor.new),
            table_cell(&format!("{} ({})", floor.base.metric, floor.base.unit)),
            fmt_num(floor.base.median),
            fmt_num(floor.new.median),
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The change and its interval as two table cells, `n/a` without one.
fn change_cells(change: Option<Change>) -> (String, String) {
    match change {
        Some(c) => (fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct)),
        None => ("n/a".to_string(), "n/a".to_string()),
    }
}

fn throttled_mark(base: &Row, new: &Row) -> &'static str {
    match (base.throttled, new.throttled) {
        (true, true) => " ⚠ both throttled",
        (true, false) => " ⚠ BASE throttled",
        (false, true) => " ⚠ NEW throttled",
        (false, false) => "",
    }
}

fn write_table(out: &mut String, rows: &[&Matched], arms: Option<(&str, &str)>) -> Result<()> {
    writeln!(
        out,
        "| kind | family | layout | bs | block | arm | metric | BASE | NEW | change | 95% interval | change vs floor | verdict |"
    )?;
    writeln!(
        out,
        "|---|---|---|---:|---:|---|---|---:|---:|---:|---|---|---|"
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
        let verdict = m.verdict.marked();
        let (change, interval) = change_cells(m.change);
        let vs_floor = m.vs_floor.map_or("—".to_string(), |c| {
            format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct))
        });
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
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
            vs_floor,
            verdict,
            throttled_mark(&m.base, &m.new)
        )?;
    }
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::change::{better_direction, change_of_ratio, verdict_on_change, Better};
    use crate::results::csv::test_rows::row;

    /// A row with an explicit interval (measured in rounds, as a sweep's are).
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
    fn more_bandwidth_is_faster_and_bytes_only_change() {
        let base = with_ci("gb_s", 1000.0, 990.0, 1010.0);
        let new = with_ci("gb_s", 1500.0, 1480.0, 1520.0);
        assert_eq!(verdict_of(&base, &new), Verdict::Faster);
        assert_eq!(verdict_of(&new, &base), Verdict::Slower);
        let bytes = |b| with_ci("bytes", b, b, b);
        assert_eq!(verdict_of(&bytes(4e7), &bytes(4e7)), Verdict::Same);
        assert_eq!(verdict_of(&bytes(4e7), &bytes(5e7)), Verdict::Changed);
    }

    #[test]
    fn direction_follows_unit_and_metric() {
        assert_eq!(better_direction("step_us", "us"), Better::Lower);
        assert_eq!(
            better_direction(STEP_RATIO_VS_EAGER_SYNC, "x"),
            Better::Lower
        );
        assert_eq!(better_direction("gap_us", "us"), Better::Lower);
        assert_eq!(better_direction("floor_multiple", "x"), Better::Lower);
        assert_eq!(
            better_direction("throughput_tok_s", "tok/s"),
            Better::Higher
        );
        assert_eq!(better_direction("occupancy", "ratio"), Better::Higher);
        assert_eq!(better_direction("launches", "count"), Better::Unknown);
        assert_eq!(better_direction("gb_s", "GB/s"), Better::Higher);
        assert_eq!(better_direction("bytes", "B"), Better::Unknown);
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
    fn a_ratio_row_states_its_change() {
        let mut ratio = with_ci(STEP_RATIO_VS_EAGER_SYNC, 0.4, 0.39, 0.42);
        ratio.unit = "x".into();
        let c = change_of_ratio(&ratio).unwrap();
        assert!((c.pct + 60.0).abs() < 1e-9 && (c.lo_pct + 61.0).abs() < 1e-9);
        assert!((c.hi_pct + 58.0).abs() < 1e-9, "{c:?}");
        assert_eq!(verdict_on_change(&c, Better::Lower, 2.0), Verdict::Faster);
        ratio.ci_lo = f64::NAN;
        assert_eq!(change_of_ratio(&ratio), None);
    }

    #[test]
    fn rows_without_rounds_need_a_change_beyond_the_noise_floor() {
        // A prep row of a sweep before rounds.
        let old = |metric: &str, median: f64| Row {
            rounds: 0,
            ..with_ci(metric, median, median * 0.99, median * 1.01)
        };
        let verdict = |b: &Row, n: &Row| {
            compare_rows(std::slice::from_ref(b), std::slice::from_ref(n), None, 2.0)
                .unwrap()
                .matched[0]
                .verdict
        };
        // +10% with a tight interval: slower between two runs measured in rounds...
        let base = with_ci("step_us", 100.0, 99.0, 101.0);
        let new = with_ci("step_us", 110.0, 109.0, 111.0);
        assert_eq!(verdict(&base, &new), Verdict::Slower);
        // ...but within the run-to-run noise when either side has no rounds.
        assert_eq!(verdict(&old("step_us", 100.0), &new), Verdict::Uncertain);
        assert_eq!(verdict(&base, &old("step_us", 110.0)), Verdict::Uncertain);
        // `same` is capped too: an interval from one stretch cannot show that.
        assert_eq!(verdict(&base, &base), Verdict::Same);
        assert_eq!(verdict(&old("step_us", 100.0), &base), Verdict::Uncertain);
        // Beyond the floor (35% for step times) the verdict stands.
        assert_eq!(
            verdict(&old("step_us", 100.0), &old("step_us", 200.0)),
            Verdict::Slower
        );
        // Host-side metrics have a wider floor: +50% is not enough, +100% or -80% is.
        let host = |m| old("host_issue_us", m);
        assert_eq!(verdict(&host(10.0), &host(15.0)), Verdict::Uncertain);
        assert_eq!(verdict(&host(10.0), &host(20.0)), Verdict::Slower);
        assert_eq!(verdict(&host(50.0), &host(10.0)), Verdict::Faster);
        assert_eq!(verdict(&host(20.0), &host(10.0)), Verdict::Uncertain);
        // Step rows are never measured in rounds and are judged as they are.
        let step = |m| {
            let mut r = row("step", "dspark+dsa_target_verify", "graph", 1, "itl_us", m);
            (r.ci_lo, r.ci_hi) = (m * 0.99, m * 1.01);
            r
        };
        assert_eq!(step(1.0).rounds, 0);
        assert_eq!(verdict(&step(100.0), &step(110.0)), Verdict::Slower);
        assert_eq!(
            (
                noise_floor_pct("step_fwd_us"),
                noise_floor_pct("read_cost_us")
            ),
            (NOISE_FLOOR_STEP_PCT, NOISE_FLOOR_HOST_PCT)
        );
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
    fn floors_are_moves_without_verdicts_and_yardsticks_for_arms() {
        let floor = |item: &str, median: f64| row("floor", "floor", item, 1, "step_us", median);
        let base = vec![
            floor("empty-kernel", 5.0),
            floor("empty-graph", 2.0),
            row("prep", "dsa_decode", "eager-sync", 4, "step_us", 50.0),
            row("prep", "dsa_decode", "eager-device", 4, "step_us", 30.0),
            row("prep", "dsa_decode", "graph", 4, "step_us", 10.0),
        ];
        let mut new = base.clone();
        new[0] = floor("empty-kernel", 10.0);
        let comparison = compare_rows(&base, &new, None, 2.0).unwrap();
        assert_eq!(comparison.matched.len(), 3, "floors are not cells");
        assert_eq!(comparison.count(Verdict::Same), 3);
        let moved: Vec<(&str, f64)> = comparison
            .floors
            .iter()
            .map(|f| (f.base.arm.as_str(), f.change.unwrap().pct.round()))
            .collect();
        assert_eq!(moved, [("empty-kernel", 100.0), ("empty-graph", 0.0)]);
        let vs_floor = |arm: &str| {
            let m = comparison
                .matched
                .iter()
                .find(|m| m.base.arm == arm)
                .unwrap();
            m.vs_floor.unwrap().pct.round()
        };
        assert_eq!(vs_floor("eager-sync"), -50.0);
        assert_eq!(vs_floor("graph"), 0.0);

        // Two arms read against one floor share a yardstick; eager against graph does not.
        let arms = |b, n| {
            compare_rows(&base, &new, Some((b, n)), 2.0)
                .unwrap()
                .matched
        };
        let eager = arms("eager-sync", "eager-device");
        assert_eq!(
            eager[0].vs_floor.unwrap().pct.round(),
            -70.0,
            "(30/10)/(50/5)"
        );
        assert_eq!(arms("eager-sync", "graph")[0].vs_floor, None);
        // Floors still move in arm mode; a side without floors leaves the column empty.
        assert_eq!(
            compare_rows(&base, &new, Some(("eager-sync", "graph")), 2.0)
                .unwrap()
                .floors
                .len(),
            2
        );
        let bare = compare_rows(&base[2..], &new, None, 2.0).unwrap();
        assert!(bare.matched.iter().all(|m| m.vs_floor.is_none()));
        assert_eq!(bare.only_in_new.len(), 2, "the floors only NEW has");
    }

    #[test]
    fn only_floor_times_say_the_machine_moved() {
        let floor = |arm: &str, metric: &str, median: f64| {
            let mut r = row("floor", "floor", arm, 1, metric, median);
            if metric == "gb_s" {
                r.unit = "GB/s".into();
            }
            r
        };
        let cell = row("prep", "dsa_decode", "eager-sync", 4, "host_issue_us", 10.0);
        let base = vec![
            floor("empty-kernel", "step_us", 4.0),
            floor("harness", "overhead_us", 0.16),
            floor("d2d-copy", "gb_s", 3800.0),
            cell.clone(),
        ];
        // The harness's overhead (a difference of two times) and the copy's bandwidth moved;
        // no floor time did.
        let new = vec![
            floor("empty-kernel", "step_us", 4.0),
            floor("harness", "overhead_us", 0.05),
            floor("d2d-copy", "gb_s", 3000.0),
            cell.clone(),
        ];
        let comparison = compare_rows(&base, &new, None, 2.0).unwrap();
        assert!(comparison.moved_floors(2.0).is_empty());
        // The empty kernel 20% faster: one of one floor time moved, and the eager arm's host
        // time is one host-paced row (not called here).
        let mut faster = new.clone();
        faster[0] = floor("empty-kernel", "step_us", 3.2);
        let comparison = compare_rows(&base, &faster, None, 2.0).unwrap();
        let moved: Vec<&str> = comparison
            .moved_floors(2.0)
            .iter()
            .map(|f| f.base.arm.as_str())
            .collect();
        assert_eq!(moved, ["empty-kernel"]);
        assert_eq!(comparison.floor_times().count(), 1);
        assert_eq!(comparison.host_paced_floor_moved(), (0, 1));
    }

    #[test]
    fn host_paced_calls_the_host_explains_are_floor_moved() {
        let floor = |arm: &str, median: f64| row("floor", "floor", arm, 1, "step_us", median);
        let cell = |arm: &str, metric: &str, median: f64| {
            row("prep", "dsa_decode", arm, 4, metric, median)
        };
        let base = vec![
            floor("empty-kernel", 4.0),
            floor("d2d-copy", 32.0),
            cell("eager-sync", "host_issue_us", 10.0),
            cell("eager-device", "step_fwd_us", 10.0),
            cell("graph", "step_us", 10.0),
        ];
        let new = |kernel: f64, copy: f64, host_issue: f64| {
            vec![
                floor("empty-kernel", kernel),
                floor("d2d-copy", copy),
                cell("eager-sync", "host_issue_us", host_issue),
                cell("eager-device", "step_fwd_us", 12.0),
                cell("graph", "step_us", 12.0),
            ]
        };
        let verdicts = |base: &[Row], new: &[Row]| -> Vec<Verdict> {
            let comparison = compare_rows(base, new, None, 2.0).unwrap();
            comparison.matched.iter().map(|m| m.verdict).collect()
        };
        use Verdict::{FloorMoved, Slower};
        // Every row 20% slower, the floors held: all are called.
        assert_eq!(verdicts(&base, &new(4.0, 32.0, 12.0)), [Slower; 3]);
        // The empty kernel 20% slower: the host got slower, and eager-sync's host time, which
        // it paces, went with it (0% over its floor); eager-device's step with the forward
        // and the graph arm's step, which the GPU paces, are still called.
        let moved = compare_rows(&base, &new(4.8, 32.0, 12.0), None, 2.0).unwrap();
        assert_eq!(moved.host_moved(2.0), Some(Moved::Up));
        assert_eq!(
            moved.matched.iter().map(|m| m.verdict).collect::<Vec<_>>(),
            [FloorMoved, Slower, Slower]
        );
        assert_eq!(moved.host_paced_floor_moved(), (1, 1));
        // A row with no floor to set it against (a bandwidth) keeps its call.
        let mut slow_copy = cell("eager-sync", "gb_s", 100.0);
        slow_copy.unit = "GB/s".into();
        let mut slower_copy = cell("eager-sync", "gb_s", 80.0);
        slower_copy.unit = "GB/s".into();
        assert_eq!(
            verdicts(
                &[floor("empty-kernel", 4.0), slow_copy],
                &[floor("empty-kernel", 4.8), slower_copy]
            ),
            [Slower]
        );
        // A host 20% faster explains no row called slower.
        assert_eq!(verdicts(&base, &new(3.2, 32.0, 12.0)), [Slower; 3]);
        // A host 20% slower does not explain a row 50% slower: +25% over its floor.
        assert_eq!(verdicts(&base, &new(4.8, 32.0, 15.0)), [Slower; 3]);
        // The d2d copy is the GPU's bandwidth, not the host's launch path.
        let copy_moved = compare_rows(&base, &new(4.0, 40.0, 12.0), None, 2.0).unwrap();
        assert_eq!(copy_moved.moved_floors(2.0).len(), 1);
        assert_eq!(copy_moved.host_moved(2.0), None);
        assert_eq!(
            copy_moved
                .matched
                .iter()
                .map(|m| m.verdict)
                .collect::<Vec<_>>(),
            [Slower; 3]
        );
        // Two arms across runs (graph in BASE, eager-sync in NEW, the host 20% slower): the
        // gap between arms is not the host's move, so the call stands.
        let arms = compare_rows(
            &[floor("empty-kernel", 4.0), cell("graph", "step_us", 10.0)],
            &[
                floor("empty-kernel", 4.8),
                cell("eager-sync", "step_us", 12.0),
            ],
            Some(("graph", "eager-sync")),
            2.0,
        )
        .unwrap();
        assert_eq!(arms.host_moved(2.0), Some(Moved::Up));
        assert_eq!(
            arms.matched.iter().map(|m| m.verdict).collect::<Vec<_>>(),
            [Slower]
        );
    }

    #[test]
    fn a_floor_multiple_only_its_floor_explains_is_floor_moved() {
        let floor = |median: f64| row("floor", "floor", "empty-graph-2", 1, "step_us", median);
        let cell =
            |metric: &str, median: f64| row("prep", "dsa_decode", "graph", 4, metric, median);
        let base = vec![
            floor(2.2),
            cell("step_us", 10.0),
            cell("floor_multiple", 4.5),
        ];
        let verdict = |new: &[Row]| {
            let comparison = compare_rows(&base, new, None, 2.0).unwrap();
            let m = comparison
                .matched
                .iter()
                .find(|m| m.new.metric == "floor_multiple")
                .unwrap();
            (m.verdict, comparison.count(Verdict::Slower))
        };
        // The floor got 9% faster, the arm's time did not move: the multiple's rise is the
        // machine's, and nothing is slower.
        let faster_floor = [
            floor(2.0),
            cell("step_us", 10.0),
            cell("floor_multiple", 5.0),
        ];
        assert_eq!(verdict(&faster_floor), (Verdict::FloorMoved, 0));
        // The arm's own time rose too: the multiple's call stands.
        let slower_arm = [
            floor(2.0),
            cell("step_us", 11.0),
            cell("floor_multiple", 5.5),
        ];
        assert_eq!(verdict(&slower_arm), (Verdict::Slower, 2));
        // A floor that did not move explains nothing.
        let same_floor = [
            floor(2.2),
            cell("step_us", 10.0),
            cell("floor_multiple", 5.0),
        ];
        assert_eq!(verdict(&same_floor), (Verdict::Slower, 1));
        // A floor that got slower cannot explain a rising multiple.
        let slower_floor = [
            floor(2.5),
            cell("step_us", 10.0),
            cell("floor_multiple", 5.0),
        ];
        assert_eq!(verdict(&slower_floor), (Verdict::Slower, 1));
        assert_eq!(Verdict::FloorMoved.marked(), "floor moved");
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
