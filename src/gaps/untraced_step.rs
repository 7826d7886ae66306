//! The loop's own untraced step, where the user gives it (`--untraced-step-us`): the profiler
//! stretches host time and leaves GPU time nearly as it is, so the factor on the traced host
//! time that makes the steps' mean as long as the untraced step is what the profiler cost
//! them, whatever its events were.

use super::Step;
use crate::report::format::fmt_num;
use anyhow::{bail, Result};

/// The factor on `steps`' host-paced time (each step less its GPU work) that makes their mean
/// `untraced_step_us`. Fails where that step is no longer than their GPU work alone: it is then
/// not this loop's step as traced (another batch size, model or loop).
pub(super) fn host_scale(steps: &[Step], untraced_step_us: f64) -> Result<f64> {
    let n = steps.len() as f64;
    let busy = steps.iter().map(|s| s.gpu_busy_us).sum::<f64>() / n;
    let host_paced = steps
        .iter()
        .map(|s| s.bare_us() - s.gpu_busy_us)
        .sum::<f64>()
        / n;
    if untraced_step_us <= busy {
        bail!(
            "--untraced-step-us {untraced_step_us} is no longer than the traced steps' GPU work alone ({} µs a \
             step), so it is not this loop's step: give the step (ITL) the same loop, batch size \
             and model measured without the profiler",
            fmt_num(busy)
        );
    }
    if host_paced <= 0.0 {
        bail!(
            "the traced steps never leave the GPU idle, so no host time can be scaled to meet \
             --untraced-step-us {untraced_step_us}: leave it out"
        );
    }
    Ok((untraced_step_us - busy) / host_paced)
}
