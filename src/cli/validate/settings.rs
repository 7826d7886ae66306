//! What `validate` records in `<out>/env.json` (`calibrate::validate::write_env` writes it with
//! the machine fields of the reference's first cell's steps run): what it was asked to do, as
//! data (`Settings::Validate`: the reference and its cells, the fit file, the bars, the steps
//! settings its cells run with). A validation refused before its first cell ran writes none.

use super::super::steps::steps_config;
use super::{cell_args, ValidateArgs};
use crate::axes::Arm;
use crate::calibrate::validate::{Cell, FitCell, Fits, Reference, ReferenceRow};
use crate::results::settings::{FitSettings, Settings, ValidateCell, ValidateSettings};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

/// The settings of the validation `args` asks for, the steps config of every cell of the
/// reference and of the fit cells checked whole before any GPU work (steps says why), so a
/// later cell's block that the accept length or the drafter cannot serve is refused before the
/// first cell runs; a refusal is its exit code (the error printed).
pub(super) fn checked_settings(
    args: &ValidateArgs,
    reference: &Reference,
    fit: Option<&Fits>,
    out: &Path,
) -> Result<Settings, ExitCode> {
    let cells = reference.cells.iter().map(|(c, r)| (c, r));
    let fit_cells = fit
        .into_iter()
        .flat_map(|f| std::iter::once(&f.factors).chain(&f.post_wait))
        .map(|f| (&f.cell, &f.rows));
    let mut steps = None;
    for (cell, rows) in cells.chain(fit_cells) {
        let arms: Vec<Arm> = rows.keys().copied().collect();
        let dir = out.join("steps").join("check");
        let config = steps_config(&cell_args(&args.steps, *cell, &arms, None, &dir))?;
        steps.get_or_insert_with(|| config.steps_settings());
    }
    Ok(Settings::Validate(ValidateSettings {
        reference: args.reference.display().to_string(),
        cells: reference.cells.iter().map(|(c, r)| cell(c, r)).collect(),
        fit: fit.map(|f| fit_settings(&f.factors)),
        fit_post_wait: fit.and_then(|f| f.post_wait.as_ref()).map(fit_settings),
        step_pct: args.step_pct,
        diff_pct: args.diff_pct,
        steps: steps.expect("a reference holds a cell: Reference::read refuses one of none"),
    }))
}

fn fit_settings(f: &FitCell) -> FitSettings {
    FitSettings {
        file: f.file.display().to_string(),
        cell: cell(&f.cell, &f.rows),
    }
}

fn cell(cell: &Cell, rows: &BTreeMap<Arm, ReferenceRow>) -> ValidateCell {
    ValidateCell {
        forward_us: cell.forward_us,
        batch_size: cell.batch_size,
        block: cell.block,
        arms: rows.keys().map(ToString::to_string).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::validate::{raw_run_dir, write_env};
    use crate::cli::common::parse_args;
    use crate::results::env::EnvRecord;

    #[test]
    fn a_validation_records_its_settings_with_the_first_cells_machine() {
        let dir = tempfile::tempdir().unwrap();
        let reference = dir.path().join("ref.csv");
        std::fs::write(
            &reference,
            "forward_us,batch_size,block,arm,step_us,host_speed_us\n\
             1000,1,5,eager-sync,2700,8\n1000,1,5,graph,2080,8\n100,8,3,graph,500,8\n",
        )
        .unwrap();
        let out = dir.path().join("val");
        let given = [reference.as_os_str(), "--out".as_ref(), out.as_os_str()];
        let flags = ["--step-pct", "5", "--seed", "7"].map(std::ffi::OsStr::new);
        let argv: Vec<_> = given
            .iter()
            .chain(&flags)
            .map(|a| a.to_os_string())
            .collect();
        let args: ValidateArgs = parse_args("validate", &argv).unwrap();
        let parsed = Reference::read(&reference).unwrap();
        let settings = checked_settings(&args, &parsed, None, &out).unwrap();
        let Settings::Validate(v) = &settings else {
            panic!("not a validation's settings: {settings:?}");
        };
        assert_eq!(v.reference, reference.display().to_string());
        let cells: Vec<_> = (v.cells.iter())
            .map(|c| (c.forward_us, c.batch_size, c.block, c.arms.join(",")))
            .collect();
        assert_eq!(
            cells,
            [
                (1000.0, 1, 5, "eager-sync,graph".to_string()),
                (100.0, 8, 3, "graph".to_string())
            ]
        );
        assert_eq!((v.step_pct, v.diff_pct, &v.fit), (5.0, 15.0, &None));
        // The steps flags are those of the first cell's run at the profile's own speed.
        assert_eq!(
            (v.steps.seed, v.steps.target.as_str()),
            (7, "fixed 1000 us")
        );
        assert_eq!(v.steps.layouts, ["tp1"]);
        assert_eq!(settings.host_profile(), Some("pytorch"));

        // Nothing ran: no env.json to take the machine from.
        let cell_dir = raw_run_dir(&out, parsed.cells[0].0);
        assert!(write_env(&out, &cell_dir, settings.clone()).is_err());
        std::fs::create_dir_all(&cell_dir).unwrap();
        let machine = EnvRecord {
            gpu_name: "NVIDIA H200".into(),
            notes: vec!["step model: target fixed 1000 us".into()],
            settings: Some(Settings::Steps(v.steps.clone())),
            ..crate::results::env::test_env()
        };
        machine.write(&cell_dir).unwrap();
        let path = write_env(&out, &cell_dir, settings.clone()).unwrap();
        assert_eq!(path, out.join("env.json"));
        let env = EnvRecord::read(&out).unwrap();
        assert_eq!(env.settings.as_ref(), Some(&settings));
        assert_eq!(
            (env.gpu_name.as_str(), env.date.as_str()),
            ("NVIDIA H200", machine.date.as_str())
        );
        // The cell's own note kept, and where the machine fields came from after it.
        assert_eq!(env.notes[0], "step model: target fixed 1000 us");
        assert!(
            env.notes[1].contains("steps/f1000-bs1-b5-raw/env.json"),
            "{:?}",
            env.notes
        );
        assert_eq!(env.host_profile(), Some("pytorch"));
        assert!(env.setting_differences(&env).is_empty());
    }
}
