//! A run directory, `results/<run>/`, read back as a whole: the results CSV, the
//! environment record, and the optional telemetry and Chrome trace. Each file may be kept
//! gzipped (`metaprep.csv.gz`, ...; [`run_file`]).

use crate::results::compressed::{read_file, run_file};
use crate::results::csv::{read_rows, read_table, Row, KIND_STEP};
use crate::results::env::EnvRecord;
use crate::results::telemetry::{TelemetrySample, TELEMETRY_COLUMNS};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// File names inside a run directory.
pub const RESULTS_CSV: &str = "metaprep.csv";
pub const TELEMETRY_CSV: &str = "telemetry.csv";
/// A sweep's per-round medians ([`crate::harness::rows::RoundLine`]).
pub const ROUNDS_CSV: &str = "rounds.csv";
pub const TRACE_JSON: &str = "trace.json";
/// The traces a steps run writes for its traced cell: eager-sync, then graph replay.
pub const TRACES: [&str; 2] = [TRACE_JSON, "trace-graph.json"];

#[derive(Debug, Clone, PartialEq)]
pub struct RunDir {
    pub path: PathBuf,
    pub rows: Vec<Row>,
    pub env: EnvRecord,
    /// Empty when the run wrote no `telemetry.csv` (no NVML).
    pub telemetry: Vec<TelemetrySample>,
    /// `(file name, text)` of `trace.json` and `trace-graph.json`, those the run wrote, in
    /// that order; the timeline chart draws them one above the other.
    pub traces: Vec<(String, String)>,
}

/// A run directory's results CSV and environment record only (what `compare` reads), with
/// the errors [`RunDir::open`] gives for a path that is not a run directory.
pub fn open_results(dir: &Path) -> Result<(Vec<Row>, EnvRecord)> {
    if !dir.exists() {
        bail!(
            "{} does not exist: pass a run directory such as `results/<run>/`",
            dir.display()
        );
    }
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: pass the run directory that holds {RESULTS_CSV}",
            dir.display()
        );
    }
    let csv_path = run_file(dir, RESULTS_CSV);
    if !csv_path.exists() {
        bail!(
            "{} has no {RESULTS_CSV}: run `metaprep sweep --out DIR` or \
             `metaprep steps --out DIR` first (a gzipped {RESULTS_CSV}.gz would do too)",
            dir.display()
        );
    }
    let rows = read_rows(&csv_path)?;
    let env = EnvRecord::read(dir)?;
    check_same_run(&csv_path, &rows, &env)?;
    Ok((rows, env))
}

/// A `telemetry.csv`, every sample checked ([`TelemetrySample::check`]); errors name the line.
pub fn read_telemetry(path: &Path) -> Result<Vec<TelemetrySample>> {
    let samples: Vec<(u64, TelemetrySample)> = read_table(path, TELEMETRY_COLUMNS, &[])?;
    (samples.into_iter())
        .map(|(line, sample)| {
            sample.check().map(|()| sample).map_err(|why| {
                anyhow::anyhow!(
                    "{} line {line}: {why}: fix or delete that line",
                    path.display()
                )
            })
        })
        .collect()
}

impl RunDir {
    /// Reads `dir`. Fails on a path that is not a directory, a directory without
    /// `metaprep.csv` or `env.json`, or any file that cannot be read.
    pub fn open(dir: &Path) -> Result<RunDir> {
        let (rows, env) = open_results(dir)?;
        let telemetry_path = run_file(dir, TELEMETRY_CSV);
        let telemetry = if telemetry_path.exists() {
            read_telemetry(&telemetry_path)?
        } else {
            Vec::new()
        };
        if rows.is_empty() {
            bail!(
                "{}: no rows below the header: the run finished no cell yet (resume it with \
                 --resume, or run it again)",
                run_file(dir, RESULTS_CSV).display()
            );
        }
        let mut traces = Vec::new();
        for name in TRACES {
            let path = run_file(dir, name);
            if path.exists() {
                let text = read_file(&path)
                    .map_err(anyhow::Error::from)
                    .and_then(|bytes| Ok(String::from_utf8(bytes)?))
                    .with_context(|| format!("reading {}", path.display()))?;
                traces.push((name.to_string(), text));
            }
        }
        Ok(RunDir {
            path: dir.to_path_buf(),
            rows,
            env,
            telemetry,
            traces,
        })
    }
}

/// The commands whose env.json stands beside a results CSV, by its command line (a record
/// without `settings`: a validation's steps runs carry validate's command line).
const RUN_COMMANDS: [&str; 5] = ["sweep", "steps", "rank-worker", "sweep-worker", "validate"];

