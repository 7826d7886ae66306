//! A validation's run: every cell of the reference modelled by `steps` runs (at the
//! profile's own host speed, at each chunk speed, at the cell's median speed), after the fits
//! where asked, then compared and written as validation.csv and validation.md. The runs go
//! through a [`StepsRunner`], so this wing needs no command-line types.

use super::fit_post_wait::fit_in_turns;
use super::fit_profile::{fit_profile, FitCell, FITTED_PROFILE};
use super::{
    cell_host_speed, chunk_run_speeds, compare_cell, csv_text, markdown, passed, Bars, Cell,
    FitNote, Line, ModelCell, ModelStep, Reference, ReferenceRow,
};
use crate::axes::Arm;
use crate::harness::environment::command_line;
use crate::model::host_profile::HostProfile;
use crate::results::atomic::{write_atomic, NewFolder};
use crate::results::env::EnvRecord;
use crate::results::settings::Settings;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One `steps` run of one cell, as validate needs it.
pub trait StepsRunner {
    /// The step_us medians per arm of `cell` run with `arms` on tp1 into `out`, at host speed
    /// `speed` (`None`: the profile's own) and with the host profile file `profile` (`None`:
    /// the one the user gave).
    fn run(
        &self,
        profile: Option<&Path>,
        cell: Cell,
        arms: &[Arm],
        speed: Option<f64>,
        out: &Path,
    ) -> Result<BTreeMap<Arm, ModelStep>>;
}

/// The runner with the host profile the model runs with (`None`: the user's).
#[derive(Clone, Copy)]
pub(super) struct Model<'a> {
    pub(super) runner: &'a dyn StepsRunner,
    pub(super) profile: Option<&'a Path>,
}

/// The fit cells: the arm factors' and, with --fit-post-wait, the post-wait scale's.
pub struct Fits {
    pub factors: FitCell,
    pub post_wait: Option<FitCell>,
}

/// What a validation runs: the reference (and its file's name), the profile, the bars, the
/// fits and the new output folder.
pub struct Validation<'a> {
    pub reference: &'a Reference,
    pub reference_file: &'a Path,
    pub profile: &'a HostProfile,
    pub bars: Bars,
    pub fits: Option<&'a Fits>,
    pub out: &'a Path,
}

/// A cell's steps runs' folder name (`f1000-bs1-b5`), before any `-raw` or `-at` suffix.
fn cell_name(cell: Cell) -> String {
    format!("f{}-bs{}-b{}", cell.forward_us, cell.batch_size, cell.block)
}

/// Where the steps run of `cell` at the profile's own host speed writes, under `out`.
pub fn raw_run_dir(out: &Path, cell: Cell) -> PathBuf {
    out.join("steps").join(format!("{}-raw", cell_name(cell)))
}

/// The model's runs for one cell: at the profile's own host speed ("raw"), at each chunk
/// speed, and at the cell's median host speed. `own_speed`: the profile's.
pub(super) fn model_cell(
    model: Model,
    cell: Cell,
    rows: &BTreeMap<Arm, ReferenceRow>,
    own_speed: Option<f64>,
    out: &Path,
) -> Result<ModelCell> {
    let arms: Vec<Arm> = rows.keys().copied().collect();
    let name = cell_name(cell);
    let run =
        |speed: Option<f64>, dir: &Path| (model.runner).run(model.profile, cell, &arms, speed, dir);
    let raw = run(None, &raw_run_dir(out, cell))?;
    let speed = cell_host_speed(rows).filter(|_| own_speed.is_some());
    // Rows with chunks are predicted chunk by chunk, between runs at the cell's extreme
    // chunk speeds; the run at the cell's median speed is for rows without them.
    let mut by_speed = Vec::new();
    for s in chunk_run_speeds(rows, own_speed) {
        let dir = out.join("steps").join(format!("{name}-at{s:.3}"));
        by_speed.push((s, run(Some(s), &dir)?));
    }
    let all_chunked = own_speed.is_some() && rows.values().all(|r| !r.chunks.is_empty());
    let at_speed = match speed.filter(|_| !all_chunked) {
        Some(s) => run(Some(s), &out.join("steps").join(&name))?,
        None => raw.clone(),
    };
    Ok(ModelCell {
        at_speed,
        raw,
        by_speed,
        host_ratio: speed.zip(own_speed).map(|(s, o)| s / o),
    })
}

/// Runs `v` through `runner`, with `settings` recorded in `<out>/env.json` once the first cell
/// ran; writes validation.csv and validation.md and returns the markdown and whether it
/// passed. A validation that fails (no GPU, a failed fit, a cell that could not run) leaves no
/// folder behind, so the same command can run again.
pub fn run(runner: &dyn StepsRunner, v: &Validation, settings: Settings) -> Result<(String, bool)> {
    let made = NewFolder::create(&v.out.join("steps"))?;
    let result = run_in(runner, v, settings);
    if result.is_err() {
        made.discard();
    }
    result
}

fn run_in(runner: &dyn StepsRunner, v: &Validation, settings: Settings) -> Result<(String, bool)> {
    let mut settings = Some(settings);
    let own_speed = v.profile.host_speed_us.as_ref().map(|s| s.value);
    let user = Model {
        runner,
        profile: None,
    };
    // With --fit, the profile validated is the fitted one.
    let fitted = v.out.join(FITTED_PROFILE);
    let (model, note): (Model, Option<FitNote>) = match v.fits {
        Some(fit) => {
            let base = v.profile.without_fits();
            let (bars, out) = (v.bars, v.out);
            let note = match &fit.post_wait {
                Some(long) => fit_in_turns(user, &base, &fit.factors, long, own_speed, bars, out)?,
                None => fit_profile(user, &base, 1, &fit.factors, own_speed, bars, out)?.1,
            };
            let model = Model {
                runner,
                profile: Some(&fitted),
            };
            (model, Some(note))
        }
        None => (user, None),
    };
    let mut lines: Vec<Line> = Vec::new();
    for (cell, rows) in &v.reference.cells {
        let modelled = model_cell(model, *cell, rows, own_speed, v.out)?;
        // Once the first cell ran: its machine is the validation's.
        if let Some(settings) = settings.take() {
            write_env(v.out, &raw_run_dir(v.out, *cell), settings)?;
        }
        lines.extend(compare_cell(*cell, rows, &modelled, own_speed, v.bars)?);
    }
    let reference_name = v.reference_file.display().to_string();
    write_atomic(&v.out.join("validation.csv"), csv_text(&lines)?.as_bytes())?;
    let md = markdown(
        &reference_name,
        &v.profile.name,
        &lines,
        v.bars,
        note.as_ref(),
    );
    write_atomic(&v.out.join("validation.md"), md.as_bytes())?;
    Ok((md, passed(&lines, note.as_ref())))
}

/// Writes `<out>/env.json` atomically: the machine fields of the env.json in `cell_dir` (the
/// steps run of the reference's first cell), this command line and `settings`.
pub fn write_env(out: &Path, cell_dir: &Path, settings: Settings) -> Result<PathBuf> {
    let cell = EnvRecord::read(cell_dir)?;
    let shown = cell_dir.strip_prefix(out).unwrap_or(cell_dir).display();
    // The cell's notes say why a machine field is empty (NVML unavailable, say): kept.
    let mut notes = cell.notes.clone();
    notes.push(format!(
        "the machine fields are those of {shown}/env.json, the steps run of the reference's \
         first cell; each cell's steps runs record their own under steps/"
    ));
    EnvRecord {
        command_line: command_line(),
        notes,
        settings: Some(settings),
        ..cell
    }
    .write(out)
}
