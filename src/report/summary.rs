//! `summary.md`: a run's results as a pull request's speed section, the answer first: one
//! line per layout (per family for a sweep) with graph replay's change against eager-sync at
//! the smallest batch and middle block size and its interval; then the run, its caveats once,
//! a compact table of each arm's paired change against eager-sync, and the long tables after.
//!
//! Changes of a decode step against `eager-sync` are the change of the median with a 95%
//! interval computed as in `compare` (MOVER on the log scale, from each median's 95%
//! interval). A sweep's prep arms are set against `eager-sync` by its paired rows instead:
//! `step_ratio_vs_eager_sync`, each arm's step time over eager-sync's formed inside each
//! round, where both ran back to back (see [`crate::runs::sweep_rounds`]), with the
//! verdict `compare` would give at its default threshold. The host-read cost
//! (eager-sync − eager-device) is the sweep's paired `read_cost_us`, or for a run without
//! one the difference of the medians with its interval by MOVER. Every table is sorted by
//! fixed keys, so the same rows always give the same text.

use crate::axes::floor_item::BUSY_BEFORE_READ_US;
use crate::axes::{Arm, Drafter, FloorItem, ReadPath};
use crate::report::change::{
    better_direction, change_of_ratio, relative_change, verdict_on_change, Change, Verdict,
    DEFAULT_THRESHOLD_PCT,
};
use crate::report::format::{
    arm_rank, copy_ceiling, floor_median, floor_of, floor_rank, fmt_interval, fmt_num, fmt_pct,
    launch_floors, layout_rank, table_cell, AFTER_ARM, BASELINE_ARM, DEVICE_ARM,
};
use crate::results::atomic::write_atomic;
use crate::results::csv::{
    drafter_of, names_another_drafter, CellKey, Row, KIND_FLOOR, KIND_PREP, KIND_STEP,
    STEP_RATIO_VS_EAGER_SYNC,
};
use crate::results::env::{code, EnvRecord};
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

pub const SUMMARY_FILE: &str = "summary.md";

/// Writes `<dir>/summary.md` atomically and returns its path.
pub fn write_summary(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<PathBuf> {
    let path = dir.join(SUMMARY_FILE);
    write_atomic(&path, render_summary(rows, env).as_bytes())?;
    Ok(path)
}

pub fn render_summary(rows: &[Row], env: &EnvRecord) -> String {
    let mut out = String::new();
    write_summary_text(&mut out, rows, env).expect("writing to a String cannot fail");
    out
}

fn write_summary_text(out: &mut String, rows: &[Row], env: &EnvRecord) -> fmt::Result {
    let index = Index::new(rows);
    write_headlines(out, &index)?;
    write_environment(out, env)?;
    write_callouts(out, rows, env)?;
    if rows.is_empty() {
        writeln!(out, "_This run has no results._")?;
        return Ok(());
    }
    write_against_eager_sync(out, &index)?;
    write_upload_against_graph(out, &index)?;
    write_steps(out, &index)?;
    write_preps(out, &index)?;
    crate::report::read_paths::write_read_paths(out, &index)?;
    write_floors(out, &index)?;
    Ok(())
}

/// Rows by cell and metric, for lookups; iteration goes through sorted groups instead. Every
/// per-cell and per-group question is answered from sets built in one pass over the rows:
/// asking the rows themselves once per cell made `report` quadratic (200k rows took 21–38 s,
/// nearly all of it in scanning every row for each cell's throttle flag).
pub(crate) struct Index<'a> {
    pub(crate) rows: &'a [Row],
    /// Each cell's rows by metric: a lookup borrows its key, never copies it.
    by_cell: HashMap<CellKey, HashMap<&'a str, &'a Row>>,
    throttled: HashSet<CellKey>,
    /// (kind, family, layout) with an emulated row.
    emulated: HashSet<(&'a str, String, &'a str)>,
    /// Each kind's cells by group ([`Index::groups`]), formed in the same pass.
    groups: HashMap<&'a str, Groups>,
}

/// A kind's cells grouped by (family, layout), each group's cells in table order: batch
/// size, block size, arm.
type Groups = BTreeMap<GroupKey, BTreeSet<SortedCell>>;

impl<'a> Index<'a> {
    pub(crate) fn new(rows: &'a [Row]) -> Self {
        let mut by_cell = HashMap::new();
        let mut throttled = HashSet::new();
        let mut emulated = HashSet::new();
        let mut groups: HashMap<&str, Groups> = HashMap::new();
        for row in rows {
            let key = row.cell_key();
            (groups.entry(row.kind.as_str()).or_default())
                .entry(GroupKey {
                    family: row.cell_family(),
                    layout_rank: layout_rank(&row.layout),
                    layout: row.layout.clone(),
                })
                .or_default()
                .insert(SortedCell {
                    batch_size: row.batch_size,
                    block_size: row.block_size,
                    arm_rank: arm_rank(&row.arm),
                    cell: key.clone(),
                });
            if row.throttled {
                throttled.insert(key.clone());
            }
            if row.emulated {
                emulated.insert((row.kind.as_str(), row.cell_family(), row.layout.as_str()));
            }
            by_cell
                .entry(key)
                .or_insert_with(HashMap::new)
                .entry(row.metric.as_str())
                .or_insert(row);
        }
        Index {
            rows,
            by_cell,
            throttled,
            emulated,
            groups,
        }
    }

