//! The bytes one prep must move, from its shape and lengths alone: every output cell the
//! CPU reference writes on the engine's graph path (`PageRule::Graph`, what SGLang's fused
//! kernels write), and every input element it reads, each once. Dividing by the prep's
//! device time gives the bandwidth it achieved, read against a device-to-device copy's.
//!
//! Per family, with P = padded batch, g = N = block, R = P·g, L a request's committed length
//! (padding rows count too: they hold L = 1 and pool row 0 and are computed like real rows),
//! every buffer int32 (4 B a cell):
//!
//! * **dspark_draft_block.** Written: 2P per-request lengths, 3R per-token lengths and
//!   positions, R·swa_width SWA cells and R one-page page-table cells. Read per request:
//!   `seq_lens`, `req_pool_indices` and `swa_valid_from` (3), from `req_to_token` the page
//!   sample (token 0) and the cl window tokens (cl = min(L, 128, L − valid_from)) less token
//!   0 when the window holds it, g `out_cache_loc` slots and cl + g `full_to_swa` gathers.
//! * **DSA families.** Written: every length output whole (`cache_seqlens` P, `cu_seqlens_q`
//!   rows + 1, `cu_seqlens_k` P + 1, `seqlens_expanded` R for verify and draft-extend,
//!   `dsa_cache_seqlens` rows, `dsa_cu_seqlens_k` rows + 1), and per request, in each of its
//!   rows (1 for decode, N otherwise), c = min(roundup128(kv), width) `page_table_1` cells and
//!   ⌈c/64⌉ `real_page_table` cells, kv = L (L + N for verify). Read per request: `seq_lens`,
//!   and when c > 0 its pool index and its first c `req_to_token` slots.
//!
//! What is not counted: re-reads a kernel makes of an element (caches serve them), the
//! 32-byte sectors a scattered read fetches around its 4 bytes, eager-sync's and
//! graph-upload's `[block] * bs` list (how an arm gets the block, not what the outputs need),
//! and the eager arms' own shape (`max(L)` columns in every row, no padding rows): the count
//! is the same for every arm of a cell, the graph path's. Gathers (`full_to_swa`) count once per cell
//! that reads one, whether or not two cells hit the same slot.

use super::family::{graph_page_cols, real_cols, Shape};
use crate::axes::Family;
use crate::prep::reference::dspark_context_len;

/// Bytes of one int32 cell.
const CELL: u64 = 4;

/// What one prep reads and writes, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrepBytes {
    pub read: u64,
    pub written: u64,
}

impl PrepBytes {
    /// Read plus written: what a copy's bandwidth is counted in too.
    pub fn total(self) -> u64 {
        self.read + self.written
    }
}

