//! The bytes one prep must move, from its shape and live lengths alone: every output cell the
//! CPU reference writes, and every input element it reads, each once. Dividing by the prep's
//! device time gives the bandwidth it achieved, read against a device-to-device copy's.
//!
//! Per family, with P = padded batch, g = N = block, R = P·g, L a live request's committed
//! length, every buffer int32 (4 B a cell):
//!
//! * **dspark_draft_block.** Written: 2P per-request lengths, 3R per-token lengths and
//!   positions, R·swa_width SWA cells (padding rows too: the reference fills them with -1),
//!   and per live request g page-table rows of ⌈(L+g)/256⌉ pages. Read per live request:
//!   `seq_lens` and `req_pool_indices` (1 + 1), from `req_to_token` the ⌈(L+g)/256⌉ page
//!   samples and the cl = min(L, 128) window tokens less the page samples inside the window
//!   (⌈L/256⌉ − ⌈(L−cl)/256⌉, at most one), g `out_cache_loc` slots and cl + g `full_to_swa`
//!   gathers.
//! * **dsa_decode.** Written: P `cache_seqlens`, P + 1 `cu_seqlens_k`, P `dsa_cache_seqlens`,
//!   and L page-table cells per live request. Read per live request: `seq_lens`, and when
//!   L > 0 its pool index and its first L `req_to_token` slots.
//! * **dsa_target_verify.** Written: P + 2R lengths and, per live request, N rows of
//!   L + j + 1 cells (N·L + N(N+1)/2). Read per live request: `seq_lens`, its pool index and
//!   the L + N slots of its longest row (the N rows share their prefix).
//! * **dsa_draft_extend_v2.** Written: P + 2R lengths and, per live request, N rows of
//!   max(L − N + j + 1, 0) cells (m·L − m(m−1)/2 with m = min(L, N)). Read per live request:
//!   `seq_lens`, and when L > 0 its pool index and its first L slots.
//!
//! What is not counted: re-reads a kernel makes of an element (caches serve them), the
//! 32-byte sectors a scattered read fetches around its 4 bytes, and eager-sync's and
//! graph-upload's `[block] * bs` list (how an arm gets the block, not what the outputs need):
//! the count is the same for every arm of a cell. Gathers (`full_to_swa`) count once per
//! cell that reads one, whether or not two cells hit the same slot.

use super::family::Shape;
use crate::axes::Family;
use crate::gpu::kernels::{PAGE_SIZE, SWA_WINDOW};

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

/// The bytes `shape`'s prep moves for these committed lengths (the padded `seq_lens` of its
/// inputs; only the first `batch_size` are live). See the module docs for the arithmetic.
pub fn prep_bytes(shape: &Shape, seq_lens: &[i32]) -> PrepBytes {
    // Every output but the page table is written whole, padding rows included.
    let dense: u64 = shape
        .outputs()
        .iter()
        .filter(|o| !o.name.starts_with("page_table"))
        .map(|o| o.len() as u64)
        .sum();
    let (mut written, mut read) = (dense, 0);
    let n = u64::from(shape.block);
    for &len in seq_lens.iter().take(shape.batch_size as usize) {
        let l = len.max(0) as u64;
        let (pages, inputs) = match shape.family {
            Family::DsparkDraftBlock => {
                let page = PAGE_SIZE as u64;
                let live_pages = (l + n).div_ceil(page);
                let cl = l.min(SWA_WINDOW as u64);
                let shared = l.div_ceil(page) - (l - cl).div_ceil(page);
                let pool_index = 1;
                let req_to_token = live_pages + cl - shared;
                let (out_cache_loc, full_to_swa) = (n, cl + n);
                (
                    n * live_pages,
                    pool_index + req_to_token + out_cache_loc + full_to_swa,
                )
            }
            Family::DsaDecode => (l, row_reads(l)),
            Family::DsaTargetVerify => (n * l + n * (n + 1) / 2, row_reads(l + n)),
            Family::DsaDraftExtendV2 => {
                let m = l.min(n);
                (m * l - m * m.saturating_sub(1) / 2, row_reads(l))
            }
        };
        written += pages;
        // Its own length, then what the outputs need of the rest.
        read += 1 + inputs;
    }
    PrepBytes {
        read: read * CELL,
        written: written * CELL,
    }
}

