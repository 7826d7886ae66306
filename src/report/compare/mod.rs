//! `metaprep compare BASE NEW`: the before/after of two runs, or of two arms of one run, with
//! a verdict per cell and metric that CI can gate on. How each verdict is computed: docs/compare.md,
//! "How `compare` computes its verdicts".

mod comparison;
mod derived;
mod findings;
#[cfg(test)]
mod fixtures;
mod floors;
mod gate;
mod header;
mod json;
mod judge;
mod machine;
mod markdown;
mod matching;
mod power;
mod power_table;
mod side;
mod table;

pub use comparison::{Comparison, FloorMove, Matched, PowerClass};
pub use gate::Gate;
pub use judge::compare;
pub use markdown::{MAX_REPORT_CHARS, REPORT_HEADER};
pub use side::{Entry, Names, Side, Which};

use crate::exit::Exit;
use crate::report::change::DEFAULT_THRESHOLD_PCT;
use crate::results::atomic::{write_atomic, write_atomic_with};
use crate::results::env::describe;
use anyhow::{bail, Context, Result};
use std::fmt::Write;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Compare two runs (or two arms of one run) cell by cell.
///
/// Each matched cell and metric gets the change of its median in percent with a 95%
/// interval and a verdict: `same` (interval inside ±threshold), `faster` / `slower` (the
/// whole interval beyond the threshold in the better / worse direction; lower is better for
/// times, higher for throughput and occupancy) or `uncertain`; a host-paced ratio or
/// bandwidth only where a time it is made of makes the call; `broken` where NEW lost the
/// interval BASE has. An arm's times also show their change vs floor (over the floor the arm is
/// read against); every row shows the smallest slower change it could have called.
///
/// The report leads with one line of verdict counts, names missing and broken rows, says what
/// size of change each class of rows could see, gives one step_us table of family × arm, then
/// only the rows called, capped to stay under 60,000 characters (a pull request's body).
///
/// Runs whose settings differ (sweep vs steps, any flag that changes what is measured: seed,
/// axes, forward model, host profile, ...; not --out, --trace, --trace-cell, --device or
/// --resume) are refused, naming each difference, unless --allow-mismatch. The machine
/// (GPU, driver, CPU, git revision) may differ: the report's Environment section shows it
/// and how each floor moved; floors get no verdict and never fail the comparison.
///
/// Exit status: 0, or 1 when any cell got slower (with --gate gpu-paced: any row the GPU
/// paces), or any row, cell or arm of BASE is missing
/// from NEW or lost its interval (unless --allow-missing), or 2 on bad input or differing
/// settings.
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
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_THRESHOLD_PCT)]
    pub threshold: f64,
    /// Write the report to FILE (replaced atomically) instead of printing it; the terminal
    /// then gets only the verdict line and where each file went.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write every row (the same tables uncapped, `same` and `uncertain` rows included)
    /// as markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub details: Option<PathBuf>,
    /// Also write the comparison as JSON to FILE, every row with its changes and verdict: for
    /// scripts.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Compare even when the two runs' settings differ (their env.json's command, flags and
    /// axes, forward model or host profile); the report lists the differences at the top.
    /// Machine differences (GPU, driver, CPU, git revision) never need it: they are shown.
    #[arg(long)]
    pub allow_mismatch: bool,
    /// Report rows, cells or arms only in BASE, and rows of NEW without an interval where
    /// BASE has one, without failing the comparison on them (they fail it by default: a
    /// regression can hide in what NEW no longer measures).
    #[arg(long)]
    pub allow_missing: bool,
    /// Which rows called `slower` fail the comparison: `gpu-paced` (only rows the GPU paces;
    /// host-paced ones are reported, marked not gated), or `all`. Two runs made one after the
    /// other carry the host's state of their own minutes, which moves host-paced rows further
    /// than their intervals say: gate those with `metaprep ab`, which pairs the two sides in
    /// time (docs/compare.md). Missing and broken rows fail the comparison either way.
    #[arg(long, value_enum, value_name = "ROWS", default_value_t = Gate::GpuPaced)]
    pub gate: Gate,
}

/// What a comparison found. The caller prints `terminal` and exits with `exit_code()`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOutcome {
    /// The report for a pull request (what `--out` writes).
    pub markdown: String,
    /// What to print: the report, or with `--out` only the verdict line and the files.
    pub terminal: String,
    /// Rows called `slower` that fail the comparison under `--gate`.
    pub slower: usize,
    /// Missing and broken rows.
    pub findings: usize,
    pub allow_missing: bool,
    /// The files written besides the report (`--details`, `--json`), said on stderr when the
    /// report goes to stdout.
    pub written: Vec<String>,
}

impl CompareOutcome {
    /// 1 when something got slower beyond the threshold, or something is missing or broken
    /// (unless allowed), else 0. Bad input is an `Err` from [`run_compare`]; exit with
    /// [`Exit::BadInput`] then.
    pub fn exit(&self) -> Exit {
        Exit::failed_if(self.slower > 0 || (self.findings > 0 && !self.allow_missing))
    }

    /// [`CompareOutcome::exit`]'s status.
    pub fn exit_code(&self) -> u8 {
        self.exit().code()
    }
}

/// Compares rows held in memory (see [`compare`]).
#[cfg(test)]
pub fn compare_rows(
    base: &[crate::results::csv::Row],
    new: &[crate::results::csv::Row],
    arms: Option<(&str, &str)>,
    threshold_pct: f64,
) -> Result<Comparison> {
    let mut names = Names::default();
    let base = Side::of_rows(Which::Base, base, &mut names);
    let new = Side::of_rows(Which::New, new, &mut names);
    compare(base, new, arms, threshold_pct)
}

