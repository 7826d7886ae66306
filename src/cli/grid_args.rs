//! The flag groups `sweep` and `steps` share, one name per idea: the grid of shapes
//! ([`GridArgs`]) and the rounds a cell is measured in ([`RoundsArgs`]). Each command flattens
//! them and sets its own defaults where they differ (`#[command(mut_arg(...))]` on its args);
//! the names `sweep` used before stay as hidden aliases, so old command lines still run.

use super::common::{precision_pct, seq_lens_within, time_cap};
use super::lists::{distinct, positive_u32};
use crate::prep::inputs::LengthRange;
use crate::stats::rounds::{MAX_ROUNDS, MIN_ROUNDS};
use anyhow::{ensure, Result};
use clap::Args;
use std::time::Duration;

/// The shapes a run measures: every batch size × block size, with page tables sized for
/// `--max-context` and committed lengths drawn from `--seq-lens`.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct GridArgs {
    /// Batch sizes (requests per step), comma separated. A dep layout gives each GPU
    /// ceil(bs / dp) of them; `steps` leaves out the batches a layout's GPUs cannot hold.
    #[arg(long, value_delimiter = ',', value_parser = positive_u32)]
    pub(crate) batch_sizes: Vec<u32>,
    /// Block sizes, comma separated: DSpark's draft block γ (the verify step checks the same
    /// tokens), or the DSA families' N draft tokens per request (decode has one row per
    /// request whatever the block); under `steps --drafter eagle` N, EAGLE's
    /// speculative_num_draft_tokens.
    #[arg(long, value_delimiter = ',', value_parser = positive_u32, default_value = "3,5,8")]
    pub(crate) block_sizes: Vec<u32>,
    /// Longest context a request may reach (tokens): the static width of the page tables the
    /// graph path sizes by.
    #[arg(long)]
    pub(crate) max_context: u32,
    /// Committed lengths are drawn uniformly from MIN-MAX tokens.
    #[arg(long, default_value = "2048-8192")]
    pub(crate) seq_lens: String,
}

impl GridArgs {
    /// The batch and block sizes, each listed once, and the lengths, which must leave room
    /// for the drafts within `--max-context`.
    pub(crate) fn checked(&self) -> Result<(Vec<u32>, Vec<u32>, LengthRange)> {
        distinct(&self.batch_sizes, "--batch-sizes")?;
        distinct(&self.block_sizes, "--block-sizes")?;
        let seq_lens = seq_lens_within(&self.seq_lens, self.max_context)?;
        Ok((self.batch_sizes.clone(), self.block_sizes.clone(), seq_lens))
    }
}

/// How many rounds a cell is measured in, and when it stops adding them.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct RoundsArgs {
    /// Fewest rounds per cell. A cell's row is the median of its rounds' medians and its 95%
    /// interval the spread between rounds, so drift during the run widens it: a sweep's
    /// round measures the floor, then every cell group (the arms of one family, layout, batch
    /// and block, back to back) in a fresh order drawn from --seed and the round; a steps
    /// round runs a cell's (layout, batch, block) arms back to back. 6 is the fewest whose
    /// medians give a distribution-free 95% interval; fewer are refused.
    #[arg(long, alias = "rounds", default_value_t = MIN_ROUNDS)]
    pub(crate) min_rounds: usize,
    /// Most rounds per cell: past --min-rounds a cell gets another round only while it is not
    /// within --precision-pct and its --cell-time-cap-ms is not spent; its rows' stop_reason
    /// says which ended it (precision, max-rounds, time-cap).
    #[arg(long)]
    pub(crate) max_rounds: usize,
    /// Precision aimed at, in percent: past --min-rounds a cell stops adding rounds once the
    /// 95% interval (between rounds) of what it is judged on is within ± this. sweep: every
    /// arm's step_us, relative to its median (or within 20 ns), with the host-read cost
    /// (eager-sync − eager-device, paired by round) within ±1% or ±0.3 µs; steps: every arm's
    /// step time against eager-sync's, paired within rounds, in percentage points of
    /// eager-sync's (each arm's own step time when eager-sync is not run).
    #[arg(long, alias = "rel-ci-pct")]
    pub(crate) precision_pct: f64,
    /// Time cap of a cell over all its rounds, ms: past --min-rounds it stops there, precise
    /// or not. sweep: per arm and metric, a group stopping once its cells' caps together are
    /// spent, each round's sampling stopping at this / --min-rounds even short of its
    /// samples; steps: the cell's arms together, its --min-rounds always run (long steps take
    /// shorter passes to fit the cap).
    #[arg(long, alias = "time-cap-ms")]
    pub(crate) cell_time_cap_ms: u64,
}

