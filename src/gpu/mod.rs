//! The driver layer. `probe` finds libcuda/NVRTC without panicking, `context` owns the CUDA
//! context and stream, `kernels` compiles `kernels/*.cu` with NVRTC for the device's own
//! architecture, `launch` holds prebuilt kernel launches, `capture` captures graphs and
//! guards host reads against running inside a capture.

pub mod capture;
pub mod context;
pub mod kernels;
pub mod launch;
pub mod nccl;
pub mod probe;
pub mod step_source;

pub use capture::{capture_graph, ensure_not_capturing};
pub use context::{DeviceInfo, Gpu};
pub use kernels::KernelModule;
pub use launch::Launch;
pub use probe::GpuUnavailable;
pub use step_source::StepSource;
