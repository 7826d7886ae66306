//! Host profiles: what the host does in one decode step, and what each piece costs, as a
//! serving framework runs it. A profile is a JSON file (`host-profiles/*.json` ship
//! `native` and `pytorch`); every number in it carries the measurement it came from.
//!
//! The step is a **host program**: an ordered list of host segments and GPU work. The step
//! loop runs it for real (busy-waits for host segments, real launches, real reads), so
//! whatever a host read exposes is exposed by the GPU timeline itself, not by a formula.
//!
//! ```json
//! {
//!   "name": "pytorch",
//!   "source": "how and where it was measured",
//!   "op_us":           { "value": 9.0,  "source": "..." },
//!   "kernel_us":       { "value": 2.0,  "source": "..." },
//!   "read_us":         { "value": 20.0, "source": "..." },
//!   "graph_launch_us": { "value": 6.0,  "source": "..." },
//!   "upload_us":       { "value": 15.0, "source": "..." },
//!   "upload_syncs":    { "value": true, "source": "..." },
//!   "preps": {
//!     "dspark_draft_block": {
//!       "source": "...",
//!       "eager_sync":   { "ops": 12, "launches": 9, "reads": 1, "ops_before_read": 0 },
//!       "eager_device": { "ops": 11, "launches": 9 },
//!       "graph":        { "ops": 0,  "launches": 0 },
//!       "graph_upload": { "ops": 4,  "launches": 0 }
//!     },
//!     "dsa_target_verify": { ... }
//!   },
//!   "program": [
//!     { "kind": "host", "name": "scheduler", "us": 50, "source": "..." },
//!     { "kind": "draft_prep" },
//!     { "kind": "draft_forward" },
//!     { "kind": "host", "name": "sampling", "ops": 4, "source": "..." },
//!     { "kind": "verify_prep" },
//!     { "kind": "verify_forward" },
//!     { "kind": "accept", "ops": 1 }
//!   ]
//! }
//! ```
//!
//! * `op_us` — host time one framework op costs to issue (Python dispatch, the op's own
//!   host work and its kernel launch); a prep may override it with its own measured mean.
//! * `kernel_us` — GPU time of one small framework kernel (a prep may override it with its
//!   own: its graph replay's GPU time over its launching ops); framework ops launch a spin
//!   of that length, and graph arms capture the same kernels, so the GPU does the work the
//!   framework's kernels do. `preps.<family>.kernel_us_by_batch` gives it per batch size.
//! * `read_us` — host time of one read (`.tolist()`) with the GPU idle, so the wait for the
//!   GPU is not in it; the step loop tops its own real read up to this.
//! * `graph_launch_us` — host time of one graph replay (the forwards and the graph arms).
//! * `upload_us`, `upload_syncs` — host time of `torch.tensor(list, device=...)`, and
//!   whether it waits for the stream (the `graph-upload` arm copies a constant up so).
//! * `preps.<family>.<arm>` — framework ops the eager arms issue for that family, how many
//!   of them launch a GPU kernel, how many reads they make and how many ops come first.
//!   The plan's own kernels take the last launch slots; the others launch an empty kernel.
//! * `program` — the step, in order. A `host` item costs `us` plus `ops` × `op_us`.
//! * `pinned_read_us`, `mapped_read_us` (optional) — `read_us` for the other read paths
//!   (docs/read-paths.md): eager-pinned's `x.to("cpu", non_blocking=True)` and
//!   `event.synchronize()`, eager-mapped's store into mapped memory and flag poll, each with
//!   the GPU idle; the step loop tops its own read of that path up to it. A profile without
//!   one cannot run that arm.

use crate::axes::Arm;
use crate::axes::Drafter;
use crate::axes::Family;
use crate::axes::ReadPath;
use crate::model::post_wait::PostWait;
use crate::results::env::HOST_PROFILE_NOTE;
use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Profiles shipped with the binary, by name.
pub const BUILT_IN: [(&str, &str); 3] = [
    ("native", include_str!("../../host-profiles/native.json")),
    ("pytorch", include_str!("../../host-profiles/pytorch.json")),
    (
        "pytorch-transcription",
        include_str!("../../host-profiles/pytorch-transcription.json"),
    ),
];

