//! CUDA events as the layers above use them: recorded on the run's stream, waited on, and
//! read against each other for device time. Shared (`Clone`), so a prep plan can hold the
//! event a caller handed it for the length of a call without a raw handle.

use anyhow::Result;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};
use std::sync::Arc;

#[derive(Clone)]
pub struct Event(Arc<CudaEvent>);

impl Event {
    pub(crate) fn new(ctx: &Arc<CudaContext>, flags: Option<sys::CUevent_flags>) -> Result<Self> {
        Ok(Self(Arc::new(ctx.new_event(flags)?)))
    }

    /// Records the event on `stream`: it completes once the work queued before it has.
    pub fn record(&self, stream: &CudaStream) -> Result<()> {
        Ok(self.0.record(stream)?)
    }

    /// Waits until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.0.synchronize()?)
    }

    /// Device time from this event to `end`, in ms (both recorded, `end` completed; timing
    /// events only, [`super::Gpu::timing_events`]).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        Ok(self.0.elapsed_ms(&end.0)?)
    }
}
