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

use crate::axes::Layout;
use anyhow::{bail, ensure, Result};

/// Names accepted by [`Profile::named`], plus `custom`, which is built from size flags.
pub const PROFILE_NAMES: [&str; 3] = ["draft-small", "moe-large", "custom"];

/// A model's per-GPU byte budget. Build with [`Profile::named`] or [`Profile::custom`].
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, Copy, PartialEq)]
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
            total: weights + kv,
        }
    }
}

impl std::ops::Add for GpuBytes {
    type Output = GpuBytes;

    fn add(self, other: GpuBytes) -> GpuBytes {
        GpuBytes::new(self.weights + other.weights, self.kv + other.kv)
    }
}

/// What the lead's step loop launches for one forward: a kernel streaming `stream_bytes`
/// through device memory, then a busy-wait of `spin_us` standing in for the collectives
/// (or for the whole forward under `--forward-us`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForwardSpec {
    pub stream_bytes: u64,
    pub spin_us: f64,
}

/// How the stand-in forward gets its duration.
#[derive(Debug, Clone, PartialEq)]
pub enum ForwardModel {
    /// Bytes from a model profile and a link bandwidth.
    Profile(Profile),
    /// `--forward-us`: a fixed busy-wait, the same for every layout and batch; for isolating
    /// the prep's cost from any forward model.
    FixedUs(f64),
}

// DeepSeek-V3 `config.json` (public), the source of the built-in profiles.
const V3_HIDDEN: u64 = 7168;
const V3_LAYERS: u32 = 61;
const V3_HEADS: u64 = 128;
const V3_Q_LORA_RANK: u64 = 1536;
const V3_KV_LORA_RANK: u64 = 512;
const V3_QK_NOPE_DIM: u64 = 128;
const V3_QK_ROPE_DIM: u64 = 64;
const V3_V_HEAD_DIM: u64 = 128;
const V3_MOE_INTERMEDIATE: u64 = 2048;
const V3_ROUTED_EXPERTS: u32 = 256;
const V3_EXPERTS_PER_TOKEN: u32 = 8;
const V3_VOCAB: u64 = 129_280;

/// Assumption: weights are FP8 (1 byte each, as the released checkpoint), the output head
/// stays bf16, hidden states and the MLA cache are bf16.
const FP8_BYTES: u64 = 1;
const BF16_BYTES: u64 = 2;

/// MLA projections: q down/up, kv down (latent + rope key), kv up, output.
const V3_ATTENTION_PARAMS: u64 = V3_HIDDEN * V3_Q_LORA_RANK
    + V3_Q_LORA_RANK * V3_HEADS * (V3_QK_NOPE_DIM + V3_QK_ROPE_DIM)
    + V3_HIDDEN * (V3_KV_LORA_RANK + V3_QK_ROPE_DIM)
    + V3_KV_LORA_RANK * V3_HEADS * (V3_QK_NOPE_DIM + V3_V_HEAD_DIM)
    + V3_HEADS * V3_V_HEAD_DIM * V3_HIDDEN; // ≈ 187 M
/// One expert: gate, up and down projections (≈ 44 M); the one shared expert is the same size.
const V3_EXPERT_PARAMS: u64 = 3 * V3_HIDDEN * V3_MOE_INTERMEDIATE;
/// The MLA cache holds the compressed latent plus the rope key per token: 576 bf16 = 1152 B.
const V3_KV_BYTES_PER_TOKEN_PER_LAYER: u64 = (V3_KV_LORA_RANK + V3_QK_ROPE_DIM) * BF16_BYTES;
/// The draft's multi-token-prediction block also projects [embedding; hidden] back to hidden.
const MTP_EH_PROJ_PARAMS: u64 = 2 * V3_HIDDEN * V3_HIDDEN;

/// TP all-reduces the hidden states after attention and after the MLP in every layer.
const ALL_REDUCES_PER_LAYER: u64 = 2;
/// Under dep, tokens go to their experts' GPUs (dispatch) and come back (combine).
const ALL_TO_ALLS_PER_LAYER: f64 = 2.0;

