//! The commands that put the GPU to work, each on the floors below: `check` (every arm
//! against the CPU reference; `dump` writes cases for the SGLang cross-check), `sweep` (the
//! prep arms in rounds, with the floor), `steps` (the decode-step model per arm and layout),
//! `collectives`, and real multi-GPU worlds (`ranks`, `rank_world`).

pub mod check;
pub mod collectives;
pub mod dump;
pub mod rank_world;
pub mod ranks;
pub mod settings;
pub mod steps;
pub mod sweep;
