//! The one thing every timed loop issues: a step of work on the GPU's stream. Here, below
//! the preps and the harness, so a prep plan can be a source without knowing who times it.

use crate::gpu::{Event, Gpu};
use anyhow::Result;
use std::time::Duration;

/// Something that issues one step of work on the GPU's stream: a prep arm, or a floor item
/// run through the same harness to measure the harness itself.
pub trait StepSource {
    fn issue_step(&mut self) -> Result<()>;
    /// Issues one step with `start` recorded on the stream right before its GPU work begins
    /// (after any host read): the start of the step's device span.
    fn issue_step_marked(&mut self, gpu: &Gpu, start: &Event) -> Result<()> {
        start.record(&gpu.stream)?;
        self.issue_step()
    }

    /// Host time spent blocked in a host read since the last call.
    fn take_blocked(&mut self) -> Duration {
        Duration::ZERO
    }
}
