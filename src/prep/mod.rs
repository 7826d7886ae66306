//! The prep plan: the metadata families' shapes, inputs and lengths, their CPU reference,
//! the bytes they move, and the arms' launches of one plan (`plan/`).

pub mod accept;
pub mod bytes;
pub mod family;
pub mod inputs;
pub mod lengths;
pub mod plan;
pub mod reference;

pub use family::{OutputSpec, Shape, MAX_BATCH};
