//! Device memory as the layers above see it: a buffer of `T`s on the run's one stream, its
//! address for a kernel's argument block, and the few stream-ordered writes the preps and the
//! lengths make into it. Rust never holds a reference into device memory: it comes back only
//! through copies ([`super::Gpu::download`]), so what a kernel stores there is no host
//! memory hazard.

use anyhow::{ensure, Context, Result};
use cudarc::driver::{result, CudaSlice, DevicePtr, DeviceRepr};

/// `len` elements of `T` in device memory, freed when dropped (cudarc's `CudaSlice`).
pub struct DeviceBuffer<T>(CudaSlice<T>);

impl<T> DeviceBuffer<T> {
    pub(crate) fn new(slice: CudaSlice<T>) -> Self {
        Self(slice)
    }

    pub(crate) fn slice(&self) -> &CudaSlice<T> {
        &self.0
    }

    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The device address of element 0, for a kernel's argument block. (Event tracking is
    /// off on every context, so taking it records nothing.)
    pub fn addr(&self) -> u64 {
        self.0.device_ptr(self.0.stream()).0
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Copies `host` into the first `host.len()` elements, ordered on the stream. `host` is
    /// pageable memory (page-locked memory never leaves `gpu/` as a slice), so the driver has
    /// staged it before this returns and the caller may change it at once, as
    /// `torch.tensor(list, device=...)` may.
    pub fn write_from_host(&self, host: &[T]) -> Result<()> {
        ensure!(
            host.len() <= self.len(),
            "copying {} elements into a device buffer of {}",
            host.len(),
            self.len()
        );
        // SAFETY: the buffer holds at least host.len() elements (checked above) and is alive
        // for the call; a pageable source is staged before cuMemcpyHtoDAsync returns.
        unsafe { result::memcpy_htod_async(self.addr(), host, self.0.stream().cu_stream()) }
            .context("copying host data to the device")
    }

    /// Copies all of `src` over this buffer, ordered on the stream.
    pub fn copy_from(&self, src: &DeviceBuffer<T>) -> Result<()> {
        ensure!(
            src.len() == self.len(),
            "copying a device buffer of {} elements over one of {}",
            src.len(),
            self.len()
        );
        let bytes = self.len() * std::mem::size_of::<T>();
        // SAFETY: both buffers are alive and hold `bytes` bytes (equal lengths, checked).
        unsafe {
            result::memcpy_dtod_async(self.addr(), src.addr(), bytes, self.0.stream().cu_stream())
        }
        .context("copying device memory")
    }

    /// Sets every byte to 0, ordered on the stream.
    pub fn zero(&self) -> Result<()> {
        let bytes = self.len() * std::mem::size_of::<T>();
        // SAFETY: the buffer is alive and holds `bytes` bytes.
        unsafe { result::memset_d8_async(self.addr(), 0, bytes, self.0.stream().cu_stream()) }
            .context("zeroing device memory")
    }
}
