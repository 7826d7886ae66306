//! `metaprep gaps TRACE...`: which host syncs stall an engine's decode loop, from its own
//! profiler trace. Needs no GPU.

use super::common::usage;
use super::out_folder::{empty_out, write_run_folder};
use crate::calibrate::profiler_cost;
use crate::calibrate::trace::Trace;
use crate::exit::Exit;
use crate::gaps::chart::timeline_chart;
use crate::gaps::ranks::{across, AcrossRanks};
use crate::gaps::report::markdown;
use crate::gaps::untraced_step::host_scale;
use crate::gaps::{account, Accounted, Gaps, Step};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct GapsArgs {
    /// torch.profiler Chrome traces (plain or gzipped) of a decode loop, or folders of one
    /// trace a rank; two give a before and an after side by side.
    ///
    /// A folder's traces (every `*.json` and `*.json.gz` in it) are one run's ranks, read
    /// together: each step as its slowest rank sets it. A probe file beside a trace
    /// (`x.probe.json`, scripts/metaprep_host.py) takes the profiler's own cost off its steps.
    #[arg(required = true, value_name = "TRACE")]
    pub(crate) traces: Vec<PathBuf>,
    /// The region, op or Python frame that runs once a decode step (default: torch.profiler's
    /// `ProfilerStep#N`, else the repeating region that covers most of its thread).
    #[arg(long, value_name = "NAME")]
    pub(crate) step_marker: Option<String>,
    /// The loop's step (ITL) measured without the profiler, µs, one per TRACE in order (e.g. from
    /// its serving benchmark at the same batch size): the traced host time is scaled by the one
    /// factor that makes the median step that long, the GPU's work left as traced.
    #[arg(
        long,
        value_name = "US",
        value_delimiter = ',',
        allow_negative_numbers = true
    )]
    pub(crate) untraced_step_us: Vec<f64>,
    /// Output folder (default results/gaps-DATE); it must not exist or be empty.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Print gaps.json instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Most runs one call reads: a before and an after.
const MAX_RUNS: usize = 2;

pub(crate) fn gaps(args: &GapsArgs) -> Result<ExitCode> {
    let (out, runs) = match usage(check(args)) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    let analysed = match usage(analyse_runs(
        (&args.traces, &runs),
        args.step_marker.as_deref(),
        &args.untraced_step_us,
    )) {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    let summary = summary(&analysed);
    // gaps.json: every trace's accounting; ranks.json: each run's across its ranks.
    let traces: Vec<&Gaps> = analysed.iter().flat_map(|r| &r.traces).collect();
    let json = serde_json::to_string_pretty(&traces).context("serialising gaps.json")?;
    let across: Vec<&Option<AcrossRanks>> = analysed.iter().map(|r| &r.across).collect();
    let ranks = serde_json::to_string_pretty(&across).context("serialising ranks.json")?;
    let mut files = vec![
        ("summary.md", summary.as_bytes()),
        ("gaps.json", json.as_bytes()),
    ];
    if across.iter().any(|a| a.is_some()) {
        files.push(("ranks.json", ranks.as_bytes()));
    }
    let charts = charts(&analysed)?;
    files.extend(
        charts
            .iter()
            .map(|(name, bytes)| (name.as_str(), &bytes[..])),
    );
    write_run_folder(&out, "gaps", &files)?;
    if args.json {
        crate::outln!("{json}");
    } else {
        crate::out!("{summary}");
    }
    eprintln!("metaprep: gaps wrote {}", out.display());
    Ok(Exit::Ok.into())
}

/// One run as analysed: its traces (one, or one a rank) and, for ranks, the step across them.
struct AnalysedRun {
    traces: Vec<Gaps>,
    across: Option<AcrossRanks>,
}

/// Each run's traces (`runs`, named as given in `names`) analysed, at its untraced step where
/// `untraced_step_us` gives one a run: one factor on the host time of all its ranks, found from
/// their steps as accounted, before any figure is made.
fn analyse_runs(
    (names, runs): (&[PathBuf], &[Vec<PathBuf>]),
    step_marker: Option<&str>,
    untraced_step_us: &[f64],
) -> Result<Vec<AnalysedRun>> {
    (runs.iter().enumerate())
        .map(|(i, run)| {
            let accounted = (run.iter())
                .map(|path| {
                    let trace = Trace::read(path)?;
                    let file = path.display().to_string();
                    let profiler = profiler_cost::beside(&file, path, &trace)?;
                    account(&file, &trace, step_marker, profiler.as_ref())
                })
                .collect::<Result<Vec<Accounted>>>()?;
            let scale = match untraced_step_us.get(i) {
                Some(&step) => {
                    let steps: Vec<&[Step]> = accounted.iter().map(|a| &a.steps[..]).collect();
                    Some(host_scale(&steps, step).map_err(|e| match run.len() {
                        1 => e.context(run[0].display().to_string()),
                        _ => e.context(format!("the ranks of {}", names[i].display())),
                    })?)
                }
                None => None,
            };
            let traces: Vec<Gaps> = (accounted.into_iter())
                .map(|a| a.summarise(scale))
                .collect();
            let across = (traces.len() > 1).then(|| across(&traces)).transpose()?;
            Ok(AnalysedRun { traces, across })
        })
        .collect()
}

/// A run's traces: the file named, or a folder's traces (its ranks), in name order.
fn run_traces(path: &std::path::Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{}: no such trace file or folder", path.display());
    }
    let listed = std::fs::read_dir(path)
        .with_context(|| format!("reading the folder {}", path.display()))?;
    let mut traces: Vec<PathBuf> = (listed.filter_map(|e| e.ok().map(|e| e.path())))
        .filter(|p| {
            let name = p
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into());
            p.is_file()
                && (name.ends_with(".json") || name.ends_with(".json.gz"))
                && !name.ends_with(".probe.json")
        })
        .collect();
    traces.sort();
    if traces.is_empty() {
        bail!(
            "{}: no trace in the folder (*.json or *.json.gz, one a rank)",
            path.display()
        );
    }
    Ok(traces)
}

