//! Model profiles: how many bytes one GPU's forward reads and how many bytes its collectives
//! move, so the stand-in forward kernels take the time a real forward would on that GPU, and
//! how many bytes the GPU holds, so `steps` runs only layouts that fit (`memory`).
//!
//! A decode forward is memory-bound: its time follows the weights and KV cache it streams.
//! The profiles below are round-figure **assumptions** derived from the public DeepSeek-V3
//! `config.json` (DeepSeek-V4 is assumed to be of the same order); they are meant to put GPU
//! time in the right regime (host-bound at batch 1 on wide TP, GPU-bound at large batch and
//! context), not to predict a real engine to the microsecond. What the arithmetic leaves out,
//! on purpose: activations, the KV written for new tokens (a few tokens against thousands
//! read), block-quantisation scales, the three dense layers at the bottom of DeepSeek-V3
//! (modelled as MoE layers: their MLP has about the bytes of the 9 experts a token reads),
//! DSA sparse attention reading at most top-k KV entries per query (we read the whole
//! context, an upper bound at long context). Each collective costs α + bytes / β
//! ([`Link`]), with α from a cited public figure.
//!
//! The built-in and custom profiles live in `builtin`, the bytes a GPU streams and holds in
//! `bytes`, the collectives and their cost in `collective_cost`, the stand-in forward in
//! `forward`.

mod builtin;
mod bytes;
mod collective_cost;
mod forward;

#[cfg(test)]
mod fixtures;

pub use collective_cost::{
    collective_latency_us, collective_us, CollectiveKind, CollectivePlan, Link,
    COLLECTIVE_LATENCY_SOURCE,
};
pub use forward::{ForwardModel, ForwardSpec};

/// Names accepted by [`Profile::named`], plus `custom`, which is built from size flags.
pub const PROFILE_NAMES: [&str; 3] = ["draft-small", "moe-large", "custom"];

/// A model's per-GPU byte budget. Build with [`Profile::named`] or [`Profile::custom`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Profile {
    pub name: String,
    pub layers: u32,
    /// Elements in one token's hidden state, the unit the collectives move.
    pub hidden_size: u32,
    /// Bytes per hidden-state element in collectives (bf16: 2).
    pub activation_bytes: u32,
    /// Weights every token reads in a layer whatever the routing: attention and shared
    /// experts. Split by TP; whole on every GPU under dep.
    pub dense_weight_bytes_per_layer: u64,
    /// Routed experts, if the model has them.
    pub moe: Option<Moe>,
    /// Output head read once per forward (split by TP, whole under dep).
    pub head_weight_bytes: u64,
    /// Input embedding table, split as the head. A forward reads only its tokens' rows, so it
    /// counts toward the memory a GPU holds, not toward the bytes a forward streams.
    pub embedding_bytes: u64,
    /// A drafter that uses its target's embedding and head (DeepSeek-V3's MTP block does):
    /// next to a target with a head of the same size, it holds neither of its own.
    pub shares_target_vocab: bool,
    /// KV cache bytes one token of context costs in one layer.
    pub kv_bytes_per_token_per_layer: u64,
    /// Per-head caches (MHA/GQA) are split across TP ranks; an MLA latent cache is shared by
    /// all heads, so every TP rank holds and reads all of it.
    pub kv_split_by_tp: bool,
}

/// Routed experts of one MoE layer. Routing is modelled as uniform and independent per
/// token, so `t` tokens touch on average `E·(1 − (1 − k/E)^t)` distinct experts; each
/// touched expert's weights are read once per forward.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Moe {
    pub routed_experts: u32,
    pub experts_per_token: u32,
    pub expert_weight_bytes: u64,
}

/// Weight and KV bytes of one GPU: those a forward streams ([`Profile::forward_bytes`]) or
/// those it holds ([`Profile::held_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuBytes {
    pub weights: u64,
    pub kv: u64,
    pub total: u64,
}

impl GpuBytes {
    pub fn new(weights: u64, kv: u64) -> GpuBytes {
        GpuBytes {
            weights,
            kv,
            total: weights.saturating_add(kv),
        }
    }
}

impl std::ops::Add for GpuBytes {
    type Output = GpuBytes;

    fn add(self, other: GpuBytes) -> GpuBytes {
        GpuBytes::new(
            self.weights.saturating_add(other.weights),
            self.kv.saturating_add(other.kv),
        )
    }
}
