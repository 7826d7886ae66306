//! The CPU reference: every output of every family, written straight from the formulas in
//! DESIGN.md. It is the specification the GPU arms are checked against, bit for bit.
//!
//! Only written cells are expected: every length, position and SWA cell of every row
//! (padding rows get fill values: 0, or -1 for SWA), and each page-table row up to its live
//! KV length. Cells past that are never written by any arm and never checked.

use super::family::{OutputSpec, Shape, POISON};
use super::inputs::HostInputs;
use crate::axes::Family;
use crate::gpu::kernels::{DSA_TOPK, PAGE_SIZE, SWA_WINDOW};

/// Expected contents of one output: for each row, the values of its written prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub spec: OutputSpec,
    row_start: Vec<usize>,
    values: Vec<i32>,
}

/// The first cell where a device buffer differs from the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub output: &'static str,
    pub row: usize,
    pub col: usize,
    pub expected: i32,
    pub got: i32,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}[{}, {}]: expected {}, got {}",
            self.output, self.row, self.col, self.expected, self.got
        )
    }
}

impl Expected {
    fn new(spec: OutputSpec) -> Self {
        Self {
            spec,
            row_start: vec![0],
            values: Vec::new(),
        }
    }

    fn push_row(&mut self, cells: impl IntoIterator<Item = i32>) {
        let start = self.values.len();
        self.values.extend(cells);
        self.row_start.push(self.values.len());
        // A row longer than its buffer would be an input generator bug: fail at the source.
        assert!(
            self.values.len() - start <= self.spec.width,
            "{} row wider than its buffer",
            self.spec.name
        );
    }

    pub fn row(&self, r: usize) -> &[i32] {
        &self.values[self.row_start[r]..self.row_start[r + 1]]
    }

    /// Cells this output is checked on.
    pub fn checked_cells(&self) -> usize {
        self.values.len()
    }

    /// Compares a whole poisoned-then-written device buffer: each row's written prefix must
    /// equal the reference and every cell past it must still hold the poison (a kernel that
    /// writes past a row's live length spends bandwidth no arm may spend). Returns the number
    /// of differing cells and the first of them.
    pub fn compare(&self, device: &[i32]) -> (usize, Option<Mismatch>) {
        assert_eq!(
            device.len(),
            self.spec.len(),
            "{} buffer size",
            self.spec.name
        );
        let mut count = 0;
        let mut first = None;
        for r in 0..self.spec.rows {
            let want = self.row(r);
            let row = &device[r * self.spec.width..(r + 1) * self.spec.width];
            let (written, rest) = row.split_at(want.len());
            if want == written && rest.iter().all(|&v| v == POISON) {
                continue;
            }
            let expected = want.iter().copied().chain(std::iter::repeat(POISON));
            for (c, (e, &g)) in expected.zip(row).enumerate() {
                if e != g {
                    count += 1;
                    first.get_or_insert(Mismatch {
                        output: self.spec.name,
                        row: r,
                        col: c,
                        expected: e,
                        got: g,
                    });
                }
            }
        }
        (count, first)
    }
}

/// The expected outputs of `shape`'s family for `inputs`, in `shape.outputs()` order.
pub fn expected(shape: &Shape, inputs: &HostInputs) -> Vec<Expected> {
    let mut out: Vec<Expected> = shape.outputs().into_iter().map(Expected::new).collect();
    match shape.family {
        Family::DsparkDraftBlock => dspark_draft_block(shape, inputs, &mut out),
        Family::DsaDecode => dsa_decode(shape, inputs, &mut out),
        Family::DsaTargetVerify | Family::DsaDraftExtendV2 => dsa_rows(shape, inputs, &mut out),
    }
    out
}

/// Live request i's committed length, or None for a padding row.
fn live_len(shape: &Shape, inputs: &HostInputs, i: usize) -> Option<i32> {
    (i < shape.batch_size as usize).then(|| inputs.seq_lens[i])
}

