//! Parallel layouts of the target model across GPUs.
//!
//! * `tpN` — tensor parallelism over N GPUs: every GPU runs 1/N of every layer for the
//!   whole batch, and hidden states are all-reduced after attention and after the MLP.
//! * `depN` — data-parallel attention with expert parallelism over N GPUs: every GPU holds
//!   whole attention weights and serves ceil(bs/N) requests; the routed experts are spread
//!   over the N GPUs and tokens reach them through an all-to-all.
//!
//! The benchmark runs one rank's work per GPU; with fewer GPUs than a layout needs, that one
//! rank still runs on one GPU and the layout is reported as *emulated*.

use anyhow::{bail, Result};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// By name (`tp4`), so a file holds only the layouts `FromStr` makes.
#[serde(into = "String", try_from = "String")]
pub enum Layout {
    /// Tensor parallelism over this many GPUs (1, 2, 4 or 8).
    Tp(u32),
    /// Data-parallel attention + expert parallelism over this many GPUs (2 or 4).
    Dep(u32),
}

impl From<Layout> for String {
    fn from(layout: Layout) -> String {
        layout.to_string()
    }
}

impl TryFrom<String> for Layout {
    type Error = anyhow::Error;

    fn try_from(name: String) -> Result<Layout> {
        name.parse()
    }
}

const VALID_NAMES: &str = "tp1, tp2, tp4, tp8, dep2, dep4";

impl Layout {
    /// Every layout the suite knows, in the order charts show them. These are the only
    /// values `FromStr` produces; constructing another degree by hand is a programming
    /// error that the arithmetic below tolerates (a degree of 0 counts as 1) but no
    /// output ever names.
    pub const fn all() -> [Layout; 6] {
        [
            Layout::Tp(1),
            Layout::Tp(2),
            Layout::Tp(4),
            Layout::Tp(8),
            Layout::Dep(2),
            Layout::Dep(4),
        ]
    }

    /// GPUs the layout spans.
    pub fn gpus(self) -> u32 {
        match self {
            Layout::Tp(n) | Layout::Dep(n) => n.max(1),
        }
    }

    /// How many ways each weight matrix of a layer is split. Under dep the attention
    /// weights are whole on every GPU and experts are spread rather than split, so 1.
    pub fn tp_degree(self) -> u32 {
        match self {
            Layout::Tp(n) => n.max(1),
            Layout::Dep(_) => 1,
        }
    }

    /// How many ways the batch is split for attention (1 under tp).
    pub fn dp_degree(self) -> u32 {
        match self {
            Layout::Tp(_) => 1,
            Layout::Dep(n) => n.max(1),
        }
    }

    /// Requests one GPU serves for a batch of `bs`: the whole batch under tp, ceil(bs/dp)
    /// under dep — the busiest rank, since the step waits for it. With bs < dp (say bs 1
    /// on dep4) the busiest rank holds one request and the other ranks hold none (a
    /// serving engine runs an idle batch there to join the all-to-all), so this is 1.
    /// Never 0, so a degenerate bs 0 still describes a runnable one-request rank.
    pub fn rank_batch(self, bs: u32) -> u32 {
        bs.div_ceil(self.dp_degree()).max(1)
    }

    /// True when the machine has fewer GPUs than the layout spans, so one rank's work runs
    /// on one GPU and the collectives are stand-ins.
    pub fn emulated(self, available_gpus: u32) -> bool {
        self.gpus() > available_gpus
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Tp(n) => write!(f, "tp{n}"),
            Layout::Dep(n) => write!(f, "dep{n}"),
        }
    }
}

impl FromStr for Layout {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match Layout::all().into_iter().find(|l| l.to_string() == s) {
            Some(layout) => Ok(layout),
            None => bail!("`{s}` is not a layout: use one of {VALID_NAMES}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let names: Vec<String> = Layout::all().iter().map(|l| l.to_string()).collect();
        assert_eq!(names, ["tp1", "tp2", "tp4", "tp8", "dep2", "dep4"]);
        for layout in Layout::all() {
            assert_eq!(layout.to_string().parse::<Layout>().unwrap(), layout);
        }
    }

    #[test]
    fn rejects_unknown_names_listing_valid_ones() {
        for bad in ["tp3", "dep8", "TP1", "tp", "", " tp1", "ep4", "tp16"] {
            let e = bad.parse::<Layout>().unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
            assert!(e.contains(VALID_NAMES), "{e}");
        }
    }

    #[test]
    fn degrees_and_gpus() {
        assert_eq!(Layout::Tp(8).gpus(), 8);
        assert_eq!(Layout::Tp(8).tp_degree(), 8);
        assert_eq!(Layout::Tp(8).dp_degree(), 1);
        assert_eq!(Layout::Dep(4).gpus(), 4);
        assert_eq!(Layout::Dep(4).tp_degree(), 1);
        assert_eq!(Layout::Dep(4).dp_degree(), 4);
    }

    #[test]
    fn rank_batch_splits_only_under_dep() {
        assert_eq!(Layout::Tp(8).rank_batch(64), 64);
        assert_eq!(Layout::Dep(4).rank_batch(64), 16);
        // Uneven: the busiest rank gets the remainder.
        assert_eq!(Layout::Dep(4).rank_batch(10), 3);
        assert_eq!(Layout::Dep(2).rank_batch(3), 2);
        // Fewer requests than ranks: the busiest rank holds one.
        assert_eq!(Layout::Dep(4).rank_batch(1), 1);
        assert_eq!(Layout::Dep(4).rank_batch(0), 1);
    }

    #[test]
    fn emulated_when_gpus_are_short() {
        assert!(Layout::Tp(8).emulated(1));
        assert!(Layout::Tp(8).emulated(4));
        assert!(!Layout::Tp(8).emulated(8));
        assert!(!Layout::Tp(1).emulated(1));
        assert!(Layout::Dep(2).emulated(1));
        assert!(!Layout::Dep(2).emulated(2));
        assert!(Layout::Tp(1).emulated(0));
    }

    #[test]
    fn degenerate_degrees_do_not_divide_by_zero() {
        assert_eq!(Layout::Dep(0).rank_batch(5), 5);
        assert_eq!(Layout::Tp(0).tp_degree(), 1);
    }
}
