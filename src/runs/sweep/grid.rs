//! The sweep's grid: every (family, layout, batch size, block size) group in a fixed order,
//! its arms' cells, and the groups a `--resume` still has to measure.

use super::state::Group;
use super::{GroupSpec, SweepConfig};
use crate::harness::run_output::{arm_cells, needs_measuring};
use crate::results::csv::{CellKey, Row, KIND_PREP};
use crate::runs::sweep::rounds::GroupRounds;
use indicatif::ProgressBar;
use std::collections::HashSet;

/// The grid's groups still to measure, in grid order; complete ones a resumed run holds are
/// skipped (and counted as progress), partly complete ones have their rows removed.
pub(super) fn grid_groups(
    config: &SweepConfig,
    gpus: u32,
    done: &HashSet<CellKey>,
    kept: &mut Vec<Row>,
    progress: &ProgressBar,
) -> Vec<Group> {
    grid(config, gpus)
        .into_iter()
        .filter(|spec| needs_measuring(&spec.cells, done, kept, progress))
        .map(|spec| Group {
            rounds: GroupRounds::new(spec.family, &config.arms),
            spec,
            rows: Vec::new(),
        })
        .collect()
}

/// Every group of the grid, in grid order: layout, batch size, block size, family.
pub fn grid(config: &SweepConfig, gpus: u32) -> Vec<GroupSpec> {
    let mut specs = Vec::new();
    for &layout in &config.layouts {
        for &batch_size in &config.batch_sizes {
            for &block in &config.block_sizes {
                for &family in &config.families {
                    specs.push(GroupSpec {
                        grid_index: specs.len(),
                        family,
                        layout,
                        batch_size,
                        block,
                        cells: arm_cells(
                            KIND_PREP,
                            family.name(),
                            &config.arms,
                            batch_size,
                            block,
                            layout,
                            gpus,
                        ),
                    });
                }
            }
        }
    }
    specs
}