/// Token `token` of request i's row in the request-to-token table.
fn kv_slot(shape: &Shape, inputs: &HostInputs, i: usize, token: i32) -> i32 {
    let row = inputs.req_pool_indices[i] as usize;
    inputs.req_to_token[row * shape.max_context as usize + token as usize]
}

fn dspark_draft_block(shape: &Shape, inputs: &HostInputs, out: &mut [Expected]) {
    let [extend, extended, causal, positions, swa_lens, pages, swa] = out else {
        unreachable!()
    };
    let g = shape.block as i32;
    for i in 0..shape.padded_bs as usize {
        let len = live_len(shape, inputs, i);
        extend.push_row([len.map_or(0, |_| g)]);
        extended.push_row([len.map_or(0, |l| l + g)]);
    }
    for t in 0..shape.rows() {
        let (i, j) = (t / g as usize, (t % g as usize) as i32);
        let Some(l) = live_len(shape, inputs, i) else {
            for o in [&mut *causal, &mut *positions, &mut *swa_lens] {
                o.push_row([0]);
            }
            pages.push_row([]);
            swa.push_row(std::iter::repeat_n(-1, shape.swa_width()));
            continue;
        };
        let cl = l.min(SWA_WINDOW);
        causal.push_row([l + 1 + j]);
        positions.push_row([l + j]);
        swa_lens.push_row([cl + g]);
        let live_pages = (l + g + PAGE_SIZE - 1) / PAGE_SIZE;
        pages.push_row(
            (0..live_pages).map(|c| kv_slot(shape, inputs, i, c * PAGE_SIZE) / PAGE_SIZE),
        );
        swa.push_row((0..shape.swa_width() as i32).map(|k| {
            if k < cl {
                inputs.full_to_swa[kv_slot(shape, inputs, i, l - cl + k) as usize]
            } else if k < cl + g {
                inputs.full_to_swa
                    [inputs.out_cache_loc[i * g as usize + (k - cl) as usize] as usize]
            } else {
                -1
            }
        }));
    }
}

fn dsa_decode(shape: &Shape, inputs: &HostInputs, out: &mut [Expected]) {
    let [cache, cu, dsa, pages] = out else {
        unreachable!()
    };
    let mut running = 0;
    cu.push_row([0]);
    for i in 0..shape.padded_bs as usize {
        let l = live_len(shape, inputs, i).unwrap_or(0);
        cache.push_row([l]);
        running += l;
        cu.push_row([running]);
        dsa.push_row([l.min(DSA_TOPK)]);
        pages.push_row((0..l).map(|c| kv_slot(shape, inputs, i, c)));
    }
}

