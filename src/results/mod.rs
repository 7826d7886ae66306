//! The results schema and its files, the ground floor every command stands on: the tidy CSV
//! and its rows, the environment record, NVML telemetry, the run directory read back whole,
//! safetensors dumps, atomic writes and gzipped run files. Nothing here needs a GPU.

pub mod atomic;
pub mod compressed;
pub mod csv;
pub mod env;
pub mod pacing;
pub mod rank_rows;
pub mod run_dir;
pub mod safetensors;
pub mod settings;
pub mod telemetry;

/// Input the user must fix, found once a command is under way (a `--resume` whose resolved
/// settings differ from the run's, known only once the GPU is open): it exits 2 like a bad
/// flag, not 1 like a failure while running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}
