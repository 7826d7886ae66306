//! The weight and KV bytes one GPU of a layout streams in a forward and holds.

use super::{GpuBytes, Moe, Profile};
use crate::axes::Layout;

impl Profile {
    /// Bytes one GPU reads in one forward of `tokens_per_request` tokens for each of
    /// `rank_batch` requests (from [`Layout::rank_batch`]) at `context_len` tokens of context.
    ///
    /// * Dense weights and the head: divided by TP; whole on every GPU under dep.
    /// * Routed experts: under tp each GPU holds 1/TP of every expert and reads its share of
    ///   the experts this rank's tokens touch; under dep each GPU holds E/DP whole experts and
    ///   reads those touched by the tokens of *all* ranks (rank_batch · DP requests).
    /// * KV: each request's context is read once per forward, shared by its query tokens.
    pub fn forward_bytes(
        &self,
        layout: Layout,
        rank_batch: u32,
        context_len: u32,
        tokens_per_request: u32,
    ) -> GpuBytes {
        let tp = u64::from(layout.tp_degree());
        let dp = layout.dp_degree();
        let routed_per_layer = self.moe.map_or(0.0, |moe| {
            let global_tokens =
                u64::from(rank_batch) * u64::from(dp) * u64::from(tokens_per_request);
            let experts_here = f64::from(moe.routed_experts) / f64::from(dp);
            let touched = experts_here * moe.touched_share(global_tokens);
            touched * moe.expert_weight_bytes as f64 / tp as f64
        });
        let per_layer = (self.dense_weight_bytes_per_layer / tp) as f64 + routed_per_layer;
        let weights = ((per_layer * f64::from(self.layers)).round() as u64)
            .saturating_add(self.head_weight_bytes / tp);
        GpuBytes::new(weights, self.kv_bytes(layout, rank_batch, context_len))
    }

    /// Bytes one GPU of `layout` holds: every weight stored there, not only those a forward
    /// reads, plus the KV cache of its `rank_batch` requests at `context_len` tokens (the
    /// cache [`Self::forward_bytes`] reads). Split as there: dense weights, head and
    /// embedding by TP (whole under dep); under tp 1/TP of every routed expert, under dep
    /// E/DP whole experts (rounded up: the busiest GPU). `vocab: false` leaves out the head
    /// and embedding, for a drafter using the target's. Activations and workspace are not
    /// counted: see [`crate::model::memory::RESERVED_FRACTION`].
    pub fn held_bytes(
        &self,
        layout: Layout,
        rank_batch: u32,
        context_len: u32,
        vocab: bool,
    ) -> GpuBytes {
        let tp = u64::from(layout.tp_degree());
        let routed = self.moe.map_or(0, |moe| {
            u64::from(moe.routed_experts.div_ceil(layout.dp_degree())) * moe.expert_weight_bytes
        });
        // Saturating: a custom profile's sizes are the user's, and bytes past u64 (16 EiB)
        // must read as too many for any GPU, not wrap to a small number.
        let per_layer = self.dense_weight_bytes_per_layer.saturating_add(routed) / tp;
        let vocab_bytes = if vocab {
            self.head_weight_bytes.saturating_add(self.embedding_bytes) / tp
        } else {
            0
        };
        GpuBytes::new(
            per_layer
                .saturating_mul(u64::from(self.layers))
                .saturating_add(vocab_bytes),
            self.kv_bytes(layout, rank_batch, context_len),
        )
    }

    /// KV cache of `rank_batch` requests of `context_len` tokens on one GPU of `layout`.
    fn kv_bytes(&self, layout: Layout, rank_batch: u32, context_len: u32) -> u64 {
        let kv_tp = if self.kv_split_by_tp {
            u64::from(layout.tp_degree())
        } else {
            1
        };
        u64::from(rank_batch)
            .saturating_mul(u64::from(context_len))
            .saturating_mul(self.kv_bytes_per_token_per_layer / kv_tp)
            .saturating_mul(u64::from(self.layers))
    }
}

