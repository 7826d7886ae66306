//! A profile moved: every host duration scaled (the what-if `--host-scale` axis), or the
//! framework costs moved to another measured host speed.

use super::{HostProfile, Item, Sourced};
use anyhow::{bail, ensure, Result};

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
        scale_hosts(&mut p.program, scale);
        if let Some(eagle) = p.eagle_program.as_mut() {
            scale_hosts(eagle, scale);
        }
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
            speed_us.is_finite() && speed_us > 0.0 && speed_us <= 1e4,
            "host speed {speed_us} µs per op is not a measured host speed (give µs per \
             op, as scripts/metaprep_host.py host_speed() prints)"
        );
        let ratio = speed_us / own.value;
        let mut p = self.clone();
        p.scale_op_costs(ratio);
        let other_reads = [p.pinned_read_us.as_mut(), p.mapped_read_us.as_mut()];
        for cost in [&mut p.read_us, &mut p.graph_launch_us, &mut p.upload_us]
            .into_iter()
            .chain(other_reads.into_iter().flatten())
        {
            cost.value *= ratio;
        }
        p.host_speed_us = Some(Sourced {
            value: speed_us,
            source: format!(
                "moved from {} us (its own: {}) by x{ratio:.4}, framework costs only",
                own.value, own.source
            ),
        });
        Ok(p)
    }
}