/// The start of a file `compare` writes for each output flag: a file that does not start so
/// is never overwritten.
fn signature(flag: &str) -> &'static str {
    match flag {
        "--json" => json::JSON_SIGNATURE,
        _ => REPORT_HEADER,
    }
}

/// Refuses an output that would overwrite an input, a file `compare` did not write (a run's
/// CSV or env.json among them), another output of the same call, or need folders created (a
/// typo should not grow a tree).
fn check_outputs(args: &CompareArgs) -> Result<()> {
    let outputs: Vec<(&str, &PathBuf)> = [
        ("--out", &args.out),
        ("--details", &args.details),
        ("--json", &args.json),
    ]
    .into_iter()
    .filter_map(|(flag, path)| path.as_ref().map(|p| (flag, p)))
    .collect();
    let resolved = |p: &Path| std::fs::canonicalize(p).ok();
    for (i, (flag, out)) in outputs.iter().enumerate() {
        let name = out.display();
        if let Some(out_real) = resolved(out) {
            if [&args.base, &args.new]
                .iter()
                .any(|input| resolved(input).as_ref() == Some(&out_real))
            {
                bail!("{flag} {name} is one of the compared inputs: choose another file");
            }
        }
        if let Some((other, _)) = outputs[..i]
            .iter()
            .find(|(_, o)| o == out || (resolved(o).is_some() && resolved(o) == resolved(out)))
        {
            bail!("{flag} {name} is also {other}'s file: give each output its own file");
        }
        match out.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) if !parent.is_dir() => bail!(
                "{flag} {name}: the folder {} does not exist; create it first",
                parent.display()
            ),
            _ => {}
        }
        if out.is_dir() {
            bail!("{flag} {name} is a directory: name a file");
        }
        crate::results::writable::writable_file(out, flag)?;
        if out.exists() && !starts_with(out, signature(flag)) {
            bail!(
                "{flag} {name} exists and is not a file `compare` wrote: choose another file \
                 (compare replaces only its own outputs)"
            );
        }
    }
    Ok(())
}

/// Whether the file at `path` starts with `prefix` (reading no more of it than that).
fn starts_with(path: &Path, prefix: &str) -> bool {
    let mut start = vec![0; prefix.len()];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut start))
        .is_ok_and(|()| start == prefix.as_bytes())
}

/// Warnings the inputs give (settings not checked or differing), and
/// how the machines differ. Fails on differing settings unless `allow_mismatch`.
fn read_settings(
    base: &Side,
    new: &Side,
    allow_mismatch: bool,
) -> Result<(Vec<String>, Vec<crate::results::env::Difference>)> {
    let mut warnings = Vec::new();
    let mut machine = Vec::new();
    match (&base.env, &new.env) {
        (Some(base_env), Some(new_env)) => {
            let settings = base_env.setting_differences(new_env);
            if !settings.is_empty() {
                if !allow_mismatch {
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
    Ok((warnings, machine))
}

/// Runs `metaprep compare`: checks every output before reading anything, loads both sides,
/// refuses differing settings unless allowed, compares, and writes the outputs asked for.
pub fn run_compare(args: &CompareArgs) -> Result<CompareOutcome> {
    if !args.threshold.is_finite() || !(0.0..=100.0).contains(&args.threshold) {
        bail!(
            "--threshold {} is not a percentage between 0 and 100: pass e.g. `--threshold 2`",
            args.threshold
        );
    }
    check_outputs(args)?;
    let mut names = Names::default();
    let base = Side::load(Which::Base, &args.base, &mut names)?;
    let new = Side::load(Which::New, &args.new, &mut names)?;
    let (warnings, machine) = read_settings(&base, &new, args.allow_mismatch)?;
    let arms = args.base_arm.as_deref().zip(args.new_arm.as_deref());
    let mut comparison = compare(base, new, arms, args.threshold)?;
    comparison.gate = args.gate;
    let mut outcome = CompareOutcome {
        markdown: String::new(),
        terminal: String::new(),
        slower: comparison.gated_slower(),
        findings: comparison.findings(),
        allow_missing: args.allow_missing,
        written: Vec::new(),
    };
    let context = markdown::Context {
        warnings: &warnings,
        machine: &machine,
        exit_code: outcome.exit_code(),
        allow_missing: args.allow_missing,
    };
    outcome.markdown = markdown::pull_request(&comparison, &context);
    let mut written = Vec::new();
    if let Some(path) = &args.details {
        write_atomic(path, markdown::details(&comparison, &context).as_bytes())?;
        written.push(format!("every row in {}", path.display()));
    }
    if let Some(path) = &args.json {
        write_atomic_with(path, |out| {
            json::write(
                out,
                &comparison,
                &warnings,
                context.exit_code,
                args.allow_missing,
            )
            .context("serialising the comparison as JSON")
        })?;
        written.push(format!("JSON in {}", path.display()));
    }
    outcome.written = written.clone();
    outcome.terminal = match &args.out {
        Some(path) => {
            write_atomic(path, outcome.markdown.as_bytes())?;
            written.insert(
                0,
                format!(
                    "report in {} ({} characters)",
                    path.display(),
                    outcome.markdown.chars().count()
                ),
            );
            format!(
                "{}\n{}\n",
                markdown::verdict_line(&comparison, context.exit_code),
                written.join("; ")
            )
        }
        None => outcome.markdown.clone(),
    };
    Ok(outcome)
}
