//! What a profile says things cost: an arm's prep ops, a read by each path, a prep's op and
//! kernel times, a host item; and the one-line notes that name them.

use super::{family_of, ArmOps, HostProfile, Phase, Sourced};
use crate::axes::{Arm, ReadPath};
use crate::results::env::HOST_PROFILE_NOTE;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

impl HostProfile {
    /// What `arm` issues on the host for `phase`'s prep.
    pub fn arm_ops(&self, phase: Phase, arm: Arm) -> ArmOps {
        let prep = &self.preps[family_of(phase).name()];
        match arm {
            Arm::EagerSync | Arm::EagerPinned | Arm::EagerMapped => prep.eager_sync,
            Arm::EagerDevice => prep.eager_device,
            Arm::GraphUpload => prep.graph_upload.unwrap_or(prep.graph),
            Arm::Graph | Arm::Fused => prep.graph,
        }
    }

    /// Host µs one read by `path` costs with the GPU idle, and where that came from.
    pub fn read_cost(&self, path: ReadPath) -> Option<&Sourced<f64>> {
        match path {
            ReadPath::Pageable => Some(&self.read_us),
            ReadPath::Pinned => self.pinned_read_us.as_ref(),
            ReadPath::Mapped => self.mapped_read_us.as_ref(),
        }
    }

    /// Refuses `arms` when one reads by a path this profile has no cost for: the step loop
    /// would run it at the harness's own read cost, which no measurement of the framework
    /// gave.
    pub fn require_read_costs(&self, arms: &[Arm]) -> Result<()> {
        for arm in arms {
            if let Some(path) = arm.read_path().filter(|&p| self.read_cost(p).is_none()) {
                bail!(
                    "host profile `{}` has no `{}`, the cost of the {arm} arm's read: measure it \
                     with scripts/torch_read_paths.py --profile PROFILE --out FILE on the GPU \
                     host and pass --host-profile FILE, or leave {arm} out of --arms",
                    self.name,
                    read_field(path)
                );
            }
        }
        Ok(())
    }

    /// One line for notes: what each read path of `arms` other than eager-sync's costs and
    /// where that came from; `None` when the run has none of them. It begins as
    /// [`describe`](Self::describe)'s line does, so a run's settings hold it with the profile.
    pub fn read_paths_note(&self, arms: &[Arm]) -> Option<String> {
        let parts: Vec<String> = arms
            .iter()
            .filter_map(|&arm| Some((arm, arm.read_path().filter(|&p| p != ReadPath::Pageable)?)))
            .map(|(arm, path)| match self.read_cost(path) {
                Some(c) => format!(
                    "{arm} {} {:.1} us ({})",
                    read_field(path),
                    c.value,
                    c.source
                ),
                None => format!("{arm} {}: none", read_field(path)),
            })
            .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "{HOST_PROFILE_NOTE}{}` read paths: {}",
                self.name,
                parts.join("; ")
            )
        })
    }

    /// Host µs per op of `arm`'s prep for `phase`.
    pub fn prep_op_us(&self, phase: Phase, arm: Arm) -> f64 {
        self.arm_ops(phase, arm).op_us.unwrap_or(self.op_us.value)
    }

    /// GPU µs of one framework kernel of `phase`'s prep at per-GPU batch size `batch`.
    pub fn prep_kernel_us(&self, phase: Phase, batch: u32) -> f64 {
        let prep = &self.preps[family_of(phase).name()];
        match &prep.kernel_us_by_batch {
            Some(by_batch) => interpolate(by_batch, batch),
            None => prep.kernel_us.unwrap_or(self.kernel_us.value),
        }
    }

    /// Host µs of a `host` item.
    pub fn host_item_us(&self, us: f64, ops: u32) -> f64 {
        us + f64::from(ops) * self.op_us.value
    }

    /// One line for notes and summaries: the name, the key costs, the arm host factors when
    /// there are any, and where they came from.
    pub fn describe(&self) -> String {
        let factors = match &self.arm_host_factors {
            Some(f) if !f.is_empty() => {
                let each: Vec<String> = f
                    .iter()
                    .map(|(arm, v)| format!("{arm} x{:.3}", v.value))
                    .collect();
                format!(", arm host factors {}", each.join(" "))
            }
            _ => String::new(),
        };
        format!(
            "{HOST_PROFILE_NOTE}{}` (op {:.1} us, read {:.1} us, graph launch {:.1} us{factors}; {})",
            self.name,
            self.op_us.value,
            self.read_us.value,
            self.graph_launch_us.value,
            self.source
        )
    }
}

/// The profile field that holds `path`'s read cost.
pub(super) fn read_field(path: ReadPath) -> String {
    match path {
        ReadPath::Pageable => "read_us".into(),
        _ => format!("{path}_read_us"),
    }
}

/// `points` (batch size → µs, not empty) at `batch`: linear between the two measured batch
/// sizes around it, the nearest one's value beyond them.
pub(super) fn interpolate(points: &BTreeMap<u32, f64>, batch: u32) -> f64 {
    let below = points.range(..=batch).next_back();
    let above = points.range(batch..).next();
    match (below, above) {
        (Some((&b0, &v0)), Some((&b1, &v1))) if b1 > b0 => {
            v0 + (v1 - v0) * f64::from(batch - b0) / f64::from(b1 - b0)
        }
        (Some((_, &v)), _) | (None, Some((_, &v))) => v,
        (None, None) => unreachable!("well formed: every *_by_batch map is not empty"),
    }
}
