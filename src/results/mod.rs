//! The results schema and its files, the ground floor every command stands on: the tidy CSV
//! and its rows, the environment record, NVML telemetry, the run directory read back whole,
//! safetensors dumps, atomic writes, gzipped run files and the config files a parent hands
//! its workers. Nothing here needs a GPU.

pub mod atomic;
pub mod compressed;
pub mod config_file;
pub mod csv;
pub mod env;
pub mod pacing;
pub mod rank_rows;
pub mod run_dir;
pub mod safetensors;
pub mod settings;
pub mod telemetry;
pub mod writable;