/// [`RoundsArgs`], checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rounds {
    pub min: usize,
    pub max: usize,
    pub precision_pct: f64,
    pub cell_time_cap: Duration,
}

impl RoundsArgs {
    pub(crate) fn checked(&self) -> Result<Rounds> {
        ensure!(
            self.min_rounds >= MIN_ROUNDS,
            "--min-rounds: {} is too few: the medians of {MIN_ROUNDS} rounds are the fewest \
             that give a 95% interval, and a row without one can never be called faster or \
             slower",
            self.min_rounds
        );
        ensure!(
            (self.min_rounds..=MAX_ROUNDS).contains(&self.max_rounds),
            "--max-rounds: {} must be between --min-rounds ({}) and {MAX_ROUNDS}",
            self.max_rounds,
            self.min_rounds
        );
        let pct = precision_pct(self.precision_pct, "--precision-pct")?;
        Ok(Rounds {
            min: self.min_rounds,
            max: self.max_rounds,
            precision_pct: pct,
            cell_time_cap: time_cap(self.cell_time_cap_ms, "--cell-time-cap-ms")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    #[command(mut_arg("max_rounds", |a| a.default_value("12").required(false)))]
    #[command(mut_arg("precision_pct", |a| a.default_value("1").required(false)))]
    #[command(mut_arg("cell_time_cap_ms", |a| a.default_value("500").required(false)))]
    struct Only {
        #[command(flatten)]
        rounds: RoundsArgs,
    }

    fn rounds(args: &[&str]) -> Result<Rounds> {
        let argv = std::iter::once("x").chain(args.iter().copied());
        Only::try_parse_from(argv)?.rounds.checked()
    }

    #[test]
    fn the_old_names_are_aliases_of_the_new() {
        let new = rounds(&["--min-rounds", "8", "--precision-pct", "2"]).unwrap();
        let old = rounds(&["--rounds", "8", "--rel-ci-pct", "2"]).unwrap();
        assert_eq!(new, old);
        let cap = rounds(&["--time-cap-ms", "700"]).unwrap().cell_time_cap;
        assert_eq!(cap, Duration::from_millis(700));
        assert_eq!(
            rounds(&[]).unwrap(),
            Rounds {
                min: MIN_ROUNDS,
                max: 12,
                precision_pct: 1.0,
                cell_time_cap: Duration::from_millis(500)
            }
        );
    }

    #[test]
    fn sweep_and_steps_take_every_old_name_as_the_new_one() {
        use crate::cli::steps::StepsArgs;
        use crate::cli::sweep::SweepArgs;
        // Flags renamed since a run could record them, old name first: hidden aliases.
        for (old, new) in [
            ("--rounds", "--min-rounds"),
            ("--rel-ci-pct", "--precision-pct"),
            ("--time-cap-ms", "--cell-time-cap-ms"),
        ] {
            let value = if new == "--precision-pct" { "2" } else { "9" };
            let sweep = |flag: &str| {
                let args: SweepArgs =
                    crate::cli::common::parse_args("sweep", &[flag.into(), value.into()])
                        .unwrap_or_else(|_| panic!("sweep {flag} {value}"));
                args.rounds
            };
            let steps = |flag: &str| {
                let args: StepsArgs =
                    crate::cli::common::parse_args("steps", &[flag.into(), value.into()])
                        .unwrap_or_else(|_| panic!("steps {flag} {value}"));
                args.rounds
            };
            assert_eq!(sweep(old), sweep(new), "{old}");
            assert_eq!(steps(old), steps(new), "{old}");
            assert_ne!(sweep(new), sweep("--seed"), "{new} takes its value");
        }
    }

    #[test]
    fn each_bound_is_refused_naming_the_new_flag() {
        for (args, says) in [
            (&["--rounds", "5"][..], "--min-rounds: 5 is too few"),
            (
                &["--min-rounds", "8", "--max-rounds", "7"],
                "--max-rounds: 7 must be between --min-rounds (8) and 100",
            ),
            (
                &["--max-rounds", "101"],
                "--max-rounds: 101 must be between",
            ),
            (&["--rel-ci-pct", "0"], "--precision-pct: 0 is no precision"),
            (
                &["--precision-pct", "101"],
                "--precision-pct: 101 is no precision",
            ),
            (
                &["--precision-pct", "NaN"],
                "--precision-pct: NaN is no precision",
            ),
            (
                &["--time-cap-ms", "0"],
                "--cell-time-cap-ms: 0 is not a time cap",
            ),
        ] {
            let e = format!("{:#}", rounds(args).unwrap_err());
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