/// The flags, checked before any trace is read: where the run goes, and each run's traces.
fn check(args: &GapsArgs) -> Result<(PathBuf, Vec<Vec<PathBuf>>)> {
    if args.traces.len() > MAX_RUNS {
        bail!(
            "{} traces given: gaps reads one run, or two (a before and an after), each a trace \
             or a folder of one trace a rank",
            args.traces.len()
        );
    }
    let runs = (args.traces.iter())
        .map(|p| run_traces(p))
        .collect::<Result<Vec<_>>>()?;
    if args
        .step_marker
        .as_deref()
        .is_some_and(|m| m.trim().is_empty())
    {
        bail!("--step-marker: an empty name marks no step");
    }
    check_untraced_steps(&args.untraced_step_us, args.traces.len())?;
    let out = (args.out.clone()).unwrap_or_else(|| super::common::default_out("gaps"));
    empty_out(&out)?;
    Ok((out, runs))
}

/// The most `--untraced-step-us` takes, µs: ten seconds a step is a typo (ms for µs), not a
/// decode step.
const MAX_STEP_US: f64 = 1e7;

/// `--untraced-step-us`: none, or one a TRACE, each a positive number of µs.
fn check_untraced_steps(steps: &[f64], traces: usize) -> Result<()> {
    if !steps.is_empty() && steps.len() != traces {
        bail!(
            "--untraced-step-us gives {} steps for {traces} TRACE arguments: give one a TRACE, \
             in order (a folder of ranks is one run with one step)",
            steps.len()
        );
    }
    if let Some(bad) = steps
        .iter()
        .find(|s| !(s.is_finite() && (1.0..=MAX_STEP_US).contains(*s)))
    {
        bail!(
            "--untraced-step-us {bad:?} is not a step in µs: give the loop's step measured \
             without the profiler, such as 2800 (from 1 to {MAX_STEP_US:e})"
        );
    }
    Ok(())
}

/// A run's timeline chart is its trace's, or its slowest rank's: `timeline.png` and `.svg`,
/// `-before`/`-after` in the name where there are two runs.
fn chart_name(analysed: &[AnalysedRun], run: usize) -> String {
    match analysed.len() {
        1 => "timeline".into(),
        _ => format!("timeline-{}", ["before", "after"][run]),
    }
}

fn charted(run: &AnalysedRun) -> &Gaps {
    &run.traces[run.across.as_ref().map_or(0, AcrossRanks::slowest_rank)]
}

fn charts(analysed: &[AnalysedRun]) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for (i, run) in analysed.iter().enumerate() {
        let (png, svg) = timeline_chart(charted(run))?;
        let name = chart_name(analysed, i);
        files.push((format!("{name}.png"), png));
        files.push((format!("{name}.svg"), svg.into_bytes()));
    }
    Ok(files)
}

/// One run's summary, or a before/after table then each run's; a run of ranks leads with the
/// step across them, then its slowest rank's whole summary.
fn summary(analysed: &[AnalysedRun]) -> String {
    let mut out = String::new();
    if let [before, after] = analysed {
        out.push_str(&side_by_side(before, after));
    }
    for (i, run) in analysed.iter().enumerate() {
        if analysed.len() > 1 {
            out.push_str(&format!("\n## {}\n\n", ["Before", "After"][i]));
        }
        if let Some(across) = &run.across {
            out.push_str(&across.markdown(&run.traces));
            let file = &charted(run).file;
            out.push_str(&format!("\n### The slowest rank most often: `{file}`\n\n"));
        }
        out.push_str(&markdown(charted(run)));
        let name = chart_name(analysed, i);
        out.push_str(&format!("\n![Three typical steps]({name}.png)\n"));
    }
    out
}

/// Before → after: a run of one trace by its figures, a run of ranks by the step across them.
fn side_by_side(before: &AnalysedRun, after: &AnalysedRun) -> String {
    let figures = |run: &AnalysedRun| match &run.across {
        Some(a) => (a.period_us.median, a.win_us.median),
        None => (run.traces[0].period_us.median, run.traces[0].win_us.median),
    };
    let (before, after) = (figures(before), figures(after));
    use crate::report::format::fmt_num;
    let row = |name: &str, b: f64, a: f64| {
        format!(
            "| {name} | {} | {} | {:+.1}% |\n",
            fmt_num(b),
            fmt_num(a),
            100.0 * (a / b - 1.0)
        )
    };
    let mut out = String::from(
        "**Before → after** (medians over each trace's steps)\n\n\
         | | before | after | change |\n|---|---:|---:|---:|\n",
    );
    out.push_str(&row("step, µs", before.0, after.0));
    out.push_str(&row(
        "removing the reads would save, µs a step",
        before.1,
        after.1,
    ));
    out
}
