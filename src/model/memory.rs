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
/// come (`results/` plans with 1000); beyond it a value is a typo.
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
mod tests {
    use super::*;

    fn large() -> Profile {
        Profile::named("moe-large").unwrap()
    }

    fn draft() -> Profile {
        Profile::named("draft-small").unwrap()
    }

    const GB: f64 = 1e9;
    /// The steps defaults: lengths 2048-8192, so 5120 tokens of context.
    const CONTEXT: u32 = 5120;
    /// What an H200 reports (cuDeviceTotalMem).
    const H200: u64 = 150_754_820_096;

    fn held(layout: Layout, bs: u32) -> GpuBytes {
        held_bytes(&large(), &draft(), layout, bs, CONTEXT)
    }

    #[test]
    fn moe_large_holds_every_expert_not_only_those_read() {
        let p = large();
        // 61 layers of MLA + shared expert + 256 routed experts, FP8, then head and embedding
        // in bf16: about 705 GB, DeepSeek-V3's 671 B parameters plus the three dense layers
        // modelled as MoE layers and the bf16 vocabulary weights.
        let per_layer = 187_105_280 + 44_040_192 + 256 * 44_040_192;
        let vocab = 2 * 129_280 * 7168 * 2;
        let tp1 = p.held_bytes(Layout::Tp(1), 1, 0, true);
        assert_eq!(tp1.weights, 61 * per_layer + vocab);
        assert!((700e9..710e9).contains(&(tp1.weights as f64)), "{tp1:?}");
        assert!(tp1.weights > 10 * p.forward_bytes(Layout::Tp(1), 1, 0, 1).weights);
        // tp splits every weight; dep4 holds whole attention and a quarter of the experts.
        assert_eq!(
            p.held_bytes(Layout::Tp(4), 1, 0, true).weights,
            61 * (per_layer / 4) + vocab / 4
        );
        assert_eq!(
            p.held_bytes(Layout::Dep(4), 1, 0, true).weights,
            61 * (187_105_280 + 44_040_192 + 64 * 44_040_192) + vocab
        );
        assert_eq!(
            p.held_bytes(Layout::Tp(1), 1, 0, false).weights,
            61 * per_layer,
            "without its vocabulary weights"
        );
    }

    #[test]
    fn held_kv_is_the_kv_a_forward_reads() {
        let (p, d) = (large(), Profile::custom(1_000_000, 4, 100, 4096).unwrap());
        for layout in Layout::all() {
            for profile in [&p, &d] {
                assert_eq!(
                    profile.held_bytes(layout, 16, 4096, true).kv,
                    profile.forward_bytes(layout, 16, 4096, 3).kv,
                    "{layout}"
                );
            }
        }
    }

    #[test]
    fn draft_adds_its_layer_and_uses_the_targets_vocabulary() {
        let (t, d) = (large(), draft());
        let both = held_bytes(&t, &d, Layout::Tp(8), 1, CONTEXT);
        let target = t.held_bytes(Layout::Tp(8), 1, CONTEXT, true);
        // One layer of MLA, shared expert, [embedding; hidden] projection and 256 experts.
        let draft_layer = 187_105_280 + 44_040_192 + 2 * 7168 * 7168 + 256 * 44_040_192;
        assert_eq!(both.weights, target.weights + draft_layer / 8);
        assert_eq!(both.kv, target.kv + CONTEXT as u64 * 1152);
        // Beside a target without a head (custom), the draft holds its own.
        let custom = Profile::custom(1_000_000, 4, 100, 4096).unwrap();
        let own = held_bytes(&custom, &d, Layout::Tp(1), 1, 0);
        assert_eq!(
            own.weights,
            custom.held_bytes(Layout::Tp(1), 1, 0, true).weights
                + d.held_bytes(Layout::Tp(1), 1, 0, true).weights
        );
    }