impl Moe {
    /// Expected share of experts that `tokens` tokens touch between them.
    fn touched_share(self, tokens: u64) -> f64 {
        let per_token = f64::from(self.experts_per_token) / f64::from(self.routed_experts.max(1));
        1.0 - (1.0 - per_token.min(1.0)).powf(tokens as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dense, large};
    use super::*;

    #[test]
    fn one_token_reads_about_the_published_activated_parameters() {
        let p = large();
        let b = p.forward_bytes(Layout::Tp(1), 1, 0, 1);
        // One token touches exactly its 8 experts.
        let per_layer = 187_105_280 + 44_040_192 + 8 * 44_040_192;
        assert_eq!(b.weights, 61 * per_layer + 129_280 * 7168 * 2);
        assert!((36e9..39e9).contains(&(b.weights as f64)), "{}", b.weights);
        assert_eq!(b.kv, 0);
    }

    #[test]
    fn tp_halves_weight_bytes() {
        let d = dense();
        assert_eq!(d.forward_bytes(Layout::Tp(1), 8, 0, 1).weights, 4_000_000);
        assert_eq!(d.forward_bytes(Layout::Tp(2), 8, 0, 1).weights, 2_000_000);
        assert_eq!(d.forward_bytes(Layout::Tp(4), 8, 0, 1).weights, 1_000_000);
        let p = large();
        let tp1 = p.forward_bytes(Layout::Tp(1), 4, 1000, 4).weights as f64;
        let tp2 = p.forward_bytes(Layout::Tp(2), 4, 1000, 4).weights as f64;
        assert!((tp1 / tp2 - 2.0).abs() < 1e-6, "{tp1} vs {tp2}");
    }

    #[test]
    fn expert_reads_grow_with_tokens_and_saturate() {
        let p = large();
        let moe = p.moe.unwrap();
        assert!((moe.touched_share(1) - 8.0 / 256.0).abs() < 1e-12);
        assert!(moe.touched_share(4) > moe.touched_share(1));
        assert!(moe.touched_share(100_000) > 0.999_999);
        assert_eq!(moe.touched_share(0), 0.0);
    }

    #[test]
    fn dep_divides_batch_replicates_attention_and_spreads_experts() {
        let p = large();
        let dep4 = Layout::Dep(4);
        let rb = dep4.rank_batch(64);
        assert_eq!(rb, 16);
        // KV: one dep4 GPU reads the context of 16 requests, tp1 of all 64.
        let kv_dep = p.forward_bytes(dep4, rb, 4096, 1).kv;
        let kv_tp1 = p.forward_bytes(Layout::Tp(1), 64, 4096, 1).kv;
        assert_eq!(kv_dep * 4, kv_tp1);
        // With every expert touched, dep4 reads whole attention and a quarter of the experts.
        let w = p.forward_bytes(dep4, 10_000, 0, 1).weights;
        let want = 61 * (p.dense_weight_bytes_per_layer + 64 * 44_040_192) + p.head_weight_bytes;
        assert!((w as f64 / want as f64 - 1.0).abs() < 1e-9, "{w} vs {want}");
    }

    #[test]
    fn kv_grows_linearly_with_batch_and_length() {
        let p = large();
        let kv = |b, l| p.forward_bytes(Layout::Tp(1), b, l, 1).kv;
        assert_eq!(kv(1, 1000), 1000 * 1152 * 61);
        assert_eq!(kv(2, 1000), 2 * kv(1, 1000));
        assert_eq!(kv(1, 2000), 2 * kv(1, 1000));
        assert_eq!(kv(8, 3000), 24 * kv(1, 1000));
    }

    #[test]
    fn mla_cache_is_not_split_by_tp_but_per_head_caches_are() {
        let p = large();
        assert_eq!(
            p.forward_bytes(Layout::Tp(8), 4, 1000, 1).kv,
            p.forward_bytes(Layout::Tp(1), 4, 1000, 1).kv
        );
        let d = dense();
        assert_eq!(
            d.forward_bytes(Layout::Tp(2), 4, 1000, 1).kv * 2,
            d.forward_bytes(Layout::Tp(1), 4, 1000, 1).kv
        );
    }

    #[test]
    fn total_is_weights_plus_kv() {
        let b = large().forward_bytes(Layout::Tp(4), 8, 2048, 5);
        assert_eq!(b.total, b.weights + b.kv);
        assert!(b.weights > 0 && b.kv > 0);
    }
}
