//! The tidy results CSV: one row per (cell, metric).
//!
//! A *cell* is one point of a sweep: (kind, family, arm, batch size, block size, layout, and a
//! step's what-if host scale), its [`CellKey`].
//! Every metric of a cell is its own row so that charts, summaries and `compare` can filter
//! without knowing which metrics exist.
//!
//! One concern a file: `row` (the [`Row`], its columns and its [`CellKey`]), `family` (a
//! cell's family with its what-if host scale, and the old rows that named the scale in the
//! family), `write` (atomic writes), `read` (a results file into checked rows), `validity` (what
//! no row metaprep wrote can be) and `records` (the CSV reading every table here shares: a
//! cut or short line, a wrong header or a bad field named by line and column).

mod family;
mod read;
mod records;
mod row;
mod validity;
mod write;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
pub(crate) mod test_rows;

pub use family::{cell_family, drafter_of, host_scale_column, names_another_drafter, STEP_FAMILY};
pub(crate) use read::parse_row;
pub use read::{read_rows, rows_for_resume};
pub(crate) use records::{
    check_header, describe_field_error, read_records, read_table, RecordLines,
};
pub(crate) use row::OPTIONAL_COLUMNS;
pub use row::{completed_cells, CellKey, Row, CELL_KEY_COLUMNS, COLUMNS};
pub(crate) use validity::check_cell_key;
pub use write::{write_records, write_rows};

/// Which harness produced a row.
pub const KIND_PREP: &str = "prep"; // one arm's metadata prep, timed per step
pub const KIND_FLOOR: &str = "floor"; // empty launch, empty graph, bare D2H/H2D round trips
pub const KIND_STEP: &str = "step"; // the whole decode-step model

/// The paired ratio of an arm's step time over eager-sync's, formed inside each round.
pub const STEP_RATIO_VS_EAGER_SYNC: &str = "step_ratio_vs_eager_sync";
