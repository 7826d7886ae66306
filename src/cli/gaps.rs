//! `metaprep gaps TRACE...`: which host syncs stall an engine's decode loop, from its own
//! profiler trace. Needs no GPU.

use super::common::usage;
use super::out_folder::{empty_out, write_run_folder};
use crate::calibrate::profiler_cost;
use crate::calibrate::trace::Trace;
use crate::exit::Exit;
use crate::gaps::report::markdown;
use crate::gaps::{analyse, Gaps};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct GapsArgs {
    /// torch.profiler Chrome traces (plain or gzipped) of a decode loop; two give a before and
    /// an after side by side.
    ///
    /// A probe file beside a trace (`x.probe.json`, scripts/metaprep_host.py) takes the
    /// profiler's own cost off its steps.
    #[arg(required = true, value_name = "TRACE")]
    pub(crate) traces: Vec<PathBuf>,
    /// The region, op or Python frame that runs once a decode step (default: torch.profiler's
    /// `ProfilerStep#N`, else the repeating region that covers most of its thread).
    #[arg(long, value_name = "NAME")]
    pub(crate) step_marker: Option<String>,
    /// Output folder (default results/gaps-DATE); it must not exist or be empty.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Print gaps.json instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Most traces one run reads: a before and an after.
const MAX_TRACES: usize = 2;

pub(crate) fn gaps(args: &GapsArgs) -> Result<ExitCode> {
    let out = match usage(check(args)) {
        Ok(out) => out,
        Err(code) => return Ok(code),
    };
    let analysed: Result<Vec<Gaps>> = (args.traces.iter())
        .map(|path| {
            let trace = Trace::read(path)?;
            let file = path.display().to_string();
            let profiler = profiler_cost::beside(&file, path, &trace)?;
            analyse(
                &file,
                &trace,
                args.step_marker.as_deref(),
                profiler.as_ref(),
            )
        })
        .collect();
    let analysed = match usage(analysed) {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    let summary = summary(&analysed);
    let json = serde_json::to_string_pretty(&analysed).context("serialising gaps.json")?;
    let files = [
        ("summary.md", summary.as_bytes()),
        ("gaps.json", json.as_bytes()),
    ];
    write_run_folder(&out, "gaps", &files)?;
    if args.json {
        crate::outln!("{json}");
    } else {
        crate::out!("{summary}");
    }
    eprintln!("metaprep: gaps wrote {}", out.display());
    Ok(Exit::Ok.into())
}

/// The flags, checked before any trace is read: where the run goes.
fn check(args: &GapsArgs) -> Result<PathBuf> {
    if args.traces.len() > MAX_TRACES {
        bail!(
            "{} traces given: gaps reads one trace, or two (a before and an after)",
            args.traces.len()
        );
    }
    for path in &args.traces {
        if !path.is_file() {
            bail!("{}: no such trace file", path.display());
        }
    }
    if args
        .step_marker
        .as_deref()
        .is_some_and(|m| m.trim().is_empty())
    {
        bail!("--step-marker: an empty name marks no step");
    }
    let out = (args.out.clone()).unwrap_or_else(|| super::common::default_out("gaps"));
    empty_out(&out)?;
    Ok(out)
}

/// One trace's summary, or a before/after table then each trace's.
fn summary(analysed: &[Gaps]) -> String {
    let mut out = String::new();
    if let [before, after] = analysed {
        out.push_str(&side_by_side(before, after));
    }
    for (i, g) in analysed.iter().enumerate() {
        if analysed.len() > 1 {
            out.push_str(&format!("\n## {}\n\n", ["Before", "After"][i]));
        }
        out.push_str(&markdown(g));
    }
    out
}

fn side_by_side(before: &Gaps, after: &Gaps) -> String {
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
    out.push_str(&row(
        "step, µs",
        before.period_us.median,
        after.period_us.median,
    ));
    out.push_str(&row(
        "GPU idle, µs a step",
        before.gpu_idle_us.median,
        after.gpu_idle_us.median,
    ));
    out.push_str(&row(
        "removing every sync would save, µs a step",
        before.win_us.median,
        after.win_us.median,
    ));
    out
}
