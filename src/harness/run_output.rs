//! What every measuring command (`sweep`, `steps`) does around its cells: refuse to
//! overwrite a run unless resuming it, pin the measuring thread, record the environment,
//! sample NVML, keep the telemetry file current, and show progress.

use super::environment::env_for_run;
use super::gpm::UNAVAILABLE_NOTE;
use super::nvml::{Sampler, DEFAULT_PERIOD};
use super::pin::{pin_current_thread, CpuPin, Pinned};
use super::telemetry_file::TelemetryFile;
use crate::axes::layout::Layout;
use crate::gpu::Gpu;
use crate::results::csv::{rows_for_resume, write_rows, CellKey, Row};
use crate::results::env::{EMULATED_NOTE, ENV_FILE};
use crate::results::run_dir::{RESULTS_CSV, ROUNDS_CSV, TELEMETRY_CSV};
use crate::results::settings::Settings;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The results CSV of a run about to start: its path and, on `--resume`, the rows an
/// earlier invocation completed. Checked before any GPU work.
pub fn existing_rows(out: &Path, resume: bool) -> Result<(PathBuf, Vec<Row>)> {
    let csv_path = out.join(RESULTS_CSV);
    if csv_path.exists() && !resume {
        bail!(
            "{} already exists: pass --resume to continue that run, or choose another --out",
            csv_path.display()
        );
    }
    let rows = if resume {
        remove_temporaries(out)?;
        rows_for_resume(&csv_path)?
    } else {
        Vec::new()
    };
    Ok((csv_path, rows))
}

/// The files of a run a write may be cut inside (`write_atomic` writes each to
/// `.<name>.tmp<pid>` first).
const RUN_FILES: [&str; 4] = [RESULTS_CSV, TELEMETRY_CSV, ROUNDS_CSV, ENV_FILE];

