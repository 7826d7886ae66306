//! Random, seeded prep inputs: lengths, the request pool's token table, new-token slots and
//! the full-to-SWA slot map. The same seed gives the same inputs on any machine.

use super::family::Shape;
use crate::gpu::kernels::{DSA_TOPK, PAGE_SIZE, SWA_WINDOW};
use crate::stats::rng::SplitMix64;

/// Slots in the full KV pool (values of `req_to_token` and `out_cache_loc`).
pub const KV_SLOTS: i32 = 1 << 22;
/// Slots in the SWA pool (values of `full_to_swa`).
pub const SWA_SLOTS: i32 = 1 << 16;
/// What a padding row of a captured batch holds, as SGLang 0.5.23's graph runner fills it:
/// sequence length `get_cuda_graph_seq_len_fill_value()` (1 for the DSA and DeepSeek-V4
/// backends), request-pool index 0 and KV slot 0; the prep then computes the row like a
/// real one (python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py).
pub const PAD_SEQ_LEN: i32 = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct HostInputs {
    /// `padded_bs` committed lengths; padding rows hold `PAD_SEQ_LEN`.
    pub seq_lens: Vec<i32>,
    /// `padded_bs` rows of the request pool; padding rows hold 0.
    pub req_pool_indices: Vec<i32>,
    /// `pool_rows * max_context` KV slots, row `req_pool_indices[i]` for request i.
    pub req_to_token: Vec<i32>,
    /// `padded_bs * block` KV slots of the new draft tokens; padding rows' are 0.
    pub out_cache_loc: Vec<i32>,
    /// `pool_rows` entries: the first position of each pool row whose SWA slot is still
    /// valid (DeepSeek-V4's `swa_valid_from`; 0 unless a request's early window was freed).
    pub swa_valid_from: Vec<i32>,
    /// `KV_SLOTS` entries: each full-pool slot's SWA slot.
    pub full_to_swa: Vec<i32>,
}

/// Committed lengths drawn uniformly from `min..=max` (clamped to what the shape allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LengthRange {
    pub min: u32,
    pub max: u32,
}

/// Lengths where the formulas change branch, for the first rows: empty, the longest the
/// shape allows (page reads reach the row's end, and the first accept wraps it), then the
/// window, page and top-k boundaries.
pub fn edge_lengths(longest: i32) -> Vec<i32> {
    let (w, page, topk) = (SWA_WINDOW, PAGE_SIZE, DSA_TOPK);
    vec![
        0,
        longest,
        1,
        2,
        w - 1,
        w,
        w + 1,
        page - 1,
        page,
        page + 1,
        topk - 1,
        topk,
        topk + 1,
        longest - 1,
    ]
}

pub fn generate(shape: &Shape, seed: u64, lengths: LengthRange, with_edges: bool) -> HostInputs {
    let mut rng = SplitMix64::new(seed);
    let live = shape.batch_size as usize;
    let padded = shape.padded_bs as usize;
    let stride = shape.max_context as usize;
    let max_len = (lengths.max as i64).min(shape.max_seq_len() as i64);
    let min_len = (lengths.min as i64).min(max_len);

    let mut seq_lens: Vec<i32> = (0..padded)
        .map(|i| {
            if i < live {
                rng.range(min_len as u64, max_len as u64) as i32
            } else {
                PAD_SEQ_LEN
            }
        })
        .collect();
    if with_edges {
        // Edges go in whatever the random range, but never past the longest length the
        // shape allows (a short row stride at large batch holds no top-k edge).
        let longest = shape.max_seq_len();
        let edges = edge_lengths(longest).into_iter().filter(|&l| l <= longest);
        for (slot, l) in seq_lens.iter_mut().take(live).zip(edges) {
            *slot = l;
        }
    }

    // One spare pool row so request i does not simply own row i.
    let pool_rows = live + 1;
    let mut pool: Vec<i32> = (0..pool_rows as i32).collect();
    for k in (1..pool.len()).rev() {
        pool.swap(k, rng.range(0, k as u64) as usize);
    }
    let req_pool_indices = (0..padded)
        .map(|i| if i < live { pool[i] } else { 0 })
        .collect();
    let mut slot = || rng.range(0, KV_SLOTS as u64 - 1) as i32;
    let req_to_token = (0..pool_rows * stride).map(|_| slot()).collect();
    let block = shape.block as usize;
    let out_cache_loc = (0..padded * block)
        .map(|k| if k < live * block { slot() } else { 0 })
        .collect();
    let full_to_swa = (0..KV_SLOTS)
        .map(|_| rng.range(0, SWA_SLOTS as u64 - 1) as i32)
        .collect();
    HostInputs {
        seq_lens,
        req_pool_indices,
        req_to_token,
        out_cache_loc,
        full_to_swa,
        swa_valid_from: vec![0; pool_rows],
    }
}

