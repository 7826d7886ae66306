//! Pairing the rows of BASE and NEW: one pass over each side through a hash index, then one
//! sort of what matched into table order, so the work grows with the rows (n log n for the
//! sort), never with their square.

use super::side::{Entry, Side};
use crate::report::format::{arm_rank, floor_rank, kind_rank, layout_rank};
use crate::results::csv::{KIND_FLOOR, STEP_RATIO_VS_EAGER_SYNC};
use anyhow::{bail, Result};
use std::collections::HashMap;

/// The key a row is matched on; its field order is the table order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key<'a> {
    kind_rank: u8,
    kind: &'a str,
    family: &'a str,
    layout_rank: u8,
    layout: &'a str,
    batch_size: u32,
    block_size: u32,
    arm_rank: u8,
    arm: &'a str,
    metric: &'a str,
}

impl<'a> Key<'a> {
    /// `entry`'s key; with `match_arm` false the arm is left out (two arms compared).
    fn of(entry: &'a Entry, match_arm: bool) -> Self {
        let arm = if match_arm { &*entry.arm } else { "" };
        // Floors sort in the floor's own order: launches, then copies, then the rest.
        let arm_rank = if &*entry.kind == KIND_FLOOR {
            floor_rank(arm)
        } else {
            arm_rank(arm)
        };
        Key {
            kind_rank: kind_rank(&entry.kind),
            kind: &entry.kind,
            family: &entry.family,
            layout_rank: layout_rank(&entry.layout),
            layout: &entry.layout,
            batch_size: entry.batch_size,
            block_size: entry.block_size,
            arm_rank,
            arm,
            metric: &entry.metric,
        }
    }
}

/// BASE's index and NEW's of a matched row.
pub type Pair = (usize, usize);

/// What pairing found, every list in table order.
#[derive(Debug, Default)]
pub struct Pairing {
    /// Rows of cells (not floors) both sides hold.
    pub cells: Vec<Pair>,
    /// Floor rows both sides hold.
    pub floors: Vec<Pair>,
    /// BASE's rows NEW lacks, and NEW's rows BASE lacks (indices into each side's entries).
    pub only_in_base: Vec<usize>,
    pub only_in_new: Vec<usize>,
}

/// Which arms are compared: the same on both sides, or `base` against `new`.
pub type Arms<'a> = Option<(&'a str, &'a str)>;

/// Pairs `base`'s rows with `new`'s on (kind, family, layout, batch size, block size, arm,
/// metric). With `arms`, only those arms are taken of each side's cells and matched with each
/// other; floors match item with item whichever arms are compared. Each arm is read against
/// its own floor, so floor multiples and ratios to eager-sync do not compare across arms and
/// are left out there. Fails when a side holds a row twice.
pub fn pair(base: &Side, new: &Side, arms: Arms) -> Result<Pairing> {
    let across_arms = arms.is_some_and(|(b, n)| b != n);
    let base_index = index(base, arms.map(|(b, _)| b), across_arms)?;
    let new_index = index(new, arms.map(|(_, n)| n), across_arms)?;
    let mut matched: Vec<(Key, Pair)> = Vec::new();
    let mut only_in_base: Vec<(&Key, usize)> = Vec::new();
    for (key, &b) in &base_index {
        match new_index.get(key) {
            Some(&n) => matched.push((key.clone(), (b, n))),
            None => only_in_base.push((key, b)),
        }
    }
    let mut only_in_new: Vec<(&Key, usize)> = new_index
        .iter()
        .filter(|(key, _)| !base_index.contains_key(*key))
        .map(|(key, &n)| (key, n))
        .collect();
    matched.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    only_in_base.sort_unstable_by(|a, b| a.0.cmp(b.0));
    only_in_new.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut pairing = Pairing {
        only_in_base: only_in_base.into_iter().map(|(_, i)| i).collect(),
        only_in_new: only_in_new.into_iter().map(|(_, i)| i).collect(),
        ..Pairing::default()
    };
    for (key, p) in matched {
        match key.kind == KIND_FLOOR {
            true => pairing.floors.push(p),
            false => pairing.cells.push(p),
        }
    }
    Ok(pairing)
}

/// A side's rows by key: floors, and of the cells only `arm`'s when given.
fn index<'s>(
    side: &'s Side,
    arm: Option<&str>,
    across_arms: bool,
) -> Result<HashMap<Key<'s>, usize>> {
    let mut index = HashMap::with_capacity(side.entries.len());
    for (i, entry) in side.entries.iter().enumerate() {
        let floor = &*entry.kind == KIND_FLOOR;
        if !floor && arm.is_some_and(|a| &*entry.arm != a) {
            continue;
        }
        let paired_with_its_arm =
            matches!(&*entry.metric, "floor_multiple" | STEP_RATIO_VS_EAGER_SYNC);
        if across_arms && !floor && paired_with_its_arm {
            continue;
        }
        // In arm mode the arm is what differs between the sides, so it is not matched on.
        let key = Key::of(entry, floor || arm.is_none());
        if index.insert(key, i).is_some() {
            bail!(
                "{} holds two rows for {} metric `{}`: the CSV was merged or appended twice; \
                 keep one of them",
                side.which.as_str(),
                entry.cell(),
                entry.metric
            );
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::super::side::{Names, Side, Which};
    use super::*;
    use crate::results::csv::test_rows::row;

    #[test]
    fn rows_pair_in_table_order() {
        let mut names = Names::default();
        let base_rows = vec![
            row("prep", "dsa_decode", "graph", 8, "step_us", 20.0),
            row("prep", "dsa_decode", "eager-sync", 8, "step_us", 40.0),
            row("floor", "floor", "empty-graph", 1, "step_us", 2.0),
            row("floor", "floor", "empty-kernel", 1, "step_us", 2.0),
            row("prep", "dsa_decode", "eager-sync", 1, "step_us", 30.0),
        ];
        let mut new_rows = base_rows.clone();
        new_rows.remove(0);
        new_rows.push(row("prep", "dsa_decode", "fused", 8, "step_us", 10.0));
        let base = Side::of_rows(Which::Base, &base_rows, &mut names);
        let new = Side::of_rows(Which::New, &new_rows, &mut names);
        let p = pair(&base, &new, None).unwrap();
        let arm_bs = |side: &Side, i: usize| {
            let e = &side.entries[i];
            (e.arm.to_string(), e.batch_size)
        };
        let cells: Vec<_> = p.cells.iter().map(|&(b, _)| arm_bs(&base, b)).collect();
        assert_eq!(
            cells,
            [("eager-sync".into(), 1), ("eager-sync".into(), 8)],
            "by batch size, then arm"
        );
        let floors: Vec<_> = p.floors.iter().map(|&(b, _)| arm_bs(&base, b).0).collect();
        assert_eq!(floors, ["empty-kernel", "empty-graph"], "the floor's order");
        assert_eq!(p.only_in_base, [0]);
        assert_eq!(arm_bs(&new, p.only_in_new[0]), ("fused".into(), 8));
    }

    #[test]
    fn a_row_held_twice_is_refused_naming_it() {
        let mut names = Names::default();
        let a = row("prep", "dsa_decode", "graph", 4, "step_us", 20.0);
        let twice = Side::of_rows(Which::Base, &[a.clone(), a.clone()], &mut names);
        let once = Side::of_rows(Which::New, &[a], &mut names);
        let error = pair(&twice, &once, None).unwrap_err().to_string();
        assert!(
            error.contains("BASE holds two rows for prep dsa_decode/graph bs=4"),
            "{error}"
        );
    }
}
