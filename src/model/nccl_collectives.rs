//! Real collectives in place of the forward's busy-wait, for ranks that run one per GPU:
//! the plan's all-reduces (tp) or all-to-alls (dep) issued through NCCL on the rank's stream.

use crate::gpu::nccl::Comm;
use crate::gpu::DeviceBuffer;
use crate::gpu::Gpu;
use crate::model::profile::{CollectiveKind, CollectivePlan};
use anyhow::{Context, Result};

/// Device buffers for the collectives of a cell: the all-reduce works in place on `send`;
/// an all-to-all sends from `send`'s slots into `recv`'s.
pub struct CollectiveBuffers {
    send: DeviceBuffer<u8>,
    recv: DeviceBuffer<u8>,
}

impl CollectiveBuffers {
    /// Buffers large enough for every plan of `plans` on a world of `world` ranks.
    pub fn new(gpu: &Gpu, plans: &[CollectivePlan], world: usize) -> Result<Self> {
        let bytes = plans
            .iter()
            .map(|p| p.payload_bytes as usize * world.max(1))
            .max()
            .unwrap_or(2);
        Ok(Self {
            send: gpu.alloc(bytes)?,
            recv: gpu.alloc(bytes)?,
        })
    }

    /// Issues one forward's collectives of `plan` on `gpu`'s stream.
    pub fn issue(&mut self, comm: &Comm, gpu: &Gpu, plan: &CollectivePlan) -> Result<()> {
        let bytes = plan.payload_bytes as usize;
        for i in 0..plan.count {
            match plan.kind {
                CollectiveKind::AllReduce => {
                    comm.all_reduce_bf16(&mut self.send, bytes, &gpu.stream)
                }
                CollectiveKind::AllToAll => {
                    comm.all_to_all(&self.send, &mut self.recv, bytes, &gpu.stream)
                }
            }
            .with_context(|| format!("collective {} of {} ({:?})", i + 1, plan.count, plan.kind))?;
        }
        Ok(())
    }
}
