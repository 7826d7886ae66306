//! The step programs `steps` models: which drafter proposes the tokens a step verifies, and
//! so which metadata preps and forwards one decode step runs.

use super::Family;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Drafter {
    /// The DeepSeek-V4 DSpark block drafter: one draft block (a parallel forward of the
    /// block's tokens), then DSA target verify.
    #[default]
    Dspark,
    /// SGLang's spec-v2 EAGLE/MTP step with the DSA backend: autoregressive draft passes
    /// (each a DSA decode prep and a one-token draft forward), DSA target verify, then the
    /// draft model's DSA draft-extend over the verified tokens.
    Eagle,
}

impl Drafter {
    pub const ALL: [Drafter; 2] = [Drafter::Dspark, Drafter::Eagle];

    pub fn name(self) -> &'static str {
        match self {
            Drafter::Dspark => "dspark",
            Drafter::Eagle => "eagle",
        }
    }

    /// The `family` column of this drafter's step rows (before any host-scale mark): the
    /// metadata families one step prepares, joined by `+`. DSpark's is the name every step
    /// row had before EAGLE existed, so older CSVs read as DSpark's.
    pub fn step_family(self) -> &'static str {
        match self {
            Drafter::Dspark => "dspark+dsa_target_verify",
            Drafter::Eagle => "eagle+dsa_decode+dsa_target_verify+dsa_draft_extend_v2",
        }
    }

    /// The drafter whose step family `family` is (without its host-scale mark).
    pub fn of_step_family(family: &str) -> Option<Drafter> {
        Drafter::ALL.into_iter().find(|d| d.step_family() == family)
    }

    /// The metadata families a step of this drafter prepares, in the order it first
    /// prepares them.
    pub fn families(self) -> &'static [Family] {
        match self {
            Drafter::Dspark => &[Family::DsparkDraftBlock, Family::DsaTargetVerify],
            Drafter::Eagle => &[
                Family::DsaDecode,
                Family::DsaTargetVerify,
                Family::DsaDraftExtendV2,
            ],
        }
    }

    /// Autoregressive draft passes per step at block size `block` (the verify's N tokens
    /// per request). EAGLE with top-k 1 verifies `speculative_num_draft_tokens` =
    /// `speculative_num_steps` + 1 tokens, the first draft token comes from the previous
    /// step's draft-extend forward, and the draft loop runs `speculative_num_steps` − 1
    /// forwards with as many DSA decode backends (SGLang 0.5.23 eagle_worker_v2.py:808-847:
    /// L819 breaks before the last forward; dsa_backend.py:4186
    /// `DeepseekSparseAttnMultiStepBackend` holds `speculative_num_steps - 1` backends): so
    /// N − 2 passes. DSpark runs none (its draft is one block forward).
    pub fn draft_passes(self, block: u32) -> u32 {
        match self {
            Drafter::Dspark => 0,
            Drafter::Eagle => block.saturating_sub(2),
        }
    }

    /// Draft tokens a step proposes per request at block size `block` (what the accept
    /// model's block is): DSpark's block of γ; EAGLE's N − 1 (the verify's N tokens are the
    /// last accepted token and N − 1 drafts), so at most N tokens are accepted.
    pub fn drafted(self, block: u32) -> u32 {
        match self {
            Drafter::Dspark => block,
            Drafter::Eagle => block.saturating_sub(1),
        }
    }

    /// Tokens per request of one draft forward: the whole block for DSpark, one for an
    /// EAGLE pass.
    pub fn draft_tokens(self, block: u32) -> u32 {
        match self {
            Drafter::Dspark => block,
            Drafter::Eagle => 1,
        }
    }
}

impl fmt::Display for Drafter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Drafter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Drafter::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown drafter '{s}': use dspark or eagle"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_step_families_round_trip() {
        for d in Drafter::ALL {
            assert_eq!(d.name().parse::<Drafter>(), Ok(d));
            assert_eq!(Drafter::of_step_family(d.step_family()), Some(d));
        }
        assert_eq!(Drafter::default(), Drafter::Dspark);
        assert_eq!(
            Drafter::Dspark.step_family(),
            "dspark+dsa_target_verify",
            "older CSVs' step rows read as DSpark's"
        );
        assert!("medusa"
            .parse::<Drafter>()
            .unwrap_err()
            .contains("dspark or eagle"));
        assert_eq!(Drafter::of_step_family("dspark"), None);
    }

    #[test]
    fn eagle_drafts_block_minus_two_passes_of_one_token() {
        // N = 3, 5, 8 verify tokens: speculative_num_steps 2, 4, 7; forwards 1, 3, 6.
        let passes: Vec<u32> = [3, 5, 8].map(|b| Drafter::Eagle.draft_passes(b)).to_vec();
        assert_eq!(passes, [1, 3, 6]);
        assert_eq!(Drafter::Eagle.draft_passes(1), 0);
        assert_eq!(Drafter::Dspark.draft_passes(5), 0);
        assert_eq!(Drafter::Eagle.draft_tokens(5), 1);
        assert_eq!(Drafter::Eagle.drafted(5), 4);
        assert_eq!(Drafter::Dspark.drafted(5), 5);
        assert_eq!(Drafter::Dspark.draft_tokens(5), 5);
    }
}
