//! The four metadata families (DESIGN.md), their constants and static output shapes.

use crate::axes::{Arm, Family};
use crate::gpu::kernels::{
    DSA_GRAPH_COL_BLOCK, DSA_REAL_PAGE_SIZE, PAGE_COLS_PER_BLOCK, SWA_ALIGN, SWA_WINDOW,
};
use anyhow::{bail, Result};

/// Page-table grids aim at about this many blocks per SM in all.
pub const PAGE_BLOCKS_PER_SM: u32 = 16;

/// Column blocks per page-table row for `rows` rows whose widest needs `col_limit` columns:
/// one per span while the grid stays under `PAGE_BLOCKS_PER_SM` blocks per SM, fewer (each
/// looping over several spans) beyond that.
pub fn page_grid_y(rows: u32, col_limit: u32, sm_count: u32) -> u32 {
    let spans = col_limit.div_ceil(PAGE_COLS_PER_BLOCK).max(1);
    let budget = (PAGE_BLOCKS_PER_SM * sm_count.max(1))
        .div_ceil(rows.max(1))
        .max(1);
    spans.min(budget)
}
/// Largest block (draft tokens per request) a shape accepts; real drafters use 1 to 16.
pub const MAX_BLOCK: u32 = 64;
/// Largest batch a shape accepts.
pub const MAX_BATCH: u32 = 65536;
/// The checker's poison: negative and not -1, so no real output can equal it.
pub const POISON: i32 = -0x3c3c_3c3c;

/// Which rows and DSA page-table cells a path writes, as SGLang 0.5.23 writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageRule {
    /// The eager path (`init_forward_metadata` in
    /// python/sglang/srt/layers/attention/dsa_backend.py, DSpark's
    /// `init_forward_metadata_dspark_draft_block`): the live batch only, never padded, so
    /// padding rows are not written; DSA page rows are `req_to_token[req_pool_indices,
    /// :max_seqlen_k]` with `max_seqlen_k = max(L)` (+N for verify) over the live lengths,
    /// the same columns for every row.
    Eager,
    /// Graph replay: the batch padded to the captured size, padding rows computed from the
    /// graph runner's fill values; DSA page rows as the fused Triton kernels
    /// (python/sglang/kernels/ops/attention/dsa/metadata.py) write them, each in whole
    /// 128-column blocks, `[0, roundup128(kv))` with kv = L (+N for verify).
    Graph,
}

impl PageRule {
    /// The rule of the engine path `arm` stands for: eager launches write like the eager
    /// `init_forward_metadata`, graph arms like the fused kernels of graph replay.
    pub fn of(arm: Arm) -> Self {
        if arm.uses_graph() {
            PageRule::Graph
        } else {
            PageRule::Eager
        }
    }
}

impl Family {
    /// Request i's KV length, which sizes its DSA page row: L, or L + N for verify.
    /// (`cache_seqlens` in SGLang; DSpark has no KV-length page row.)
    pub fn request_kv(self, len: i32, block: u32) -> i32 {
        match self {
            Family::DsaTargetVerify => len.wrapping_add(block as i32),
            _ => len,
        }
    }

    /// The page-table columns the eager path writes for every row, from the live lengths
    /// it read on the host (`seq_lens.max().item()`; no padding rows: the eager path runs
    /// the live batch), before clipping to the static width. DSpark's table is the
    /// one-page placeholder whatever the lengths.
    pub fn host_col_limit(self, seq_lens: &[i32], block: u32) -> u32 {
        if self == Family::DsparkDraftBlock {
            return 1;
        }
        let longest = seq_lens
            .iter()
            .map(|&l| self.request_kv(l, block))
            .max()
            .unwrap_or(0);
        longest.max(0) as u32
    }
}

/// Columns graph replay writes in a DSA page row whose request holds `kv` tokens: whole
/// 128-column blocks, clipped to the static width.
pub fn graph_page_cols(kv: i32, width: usize) -> usize {
    let kv = kv.max(0) as usize;
    kv.next_multiple_of(DSA_GRAPH_COL_BLOCK as usize).min(width)
}

/// `real_page_table` columns that cover `cols` columns of `page_table_1` (`[:, ::64]`).
pub fn real_cols(cols: usize) -> usize {
    cols.div_ceil(DSA_REAL_PAGE_SIZE as usize)
}

/// The batch size a CUDA graph is captured for: serving engines capture a fixed list of
/// sizes and pad a live batch up to the next one (1, 2, 4, then multiples of 8 up to 256,
/// then multiples of 64).
pub fn padded_batch(bs: u32) -> u32 {
    match bs {
        0..=2 => bs.max(1),
        3..=4 => 4,
        5..=256 => bs.div_ceil(8) * 8,
        _ => bs.div_ceil(64) * 64,
    }
}

/// One output buffer: `rows` x `width` int32, row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputSpec {
    pub name: &'static str,
    pub rows: usize,
    pub width: usize,
}

