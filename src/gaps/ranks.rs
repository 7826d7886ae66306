//! One run's ranks (one trace a rank, as SGLang writes them): the collectives make every rank
//! wait for the slowest, so a step across ranks takes the longest rank's step, and removing
//! the reads makes it the longest rank's step without them. Ranks' steps are taken in order,
//! the k-th of each together (their profilers start and stop on the same step).

use super::report::{pct, us};
use super::{Gaps, Spread};
use crate::report::format::{fmt_num, table_cell};
use crate::results::env::code;
use anyhow::{bail, Result};
use serde::Serialize;
use std::fmt::Write;

/// The step across a run's ranks, as the slowest rank sets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AcrossRanks {
    /// The ranks' trace files, in the order given.
    pub files: Vec<String>,
    /// Steps taken together: the fewest any rank has.
    pub steps: usize,
    /// The longest rank's step, µs.
    pub period_us: Spread,
    /// Removing every rank's reads: the longest step less the longest step without them, µs.
    pub win_us: Spread,
    pub itl_change_pct: Spread,
    pub throughput_change_pct: Spread,
    /// The share of steps each rank was the slowest in, by rank.
    pub slowest_share: Vec<f64>,
}

/// The step across `ranks` (each one rank's trace of the same run).
pub fn across(ranks: &[Gaps]) -> Result<AcrossRanks> {
    let steps = ranks.iter().map(|g| g.steps.len()).min().unwrap_or(0);
    if ranks.len() < 2 || steps == 0 {
        bail!("ranks are read together from two traces or more, each with steps");
    }
    let (mut period, mut win, mut slowest) = (Vec::new(), Vec::new(), vec![0usize; ranks.len()]);
    for k in 0..steps {
        let of = |g: &Gaps| (g.steps[k].bare_us(), g.steps[k].reads_win_us);
        let (longest, at) = (ranks.iter().map(of).enumerate())
            .map(|(r, (p, _))| (p, r))
            .fold((f64::MIN, 0), |a, b| if b.0 > a.0 { b } else { a });
        let without = ranks
            .iter()
            .map(of)
            .map(|(p, w)| p - w)
            .fold(f64::MIN, f64::max);
        slowest[at] += 1;
        period.push(longest);
        win.push((longest - without).max(0.0));
    }
    let pairs = || period.iter().zip(&win);
    Ok(AcrossRanks {
        files: ranks.iter().map(|g| g.file.clone()).collect(),
        steps,
        period_us: Spread::of(&period),
        win_us: Spread::of(&win),
        itl_change_pct: Spread::of(&pairs().map(|(p, w)| -100.0 * w / p).collect::<Vec<_>>()),
        throughput_change_pct: Spread::of(
            &pairs()
                .map(|(p, w)| 100.0 * (p / (p - w) - 1.0))
                .collect::<Vec<_>>(),
        ),
        slowest_share: (slowest.iter()).map(|&n| n as f64 / steps as f64).collect(),
    })
}

impl AcrossRanks {
    /// The rank that was the slowest in the most steps.
    pub fn slowest_rank(&self) -> usize {
        (self.slowest_share.iter().enumerate())
            .fold((0, f64::MIN), |a, (r, &s)| if s > a.1 { (r, s) } else { a })
            .0
    }

    /// The summary's lines for the ranks: the answer across them, then a row a rank.
    pub fn markdown(&self, ranks: &[Gaps]) -> String {
        let mut out = format!(
            "**Across {} ranks** (each step as its slowest rank sets it, {} steps): the step is \
             {} µs [p10, p90]; removing every rank's reads: ITL {}, throughput {} ({} µs a \
             step).\n\n",
            ranks.len(),
            self.steps,
            us(&self.period_us),
            pct(&self.itl_change_pct),
            pct(&self.throughput_change_pct),
            fmt_num(self.win_us.median),
        );
        out.push_str(
            "| rank | trace | step, µs | the slowest in | removing its reads saves, µs a step | \
             ITL alone |\n|---:|---|---:|---:|---:|---:|\n",
        );
        for (r, g) in ranks.iter().enumerate() {
            let _ = writeln!(
                out,
                "| {r} | {} | {} | {:.0}% of steps | {} | {} |",
                table_cell(&code(&g.file)),
                us(&g.period_us),
                100.0 * self.slowest_share[r],
                us(&g.win_us),
                pct(&g.itl_change_pct),
            );
        }
        out
    }
}