/// dsa_target_verify and dsa_draft_extend_v2: N rows per request.
fn dsa_rows(shape: &Shape, inputs: &HostInputs, out: &mut [Expected]) {
    let [cache, expanded, dsa, pages] = out else {
        unreachable!()
    };
    let n = shape.block as i32;
    let verify = shape.family == Family::DsaTargetVerify;
    for i in 0..shape.padded_bs as usize {
        let l = live_len(shape, inputs, i);
        cache.push_row([match l {
            Some(l) if verify => l + n,
            Some(l) => l,
            None => 0,
        }]);
        for j in 0..n {
            let row_len = match l {
                Some(l) if verify => l + j + 1,
                Some(l) => (l - n + j + 1).max(0),
                None => 0,
            };
            expanded.push_row([row_len]);
            dsa.push_row([row_len.min(DSA_TOPK)]);
            pages.push_row((0..row_len).map(|c| kv_slot(shape, inputs, i, c)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prep::inputs::{HostInputs, KV_SLOTS};

    /// A tiny hand-built input: req_to_token[row][c] = 1000 * row + c, full_to_swa[s] = s + 7,
    /// so every expected value can be worked out by hand.
    fn hand_inputs(shape: &Shape, lens: &[i32], pool: &[i32]) -> HostInputs {
        let stride = shape.max_context as usize;
        let padded = shape.padded_bs as usize;
        let mut seq_lens = lens.to_vec();
        seq_lens.resize(padded, 0);
        let mut req_pool_indices = pool.to_vec();
        req_pool_indices.resize(padded, 0);
        HostInputs {
            seq_lens,
            req_pool_indices,
            req_to_token: (0..(pool.len() + 1) * stride)
                .map(|k| ((k / stride) * 1000 + k % stride) as i32)
                .collect(),
            out_cache_loc: (0..padded * shape.block as usize)
                .map(|k| 500_000 + k as i32)
                .collect(),
            full_to_swa: (0..KV_SLOTS).map(|s| s + 7).collect(),
        }
    }

    fn by_name<'a>(out: &'a [Expected], name: &str) -> &'a Expected {
        out.iter().find(|e| e.spec.name == name).unwrap()
    }

    fn column(e: &Expected) -> Vec<i32> {
        (0..e.spec.rows).map(|r| e.row(r)[0]).collect()
    }

    #[test]
    fn dspark_short_context_block_3() {
        // L = 2 < window: the SWA row is the 2 committed tokens, the 3 new ones, then -1.
        let shape = Shape::new(Family::DsparkDraftBlock, 1, 3, 1024).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[2], &[1]));
        assert_eq!(column(by_name(&out, "extend_seq_lens")), vec![3]);
        assert_eq!(column(by_name(&out, "seq_lens_extended")), vec![5]);
        assert_eq!(column(by_name(&out, "seq_lens_causal")), vec![3, 4, 5]);
        assert_eq!(column(by_name(&out, "positions")), vec![2, 3, 4]);
        assert_eq!(column(by_name(&out, "swa_topk_lengths")), vec![5, 5, 5]);
        let pages = by_name(&out, "page_table");
        assert_eq!(
            pages.row(2),
            &[1000 / 256],
            "ceil(5 / 256) = 1 live page: token 0 of pool row 1"
        );
        let swa = by_name(&out, "swa_page_indices");
        assert_eq!(swa.spec.width, 192);
        let row = swa.row(1);
        assert_eq!(
            &row[..6],
            &[
                1000 + 7,
                1001 + 7,
                500_000 + 7,
                500_001 + 7,
                500_002 + 7,
                -1
            ]
        );
        assert!(row[5..].iter().all(|&v| v == -1));
        assert_eq!(
            row,
            swa.row(0),
            "every row of a block sees the same window and block"
        );
    }

    #[test]
    fn dspark_long_context_window_and_pages() {
        // L = 300 > window: the window is tokens 172..300; two live pages (ceil(301 / 256)).
        let shape = Shape::new(Family::DsparkDraftBlock, 1, 1, 1024).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[300], &[0]));
        assert_eq!(column(by_name(&out, "swa_topk_lengths")), vec![129]);
        let row = by_name(&out, "swa_page_indices").row(0);
        assert_eq!(row[0], 172 + 7);
        assert_eq!(row[127], 299 + 7);
        assert_eq!(row[128], 500_000 + 7);
        assert_eq!(row[129], -1);
        assert_eq!(by_name(&out, "page_table").row(0), &[0, 256 / 256]);
    }

    #[test]
    fn dspark_zero_prefix_and_block_8_with_padding() {
        // bs 3 pads to 4; L = 0 sees only the block; the padding row gets fills.
        let shape = Shape::new(Family::DsparkDraftBlock, 3, 8, 1024).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[0, 5, 1], &[2, 0, 1]));
        assert_eq!(column(by_name(&out, "extend_seq_lens")), vec![8, 8, 8, 0]);
        assert_eq!(
            column(by_name(&out, "seq_lens_extended")),
            vec![8, 13, 9, 0]
        );
        let causal = column(by_name(&out, "seq_lens_causal"));
        assert_eq!(&causal[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(causal[24..].iter().all(|&v| v == 0));
        let swa = by_name(&out, "swa_page_indices");
        assert_eq!(
            &swa.row(0)[..9],
            &[500_007, 500_008, 500_009, 500_010, 500_011, 500_012, 500_013, 500_014, -1]
        );
        assert!(
            swa.row(24).iter().all(|&v| v == -1),
            "padding rows are all -1"
        );
        assert_eq!(swa.row(24).len(), 192);
        assert!(
            by_name(&out, "page_table").row(24).is_empty(),
            "padding rows have no live pages"
        );
        assert_eq!(column(by_name(&out, "positions"))[8], 5);
    }

    #[test]
    fn dsa_decode_cumsum_topk_and_pages() {
        let shape = Shape::new(Family::DsaDecode, 3, 5, 4096).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[3, 2050, 0], &[1, 2, 0]));
        assert_eq!(column(by_name(&out, "cache_seqlens")), vec![3, 2050, 0, 0]);
        assert_eq!(
            column(by_name(&out, "cu_seqlens_k")),
            vec![0, 3, 2053, 2053, 2053]
        );
        assert_eq!(
            column(by_name(&out, "dsa_cache_seqlens")),
            vec![3, 2048, 0, 0]
        );
        let pages = by_name(&out, "page_table_1");
        assert_eq!(pages.row(0), &[1000, 1001, 1002]);
        assert_eq!(pages.row(1).len(), 2050);
        assert_eq!(pages.row(1)[2049], 2000 + 2049);
        assert!(pages.row(2).is_empty());
    }

    #[test]
    fn dsa_target_verify_rows_and_topk_clip() {
        let shape = Shape::new(Family::DsaTargetVerify, 2, 4, 4096).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[2046, 1], &[0, 1]));
        assert_eq!(column(by_name(&out, "cache_seqlens")), vec![2050, 5]);
        assert_eq!(
            column(by_name(&out, "seqlens_expanded")),
            vec![2047, 2048, 2049, 2050, 2, 3, 4, 5]
        );
        assert_eq!(
            column(by_name(&out, "dsa_cache_seqlens")),
            vec![2047, 2048, 2048, 2048, 2, 3, 4, 5]
        );
        let pages = by_name(&out, "page_table_1");
        assert_eq!(pages.row(5), &[1000, 1001, 1002]);
        assert_eq!(pages.row(3).len(), 2050);
    }

    #[test]
    fn dsa_draft_extend_clamps_at_zero() {
        let shape = Shape::new(Family::DsaDraftExtendV2, 2, 4, 4096).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[2, 2100], &[1, 0]));
        assert_eq!(column(by_name(&out, "cache_seqlens")), vec![2, 2100]);
        // L = 2, N = 4: max(2 - 4 + j + 1, 0) = 0, 0, 1, 2.
        assert_eq!(
            column(by_name(&out, "seqlens_expanded")),
            vec![0, 0, 1, 2, 2097, 2098, 2099, 2100]
        );
        assert_eq!(
            column(by_name(&out, "dsa_cache_seqlens")),
            vec![0, 0, 1, 2, 2048, 2048, 2048, 2048]
        );
        let pages = by_name(&out, "page_table_1");
        assert!(pages.row(0).is_empty());
        assert_eq!(pages.row(3), &[1000, 1001]);
    }

    #[test]
    fn compare_counts_only_written_cells_and_names_the_first_difference() {
        let shape = Shape::new(Family::DsaDecode, 2, 1, 1024).unwrap();
        let out = expected(&shape, &hand_inputs(&shape, &[2, 1], &[0, 1]));
        let pages = by_name(&out, "page_table_1");
        assert_eq!(pages.checked_cells(), 3);
        let mut device = vec![POISON; pages.spec.len()];
        device[0] = 0;
        device[1] = 1;
        device[1024] = 1000;
        assert_eq!(
            pages.compare(&device),
            (0, None),
            "written prefixes right, the rest poisoned"
        );
        device[1] = 9;
        device[1024] = 8;
        let (count, first) = pages.compare(&device);
        assert_eq!(count, 2);
        assert_eq!(
            first.unwrap().to_string(),
            "page_table_1[0, 1]: expected 1, got 9"
        );
        device[1] = 1;
        device[1024] = 1000;
        device[1030] = 7;
        let (count, first) = pages.compare(&device);
        assert_eq!(count, 1, "a write past the live length is caught");
        assert_eq!(first.unwrap().col, 6);
    }
}
