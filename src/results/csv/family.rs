//! A cell's family as its key and tables name it: a step row's drafter, and its what-if host
//! scale after the family (` host x2`). Rows keep the scale in their own column; the old-row
//! path reads a CSV from before that column, whose step rows have the scale in the family.

use super::row::Row;
use super::KIND_STEP;
use crate::axes::Drafter;
use std::borrow::Cow;

/// The `family` column of DSpark's step rows: the draft and verify metadata a step
/// prepares (every step row before `--drafter`). [`Drafter::step_family`] names each.
pub const STEP_FAMILY: &str = "dspark+dsa_target_verify";
/// How a cell's name shows a what-if host scale after its family:
/// `dspark+dsa_target_verify host x2`. Rows keep the scale in their own `host_scale` column;
/// a CSV of a metaprep before it has the scale only in the family (the old-row path).
pub(super) const HOST_SCALE_MARK: &str = " host x";

/// A cell's family as its key and every table name it: `family`, with ` host x<scale>` after
/// it for a what-if host scale other than 1.
pub fn cell_family(family: &str, host_scale: Option<f64>) -> String {
    named_family(family, host_scale).into_owned()
}

/// [`cell_family`], borrowing `family` where there is no scale to name: what a
/// [`CellKey`](super::CellKey) compares and hashes without a copy.
pub(super) fn named_family(family: &str, host_scale: Option<f64>) -> Cow<'_, str> {
    match host_scale {
        Some(scale) if scale != 1.0 => Cow::Owned(format!("{family}{HOST_SCALE_MARK}{scale}")),
        _ => Cow::Borrowed(family),
    }
}

/// The `host_scale` a row records for the what-if factor `scale`: none at 1.
pub fn host_scale_column(scale: f64) -> Option<f64> {
    (scale != 1.0).then_some(scale)
}

/// The cell family of `drafter`'s step rows run at host scale `scale` ([`cell_family`]).
pub fn step_family(drafter: Drafter, scale: f64) -> String {
    cell_family(drafter.step_family(), host_scale_column(scale))
}

/// True when a step row's family names a drafter other than DSpark's (at any host scale):
/// titles name such a family even where it is the run's only one (DSpark's, the step every
/// run had before `--drafter`, they may leave unnamed).
pub fn names_another_drafter(family: &str) -> bool {
    drafter_of(family).is_some_and(|d| d != Drafter::Dspark)
}

/// The drafter a step row's family names, whatever its host scale; `None` for a family no
/// step row has.
pub fn drafter_of(family: &str) -> Option<Drafter> {
    family
        .split(HOST_SCALE_MARK)
        .next()
        .and_then(Drafter::of_step_family)
}

/// The old-row path: a step row of a metaprep before the `host_scale` column names its scale
/// in its family (`dspark+dsa_target_verify host x2`); it moves into the column. A row with
/// both is no row metaprep wrote.
pub(super) fn old_scaled_family(row: &mut Row) -> std::result::Result<(), String> {
    if row.kind != KIND_STEP {
        return Ok(());
    }
    let Some((family, scale)) = row.family.split_once(HOST_SCALE_MARK) else {
        return Ok(());
    };
    // A scale that does not read leaves the family as it is, which no step row has.
    let Some(scale) = scale
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
    else {
        return Ok(());
    };
    if row.host_scale.is_some() {
        return Err(format!(
            "columns `family`, `host_scale`: `{}` names a host scale beside the column's",
            row.family
        ));
    }
    row.family = family.to_string();
    row.host_scale = host_scale_column(scale);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::fixtures::error_of;
    use crate::results::csv::test_rows::row;
    use crate::results::csv::*;

    use crate::axes::Drafter;

    #[test]
    fn step_rows_name_their_drafter_and_host_scale_in_old_and_new_forms() {
        let dir = tempfile::tempdir().unwrap();

        // A step row's family names the step's pair, or a what-if host scale of it.
        let mut step = row("step", STEP_FAMILY, "graph", 1, "itl_us", 100.0);
        step.block_size = 3;
        let mut scaled = step.clone();
        scaled.family = step_family(Drafter::Dspark, 2.0);
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &[step.clone(), scaled.clone()]).unwrap();
        assert_eq!(read_rows(&path).unwrap().len(), 2);
        // EAGLE's step rows name their drafter in the family, and read back as its.
        let mut eagle = step.clone();
        eagle.family = step_family(Drafter::Eagle, 1.0);
        let mut eagle_scaled = step.clone();
        eagle_scaled.family = step_family(Drafter::Eagle, 0.5);
        write_rows(&path, &[step.clone(), eagle.clone(), eagle_scaled.clone()]).unwrap();
        let back = read_rows(&path).unwrap();
        let drafters: Vec<Option<Drafter>> = back.iter().map(|r| drafter_of(&r.family)).collect();
        assert_eq!(
            drafters,
            [
                Some(Drafter::Dspark),
                Some(Drafter::Eagle),
                Some(Drafter::Eagle)
            ]
        );
        assert_eq!(back[2].host_scale, Some(0.5));
        // Rows of this metaprep keep the scale in its column and the family plain.
        let new_form = Row {
            host_scale: Some(0.5),
            ..eagle.clone()
        };
        write_rows(&path, &[step.clone(), eagle.clone(), new_form.clone()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(HOST_SCALE_MARK), "{text}");
        assert_eq!(read_rows(&path).unwrap()[2], new_form);
        assert_eq!(
            new_form.cell_key(),
            back[2].cell_key(),
            "old and new forms: one cell"
        );
        assert_eq!(back[2].family, Drafter::Eagle.step_family());
        assert_eq!(back[2].cell_family(), eagle_scaled.family);
        assert_eq!(
            completed_cells(&back).len(),
            3,
            "the two drafters' rows are different cells"
        );
        for bad in [
            "dspark",
            "dspark+dsa_target_verify host xfast",
            "eagle",
            "eagle+dsa_target_verify",
        ] {
            scaled.family = bad.into();
            write_rows(&path, &[step.clone(), scaled.clone()]).unwrap();
            let error = error_of(&path);
            assert!(
                error.contains("line 3") && error.contains("is not a step row's family"),
                "{error}"
            );
        }
    }
}
