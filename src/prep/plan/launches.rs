//! The launches a plan prepares once: the kernels' argument blocks (mirrors of the CUDA
//! structs, filled from the plan's buffers), each family's kernels and modules, the staged
//! launches of an arm (lengths, page table, DSpark's SWA indices) sized by its page rule, the
//! fused launch, and the poison fills. Kept apart from the plan, which only owns the buffers
//! and runs the arms.

use crate::axes::Arm;
use crate::axes::Family;
use crate::gpu::kernels::{DSA_COLS_BY_BLOCK, DSA_COLS_FROM_DEVICE};
use crate::gpu::{DeviceBuffer, Gpu, KernelModule, Launch, StreamHandle};
use crate::prep::family::OutputSpec;
use crate::prep::family::{page_grid_y, PageRule, Shape, POISON};
use anyhow::Result;

/// Argument block of the DSpark kernels (mirrors `DsparkArgs` in the .cu file).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DsparkArgs {
    seq_lens: u64,
    req_pool_indices: u64,
    req_to_token: u64,
    out_cache_loc: u64,
    full_to_swa: u64,
    swa_valid_from: u64,
    host_block: u64,
    outputs: [u64; 7],
    /// Requests the kernels compute: the padded batch on graph arms, the live one on eager.
    bs: i32,
    block: i32,
    req_stride: i32,
    page_width: i32,
    swa_width: i32,
}

/// Argument block of the DSA kernels (mirrors `DsaArgs` in dsa_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DsaArgs {
    seq_lens: u64,
    req_pool_indices: u64,
    req_to_token: u64,
    host_block: u64,
    cache_seqlens: u64,
    cu_seqlens_q: u64,
    cu_seqlens_k: u64,
    seqlens_expanded: u64,
    dsa_cache_seqlens: u64,
    dsa_cu_seqlens_k: u64,
    page_table_1: u64,
    real_page_table: u64,
    eager_cols: u64,
    /// Requests the kernels compute: the padded batch on graph arms, the live one on eager.
    bs: i32,
    tokens: i32,
    req_stride: i32,
    page_width: i32,
    real_width: i32,
}

#[derive(Clone, Copy)]
pub(super) enum FamilyArgs {
    Dspark(DsparkArgs),
    Dsa(DsaArgs),
}

impl FamilyArgs {
    fn append_to(self, launch: Launch) -> Launch {
        match self {
            FamilyArgs::Dspark(a) => launch.arg(a),
            FamilyArgs::Dsa(a) => launch.arg(a),
        }
    }
}

/// Threads of a block: a page-table block's threads take four columns each of one span.
const THREADS: u32 = 256;
// The page copies keep two loads in flight only where a block's threads cover one span
// exactly (kernels/common.cuh `page_rows_span`); otherwise every group would take the
// one-load path, a slowdown nothing would report.
const _: () = assert!(4 * THREADS == crate::gpu::kernels::PAGE_COLS_PER_BLOCK);
/// Argument index of `col_limit` in the page-table kernels.
pub(super) const COL_LIMIT_ARG: usize = 1;
/// Position of the page-table launch in a staged plan (lengths, page table, [swa]).
pub(super) const PAGE_LAUNCH: usize = 1;

pub(super) fn ptr<T>(buf: &DeviceBuffer<T>, _gpu: &Gpu) -> u64 {
    buf.addr()
}

pub(super) fn issue_all(launches: &[Launch], stream: StreamHandle<'_>) -> Result<()> {
    for launch in launches {
        launch.issue(stream)?;
    }
    Ok(())
}

fn module_of(family: Family) -> KernelModule {
    match family {
        Family::DsparkDraftBlock => KernelModule::DsparkDraftBlock,
        Family::DsaDecode => KernelModule::DsaDecode,
        Family::DsaTargetVerify => KernelModule::DsaTargetVerify,
        Family::DsaDraftExtendV2 => KernelModule::DsaDraftExtendV2,
    }
}

/// DSpark's kernels are `dspark_draft_block_<stage>`; the DSA families share theirs
/// (`dsa_<stage>` in dsa_common.cuh), each module with its own row formulas.
fn kernel_name(family: Family, stage: &str) -> String {
    match family {
        Family::DsparkDraftBlock => format!("{}_{stage}", family.name()),
        _ => format!("dsa_{stage}"),
    }
}