impl OutputSpec {
    pub fn len(&self) -> usize {
        self.rows * self.width
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The static shape of one plan: family, live and padded batch, block size, and the
/// request-to-token row stride (the longest context a request may reach).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub family: Family,
    pub batch_size: u32,
    pub padded_bs: u32,
    pub block: u32,
    pub max_context: u32,
}

impl Shape {
    pub fn new(family: Family, batch_size: u32, block: u32, max_context: u32) -> Result<Self> {
        if !(1..=MAX_BATCH).contains(&batch_size) || !(1..=MAX_BLOCK).contains(&block) {
            bail!(
                "batch size {batch_size} and block size {block} must be within 1..={MAX_BATCH} and 1..={MAX_BLOCK}"
            );
        }
        if max_context < 2 * (block + 1) + SWA_WINDOW as u32 || max_context > (1 << 26) {
            bail!("max context {max_context} is out of range for block {block}");
        }
        Ok(Self {
            family,
            batch_size,
            padded_bs: padded_batch(batch_size),
            block,
            max_context,
        })
    }

    pub fn tokens_per_request(&self) -> usize {
        self.family.tokens_per_request(self.block) as usize
    }

    /// Rows of the per-token outputs and the page table.
    pub fn rows(&self) -> usize {
        self.padded_bs as usize * self.tokens_per_request()
    }

    /// The requests a path computes: the live batch on the eager path, which never pads;
    /// the padded batch on graph replay.
    pub fn computed_bs(&self, rule: PageRule) -> u32 {
        match rule {
            PageRule::Eager => self.batch_size,
            PageRule::Graph => self.padded_bs,
        }
    }

    /// The rows a path computes (the rest of the buffers' rows it leaves as they were).
    pub fn computed_rows(&self, rule: PageRule) -> usize {
        self.computed_bs(rule) as usize * self.tokens_per_request()
    }

    /// Static page-table width. DSpark: one page, the placeholder SGLang's CUDA
    /// DeepSeek-V4 backend keeps for SWA-only draft blocks (`max_seq_len=self.page_size` in
    /// `init_forward_metadata_dspark_draft_block`, deepseek_v4_backend.py, 0.5.23). DSA:
    /// the request-to-token stride, in tokens (`req_to_token.shape[1]`).
    pub fn page_width(&self) -> usize {
        match self.family {
            Family::DsparkDraftBlock => 1,
            _ => self.max_context as usize,
        }
    }

    /// Static width of DSA's `real_page_table` (page size 64).
    pub fn real_width(&self) -> usize {
        real_cols(self.page_width())
    }

    pub fn swa_width(&self) -> usize {
        let w = SWA_WINDOW as usize + self.block as usize;
        w.div_ceil(SWA_ALIGN as usize) * SWA_ALIGN as usize
    }

    /// The longest committed length a request may have so that `L + block` still fits the
    /// row stride; the accept step wraps lengths below it.
    pub fn max_seq_len(&self) -> i32 {
        (self.max_context - self.block - 1) as i32
    }