/// Removes the temporary files an invocation killed inside a write left in `out`: the files
/// themselves are whole (a temporary is renamed over them only once written), and nothing
/// else would ever remove them.
fn remove_temporaries(out: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_temporary = RUN_FILES.iter().any(|f| {
            name.strip_prefix(&format!(".{f}.tmp"))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        });
        if is_temporary {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("removing the leftover {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// One line per layout that needs more GPUs than the `ranks` the run had, saying how it
/// was emulated (on a host of `host_gpus`).
pub fn emulation_notes(layouts: &[Layout], ranks: u32, host_gpus: u32, how: &str) -> Vec<String> {
    layouts
        .iter()
        .filter(|l| l.emulated(ranks))
        .map(|l| {
            format!(
                "{EMULATED_NOTE}{l} needs {} GPUs, ran as {ranks} rank(s) on a host with {host_gpus}; {how}",
                l.gpus()
            )
        })
        .collect()
}

/// A measuring run being opened, in the order its files need: its folder checked before any
/// GPU work ([`Opening::new`]), env.json's notes gathered, its measuring thread pinned
/// ([`Opening::pin`]) before the NVML sampler starts, so the sampler keeps off the measuring
/// CPU, and then its [`Recorder`] started ([`Opening::start`]).
pub struct Opening {
    out: PathBuf,
    resume: bool,
    csv_path: PathBuf,
    /// env.json's notes so far, in the order it writes them.
    pub notes: Vec<String>,
    /// env.json's callouts: what summary.md leads with.
    pub callouts: Vec<String>,
    pinned: Option<Pinned>,
}

impl Opening {
    /// Opens a run in `out`, refused as [`existing_rows`] says; on `resume`, with the rows an
    /// earlier invocation completed.
    pub fn new(out: &Path, resume: bool) -> Result<(Self, Vec<Row>)> {
        let (csv_path, rows) = existing_rows(out, resume)?;
        let opening = Self {
            out: out.to_path_buf(),
            resume,
            csv_path,
            notes: Vec::new(),
            callouts: Vec::new(),
            pinned: None,
        };
        Ok((opening, rows))
    }

    /// Pins the calling (measuring) thread as `cpu` says, until the run's recorder is
    /// finished or dropped, and notes where it runs.
    pub fn pin(&mut self, cpu: CpuPin) -> Result<()> {
        let pinned = pin_current_thread(cpu)?;
        self.notes.push(pinned.note());
        self.pinned = Some(pinned);
        Ok(())
    }

    /// Writes `env.json` (with the notes, each also printed, and `settings`) and starts NVML
    /// sampling; without NVML one warning is printed and the run goes on with empty telemetry
    /// columns.
    pub fn start(self, gpu: &Gpu, settings: Settings) -> Result<Recorder> {
        let Self {
            out,
            resume,
            csv_path,
            notes,
            callouts,
            pinned,
        } = self;
        // A callout repeats what a note says (the stand-in plan is the memory note's lead):
        // the terminal gets the notes, summary.md the callouts on top.
        for note in &notes {
            eprintln!("metaprep: {note}");
        }
        let mut env = env_for_run(gpu, &out, resume, notes, settings)?;
        env.callouts = callouts;
        env.write(&out)?;
        // The GPM note comes from NVML, not from the caller: say it once here too.
        for note in env.notes.iter().filter(|n| n.starts_with(UNAVAILABLE_NOTE)) {
            eprintln!("metaprep: {note}");
        }
        let sampler = match Sampler::start(&gpu.info.pci_bus_id, DEFAULT_PERIOD) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("metaprep: warning: NVML unavailable ({e}); clock, power and throttle columns stay empty");
                None
            }
        };
        Ok(Recorder {
            csv_path,
            sampler,
            telemetry: TelemetryFile::open(&out, resume)?,
            _pinned: pinned,
        })
    }
}

/// The recording side of a run in progress.
pub struct Recorder {
    pub csv_path: PathBuf,
    pub sampler: Option<Sampler>,
    telemetry: TelemetryFile,
    /// Where the measuring thread is pinned; dropped last, with the recorder, which unpins it.
    _pinned: Option<Pinned>,
}

impl Recorder {
    /// Tags NVML samples with the cell now running.
    pub fn set_cell(&self, label: &str) {
        if let Some(s) = &self.sampler {
            s.set_cell(label);
        }
    }

    pub fn cell_telemetry(&self, label: &str) -> Option<super::nvml::CellTelemetry> {
        self.sampler.as_ref().and_then(|s| s.cell_summary(label))
    }

    /// Rewrites the CSV and the telemetry file (both atomically) after a group of cells.
    pub fn save(&self, rows: &[Row]) -> Result<()> {
        write_rows(&self.csv_path, rows)?;
        self.telemetry.write_from(self.sampler.as_ref())
    }

    /// Stops sampling, writes the final telemetry and unpins the measuring thread.
    pub fn finish(self) -> Result<()> {
        match self.sampler {
            Some(s) => self.telemetry.write(s.stop()),
            None => Ok(()),
        }
    }
}

/// A progress bar over `count` `units` (cells, or a sweep's cell visits over its rounds)
/// with an ETA (hidden when stderr is not a terminal).
pub fn progress(count: usize, units: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(count as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{prefix}}{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {units}, ETA {{eta}} {{msg}}"
        ))
        .expect("valid progress template"),
    );
    bar
}

/// The cells of one group of a run: one per arm, at one (family, batch, block, layout).
pub fn arm_cells(
    kind: &str,
    family: &str,
    arms: &[crate::axes::Arm],
    batch_size: u32,
    block: u32,
    layout: Layout,
    gpus: u32,
) -> Vec<super::rows::CellId> {
    arms.iter()
        .map(|arm| super::rows::CellId {
            key: CellKey::new(
                kind,
                family,
                arm.name(),
                (batch_size, block),
                &layout.to_string(),
            ),
            emulated: layout.emulated(gpus),
        })
        .collect()
}