/// The page-table stage's `col_limit` for `arm` before any host read: DSpark's one-page
/// table in every arm; for DSA the eager rule (eager-sync overwrites it from its read each
/// step, eager-device finds it on the device) or the graph rule.
fn initial_col_limit(shape: &Shape, arm: Arm) -> i32 {
    match (shape.family, PageRule::of(arm)) {
        (Family::DsparkDraftBlock, _) => shape.page_width() as i32,
        (_, PageRule::Eager) if arm == Arm::EagerDevice => DSA_COLS_FROM_DEVICE,
        (_, PageRule::Eager) => shape.page_width() as i32,
        (_, PageRule::Graph) => DSA_COLS_BY_BLOCK,
    }
}

/// Threads of a page-table block: one per four columns of a row, in whole warps, at most
/// [`THREADS`] (a span's worth). DSpark's one-column table needs one warp, not eight.
fn page_threads(page_width: u32) -> u32 {
    page_width.div_ceil(4).next_multiple_of(32).min(THREADS)
}

/// The multi-kernel prep of `arm`: lengths (DSA: one block, for the scans), page table
/// (grid sized to the static width; a reading arm resizes it to each step's read), DSpark's SWA indices,
/// over the rows the arm's path computes (eager arms: the live batch's).
pub(super) fn staged_launches(
    gpu: &Gpu,
    shape: &Shape,
    arm: Arm,
    args: FamilyArgs,
) -> Result<Vec<Launch>> {
    let rows = shape.computed_rows(PageRule::of(arm)) as u32;
    let page_width = shape.page_width() as u32;
    shape
        .family
        .stages()
        .iter()
        .map(|&stage| {
            let name = kernel_name(shape.family, stage);
            let func = gpu.function(module_of(shape.family), &name)?;
            let launch = match stage {
                "lengths" if shape.family != Family::DsparkDraftBlock => {
                    Launch::new(name, func, (1, 1, 1), (1024, 1, 1))
                }
                "lengths" => {
                    Launch::new(name, func, (rows.div_ceil(THREADS), 1, 1), (THREADS, 1, 1))
                }
                "page_table" => {
                    let grid = (rows, page_grid_y(rows, page_width, gpu.info.sm_count), 1);
                    let threads = page_threads(page_width);
                    return Ok(args
                        .append_to(Launch::new(name, func, grid, (threads, 1, 1)))
                        .arg(initial_col_limit(shape, arm)));
                }
                _ => Launch::new(name, func, (rows, 1, 1), (128, 1, 1)),
            };
            Ok(args.append_to(launch))
        })
        .collect()
}

/// The fused kernel: one block per request (DSA: a row of blocks, one per column span of its
/// page rows, after one more row whose first block does the scans), each request's inputs
/// loaded once and stored into all of its rows.
pub(super) fn fused_launch(gpu: &Gpu, shape: &Shape, args: FamilyArgs) -> Result<Launch> {
    let name = kernel_name(shape.family, "fused");
    let func = gpu.function(module_of(shape.family), &name)?;
    let grid = match shape.family {
        Family::DsparkDraftBlock => {
            // dspark_draft_block_fused writes column 0 of the one-page table only.
            anyhow::ensure!(
                shape.page_width() == 1,
                "the fused DSpark kernel writes a one-column page table, not {} columns",
                shape.page_width()
            );
            (shape.padded_bs, 1, 1)
        }
        _ => {
            let rows = shape.padded_bs + 1;
            let spans = page_grid_y(rows, shape.page_width() as u32, gpu.info.sm_count);
            (rows, spans, 1)
        }
    };
    Ok(args.append_to(Launch::new(name, func, grid, (THREADS, 1, 1))))
}

/// What an argument block points at: the plan's lengths and inputs on the device, and each
/// of its outputs (in [`Shape::outputs`] order).
pub(super) struct ArgBlocks<'a> {
    pub(super) gpu: &'a Gpu,
    pub(super) shape: &'a Shape,
    pub(super) seq_lens: u64,
    pub(super) req_pool_indices: &'a DeviceBuffer<i32>,
    pub(super) req_to_token: &'a DeviceBuffer<i32>,
    pub(super) out_cache_loc: &'a DeviceBuffer<i32>,
    pub(super) full_to_swa: &'a DeviceBuffer<i32>,
    pub(super) swa_valid_from: &'a DeviceBuffer<i32>,
    pub(super) outputs: Vec<u64>,
    pub(super) specs: Vec<OutputSpec>,
}

