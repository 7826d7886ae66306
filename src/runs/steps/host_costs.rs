//! The host side of a cell's program: the profile's costs as durations (converted once,
//! outside the timed loops, with the harness's own idle read and upload taken off), the
//! busy-waits that stand in for host work, and the framework ops with the kernels they
//! launch. Shared by the step's host items, its preps and accept.

use crate::axes::ReadPath;
use crate::gpu::{Gpu, KernelModule, Launch, StreamHandle};
use crate::model::host_profile::HostProfile;
use crate::model::post_wait::AfterWait;
use crate::runs::rank_world::ReadDelay;
use anyhow::Result;
use std::time::{Duration, Instant};

/// Spins the host until `until` (host work a framework would be doing); returns the clock
/// reading that found it passed, so the timed loop need not read the clock again.
pub(super) fn spin_until(until: Instant) -> Instant {
    loop {
        let now = Instant::now();
        if now >= until {
            return now;
        }
        std::hint::spin_loop();
    }
}

pub(super) fn us(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) * 1e-6)
}

/// The host costs of a cell's program, as durations, converted once outside the timed loops.
pub(super) struct HostCosts {
    pub(super) profile: HostProfile,
    /// One framework op of a host item or of accept.
    pub(super) op: Duration,
    /// One graph replay's launch (forwards, graph arms).
    pub(super) graph_launch: Duration,
    /// What the profile's read costs beyond the harness's own idle read, per read path.
    pub(super) read_top_up: [Duration; ReadPath::ALL.len()],
    /// What the profile's upload costs beyond the harness's own idle upload.
    pub(super) upload_top_up: Duration,
    /// Extra host time after each read on this rank (`--read-skew-us`, jitter).
    pub(super) read_skew: ReadDelay,
    /// What the calls after a wait cost extra (the profile's `post_wait`), and how far the
    /// host program is past its last wait.
    pub(super) after_wait: AfterWait,
}

impl HostCosts {
    /// `profile`'s costs, with the harness's own idle read and upload costs taken off the
    /// profile's (the step loop tops its real read and copy up to them).
    pub(super) fn new(
        profile: HostProfile,
        idle_reads: [Duration; ReadPath::ALL.len()],
        idle_upload: Duration,
        read_skew: ReadDelay,
    ) -> HostCosts {
        HostCosts {
            read_skew,
            after_wait: AfterWait::new(profile.post_wait.as_ref().map(|p| p.value.clone())),
            op: us(profile.op_us.value),
            graph_launch: us(profile.graph_launch_us.value),
            read_top_up: ReadPath::ALL.map(|path| {
                let cost = profile.read_cost(path).map_or(0.0, |c| c.value);
                us(cost).saturating_sub(idle_reads[path.index()])
            }),
            upload_top_up: us(profile.upload_us.value).saturating_sub(idle_upload),
            profile,
        }
    }
}

/// One framework op: launch `kernel` (if any), then let the host be busy until the op's
/// host cost `op`, and what it costs extra so soon after a wait, has passed since it began.
pub(super) fn framework_op(
    kernel: Option<&Launch>,
    stream: StreamHandle<'_>,
    op: Duration,
    after_wait: &mut AfterWait,
) -> Result<()> {
    let start = Instant::now();
    if let Some(kernel) = kernel {
        kernel.issue(stream)?;
    }
    framework_call(start, op, after_wait);
    Ok(())
}

/// A framework call that began at `t0` and costs `cost` on the host: busy until then, plus
/// what it costs extra after a wait.
pub(super) fn framework_call(t0: Instant, cost: Duration, after_wait: &mut AfterWait) {
    let extra = after_wait.call(t0);
    after_wait.ended(spin_until(t0 + cost + extra));
}

/// A kernel a framework op launches: a spin of the profile's `kernel_us`, or an empty kernel.
pub(super) fn framework_kernel(gpu: &Gpu, us: f64) -> Result<Launch> {
    let launch = if us > 0.0 {
        Launch::spin(gpu, us)?
    } else {
        let func = gpu.function(KernelModule::Floor, "empty_kernel")?;
        Launch::new("empty_kernel", func, (1, 1, 1), (1, 1, 1))
    };
    // Loaded and run once here: a module cannot load inside a capture.
    launch.issue(gpu.cu_stream())?;
    gpu.sync()?;
    Ok(launch)
}