    pub(crate) fn get(&self, cell: &CellKey, metric: &str) -> Option<&'a Row> {
        self.by_cell.get(cell)?.get(metric).copied()
    }

    /// The cells of one kind grouped by (family, layout), each group's cells in table
    /// order: batch size, block size, arm.
    fn groups(&self, kind: &str) -> &Groups {
        static NONE: Groups = BTreeMap::new();
        self.groups.get(kind).unwrap_or(&NONE)
    }

    /// Whether any row of the cell was throttled.
    fn throttled(&self, cell: &CellKey) -> bool {
        self.throttled.contains(cell)
    }

    fn emulated(&self, kind: &str, group: &GroupKey) -> bool {
        self.emulated
            .contains(&(kind, group.family.clone(), group.layout.as_str()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    family: String,
    layout_rank: u8,
    layout: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SortedCell {
    batch_size: u32,
    block_size: u32,
    arm_rank: u8,
    cell: CellKey,
}

impl SortedCell {
    fn with_arm(&self, arm: &str) -> CellKey {
        CellKey {
            arm: arm.to_string(),
            ..self.cell.clone()
        }
    }
}

fn write_environment(out: &mut String, env: &EnvRecord) -> fmt::Result {
    let or_na = |s: &str| {
        if s.is_empty() {
            "n/a".to_string()
        } else {
            s.to_string()
        }
    };
    writeln!(
        out,
        "**Environment:** {}× {} (compute capability {}, {} SMs) · driver {} · CUDA {} · {} · \
         git {} · metaprep {}  ",
        env.gpu_count,
        or_na(&env.gpu_name),
        or_na(&env.compute_capability),
        env.sm_count,
        or_na(&env.driver_version),
        or_na(&env.cuda_driver_version),
        or_na(&env.date),
        code(&or_na(&env.git_revision)),
        or_na(&env.metaprep_version),
    )?;
    writeln!(
        out,
        "**Command:** {}\n",
        code(&or_na(&portable_command(&env.command_line)))
    )
}

/// The command line as a reader can run it: the program as `metaprep` (not the GPU host's
/// `./metaprep` or `/root/bundle/metaprep`), and every absolute path relative to the folder
/// holding the run (`--out`'s parent): `/root/out/h/steps-default/trace.json` becomes
/// `steps-default/trace.json`. An absolute path outside that folder keeps only its file name.
pub fn portable_command(command_line: &str) -> String {
    let mut words = command_line.split_whitespace();
    let Some(_program) = words.next() else {
        return String::new();
    };
    let words: Vec<&str> = words.collect();
    let out_parent = out_value(&words)
        .filter(|out| out.starts_with('/'))
        .and_then(|out| Path::new(out).parent().map(Path::to_path_buf));
    let portable = |path: &str| -> String {
        if !path.starts_with('/') {
            return path.to_string();
        }
        let path = Path::new(path);
        match out_parent
            .as_deref()
            .and_then(|p| path.strip_prefix(p).ok())
        {
            Some(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
            _ => path.file_name().map_or(path.display().to_string(), |n| {
                n.to_string_lossy().into_owned()
            }),
        }
    };
    let mut shown = vec!["metaprep".to_string()];
    for word in words {
        shown.push(match word.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => format!("{flag}={}", portable(value)),
            _ => portable(word),
        });
    }
    shown.join(" ")
}

/// The value of `--out` (`--out DIR` or `--out=DIR`) among `words`.
fn out_value<'a>(words: &[&'a str]) -> Option<&'a str> {
    words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.strip_prefix("--out") {
            Some("") => words.get(i + 1).copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        })
}

fn write_callouts(out: &mut String, rows: &[Row], env: &EnvRecord) -> fmt::Result {
    let emulated: BTreeSet<(u8, &str)> = rows
        .iter()
        .filter(|r| r.emulated)
        .map(|r| (layout_rank(&r.layout), r.layout.as_str()))
        .collect();
    // Said once: by the run's own note where it wrote one (it says how), else here.
    for (_, layout) in emulated {
        if !env.notes_emulation_of(layout) {
            writeln!(out, "> {}\n", emulated_note(layout, env))?;
        }
    }
    let throttled: BTreeSet<(CellKey, &str)> = rows
        .iter()
        .filter(|r| r.throttled)
        .map(|r| (r.cell_key(), r.clock_event_reasons.as_str()))
        .collect();
    if !throttled.is_empty() {
        writeln!(
            out,
            "> ⚠ throttled: {} cell(s) ran while NVML reported clock events other than idle; \
             their numbers may be pessimistic (marked ⚠ below):",
            throttled.len()
        )?;
        for (cell, reasons) in &throttled {
            writeln!(out, "> - {cell} (clock events {})", or_unknown(reasons))?;
        }
        writeln!(out)?;
    }
    crate::report::gpm::write_gpm(out, rows)?;
    for note in &env.notes {
        // A note's wrapped source lines can leave runs of spaces inside it.
        let note = note.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(out, "> note: {note}\n")?;
    }
    Ok(())
}

fn emulated_note(layout: &str, env: &EnvRecord) -> String {
    let gpus = match env.gpu_count {
        0 | 1 => "1 GPU".to_string(),
        n => format!("1 GPU (the machine has {n})"),
    };
    format!("⚠ emulated: {layout} ran one rank on {gpus}")
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "unknown"
    } else {
        s
    }
}

