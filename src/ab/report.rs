//! What an `ab` run hands back: `summary.md` for a pull request (the verdict line first, then
//! the rows called, then one table per family and arm), `ab.json` with every row for scripts,
//! and `pairs.csv` with every pair's bursts and probes.

use super::run::{Measurement, RunPlan, SideSaid};
use super::sides::SideSpec;
use super::verdict::{rows, state_threshold, Call, ChangeRow, Margins, PctChange, READ_COST};
use crate::harness::nvml::is_throttled;
use crate::results::telemetry::TelemetrySample;
use crate::stats::summary::quantile;
use serde::Serialize;
use std::fmt::Write as _;

/// A side as the report names it.
#[derive(Debug, Clone, Serialize)]
pub struct SideReport {
    pub exe: String,
    /// The side's own flags (after the grid's).
    pub flags: String,
    pub version: String,
    pub device: String,
    pub pinned: String,
    pub planted: Option<String>,
}

impl SideReport {
    pub fn new(spec: &SideSpec, own_flags: &[String], said: &SideSaid) -> Self {
        SideReport {
            exe: spec.exe.display().to_string(),
            flags: own_flags.join(" "),
            version: said.hello.version.clone(),
            device: said.ready.device.clone(),
            pinned: said.ready.pinned.clone(),
            planted: said.hello.planted.clone(),
        }
    }
}

/// The device's clocks, power and clock events through the run (NVML), or why none were read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Clocks {
    pub samples: usize,
    /// SM clock, MHz: 10th percentile, median, 90th.
    pub sm_clock_mhz: [f64; 3],
    pub power_w_median: f64,
    pub temp_c_max: f64,
    /// Samples whose clock events hold a slowdown (not idle, not applications clocks).
    pub throttled_samples: usize,
    /// The distinct raw reason bits of those samples.
    pub throttle_reasons: Vec<String>,
    /// Why no reading was taken, where none was.
    pub unavailable: Option<String>,
}

impl Clocks {
    pub fn of(telemetry: &Result<Vec<TelemetrySample>, String>) -> Clocks {
        let none = |why: String| Clocks {
            samples: 0,
            sm_clock_mhz: [f64::NAN; 3],
            power_w_median: f64::NAN,
            temp_c_max: f64::NAN,
            throttled_samples: 0,
            throttle_reasons: Vec::new(),
            unavailable: Some(why),
        };
        let samples = match telemetry {
            Ok(s) if !s.is_empty() => s,
            Ok(_) => return none("NVML gave no sample".into()),
            Err(why) => return none(why.clone()),
        };
        let of = |pick: fn(&TelemetrySample) -> f64| samples.iter().map(pick).collect::<Vec<f64>>();
        let q = |v: &[f64], p| quantile(v, p).unwrap_or(f64::NAN);
        let sm = of(|t| t.sm_clock_mhz);
        let throttled: Vec<&TelemetrySample> = (samples.iter())
            .filter(|t| t.reason_bits().ok().flatten().is_some_and(is_throttled))
            .collect();
        let mut reasons: Vec<String> = throttled
            .iter()
            .map(|t| t.clock_event_reasons.clone())
            .collect();
        reasons.sort();
        reasons.dedup();
        Clocks {
            samples: samples.len(),
            sm_clock_mhz: [q(&sm, 0.1), q(&sm, 0.5), q(&sm, 0.9)],
            power_w_median: q(&of(|t| t.power_w), 0.5),
            temp_c_max: of(|t| t.temp_c).into_iter().fold(f64::NAN, f64::max),
            throttled_samples: throttled.len(),
            throttle_reasons: reasons,
            unavailable: None,
        }
    }

    /// The summary's line.
    fn line(&self) -> String {
        if let Some(why) = &self.unavailable {
            return format!("Clocks: not read ({why}).");
        }
        let [p10, median, p90] = self.sm_clock_mhz;
        let throttled = match self.throttled_samples {
            0 => "no slowdown among the clock events".to_string(),
            n => format!(
                "⚠ {n} samples throttled (clock events {})",
                self.throttle_reasons.join(", ")
            ),
        };
        format!(
            "Clocks (NVML, {} samples): SM {median:.0} MHz (p10 {p10:.0}, p90 {p90:.0}), power \
             {:.0} W, up to {:.0} °C; {throttled}.",
            self.samples, self.power_w_median, self.temp_c_max
        )
    }
}

/// The whole outcome, as `ab.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct AbReport {
    pub passed: bool,
    pub verdict: String,
    pub base: SideReport,
    pub new: SideReport,
    /// The grid's flags both sides ran.
    pub grid_flags: String,
    pub cells: usize,
    pub pairs_per_cell: usize,
    /// Processes each side ran in, one after another: the interval's units.
    pub processes: usize,
    pub redone: usize,
    pub redo_bound_pct: f64,
    pub margins_pct: Margins,
    /// The probe level (µs per empty-graph launch) that split the pairs into the host's fast
    /// and slow states, where the run saw both.
    pub state_split_at_us: Option<f64>,
    pub emulated: Vec<String>,
    pub seconds: f64,
    pub clocks: Clocks,
    pub rows: Vec<ChangeRow>,
}