/// The command whose run wrote `env`: its settings' (a validation's steps runs record
/// `steps` under validate's command line; its own record, `validate`), else its command
/// line's. With settings, only `sweep` and `steps` write a results CSV.
fn writer(env: &EnvRecord) -> Option<(&str, bool)> {
    match &env.settings {
        Some(settings) => {
            let command = settings.command();
            Some((command, matches!(command, "sweep" | "steps")))
        }
        None => env.subcommand().map(|c| (c, RUN_COMMANDS.contains(&c))),
    }
}

/// A steps run writes only step rows: a CSV with prep or floor rows beside a steps run's
/// env.json is a sweep's CSV in another run's folder, whose charts and summary would carry
/// the wrong machine and settings. (A sweep's env.json beside step rows is not refused:
/// the test fixtures combine both kinds to draw every chart from one run.)
fn check_same_run(csv_path: &Path, rows: &[Row], env: &EnvRecord) -> Result<()> {
    if let Some((other, _)) = writer(env).filter(|(_, writes_csv)| !writes_csv) {
        bail!(
            "{}: beside an env.json of `metaprep {other}`, which writes no {RESULTS_CSV}: the \
             CSV and env.json come from different runs; put each run's files in its own folder",
            csv_path.display()
        );
    }
    let steps_run = matches!(writer(env), Some(("steps" | "rank-worker", _)));
    if let Some(row) = rows.iter().find(|r| steps_run && r.kind != KIND_STEP) {
        bail!(
            "{}: a `{}` row ({}) beside an env.json of `metaprep {}`, which writes only `{KIND_STEP}` \
             rows: the CSV and env.json come from different runs; put each run's files in its own folder",
            csv_path.display(),
            row.kind,
            row.cell_key(),
            writer(env).map_or("", |(command, _)| command)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::test_rows::row;
    use crate::results::csv::write_rows;
    use crate::results::env::test_env;

    fn sample() -> TelemetrySample {
        TelemetrySample {
            t_s: 0.1,
            cell: "dspark_draft_block/graph/4/5/tp1".into(),
            sm_clock_mhz: 1980.0,
            mem_clock_mhz: 3201.0,
            power_w: 350.5,
            temp_c: 47.0,
            gpu_util_pct: 88.0,
            clock_event_reasons: "0x0000000000000000".into(),
        }
    }

    fn write_run(dir: &Path) {
        write_rows(
            &dir.join(RESULTS_CSV),
            &[row("prep", "dsa_decode", "graph", 1, "step_us", 22.0)],
        )
        .unwrap();
        test_env().write(dir).unwrap();
    }

    /// One step row as a run's CSV in `dir`.
    fn write_step_run(dir: &Path) {
        let step = row(
            "step",
            crate::results::csv::STEP_FAMILY,
            "graph",
            1,
            "itl_us",
            90.0,
        );
        write_rows(&dir.join(RESULTS_CSV), &[step]).unwrap();
    }

    fn error_of(dir: &Path) -> String {
        format!("{:#}", RunDir::open(dir).unwrap_err())
    }

    #[test]
    fn telemetry_columns_match_the_sample_serialisation() {
        let mut writer = ::csv::Writer::from_writer(Vec::new());
        writer.serialize(sample()).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), TELEMETRY_COLUMNS.join(","));
    }

    #[test]
    fn opens_a_run_with_and_without_optional_files() {
        let dir = tempfile::tempdir().unwrap();
        write_run(dir.path());
        let run = RunDir::open(dir.path()).unwrap();
        assert_eq!(run.rows.len(), 1);
        assert_eq!(run.env, test_env());
        assert!(run.telemetry.is_empty());
        assert!(run.traces.is_empty());

        let mut writer = ::csv::Writer::from_writer(Vec::new());
        writer.serialize(sample()).unwrap();
        std::fs::write(dir.path().join(TELEMETRY_CSV), writer.into_inner().unwrap()).unwrap();
        std::fs::write(dir.path().join(TRACE_JSON), "{\"traceEvents\":[]}").unwrap();
        let run = RunDir::open(dir.path()).unwrap();
        assert_eq!(run.telemetry, vec![sample()]);
        assert_eq!(
            run.traces,
            [("trace.json".to_string(), "{\"traceEvents\":[]}".to_string())]
        );
    }

    #[test]
    fn gzipped_files_read_as_the_plain_ones() {
        use flate2::{write::GzEncoder, Compression};
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        write_run(dir.path());
        let mut writer = ::csv::Writer::from_writer(Vec::new());
        writer.serialize(sample()).unwrap();
        let telemetry = writer.into_inner().unwrap();
        for (name, bytes) in [
            (
                RESULTS_CSV,
                std::fs::read(dir.path().join(RESULTS_CSV)).unwrap(),
            ),
            (TELEMETRY_CSV, telemetry),
            (TRACE_JSON, b"{\"traceEvents\":[]}".to_vec()),
        ] {
            let mut gz = GzEncoder::new(Vec::new(), Compression::default());
            gz.write_all(&bytes).unwrap();
            std::fs::write(dir.path().join(format!("{name}.gz")), gz.finish().unwrap()).unwrap();
        }
        std::fs::remove_file(dir.path().join(RESULTS_CSV)).unwrap();
        let run = RunDir::open(dir.path()).unwrap();
        assert_eq!(run.rows.len(), 1);
        assert_eq!(run.telemetry, vec![sample()]);
        assert_eq!(run.traces[0].1, "{\"traceEvents\":[]}");
        // compare reads a gzipped results CSV too.
        assert_eq!(open_results(dir.path()).unwrap().0, run.rows);
    }

    #[test]
    fn refuses_a_missing_path_and_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(error_of(&missing).contains("does not exist"));
        write_run(dir.path());
        let error = error_of(&dir.path().join(RESULTS_CSV));
        assert!(error.contains("is not a directory"), "{error}");
    }

    #[test]
    fn directory_without_csv_says_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let error = error_of(dir.path());
        assert!(error.contains("has no metaprep.csv: run `metaprep sweep --out DIR` or `metaprep steps --out DIR` first (a gzipped metaprep.csv.gz would do too)"), "{error}");
    }

    #[test]
    fn bad_files_inside_are_reported_by_name() {
        let dir = tempfile::tempdir().unwrap();
        write_run(dir.path());
        std::fs::write(dir.path().join(TELEMETRY_CSV), "t_s,cell\n").unwrap();
        let error = error_of(dir.path());
        assert!(error.contains("telemetry.csv line 1"), "{error}");
        assert!(
            error.contains("missing column(s) `sm_clock_mhz`"),
            "{error}"
        );

        std::fs::write(dir.path().join(RESULTS_CSV), "").unwrap();
        let error = error_of(dir.path());
        assert!(error.contains("metaprep.csv is empty"), "{error}");

        write_run(dir.path());
        std::fs::remove_file(dir.path().join("env.json")).unwrap();
        assert!(error_of(dir.path()).contains("has no env.json"));

        // A telemetry file cut while it was written.
        write_run(dir.path());
        let mut writer = ::csv::Writer::from_writer(Vec::new());
        writer.serialize(sample()).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        std::fs::write(dir.path().join(TELEMETRY_CSV), text.trim_end_matches('\n')).unwrap();
        let error = error_of(dir.path());
        assert!(
            error.contains("telemetry.csv line 2: the last line has no final newline"),
            "{error}"
        );
    }

    #[test]
    fn a_sweeps_csv_beside_a_steps_env_json_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_run(dir.path());
        let mut env = test_env();
        env.command_line = "metaprep steps --out results/x".into();
        env.write(dir.path()).unwrap();
        let error = error_of(dir.path());
        assert!(
            error.contains("metaprep.csv: a `prep` row (prep dsa_decode/graph bs=1 block=5 tp1) beside an env.json of `metaprep steps`"),
            "{error}"
        );
        // Step rows beside it are that run's own.
        write_step_run(dir.path());
        assert_eq!(RunDir::open(dir.path()).unwrap().rows.len(), 1);
        env.command_line = "metaprep rank-worker --rank 0 -- --tp tp2".into();
        env.write(dir.path()).unwrap();
        assert!(RunDir::open(dir.path()).is_ok());
    }

    #[test]
    fn a_validations_or_a_dumps_own_record_is_refused_beside_a_csv_and_its_steps_runs_read() {
        use crate::results::settings::{test_validate_and_check, Settings};
        let dir = tempfile::tempdir().unwrap();
        write_run(dir.path());
        let [validate, check] = test_validate_and_check();
        let Settings::Validate(validation) = &validate else {
            unreachable!("the fixture's first is a validation's")
        };
        // `settings` recorded by `command_line` beside the run's CSV: what reading it says.
        let read_with = |command_line: &str, settings: Settings| {
            let env = EnvRecord {
                command_line: command_line.into(),
                settings: Some(settings),
                ..test_env()
            };
            env.write(dir.path()).unwrap();
            (error_of(dir.path()), env)
        };
        // A validation's own record stands beside validation.md, never a results CSV.
        let (error, _) = read_with("metaprep validate ref.csv --out v", validate.clone());
        assert!(
            error.contains("beside an env.json of `metaprep validate`, which writes no"),
            "{error}"
        );
        // Its steps runs carry validate's command line and record steps settings: read,
        // and held to step rows as every steps run is.
        let steps = Settings::Steps(validation.steps.clone());
        let (error, env) = read_with("metaprep validate ref.csv --out v", steps);
        assert!(error.contains("which writes only `step` rows"), "{error}");
        write_step_run(dir.path());
        assert_eq!(RunDir::open(dir.path()).unwrap().env, env);
        write_run(dir.path());
        // A dump writes no CSV: one beside its record is another run's, refused by name.
        let (error, _) = read_with("metaprep check --dump d --cpu-only", check);
        assert!(
            error.contains("beside an env.json of `metaprep check`, which writes no"),
            "{error}"
        );
    }
}
