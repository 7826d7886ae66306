//! The host program: its items, the GPU items' fixed order, a step's phases and their
//! families, and the items one step runs.

use super::costs::interpolate;
use super::{ForwardOf, HostProfile, Phase};
use crate::axes::{Arm, Drafter, Family};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One item of the host program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Item {
    /// Host work with no GPU work behind it (scheduling, sampling bookkeeping, ...).
    Host {
        name: String,
        #[serde(default)]
        us: f64,
        /// `us` per batch size (per GPU), where the segment's work grows with the batch (an
        /// engine's scheduler walks every request): linear between the measured batch sizes,
        /// the nearest one's beyond them; it replaces `us` once a step's batch is known.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "batch_keys"
        )]
        us_by_batch: Option<BTreeMap<u32, f64>>,
        #[serde(default)]
        ops: u32,
        /// How many of the `ops` launch a GPU kernel (the last ones); absent: all of them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launches: Option<u32>,
        #[serde(default)]
        source: String,
    },
    DraftPrep,
    DraftForward,
    VerifyPrep,
    VerifyForward,
    /// `seq_lens += accepted` on the device, issued as `ops` framework ops.
    Accept {
        #[serde(default)]
        ops: u32,
    },
    /// EAGLE: one draft pass's DSA decode prep.
    DecodePrep,
    /// EAGLE: the DSA draft-extend prep (the draft model backfills the verified tokens' KV).
    ExtendPrep,
    /// EAGLE: the draft model's draft-extend forward.
    ExtendForward,
    /// EAGLE: `items`, once per draft pass (see [`Drafter::draft_passes`]); flattened by
    /// [`HostProfile::step_items`] before a step runs.
    DraftPasses {
        items: Vec<Item>,
    },
}

/// A batch size → µs map inside an item. Items are tagged by `kind`, and serde hands a
/// tagged enum's maps over with their JSON keys still strings, so the batch sizes are
/// parsed here.
fn batch_keys<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<BTreeMap<u32, f64>>, D::Error> {
    let Some(raw) = Option::<BTreeMap<String, f64>>::deserialize(de)? else {
        return Ok(None);
    };
    raw.into_iter()
        .map(|(k, v)| match k.parse::<u32>() {
            // Only the plain spelling: `+8` or `08` beside `8` would merge unseen.
            Ok(bs) if bs.to_string() == k => Ok((bs, v)),
            _ => Err(serde::de::Error::custom(format!(
                "us_by_batch: `{k}` is not a batch size (write one as `8`)"
            ))),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

impl Item {
    /// The label of the item in traces and the GPU lane.
    pub fn label(&self) -> &str {
        match self {
            Item::Host { name, .. } => name,
            Item::DraftPrep => "draft prep",
            Item::DraftForward => "draft forward",
            Item::VerifyPrep => "verify prep",
            Item::VerifyForward => "verify forward",
            Item::Accept { .. } => "accept",
            Item::DecodePrep => "decode prep",
            Item::ExtendPrep => "extend prep",
            Item::ExtendForward => "extend forward",
            Item::DraftPasses { .. } => "draft passes",
        }
    }

    /// True for items that put work on the GPU.
    pub fn is_gpu(&self) -> bool {
        !matches!(self, Item::Host { .. })
    }

    /// The prep this item runs, if it is one.
    pub fn prep_phase(&self) -> Option<Phase> {
        match self {
            Item::DraftPrep => Some(Phase::Draft),
            Item::VerifyPrep => Some(Phase::Verify),
            Item::DecodePrep => Some(Phase::Decode),
            Item::ExtendPrep => Some(Phase::Extend),
            _ => None,
        }
    }

    /// The forward this item launches, if it is one.
    pub fn forward_of(&self) -> Option<ForwardOf> {
        match self {
            Item::DraftForward => Some(ForwardOf::Draft),
            Item::VerifyForward => Some(ForwardOf::Verify),
            Item::ExtendForward => Some(ForwardOf::Extend),
            _ => None,
        }
    }
}

/// The items that put work on the GPU, each exactly once in every DSpark program, in this
/// order.
pub const GPU_ITEMS_IN_ORDER: [Item; 5] = [
    Item::DraftPrep,
    Item::DraftForward,
    Item::VerifyPrep,
    Item::VerifyForward,
    Item::Accept { ops: 0 },
];

/// The GPU items of an EAGLE program with one draft pass, each exactly once, in this order;
/// the decode prep and the draft forward only inside `draft_passes`.
pub const EAGLE_GPU_ITEMS_IN_ORDER: [Item; 7] = [
    Item::DecodePrep,
    Item::DraftForward,
    Item::VerifyPrep,
    Item::VerifyForward,
    Item::ExtendPrep,
    Item::ExtendForward,
    Item::Accept { ops: 0 },
];

/// The first of a host item's `ops` that launches a kernel: its last `launches` do (all
/// when `launches` is absent).
pub fn first_launching_op(ops: u32, launches: Option<u32>) -> u32 {
    ops - launches.unwrap_or(ops).min(ops)
}

/// `items` with each `draft_passes` group repeated `passes` times, in place.
pub fn expand_passes(items: &[Item], passes: u32) -> Vec<Item> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Item::DraftPasses { items } => {
                for _ in 0..passes {
                    out.extend(items.iter().cloned());
                }
            }
            other => out.push(other.clone()),
        }
    }
    out
}