impl AbReport {
    /// The report of `measurement`: its rows called at `margins`, the verdict, the sides (each
    /// with its own flags) and the grid's flags as both ran them.
    pub fn of(
        plan: &RunPlan,
        margins: Margins,
        own_flags: &[Vec<String>; 2],
        grid: &[String],
        measurement: &Measurement,
    ) -> AbReport {
        let split = state_threshold(&measurement.pairs, plan.redo_bound);
        let rows = rows(&measurement.cells, &measurement.pairs, margins, split);
        let (passed, verdict) = verdict_line(&rows, margins);
        let (base, new) = (&measurement.base, &measurement.new);
        let mut emulated = base.ready.emulated.clone();
        emulated.retain(|l| new.ready.emulated.contains(l));
        AbReport {
            passed,
            verdict,
            base: SideReport::new(&plan.base, &own_flags[0], base),
            new: SideReport::new(&plan.new, &own_flags[1], new),
            grid_flags: shlex::try_join(grid.iter().map(String::as_str)).unwrap_or_default(),
            cells: measurement.cells.len(),
            pairs_per_cell: plan.pairs,
            processes: plan.processes,
            redone: measurement.redone,
            redo_bound_pct: plan.redo_bound * 100.0,
            margins_pct: Margins {
                host: margins.host * 100.0,
                gpu: margins.gpu * 100.0,
            },
            state_split_at_us: split,
            emulated,
            seconds: measurement.seconds,
            clocks: Clocks::of(&measurement.telemetry),
            rows,
        }
    }

    pub fn slower(&self) -> impl Iterator<Item = &ChangeRow> {
        self.rows.iter().filter(|r| r.fails)
    }
}

/// The verdict line: PASS or FAIL and why.
pub fn verdict_line(rows: &[ChangeRow], margins: Margins) -> (bool, String) {
    let slower: Vec<&ChangeRow> = rows.iter().filter(|r| r.fails).collect();
    let faster = rows.iter().filter(|r| r.call == Call::Faster).count();
    let margins = format!(
        "host-paced ±{}%, GPU-paced ±{}%",
        margins.host * 100.0,
        margins.gpu * 100.0
    );
    if slower.is_empty() {
        let faster = match faster {
            0 => String::new(),
            n => format!("; {n} faster"),
        };
        return (
            true,
            format!(
                "PASS: no row of {} slower beyond its margin ({margins}){faster}",
                rows.len()
            ),
        );
    }
    let named: Vec<String> = (slower.iter().take(3))
        .map(|r| format!("{} {} {}", r.cell, r.metric, change_text(r.change.as_ref())))
        .collect();
    let more = match slower.len() {
        0..=3 => String::new(),
        n => format!(" and {} more", n - 3),
    };
    (
        false,
        format!(
            "FAIL: {} of {} rows slower beyond their margin ({margins}): {}{more}",
            slower.len(),
            rows.len(),
            named.join("; ")
        ),
    )
}

fn change_text(c: Option<&PctChange>) -> String {
    match c {
        Some(c) => format!("{:+.1}% [{:+.1}, {:+.1}]", c.pct, c.lo_pct, c.hi_pct),
        None => "—".into(),
    }
}

/// The metrics of the per-family tables: the step, the read's cost, and the step model's ITL
/// and throughput.
const TABLED: &[&str] = &["step_us", READ_COST, "itl_us", "throughput_tok_s"];

/// The most called rows `summary.md` lists.
const MOST_CALLED: usize = 150;