/// Whether a group still needs measuring. A group is measured whole: one that a resumed run
/// finds partly done has its rows removed, so its derived rows (the read cost) come from one
/// invocation; a complete one is skipped and counted as progress.
pub fn needs_measuring(
    cells: &[super::rows::CellId],
    done: &std::collections::HashSet<CellKey>,
    rows: &mut Vec<Row>,
    progress: &indicatif::ProgressBar,
) -> bool {
    if cells.iter().all(|c| done.contains(&c.key)) {
        progress.inc(cells.len() as u64);
        return false;
    }
    rows.retain(|r| !cells.iter().any(|c| c.key == r.cell_key()));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_run_is_refused_unless_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, rows) = existing_rows(dir.path(), false).unwrap();
        assert!(rows.is_empty());
        write_rows(&path, &[]).unwrap();
        let err = existing_rows(dir.path(), false).unwrap_err().to_string();
        assert!(err.contains("--resume"), "{err}");
        assert!(existing_rows(dir.path(), true).unwrap().1.is_empty());
    }

    #[test]
    fn a_resume_removes_the_temporaries_a_killed_write_left() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = existing_rows(dir.path(), false).unwrap();
        write_rows(&path, &[]).unwrap();
        let left = [
            ".metaprep.csv.tmp4242",
            ".telemetry.csv.tmp7",
            ".env.json.tmp1",
        ];
        let kept = [".metaprep.csv.tmpx", "notes.tmp1", ".mine.csv.tmp3"];
        for name in left.iter().chain(&kept) {
            std::fs::write(dir.path().join(name), "cut").unwrap();
        }
        existing_rows(dir.path(), false).unwrap_err();
        assert!(dir.path().join(left[0]).exists(), "only a resume tidies");
        existing_rows(dir.path(), true).unwrap();
        for name in left {
            assert!(!dir.path().join(name).exists(), "{name} left");
        }
        for name in kept {
            assert!(dir.path().join(name).exists(), "{name} removed");
        }
    }

    #[test]
    fn a_partly_done_group_is_measured_again_whole() {
        use crate::axes::Arm;
        let cells = arm_cells(
            "prep",
            "dsa_decode",
            &[Arm::EagerSync, Arm::Graph],
            8,
            5,
            Layout::Dep(2),
            1,
        );
        assert!(cells.iter().all(|c| c.emulated && c.key.layout == "dep2"));
        let done_row = cells[0]
            .summary_row("step_us", "us", &[1.0; 8], "ci", None)
            .unwrap();
        let other = arm_cells(
            "prep",
            "dsa_decode",
            &[Arm::EagerSync],
            1,
            5,
            Layout::Tp(1),
            1,
        )[0]
        .summary_row("step_us", "us", &[1.0; 8], "ci", None)
        .unwrap();
        let mut rows = vec![done_row.clone(), other.clone()];
        let progress = indicatif::ProgressBar::hidden();
        let done = crate::results::csv::completed_cells(&rows);
        assert!(needs_measuring(&cells, &done, &mut rows, &progress));
        assert_eq!(
            rows,
            vec![other.clone()],
            "the group's old rows go, others stay"
        );
        let second = cells[1]
            .summary_row("step_us", "us", &[1.0; 8], "ci", None)
            .unwrap();
        let mut rows = vec![done_row, second, other];
        let done = crate::results::csv::completed_cells(&rows);
        assert!(!needs_measuring(&cells, &done, &mut rows, &progress));
        assert_eq!(
            (rows.len(), progress.position()),
            (3, 2),
            "a complete group is skipped"
        );
    }

    #[test]
    fn only_layouts_beyond_the_host_are_noted() {
        let notes = emulation_notes(
            &[Layout::Tp(1), Layout::Tp(2), Layout::Dep(4)],
            2,
            2,
            "one rank ran",
        );
        assert_eq!(
            notes,
            vec![
                "emulated: dep4 needs 4 GPUs, ran as 2 rank(s) on a host with 2; one rank ran"
                    .to_string()
            ]
        );
        let alone = emulation_notes(&[Layout::Tp(1), Layout::Tp(2)], 1, 2, "x");
        assert_eq!(
            alone.len(),
            1,
            "tp2 in one process is emulated on a 2-GPU host"
        );
    }
}