    /// The outputs in the order the kernels' argument blocks and the reference use.
    pub fn outputs(&self) -> Vec<OutputSpec> {
        let p = self.padded_bs as usize;
        let r = self.rows();
        let o = |name, rows, width| OutputSpec { name, rows, width };
        match self.family {
            Family::DsparkDraftBlock => vec![
                o("extend_seq_lens", p, 1),
                o("seq_lens_extended", p, 1),
                o("seq_lens_causal", r, 1),
                o("positions", r, 1),
                o("swa_topk_lengths", r, 1),
                o("page_table", r, self.page_width()),
                o("swa_page_indices", r, self.swa_width()),
            ],
            // Decode's expanded lengths are cache_seqlens itself (one row per request).
            Family::DsaDecode => vec![
                o("cache_seqlens", p, 1),
                o("cu_seqlens_q", p + 1, 1),
                o("cu_seqlens_k", p + 1, 1),
                o("dsa_cache_seqlens", p, 1),
                o("dsa_cu_seqlens_k", p + 1, 1),
                o("page_table_1", p, self.page_width()),
                o("real_page_table", p, self.real_width()),
            ],
            Family::DsaTargetVerify | Family::DsaDraftExtendV2 => vec![
                o("cache_seqlens", p, 1),
                o("cu_seqlens_q", r + 1, 1),
                o("cu_seqlens_k", p + 1, 1),
                o("seqlens_expanded", r, 1),
                o("dsa_cache_seqlens", r, 1),
                o("dsa_cu_seqlens_k", r + 1, 1),
                o("page_table_1", r, self.page_width()),
                o("real_page_table", r, self.real_width()),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_follows_the_capture_list() {
        let cases = [
            (1, 1),
            (2, 2),
            (3, 4),
            (4, 4),
            (5, 8),
            (8, 8),
            (9, 16),
            (64, 64),
            (250, 256),
            (256, 256),
            (257, 320),
            (1024, 1024),
        ];
        for (bs, padded) in cases {
            assert_eq!(padded_batch(bs), padded, "bs {bs}");
        }
    }

    #[test]
    fn shapes_follow_the_formulas() {
        let s = Shape::new(Family::DsparkDraftBlock, 3, 5, 4096).unwrap();
        assert_eq!(
            (s.padded_bs, s.rows(), s.page_width(), s.swa_width()),
            (4, 20, 1, 192)
        );
        let widths: Vec<_> = s
            .outputs()
            .iter()
            .map(|o| (o.name, o.rows, o.width))
            .collect();
        assert_eq!(widths[0], ("extend_seq_lens", 4, 1));
        assert_eq!(widths[5], ("page_table", 20, 1), "the one-page placeholder");
        let s = Shape::new(Family::DsparkDraftBlock, 1, 1, 4096).unwrap();
        assert_eq!(s.swa_width(), 192, "128 + 1 rounds up to 192");
        let d = Shape::new(Family::DsaDecode, 8, 5, 1000).unwrap();
        assert_eq!(
            d.rows(),
            8,
            "decode has one row per request whatever the block"
        );
        assert_eq!(d.outputs()[2].rows, 9, "cu_seqlens_k has a leading 0");
        assert_eq!(d.outputs()[6].width, 16, "real_page_table: ceil(1000 / 64)");
        let v = Shape::new(Family::DsaTargetVerify, 3, 4, 1024).unwrap();
        let names: Vec<_> = v.outputs().iter().map(|o| (o.name, o.rows)).collect();
        assert_eq!(
            names[1],
            ("cu_seqlens_q", 17),
            "one query per row, 4 x 4 rows"
        );
        assert_eq!(names[2], ("cu_seqlens_k", 5), "one key range per request");
        assert_eq!(names[5], ("dsa_cu_seqlens_k", 17));
        assert_eq!(d.max_seq_len(), 994);
        assert_eq!(
            (
                d.computed_rows(PageRule::Graph),
                d.computed_rows(PageRule::Eager)
            ),
            (8, 8)
        );
        assert_eq!(
            (
                v.computed_rows(PageRule::Graph),
                v.computed_rows(PageRule::Eager)
            ),
            (16, 12),
            "the eager path computes the 3 live requests only"
        );
        assert!(Shape::new(Family::DsaDecode, 0, 5, 4096).is_err());
        assert!(Shape::new(Family::DsaDecode, 1, 5, 10).is_err());
        assert!(
            Shape::new(Family::DsaDecode, 1, u32::MAX, 4096).is_err(),
            "no overflow on huge blocks"
        );
        assert!(Shape::new(Family::DsaDecode, MAX_BATCH + 1, 5, 4096).is_err());
    }

    #[test]
    fn page_grids_stay_bounded() {
        // H200: 132 SMs, so about 2112 blocks.
        assert_eq!(
            page_grid_y(1, 131072, 132),
            128,
            "one row: one block per span"
        );
        assert_eq!(
            page_grid_y(2048, 131072, 132),
            2,
            "many rows: blocks loop over spans"
        );
        assert_eq!(page_grid_y(8192, 131072, 132), 1);
        assert_eq!(page_grid_y(4, 3000, 132), 3, "never more blocks than spans");
        assert_eq!(
            page_grid_y(4, 0, 132),
            1,
            "an empty table still launches one block"
        );
    }

    #[test]
    fn host_col_limit_covers_the_longest_row() {
        let lens = [5, 300, 0];
        assert_eq!(
            Family::DsparkDraftBlock.host_col_limit(&lens, 5),
            1,
            "one page"
        );
        assert_eq!(Family::DsaDecode.host_col_limit(&lens, 5), 300);
        assert_eq!(Family::DsaTargetVerify.host_col_limit(&lens, 5), 305);
        assert_eq!(Family::DsaDraftExtendV2.host_col_limit(&lens, 5), 300);
        assert_eq!("dsa_decode".parse::<Family>(), Ok(Family::DsaDecode));
        assert!("dsa".parse::<Family>().is_err());
    }

    #[test]
    fn graph_rows_take_whole_128_column_blocks() {
        assert_eq!(graph_page_cols(0, 4096), 0);
        assert_eq!(graph_page_cols(1, 4096), 128);
        assert_eq!(graph_page_cols(128, 4096), 128);
        assert_eq!(graph_page_cols(129, 4096), 256);
        assert_eq!(
            graph_page_cols(4000, 4032),
            4032,
            "clipped to the static width"
        );
        assert_eq!(real_cols(128), 2);
        assert_eq!(real_cols(129), 3);
        assert_eq!(PageRule::of(Arm::EagerDevice), PageRule::Eager);
        assert_eq!(PageRule::of(Arm::Fused), PageRule::Graph);
    }
}
