//! GPU stand-ins for a model forward: a fixed-duration spin ([`Launch::spin`]), or a kernel
//! that streams the bytes one GPU's forward reads.

use crate::gpu::{DeviceBuffer, Gpu, KernelModule, Launch};
use anyhow::Result;

/// A buffer larger than L2 that the streaming kernel reads, and the sink it writes.
pub struct StreamSource {
    buf: DeviceBuffer<u8>,
    sink: DeviceBuffer<u32>,
}

impl StreamSource {
    /// A buffer of at least `bytes` and at least 4x the L2, so every pass reads HBM.
    pub fn new(gpu: &Gpu, bytes: usize) -> Result<Self> {
        let bytes = bytes.max(4 * gpu.info.l2_bytes as usize).div_ceil(16) * 16;
        Ok(Self {
            buf: gpu.alloc(bytes)?,
            sink: gpu.alloc(1)?,
        })
    }

    /// A launch that reads `bytes`, passing over the buffer as many times as that takes.
    pub fn launch(&self, gpu: &Gpu, bytes: u64) -> Result<Launch> {
        let words = bytes.div_ceil(16).max(1);
        let func = gpu.function(KernelModule::Forward, "stream_bytes")?;
        let blocks = (gpu.info.sm_count * 4).max(1);
        Ok(
            Launch::new("stream_bytes", func, (blocks, 1, 1), (512, 1, 1))
                .arg(self.buf.addr())
                .arg(self.buf.len() as i64 / 16)
                .arg(words as i64)
                .arg(self.sink.addr()),
        )
    }
}