/// The bytes `shape`'s prep moves for these lengths (the padded `seq_lens` of its inputs)
/// and `valid_from` (each request's `swa_valid_from`, DSpark only; empty means 0). See the
/// module docs for the arithmetic.
pub fn prep_bytes(shape: &Shape, seq_lens: &[i32], valid_from: &[i32]) -> PrepBytes {
    // Every output but the DSA page tables is written whole, padding rows included.
    let dense: u64 = shape
        .outputs()
        .iter()
        .filter(|o| !matches!(o.name, "page_table_1" | "real_page_table"))
        .map(|o| o.len() as u64)
        .sum();
    let (mut written, mut read) = (dense, 0);
    let n = u64::from(shape.block);
    let rows_per_request = shape.tokens_per_request() as u64;
    for (i, &len) in seq_lens.iter().enumerate() {
        let inputs = match shape.family {
            Family::DsparkDraftBlock => {
                let from = valid_from.get(i).copied().unwrap_or(0);
                let cl = dspark_context_len(len, from).max(0) as u64;
                let window_holds_token_0 = cl > 0 && len as u64 == cl;
                let req_to_token = 1 + cl - u64::from(window_holds_token_0);
                let (pool_index, valid_from_entry) = (1, 1);
                pool_index + valid_from_entry + req_to_token + n + (cl + n)
            }
            family => {
                let cols = graph_page_cols(family.request_kv(len, shape.block), shape.page_width());
                written += rows_per_request * (cols + real_cols(cols)) as u64;
                if cols == 0 {
                    0
                } else {
                    1 + cols as u64
                }
            }
        };
        // Its own length, then what the outputs need of the rest.
        read += 1 + inputs;
    }
    PrepBytes {
        read: read * CELL,
        written: written * CELL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prep::family::PageRule;
    use crate::prep::inputs::{generate, LengthRange};
    use crate::prep::reference::expected;

    #[test]
    fn each_family_by_hand() {
        // (family, bs, block, padded lengths, cells read, cells written), each by hand.
        let cases = [
            // bs 2, block 3: P = 2, R = 6, SWA rows 192 wide (128 + 3 rounded up to 64s).
            // Written: 2 + 2 + 3·6 + 6·192 + 6 one-page cells = 1180. Read, L = 2: 3 + (page
            // sample + 2 window tokens − token 0 in both) + 3 + (2 + 3) = 13; L = 300:
            // 3 + (1 + 128) + 3 + (128 + 3) = 266.
            (Family::DsparkDraftBlock, 2, 3, vec![2, 300], 13 + 266, 1180),
            // bs 3 pads to 4 (the padding row holds L = 1). Lengths: 4 + 5 + 5 + 4 + 5 = 23;
            // pages: 128 + 2 (L = 3), none (L = 0), 2176 + 34 (L = 2050), 128 + 2 (padding).
            // Read: 1 + 1 + 128, 1, 1 + 1 + 2176, 1 + 1 + 128.
            (
                Family::DsaDecode,
                3,
                5,
                vec![3, 0, 2050, 1],
                130 + 1 + 2178 + 130,
                23 + 2470,
            ),
            // bs 2, N 4: lengths 2 + 9 + 3 + 8 + 8 + 9 = 39; kv 2050 → 4 rows of 2176 + 34,
            // kv 5 → 4 rows of 128 + 2. Read: 1 + 1 + 2176 and 1 + 1 + 128.
            (
                Family::DsaTargetVerify,
                2,
                4,
                vec![2046, 1],
                2178 + 130,
                39 + 8840 + 520,
            ),
            // kv = L: 2 → 4 rows of 128 + 2, 2100 → 4 rows of 2176 + 34.
            (
                Family::DsaDraftExtendV2,
                2,
                4,
                vec![2, 2100],
                130 + 2178,
                39 + 520 + 8840,
            ),
            // An empty request reads only its length; its 1 + 5 + 2 + 4 + 4 + 5 lengths are
            // written and no page cell.
            (Family::DsaDraftExtendV2, 1, 4, vec![0], 1, 21),
        ];
        for (family, bs, block, lens, read, written) in cases {
            let shape = Shape::new(family, bs, block, 4096).unwrap();
            let got = prep_bytes(&shape, &lens, &[]);
            assert_eq!(
                (got.read, got.written),
                (4 * read, 4 * written),
                "{family} bs {bs} block {block} lengths {lens:?}"
            );
            assert_eq!(got.total(), 4 * (read + written));
        }
    }

    #[test]
    fn written_bytes_are_the_cells_the_reference_checks_on_the_graph_path() {
        for family in Family::ALL {
            for (bs, block) in [(1, 1), (3, 5), (9, 8)] {
                let shape = Shape::new(family, bs, block, 4096).unwrap();
                let range = LengthRange { min: 0, max: 4000 };
                let inputs = generate(&shape, u64::from(bs * block), range, true);
                let cells: usize = expected(&shape, &inputs, PageRule::Graph)
                    .iter()
                    .map(|e| e.checked_cells())
                    .sum();
                assert_eq!(
                    prep_bytes(&shape, &inputs.seq_lens, &[]).written,
                    4 * cells as u64,
                    "{family} bs {bs} block {block}"
                );
            }
        }
    }
}
