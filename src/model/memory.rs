//! Which cells of a `steps` grid a GPU can hold: its share of every weight of the target and
//! of the draft (the draft runs beside the target on the same GPUs) and the KV cache of its
//! requests, within its memory less a share kept for activations and workspace. A cell no GPU
//! could hold times a step no engine runs: the default grid leaves it out, and a layout named
//! with `--tp` that holds none of the run's batches is refused before any measurement.

use super::profile::{GpuBytes, Profile};
use crate::axes::Layout;
use crate::results::env::MEMORY_NOTE;
use anyhow::{ensure, Result};
use std::fmt;

/// Share of a GPU's memory kept back for activations, workspace, CUDA graphs and allocator
/// slack; weights and KV cache may use the rest. vLLM keeps all of it within
/// `gpu_memory_utilization`, 0.9 of the GPU by default; SGLang holds weights and the KV pool
/// within `mem_fraction_static`, chosen per GPU and TP size in the same 0.8-0.9 range. 10%
/// is the round figure: a cell refused here would not start in either engine at its defaults.
pub const RESERVED_FRACTION: f64 = 0.10;

const GIB: f64 = (1u64 << 30) as f64;

fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB
}

/// The memory of one GPU, and where that figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuMemory {
    pub bytes: u64,
    /// `--gpu-memory-gib` (planning for another GPU) rather than the device's own total.
    pub from_flag: bool,
    /// The H200's memory the default model is planned on where it fits no layout of the GPU
    /// at hand ([`Deployment::plan_default`]).
    #[serde(default)]
    pub stand_in: bool,
}

/// An H200's memory, GiB: the GPU whose eight hold the default model (moe-large with its
/// draft needs 83.8 GiB a GPU at tp8).
pub const STAND_IN_GIB: f64 = 141.0;

/// The most `--gpu-memory-gib` takes: about 70 times an H200's, room for what-if plans of GPUs to
/// come; beyond it a value is a typo.
pub const MAX_GPU_MEMORY_GIB: f64 = 10_000.0;

impl GpuMemory {
    /// `--gpu-memory-gib`: the memory of the GPU to plan for.
    pub fn from_gib(gib: f64) -> Result<GpuMemory> {
        ensure!(
            gib.is_finite() && gib > 0.0 && gib <= MAX_GPU_MEMORY_GIB,
            "--gpu-memory-gib: {gib} is not a memory size: give the GiB of one GPU, above 0 \
             and at most {MAX_GPU_MEMORY_GIB} (an H200 reports about 140)"
        );
        Ok(GpuMemory {
            bytes: (gib * GIB) as u64,
            from_flag: true,
            stand_in: false,
        })
    }

    /// The device's own total memory.
    pub fn device(bytes: u64) -> GpuMemory {
        GpuMemory {
            bytes,
            from_flag: false,
            stand_in: false,
        }
    }

    /// [`STAND_IN_GIB`] a GPU, where the default model holds no layout of the GPU planned for.
    pub fn stand_in() -> GpuMemory {
        GpuMemory {
            bytes: (STAND_IN_GIB * GIB) as u64,
            from_flag: false,
            stand_in: true,
        }
    }

    /// Bytes weights and KV cache may take.
    pub fn usable(self) -> u64 {
        (self.bytes as f64 * (1.0 - RESERVED_FRACTION)) as u64
    }

    fn source(self) -> &'static str {
        match (self.stand_in, self.from_flag) {
            (true, _) => "an H200's, standing in",
            (false, true) => "--gpu-memory-gib",
            (false, false) => "device",
        }
    }
}

/// Bytes one GPU of `layout` holds for `batch_size` requests of `context_len` tokens: the
/// target's and the draft's weights and KV cache ([`Profile::held_bytes`]), the draft's
/// embedding and head left out when it uses the target's.
pub fn held_bytes(
    target: &Profile,
    draft: &Profile,
    layout: Layout,
    batch_size: u32,
    context_len: u32,
) -> GpuBytes {
    let rank_batch = layout.rank_batch(batch_size);
    // Sharing needs the same vocabulary and hidden size: the head bytes say both.
    let shared = draft.shares_target_vocab && draft.head_weight_bytes == target.head_weight_bytes;
    target.held_bytes(layout, rank_batch, context_len, true)
        + draft.held_bytes(layout, rank_batch, context_len, !shared)
}