/// Sets `swa_valid_from` of every other live request's pool row to a seeded value in
/// `0..=L + 2` (past L too: then none of the window is valid), as a request whose early SWA
/// slots were freed has; the rest stay 0.
pub fn draw_swa_valid_from(inputs: &mut HostInputs, live: usize, seed: u64) {
    let mut rng = SplitMix64::new(seed ^ 0x7661_6c69_645f_6672);
    for i in (1..live).step_by(2) {
        let len = inputs.seq_lens[i].max(0) as u64;
        let pool = inputs.req_pool_indices[i] as usize;
        inputs.swa_valid_from[pool] = rng.range(0, len + 2) as i32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axes::Family;

    #[test]
    fn inputs_are_seeded_in_range_and_padded() {
        let shape = Shape::new(Family::DsparkDraftBlock, 3, 5, 4096).unwrap();
        let range = LengthRange { min: 0, max: 4000 };
        let a = generate(&shape, 11, range, true);
        assert_eq!(a, generate(&shape, 11, range, true));
        assert_ne!(
            a.req_to_token,
            generate(&shape, 12, range, true).req_to_token
        );
        assert_eq!(a.seq_lens.len(), 4);
        assert_eq!(
            &a.seq_lens[..3],
            &[0, shape.max_seq_len(), 1],
            "edge lengths fill the first rows, the longest allowed among them"
        );
        assert_eq!(a.seq_lens[3], PAD_SEQ_LEN, "padding row");
        assert_eq!(a.req_pool_indices[3], 0);
        assert!(
            a.out_cache_loc[15..].iter().all(|&s| s == 0),
            "padding slots"
        );
        assert_eq!(a.swa_valid_from, vec![0; 4]);
        let mut c = a.clone();
        draw_swa_valid_from(&mut c, 3, 1);
        let row_of = |i: usize| c.req_pool_indices[i] as usize;
        assert_eq!(c.swa_valid_from[row_of(0)], 0, "even requests keep 0");
        assert!(c.swa_valid_from[row_of(1)] <= c.seq_lens[1] + 2);
        assert_eq!(c.swa_valid_from[row_of(2)], 0);
        let mut pools = a.req_pool_indices[..3].to_vec();
        pools.sort();
        pools.dedup();
        assert_eq!(pools.len(), 3, "distinct pool rows");
        assert!(a.req_pool_indices.iter().all(|&p| (0..4).contains(&p)));
        assert_eq!(a.req_to_token.len(), 4 * 4096);
        assert!(a.req_to_token.iter().all(|&s| (0..KV_SLOTS).contains(&s)));
        assert!(a.full_to_swa.iter().all(|&s| (0..SWA_SLOTS).contains(&s)));
        let b = generate(
            &shape,
            5,
            LengthRange {
                min: 100,
                max: 1_000_000,
            },
            false,
        );
        assert!(b.seq_lens[..3]
            .iter()
            .all(|&l| (100..=shape.max_seq_len()).contains(&l)));
    }
}