/// A value and the measurement (or citation) it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

/// What an arm's prep issues on the host for one family, besides the plan's own kernels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ArmOps {
    /// Framework ops issued (reads not counted).
    pub ops: u32,
    /// How many of the ops launch a GPU kernel.
    #[serde(default)]
    pub launches: u32,
    /// Host reads of device values (`.tolist()`, `.item()`); eager-sync only.
    #[serde(default)]
    pub reads: u32,
    /// Ops issued before the first read.
    #[serde(default)]
    pub ops_before_read: u32,
    /// This prep's own mean host µs per op, when measured; else the profile's `op_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_us: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrepOps {
    pub source: String,
    pub eager_sync: ArmOps,
    pub eager_device: ArmOps,
    /// Host ops around a graph replay (copies into static inputs), for graph and fused.
    #[serde(default)]
    pub graph: ArmOps,
    /// graph-upload's host ops around its upload and replay (the copy of the uploaded list
    /// into the graph's input, ...), the upload itself not counted; absent: `graph`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_upload: Option<ArmOps>,
    /// GPU µs one of this prep's framework kernels takes (its graph replay's GPU time over
    /// its launching ops), when measured; else the profile's `kernel_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_us: Option<f64>,
    /// The same, measured at several per-GPU batch sizes (bigger batches, bigger kernels);
    /// between two of them linear in the batch size, beyond them the nearest. Takes
    /// precedence over `kernel_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_us_by_batch: Option<BTreeMap<u32, f64>>,
}

/// Which prep of a step: DSpark's draft block and the verify; EAGLE's draft passes' DSA
/// decode, the verify and the draft-extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Draft,
    Verify,
    Decode,
    Extend,
}

/// Which forward of a step: the draft model's (a DSpark block or an EAGLE pass), the
/// target's verify, or the draft model's draft-extend over the verified tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardOf {
    Draft,
    Verify,
    Extend,
}

