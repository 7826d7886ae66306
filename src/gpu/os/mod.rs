//! The host operating system's C interfaces metaprep calls, each behind a safe function:
//! CPU affinity (`affinity`), the allocator's and the kernel's view of this process's memory
//! (`memory`), and process lifetime and signals (`process`). They sit here, beside the
//! driver's, so that every `unsafe` of the crate is in `gpu/`, one folder to audit; nothing
//! here touches a GPU.

pub mod affinity;
pub mod memory;
pub mod process;