    #[test]
    fn on_an_h200_only_tp8_holds_moe_large() {
        // The figures the README quotes, in GB per GPU at bs 1.
        let gb = |l| held(l, 1).total as f64 / GB;
        assert!(
            (717.0..718.0).contains(&gb(Layout::Tp(1))),
            "{}",
            gb(Layout::Tp(1))
        );
        assert!(
            (179.0..180.0).contains(&gb(Layout::Tp(4))),
            "{}",
            gb(Layout::Tp(4))
        );
        assert!(
            (192.0..194.0).contains(&gb(Layout::Dep(4))),
            "{}",
            gb(Layout::Dep(4))
        );
        assert!(
            (89.0..91.0).contains(&gb(Layout::Tp(8))),
            "{}",
            gb(Layout::Tp(8))
        );
        for memory in [GpuMemory::device(H200), GpuMemory::from_gib(141.0).unwrap()] {
            let fits: Vec<Layout> = Layout::all()
                .into_iter()
                .filter(|&l| check(&large(), &draft(), l, 1, CONTEXT, memory).is_ok())
                .collect();
            assert_eq!(fits, [Layout::Tp(8)], "{memory:?}");
        }
        // tp4's 167.3 GiB fit a GPU of 190 GiB, of which 171 GiB are usable.
        let big = GpuMemory::from_gib(190.0).unwrap();
        assert!(check(&large(), &draft(), Layout::Tp(4), 1, CONTEXT, big).is_ok());
    }

    #[test]
    fn the_mla_cache_of_a_large_batch_outgrows_tp8() {
        let memory = GpuMemory::device(H200);
        let fits = |bs| check(&large(), &draft(), Layout::Tp(8), bs, CONTEXT, memory).is_ok();
        assert!(fits(1) && fits(8) && fits(64));
        // 256 x 5120 tokens x 1152 B x 62 layers = 93.6 GB of cache on every tp8 GPU.
        assert_eq!(held(Layout::Tp(8), 256).kv, 256 * 5120 * 1152 * 62);
        assert!(!fits(256));
    }

