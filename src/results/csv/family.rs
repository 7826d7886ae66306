//! A cell's family as its key and tables name it: a step row's drafter, and its what-if host
//! scale after the family (` host x2`). Rows keep the scale in their own column.

use crate::axes::Drafter;
use std::borrow::Cow;

/// The `family` column of DSpark's step rows: the draft and verify metadata a step
/// prepares (every step row before `--drafter`). [`Drafter::step_family`] names each.
pub const STEP_FAMILY: &str = "dspark+dsa_target_verify";
/// How a cell's name shows a what-if host scale after its family:
/// `dspark+dsa_target_verify host x2`. Rows keep the scale in their own `host_scale` column.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::fixtures::error_of;
    use crate::results::csv::test_rows::row;
    use crate::results::csv::*;

    use crate::axes::Drafter;

    #[test]
    fn step_rows_name_their_drafter_and_keep_the_host_scale_in_its_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        let mut step = row("step", STEP_FAMILY, "graph", 1, "itl_us", 100.0);
        step.block_size = 3;
        // EAGLE's step rows name their drafter in the family, and read back as its.
        let eagle = Row {
            family: Drafter::Eagle.step_family().into(),
            ..step.clone()
        };
        let eagle_scaled = Row {
            host_scale: host_scale_column(0.5),
            ..eagle.clone()
        };
        write_rows(&path, &[step.clone(), eagle.clone(), eagle_scaled.clone()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(HOST_SCALE_MARK),
            "the family stays plain: {text}"
        );
        let back = read_rows(&path).unwrap();
        assert_eq!(back, [step.clone(), eagle.clone(), eagle_scaled.clone()]);
        let drafters: Vec<Option<Drafter>> = back.iter().map(|r| drafter_of(&r.family)).collect();
        assert_eq!(
            drafters,
            [
                Some(Drafter::Dspark),
                Some(Drafter::Eagle),
                Some(Drafter::Eagle)
            ]
        );
        assert_eq!(back[2].cell_family(), format!("{} host x0.5", eagle.family));
        assert_eq!(
            completed_cells(&back).len(),
            3,
            "the drafters' rows and the scaled one are different cells"
        );
        // A scale in the family (how a metaprep before the column wrote it) is refused by name.
        for bad in [
            "dspark",
            "dspark+dsa_target_verify host x2",
            "eagle",
            "eagle+dsa_target_verify",
        ] {
            let scaled = Row {
                family: bad.into(),
                ..step.clone()
            };
            write_rows(&path, &[step.clone(), scaled]).unwrap();
            let error = error_of(&path);
            assert!(
                error.contains("line 3") && error.contains("is not a step row's family"),
                "{error}"
            );
        }
    }
}
