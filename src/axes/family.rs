//! The metadata families (README.md's Terms): their names and rows per request. Their shapes and
//! plans are in `prep`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
// By name (`dsa_decode`), as the CSV writes it.
#[serde(rename_all = "snake_case")]
pub enum Family {
    DsparkDraftBlock,
    DsaDecode,
    DsaTargetVerify,
    DsaDraftExtendV2,
}

impl Family {
    pub const ALL: [Family; 4] = [
        Family::DsparkDraftBlock,
        Family::DsaDecode,
        Family::DsaTargetVerify,
        Family::DsaDraftExtendV2,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::DsparkDraftBlock => "dspark_draft_block",
            Family::DsaDecode => "dsa_decode",
            Family::DsaTargetVerify => "dsa_target_verify",
            Family::DsaDraftExtendV2 => "dsa_draft_extend_v2",
        }
    }

    /// The stages of the family's multi-kernel prep, in launch order, as kernels named
    /// `<family>_<stage>`; the fused arm runs one `<family>_fused` kernel instead.
    pub fn stages(self) -> &'static [&'static str] {
        match self {
            Family::DsparkDraftBlock => &["lengths", "page_table", "swa"],
            _ => &["lengths", "page_table"],
        }
    }

    /// Rows per request: the draft block for DSpark, N draft tokens for verify and
    /// draft-extend, one for decode.
    pub fn tokens_per_request(self, block: u32) -> u32 {
        match self {
            Family::DsaDecode => 1,
            _ => block,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown family '{s}': use one of dspark_draft_block, dsa_decode, \
                 dsa_target_verify, dsa_draft_extend_v2"
                )
            })
    }
}
