//! One side of a comparison as `compare` keeps it: each row cut to what a verdict needs, its
//! names shared by every row that holds them, so 200,000 rows a side fit in a few tens of MB.

use crate::report::change::Interval;
use crate::results::csv::{read_rows, Row, KIND_PREP};
use crate::results::env::{EnvRecord, ENV_FILE};
use crate::results::run_dir::open_results;
use anyhow::{bail, Result};
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// A name shared by the rows that hold it (a family, an arm, a metric, ...).
pub type Name = Rc<str>;

/// The names both sides' rows hold, each kept once.
#[derive(Debug, Default)]
pub struct Names(HashSet<Name>);

impl Names {
    pub fn get(&mut self, text: &str) -> Name {
        if let Some(name) = self.0.get(text) {
            return name.clone();
        }
        let name: Name = text.into();
        self.0.insert(name.clone());
        name
    }
}

/// One row of a results CSV, as far as `compare` reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub kind: Name,
    pub family: Name,
    pub arm: Name,
    pub layout: Name,
    pub metric: Name,
    pub unit: Name,
    pub batch_size: u32,
    pub block_size: u32,
    pub median: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
    /// Rounds it was measured in; 0 for a row measured in one stretch.
    pub rounds: u32,
    pub emulated: bool,
    pub throttled: bool,
}

impl Entry {
    pub fn of(row: &Row, names: &mut Names) -> Self {
        Entry {
            kind: names.get(&row.kind),
            family: names.get(&row.cell_family()),
            arm: names.get(&row.arm),
            layout: names.get(&row.layout),
            metric: names.get(&row.metric),
            unit: names.get(&row.unit),
            batch_size: row.batch_size,
            block_size: row.block_size,
            median: row.median,
            ci_lo: row.ci_lo,
            ci_hi: row.ci_hi,
            rounds: row.rounds,
            emulated: row.emulated,
            throttled: row.throttled,
        }
    }

    /// Whether its interval misses the drift between rounds: a prep row of a sweep by a
    /// metaprep before rounds.
    pub fn without_rounds(&self) -> bool {
        &*self.kind == KIND_PREP && self.rounds == 0
    }

    /// `kind family/arm bs=B block=K layout`, as a results row's cell key prints.
    pub fn cell(&self) -> Cell<'_> {
        Cell(self)
    }
}

/// An entry's cell, printed as [`crate::results::csv::CellKey`] prints.
pub struct Cell<'e>(&'e Entry);

impl fmt::Display for Cell<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        write!(
            f,
            "{} {}/{} bs={} block={} {}",
            e.kind, e.family, e.arm, e.batch_size, e.block_size, e.layout
        )
    }
}

impl Interval for Entry {
    fn median(&self) -> f64 {
        self.median
    }

    fn bounds(&self) -> (f64, f64) {
        (self.ci_lo, self.ci_hi)
    }
}

/// Which side of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Base,
    New,
}

impl Which {
    pub fn as_str(self) -> &'static str {
        match self {
            Which::Base => "BASE",
            Which::New => "NEW",
        }
    }
}

/// One side as loaded.
#[derive(Debug)]
pub struct Side {
    pub which: Which,
    pub path: PathBuf,
    /// `None` for a bare CSV file without an `env.json` beside it.
    pub env: Option<EnvRecord>,
    pub entries: Vec<Entry>,
}

impl Side {
    /// A side of `rows` held in memory.
    #[cfg(test)]
    pub fn of_rows(which: Which, rows: &[Row], names: &mut Names) -> Self {
        Side {
            which,
            path: PathBuf::new(),
            env: None,
            entries: rows.iter().map(|r| Entry::of(r, names)).collect(),
        }
    }

    /// Reads a run directory or a results CSV (with the `env.json` beside it, if any). The
    /// rows are cut to entries as soon as they are read: only one side's full rows are ever
    /// held at once.
    pub fn load(which: Which, path: &Path, names: &mut Names) -> Result<Self> {
        let (rows, env) = if path.is_file() {
            let rows = read_rows(path)?;
            let dir = path.parent().unwrap_or(Path::new("."));
            let env = if dir.join(ENV_FILE).is_file() {
                Some(EnvRecord::read(dir)?)
            } else {
                None
            };
            (rows, env)
        } else {
            let (rows, env) = open_results(path)?;
            (rows, Some(env))
        };
        let entries: Vec<Entry> = rows.iter().map(|r| Entry::of(r, names)).collect();
        if entries.iter().any(Entry::without_rounds) {
            bail!(
                "{} ({}) is a sweep measured without rounds, by a metaprep before them: its \
                 intervals miss the drift between runs, so no verdict on it would hold; run the \
                 sweep again with this metaprep",
                which.as_str(),
                path.display()
            );
        }
        Ok(Side {
            which,
            path: path.to_path_buf(),
            env,
            entries,
        })
    }

    /// The side's arms, sorted, comma separated.
    pub fn arms(&self) -> String {
        let arms: std::collections::BTreeSet<&str> = self.entries.iter().map(|e| &*e.arm).collect();
        arms.into_iter().collect::<Vec<_>>().join(", ")
    }
}
