//! A profile moved: every host duration scaled (the what-if `--host-scale` axis), the
//! framework costs moved to another measured host speed, or one arm's host factor applied.

use super::{HostProfile, Item, Sourced};
use crate::axes::Arm;
use anyhow::{bail, ensure, Result};

/// The slowest host speed taken as measured, µs per op (`scripts/metaprep_host.py
/// host_speed()` gives about 1 µs on a server core): beyond it, a number is a typo or a unit
/// slip.
pub const MAX_HOST_SPEED_US: f64 = 1e4;
/// The least: a hundredth of a µs per op, ten times under the fastest framework dispatch
/// (a C++ op call costs ~0.1 µs).
pub const MIN_HOST_SPEED_US: f64 = 0.01;

impl HostProfile {
    /// Every host duration multiplied by `scale` (the what-if axis); reads, launches and
    /// op counts stay as measured.
    pub fn scaled(&self, scale: f64) -> Result<HostProfile> {
        ensure!(
            scale.is_finite() && scale > 0.0 && scale <= 1000.0,
            "--host-scale {scale}: give a factor above 0 and at most 1000, such as 0.5,1,2"
        );
        let mut p = self.clone();
        p.scale_op_costs(scale);
        p.scale_host_segments(scale);
        Ok(p)
    }

    /// Framework ops' host costs (the profile's and each prep arm's own) times `scale`.
    fn scale_op_costs(&mut self, scale: f64) {
        self.op_us.value *= scale;
        if let Some(post_wait) = self.post_wait.as_mut() {
            post_wait.value.scale(scale);
        }
        for prep in self.preps.values_mut() {
            let upload = prep.graph_upload.as_mut();
            for ops in [
                &mut prep.eager_sync,
                &mut prep.eager_device,
                &mut prep.graph,
            ]
            .into_iter()
            .chain(upload)
            {
                ops.op_us = ops.op_us.map(|v| v * scale);
            }
        }
    }

    /// The other framework calls' host costs (every read path's, graph launches, uploads)
    /// times `scale`.
    fn scale_call_costs(&mut self, scale: f64) {
        let other_reads = [self.pinned_read_us.as_mut(), self.mapped_read_us.as_mut()];
        for cost in [
            &mut self.read_us,
            &mut self.graph_launch_us,
            &mut self.upload_us,
        ]
        .into_iter()
        .chain(other_reads.into_iter().flatten())
        {
            cost.value *= scale;
        }
    }

    /// Every host segment's plain µs (`us` and `us_by_batch`, in both programs) times
    /// `scale`.
    fn scale_host_segments(&mut self, scale: f64) {
        fn scale_hosts(items: &mut [Item], scale: f64) {
            for item in items {
                match item {
                    Item::Host {
                        us, us_by_batch, ..
                    } => {
                        *us *= scale;
                        for v in us_by_batch.iter_mut().flat_map(|m| m.values_mut()) {
                            *v *= scale;
                        }
                    }
                    Item::DraftPasses { items } => scale_hosts(items, scale),
                    _ => {}
                }
            }
        }
        scale_hosts(&mut self.program, scale);
        if let Some(eagle) = self.eagle_program.as_mut() {
            scale_hosts(eagle, scale);
        }
    }

    /// The profile at another measured host speed (`speed_us`, µs per probe op as the
    /// profile's `host_speed_us` counts it): every framework cost (ops, reads, graph
    /// launches, uploads) scales by `speed_us` / the profile's own host speed. Host segments
    /// given as plain µs (a Python stretch, a busy-wait) and GPU times stay as measured.
    pub fn at_host_speed(&self, speed_us: f64) -> Result<HostProfile> {
        let Some(own) = &self.host_speed_us else {
            bail!(
                "host profile `{}` records no host speed (`host_speed_us`), so it cannot be moved \
                 to another one: calibrate it from a trace with its probe file (README: \
                 calibration recipe), or leave out --host-speed-us",
                self.name
            );
        };
        ensure!(
            (MIN_HOST_SPEED_US..=MAX_HOST_SPEED_US).contains(&speed_us),
            "host speed {speed_us} µs per op is outside {MIN_HOST_SPEED_US}-{MAX_HOST_SPEED_US} \
             µs per op, the range of a measured host speed (give µs per op, as \
             scripts/metaprep_host.py host_speed() prints)"
        );
        let ratio = speed_us / own.value;
        let mut p = self.clone();
        p.scale_op_costs(ratio);
        p.scale_call_costs(ratio);
        p.host_speed_us = Some(Sourced {
            value: speed_us,
            source: format!(
                "moved from {} us (its own: {}) by x{ratio:.4}, framework costs only",
                own.value, own.source
            ),
        });
        Ok(p)
    }

    /// The profile before any `validate` fit: no arm factors, and the post-wait table as
    /// `calibrate` wrote it (a fitted scale divided back out), so a fit never starts from an
    /// earlier fit's.
    pub fn without_fits(&self) -> HostProfile {
        let mut p = self.with_post_wait_as_calibrated();
        p.arm_host_factors = None;
        p
    }

    /// The profile with its post-wait table as `calibrate` wrote it (a fitted scale divided
    /// back out), its arm factors kept.
    pub fn with_post_wait_as_calibrated(&self) -> HostProfile {
        let mut p = self.clone();
        if let (Some(scale), Some(table)) = (p.post_wait_scale.take(), p.post_wait.as_mut()) {
            table.value.scale(1.0 / scale.value);
        }
        p
    }

    /// `arm`'s host factor (`arm_host_factors`), if the profile gives it one.
    pub fn arm_host_factor(&self, arm: Arm) -> Option<f64> {
        let factors = self.arm_host_factors.as_ref()?;
        factors.get(arm.name()).map(|f| f.value)
    }

    /// The profile `arm`'s step runs with: every host duration (framework ops, post-wait
    /// extras, reads by every path, graph launches, uploads, host segments) times the arm's
    /// host factor; GPU times and counts as they are. The factors are then in the costs, so
    /// the result lists none (applying it twice is applying it once).
    pub fn for_arm(&self, arm: Arm) -> HostProfile {
        let mut p = self.clone();
        p.arm_host_factors = None;
        if let Some(factor) = self.arm_host_factor(arm) {
            p.scale_op_costs(factor);
            p.scale_call_costs(factor);
            p.scale_host_segments(factor);
        }
        p
    }
}