/// A cell a GPU cannot hold: what it needs against what the GPU has, and what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct NotDeployable {
    pub models: String,
    pub layout: Layout,
    pub batch_size: u32,
    pub held: GpuBytes,
    pub memory: GpuMemory,
    /// What to do instead; empty where the caller has no advice.
    pub advice: String,
}

impl fmt::Display for NotDeployable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at bs {} needs {:.1} GiB per GPU for {} (weights {:.1} GiB, KV cache {:.1} GiB), \
             more than the {:.1} GiB left for them on a GPU of {:.1} GiB ({}) with {:.0}% kept \
             for activations and workspace",
            self.layout,
            self.batch_size,
            gib(self.held.total),
            self.models,
            gib(self.held.weights),
            gib(self.held.kv),
            gib(self.memory.usable()),
            gib(self.memory.bytes),
            self.memory.source(),
            RESERVED_FRACTION * 100.0
        )?;
        if !self.advice.is_empty() {
            write!(f, ": {}", self.advice)?;
        }
        Ok(())
    }
}

impl std::error::Error for NotDeployable {}

/// A refused cell is input to fix (exit 2): its text, as [`crate::exit::BadInput`].
impl From<NotDeployable> for crate::exit::BadInput {
    fn from(e: NotDeployable) -> Self {
        crate::exit::BadInput(e.to_string())
    }
}

/// Whether one GPU of `layout` holds the target and the draft at `batch_size` requests of
/// `context_len` tokens within `memory`.
pub fn check(
    target: &Profile,
    draft: &Profile,
    layout: Layout,
    batch_size: u32,
    context_len: u32,
    memory: GpuMemory,
) -> Result<(), NotDeployable> {
    let held = held_bytes(target, draft, layout, batch_size, context_len);
    if held.total <= memory.usable() {
        return Ok(());
    }
    Err(NotDeployable {
        models: format!("{} + {}", target.name, draft.name),
        layout,
        batch_size,
        held,
        memory,
        advice: String::new(),
    })
}

/// The cells of a run that fit, and those left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// Each layout that holds at least one batch, with the batches it holds, in run order.
    pub cells: Vec<(Layout, Vec<u32>)>,
    /// One per cell left out.
    pub left_out: Vec<NotDeployable>,
    /// `None` when nothing was checked (`--forward-us` runs no model).
    pub memory: Option<GpuMemory>,
    /// Why the cells were planned on a stand-in GPU's memory, where they were.
    pub replanned: Option<String>,
}

impl Deployment {
    /// Every cell, unchecked: the stand-in forward of `--forward-us` models no weights.
    pub fn unchecked(layouts: &[Layout], batch_sizes: &[u32]) -> Deployment {
        Deployment {
            cells: layouts.iter().map(|&l| (l, batch_sizes.to_vec())).collect(),
            left_out: Vec::new(),
            memory: None,
            replanned: None,
        }
    }

    /// The cells of `layouts` x `batch_sizes` one GPU of `memory` holds. A layout holding none
    /// is left out, or refused when `layouts_named` (the user asked for it by name); no cell
    /// at all is refused too. Refusals advise a layout that holds the smallest batch.
    pub fn plan(
        target: &Profile,
        draft: &Profile,
        layouts: &[Layout],
        layouts_named: bool,
        batch_sizes: &[u32],
        context_len: u32,
        memory: GpuMemory,
    ) -> Result<Deployment, NotDeployable> {
        let mut plan = Deployment {
            cells: Vec::new(),
            left_out: Vec::new(),
            memory: Some(memory),
            replanned: None,
        };
        let check = |layout, bs| check(target, draft, layout, bs, context_len, memory);
        let smallest = batch_sizes.iter().copied().min().unwrap_or(1);
        let refuse = |mut e: NotDeployable| {
            let fits: Vec<String> = Layout::all()
                .into_iter()
                .filter(|&l| check(l, smallest).is_ok())
                .map(|l| l.to_string())
                .collect();
            let larger = "pass --gpu-memory-gib to plan for a larger GPU";
            e.advice = if fits.is_empty() {
                format!("no layout holds bs {smallest}: {larger}")
            } else {
                format!("use {}, or {larger}", fits.join(" or "))
            };
            e
        };
        for &layout in layouts {
            let mut held = Vec::new();
            let mut first_refusal = None;
            for &bs in batch_sizes {
                match check(layout, bs) {
                    Ok(()) => held.push(bs),
                    Err(e) => {
                        first_refusal.get_or_insert_with(|| e.clone());
                        plan.left_out.push(e);
                    }
                }
            }
            match (held.is_empty(), first_refusal) {
                (true, Some(e)) if layouts_named => {
                    let mut e = refuse(e);
                    e.advice = format!("--tp {layout} holds no batch of the run; {}", e.advice);
                    return Err(e);
                }
                (false, _) => plan.cells.push((layout, held)),
                _ => {}
            }
        }
        if plan.cells.is_empty() {
            // The smallest batch on the layout that comes closest.
            let closest = layouts
                .iter()
                .filter_map(|&l| check(l, smallest).err())
                .min_by_key(|e| e.held.total)
                .expect("a grid with no cell left out every cell");
            return Err(refuse(closest));
        }
        Ok(plan)
    }

