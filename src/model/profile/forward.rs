//! The stand-in forward: a fixed busy-wait or a profile's bytes and collectives.

use super::{collective_us, CollectivePlan, Link, Profile};
use crate::axes::Layout;
use anyhow::{ensure, Result};

/// What the lead's step loop launches for one forward: a kernel streaming `stream_bytes`
/// through device memory, then a busy-wait of `spin_us` standing in for the collectives
/// (or for the whole forward under `--forward-us`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForwardSpec {
    pub stream_bytes: u64,
    pub spin_us: f64,
}

/// How the stand-in forward gets its duration.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ForwardModel {
    /// Bytes from a model profile and a link bandwidth.
    Profile(Profile),
    /// `--forward-us`: a fixed busy-wait, the same for every layout and batch; for isolating
    /// the prep's cost from any forward model.
    FixedUs(f64),
}

impl ForwardModel {
    /// The collectives real ranks issue per forward (see [`Profile::collective_plan`]);
    /// none under `--forward-us`, whose busy-wait stands for the whole forward.
    pub fn collective_plan(
        &self,
        layout: Layout,
        rank_batch: u32,
        tokens: u32,
    ) -> Option<CollectivePlan> {
        match self {
            ForwardModel::Profile(p) => p.collective_plan(layout, rank_batch, tokens),
            ForwardModel::FixedUs(_) => None,
        }
    }
}

impl ForwardModel {
    /// The stand-in kernels for one forward on one GPU of `layout`; see
    /// [`Profile::forward_bytes`] for the arguments.
    pub fn spec(
        &self,
        layout: Layout,
        rank_batch: u32,
        context_len: u32,
        tokens_per_request: u32,
        link: Link,
    ) -> Result<ForwardSpec> {
        match self {
            ForwardModel::FixedUs(us) => {
                ensure!(
                    us.is_finite() && *us >= 0.0,
                    "--forward-us {us} is not a duration: give microseconds ≥ 0, such as 20"
                );
                Ok(ForwardSpec {
                    stream_bytes: 0,
                    spin_us: *us,
                })
            }
            ForwardModel::Profile(profile) => {
                let bytes =
                    profile.forward_bytes(layout, rank_batch, context_len, tokens_per_request);
                let per_layer =
                    profile.collective_bytes_per_layer(layout, rank_batch, tokens_per_request);
                ensure!(
                    link.latency_us.is_finite() && link.latency_us >= 0.0,
                    "collective latency {} us is not a duration",
                    link.latency_us
                );
                let collectives = f64::from(profile.collectives_per_layer(layout));
                let spin_us = (collective_us(per_layer, link.gb_s)?
                    + collectives * link.latency_us)
                    * f64::from(profile.layers);
                Ok(ForwardSpec {
                    stream_bytes: bytes.total,
                    spin_us,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::collective_latency_us;
    use super::super::fixtures::{dense, large, link};
    use super::*;

    #[test]
    fn collective_latency_adds_per_collective_and_layer() {
        let p = large();
        let layout = Layout::Tp(4);
        let without = ForwardModel::Profile(p.clone())
            .spec(layout, 1, 1000, 4, link(450.0, 0.0))
            .unwrap();
        let with = ForwardModel::Profile(p.clone())
            .spec(layout, 1, 1000, 4, link(450.0, 5.0))
            .unwrap();
        // Two all-reduces per layer, 61 layers, 5 µs each.
        assert!((with.spin_us - without.spin_us - 2.0 * 61.0 * 5.0).abs() < 1e-9);
        assert_eq!(p.collectives_per_layer(Layout::Tp(1)), 0);
        assert_eq!(p.collectives_per_layer(Layout::Dep(4)), 2);
        assert_eq!(dense().collectives_per_layer(Layout::Dep(4)), 0);
        assert_eq!(collective_latency_us(Layout::Tp(1)), 0.0);
        assert!(collective_latency_us(Layout::Tp(8)) > collective_latency_us(Layout::Tp(2)));
        assert!(ForwardModel::Profile(p)
            .spec(layout, 1, 1, 1, link(450.0, f64::NAN))
            .is_err());
    }

    #[test]
    fn forward_spec_from_profile_and_fixed() {
        let p = large();
        let layout = Layout::Tp(2);
        let spec = ForwardModel::Profile(p.clone())
            .spec(layout, 1, 1000, 4, link(100.0, 0.0))
            .unwrap();
        assert_eq!(spec.stream_bytes, p.forward_bytes(layout, 1, 1000, 4).total);
        let per_layer_us = (2 * 4 * 7168 * 2) as f64 / 100e3;
        assert!((spec.spin_us - 61.0 * per_layer_us).abs() < 1e-9);

        let fixed = ForwardModel::FixedUs(20.0)
            .spec(layout, 64, 1000, 4, link(100.0, 0.0))
            .unwrap();
        assert_eq!(
            fixed,
            ForwardSpec {
                stream_bytes: 0,
                spin_us: 20.0
            }
        );
        assert!(ForwardModel::FixedUs(-1.0)
            .spec(layout, 1, 1, 1, link(1.0, 0.0))
            .is_err());
        assert!(ForwardModel::FixedUs(f64::NAN)
            .spec(layout, 1, 1, 1, link(1.0, 0.0))
            .is_err());
        assert!(ForwardModel::Profile(p.clone())
            .spec(layout, 1, 1, 1, link(0.0, 0.0))
            .is_err());
    }
}
