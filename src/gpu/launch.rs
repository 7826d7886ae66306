//! A kernel launch prepared once and issued many times: function, geometry and argument
//! bytes. Issuing goes straight to `cuLaunchKernel` so the harness adds as little as
//! possible to what it times.
//!
//! Issuing is a safe call. What a kernel can reach is what its arguments address: outside
//! `gpu/` those are addresses of device buffers
//! ([`DeviceBuffer::addr`](super::DeviceBuffer::addr)), which Rust never borrows (their
//! contents come back only through copies into plain integers and floats), and plain values;
//! page-locked and mapped host memory keep their addresses inside `gpu/` (`pinned_memory`,
//! `read_path`). A stale address or a wrong grid therefore corrupts device memory or faults
//! the context, an error from the next driver call, and wrong numbers the CPU-reference
//! checks catch; not host memory. What no Rust type sees is whether the arguments mirror the
//! kernel's signature in `kernels/*.cu`: that is the builder's job (a `#[repr(C)]` block
//! beside each `.cu` struct), checked by every GPU test against the CPU reference.

use super::context::StreamHandle;
use super::{Gpu, KernelModule};
use anyhow::{bail, Context, Result};
use cudarc::driver::{sys, CudaFunction};
use std::ffi::c_void;

pub struct Launch {
    name: String,
    func: CudaFunction,
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    /// Each argument's bytes, in 8-byte-aligned heap storage that never moves...
    args: Vec<Box<[u64]>>,
    /// ...so the parameter array cuLaunchKernel takes is built once.
    params: Vec<*mut c_void>,
}

impl Launch {
    pub fn new(
        name: impl Into<String>,
        func: CudaFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
    ) -> Self {
        Self {
            name: name.into(),
            func,
            grid,
            block,
            args: Vec::new(),
            params: Vec::new(),
        }
    }

    /// A kernel that keeps the GPU busy for `us` microseconds (one block, `%globaltimer`):
    /// the stand-in forward, and the work the floor's `d2h-int-busy` read queues behind.
    pub fn spin(gpu: &Gpu, us: f64) -> Result<Self> {
        if !(us.is_finite() && us > 0.0) {
            bail!("a spin kernel needs a positive duration in µs, got {us}");
        }
        let func = gpu.function(KernelModule::Forward, "spin_ns")?;
        Ok(Self::new("spin_ns", func, (1, 1, 1), (1, 1, 1)).arg((us * 1e3).round() as u64))
    }

    /// Queues `us` µs of GPU work (a spin) on `gpu`'s stream and returns at once: for tests
    /// and probes that need the GPU busy when they issue what comes next.
    pub fn keep_gpu_busy(gpu: &Gpu, us: f64) -> Result<()> {
        Self::spin(gpu, us)?.issue(gpu.cu_stream())
    }

    /// Appends an argument: a plain value or a `#[repr(C)]` struct of device pointers.
    pub fn arg<T: Copy>(mut self, value: T) -> Self {
        let words = std::mem::size_of::<T>().div_ceil(8).max(1);
        let mut slot = vec![0u64; words].into_boxed_slice();
        self.params.push(slot.as_mut_ptr() as *mut c_void);
        self.args.push(slot);
        let index = self.args.len() - 1;
        self.set_arg(index, value);
        self
    }

    /// Overwrites argument `index` (same type as when it was added).
    pub fn set_arg<T: Copy>(&mut self, index: usize, value: T) {
        let slot = &mut self.args[index];
        assert!(
            std::mem::size_of::<T>() <= slot.len() * 8,
            "argument {index} changed size"
        );
        // SAFETY: the slot holds at least size_of::<T>() bytes and u64 alignment covers T's.
        unsafe { std::ptr::write(slot.as_mut_ptr() as *mut T, value) };
    }

    /// Issues the launch on `stream` (see the module docs for why this is safe to call).
    pub fn issue(&self, stream: StreamHandle<'_>) -> Result<()> {
        let (g, b) = (self.grid, self.block);
        // cuLaunchKernel reads the parameter array and never writes it.
        let params = self.params.as_ptr() as *mut *mut c_void;
        // SAFETY: the function is loaded in this context, the stream handle is borrowed from
        // the `Gpu` that owns the stream, and `params` holds one pointer per argument into
        // storage of at least the argument's size that lives as long as `self`. What the
        // kernel does with the arguments is memory of the device (module docs).
        unsafe {
            sys::cuLaunchKernel(
                self.func.cu_function(),
                g.0,
                g.1,
                g.2,
                b.0,
                b.1,
                b.2,
                0,
                stream.raw(),
                params,
                std::ptr::null_mut(),
            )
        }
        .result()
        .with_context(|| {
            format!(
                "launching kernel {} grid {:?} block {:?}",
                self.name, self.grid, self.block
            )
        })
    }
}