impl Profile {
    /// The built-in profiles:
    ///
    /// * `moe-large` — a DeepSeek-V3/V4-class target: 61 layers, hidden 7168, MLA attention
    ///   (≈ 187 M FP8 weights per layer) plus one shared expert (≈ 44 M), 256 routed experts
    ///   of ≈ 44 M with 8 per token, a bf16 output head of 129 280 × 7168 (≈ 1.85 GB), and a
    ///   bf16 MLA cache of 1152 B per token per layer, shared by all heads (not split by TP).
    ///   One token at tp1 reads ≈ 37 GB, matching the published 37 B activated parameters.
    /// * `draft-small` — a one-layer drafter shaped like DeepSeek-V3's multi-token-prediction
    ///   block: one full MoE layer of the target (same sizes as above), its [embedding;
    ///   hidden] projection (2·7168·7168 FP8), and the target's bf16 output head, which the
    ///   drafter shares and reads once per draft forward.
    pub fn named(name: &str) -> Result<Profile> {
        let moe = Some(Moe {
            routed_experts: V3_ROUTED_EXPERTS,
            experts_per_token: V3_EXPERTS_PER_TOKEN,
            expert_weight_bytes: V3_EXPERT_PARAMS * FP8_BYTES,
        });
        let v3_dense_per_layer = (V3_ATTENTION_PARAMS + V3_EXPERT_PARAMS) * FP8_BYTES;
        let v3 = Profile {
            name: name.to_string(),
            layers: V3_LAYERS,
            hidden_size: V3_HIDDEN as u32,
            activation_bytes: BF16_BYTES as u32,
            dense_weight_bytes_per_layer: v3_dense_per_layer,
            moe,
            head_weight_bytes: V3_VOCAB * V3_HIDDEN * BF16_BYTES,
            embedding_bytes: V3_VOCAB * V3_HIDDEN * BF16_BYTES,
            kv_bytes_per_token_per_layer: V3_KV_BYTES_PER_TOKEN_PER_LAYER,
            kv_split_by_tp: false,
            shares_target_vocab: false,
        };
        match name {
            "moe-large" => Ok(v3),
            "draft-small" => Ok(Profile {
                layers: 1,
                dense_weight_bytes_per_layer: v3_dense_per_layer + MTP_EH_PROJ_PARAMS * FP8_BYTES,
                shares_target_vocab: true,
                ..v3
            }),
            "custom" => bail!(
                "the `custom` profile is built from its size flags (weight bytes per layer, \
                 layers, KV bytes per token per layer), not by name"
            ),
            _ => bail!(
                "`{name}` is not a model profile: use one of {}",
                PROFILE_NAMES.join(", ")
            ),
        }
    }

    /// A dense model from flags: every weight is read by every token and split by TP; the KV
    /// cache is per-head and split by TP too; no output head; bf16 hidden states. Under dep
    /// this is plain data parallelism: whole weights on every GPU and no collective.
    pub fn custom(
        weight_bytes_per_layer: u64,
        layers: u32,
        kv_bytes_per_token_per_layer: u64,
        hidden_size: u32,
    ) -> Result<Profile> {
        ensure!(
            layers > 0,
            "custom profile: --custom-layers must be at least 1"
        );
        ensure!(
            hidden_size > 0,
            "custom profile: --custom-hidden-size must be at least 1 (DeepSeek-V3 uses 7168)"
        );
        ensure!(
            weight_bytes_per_layer > 0 || kv_bytes_per_token_per_layer > 0,
            "custom profile: weight bytes per layer and KV bytes per token per layer are both 0, \
             so the forward would read nothing: give at least one of them"
        );
        Ok(Profile {
            name: "custom".to_string(),
            layers,
            hidden_size,
            activation_bytes: BF16_BYTES as u32,
            dense_weight_bytes_per_layer: weight_bytes_per_layer,
            moe: None,
            head_weight_bytes: 0,
            embedding_bytes: 0,
            kv_bytes_per_token_per_layer,
            kv_split_by_tp: true,
            shares_target_vocab: false,
        })
    }

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
        let weights =
            (per_layer * f64::from(self.layers)).round() as u64 + self.head_weight_bytes / tp;
        GpuBytes::new(weights, self.kv_bytes(layout, rank_batch, context_len))
    }

    /// Bytes one GPU of `layout` holds: every weight stored there, not only those a forward
    /// reads, plus the KV cache of its `rank_batch` requests at `context_len` tokens (the
    /// cache [`Self::forward_bytes`] reads). Split as there: dense weights, head and
    /// embedding by TP (whole under dep); under tp 1/TP of every routed expert, under dep
    /// E/DP whole experts (rounded up: the busiest GPU). `vocab: false` leaves out the head
    /// and embedding, for a drafter using the target's. Activations and workspace are not
    /// counted: see [`super::memory::RESERVED_FRACTION`].
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
        let per_layer = (self.dense_weight_bytes_per_layer + routed) / tp;
        let vocab_bytes = if vocab {
            (self.head_weight_bytes + self.embedding_bytes) / tp
        } else {
            0
        };
        GpuBytes::new(
            per_layer * u64::from(self.layers) + vocab_bytes,
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
            * u64::from(context_len)
            * (self.kv_bytes_per_token_per_layer / kv_tp)
            * u64::from(self.layers)
    }

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