/// A DSA request whose longest page row holds `longest` slots reads its pool index and those
/// slots of its `req_to_token` row; an empty row reads neither.
fn row_reads(longest: u64) -> u64 {
    if longest == 0 {
        0
    } else {
        1 + longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prep::inputs::{generate, LengthRange};
    use crate::prep::reference::expected;

    #[test]
    fn each_family_by_hand() {
        // (family, bs, block, lengths, cells read, cells written), each worked out by hand.
        let cases = [
            // bs 2, block 3: P = 2, R = 6, SWA rows 192 wide (128 + 3 rounded up to 64s).
            // Written: 2 + 2 + 3·6 + 6·192 = 1174 dense cells; pages ⌈5/256⌉ = 1 and
            // ⌈303/256⌉ = 2 for 3 rows each: 9. Read, L = 2: 1 + 1 + (1 page + 2 window −
            // token 0 in both) + 3 + (2 + 3) = 12; L = 300: 1 + 1 + (2 + 128 − token 256 in
            // both) + 3 + (128 + 3) = 265.
            (
                Family::DsparkDraftBlock,
                2,
                3,
                vec![2, 300],
                12 + 265,
                1174 + 9,
            ),
            // bs 3 pads to 4. Written: 4 + 5 + 4 lengths and 3 + 0 + 2050 page cells. Read:
            // 1 + 1 + 3, then just the empty request's length, then 1 + 1 + 2050.
            (
                Family::DsaDecode,
                3,
                5,
                vec![3, 0, 2050, 0],
                5 + 1 + 2052,
                13 + 2053,
            ),
            // bs 2, N 4: 2 + 8 + 8 lengths; rows 2047..2050 and 2..5 long: 8194 + 14 cells.
            // Read: 1 + 1 + 2050 and 1 + 1 + 5 (the longest row of each request).
            (
                Family::DsaTargetVerify,
                2,
                4,
                vec![2046, 1],
                2052 + 7,
                18 + 8194 + 14,
            ),
            // bs 2, N 4: rows max(L − 4 + j + 1, 0): 0, 0, 1, 2 (3 cells) and 2097..2100
            // (8394). Read: 1 + 1 + 2 and 1 + 1 + 2100.
            (
                Family::DsaDraftExtendV2,
                2,
                4,
                vec![2, 2100],
                4 + 2102,
                18 + 3 + 8394,
            ),
            // An empty request reads only its length; its 1 + 4 + 4 lengths are written.
            (Family::DsaDraftExtendV2, 1, 4, vec![0], 1, 9),
        ];
        for (family, bs, block, lens, read, written) in cases {
            let shape = Shape::new(family, bs, block, 4096).unwrap();
            let got = prep_bytes(&shape, &lens);
            assert_eq!(
                (got.read, got.written),
                (4 * read, 4 * written),
                "{family} bs {bs} block {block} lengths {lens:?}"
            );
            assert_eq!(got.total(), 4 * (read + written));
        }
    }

    #[test]
    fn written_bytes_are_the_cells_the_reference_checks() {
        for family in Family::ALL {
            for (bs, block) in [(1, 1), (3, 5), (9, 8)] {
                let shape = Shape::new(family, bs, block, 4096).unwrap();
                let range = LengthRange { min: 0, max: 4000 };
                let inputs = generate(&shape, u64::from(bs * block), range, true);
                let cells: usize = expected(&shape, &inputs)
                    .iter()
                    .map(|e| e.checked_cells())
                    .sum();
                assert_eq!(
                    prep_bytes(&shape, &inputs.seq_lens).written,
                    4 * cells as u64,
                    "{family} bs {bs} block {block}"
                );
            }
        }
    }
}