/// The families a DSpark step prepares: the draft block, then the verify.
pub const STEP_FAMILIES: [(Phase, Family); 2] = [
    (Phase::Draft, Family::DsparkDraftBlock),
    (Phase::Verify, Family::DsaTargetVerify),
];

/// The metadata family `phase`'s prep computes.
pub fn family_of(phase: Phase) -> Family {
    match phase {
        Phase::Draft => Family::DsparkDraftBlock,
        Phase::Verify => Family::DsaTargetVerify,
        Phase::Decode => Family::DsaDecode,
        Phase::Extend => Family::DsaDraftExtendV2,
    }
}

/// The arm `phase`'s prep runs as when `drafter`'s step runs `arm`: `arm` itself, except
/// graph-upload where the engine's graph path does not upload. DSpark's graph-upload copies
/// `[block] * bs` up before both replays; SGLang's merged spec-v2 DSA path (docs/arms.md names
/// the change) uploads `[N] * bs` before each draft-extend replay only, its decode and
/// target-verify replays being device-only, so there EAGLE's decode and verify preps run as
/// graph and graph-upload's step differs from graph's by the draft-extend upload alone.
pub fn prep_arm(drafter: Drafter, phase: Phase, arm: Arm) -> Arm {
    let uploads = match drafter {
        Drafter::Dspark => true,
        Drafter::Eagle => phase == Phase::Extend,
    };
    if arm == Arm::GraphUpload && !uploads {
        Arm::Graph
    } else {
        arm
    }
}

/// The prep phases of `drafter`'s step, in the order its families are listed.
pub fn phases_of(drafter: Drafter) -> Vec<Phase> {
    drafter
        .families()
        .iter()
        .map(|&f| {
            [Phase::Draft, Phase::Verify, Phase::Decode, Phase::Extend]
                .into_iter()
                .find(|&p| family_of(p) == f)
                .expect("every step family has a phase")
        })
        .collect()
}

impl HostProfile {
    /// `drafter`'s program as the profile gives it (`draft_passes` groups not expanded).
    pub fn program_of(&self, drafter: Drafter) -> Result<&[Item]> {
        match drafter {
            Drafter::Dspark => Ok(&self.program),
            Drafter::Eagle => self.eagle_program.as_deref().with_context(|| {
                format!(
                    "host profile `{}` has no `eagle_program`, so it cannot run --drafter eagle: \
                     use a built-in profile (native, pytorch) or add one \
                     (host-profiles/README.md)",
                    self.name
                )
            }),
        }
    }

    /// The items one step of `drafter` runs at block size `block` and per-GPU batch size
    /// `batch`, in order: its program with each `draft_passes` group repeated
    /// [`Drafter::draft_passes`] times, and each host item's `us` at `batch`.
    pub fn step_items(&self, drafter: Drafter, block: u32, batch: u32) -> Result<Vec<Item>> {
        let mut items = expand_passes(self.program_of(drafter)?, drafter.draft_passes(block));
        for item in &mut items {
            if let Item::Host {
                us,
                us_by_batch: Some(by_batch),
                ..
            } = item
            {
                *us = interpolate(by_batch, batch);
            }
        }
        Ok(items)
    }
}
