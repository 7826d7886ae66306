//! The collectives a layout's layers run: how many, their bytes and buffers, and their cost.

use super::Profile;
use crate::axes::Layout;
use anyhow::{ensure, Result};

/// TP all-reduces the hidden states after attention and after the MLP in every layer.
const ALL_REDUCES_PER_LAYER: u64 = 2;
/// Under dep, tokens go to their experts' GPUs (dispatch) and come back (combine).
const ALL_TO_ALLS_PER_LAYER: f64 = 2.0;

impl Profile {
    /// Collectives one GPU joins per layer: two all-reduces under tpN (N > 1), a dispatch
    /// and a combine all-to-all under dep over a model with experts, else none.
    pub fn collectives_per_layer(&self, layout: Layout) -> u32 {
        match layout {
            Layout::Tp(_) if layout.tp_degree() > 1 => ALL_REDUCES_PER_LAYER as u32,
            Layout::Dep(_) if self.moe.is_some() && layout.dp_degree() > 1 => {
                ALL_TO_ALLS_PER_LAYER as u32
            }
            _ => 0,
        }
    }

    /// Bytes one GPU sends through collectives in one layer for `tokens` tokens per request:
    /// under tpN two ring all-reduces of the hidden states, each sending 2·(N−1)/N of them;
    /// under depN a dispatch and a combine all-to-all, each sending every token's hidden
    /// state once to each *other* GPU holding one of its experts (on average
    /// (N−1)·(1 − (1 − 1/N)^k) GPUs; bf16 both ways, where DeepEP dispatches FP8: an upper
    /// bound). 0 for tp1 and for dep over a model without experts.
    pub fn collective_bytes_per_layer(&self, layout: Layout, rank_batch: u32, tokens: u32) -> u64 {
        let token_bytes = u64::from(self.hidden_size) * u64::from(self.activation_bytes);
        let rank_tokens = u64::from(rank_batch) * u64::from(tokens);
        match layout {
            Layout::Tp(_) => {
                let ring = CollectiveKind::AllReduce
                    .link_bytes(rank_tokens * token_bytes, layout.tp_degree());
                ALL_REDUCES_PER_LAYER * ring.round() as u64
            }
            Layout::Dep(_) => self.moe.map_or(0, |moe| {
                let n = f64::from(layout.dp_degree());
                let k = f64::from(moe.experts_per_token);
                let remote_gpus = (n - 1.0) * (1.0 - (1.0 - 1.0 / n).powf(k));
                (ALL_TO_ALLS_PER_LAYER * rank_tokens as f64 * remote_gpus * token_bytes as f64)
                    .round() as u64
            }),
        }
    }
}

/// Which collective a layout's layers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveKind {
    /// tpN: a ring all-reduce of the hidden states.
    AllReduce,
    /// depN: expert parallelism's dispatch or combine, a send and a receive to each other GPU.
    AllToAll,
}

impl CollectiveKind {
    /// Bytes each rank puts on its links for one collective over a `bytes` buffer in a
    /// world of `world` ranks: a ring all-reduce sends 2·(N−1)/N of the buffer, an all-to-all
    /// sends a `bytes` share to each of the N−1 others.
    pub fn link_bytes(self, bytes: u64, world: u32) -> f64 {
        let n = f64::from(world);
        match self {
            CollectiveKind::AllReduce => bytes as f64 * 2.0 * (n - 1.0) / n,
            CollectiveKind::AllToAll => bytes as f64 * (n - 1.0),
        }
    }
}

/// The collectives of one forward on one rank, as real ranks issue them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectivePlan {
    pub kind: CollectiveKind,
    /// Collectives per forward (per layer times layers).
    pub count: u32,
    /// The buffer each one works on: the all-reduced hidden states, or what goes to each
    /// other GPU in an all-to-all.
    pub payload_bytes: u64,
}
impl Profile {
    /// The collectives [`Profile::collective_bytes_per_layer`] accounts for, as buffers:
    /// tpN all-reduces `rank_batch · tokens` hidden states (a ring sends 2·(N−1)/N of it);
    /// depN sends each other GPU an equal share of the all-to-all's bytes. `None` where a
    /// layout has no collective (tp1, dep of a model without experts).
    pub fn collective_plan(
        &self,
        layout: Layout,
        rank_batch: u32,
        tokens: u32,
    ) -> Option<CollectivePlan> {
        let per_layer = self.collectives_per_layer(layout);
        if per_layer == 0 {
            return None;
        }
        let count = per_layer * self.layers;
        let bytes = self.collective_bytes_per_layer(layout, rank_batch, tokens);
        let others = u64::from(layout.gpus() - 1).max(1);
        let (kind, payload_bytes) = match layout {
            Layout::Tp(_) => (
                CollectiveKind::AllReduce,
                u64::from(rank_batch)
                    * u64::from(tokens)
                    * u64::from(self.hidden_size)
                    * u64::from(self.activation_bytes),
            ),
            Layout::Dep(_) => (
                CollectiveKind::AllToAll,
                (bytes / u64::from(per_layer)).div_ceil(others),
            ),
        };
        Some(CollectivePlan {
            kind,
            count,
            // Whole bf16 elements, at least one.
            payload_bytes: payload_bytes.div_ceil(2).max(1) * 2,
        })
    }
}

