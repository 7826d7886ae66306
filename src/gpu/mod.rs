//! The driver layer, and the only place that imports cudarc or holds `unsafe`: everything
//! above uses the safe types here. `probe` finds libcuda/NVRTC without panicking, `context`
//! owns the CUDA context and stream, `buffer` device memory, `event` CUDA events, `image`
//! decides between a cubin for the device's own architecture and PTX, `nvrtc` compiles to
//! either, `kernels` holds `kernels/*.cu`, `launch` holds prebuilt kernel launches (and says
//! why issuing one is safe), `copies` the floor's small copies, `nvtx` names ranges for Nsight
//! Systems, `capture` captures graphs and guards host reads against running inside a capture,
//! `pinned_memory` owns page-locked host memory and `read_path` the three ways device ints
//! reach the host (pageable, pinned, mapped), `cupti` loads CUPTI and collects its activity
//! records, `nccl` a rank's communicator, `nvml` the one raw NVML call, `python_site` finds
//! the Python site-packages where the NVIDIA wheels put NVRTC, CUPTI and NCCL,
//! `library_search` finds a library file there (or in the toolkit) and loads it for cudarc,
//! `nvrtc_library` does so for NVRTC. `os` wraps the host OS's C calls (CPU affinity,
//! memory counters, process signals): not the GPU's, but kept here so all `unsafe` is in one
//! folder.

pub mod buffer;
pub mod capture;
pub mod context;
pub mod copies;
pub mod cupti;
pub mod event;
pub mod image;
pub mod kernels;
pub mod launch;
pub mod library_search;
pub mod nccl;
pub mod nvml;
pub mod nvrtc;
pub mod nvrtc_library;
pub mod nvtx;
pub mod os;
pub mod pinned_memory;
pub mod probe;
pub mod python_site;
pub mod read_path;
pub mod step_source;
pub mod sync_mode;

pub use buffer::DeviceBuffer;
pub use capture::{capture_graph, ensure_not_capturing, Graph};
pub use context::{DeviceInfo, Gpu, GpuChoice, StreamHandle};
pub use copies::SmallCopies;
pub use event::Event;
pub use image::{ImageChoice, KernelImage};
pub use kernels::KernelModule;
pub use launch::Launch;
pub use probe::GpuUnavailable;
pub use read_path::HostReader;
pub use step_source::StepSource;
pub use sync_mode::SyncMode;