/// One item of the host program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Item {
    /// Host work with no GPU work behind it (scheduling, sampling bookkeeping, ...).
    Host {
        name: String,
        #[serde(default)]
        us: f64,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostProfile {
    pub name: String,
    pub source: String,
    pub op_us: Sourced<f64>,
    /// GPU µs of one small framework kernel; 0 launches an empty kernel.
    pub kernel_us: Sourced<f64>,
    pub read_us: Sourced<f64>,
    pub graph_launch_us: Sourced<f64>,
    pub upload_us: Sourced<f64>,
    pub upload_syncs: Sourced<bool>,
    /// The host speed the framework costs above were taken at: µs per op of a pass of 24
    /// varied small CUDA ops with no profiler running, in the process that was measured
    /// (scripts/metaprep_host.py `host_speed()`). With it, [`HostProfile::at_host_speed`]
    /// moves the costs to another measured host speed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_speed_us: Option<Sourced<f64>>,
    pub preps: BTreeMap<String, PrepOps>,
    pub program: Vec<Item>,
    /// `read_us` of eager-pinned's read path, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_read_us: Option<Sourced<f64>>,
    /// `read_us` of eager-mapped's read path, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapped_read_us: Option<Sourced<f64>>,
    /// The EAGLE step (`steps --drafter eagle`), when the profile models it: its host
    /// segments, its `draft_passes` groups and the three DSA preps' items. `program` is
    /// DSpark's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eagle_program: Option<Vec<Item>>,
    /// What framework calls cost extra right after the host waited, by the wait's length
    /// (at `host_speed_us`), when measured: `steps` adds it after every read, syncing copy
    /// and gap in the host program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_wait: Option<Sourced<PostWait>>,
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

/// Every GPU item of `order` exactly once in `program`, in that order.
fn check_gpu_order(program: &[Item], order: &[Item], what: &str) -> Result<()> {
    let positions: Vec<(&Item, Vec<usize>)> = order
        .iter()
        .map(|want| {
            let at: Vec<usize> = (0..program.len())
                .filter(|&i| std::mem::discriminant(&program[i]) == std::mem::discriminant(want))
                .collect();
            (want, at)
        })
        .collect();
    for (item, at) in &positions {
        ensure!(
            at.len() == 1,
            "`{what}` must hold exactly one `{}` item, it holds {}",
            item.label(),
            at.len()
        );
    }
    let names: Vec<&str> = order.iter().map(Item::label).collect();
    ensure!(
        positions.windows(2).all(|w| w[0].1[0] < w[1].1[0]),
        "`{what}` must order {}",
        names.join(", ")
    );
    let known: Vec<_> = order.iter().map(std::mem::discriminant).collect();
    if let Some(other) = program
        .iter()
        .find(|i| i.is_gpu() && !known.contains(&std::mem::discriminant(*i)))
    {
        bail!("`{what}` cannot hold a `{}` item", other.label());
    }
    Ok(())
}

/// A duration field of a profile: finite, from 0 to a second.
fn check_us(field: &str, v: f64) -> Result<()> {
    ensure!(
        v.is_finite() && (0.0..=1e6).contains(&v),
        "{field} = {v} is not a duration in µs between 0 and 1e6"
    );
    Ok(())
}

/// The top-level field of a profile's JSON that serde refused (its own error names a line and
/// column, not the field): the first whose value, put into the built-in `pytorch` profile,
/// breaks it there too.
fn field_of_error(text: &str) -> Option<String> {
    let serde_json::Value::Object(given) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let (_, base) = BUILT_IN.iter().find(|(n, _)| *n == "pytorch")?;
    let base: serde_json::Value = serde_json::from_str(base).ok()?;
    given.into_iter().find_map(|(key, value)| {
        let mut probe = base.clone();
        probe.as_object_mut()?.insert(key.clone(), value);
        serde_json::from_value::<HostProfile>(probe)
            .is_err()
            .then_some(key)
    })
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
/// `[block] * bs` up before both replays; SGLang's merged spec-v2 DSA path (sgl-project/sglang
/// #32219) uploads `[N] * bs` before each draft-extend replay only, its decode and
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
    /// `native`, `pytorch`, or a path to a JSON profile.
    pub fn load(name_or_path: &str) -> Result<HostProfile> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(text).with_context(|| format!("built-in profile {name_or_path}"));
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            bail!(
                "--host-profile: `{name_or_path}` is neither a built-in profile ({}) nor a file",
                BUILT_IN.map(|(n, _)| n).join(", ")
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the host profile {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("host profile {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<HostProfile> {
        let profile: HostProfile = serde_json::from_str(text).map_err(|e| {
            let why = match field_of_error(text) {
                Some(field) => format!("not a host profile: field `{field}`"),
                None => "not a host profile".to_string(),
            };
            anyhow::Error::new(e).context(why)
        })?;
        profile.validate()?;
        Ok(profile)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile serialises") + "\n"
    }

    fn validate(&self) -> Result<()> {
        for (field, v) in [
            ("op_us", self.op_us.value),
            ("kernel_us", self.kernel_us.value),
            ("read_us", self.read_us.value),
            ("graph_launch_us", self.graph_launch_us.value),
            ("upload_us", self.upload_us.value),
        ] {
            check_us(field, v)?;
        }
        if let Some(post_wait) = &self.post_wait {
            post_wait.value.validate()?;
        }
        if let Some(speed) = &self.host_speed_us {
            check_us("host_speed_us", speed.value)?;
            ensure!(
                speed.value > 0.0,
                "host_speed_us = 0 is no host speed: give the µs per op it was measured at"
            );
        }
        let mut families = Drafter::Dspark.families().to_vec();
        if self.eagle_program.is_some() {
            families.extend(Drafter::Eagle.families());
        }
        families.sort();
        families.dedup();
        for family in families {
            let prep = self.preps.get(family.name()).with_context(|| {
                format!(
                    "`preps` has no entry for {}, which a step prepares",
                    family.name()
                )
            })?;
            for (arm, ops) in [
                ("eager_sync", prep.eager_sync),
                ("eager_device", prep.eager_device),
                ("graph", prep.graph),
                ("graph_upload", prep.graph_upload.unwrap_or_default()),
            ] {
                let at = format!("preps.{}.{arm}", family.name());
                ensure!(ops.launches <= ops.ops, "{at}: more launches than ops");
                ensure!(
                    ops.ops_before_read <= ops.ops,
                    "{at}: ops_before_read is more than ops"
                );
                if let Some(v) = ops.op_us {
                    check_us(&format!("{at}.op_us"), v)?;
                }
                ensure!(
                    arm == "eager_sync" || ops.reads == 0,
                    "{at}: only eager_sync reads"
                );
            }
            if let Some(v) = prep.kernel_us {
                check_us(&format!("preps.{}.kernel_us", family.name()), v)?;
            }
            if let Some(by_batch) = &prep.kernel_us_by_batch {
                let at = format!("preps.{}.kernel_us_by_batch", family.name());
                ensure!(!by_batch.is_empty(), "{at}: give at least one batch size");
                ensure!(!by_batch.contains_key(&0), "{at}: batch sizes start at 1");
                for (bs, &v) in by_batch {
                    check_us(&format!("{at}.{bs}"), v)?;
                }
            }
            ensure!(
                prep.eager_sync.reads >= 1,
                "preps.{}.eager_sync: the eager-sync arm reads at least once",
                family.name()
            );
        }
        check_gpu_order(&self.program, &GPU_ITEMS_IN_ORDER, "program")?;
        let mut hosts: Vec<&Item> = self.program.iter().collect();
        if let Some(eagle) = &self.eagle_program {
            for item in eagle {
                match item {
                    Item::DraftPasses { items } => {
                        if let Some(bad) = items.iter().find(|i| {
                            !matches!(i, Item::Host { .. } | Item::DecodePrep | Item::DraftForward)
                        }) {
                            bail!(
                                "`eagle_program`: a `draft_passes` group holds host items, \
                                 decode preps and draft forwards only, not `{}`",
                                bad.label()
                            );
                        }
                        hosts.extend(items);
                    }
                    Item::DecodePrep | Item::DraftForward => bail!(
                        "`eagle_program`: a `{}` belongs inside a `draft_passes` group",
                        item.label()
                    ),
                    other => hosts.push(other),
                }
            }
            check_gpu_order(
                &expand_passes(eagle, 1),
                &EAGLE_GPU_ITEMS_IN_ORDER,
                "eagle_program",
            )?;
        }
        for item in hosts {
            if let Item::Host {
                name,
                us,
                ops,
                launches,
                ..
            } = item
            {
                check_us(&format!("host item `{name}`: us"), *us)?;
                ensure!(
                    launches.unwrap_or(0) <= *ops,
                    "host item `{name}`: more launches than ops"
                );
            }
        }
        for path in [ReadPath::Pinned, ReadPath::Mapped] {
            if let Some(cost) = self.read_cost(path) {
                check_us(&read_field(path), cost.value)?;
            }
        }
        Ok(())
    }

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

    /// The items one step of `drafter` runs at block size `block`, in order: its program with
    /// each `draft_passes` group repeated [`Drafter::draft_passes`] times.
    pub fn step_items(&self, drafter: Drafter, block: u32) -> Result<Vec<Item>> {
        Ok(expand_passes(
            self.program_of(drafter)?,
            drafter.draft_passes(block),
        ))
    }

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
                    Item::Host { us, .. } => *us *= scale,
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

    /// One line for notes and summaries: the name, the key costs and where they came from.
    pub fn describe(&self) -> String {
        format!(
            "{HOST_PROFILE_NOTE}{}` (op {:.1} us, read {:.1} us, graph launch {:.1} us; {})",
            self.name,
            self.op_us.value,
            self.read_us.value,
            self.graph_launch_us.value,
            self.source
        )
    }
}

/// The profile field that holds `path`'s read cost.
fn read_field(path: ReadPath) -> String {
    match path {
        ReadPath::Pageable => "read_us".into(),
        _ => format!("{path}_read_us"),
    }
}

/// `points` (batch size → µs, not empty) at `batch`: linear between the two measured batch
/// sizes around it, the nearest one's value beyond them.
fn interpolate(points: &BTreeMap<u32, f64>, batch: u32) -> f64 {
    let below = points.range(..=batch).next_back();
    let above = points.range(batch..).next();
    match (below, above) {
        (Some((&b0, &v0)), Some((&b1, &v1))) if b1 > b0 => {
            v0 + (v1 - v0) * f64::from(batch - b0) / f64::from(b1 - b0)
        }
        (Some((_, &v)), _) | (None, Some((_, &v))) => v,
        (None, None) => unreachable!("validated: kernel_us_by_batch is not empty"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_profiles_parse_and_name_themselves() {
        for (name, _) in BUILT_IN {
            let p = HostProfile::load(name).unwrap();
            assert_eq!(p.name, name);
            assert!(!p.source.is_empty());
        }
    }

    #[test]
    fn a_prep_s_source_claims_no_gpu_figure_it_lacks() {
        // A source that says where `kernel_us_by_batch` came from must sit beside one: the
        // EAGLE preps (decode, draft-extend) were never timed on the GPU and take the
        // profile's `kernel_us`, which their sources must say instead.
        for (name, _) in BUILT_IN {
            let p = HostProfile::load(name).unwrap();
            for (family, prep) in &p.preps {
                assert!(
                    !prep.source.contains("kernel_us_by_batch =")
                        || prep.kernel_us_by_batch.is_some(),
                    "{name}: preps.{family}: its source gives a kernel_us_by_batch it lacks"
                );
                if prep.kernel_us_by_batch.is_none() && prep.kernel_us.is_none() {
                    assert_eq!(p.prep_kernel_us(phase_of(family), 8), p.kernel_us.value);
                }
            }
        }
    }

    /// The phase whose prep computes `family` (by name).
    fn phase_of(family: &str) -> Phase {
        [Phase::Draft, Phase::Verify, Phase::Decode, Phase::Extend]
            .into_iter()
            .find(|&p| family_of(p).name() == family)
            .unwrap()
    }

    #[test]
    fn native_adds_no_host_cost_to_the_preps() {
        let p = HostProfile::load("native").unwrap();
        for (phase, _) in STEP_FAMILIES {
            for arm in Arm::ALL {
                assert_eq!(p.arm_ops(phase, arm).ops, 0, "{arm}");
            }
        }
    }

    #[test]
    fn unknown_names_and_files_are_refused_with_the_choices() {
        let e = HostProfile::load("tensorflow").unwrap_err().to_string();
        assert!(e.contains("native, pytorch"), "{e}");
    }

    fn native_json() -> serde_json::Value {
        serde_json::from_str(BUILT_IN[0].1).unwrap()
    }

    fn parse_err(v: &serde_json::Value) -> String {
        format!("{:#}", HostProfile::parse(&v.to_string()).unwrap_err())
    }

    #[test]
    fn a_program_must_hold_each_gpu_item_once_and_in_order() {
        let mut v = native_json();
        let program = v["program"].as_array_mut().unwrap();
        program.retain(|i| i["kind"] != "accept");
        assert!(parse_err(&v).contains("exactly one `accept`"));

        let mut v = native_json();
        let program = v["program"].as_array_mut().unwrap();
        let draft = program
            .iter()
            .position(|i| i["kind"] == "draft_prep")
            .unwrap();
        let fwd = program
            .iter()
            .position(|i| i["kind"] == "draft_forward")
            .unwrap();
        program.swap(draft, fwd);
        assert!(parse_err(&v).contains("must order"), "{}", parse_err(&v));
    }

    #[test]
    fn bad_numbers_and_unknown_fields_are_refused() {
        let mut v = native_json();
        v["op_us"]["value"] = serde_json::json!(-1.0);
        assert!(parse_err(&v).contains("op_us"));
        let mut v = native_json();
        v["preps"]["dsa_target_verify"]["eager_sync"]["reads"] = serde_json::json!(0);
        assert!(parse_err(&v).contains("reads at least once"));
        let mut v = native_json();
        v["preps"]["dsa_target_verify"]["eager_device"]["launches"] = serde_json::json!(99);
        assert!(parse_err(&v).contains("more launches than ops"));
        let mut v = native_json();
        v["opus"] = serde_json::json!(1);
        assert!(parse_err(&v).contains("opus"), "{}", parse_err(&v));
        let mut v = native_json();
        v["preps"]
            .as_object_mut()
            .unwrap()
            .remove("dspark_draft_block");
        assert!(parse_err(&v).contains("dspark_draft_block"));
    }

    #[test]
    fn kernel_time_follows_the_batch_size_between_measured_points() {
        let mut v = native_json();
        v["preps"]["dsa_target_verify"]["kernel_us"] = serde_json::json!(9.0);
        v["preps"]["dsa_target_verify"]["kernel_us_by_batch"] =
            serde_json::json!({"1": 2.0, "8": 3.4, "64": 8.0});
        let p = HostProfile::parse(&v.to_string()).unwrap();
        let at = |bs| p.prep_kernel_us(Phase::Verify, bs);
        assert_eq!(at(1), 2.0);
        assert!((at(4) - 2.6).abs() < 1e-12, "{}", at(4)); // 2 + 1.4 * 3/7
        assert_eq!(at(64), 8.0);
        assert_eq!(at(256), 8.0, "beyond the last point: the nearest");
        // The per-batch table wins over the single value; the other family keeps its own.
        assert_eq!(
            p.prep_kernel_us(Phase::Draft, 8),
            p.preps["dspark_draft_block"]
                .kernel_us
                .unwrap_or(p.kernel_us.value)
        );

        v["preps"]["dsa_target_verify"]["kernel_us_by_batch"] = serde_json::json!({"0": 1.0});
        assert!(
            parse_err(&v).contains("batch sizes start at 1"),
            "{}",
            parse_err(&v)
        );
        v["preps"]["dsa_target_verify"]["kernel_us_by_batch"] = serde_json::json!({"8": -1.0});
        assert!(
            parse_err(&v).contains("kernel_us_by_batch.8"),
            "{}",
            parse_err(&v)
        );
    }

    #[test]
    fn scaling_multiplies_host_durations_only() {
        let p = HostProfile::load("pytorch").unwrap();
        let s = p.scaled(2.0).unwrap();
        assert_eq!(s.op_us.value, 2.0 * p.op_us.value);
        assert_eq!(s.read_us, p.read_us);
        assert_eq!(s.graph_launch_us, p.graph_launch_us);
        for (a, b) in p.program.iter().zip(&s.program) {
            if let (Item::Host { us: x, ops: n, .. }, Item::Host { us: y, ops: m, .. }) = (a, b) {
                assert_eq!(*y, 2.0 * x);
                assert_eq!(n, m);
            }
        }
        let (eagle, scaled_eagle) = (
            p.step_items(Drafter::Eagle, 5).unwrap(),
            s.step_items(Drafter::Eagle, 5).unwrap(),
        );
        let scheduler = |items: &[Item]| match &items[0] {
            Item::Host { us, .. } => *us,
            other => panic!("{other:?}"),
        };
        assert_eq!(scheduler(&scaled_eagle), 2.0 * scheduler(&eagle));
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            assert!(p.scaled(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_read_path_has_its_own_cost_and_a_missing_one_refuses_its_arm() {
        let mut p = HostProfile::load("native").unwrap();
        assert_eq!(p.read_cost(ReadPath::Pageable), Some(&p.read_us));
        p.pinned_read_us = None;
        p.mapped_read_us = Some(Sourced {
            value: 3.5,
            source: "test".into(),
        });
        p.require_read_costs(&[Arm::EagerSync, Arm::EagerMapped, Arm::Graph])
            .unwrap();
        let e = p
            .require_read_costs(&[Arm::EagerSync, Arm::EagerPinned])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pinned_read_us") && e.contains("eager-pinned") && e.contains("native"),
            "{e}"
        );
        let note = p
            .read_paths_note(&[Arm::EagerSync, Arm::EagerPinned, Arm::EagerMapped])
            .unwrap();
        assert!(
            note.starts_with("host profile `native` read paths: "),
            "{note}"
        );
        assert!(note.contains("eager-pinned pinned_read_us: none"), "{note}");
        assert!(
            note.contains("eager-mapped mapped_read_us 3.5 us (test)"),
            "{note}"
        );
        assert_eq!(p.read_paths_note(&[Arm::EagerSync, Arm::Graph]), None);
        // The reading arms issue eager-sync's framework ops; only the read differs.
        for arm in [Arm::EagerPinned, Arm::EagerMapped] {
            assert_eq!(
                p.arm_ops(Phase::Verify, arm),
                p.arm_ops(Phase::Verify, Arm::EagerSync)
            );
        }
        let mut v = native_json();
        v["mapped_read_us"] = serde_json::json!({"value": -2.0, "source": "x"});
        assert!(
            parse_err(&v).contains("mapped_read_us"),
            "{}",
            parse_err(&v)
        );
    }

    fn labels(items: &[Item]) -> Vec<&str> {
        items.iter().map(Item::label).collect()
    }

    #[test]
    fn the_eagle_step_drafts_then_verifies_then_extends_then_accepts() {
        let p = HostProfile::load("pytorch").unwrap();
        // Block 5: N = 5 verify tokens, speculative_num_steps 4, three draft passes.
        let items = p.step_items(Drafter::Eagle, 5).unwrap();
        assert_eq!(
            labels(&items),
            [
                "scheduler",
                "draft input",
                "decode prep",
                "decode prep",
                "decode prep",
                "draft forward",
                "draft forward",
                "draft forward",
                "verify input",
                "verify prep",
                "verify forward",
                "accept sampling",
                "draft-extend input",
                "extend prep",
                "extend forward",
                "next draft input",
                "accept",
            ]
        );
        let count =
            |items: &[Item], want: &str| labels(items).iter().filter(|&&l| l == want).count();
        for (block, passes) in [(2, 0), (3, 1), (8, 6)] {
            let items = p.step_items(Drafter::Eagle, block).unwrap();
            assert_eq!(count(&items, "decode prep"), passes, "block {block}");
            assert_eq!(count(&items, "draft forward"), passes, "block {block}");
            assert_eq!(count(&items, "extend prep"), 1, "block {block}");
        }
        // The seams are framework ops, with the ops the count found launching.
        let seams: Vec<(&str, u32, Option<u32>)> = items
            .iter()
            .filter_map(|i| match i {
                Item::Host {
                    name,
                    ops,
                    launches,
                    ..
                } if *ops > 0 => Some((name.as_str(), *ops, *launches)),
                _ => None,
            })
            .collect();
        assert_eq!(
            seams,
            [
                ("draft input", 3, Some(1)),
                ("verify input", 5, Some(1)),
                ("accept sampling", 16, Some(6)),
                ("draft-extend input", 6, Some(1)),
                ("next draft input", 2, Some(2)),
            ]
        );
        // DSpark's step is the profile's `program`, at every block.
        assert_eq!(p.step_items(Drafter::Dspark, 8).unwrap(), p.program);
        // The three preps' counts are SGLang's own (results/2026-12-01-sglang-op-counts).
        let sync = |phase| p.arm_ops(phase, Arm::EagerSync);
        assert_eq!(
            (sync(Phase::Decode).ops, sync(Phase::Decode).reads),
            (19, 1)
        );
        assert_eq!(
            (sync(Phase::Verify).ops, sync(Phase::Verify).reads),
            (30, 1)
        );
        assert_eq!(
            (sync(Phase::Extend).ops, sync(Phase::Extend).reads),
            (30, 3)
        );
        let native = HostProfile::load("native").unwrap();
        assert_eq!(
            labels(&native.step_items(Drafter::Eagle, 3).unwrap()),
            [
                "scheduler",
                "decode prep",
                "draft forward",
                "verify prep",
                "verify forward",
                "extend prep",
                "extend forward",
                "accept"
            ]
        );
        let e = HostProfile::load("pytorch-transcription")
            .unwrap()
            .step_items(Drafter::Eagle, 5)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no `eagle_program`") && e.contains("--drafter eagle"),
            "{e}"
        );
    }

    #[test]
    fn an_eagle_program_is_checked_as_dspark_s_is() {
        let pytorch = || -> serde_json::Value { serde_json::from_str(BUILT_IN[1].1).unwrap() };
        // The pytorch profile with its EAGLE program edited by `edit`: the parse error.
        let refused = |edit: &dyn Fn(&mut Vec<serde_json::Value>)| -> String {
            let mut v = pytorch();
            let mut items = v["eagle_program"].as_array().unwrap().clone();
            edit(&mut items);
            v["eagle_program"] = serde_json::json!(items);
            parse_err(&v)
        };
        let at = |items: &[serde_json::Value], kind: &str| {
            items.iter().position(|i| i["kind"] == kind).unwrap()
        };
        type Edit<'a> = &'a dyn Fn(&mut Vec<serde_json::Value>);
        let cases: [(Edit, &str); 5] = [
            (
                &|items| {
                    let (v, e) = (at(items, "verify_prep"), at(items, "extend_prep"));
                    items.swap(v, e)
                },
                "`eagle_program` must order decode prep",
            ),
            (
                &|items| items.retain(|i| i["kind"] != "extend_forward"),
                "exactly one `extend forward`",
            ),
            (
                &|items| items.insert(1, serde_json::json!({"kind": "decode_prep"})),
                "inside a `draft_passes` group",
            ),
            (
                &|items| {
                    let group = serde_json::json!({"kind": "draft_passes",
                                                   "items": [{"kind": "verify_prep"}]});
                    items.insert(1, group)
                },
                "group holds host items, decode preps and draft forwards only, not `verify prep`",
            ),
            (
                &|items| items[1]["launches"] = serde_json::json!(99),
                "more launches than ops",
            ),
        ];
        for (edit, why) in cases {
            let e = refused(edit);
            assert!(e.contains(why), "{why}: {e}");
        }
        // DSpark's program holds no EAGLE item.
        let mut v = pytorch();
        v["program"]
            .as_array_mut()
            .unwrap()
            .insert(1, serde_json::json!({"kind": "extend_prep"}));
        assert!(
            parse_err(&v).contains("cannot hold a `extend prep`"),
            "{}",
            parse_err(&v)
        );
        // The EAGLE step's preps must be in `preps`, and are not needed without its program.
        let mut v = pytorch();
        v["preps"].as_object_mut().unwrap().remove("dsa_decode");
        assert!(
            parse_err(&v).contains("no entry for dsa_decode"),
            "{}",
            parse_err(&v)
        );
        let mut v = native_json();
        v.as_object_mut().unwrap().remove("eagle_program");
        v["preps"].as_object_mut().unwrap().remove("dsa_decode");
        assert!(HostProfile::parse(&v.to_string()).is_ok());
    }

    #[test]
    fn graph_upload_uploads_before_the_draft_extend_replay_only_in_the_eagle_step() {
        for phase in [Phase::Decode, Phase::Verify] {
            assert_eq!(
                prep_arm(Drafter::Eagle, phase, Arm::GraphUpload),
                Arm::Graph
            );
        }
        assert_eq!(
            prep_arm(Drafter::Eagle, Phase::Extend, Arm::GraphUpload),
            Arm::GraphUpload
        );
        for phase in [Phase::Draft, Phase::Verify] {
            assert_eq!(
                prep_arm(Drafter::Dspark, phase, Arm::GraphUpload),
                Arm::GraphUpload
            );
        }
        for arm in Arm::ALL.into_iter().filter(|&a| a != Arm::GraphUpload) {
            for phase in [Phase::Decode, Phase::Verify, Phase::Extend] {
                assert_eq!(prep_arm(Drafter::Eagle, phase, arm), arm);
            }
        }
        assert_eq!(
            phases_of(Drafter::Eagle),
            [Phase::Decode, Phase::Verify, Phase::Extend]
        );
        assert_eq!(phases_of(Drafter::Dspark), [Phase::Draft, Phase::Verify]);
    }

    #[test]
    fn round_trips_through_json() {
        let p = HostProfile::load("pytorch").unwrap();
        assert_eq!(HostProfile::parse(&p.to_json()).unwrap(), p);
    }
}
