//! The CPU reference: every output of every family, written straight from the formulas in
//! DESIGN.md. It is the specification the GPU arms are checked against, bit for bit, and
//! what `check --dump` hands to scripts/crosscheck_sglang.py to hold against SGLang's code.
//!
//! Only cells the engine writes are expected (SGLang 0.5.23), by the path's `PageRule`: on
//! graph replay every length, position and SWA cell of every row, padding rows computed like
//! real ones from their fill values (see `inputs::PAD_SEQ_LEN`); on the eager path, which
//! never pads, the live requests' rows only (padding rows, and the cumulative sums' entries
//! past the live rows, are not written). DSpark's one-page table; DSA page rows as the rule
//! writes them. Cells past a row's written prefix must keep the checker's poison.

use super::family::{graph_page_cols, real_cols, OutputSpec, PageRule, Shape, POISON};
use super::inputs::HostInputs;
use crate::axes::Family;
use crate::gpu::kernels::{DSA_REAL_PAGE_SIZE, DSA_TOPK, PAGE_SIZE, SWA_WINDOW};

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

    /// Rows past those pushed are written by no path: empty, all poison.
    fn finish(&mut self) {
        while self.row_start.len() <= self.spec.rows {
            self.row_start.push(self.values.len());
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

    /// The whole buffer a correct path leaves: each row's written prefix, poison elsewhere.
    pub fn dense(&self) -> Vec<i32> {
        let width = self.spec.width;
        let mut cells = vec![POISON; self.spec.len()];
        for r in 0..self.spec.rows {
            let row = self.row(r);
            cells[r * width..r * width + row.len()].copy_from_slice(row);
        }
        cells
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

/// The expected outputs of `shape`'s family for `inputs` on a path writing page tables by
/// `rule`, in `shape.outputs()` order.
pub fn expected(shape: &Shape, inputs: &HostInputs, rule: PageRule) -> Vec<Expected> {
    let mut out: Vec<Expected> = shape.outputs().into_iter().map(Expected::new).collect();
    let requests = shape.computed_bs(rule) as usize;
    match shape.family {
        Family::DsparkDraftBlock => dspark_draft_block(shape, inputs, requests, &mut out),
        _ => dsa(shape, inputs, rule, requests, &mut out),
    }
    out.iter_mut().for_each(Expected::finish);
    out
}

/// Token `token` of request i's row in the request-to-token table.
fn kv_slot(shape: &Shape, inputs: &HostInputs, i: usize, token: i32) -> i32 {
    let row = inputs.req_pool_indices[i] as usize;
    inputs.req_to_token[row * shape.max_context as usize + token as usize]
}

/// DSpark's SWA context length: the window's last `min(L, W)` tokens, none below the pool
/// row's `swa_valid_from` (`compute_dspark_window_gather`,
/// python/sglang/kernels/ops/speculative/dspark/dspark_attn_metadata.py, 0.5.23).
pub fn dspark_context_len(len: i32, valid_from: i32) -> i32 {
    len.min(SWA_WINDOW)
        .min(len.saturating_sub(valid_from).max(0))
}

/// DSpark's outputs for the first `requests` requests.
fn dspark_draft_block(shape: &Shape, inputs: &HostInputs, requests: usize, out: &mut [Expected]) {
    let [extend, extended, causal, positions, swa_lens, pages, swa] = out else {
        unreachable!()
    };
    let g = shape.block as i32;
    for &l in &inputs.seq_lens[..requests] {
        extend.push_row([g]);
        extended.push_row([l + g]);
    }
    for t in 0..requests * g as usize {
        let (i, j) = (t / g as usize, (t % g as usize) as i32);
        let l = inputs.seq_lens[i];
        let pool = inputs.req_pool_indices[i] as usize;
        let cl = dspark_context_len(l, inputs.swa_valid_from[pool]);
        causal.push_row([l + 1 + j]);
        positions.push_row([l + j]);
        swa_lens.push_row([cl + g]);
        pages.push_row([kv_slot(shape, inputs, i, 0) / PAGE_SIZE]);
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

/// Request i's query row j: its visible KV length (`seqlens_expanded`).
fn dsa_row_len(family: Family, len: i32, n: i32, j: i32) -> i32 {
    match family {
        Family::DsaDecode => len,
        Family::DsaTargetVerify => len + j + 1,
        _ => (len - n + j + 1).max(0),
    }
}

/// `[0, a, a + b, ...]`: a cumsum with a leading 0, wrapping like the engine's int32.
fn cumsum(values: impl IntoIterator<Item = i32>) -> impl Iterator<Item = i32> {
    std::iter::once(0).chain(values.into_iter().scan(0i32, |sum, v| {
        *sum = sum.wrapping_add(v);
        Some(*sum)
    }))
}

/// The three DSA families (decode: one row per request; verify and draft-extend: N rows)
/// for the first `requests` requests.
fn dsa(shape: &Shape, inputs: &HostInputs, rule: PageRule, requests: usize, out: &mut [Expected]) {
    let family = shape.family;
    let (n, tokens) = (shape.block as i32, shape.tokens_per_request() as i32);
    let seq_lens = &inputs.seq_lens[..requests];
    let kv: Vec<i32> = seq_lens
        .iter()
        .map(|&l| family.request_kv(l, shape.block))
        .collect();
    let rows: Vec<(usize, i32)> = (0..kv.len())
        .flat_map(|i| (0..tokens).map(move |j| (i, j)))
        .map(|(i, j)| (i, dsa_row_len(family, seq_lens[i], n, j)))
        .collect();
    let eager_cols =
        (family.host_col_limit(seq_lens, shape.block) as usize).min(shape.page_width());
    for o in out.iter_mut() {
        match o.spec.name {
            "cache_seqlens" => kv.iter().for_each(|&k| o.push_row([k])),
            "cu_seqlens_q" => (0..=rows.len() as i32).for_each(|q| o.push_row([q])),
            "cu_seqlens_k" => cumsum(kv.iter().copied()).for_each(|c| o.push_row([c])),
            "seqlens_expanded" => rows.iter().for_each(|&(_, len)| o.push_row([len])),
            "dsa_cache_seqlens" => rows
                .iter()
                .for_each(|&(_, len)| o.push_row([len.min(DSA_TOPK)])),
            "dsa_cu_seqlens_k" => {
                cumsum(rows.iter().map(|&(_, len)| len.min(DSA_TOPK))).for_each(|c| o.push_row([c]))
            }
            name @ ("page_table_1" | "real_page_table") => {
                for &(i, _) in &rows {
                    let cols = match rule {
                        PageRule::Eager => eager_cols,
                        PageRule::Graph => graph_page_cols(kv[i], shape.page_width()),
                    };
                    if name == "page_table_1" {
                        o.push_row((0..cols as i32).map(|c| kv_slot(shape, inputs, i, c)));
                    } else {
                        let page = DSA_REAL_PAGE_SIZE;
                        o.push_row(
                            (0..real_cols(cols) as i32)
                                .map(|c| kv_slot(shape, inputs, i, c * page) / page),
                        );
                    }
                }
            }
            other => unreachable!("no DSA output named {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prep::inputs::{HostInputs, KV_SLOTS, PAD_SEQ_LEN};

    /// A tiny hand-built input: req_to_token[row][c] = 1000 * row + c, full_to_swa[s] = s + 7,
    /// padding rows filled as the engine fills them, so every expected value can be worked
    /// out by hand.
    fn hand_inputs(shape: &Shape, lens: &[i32], pool: &[i32]) -> HostInputs {
        let stride = shape.max_context as usize;
        let padded = shape.padded_bs as usize;
        let mut seq_lens = lens.to_vec();
        seq_lens.resize(padded, PAD_SEQ_LEN);
        let mut req_pool_indices = pool.to_vec();
        req_pool_indices.resize(padded, 0);
        let live_slots = lens.len() * shape.block as usize;
        HostInputs {
            seq_lens,
            req_pool_indices,
            req_to_token: (0..(pool.len() + 1) * stride)
                .map(|k| ((k / stride) * 1000 + k % stride) as i32)
                .collect(),
            out_cache_loc: (0..padded * shape.block as usize)
                .map(|k| {
                    if k < live_slots {
                        500_000 + k as i32
                    } else {
                        0
                    }
                })
                .collect(),
            full_to_swa: (0..KV_SLOTS).map(|s| s + 7).collect(),
            swa_valid_from: vec![0; pool.len() + 1],
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
        let out = expected(&shape, &hand_inputs(&shape, &[2], &[1]), PageRule::Graph);
        assert_eq!(column(by_name(&out, "extend_seq_lens")), vec![3]);
        assert_eq!(column(by_name(&out, "seq_lens_extended")), vec![5]);
        assert_eq!(column(by_name(&out, "seq_lens_causal")), vec![3, 4, 5]);
        assert_eq!(column(by_name(&out, "positions")), vec![2, 3, 4]);
        assert_eq!(column(by_name(&out, "swa_topk_lengths")), vec![5, 5, 5]);
        let pages = by_name(&out, "page_table");
        assert_eq!(
            pages.row(2),
            &[1000 / 256],
            "one page: token 0 of pool row 1"
        );
        let swa = by_name(&out, "swa_page_indices");
        assert_eq!(swa.spec.width, 192);
        let row = swa.row(1);
        assert_eq!(&row[..6], &[1007, 1008, 500_007, 500_008, 500_009, -1]);
        assert!(row[5..].iter().all(|&v| v == -1));
        assert_eq!(
            row,
            swa.row(0),
            "every row of a block sees the same window and block"
        );
    }

    #[test]
    fn dspark_long_context_window_and_valid_from() {
        // L = 300 > window: the window is tokens 172..300.
        let shape = Shape::new(Family::DsparkDraftBlock, 1, 1, 1024).unwrap();
        let mut inputs = hand_inputs(&shape, &[300], &[0]);
        let out = expected(&shape, &inputs, PageRule::Graph);
        assert_eq!(column(by_name(&out, "swa_topk_lengths")), vec![129]);
        let row = by_name(&out, "swa_page_indices").row(0);
        assert_eq!(
            (row[0], row[127], row[128], row[129]),
            (179, 306, 500_007, -1)
        );
        assert_eq!(by_name(&out, "page_table").row(0), &[0]);
        // valid_from 250 leaves 50 window tokens (250..300), as in the page-edge case (L = 200,
        // valid_from = 150, block 5: 50 + 5 = 55).
        inputs.swa_valid_from[0] = 250;
        let out = expected(&shape, &inputs, PageRule::Graph);
        assert_eq!(column(by_name(&out, "swa_topk_lengths")), vec![51]);
        let row = by_name(&out, "swa_page_indices").row(0);
        assert_eq!((row[0], row[49], row[50], row[51]), (257, 306, 500_007, -1));
        assert_eq!(dspark_context_len(200, 150), 50);
        assert_eq!(dspark_context_len(200, 300), 0, "all below valid_from");
    }

    #[test]
    fn dspark_padding_rows_are_computed_from_the_fill_values() {
        // bs 3 pads to 4; L = 0 sees only the block; the padding row has L = 1, pool row 0
        // and KV slot 0: extend 8, extended 9, causal 2..9, window token 0 then 8 x slot 0.
        let shape = Shape::new(Family::DsparkDraftBlock, 3, 8, 1024).unwrap();
        let out = expected(
            &shape,
            &hand_inputs(&shape, &[0, 5, 1], &[2, 0, 1]),
            PageRule::Graph,
        );
        assert_eq!(column(by_name(&out, "extend_seq_lens")), vec![8, 8, 8, 8]);
        assert_eq!(
            column(by_name(&out, "seq_lens_extended")),
            vec![8, 13, 9, 9]
        );
        let causal = column(by_name(&out, "seq_lens_causal"));
        assert_eq!(&causal[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&causal[24..], &[2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(column(by_name(&out, "positions"))[24], 1);
        assert_eq!(column(by_name(&out, "swa_topk_lengths"))[24], 9);
        let swa = by_name(&out, "swa_page_indices");
        assert_eq!(
            &swa.row(0)[..9],
            &[500_007, 500_008, 500_009, 500_010, 500_011, 500_012, 500_013, 500_014, -1]
        );
        assert_eq!(&swa.row(24)[..10], &[7, 7, 7, 7, 7, 7, 7, 7, 7, -1]);
        assert_eq!(
            by_name(&out, "page_table").row(24),
            &[0],
            "pool row 0's first page"
        );
        let eager = expected(
            &shape,
            &hand_inputs(&shape, &[0, 5, 1], &[2, 0, 1]),
            PageRule::Eager,
        );
        for e in &eager {
            let live = if e.spec.rows == 4 { 3 } else { 24 };
            assert!(
                (0..e.spec.rows).all(|r| e.row(r).is_empty() == (r >= live)),
                "eager: {} has its {live} live rows only",
                e.spec.name
            );
            assert_eq!(
                (0..live).map(|r| e.row(r)).collect::<Vec<_>>(),
                (0..live)
                    .map(|r| by_name(&out, e.spec.name).row(r))
                    .collect::<Vec<_>>(),
                "live rows alike on both paths"
            );
        }
    }

    #[test]
    fn dsa_decode_padding_cumsums_and_both_page_rules() {
        // The page-edge example: lengths [0, 1, 2] padded to 4 give cu_seqlens_k [0, 0, 1, 3, 4].
        let shape = Shape::new(Family::DsaDecode, 3, 5, 4096).unwrap();
        let inputs = hand_inputs(&shape, &[0, 1, 2050], &[1, 2, 0]);
        let out = expected(&shape, &inputs, PageRule::Graph);
        assert_eq!(column(by_name(&out, "cache_seqlens")), vec![0, 1, 2050, 1]);
        assert_eq!(column(by_name(&out, "cu_seqlens_q")), vec![0, 1, 2, 3, 4]);
        assert_eq!(
            column(by_name(&out, "cu_seqlens_k")),
            vec![0, 0, 1, 2051, 2052]
        );
        assert_eq!(
            column(by_name(&out, "dsa_cache_seqlens")),
            vec![0, 1, 2048, 1]
        );
        assert_eq!(
            column(by_name(&out, "dsa_cu_seqlens_k")),
            vec![0, 0, 1, 2049, 2050]
        );
        let pages = by_name(&out, "page_table_1");
        assert!(pages.row(0).is_empty(), "graph: L = 0 writes no block");
        assert_eq!(pages.row(1).len(), 128, "graph: one whole block");
        assert_eq!(pages.row(1)[127], 2127, "req_to_token's contents past L");
        assert_eq!(pages.row(2).len(), 2176, "roundup128(2050)");
        assert_eq!(pages.row(3).len(), 128, "the padding row reads pool row 0");
        assert_eq!(pages.row(3)[5], 5);
        let real = by_name(&out, "real_page_table");
        assert_eq!(real.row(2).len(), 34);
        assert_eq!(real.row(2)[1], 1, "pool row 0, token 64, page 1");
        assert_eq!(real.row(1), &[2000 / 64, 2064 / 64]);
        let eager = expected(&shape, &inputs, PageRule::Eager);
        let pages = by_name(&eager, "page_table_1");
        for r in 0..3 {
            assert_eq!(
                pages.row(r).len(),
                2050,
                "eager: max(L) columns in every live row"
            );
        }
        assert!(pages.row(3).is_empty(), "eager: no padding row");
        assert_eq!(by_name(&eager, "real_page_table").row(0).len(), 33);
        let cu_k = by_name(&eager, "cu_seqlens_k");
        assert_eq!(
            (0..4).map(|r| cu_k.row(r)[0]).collect::<Vec<_>>(),
            vec![0, 0, 1, 2051]
        );
        assert!(
            cu_k.row(4).is_empty(),
            "eager: the sum stops at the live batch"
        );
        assert!(by_name(&eager, "cache_seqlens").row(3).is_empty());
        assert!(by_name(&eager, "cu_seqlens_q").row(4).is_empty());
    }

    #[test]
    fn eager_width_comes_from_the_live_lengths_only() {
        // The padded-batch case: bs 3 pads to 4 with L = 1; every live length is 0. The eager path
        // runs the 3 live requests: decode writes 0 columns, verify (N = 1) 1, where a width
        // over the padded lengths would be 1 and 2.
        for (family, cols) in [(Family::DsaDecode, 0), (Family::DsaTargetVerify, 1)] {
            let shape = Shape::new(family, 3, 1, 1024).unwrap();
            let inputs = hand_inputs(&shape, &[0, 0, 0], &[1, 2, 0]);
            let eager = expected(&shape, &inputs, PageRule::Eager);
            for name in ["page_table_1", "real_page_table"] {
                let e = by_name(&eager, name);
                let want = if name == "page_table_1" {
                    cols
                } else {
                    real_cols(cols)
                };
                for r in 0..3 {
                    assert_eq!(e.row(r).len(), want, "{family} {name} row {r}");
                }
                assert!(e.row(3).is_empty(), "{family} {name}: no padding row");
            }
            let graph = expected(&shape, &inputs, PageRule::Graph);
            assert_eq!(
                by_name(&graph, "page_table_1").row(3).len(),
                128,
                "{family}: graph replay computes the padding row (L = 1)"
            );
        }
    }

    #[test]
    fn dsa_target_verify_rows_topk_clip_and_kv_blocks() {
        let shape = Shape::new(Family::DsaTargetVerify, 2, 4, 4096).unwrap();
        let out = expected(
            &shape,
            &hand_inputs(&shape, &[2046, 1], &[0, 1]),
            PageRule::Graph,
        );
        assert_eq!(column(by_name(&out, "cache_seqlens")), vec![2050, 5]);
        assert_eq!(column(by_name(&out, "cu_seqlens_k")), vec![0, 2050, 2055]);
        assert_eq!(
            column(by_name(&out, "seqlens_expanded")),
            vec![2047, 2048, 2049, 2050, 2, 3, 4, 5]
        );
        assert_eq!(
            column(by_name(&out, "dsa_cache_seqlens")),
            vec![2047, 2048, 2048, 2048, 2, 3, 4, 5]
        );
        let dsa_cu = column(by_name(&out, "dsa_cu_seqlens_k"));
        assert_eq!((dsa_cu[0], dsa_cu[1], dsa_cu[8]), (0, 2047, 8191 + 14));
        let pages = by_name(&out, "page_table_1");
        assert_eq!(
            pages.row(0).len(),
            2176,
            "every row of a request: roundup128(L + N)"
        );
        assert_eq!(pages.row(3).len(), 2176);
        assert_eq!(pages.row(5).len(), 128);
        assert_eq!(&pages.row(5)[..3], &[1000, 1001, 1002]);
        let eager = expected(
            &shape,
            &hand_inputs(&shape, &[2046, 1], &[0, 1]),
            PageRule::Eager,
        );
        assert_eq!(
            by_name(&eager, "page_table_1").row(7).len(),
            2050,
            "max(L) + N"
        );
    }

    #[test]
    fn dsa_draft_extend_clamps_at_zero_and_pages_by_request() {
        let shape = Shape::new(Family::DsaDraftExtendV2, 2, 4, 4096).unwrap();
        let out = expected(
            &shape,
            &hand_inputs(&shape, &[2, 2100], &[1, 0]),
            PageRule::Graph,
        );
        assert_eq!(column(by_name(&out, "cache_seqlens")), vec![2, 2100]);
        assert_eq!(column(by_name(&out, "cu_seqlens_k")), vec![0, 2, 2102]);
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
        assert_eq!(
            pages.row(0).len(),
            128,
            "kv = L for every row, even a clamped one"
        );
        assert_eq!(pages.row(7).len(), 2176);
    }

    #[test]
    fn compare_counts_only_written_cells_and_names_the_first_difference() {
        let shape = Shape::new(Family::DsaDecode, 2, 1, 1024).unwrap();
        let out = expected(
            &shape,
            &hand_inputs(&shape, &[2, 1], &[0, 1]),
            PageRule::Eager,
        );
        let pages = by_name(&out, "page_table_1");
        assert_eq!(pages.checked_cells(), 4, "eager: 2 columns in both rows");
        let mut device = vec![POISON; pages.spec.len()];
        device[..2].copy_from_slice(&[0, 1]);
        device[1024..1026].copy_from_slice(&[1000, 1001]);
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
        assert_eq!(count, 1, "a write past the written prefix is caught");
        assert_eq!(first.unwrap().col, 6);
    }
}
