//! The accept step, the end of a decode step: each live request accepts 1 + k tokens, k the
//! run of accepted draft tokens (each accepted with probability p until the first
//! rejection, at most `block`), and `seq_lens` grows by that. This is the CPU mirror of
//! `kernels/accept.cu`: same integer hash, same draws, bit for bit.

use anyhow::{bail, Result};

fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

fn accept_hash(seed: u32, i: u32, n: u32, k: u32) -> u32 {
    mix32(
        seed ^ mix32(
            i.wrapping_mul(0x9e37_79b9)
                ^ mix32(n.wrapping_mul(0x85eb_ca6b) ^ mix32(k.wrapping_add(0x27d4_eb2f))),
        ),
    )
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AcceptModel {
    pub block: u32,
    /// A draft token is accepted when its hash is below this (p = threshold / 2^32).
    pub threshold: u32,
    pub seed: u32,
    /// Lengths past this wrap back by max_len / 2, so long runs stay inside the token table.
    pub max_len: i32,
}

impl AcceptModel {
    pub fn with_probability(p: f64, block: u32, seed: u32, max_len: i32) -> Self {
        let threshold = (p.clamp(0.0, 1.0) * 4_294_967_296.0)
            .round()
            .min(u32::MAX as f64) as u32;
        Self {
            block,
            threshold,
            seed,
            max_len,
        }
    }

    /// The model whose expected accept length (tokens per request per step, including the
    /// bonus token) is `mean`, e.g. 3.51.
    pub fn with_mean(mean: f64, block: u32, seed: u32, max_len: i32) -> Result<Self> {
        Ok(Self::with_probability(
            rate_for_mean(mean, block)?,
            block,
            seed,
            max_len,
        ))
    }

    /// Expected tokens accepted per request per step.
    pub fn mean(&self) -> f64 {
        expected_accept(self.threshold as f64 / 4_294_967_296.0, self.block)
    }

    /// Tokens accepted by request `i` at its `n`-th step.
    pub fn draw(&self, i: u32, n: u32) -> i32 {
        let mut a = 1;
        while a <= self.block && accept_hash(self.seed, i, n, a) < self.threshold {
            a += 1;
        }
        a as i32
    }

    /// Advances the first `live` lengths as the kernel does; returns the accepted counts.
    pub fn apply(&self, seq_lens: &mut [i32], step_counter: &mut [u32], live: usize) -> Vec<i32> {
        (0..live)
            .map(|i| {
                let a = self.draw(i as u32, step_counter[i]);
                step_counter[i] += 1;
                let mut next = seq_lens[i] + a;
                if next > self.max_len {
                    next -= self.max_len / 2;
                }
                seq_lens[i] = next;
                a
            })
            .collect()
    }
}

/// 1 + p + p^2 + ... + p^block = (1 - p^(block+1)) / (1 - p): the tokens a block of `block`
/// drafts accepts per step at per-draft-token rate p, bonus token included (Leviathan et al.
/// 2023, "Fast Inference from Transformers via Speculative Decoding", eq. 1).
pub fn expected_accept(p: f64, block: u32) -> f64 {
    (0..=block).map(|k| p.powi(k as i32)).sum()
}

/// The per-draft-token rate whose expected accept length at `block` is `mean`.
fn rate_for_mean(mean: f64, block: u32) -> Result<f64> {
    let most = block as f64 + 1.0;
    if !(1.0..=most).contains(&mean) {
        bail!(
            "accept length {mean} is impossible with {block} drafted tokens a step: a step \
             accepts between 1 and drafts + 1 = {most} tokens"
        );
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if expected_accept(mid, block) < mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

/// The seed PR's serving run: a simulated acceptance of 3.51 tokens per step at block 5.
pub const SEED_ACCEPT_LENGTH: f64 = 3.51;
pub const SEED_ACCEPT_BLOCK: u32 = 5;

/// How many tokens a step accepts, for every block size of a run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Acceptance {
    /// Each draft token is accepted with this probability until the first rejection, so a
    /// block of γ accepts [`expected_accept`]`(rate, γ)` tokens per step.
    Rate(f64),
    /// This mean at every block size (`--accept-length`: an override for one block size).
    Length(f64),
}

impl Acceptance {
    /// The default: the rate that gives the seed's 3.51 tokens at block 5 (α ≈ 0.779).
    pub fn seed() -> Acceptance {
        Acceptance::Rate(
            rate_for_mean(SEED_ACCEPT_LENGTH, SEED_ACCEPT_BLOCK).expect("3.51 fits block 5"),
        )
    }

    /// Checks the value against every block size of the run.
    pub fn check(self, blocks: &[u32]) -> Result<Acceptance> {
        match self {
            Acceptance::Rate(r) if !(r.is_finite() && (0.0..1.0).contains(&r)) => {
                bail!("accept rate {r} is not a probability below 1: give a value in [0, 1)")
            }
            Acceptance::Length(l) => {
                for &b in blocks {
                    rate_for_mean(l, b)?;
                }
            }
            _ => {}
        }
        Ok(self)
    }

    /// Expected tokens per request per step at `block`, bonus token included.
    #[cfg(test)]
    pub fn mean_at(self, block: u32) -> f64 {
        match self {
            Acceptance::Rate(r) => expected_accept(r, block),
            Acceptance::Length(l) => l,
        }
    }

    /// The accept kernel's model at `block`.
    pub fn model(self, block: u32, seed: u32, max_len: i32) -> Result<AcceptModel> {
        match self {
            Acceptance::Rate(r) => Ok(AcceptModel::with_probability(r, block, seed, max_len)),
            Acceptance::Length(l) => AcceptModel::with_mean(l, block, seed, max_len),
        }
    }

    /// One line for notes and summaries, a rate's accept length at each of the run's `blocks`.
    pub fn describe(self, blocks: &[u32]) -> String {
        match self {
            Acceptance::Rate(r) => {
                let each: Vec<String> = blocks
                    .iter()
                    .map(|&b| format!("block {b}: {:.2}", expected_accept(r, b)))
                    .collect();
                format!(
                    "accept rate {r:.4} per draft token ({} tokens per step)",
                    each.join(", ")
                )
            }
            Acceptance::Length(l) => format!("accept length {l} tokens per step at every block"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_described_at_the_runs_own_blocks() {
        let text = Acceptance::Rate(0.5).describe(&[4, 6]);
        let (four, six) = (expected_accept(0.5, 4), expected_accept(0.5, 6));
        assert!(
            text.contains(&format!(
                "(block 4: {four:.2}, block 6: {six:.2} tokens per step)"
            )),
            "{text}"
        );
        assert!(
            !text.contains("block 3") && !text.contains("block 8"),
            "{text}"
        );
        assert!(Acceptance::Length(2.0)
            .describe(&[4])
            .contains("accept length 2"));
    }

    #[test]
    fn mean_is_solved_and_draws_match_it() {
        let m = AcceptModel::with_mean(3.51, 5, 9, 1 << 20).unwrap();
        assert!((m.mean() - 3.51).abs() < 1e-6, "{}", m.mean());
        let n = 20_000;
        let total: i64 = (0..n).map(|i| m.draw(i, 0) as i64).sum();
        let sample_mean = total as f64 / n as f64;
        assert!(
            (sample_mean - 3.51).abs() < 0.05,
            "sample mean {sample_mean}"
        );
        assert!((0..n).all(|i| (1..=6).contains(&m.draw(i, 3))));
    }

    #[test]
    fn the_seed_rate_gives_each_block_its_own_length() {
        let Acceptance::Rate(a) = Acceptance::seed() else {
            panic!("the seed is a rate")
        };
        // (1 - a^6) / (1 - a) = 3.51 at block 5 (the closed form, not the sum this module uses).
        assert!(((1.0 - a.powi(6)) / (1.0 - a) - 3.51).abs() < 1e-9, "{a}");
        assert!((0.77..0.79).contains(&a), "{a}");
        let s = Acceptance::seed();
        assert!((s.mean_at(3) - 2.86).abs() < 0.01, "{}", s.mean_at(3));
        assert!((s.mean_at(8) - 4.04).abs() < 0.02, "{}", s.mean_at(8));
        // The kernel's model at each block draws around that block's own mean.
        for block in [3, 5, 8] {
            let m = s.model(block, 4, 1 << 20).unwrap();
            let n = 20_000;
            let got = (0..n).map(|i| m.draw(i, 1) as f64).sum::<f64>() / n as f64;
            assert!(
                (got - s.mean_at(block)).abs() < 0.05,
                "block {block}: {got}"
            );
        }
        // A length override keeps one mean for every block.
        let l = Acceptance::Length(3.51);
        assert_eq!(l.mean_at(3), 3.51);
        assert!(l.check(&[3, 5]).is_ok() && l.check(&[1]).is_err());
        assert!(Acceptance::Rate(1.0).check(&[5]).is_err());
        assert!(Acceptance::Rate(f64::NAN).check(&[5]).is_err());
    }

    #[test]
    fn impossible_means_are_rejected() {
        assert!(AcceptModel::with_mean(2.5, 1, 0, 100).is_err());
        assert!(AcceptModel::with_mean(0.5, 5, 0, 100).is_err());
        assert_eq!(
            AcceptModel::with_mean(1.0, 5, 0, 100).unwrap().draw(0, 0),
            1
        );
        assert_eq!(
            AcceptModel::with_mean(6.0, 5, 0, 100).unwrap().draw(0, 0),
            6
        );
    }

    #[test]
    fn apply_advances_counts_and_wraps() {
        let m = AcceptModel::with_probability(1.0, 3, 1, 100);
        let mut lens = vec![10, 98, 7];
        let mut counters = vec![0, 0, 5];
        let accepted = m.apply(&mut lens, &mut counters, 2);
        assert_eq!(accepted, vec![4, 4]);
        assert_eq!(
            lens,
            vec![14, 102 - 50, 7],
            "the second wraps by max_len / 2; row 2 is not live"
        );
        assert_eq!(counters, vec![1, 1, 5]);
    }

    #[test]
    fn hash_is_pinned() {
        // Values from an independent Python transcription of kernels/accept.cu: a change to
        // the hash must be made in the kernel and here together.
        assert_eq!(mix32(1), 0x6889_90c0);
        let m = AcceptModel::with_probability(0.5, 8, 42, 1000);
        let draws: Vec<i32> = (0..8).map(|i| m.draw(i, 0)).collect();
        assert_eq!(draws, vec![2, 3, 2, 1, 1, 1, 4, 2]);
    }
}
