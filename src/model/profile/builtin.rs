//! The built-in profiles, from DeepSeek-V3's public `config.json`, and the custom one.

use super::{Moe, Profile, PROFILE_NAMES};
use anyhow::{bail, ensure, Result};

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
        // A layer without weights is no layer of a model: the forward would stream only KV.
        ensure!(
            weight_bytes_per_layer > 0,
            "custom profile: --custom-weight-bytes-per-layer 0: every layer of a model holds \
             weights (DeepSeek-V3's hold about 11 GB each): give its bytes"
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
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::large;
    use super::*;

    #[test]
    fn v3_constants_match_hand_arithmetic() {
        assert_eq!(V3_ATTENTION_PARAMS, 187_105_280);
        assert_eq!(V3_EXPERT_PARAMS, 44_040_192);
        assert_eq!(V3_KV_BYTES_PER_TOKEN_PER_LAYER, 1152);
    }

    #[test]
    fn a_custom_profile_too_large_for_u64_saturates_rather_than_wraps() {
        use crate::axes::Layout;
        let huge = Profile::custom(u64::MAX, u32::MAX, u64::MAX, 4096).unwrap();
        let held = huge.held_bytes(Layout::Tp(1), 1, 1 << 20, true);
        assert_eq!(
            (held.weights, held.kv, held.total),
            (u64::MAX, u64::MAX, u64::MAX)
        );
        // Within u64 the arithmetic is exact.
        let small = Profile::custom(1000, 3, 10, 4096).unwrap();
        let held = small.held_bytes(Layout::Tp(1), 2, 5, true);
        assert_eq!((held.weights, held.kv, held.total), (3000, 300, 3300));
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
        assert!(
            Profile::custom(0, 1, 1, 7168).is_err(),
            "a layer without weights"
        );
        assert!(Profile::custom(1, 1, 0, 7168).is_ok());
    }
}
