//! The committed lengths on the device and the accept step that advances them: one state
//! shared by every prep plan of a step (the draft and verify metadata read the same
//! `seq_lens`, as in a serving engine).

use super::accept::AcceptModel;
use crate::gpu::{DeviceBuffer, Gpu, KernelModule, Launch};
use anyhow::{Context, Result};

pub struct DeviceLengths<'g> {
    gpu: &'g Gpu,
    pub accept_model: AcceptModel,
    live_bs: usize,
    seq_lens: DeviceBuffer<i32>,
    initial: DeviceBuffer<i32>,
    /// Held for the accept kernel, which writes each request's accepted count into it.
    _accepted: DeviceBuffer<i32>,
    step_counter: DeviceBuffer<u32>,
    accept: Launch,
}

impl<'g> DeviceLengths<'g> {
    /// `seq_lens` holds the padded batch (padding rows `PAD_SEQ_LEN`); the first `live_bs`
    /// are requests, the only rows `accept` advances.
    pub fn new(
        gpu: &'g Gpu,
        seq_lens: &[i32],
        live_bs: usize,
        accept_model: AcceptModel,
    ) -> Result<Self> {
        let initial = gpu.upload(seq_lens)?;
        let lengths = gpu.upload(seq_lens)?;
        let accepted = gpu.alloc::<i32>(seq_lens.len())?;
        let step_counter = gpu.alloc::<u32>(seq_lens.len())?;
        let accept = Launch::new(
            "accept",
            gpu.function(KernelModule::Accept, "accept")?,
            ((live_bs as u32).div_ceil(256), 1, 1),
            (256, 1, 1),
        )
        .arg(lengths.addr())
        .arg(accepted.addr())
        .arg(step_counter.addr())
        .arg(live_bs as i32)
        .arg(accept_model.block as i32)
        .arg(accept_model.threshold)
        .arg(accept_model.seed)
        .arg(accept_model.max_len);
        Ok(Self {
            gpu,
            accept_model,
            live_bs,
            seq_lens: lengths,
            initial,
            _accepted: accepted,
            step_counter,
            accept,
        })
    }

    pub fn live_bs(&self) -> usize {
        self.live_bs
    }

    /// Device address of `seq_lens`, for the prep kernels' argument blocks.
    pub fn seq_lens_ptr(&self) -> u64 {
        self.seq_lens.addr()
    }

    /// The end of a step: `seq_lens[i] += accepted[i]` on the device.
    pub fn issue_accept(&self) -> Result<()> {
        self.accept.issue(self.gpu.cu_stream())
    }

    /// Puts `seq_lens` and the accept counters back to their initial state.
    pub fn reset(&self) -> Result<()> {
        self.seq_lens
            .copy_from(&self.initial)
            .context("resetting seq_lens")?;
        self.step_counter
            .zero()
            .context("resetting the accept counters")
    }

    pub fn download_seq_lens(&self) -> Result<Vec<i32>> {
        self.gpu.download("seq_lens", &self.seq_lens)
    }
}