impl Moe {
    /// Expected share of experts that `tokens` tokens touch between them.
    fn touched_share(self, tokens: u64) -> f64 {
        let per_token = f64::from(self.experts_per_token) / f64::from(self.routed_experts.max(1));
        1.0 - (1.0 - per_token.min(1.0)).powf(tokens as f64)
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
    use super::*;

    #[test]
    fn link_bytes_follow_the_ring_and_the_all_to_all() {
        assert_eq!(CollectiveKind::AllReduce.link_bytes(1000, 2), 1000.0);
        assert_eq!(CollectiveKind::AllReduce.link_bytes(1000, 4), 1500.0);
        assert_eq!(CollectiveKind::AllReduce.link_bytes(1000, 1), 0.0);
        assert_eq!(CollectiveKind::AllToAll.link_bytes(1000, 4), 3000.0);
    }

    fn link(gb_s: f64, latency_us: f64) -> Link {
        Link { gb_s, latency_us }
    }

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

    fn large() -> Profile {
        Profile::named("moe-large").unwrap()
    }

    fn dense() -> Profile {
        Profile::custom(1_000_000, 4, 100, 4096).unwrap()
    }

    #[test]
    fn v3_constants_match_hand_arithmetic() {
        assert_eq!(V3_ATTENTION_PARAMS, 187_105_280);
        assert_eq!(V3_EXPERT_PARAMS, 44_040_192);
        assert_eq!(V3_KV_BYTES_PER_TOKEN_PER_LAYER, 1152);
    }

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

    #[test]
    fn profile_names() {
        assert_eq!(Profile::named("draft-small").unwrap().layers, 1);
        assert_eq!(Profile::named("moe-large").unwrap().layers, 61);
        let e = Profile::named("llama").unwrap_err().to_string();
        assert!(
            e.contains("`llama`") && e.contains("draft-small, moe-large, custom"),
            "{e}"
        );
        assert!(Profile::named("custom")
            .unwrap_err()
            .to_string()
            .contains("size flags"));
    }

    #[test]
    fn draft_is_one_target_layer_plus_projection() {
        let draft = Profile::named("draft-small").unwrap();
        let target = large();
        assert_eq!(
            draft.dense_weight_bytes_per_layer,
            target.dense_weight_bytes_per_layer + 2 * 7168 * 7168
        );
        assert_eq!(draft.head_weight_bytes, target.head_weight_bytes);
    }

    #[test]
    fn custom_rejects_empty_sizes() {
        assert!(Profile::custom(1, 0, 1, 7168).is_err());
        assert!(Profile::custom(1, 1, 1, 0).is_err());
        assert!(Profile::custom(0, 1, 0, 7168).is_err());
        assert!(Profile::custom(0, 1, 1, 7168).is_ok());
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
