//! Page-locked host memory from the driver (`cuMemHostAlloc`), freed when dropped: the
//! pinned read's copy target, and the mapped read's buffer, which kernels also address.
//!
//! Not cudarc's `PinnedHostSlice`: that one is write-combined by default (slow for the host
//! to read back, which is all a read does with it) and waits on a blocking-sync event before
//! every host access, which would put a second wait, under another scheduling flag, inside
//! the read being measured.

use super::Gpu;
use anyhow::{Context, Result};
use cudarc::driver::{result, sys, CudaContext};
use std::ffi::c_void;
use std::sync::Arc;

/// `words` 32-bit words of page-locked host memory, zeroed.
pub struct HostMemory {
    ctx: Arc<CudaContext>,
    ptr: *mut u32,
    words: usize,
    /// The address kernels use for it (mapped memory only).
    device_ptr: Option<u64>,
    /// Left allocated on drop: a kernel may still store into it (see [`HostMemory::abandon`]).
    abandoned: bool,
}

impl HostMemory {
    /// Pinned memory: the target of an asynchronous device-to-host copy.
    pub fn pinned(gpu: &Gpu, words: usize) -> Result<Self> {
        Self::alloc(gpu, words, 0)
    }

    /// Pinned memory mapped into the device's address space: kernels store into it over the
    /// bus and the host reads it where it lies, with no copy (`cudaHostAllocMapped`).
    pub fn mapped(gpu: &Gpu, words: usize) -> Result<Self> {
        let mut memory = Self::alloc(gpu, words, sys::CU_MEMHOSTALLOC_DEVICEMAP)?;
        let mut device_ptr: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` came from cuMemHostAlloc with DEVICEMAP in the current context, and
        // the out-parameter is a plain integer.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, memory.ptr.cast(), 0) }
            .result()
            .context("finding the device address of mapped host memory")?;
        memory.device_ptr = Some(device_ptr);
        Ok(memory)
    }

    fn alloc(gpu: &Gpu, words: usize, flags: u32) -> Result<Self> {
        let words = words.max(1);
        gpu.ctx
            .bind_to_thread()
            .context("making the context current")?;
        let bytes = words * std::mem::size_of::<u32>();
        // SAFETY: a plain allocation of `bytes` bytes with the driver's documented flags; the
        // memory is zeroed below before anything reads it.
        let ptr = unsafe { result::malloc_host(bytes, flags) }
            .with_context(|| format!("allocating {bytes} bytes of page-locked host memory"))?
            .cast::<u32>();
        anyhow::ensure!(
            !ptr.is_null() && ptr.is_aligned(),
            "cuMemHostAlloc returned an unusable pointer"
        );
        // SAFETY: `ptr` points at `words` u32s this value owns; nothing else uses them yet.
        unsafe { std::ptr::write_bytes(ptr, 0, words) };
        Ok(Self {
            ctx: gpu.ctx.clone(),
            ptr,
            words,
            device_ptr: None,
            abandoned: false,
        })
    }

    /// The host address, for a copy into it.
    pub(super) fn host_ptr(&self) -> *mut c_void {
        self.ptr.cast()
    }

    /// The device address of word `index` (mapped memory only).
    pub(super) fn device_ptr(&self, index: usize) -> Option<u64> {
        assert!(index < self.words, "word {index} of {}", self.words);
        self.device_ptr.map(|base| base + 4 * index as u64)
    }

    /// Word `index`, read with a volatile load: the GPU may store into this memory at any
    /// time, so the compiler must neither cache nor hoist the read.
    pub fn read(&self, index: usize) -> u32 {
        assert!(index < self.words, "word {index} of {}", self.words);
        // SAFETY: in bounds (checked above), aligned, and alive as long as `self`.
        unsafe { self.ptr.add(index).read_volatile() }
    }

    /// Copies `out.len()` words from word `from` into `out`, once the data is known to have
    /// landed (a pinned copy's event, a mapped store's flag seen with acquire order): nothing
    /// stores into them during the copy, so one bounds check and a plain copy serve.
    pub fn copy_to(&self, from: usize, out: &mut [i32]) {
        assert!(
            from + out.len() <= self.words,
            "words {from}..{} of {}",
            from + out.len(),
            self.words
        );
        // SAFETY: in bounds (checked above), aligned, alive as long as `self`, and disjoint
        // from `out`, which the caller owns; u32 and i32 share a layout.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.cast::<i32>().add(from),
                out.as_mut_ptr(),
                out.len(),
            )
        };
    }

    /// Keeps the memory allocated when this value is dropped: for a buffer a kernel was
    /// queued to store into and never did (a GPU that stopped answering). Freeing it would
    /// let a late store land in freed memory, or wait in the free on that GPU; a few leaked
    /// pages are the lesser harm.
    pub fn abandon(&mut self) {
        self.abandoned = true;
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if self.abandoned {
            return;
        }
        // A failure here cannot be returned; cudarc keeps it for the context's next call.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once, here. Every copy and
        // kernel that stores into it has landed: each read waits for its data before it
        // returns, and a read that gave up abandoned the memory instead.
        self.ctx
            .record_err(unsafe { result::free_host(self.ptr.cast()) });
    }
}
