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