/// `summary.md`.
pub fn markdown(report: &AbReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# metaprep ab: BASE → NEW\n\n**{}**\n", report.verdict);
    let _ = writeln!(md, "| | BASE | NEW |\n|---|---|---|");
    let (b, n) = (&report.base, &report.new);
    for (what, bv, nv) in [
        ("build", &b.version, &n.version),
        ("executable", &b.exe, &n.exe),
        ("own flags", &b.flags, &n.flags),
        ("device", &b.device, &n.device),
    ] {
        let _ = writeln!(md, "| {what} | {} | {} |", or_dash(bv), or_dash(nv));
    }
    if b.planted.is_some() || n.planted.is_some() {
        let planted = |p: &Option<String>| p.clone().unwrap_or_else(|| "—".into());
        let _ = writeln!(
            md,
            "| planted (test aid) | {} | {} |",
            planted(&b.planted),
            planted(&n.planted)
        );
    }
    let emulated = match report.emulated.is_empty() {
        true => String::new(),
        false => format!(" Emulated on one GPU: {}.", report.emulated.join(", ")),
    };
    let states = match report.state_split_at_us {
        Some(at) => format!(
            " The host's launch path was in both states (split at {at:.2} µs an empty-graph \
             launch); a row whose fast-state and slow-state pairs disagree says so."
        ),
        None => " The host's launch path stayed in one state.".into(),
    };
    let _ = writeln!(
        md,
        "\nGrid `{}`: {} cells × {} pairs, half BASE-first, over {} processes a side, in {:.0} \
         s; {} pairs redone after the host's launch speed moved over {:.0}% inside them.\
         {states}{emulated} A row is called where its whole 95% interval (Hodges–Lehmann over \
         the processes' median ln NEW/BASE, Wilcoxon signed-rank) lies beyond its margin; \
         `smallest` is the least change it could have called.\n",
        report.grid_flags,
        report.cells,
        report.pairs_per_cell,
        report.processes,
        report.seconds,
        report.redone,
        report.redo_bound_pct
    );
    let _ = writeln!(md, "{}\n", report.clocks.line());
    // Slower rows first; a pull request's page holds the first MOST_CALLED.
    let mut called: Vec<&ChangeRow> = report.rows.iter().filter(|r| r.call.called()).collect();
    called.sort_by_key(|r| !r.fails);
    if called.is_empty() {
        let _ = writeln!(md, "## Rows called\n\nNone.\n");
    } else {
        let _ = writeln!(md, "## Rows called\n");
        table(&mut md, &called[..called.len().min(MOST_CALLED)], true);
        if called.len() > MOST_CALLED {
            let more = called.len() - MOST_CALLED;
            let _ = writeln!(md, "…and {more} more, every one in `ab.json`.\n");
        }
    }
    let mut tables: Vec<(String, String)> = Vec::new();
    for r in &report.rows {
        let key = (r.cell.family.clone(), r.cell.arm.clone());
        if !tables.contains(&key) {
            tables.push(key);
        }
    }
    for (family, arm) in tables {
        let rows: Vec<&ChangeRow> = (report.rows.iter())
            .filter(|r| r.cell.family == family && r.cell.arm == arm)
            .filter(|r| TABLED.contains(&r.metric.as_str()))
            .collect();
        let _ = writeln!(md, "## {family} · {arm}\n");
        table(&mut md, &rows, false);
    }
    let _ = writeln!(
        md,
        "Every metric of every cell (host issue, host blocked, device time, the step with the \
         forward) is in `ab.json`, a throughput's call is on its drop; every pair's bursts and probes in `pairs.csv`."
    );
    md
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "—"
    } else {
        s
    }
}

fn table(md: &mut String, rows: &[&ChangeRow], with_cell: bool) {
    let _ = writeln!(
        md,
        "| {}metric | pacing | BASE | NEW | change [95%] | pairs | call | smallest |",
        if with_cell {
            "cell | "
        } else {
            "bs | block | layout | "
        }
    );
    let _ = writeln!(
        md,
        "|{}---|---|---:|---:|---:|---:|---|---:|",
        if with_cell { "---|" } else { "---:|---:|---|" }
    );
    for r in rows {
        let place = match with_cell {
            true => format!("{} | ", r.cell),
            false => format!(
                "{} | {} | {} | ",
                r.cell.batch_size, r.cell.block, r.cell.layout
            ),
        };
        let mut call = r.call.name().to_string();
        if let Some(split) = &r.state_split {
            let _ = write!(
                call,
                " (fast state {}, slow {})",
                change_text(Some(&split.fast)),
                change_text(Some(&split.slow))
            );
        }
        let smallest = r.detectable_pct.map_or("—".into(), |d| format!("{d:.1}%"));
        let pacing = match r.pacing {
            super::verdict::Pacing::Host => "host",
            super::verdict::Pacing::Gpu => "GPU",
        };
        let _ = writeln!(
            md,
            "| {place}{} | {pacing} | {:.2} | {:.2} | {} | {} | {call} | {smallest} |",
            r.metric,
            r.base,
            r.new,
            change_text(r.change.as_ref()),
            r.pairs
        );
    }
    md.push('\n');
}

/// One line of `pairs.csv`: a pair's metric on both sides, with the pair's probes.
#[derive(Debug, Serialize)]
struct PairLine<'a> {
    round: usize,
    family: &'a str,
    arm: &'a str,
    batch_size: u32,
    block: u32,
    layout: &'a str,
    base_first: bool,
    redone: bool,
    metric: &'a str,
    base: f64,
    new: f64,
    base_probe_before_us: f64,
    base_probe_after_us: f64,
    new_probe_before_us: f64,
    new_probe_after_us: f64,
}

/// `pairs.csv`.
pub fn pairs_csv(m: &Measurement) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for p in &m.pairs {
        let cell = &m.cells[p.cell];
        for metric in &p.base.metrics {
            w.serialize(PairLine {
                round: p.round + 1,
                family: &cell.family,
                arm: &cell.arm,
                batch_size: cell.batch_size,
                block: cell.block,
                layout: &cell.layout,
                base_first: p.base_first,
                redone: p.redone,
                metric: &metric.name,
                base: metric.value,
                new: p.new.metric(&metric.name).unwrap_or(f64::NAN),
                base_probe_before_us: p.base.probe_before_us,
                base_probe_after_us: p.base.probe_after_us,
                new_probe_before_us: p.new.probe_before_us,
                new_probe_after_us: p.new.probe_after_us,
            })?;
        }
    }
    Ok(w.into_inner().map_err(|e| e.into_error())?)
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
