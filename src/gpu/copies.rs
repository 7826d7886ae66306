//! The floor's copies, each one driver call (two for the read): a few ints down to pageable
//! memory and a wait, the same ints up from page-locked or pageable memory, and a
//! device-to-device copy. The buffers are made once and owned together, their addresses
//! taken once, so the timed loop issues nothing but the copy.

use super::{DeviceBuffer, Gpu};
use anyhow::{Context, Result};
use cudarc::driver::{result, CudaStream, PinnedHostSlice};
use std::sync::Arc;

pub struct SmallCopies {
    stream: Arc<CudaStream>,
    /// `ints` ints on the device, the small copies' other end (kept for its address).
    _device_ints: DeviceBuffer<i32>,
    device_ints_addr: u64,
    /// Owns the page-locked buffer `pinned_ptr` points into (write-combined, cudarc's
    /// default: the host only writes it, once).
    _pinned: PinnedHostSlice<i32>,
    /// Taken once: `PinnedHostSlice::as_slice` waits on an event each call, which would turn
    /// an asynchronous copy into a synchronous one.
    pinned_ptr: *const i32,
    pageable: Vec<i32>,
    copy_src: DeviceBuffer<u8>,
    _copy_dst: DeviceBuffer<u8>,
    copy_addrs: (u64, u64),
}

impl SmallCopies {
    /// `ints` ints (each `value` on the host) for the small copies and `d2d_bytes` for the
    /// device-to-device one, on `gpu`'s stream.
    pub fn new(gpu: &Gpu, ints: usize, value: i32, d2d_bytes: usize) -> Result<Self> {
        let ints = ints.max(1);
        // SAFETY: freshly allocated pinned memory, filled below before any use.
        let mut pinned = unsafe { gpu.ctx.alloc_pinned::<i32>(ints) }
            .context("allocating pinned host memory")?;
        let pinned_slice = pinned.as_mut_slice().context("mapping pinned memory")?;
        pinned_slice.fill(value);
        let pinned_ptr = pinned_slice.as_ptr();
        let device_ints = gpu.alloc(ints)?;
        let copy_src = gpu.alloc(d2d_bytes)?;
        let copy_dst = gpu.alloc(d2d_bytes)?;
        Ok(Self {
            stream: gpu.stream.clone(),
            device_ints_addr: device_ints.addr(),
            _device_ints: device_ints,
            _pinned: pinned,
            pinned_ptr,
            pageable: vec![value; ints],
            copy_addrs: (copy_src.addr(), copy_dst.addr()),
            copy_src,
            _copy_dst: copy_dst,
        })
    }

    /// One int down into pageable memory, then a stream synchronise: the bare `.item()`.
    pub fn read_int(&mut self) -> Result<()> {
        // SAFETY: the pageable slot holds one int and the device buffer at least one; a
        // pageable copy has landed once the synchronise returns, before `pageable` is used
        // again.
        let stream = self.stream.cu_stream();
        unsafe {
            result::memcpy_dtoh_async(&mut self.pageable[..1], self.device_ints_addr, stream)?;
            result::stream::synchronize(stream)?;
        }
        Ok(())
    }

    /// The ints up from page-locked memory, asynchronously.
    pub fn write_pinned(&self) -> Result<()> {
        // SAFETY: `pinned_ptr` points at `pageable.len()` ints `_pinned` owns, which nothing
        // writes after `new`; the device buffer holds as many.
        unsafe {
            let pinned = std::slice::from_raw_parts(self.pinned_ptr, self.pageable.len());
            result::memcpy_htod_async(self.device_ints_addr, pinned, self.stream.cu_stream())?;
        }
        Ok(())
    }

    /// The ints up from pageable memory (staged by the driver before the call returns).
    pub fn write_pageable(&self) -> Result<()> {
        // SAFETY: the device buffer holds `pageable.len()` ints; a pageable source is staged
        // before the call returns.
        let stream = self.stream.cu_stream();
        unsafe { result::memcpy_htod_async(self.device_ints_addr, &self.pageable[..], stream)? };
        Ok(())
    }

    /// The device-to-device copy, of the whole source buffer.
    pub fn copy_device(&self) -> Result<()> {
        let (src, dst) = self.copy_addrs;
        // SAFETY: both buffers are owned by `self` and hold `copy_src.len()` bytes.
        let (bytes, stream) = (self.copy_src.len(), self.stream.cu_stream());
        unsafe { result::memcpy_dtod_async(dst, src, bytes, stream)? };
        Ok(())
    }
}
