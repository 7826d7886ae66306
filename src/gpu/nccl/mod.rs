//! NCCL, loaded at run time from the file [`locate`] finds: [`raw`] holds the entry points,
//! [`comm`] the communicator of one rank (RAII) and the collectives the step model uses.

pub mod comm;
pub mod locate;
pub mod raw;

pub use comm::{Comm, Nccl, NcclId};