    #[test]
    fn the_reserve_is_kept_out_of_the_memory() {
        let m = GpuMemory::device(1_000_000_000);
        assert_eq!(m.usable(), 900_000_000);
        assert_eq!(GpuMemory::from_gib(1.0).unwrap().bytes, 1 << 30);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = GpuMemory::from_gib(bad).unwrap_err().to_string();
            assert!(e.contains("--gpu-memory-gib"), "{e}");
        }
    }

    fn plan(
        layouts: &[Layout],
        named: bool,
        batches: &[u32],
        gib: f64,
    ) -> Result<Deployment, NotDeployable> {
        let memory = GpuMemory::from_gib(gib).unwrap();
        Deployment::plan(&large(), &draft(), layouts, named, batches, CONTEXT, memory)
    }

    #[test]
    fn the_default_grid_leaves_out_what_does_not_fit() {
        let d = plan(&Layout::all(), false, &[1, 8, 64, 256], 141.0).unwrap();
        assert_eq!(d.cells, [(Layout::Tp(8), vec![1, 8, 64])]);
        assert_eq!(d.layouts(), [Layout::Tp(8)]);
        assert!(d.holds(Layout::Tp(8), 64) && !d.holds(Layout::Tp(8), 256));
        assert!(!d.holds(Layout::Tp(1), 1));
        let note = d.note();
        assert!(note.starts_with(MEMORY_NOTE), "{note}");
        assert!(note.contains("141.0 GiB (--gpu-memory-gib)"), "{note}");
        assert!(note.contains(" tp1 (needs 668.2 GiB at bs 1)"), "{note}");
        assert!(note.contains(", dep4 (needs"), "{note}");
        assert!(
            note.contains(", tp8 at bs 256 (needs 170.7 GiB at bs 256)"),
            "{note}"
        );
        assert_eq!(note.lines().count(), 1);
        // A larger GPU keeps every cell.
        let all = plan(&Layout::all(), false, &[1, 8], 2000.0).unwrap();
        assert_eq!(all.cells.len(), 6);
        assert!(all.note().ends_with("every cell fits"), "{}", all.note());
    }

    #[test]
    fn a_named_layout_that_holds_no_batch_is_refused() {
        let e = plan(&[Layout::Tp(1)], true, &[1, 8], 141.0).unwrap_err();
        assert_eq!((e.layout, e.batch_size), (Layout::Tp(1), 1));
        let message = e.to_string();
        for needle in [
            "tp1 at bs 1 needs 668.2 GiB per GPU for moe-large + draft-small",
            "126.9 GiB left for them on a GPU of 141.0 GiB (--gpu-memory-gib)",
            "--tp tp1 holds no batch of the run; use tp8, or pass --gpu-memory-gib",
        ] {
            assert!(message.contains(needle), "`{needle}` in {message}");
        }
        assert_eq!(message.lines().count(), 1);
        // Named and fitting some batches: the others are left out, not refused.
        let d = plan(&[Layout::Tp(8)], true, &[1, 256], 141.0).unwrap();
        assert_eq!(d.cells, [(Layout::Tp(8), vec![1])]);
        assert_eq!(d.left_out.len(), 1);
    }

    #[test]
    fn a_grid_with_no_cell_that_fits_is_refused() {
        let e = plan(&Layout::all(), false, &[1], 80.0).unwrap_err();
        // The closest layout is named, and no layout is advised.
        assert_eq!(e.layout, Layout::Tp(8));
        assert!(e.advice.contains("no layout holds bs 1"), "{e}");
        let e = plan(&[Layout::Tp(2), Layout::Dep(2)], false, &[1, 8], 141.0).unwrap_err();
        assert!(
            e.to_string().contains("use tp8, or pass --gpu-memory-gib"),
            "{e}"
        );
    }

    #[test]
    fn the_default_models_plan_on_an_h200_where_they_fit_no_layout_of_the_gpu() {
        let default = |gib: f64| {
            let memory = GpuMemory::from_gib(gib).unwrap();
            let batches = [1, 4, 16, 64];
            Deployment::plan_default(
                &large(),
                &draft(),
                &Layout::all(),
                &batches,
                CONTEXT,
                memory,
            )
            .unwrap()
        };
        for gib in [16.0, 40.0, 80.0] {
            let d = default(gib);
            assert_eq!(d.memory, Some(GpuMemory::stand_in()), "{gib}");
            assert_eq!(d.layouts(), [Layout::Tp(8)], "{gib}");
            let note = d.note();
            assert!(note.starts_with(MEMORY_NOTE), "{note}");
            assert!(
                note.contains(&format!("planned on an H200's 141 GiB a GPU: the default moe-large + draft-small holds no layout on a GPU of {gib:.1} GiB (--gpu-memory-gib; tp8 at bs 1 needs 83.8 GiB)")),
                "{note}"
            );
            assert!(note.contains("(an H200's, standing in)"), "{note}");
        }
        // Where it fits, the GPU's own plan, with no word of a stand-in.
        let fits = default(141.0);
        assert_eq!(
            (fits.replanned, fits.memory.unwrap().stand_in),
            (None, false)
        );
        // Named models and layouts are planned as named: an 80 GiB GPU holds none.
        assert!(plan(&Layout::all(), false, &[1], 80.0).is_err());
        assert!(plan(&[Layout::Tp(8)], true, &[1], 80.0).is_err());
    }

    #[test]
    fn unchecked_keeps_every_cell() {
        let d = Deployment::unchecked(&[Layout::Tp(1), Layout::Dep(4)], &[1, 256]);
        assert!(d.holds(Layout::Tp(1), 256) && d.holds(Layout::Dep(4), 1));
        assert!(d.note().contains("not checked"), "{}", d.note());
    }
}