/// Every cell of each step group: throughput, ITL and their changes against eager-sync (of
/// the medians, unpaired; the paired step change is in the compact table above), forward
/// occupancy and the host-bound gap.
fn write_steps(out: &mut String, index: &Index) -> fmt::Result {
    for (group, cells) in index.groups(KIND_STEP) {
        writeln!(
            out,
            "### Decode step — {}\n",
            group_title(index, KIND_STEP, group)
        )?;
        writeln!(
            out,
            "| bs | block | arm | throughput (tok/s) | Δ throughput vs {BASELINE_ARM} | ITL median (µs) | ITL p90 (µs) | Δ ITL vs {BASELINE_ARM} | forward occupancy | host-bound gap (µs) |"
        )?;
        writeln!(out, "|---:|---:|---|---:|---|---:|---:|---|---:|---:|")?;
        for sorted in cells {
            let cell = &sorted.cell;
            let baseline = sorted.with_arm(BASELINE_ARM);
            let metric = |name: &str| index.get(cell, name);
            let change = |name: &str| -> String {
                if cell.arm == BASELINE_ARM {
                    return "baseline".to_string();
                }
                match (index.get(&baseline, name), metric(name)) {
                    (Some(base), Some(new)) => match relative_change(base, new) {
                        Some(c) => {
                            format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct))
                        }
                        None => "n/a".to_string(),
                    },
                    _ => "—".to_string(),
                }
            };
            let median = |name: &str| metric(name).map_or("—".to_string(), |r| fmt_num(r.median));
            let itl_p90 = metric("itl_us").map_or("—".to_string(), |r| fmt_num(r.p90));
            let occupancy = metric("occupancy").map_or("—".to_string(), fmt_ratio);
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell.batch_size,
                cell.block_size,
                arm_label(index, cell),
                median("throughput_tok_s"),
                change("throughput_tok_s"),
                median("itl_us"),
                itl_p90,
                change("itl_us"),
                occupancy,
                median("gap_us"),
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn arm_label(index: &Index, cell: &CellKey) -> String {
    if index.throttled(cell) {
        format!("{} ⚠ throttled", table_cell(&cell.arm))
    } else {
        table_cell(&cell.arm)
    }
}

/// Occupancy is stored as a ratio (or already in percent with unit `%`).
fn fmt_ratio(row: &Row) -> String {
    match row.unit.as_str() {
        "%" => format!("{:.1}%", row.median),
        _ => format!("{:.1}%", row.median * 100.0),
    }
}

fn write_preps(out: &mut String, index: &Index) -> fmt::Result {
    let floors = launch_floors(index.rows);
    let ceiling = copy_ceiling(index.rows);
    for (group, cells) in index.groups(KIND_PREP) {
        let arms: BTreeSet<(u8, &str)> = cells
            .iter()
            .map(|c| (c.arm_rank, c.cell.arm.as_str()))
            .collect();
        // The reading arms each get a read column (their step − eager-device's) beside
        // eager-device; eager-sync's is the "host read".
        let has_device = arms.iter().any(|(_, arm)| *arm == DEVICE_ARM);
        let readers: Vec<(&str, ReadPath)> = (arms.iter())
            .filter(|_| has_device)
            .filter_map(|(_, arm)| Some((*arm, arm.parse::<Arm>().ok()?.read_path()?)))
            .collect();
        let has_host_read = readers.iter().any(|(arm, _)| *arm == BASELINE_ARM);
        let has_bandwidth = cells.iter().any(|c| index.get(&c.cell, "gb_s").is_some());
        writeln!(
            out,
            "### Metadata prep — {}\n",
            group_title(index, KIND_PREP, group)
        )?;
        write!(
            out,
            "Per-step cost, median µs (multiple of the arm's launch floor"
        )?;
        // Each class of arm over its like floor; classes sharing an item (graph arms of a run
        // from before the chained empty graphs) are named together.
        let mut read_against: Vec<(&str, Vec<&str>, f64)> = Vec::new();
        for (arms, arm) in [
            ("eager arms", BASELINE_ARM),
            ("graph and graph-upload", "graph"),
            ("fused", "fused"),
        ] {
            if let Some((item, floor)) = floor_of(&floors, arm, &group.family) {
                match read_against.iter_mut().find(|(i, _, _)| *i == item) {
                    Some((_, names, _)) => names.push(arms),
                    None => read_against.push((item, vec![arms], floor.median)),
                }
            }
        }
        for (item, arms, us) in read_against {
            write!(out, "; {} over {item} {} µs", arms.join(", "), fmt_num(us))?;
        }
        write!(out, ")")?;
        if has_host_read {
            write!(
                out,
                ". Host read = {BASELINE_ARM} − {DEVICE_ARM}, median µs [95% interval]"
            )?;
        }
        for (arm, path) in readers.iter().filter(|(arm, _)| *arm != BASELINE_ARM) {
            write!(out, "; {path} read = {arm} − {DEVICE_ARM}")?;
        }
        if has_bandwidth {
            write!(
                out,
                ". Bandwidth = the bytes the prep reads and writes over its device time \
                 (gpu_prep_us), each arm in column order"
            )?;
            match ceiling {
                Some(c) => write!(
                    out,
                    ", with its share of the d2d-copy ceiling, {} GB/s",
                    fmt_num(c)
                )?,
                None => write!(out, " (no d2d-copy ceiling in this run)")?,
            }
        }
        writeln!(out, ".\n")?;

        write!(out, "| bs | block |")?;
        for (_, arm) in &arms {
            write!(out, " {} |", table_cell(arm))?;
        }
        for (arm, path) in &readers {
            match *arm {
                BASELINE_ARM => write!(out, " host read (µs) |")?,
                _ => write!(out, " {path} read (µs) |")?,
            }
        }
        if has_bandwidth {
            write!(out, " bandwidth (% of copy) |")?;
        }
        writeln!(out)?;
        write!(out, "|---:|---:|{}", "---:|".repeat(arms.len()))?;
        write!(out, "{}", "---|".repeat(readers.len()))?;
        writeln!(out, "{}", if has_bandwidth { "---|" } else { "" })?;

        // One table row per shape; any cell of the shape names it, the arm is swapped in.
        let mut shapes: BTreeMap<(u32, u32), &SortedCell> = BTreeMap::new();
        for sorted in cells {
            shapes
                .entry((sorted.batch_size, sorted.block_size))
                .or_insert(sorted);
        }
        for ((bs, block), sorted) in shapes {
            write!(out, "| {bs} | {block} |")?;
            for (_, arm) in &arms {
                let cell = sorted.with_arm(arm);
                let floor = floor_of(&floors, arm, &cell.family).map(|(_, r)| r.median);
                write!(out, " {} |", prep_cost(index, &cell, floor))?;
            }
            for (arm, _) in &readers {
                let text = read_cost(index, &sorted.with_arm(arm)).unwrap_or("—".to_string());
                write!(out, " {text} |")?;
            }
            if has_bandwidth {
                let by_arm: Vec<String> = arms
                    .iter()
                    .map(|(_, arm)| bandwidth(index, &sorted.with_arm(arm), ceiling))
                    .collect();
                write!(out, " {} |", by_arm.join(" · "))?;
            }
            writeln!(out)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The compact tables: every group's arms against eager-sync from the run's paired ratios
/// (`step_ratio_vs_eager_sync`: each arm's step time over eager-sync's, formed in every round
/// where the two ran back to back), step groups first. Nothing for a run without those rows.
fn write_against_eager_sync(out: &mut String, index: &Index) -> fmt::Result {
    let mut intro = false;
    for kind in [KIND_STEP, KIND_PREP] {
        for (group, cells) in index.groups(kind) {
            let ratio = |cell: &CellKey| index.get(cell, STEP_RATIO_VS_EAGER_SYNC);
            let arms: BTreeSet<(u8, &str)> = cells
                .iter()
                .filter(|c| ratio(&c.cell).is_some())
                .map(|c| (c.arm_rank, c.cell.arm.as_str()))
                .collect();
            if arms.is_empty() {
                continue;
            }
            if !intro {
                writeln!(
                    out,
                    "### Against {BASELINE_ARM}\n\nEach arm's step time over {BASELINE_ARM}'s, \
                     formed in every round (the two ran back to back) and summarised over \
                     rounds: change [95% interval between rounds] and the verdict `compare` \
                     gives at ±{DEFAULT_THRESHOLD_PCT}%.\n"
                )?;
                intro = true;
            }
            let what = if kind == KIND_STEP {
                "Decode step"
            } else {
                "Metadata prep"
            };
            writeln!(out, "**{what} — {}**\n", group_title(index, kind, group))?;
            write!(out, "| bs | block |")?;
            for (_, arm) in &arms {
                write!(out, " {} |", table_cell(arm))?;
            }
            writeln!(out)?;
            writeln!(out, "|---:|---:|{}", "---|".repeat(arms.len()))?;
            let shapes: BTreeMap<(u32, u32), &SortedCell> = cells
                .iter()
                .map(|c| ((c.batch_size, c.block_size), c))
                .collect();
            for ((bs, block), sorted) in shapes {
                write!(out, "| {bs} | {block} |")?;
                for (_, arm) in &arms {
                    let text = ratio(&sorted.with_arm(arm)).map_or("—".to_string(), paired_change);
                    write!(out, " {text} |")?;
                }
                writeln!(out)?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// graph-upload against graph in every step group that ran both: what the host-built list
/// graph-upload copies up before its replays costs a step, so what caching it as a device
/// constant is worth (EAGLE: sgl-project/sglang#32219's merged draft-extend path's `[N] * bs`, the review's
/// `extend_seq_lens`, before each draft-extend replay; DSpark: before both replays). The
/// change is of the two arms' ratios to eager-sync, each paired in rounds; the difference
/// in µs is of their step times.
fn write_upload_against_graph(out: &mut String, index: &Index) -> fmt::Result {
    const UPLOAD_ARM: &str = "graph-upload";
    let mut intro = false;
    for (group, cells) in index.groups(KIND_STEP) {
        let shapes: BTreeMap<(u32, u32), &SortedCell> = cells
            .iter()
            .map(|c| ((c.batch_size, c.block_size), c))
            .collect();
        let mut lines = Vec::new();
        for ((bs, block), sorted) in shapes {
            let (up, graph) = (sorted.with_arm(UPLOAD_ARM), sorted.with_arm(AFTER_ARM));
            let (Some(u), Some(g)) = (index.get(&up, "step_us"), index.get(&graph, "step_us"))
            else {
                continue;
            };
            let (d, lo, hi) = difference(u, g);
            let change = match (
                index.get(&up, STEP_RATIO_VS_EAGER_SYNC),
                index.get(&graph, STEP_RATIO_VS_EAGER_SYNC),
            ) {
                (Some(ur), Some(gr)) => change_text(
                    relative_change(gr, ur),
                    (ur.median / gr.median - 1.0) * 100.0,
                ),
                _ => format!(
                    "{} (unpaired)",
                    change_text(relative_change(g, u), (u.median / g.median - 1.0) * 100.0)
                ),
            };
            lines.push(format!(
                "| {bs} | {block} | {} | {} | {} [{}, {}] | {change} |",
                fmt_num(g.median),
                fmt_num(u.median),
                fmt_num(d),
                fmt_num(lo),
                fmt_num(hi)
            ));
        }
        if lines.is_empty() {
            continue;
        }
        if !intro {
            writeln!(
                out,
                "### {UPLOAD_ARM} against {AFTER_ARM}: what caching the uploaded list is worth\n\n\
                 {UPLOAD_ARM} is {AFTER_ARM} replay with the host-built `[N] * bs` copied up \
                 from pageable memory before its replays (a syncing copy); caching that list as \
                 a device constant makes it {AFTER_ARM}. Step change: {UPLOAD_ARM}'s ratio to \
                 {BASELINE_ARM} over {AFTER_ARM}'s, each paired in rounds [95% interval].\n"
            )?;
            intro = true;
        }
        let where_ = match drafter_of(&group.family) {
            Some(Drafter::Eagle) => {
                "before each draft-extend replay only, where sgl-project/sglang#32219's merged \
                 DSA path uploads it (`extend_seq_lens`; SGLang 0.5.23 fills it on the device, \
                 as graph does)"
            }
            _ => "before both the draft and the verify replay",
        };
        writeln!(
            out,
            "**Decode step — {}** (upload {where_})\n",
            group_title(index, KIND_STEP, group)
        )?;
        writeln!(
            out,
            "| bs | block | {AFTER_ARM} step (µs) | {UPLOAD_ARM} step (µs) | {UPLOAD_ARM} − {AFTER_ARM} (µs) | step change |"
        )?;
        writeln!(out, "|---:|---:|---:|---:|---:|---|")?;
        for line in lines {
            writeln!(out, "{line}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `tp8 (emulated), dspark+dsa_target_verify` for a step group, `dsa_decode, tp1` for a prep
/// group: how its headings and table labels name it.
fn group_title(index: &Index, kind: &str, group: &GroupKey) -> String {
    let layout = layout_label(index, kind, group);
    if kind == KIND_STEP {
        format!("{layout}, {}", group.family)
    } else {
        format!("{}, {layout}", group.family)
    }
}

/// A group's layout as tables name it: "tp8 (emulated)" where it ran on fewer GPUs.
fn layout_label(index: &Index, kind: &str, group: &GroupKey) -> String {
    match index.emulated(kind, group) {
        true => format!("{} (emulated)", group.layout),
        false => group.layout.clone(),
    }
}

/// The answer first: for each step group (layout) and each prep group (family), graph
/// replay's change against eager-sync at the smallest batch size and the middle block size
/// both ran ([`headline_shape`]), with its 95% interval.
fn write_headlines(out: &mut String, index: &Index) -> fmt::Result {
    let step_families: BTreeSet<String> = index
        .groups(KIND_STEP)
        .keys()
        .map(|g| g.family.clone())
        .collect();
    let mut lines = Vec::new();
    for kind in [KIND_STEP, KIND_PREP] {
        for (group, cells) in index.groups(kind) {
            let Some((bs, block, base, after)) = headline_shape(cells) else {
                continue;
            };
            let layout = layout_label(index, kind, group);
            let paired = index
                .get(&after, STEP_RATIO_VS_EAGER_SYNC)
                .map(|r| change_text(change_of_ratio(r), r.median * 100.0 - 100.0));
            let unpaired = |metric: &str| -> Option<String> {
                let (base, new) = (index.get(&base, metric)?, index.get(&after, metric)?);
                Some(change_text(
                    relative_change(base, new),
                    (new.median / base.median - 1.0) * 100.0,
                ))
            };
            let lead = format!("**{AFTER_ARM} replay against {BASELINE_ARM}**");
            let line = if kind == KIND_STEP {
                let family = if step_families.len() > 1 || names_another_drafter(&group.family) {
                    format!(" ({})", group.family)
                } else {
                    String::new()
                };
                let mut parts = Vec::new();
                parts.extend(unpaired("itl_us").map(|c| format!("ITL {c}")));
                parts.extend(unpaired("throughput_tok_s").map(|c| format!("throughput {c}")));
                let mut line = format!(
                    "{lead} at {layout}{family} bs {bs} block {block}: {}",
                    parts.join(", ")
                );
                if let Some(paired) = paired {
                    line.push_str(&format!(" (step time {paired}, paired in rounds)"));
                }
                line
            } else {
                let step = match paired {
                    Some(paired) => format!("{paired}, paired in rounds"),
                    None => unpaired("step_us").unwrap_or_else(|| "n/a".into()),
                };
                let mut line = format!(
                    "{lead}, {} prep at {layout} bs {bs} block {block}: step time {step}",
                    group.family
                );
                if let Some(read) = read_cost(index, &base) {
                    line.push_str(&format!(
                        "; host read ({BASELINE_ARM} − {DEVICE_ARM}) {read} µs"
                    ));
                }
                line
            };
            lines.push(line);
        }
    }
    if lines.is_empty() {
        writeln!(
            out,
            "_No headline: this run has no {AFTER_ARM} and {BASELINE_ARM} cells side by side._\n"
        )
    } else {
        writeln!(out, "{}\n", lines.join("\n\n"))
    }
}

/// The smallest batch size at which both eager-sync and graph ran, and the middle of the
/// block sizes they ran there (the lower of two middles, as the charts take it), with the
/// two cells.
fn headline_shape(cells: &BTreeSet<SortedCell>) -> Option<(u32, u32, CellKey, CellKey)> {
    let shapes_of = |arm: &str| -> BTreeSet<(u32, u32)> {
        cells
            .iter()
            .filter(|c| c.cell.arm == arm)
            .map(|c| (c.batch_size, c.block_size))
            .collect()
    };
    let both: Vec<(u32, u32)> = shapes_of(BASELINE_ARM)
        .intersection(&shapes_of(AFTER_ARM))
        .copied()
        .collect();
    let bs = both.iter().map(|(bs, _)| *bs).min()?;
    let blocks: Vec<u32> = both
        .iter()
        .filter(|(b, _)| *b == bs)
        .map(|(_, k)| *k)
        .collect();
    let block = blocks[(blocks.len() - 1) / 2];
    let sorted = cells
        .iter()
        .find(|c| (c.batch_size, c.block_size) == (bs, block))?;
    Some((
        bs,
        block,
        sorted.with_arm(BASELINE_ARM),
        sorted.with_arm(AFTER_ARM),
    ))
}

/// "-15.1% [-15.2, -15.0]", or "-15.1% [n/a]" without an interval.
pub(crate) fn change_text(change: Option<Change>, pct: f64) -> String {
    match change {
        Some(c) => format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct)),
        None => format!("{} [n/a]", fmt_pct(pct)),
    }
}

/// What a reading arm's read costs in a prep cell, "17.2 [16.9, 17.5]" µs: the sweep's
/// paired `read_cost_us`, else the arm's step time − eager-device's with its MOVER interval.
pub(crate) fn read_cost(index: &Index, reader: &CellKey) -> Option<String> {
    if let Some(cost) = index.get(reader, "read_cost_us") {
        return Some(format!(
            "{} [{}, {}]",
            fmt_num(cost.median),
            fmt_num(cost.ci_lo),
            fmt_num(cost.ci_hi)
        ));
    }
    let device = CellKey {
        arm: DEVICE_ARM.to_string(),
        ..reader.clone()
    };
    let (d, lo, hi) = difference(
        index.get(reader, "step_us")?,
        index.get(&device, "step_us")?,
    );
    Some(format!("{} [{}, {}]", fmt_num(d), fmt_num(lo), fmt_num(hi)))
}

/// "-42.0% [-43.1, -40.8] **faster**": a paired ratio row as a change with its verdict.
fn paired_change(row: &Row) -> String {
    let better = better_direction(&row.metric, &row.unit);
    match change_of_ratio(row) {
        Some(c) => format!(
            "{} {} {}",
            fmt_pct(c.pct),
            fmt_interval(c.lo_pct, c.hi_pct),
            verdict_on_change(&c, better, DEFAULT_THRESHOLD_PCT).marked()
        ),
        None => format!(
            "{} [n/a] {}",
            fmt_pct((row.median - 1.0) * 100.0),
            Verdict::Uncertain.as_str()
        ),
    }
}

/// "45.2 (10.0×)": the arm's per-step cost and its multiple of the floor, taken from the
/// cell's `floor_multiple` row when the run wrote one, else computed from the floor rows.
fn prep_cost(index: &Index, cell: &CellKey, floor_us: Option<f64>) -> String {
    let Some(step) = index.get(cell, "step_us") else {
        return "—".to_string();
    };
    let multiple = index
        .get(cell, "floor_multiple")
        .map(|r| r.median)
        .or_else(|| floor_us.filter(|f| *f > 0.0).map(|f| step.median / f));
    let mut text = fmt_num(step.median);
    if let Some(multiple) = multiple {
        let _ = write!(text, " ({multiple:.1}×)");
    }
    if index.throttled(cell) {
        text.push_str(" ⚠");
    }
    text
}

/// "812 GB/s (19.3%)": an arm's achieved bandwidth and its share of the copy ceiling.
fn bandwidth(index: &Index, cell: &CellKey, ceiling: Option<f64>) -> String {
    let Some(row) = index.get(cell, "gb_s") else {
        return "—".to_string();
    };
    let mut text = format!("{} GB/s", fmt_num(row.median));
    if let Some(ceiling) = ceiling {
        let _ = write!(text, " ({}%)", fmt_num(row.median / ceiling * 100.0));
    }
    text
}

/// `a − b` with a 95% interval by MOVER for a difference of independent estimates; NaN
/// bounds when either side has no interval (too few samples).
fn difference(a: &Row, b: &Row) -> (f64, f64, f64) {
    let d = a.median - b.median;
    if ![a.ci_lo, a.ci_hi, b.ci_lo, b.ci_hi]
        .iter()
        .all(|v| v.is_finite())
    {
        return (d, f64::NAN, f64::NAN);
    }
    let below = |r: &Row| (r.median - r.ci_lo).max(0.0);
    let above = |r: &Row| (r.ci_hi - r.median).max(0.0);
    (
        d,
        d - below(a).hypot(above(b)),
        d + above(a).hypot(below(b)),
    )
}

fn write_floors(out: &mut String, index: &Index) -> fmt::Result {
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
         (results/2026-11-29-h200-read-landing/).\n",
        fmt_num(BUSY_BEFORE_READ_US),
        FloorItem::D2hIntBusy.name(),
        fmt_num(busy),
        fmt_num(idle),
        FloorItem::D2hInt.name(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::test_rows::row;
    use crate::results::env::test_env;

    fn step(arm: &str, metric: &str, median: f64) -> Row {
        row(
            KIND_STEP,
            "dspark+dsa_target_verify",
            arm,
            1,
            metric,
            median,
        )
    }

    fn prep(arm: &str, median: f64) -> Row {
        row(KIND_PREP, "dsa_decode", arm, 4, "step_us", median)
    }

    #[test]
    fn graph_upload_against_graph_names_where_each_drafter_uploads() {
        let eagle = crate::axes::Drafter::Eagle.step_family();
        let mut rows = Vec::new();
        for family in [eagle, "dspark+dsa_target_verify"] {
            for (arm, step_us, ratio) in [
                ("eager-sync", 1000.0, None),
                ("graph", 800.0, Some(0.80)),
                ("graph-upload", 820.0, Some(0.82)),
            ] {
                rows.push(row(KIND_STEP, family, arm, 1, "step_us", step_us));
                rows.push(row(KIND_STEP, family, arm, 1, "itl_us", step_us / 3.0));
                if let Some(r) = ratio {
                    let mut paired = row(KIND_STEP, family, arm, 1, STEP_RATIO_VS_EAGER_SYNC, r);
                    paired.unit = "x".into();
                    rows.push(paired);
                }
            }
        }
        let md = render_summary(&rows, &test_env());
        let section = &md[md
            .find("### graph-upload against graph: what caching the uploaded list is worth")
            .unwrap_or_else(|| panic!("{md}"))..];
        let eagle_at = section
            .find(&format!(
                "**Decode step — tp1, {eagle}** (upload before each draft-extend replay only"
            ))
            .unwrap_or_else(|| panic!("{section}"));
        let dspark_at = section
            .find("**Decode step — tp1, dspark+dsa_target_verify** (upload before both the draft and the verify replay)")
            .unwrap_or_else(|| panic!("{section}"));
        // 0.82 / 0.80: +2.5%; 820 − 800 µs.
        for at in [eagle_at, dspark_at] {
            let table = &section[at..];
            assert!(table.contains("| 1 | 5 | 800 | 820 | 20.0 ["), "{table}");
            assert!(
                table.lines().nth(4).unwrap().contains("| +2.5% ["),
                "{table}"
            );
        }
        // Headlines name the drafter of a run of EAGLE steps alone.
        rows.retain(|r| r.family == eagle);
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains(&format!("at tp1 ({eagle}) bs 1 block 5")),
            "{md}"
        );
        // Without graph-upload there is nothing to answer.
        rows.retain(|r| r.arm != "graph-upload");
        assert!(!render_summary(&rows, &test_env()).contains("### graph-upload against graph"));
    }

    #[test]
    fn numbers_get_digits_by_size() {
        assert_eq!(fmt_num(351_476.4), "351,476");
        assert_eq!(fmt_num(2280.0), "2,280");
        assert_eq!(fmt_num(-1234.0), "-1,234");
        assert_eq!(fmt_num(412.4), "412");
        assert_eq!(fmt_num(45.23), "45.2");
        assert_eq!(fmt_num(4.5), "4.50");
        assert_eq!(fmt_num(f64::NAN), "n/a");
        assert_eq!(fmt_pct(13.44), "+13.4%");
        assert_eq!(fmt_pct(-2.0), "-2.0%");
        assert_eq!(fmt_interval(-1.04, 2.96), "[-1.0, +3.0]");
    }

    #[test]
    fn markdown_escapes_hold() {
        assert_eq!(table_cell("a|b"), "a\\|b");
        assert_eq!(code("metaprep sweep"), "`metaprep sweep`");
        // CommonMark strips one space from each end only when both ends have one.
        assert_eq!(code("echo `x`"), "`` echo `x` ``");
    }

    #[test]
    fn host_read_difference_combines_both_intervals() {
        let mut sync = prep("eager-sync", 40.0);
        (sync.ci_lo, sync.ci_hi) = (39.0, 42.0);
        let mut device = prep("eager-device", 25.0);
        (device.ci_lo, device.ci_hi) = (24.0, 25.5);
        let (d, lo, hi) = difference(&sync, &device);
        assert_eq!(d, 15.0);
        // lower: sync's lower reach (1.0) with device's upper reach (0.5)
        assert!((lo - (15.0 - 1.25f64.sqrt())).abs() < 1e-12, "{lo}");
        // upper: sync's upper reach (2.0) with device's lower reach (1.0)
        assert!((hi - (15.0 + 5.0f64.sqrt())).abs() < 1e-12, "{hi}");
        device.ci_lo = f64::NAN;
        let (d, lo, hi) = difference(&sync, &device);
        assert_eq!(d, 15.0);
        assert!(
            lo.is_nan() && hi.is_nan(),
            "no interval on one side: none on the difference"
        );
    }

    #[test]
    fn the_sweeps_own_read_cost_estimate_is_preferred() {
        let mut cost = prep("eager-sync", 18.3);
        cost.metric = "read_cost_us".into();
        (cost.ci_lo, cost.ci_hi) = (18.0, 18.6);
        let rows = vec![prep("eager-sync", 40.0), prep("eager-device", 25.0), cost];
        let md = render_summary(&rows, &EnvRecord::default());
        assert!(md.contains("18.3 [18.0, 18.6]"), "{md}");
    }

    #[test]
    fn every_reading_arm_gets_its_read_column_beside_eager_device() {
        let mut rows = Vec::new();
        for (arm, step, cost) in [
            ("eager-sync", 40.0, Some(18.0)),
            ("eager-pinned", 37.0, Some(15.0)),
            ("eager-mapped", 30.0, None),
            ("eager-device", 22.0, None),
        ] {
            rows.push(prep(arm, step));
            if let Some(cost) = cost {
                let mut r = prep(arm, cost);
                r.metric = "read_cost_us".into();
                rows.push(r);
            }
        }
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains(
                "| bs | block | eager-sync | eager-pinned | eager-mapped | eager-device | host \
                 read (µs) | pinned read (µs) | mapped read (µs) |\n|---:|---:|---:|---:|---:|---:|---|---|---|\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("; pinned read = eager-pinned − eager-device"),
            "{md}"
        );
        // The paired rows where the run has them, the difference of medians where not.
        assert!(
            md.contains("| 18.0 [17.8, 18.2] | 15.0 [14.8, 15.2] | 8.00 ["),
            "{md}"
        );
    }

    #[test]
    fn prep_arms_are_set_against_eager_sync_by_their_paired_ratios() {
        let ratio = |arm: &str, bs: u32, median: f64, lo: f64, hi: f64| {
            let mut r = row(
                KIND_PREP,
                "dsa_decode",
                arm,
                bs,
                STEP_RATIO_VS_EAGER_SYNC,
                median,
            );
            (r.unit, r.ci_lo, r.ci_hi, r.stop_reason) = ("x".into(), lo, hi, "derived".into());
            (r.p10, r.p90) = (f64::NAN, f64::NAN);
            r
        };
        let step = |arm: &str, bs: u32, median: f64| {
            row(KIND_PREP, "dsa_decode", arm, bs, "step_us", median)
        };
        let rows = vec![
            step("eager-sync", 1, 40.0),
            step("eager-device", 1, 22.0),
            step("graph", 1, 10.0),
            step("eager-sync", 8, 40.0),
            step("graph", 8, 40.0),
            ratio("eager-device", 1, 0.55, 0.54, 0.56),
            ratio("graph", 1, 0.25, 0.245, 0.26),
            ratio("graph", 8, 1.0, 0.995, 1.01),
            ratio("eager-device", 8, 1.1, 1.05, 1.15),
            step("eager-device", 8, 44.0),
        ];
        // Through the CSV, as `report` reads a run.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        crate::results::csv::write_rows(&path, &rows).unwrap();
        let rows = crate::results::csv::read_rows(&path).unwrap();
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains(
                "**Metadata prep — dsa_decode, tp1**\n\n| bs | block | eager-device | graph |\n|---:|---:|---|---|\n"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 1 | 5 | -45.0% [-46.0, -44.0] **faster** | -75.0% [-75.5, -74.0] **faster** |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 8 | 5 | +10.0% [+5.0, +15.0] **slower** | +0.0% [-0.5, +1.0] same |"),
            "{md}"
        );
        // An interval straddling the threshold is uncertain; a cell without a ratio is a dash.
        let mut rows = rows;
        rows.retain(|r| !(r.arm == "eager-device" && r.batch_size == 8));
        rows.iter_mut()
            .filter(|r| {
                r.arm == "graph" && r.metric == STEP_RATIO_VS_EAGER_SYNC && r.batch_size == 8
            })
            .for_each(|r| (r.median, r.ci_lo, r.ci_hi) = (0.99, 0.97, 1.01));
        let md = render_summary(&rows, &test_env());
        assert!(
            md.contains("| 8 | 5 | — | -1.0% [-3.0, +1.0] uncertain |"),
            "{md}"
        );
        // A run without paired rows (steps, or a sweep before rounds) gets no such table.
        rows.retain(|r| r.metric != STEP_RATIO_VS_EAGER_SYNC);
        assert!(!render_summary(&rows, &test_env()).contains("### Against eager-sync"));
    }

    #[test]
    fn prep_tables_show_each_arms_bandwidth_and_share_of_the_copy_ceiling() {
        let verify = |arm: &str, bs: u32, metric: &str, median: f64| {
            row(KIND_PREP, "dsa_target_verify", arm, bs, metric, median)
        };
        let mut rows = vec![
            prep("graph", 10.0), // a dsa_decode group without bandwidth rows
            row(KIND_FLOOR, "floor", "d2d-copy", 1, "step_us", 32.0),
            row(KIND_FLOOR, "floor", "d2d-copy", 1, "gb_s", 4000.0),
        ];
        for (bs, arm, us, gb_s) in [
            (8, "eager-sync", 40.0, Some(50.0)),
            (8, "graph", 12.0, Some(120.0)),
            (8, "fused", 6.0, Some(812.0)),
            (256, "eager-sync", 60.0, None),
            (256, "graph", 16.0, Some(2400.0)),
            (256, "fused", 14.0, Some(3520.0)),
        ] {
            rows.push(verify(arm, bs, "step_us", us));
            rows.push(verify(arm, bs, "bytes", 4e7));
            rows.extend(gb_s.map(|g| verify(arm, bs, "gb_s", g)));
        }
        // Through the CSV, as `report` reads a run.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        crate::results::csv::write_rows(&path, &rows).unwrap();
        let rows = crate::results::csv::read_rows(&path).unwrap();
        let md = render_summary(&rows, &test_env());
        let table = &md[md.find("### Metadata prep — dsa_target_verify").unwrap()..];
        assert!(
            table.contains("with its share of the d2d-copy ceiling, 4,000 GB/s."),
            "{table}"
        );
        assert!(
            table.contains(
                "| bs | block | eager-sync | graph | fused | bandwidth (% of copy) |\n\
                 |---:|---:|---:|---:|---:|---|\n"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| 8 | 5 | 40.0 | 12.0 | 6.00 | 50.0 GB/s (1.25%) · 120 GB/s (3.00%) · 812 GB/s (20.3%) |"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| 256 | 5 | 60.0 | 16.0 | 14.0 | — · 2,400 GB/s (60.0%) · 3,520 GB/s (88.0%) |"
            ),
            "{table}"
        );
        let decode = &md[md.find("### Metadata prep — dsa_decode").unwrap()..];
        let decode = &decode[..decode.find("### Metadata prep — dsa_target").unwrap()];
        assert!(!decode.contains("bandwidth"), "{decode}");
        // The copy is a floor item, listed after the copies.
        let floor = &md[md.find("### Floor").unwrap()..];
        assert!(
            floor.contains("| d2d-copy | gb_s | GB/s | 4,000 |"),
            "{floor}"
        );

        // Without the ceiling, the bandwidth alone.
        let no_copy: Vec<Row> = rows.into_iter().filter(|r| r.arm != "d2d-copy").collect();
        let md = render_summary(&no_copy, &test_env());
        assert!(md.contains("(no d2d-copy ceiling in this run)."), "{md}");
        assert!(md.contains("| 50.0 GB/s · 120 GB/s · 812 GB/s |"), "{md}");
    }

    #[test]
    fn step_table_shows_change_against_eager_sync() {
        let rows = vec![
            step("eager-sync", "throughput_tok_s", 1000.0),
            step("graph", "throughput_tok_s", 1250.0),
            step("eager-sync", "itl_us", 200.0),
            step("graph", "itl_us", 160.0),
            step("graph", "occupancy", 0.975),
            Row {
                ci_lo: 0.870,
                ci_hi: 0.890,
                ..step("graph", STEP_RATIO_VS_EAGER_SYNC, 0.880)
            },
        ];
        let text = render_summary(&rows, &test_env());
        assert!(
            text.contains(
                "| 1 | 5 | eager-sync | 1,000 | baseline | 200 | 210 | baseline | — | — |"
            ),
            "{text}"
        );
        let graph = text
            .lines()
            .find(|l| l.starts_with("| 1 | 5 | graph |"))
            .unwrap();
        assert!(graph.contains("| 1,250 | +25.0% ["), "{graph}");
        assert!(graph.contains("| 160 | 168 | -20.0% ["), "{graph}");
        assert!(graph.contains("| 97.5% |"), "{graph}");
        // The paired change is the compact table's, not a near-duplicate column beside Δ ITL.
        assert!(!graph.contains("-12.0%"), "{graph}");
        assert!(
            text.contains("| bs | block | graph |\n|---:|---:|---|\n| 1 | 5 | -12.0% [-13.0, -11.0] **faster** |"),
            "{text}"
        );
    }

    #[test]
    fn missing_baseline_leaves_a_dash_not_a_number() {
        let rows = vec![step("graph", "itl_us", 160.0)];
        let text = render_summary(&rows, &test_env());
        let graph = text.lines().find(|l| l.contains("| graph |")).unwrap();
        assert_eq!(graph, "| 1 | 5 | graph | — | — | 160 | 168 | — | — | — |");
    }

    #[test]
    fn floor_multiple_is_computed_from_floor_rows_when_absent() {
        let rows = vec![
            prep("graph", 22.5),
            row(KIND_FLOOR, "floor", "empty-graph", 1, "step_us", 6.0),
            row(KIND_FLOOR, "floor", "empty-graph-2", 1, "step_us", 9.0),
            row(KIND_FLOOR, "floor", "empty-kernel", 1, "step_us", 4.5),
            row(KIND_FLOOR, "floor", "d2h-int", 1, "step_us", 2.0), // not a launch floor
        ];
        let text = render_summary(&rows, &test_env());
        assert!(
            text.contains(
                "eager arms over empty-kernel 4.50 µs; graph and graph-upload over \
                 empty-graph-2 9.00 µs; fused over empty-graph 6.00 µs"
            ),
            "{text}"
        );
        // The graph arm of DSA decode (two kernels) is read against the empty graph of two
        // nodes: 22.5 / 9.0.
        assert!(text.contains("| 4 | 5 | 22.5 (2.5×) |"), "{text}");
        // Only eager-sync and eager-device together give a host-read column.
        assert!(!text.contains("host read (µs)"), "{text}");
        let kernel = text.find("| empty-kernel |").unwrap();
        let graph = text.find("| empty-graph |").unwrap();
        let d2h = text.find("| d2h-int |").unwrap();
        assert!(kernel < graph && graph < d2h, "floor items in fixed order");
    }

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

    #[test]
    fn floor_multiple_rows_take_precedence() {
        let mut multiple = prep("graph", 7.5);
        multiple.metric = "floor_multiple".into();
        let rows = vec![
            prep("graph", 22.5),
            multiple,
            row(KIND_FLOOR, "floor", "empty-kernel", 1, "step_us", 4.5),
        ];
        let text = render_summary(&rows, &test_env());
        assert!(text.contains("| 22.5 (7.5×) |"), "{text}");
    }

    #[test]
    fn throttled_and_emulated_cells_are_called_out() {
        let mut hot = prep("graph", 22.5);
        hot.throttled = true;
        hot.clock_event_reasons = "0x0000000000000020".into();
        let mut wide = step("graph", "itl_us", 160.0);
        wide.layout = "tp8".into();
        wide.emulated = true;
        let mut env = test_env();
        env.gpu_count = 2;
        let text = render_summary(&[hot, wide], &env);
        assert!(text.contains("⚠ throttled: 1 cell(s)"), "{text}");
        assert!(
            text.contains("graph bs=4 block=5 tp1 (clock events 0x0000000000000020)"),
            "{text}"
        );
        assert!(text.contains("| 22.5 ⚠ |"), "{text}");
        assert!(text.contains("### Decode step — tp8 (emulated), dspark+dsa_target_verify"));
        assert_eq!(
            text.matches("⚠ emulated: tp8 ran one rank on 1 GPU (the machine has 2)")
                .count(),
            1,
            "said once: {text}"
        );
        // A run that noted how it emulated the layout is not told again.
        env.notes =
            vec!["emulated: tp8 needs 8 GPUs, ran as 1 rank(s) on a host with 2; ...".into()];
        let text = render_summary(&[wide_row()], &env);
        assert_eq!(text.matches("emulated: tp8").count(), 1, "{text}");
    }

    fn wide_row() -> Row {
        Row {
            layout: "tp8".into(),
            emulated: true,
            ..step("graph", "itl_us", 160.0)
        }
    }

    /// A step group's eager-sync and graph cells at bs 1 and 8, blocks 3, 5 and 8, with
    /// ITL, throughput and graph's paired ratio; `spread` is each interval's half-width.
    fn headline_rows(layout: &str) -> Vec<Row> {
        let mut rows = Vec::new();
        for bs in [8, 1] {
            for block in [8, 3, 5] {
                let cell = |arm: &str, metric: &str, median: f64, half: f64| Row {
                    layout: layout.into(),
                    batch_size: bs,
                    block_size: block,
                    ci_lo: median - half,
                    ci_hi: median + half,
                    ..step(arm, metric, median)
                };
                let graph_itl = if (bs, block) == (1, 5) { 926.0 } else { 990.0 };
                rows.extend([
                    cell("eager-sync", "itl_us", 1094.0, 4.0),
                    cell("graph", "itl_us", graph_itl, 3.0),
                    cell("eager-sync", "throughput_tok_s", 624.0, 1.0),
                    cell("graph", "throughput_tok_s", 735.0, 1.0),
                    Row {
                        unit: "x".into(),
                        stop_reason: "derived".into(),
                        ..cell("graph", STEP_RATIO_VS_EAGER_SYNC, 0.849, 0.001)
                    },
                ]);
            }
        }
        rows
    }

    #[test]
    fn the_first_line_is_graphs_change_against_eager_sync_with_its_interval() {
        let mut rows = headline_rows("tp8");
        rows.iter_mut().for_each(|r| r.emulated = true);
        rows.extend(headline_rows("tp1"));
        let text = render_summary(&rows, &test_env());
        let mut lines = text.lines();
        // One line per layout, tp1 first; the smallest batch and the middle block size.
        assert_eq!(
            lines.next().unwrap(),
            "**graph replay against eager-sync** at tp1 bs 1 block 5: ITL -15.4% [-15.8, -14.9], \
             throughput +17.8% [+17.5, +18.0] (step time -15.1% [-15.2, -15.0], paired in rounds)"
        );
        assert_eq!(lines.next(), Some(""));
        assert!(
            lines.next().unwrap().starts_with(
                "**graph replay against eager-sync** at tp8 (emulated) bs 1 block 5: ITL -15.4%"
            ),
            "{text}"
        );
        assert_eq!(lines.next(), Some(""));
        assert!(lines.next().unwrap().starts_with("**Environment:**"));
    }

    #[test]
    fn a_sweeps_headline_is_per_family_with_the_host_read() {
        let mut rows = vec![
            prep("eager-sync", 40.0),
            prep("eager-device", 22.0),
            prep("graph", 10.0),
        ];
        for r in &mut rows {
            (r.ci_lo, r.ci_hi) = (r.median - 1.0, r.median + 1.0);
        }
        let text = render_summary(&rows, &test_env());
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with(
                "**graph replay against eager-sync**, dsa_decode prep at tp1 bs 4 block 5: \
                 step time -75.0% ["
            ),
            "{first}"
        );
        assert!(
            first.contains("; host read (eager-sync − eager-device) 18.0 ["),
            "{first}"
        );
        // No graph cell, no headline: the run says so instead of guessing another pair.
        let text = render_summary(&rows[..2], &test_env());
        assert!(text.starts_with(
            "_No headline: this run has no graph and eager-sync cells side by side._\n"
        ));
    }

    #[test]
    fn the_command_line_loses_the_gpu_hosts_absolute_paths() {
        assert_eq!(
            portable_command(
                "./metaprep steps --out /root/out/h/steps-default --trace /root/out/h/steps-default/trace.json \
                 --host-profile=/root/bundle/host-profiles/pytorch.json --tp tp8"
            ),
            "metaprep steps --out steps-default --trace steps-default/trace.json \
             --host-profile=pytorch.json --tp tp8"
        );
        assert_eq!(
            portable_command("/a/metaprep sweep --out results/x --batch-sizes 1"),
            "metaprep sweep --out results/x --batch-sizes 1"
        );
        assert_eq!(portable_command(""), "");
    }

    #[test]
    fn gpm_figures_sit_beside_the_throttling_callout() {
        let mut busy = prep("eager-sync", 40.0);
        busy.throttled = true;
        busy.gpm_sm_util_pct = Some(88.0);
        busy.gpm_dram_bw_util_pct = Some(45.0);
        busy.gpm_cell_share_pct = Some(100.0);
        let mut env = test_env();
        env.notes = vec!["a note".into()];
        let text = render_summary(&[busy], &env);
        let throttled = text
            .find("⚠ throttled: 1 cell(s)")
            .expect("throttle callout");
        let gpm = text
            .find("> GPM (NVML, per cell, over 1 cells): SM activity 88.0–88.0%")
            .unwrap_or_else(|| panic!("{text}"));
        let note = text.find("> note: a note").expect("note");
        assert!(throttled < gpm && gpm < note, "{text}");
        // Without GPM figures the summary has no GPM line, and a GPM note shows as any note.
        env.notes = vec!["GPM metrics unavailable: MIG".into()];
        let text = render_summary(&[prep("graph", 20.0)], &env);
        assert!(!text.contains("> GPM"), "{text}");
        assert!(
            text.contains("> note: GPM metrics unavailable: MIG"),
            "{text}"
        );
    }

    #[test]
    fn no_rows_says_so() {
        let text = render_summary(&[], &test_env());
        assert!(text.contains("**Environment:** 1× NVIDIA H200"), "{text}");
        assert!(text.contains("_This run has no results._"), "{text}");
    }
}