    /// [`Deployment::plan`] of the default models on no named layout: where they hold no
    /// layout of `memory`, the grid is planned on [`GpuMemory::stand_in`] instead, saying so,
    /// so that `steps` with no flags runs on any GPU (its forwards are stand-ins of a time
    /// set by bytes and this GPU's bandwidth, so nothing needs the weights to fit here).
    pub fn plan_default(
        target: &Profile,
        draft: &Profile,
        layouts: &[Layout],
        batch_sizes: &[u32],
        context_len: u32,
        memory: GpuMemory,
    ) -> Result<Deployment, NotDeployable> {
        let plan = |m| Deployment::plan(target, draft, layouts, false, batch_sizes, context_len, m);
        let refused = match plan(memory) {
            Ok(deployment) => return Ok(deployment),
            Err(e) => e,
        };
        let mut deployment = plan(GpuMemory::stand_in())?;
        deployment.replanned = Some(format!(
            "planned on an H200's {STAND_IN_GIB} GiB a GPU: the default {} + {} holds no \
             layout on a GPU of {:.1} GiB ({}; {} at bs {} needs {:.1} GiB); give --model and \
             --tp, or --gpu-memory-gib, to plan otherwise",
            target.name,
            draft.name,
            gib(memory.bytes),
            memory.source(),
            refused.layout,
            refused.batch_size,
            gib(refused.held.total)
        ));
        Ok(deployment)
    }

    /// Whether the run measures `layout` at `batch_size`.
    pub fn holds(&self, layout: Layout, batch_size: u32) -> bool {
        self.cells
            .iter()
            .any(|(l, batches)| *l == layout && batches.contains(&batch_size))
    }

    /// The layouts the run measures.
    pub fn layouts(&self) -> Vec<Layout> {
        self.cells.iter().map(|(l, _)| *l).collect()
    }

    /// The settings note: the memory per GPU, its source, and the cells left out.
    pub fn note(&self) -> String {
        let Some(memory) = self.memory else {
            return format!("{MEMORY_NOTE} not checked (--forward-us runs no model)");
        };
        let mut line = format!(
            "{MEMORY_NOTE} {}{:.1} GiB ({}), {:.1} GiB of it for weights and KV cache ({:.0}% kept \
             for activations and workspace); ",
            self.replanned.as_ref().map(|r| format!("{r}; ")).unwrap_or_default(),
            gib(memory.bytes),
            memory.source(),
            gib(memory.usable()),
            RESERVED_FRACTION * 100.0
        );
        if self.left_out.is_empty() {
            line.push_str("every cell fits");
            return line;
        }
        line.push_str("left out as not deployable:");
        let mut layouts: Vec<Layout> = self.left_out.iter().map(|e| e.layout).collect();
        layouts.dedup();
        for (i, layout) in layouts.into_iter().enumerate() {
            let cells: Vec<&NotDeployable> = self
                .left_out
                .iter()
                .filter(|e| e.layout == layout)
                .collect();
            let batches = if self.layouts().contains(&layout) {
                let list: Vec<String> = cells.iter().map(|e| e.batch_size.to_string()).collect();
                format!(" at bs {}", list.join(", "))
            } else {
                String::new()
            };
            line.push_str(&format!(
                "{} {layout}{batches} (needs {:.1} GiB at bs {})",
                if i == 0 { "" } else { "," },
                gib(cells[0].held.total),
                cells[0].batch_size
            ));
        }
        line
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
