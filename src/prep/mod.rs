//! The prep plan: four metadata families, their CPU reference, and the four arms that run
//! one plan (`eager-sync`, `eager-device`, `graph`, `fused`).

pub mod accept;
pub mod bytes;
pub mod family;
pub mod inputs;
pub mod lengths;
pub mod plan;
pub mod reference;

pub use family::{OutputSpec, Shape};