/// How collectives cost time: α + bytes / β per collective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// β, GB/s (10⁹ B/s).
    pub gb_s: f64,
    /// α, µs per collective.
    pub latency_us: f64,
}

/// Where the default α comes from.
pub const COLLECTIVE_LATENCY_SOURCE: &str = "by GPU count, 4.5/4.8/7.8 us at 2/4/8 GPUs: the \
     SGLang/TensorRT-LLM custom all-reduce on H100 at 32 KB (sgl-project/sglang#2904); the dep \
     all-to-alls take the all-reduce's figure at the same GPU count (no public figure for a \
     small all-to-all was found); `metaprep collectives` measures this host's NCCL and prints \
     the --collective-latency-us/--link-gb-s to use instead";

/// The default α of one collective on `layout`'s GPUs (see [`COLLECTIVE_LATENCY_SOURCE`]);
/// 0 on one GPU.
pub fn collective_latency_us(layout: Layout) -> f64 {
    match layout.gpus() {
        1 => 0.0,
        2 => 4.5,
        3 | 4 => 4.8,
        _ => 7.8,
    }
}

/// Time to move `bytes` at `link_gb_s` (1 GB/s = 10⁹ B/s), in µs.
pub fn collective_us(bytes: u64, link_gb_s: f64) -> Result<f64> {
    ensure!(
        link_gb_s.is_finite() && link_gb_s > 0.0,
        "link bandwidth {link_gb_s} GB/s is not usable: give a positive number \
         (NVLink on H100/H200 moves about 450 GB/s each way)"
    );
    Ok(bytes as f64 / (link_gb_s * 1e3))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dense, large};
    use super::*;

    #[test]
    fn link_bytes_follow_the_ring_and_the_all_to_all() {
        assert_eq!(CollectiveKind::AllReduce.link_bytes(1000, 2), 1000.0);
        assert_eq!(CollectiveKind::AllReduce.link_bytes(1000, 4), 1500.0);
        assert_eq!(CollectiveKind::AllReduce.link_bytes(1000, 1), 0.0);
        assert_eq!(CollectiveKind::AllToAll.link_bytes(1000, 4), 3000.0);
    }

    #[test]
    fn collective_bytes() {
        let p = large();
        assert_eq!(p.collective_bytes_per_layer(Layout::Tp(1), 64, 4), 0);
        // tp2: 2 all-reduces × 2·(1/2) × 4 tokens × 7168 × 2 B.
        assert_eq!(
            p.collective_bytes_per_layer(Layout::Tp(2), 1, 4),
            2 * 4 * 7168 * 2
        );
        // tp8: 2 × 2·(7/8) × 8 tokens × 14336 B.
        assert_eq!(
            p.collective_bytes_per_layer(Layout::Tp(8), 2, 4),
            2 * 2 * 7 * 8 * 14336 / 8
        );
        // dep2 with k = 8: the other GPU holds one of a token's experts with p = 1 − 2⁻⁸.
        let dep2 = p.collective_bytes_per_layer(Layout::Dep(2), 1, 1) as f64;
        let want = 2.0 * (1.0 - 0.5f64.powi(8)) * 14336.0;
        assert!((dep2 - want).abs() <= 0.5, "{dep2} vs {want}");
        // A dense model under dep is plain data parallelism: nothing to exchange.
        assert_eq!(dense().collective_bytes_per_layer(Layout::Dep(4), 8, 4), 0);
    }

    #[test]
    fn collective_plans_carry_the_bytes_the_model_counts() {
        let p = Profile::named("moe-large").unwrap();
        assert_eq!(p.collective_plan(Layout::Tp(1), 8, 4), None);
        assert_eq!(dense().collective_plan(Layout::Dep(4), 8, 4), None);
        let tp2 = p.collective_plan(Layout::Tp(2), 1, 4).unwrap();
        assert_eq!(tp2.kind, CollectiveKind::AllReduce);
        assert_eq!(tp2.count, 2 * p.layers);
        // 4 tokens of 7168 bf16 values; a ring moves 2(N-1)/N of it per all-reduce.
        assert_eq!(tp2.payload_bytes, 4 * 7168 * 2);
        assert_eq!(
            2 * tp2.payload_bytes,
            p.collective_bytes_per_layer(Layout::Tp(2), 1, 4)
        );
        let dep4 = p.collective_plan(Layout::Dep(4), 4, 4).unwrap();
        assert_eq!(dep4.kind, CollectiveKind::AllToAll);
        let sent = 2 * 3 * dep4.payload_bytes;
        let counted = p.collective_bytes_per_layer(Layout::Dep(4), 4, 4);
        assert!(
            sent >= counted && sent - counted <= 2 * 3 * 2,
            "{sent} vs {counted}"
        );
    }

    #[test]
    fn collective_time_follows_bytes_and_rejects_bad_links() {
        assert_eq!(collective_us(1_000_000_000, 100.0).unwrap(), 10_000.0);
        assert_eq!(collective_us(0, 100.0).unwrap(), 0.0);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(collective_us(1, bad).is_err(), "{bad}");
        }
    }
}