impl ArgBlocks<'_> {
    /// The family's argument block with `host_block_ptr` (the block list a path reads, or 0)
    /// and `eager_cols_ptr` (eager-device's column count, or 0). `rule` sets the requests
    /// computed: eager arms never pad (PageRule::Eager).
    pub(super) fn args(
        &self,
        host_block_ptr: u64,
        eager_cols_ptr: u64,
        rule: PageRule,
    ) -> FamilyArgs {
        let (gpu, shape, out) = (self.gpu, self.shape, &self.outputs);
        match shape.family {
            Family::DsparkDraftBlock => FamilyArgs::Dspark(DsparkArgs {
                seq_lens: self.seq_lens,
                req_pool_indices: ptr(self.req_pool_indices, gpu),
                req_to_token: ptr(self.req_to_token, gpu),
                out_cache_loc: ptr(self.out_cache_loc, gpu),
                full_to_swa: ptr(self.full_to_swa, gpu),
                swa_valid_from: ptr(self.swa_valid_from, gpu),
                host_block: host_block_ptr,
                outputs: out.clone().try_into().expect("seven DSpark outputs"),
                bs: shape.computed_bs(rule) as i32,
                block: shape.block as i32,
                req_stride: shape.max_context as i32,
                page_width: shape.page_width() as i32,
                swa_width: shape.swa_width() as i32,
            }),
            _ => {
                // Decode has no separate seqlens_expanded (it is cache_seqlens).
                let by_name = |name: &str| {
                    self.specs
                        .iter()
                        .position(|o| o.name == name)
                        .map_or(0, |k| out[k])
                };
                FamilyArgs::Dsa(DsaArgs {
                    seq_lens: self.seq_lens,
                    req_pool_indices: ptr(self.req_pool_indices, gpu),
                    req_to_token: ptr(self.req_to_token, gpu),
                    host_block: host_block_ptr,
                    cache_seqlens: by_name("cache_seqlens"),
                    cu_seqlens_q: by_name("cu_seqlens_q"),
                    cu_seqlens_k: by_name("cu_seqlens_k"),
                    seqlens_expanded: by_name("seqlens_expanded"),
                    dsa_cache_seqlens: by_name("dsa_cache_seqlens"),
                    dsa_cu_seqlens_k: by_name("dsa_cu_seqlens_k"),
                    page_table_1: by_name("page_table_1"),
                    real_page_table: by_name("real_page_table"),
                    eager_cols: eager_cols_ptr,
                    bs: shape.computed_bs(rule) as i32,
                    tokens: shape.tokens_per_request() as i32,
                    req_stride: shape.max_context as i32,
                    page_width: shape.page_width() as i32,
                    real_width: shape.real_width() as i32,
                })
            }
        }
    }
}

/// One launch per output that fills it with [`POISON`], so the cells a prep does not write
/// show.
pub(super) fn poison_launches(
    gpu: &Gpu,
    family: Family,
    outputs: &[DeviceBuffer<i32>],
) -> Result<Vec<Launch>> {
    let poison_fn = gpu.function(module_of(family), "poison_i32")?;
    Ok(outputs
        .iter()
        .map(|b| {
            let blocks = (b.len() as u64).div_ceil(THREADS as u64).min(4096) as u32;
            Launch::new(
                "poison_i32",
                poison_fn.clone(),
                (blocks, 1, 1),
                (THREADS, 1, 1),
            )
            .arg(ptr(b, gpu))
            .arg(b.len() as i64)
            .arg(POISON)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_the_plan_launches_is_in_its_source() {
        for family in Family::ALL {
            let source = module_of(family).source();
            for stage in family.stages().iter().chain(&["fused"]) {
                let name = kernel_name(family, stage);
                assert!(
                    source.contains(&format!("__global__ void {name}(")),
                    "{name} missing from {}",
                    module_of(family).file_name()
                );
            }
            assert!(source.contains("__global__ void poison_i32("));
        }
        assert!(KernelModule::Accept
            .source()
            .contains("__global__ void accept("));
    }

    #[test]
    fn argument_blocks_match_the_cuda_structs() {
        // 14 pointers + 5 ints and 13 pointers + 5 ints, with C's padding to 8 bytes.
        assert_eq!(std::mem::size_of::<DsparkArgs>(), 14 * 8 + 5 * 4 + 4);
        assert_eq!(std::mem::size_of::<DsaArgs>(), 13 * 8 + 5 * 4 + 4);
    }
}
