//! A cell's measurements into results rows: each arm's clean passes kept round by round
//! ([`ArmRounds`]), throughput over windows of steps, and the rows of one step cell (rounds'
//! medians with the interval between rounds, the paired ratio to eager-sync, occupancy and
//! gaps from the timeline). No GPU here: tested on synthetic passes.

use super::passes::Pass;
use crate::axes::Arm;
use crate::harness::nvml::CellTelemetry;
use crate::harness::rows::CellId;
use crate::model::metrics::{StepRecord, Timeline};
use crate::results::csv::{Row, STEP_RATIO_VS_EAGER_SYNC};
use crate::stats::rounds::ONE_PROCESS;
use crate::stats::summary::{quantile, Estimate};
use anyhow::{Context, Result};

/// Steps per throughput sample.
const THROUGHPUT_WINDOW: usize = 10;

/// Throughput samples over windows of steps: tokens of the window over its wall time, times
/// `scale`, the batch's requests per request this rank holds (bs / rank batch: 1 for tp
/// layouts; for dep, the ranks holding the rest of the batch, which run in parallel).
pub fn window_throughput(
    done_us: &[f64],
    tokens: &[Vec<u32>],
    window: usize,
    scale: f64,
) -> Vec<f64> {
    (1..done_us.len())
        .step_by(window)
        .filter(|&s| s + window <= done_us.len())
        .map(|s| {
            let toks: u64 = tokens[s..s + window]
                .iter()
                .flatten()
                .map(|&a| a as u64)
                .sum();
            toks as f64 * scale / ((done_us[s + window - 1] - done_us[s - 1]) * 1e-6)
        })
        .collect()
}

/// The mean step time of the arms' last round, `None` before the first: what the next
/// round's pass length is sized by.
pub(super) fn last_round_step_us(measured: &[ArmRounds]) -> Option<f64> {
    let last: Vec<f64> = measured
        .iter()
        .filter_map(|m| m.step_us.last())
        .flatten()
        .copied()
        .collect();
    (!last.is_empty()).then(|| last.iter().sum::<f64>() / last.len() as f64)
}

/// One arm's clean passes of a cell, round by round, each pass's warm-up left out.
#[derive(Default)]
pub(super) struct ArmRounds {
    pub(super) step_us: Vec<Vec<f64>>,
    pub(super) itl_us: Vec<Vec<f64>>,
    pub(super) throughput_tok_s: Vec<Vec<f64>>,
    pub(super) blocked_us: Vec<Vec<f64>>,
}

impl ArmRounds {
    /// Adds one round's clean pass; `batch_scale` as in [`window_throughput`].
    pub(super) fn push(&mut self, clean: &Pass, warmup: usize, batch_scale: f64) -> Result<()> {
        let first = warmup.max(1);
        let measured: Vec<StepRecord> = (first..clean.done_us.len())
            .map(|k| StepRecord {
                host_start_us: clean.done_us[k - 1],
                host_end_us: clean.done_us[k],
                gpu_busy: Vec::new(),
                tokens_per_request: clean.tokens[k].clone(),
            })
            .collect();
        let steps = Timeline::new(measured).context("the clean pass")?;
        self.itl_us.push(steps.itl_samples_us());
        self.step_us.push(steps.step_wall_us());
        // A pass shorter than the window (long steps) is one window, not none.
        let window = THROUGHPUT_WINDOW.min(clean.done_us.len().saturating_sub(first));
        self.throughput_tok_s.push(window_throughput(
            &clean.done_us[first - 1..],
            &clean.tokens[first - 1..],
            window.max(1),
            batch_scale,
        ));
        self.blocked_us
            .push(clean.blocked_us[first.min(clean.blocked_us.len())..].to_vec());
        Ok(())
    }
}

/// The rows of one step cell: ITL, throughput, step time and blocked time from its rounds
/// (each the median of round medians with the interval between rounds), its step time over
/// eager-sync's paired within rounds, occupancy and gaps from the timeline pass.
pub(super) fn step_rows(
    id: &CellId,
    arm: Arm,
    rounds: &ArmRounds,
    stop: &str,
    eager_sync: Option<&ArmRounds>,
    timeline: &Timeline,
    telemetry: Option<&CellTelemetry>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    rows.extend(id.rounds_row("itl_us", "us", &rounds.itl_us, stop, telemetry, ONE_PROCESS));
    let itl = rounds.itl_us.concat();
    if let Some(p99) = quantile(&itl, 0.99) {
        let point = Estimate {
            point: p99,
            lo: f64::NAN,
            hi: f64::NAN,
        };
        rows.push(id.estimate_row("itl_p99_us", "us", &point, itl.len() as u64, telemetry));
    }
    rows.extend(id.rounds_row(
        "step_us",
        "us",
        &rounds.step_us,
        stop,
        telemetry,
        ONE_PROCESS,
    ));
    rows.extend(id.rounds_row(
        "throughput_tok_s",
        "tok/s",
        &rounds.throughput_tok_s,
        stop,
        telemetry,
        ONE_PROCESS,
    ));
    if arm.reads_host() || arm == Arm::GraphUpload {
        rows.extend(id.rounds_row(
            "host_blocked_us",
            "us",
            &rounds.blocked_us,
            stop,
            telemetry,
            ONE_PROCESS,
        ));
    }
    if let Some(sync) = eager_sync {
        rows.extend(id.paired_row(
            STEP_RATIO_VS_EAGER_SYNC,
            "x",
            (&rounds.step_us, &sync.step_us),
            |arm, sync| arm / sync,
            telemetry,
            ONE_PROCESS,
        ));
    }
    let walls = timeline.step_wall_us();
    let gaps = timeline.gap_per_step_us();
    let occupancy: Vec<f64> = walls.iter().zip(&gaps).map(|(w, g)| 1.0 - g / w).collect();
    rows.extend(id.summary_row("occupancy", "ratio", &occupancy, "timeline", telemetry));
    rows.extend(id.summary_row("gap_us", "us", &gaps, "timeline", telemetry));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_shorter_than_the_throughput_window_still_gives_one_window() {
        // 3 warm-up and 5 measured steps, 100 µs apart, 2 requests accepting 2 tokens each.
        let pass = Pass {
            done_us: (0..8).map(|k| 100.0 * k as f64).collect(),
            tokens: vec![vec![2, 2]; 8],
            blocked_us: vec![0.0; 8],
        };
        let mut rounds = ArmRounds::default();
        rounds.push(&pass, 3, 1.0).unwrap();
        assert_eq!(rounds.step_us[0].len(), 5);
        // 5 steps x 4 tokens over 500 µs.
        assert_eq!(rounds.throughput_tok_s[0], vec![40_000.0]);
    }

    #[test]
    fn throughput_windows_count_tokens_over_their_wall_time() {
        // Steps complete every 100 µs; each of 2 requests accepts 2 tokens a step.
        let done: Vec<f64> = (0..21).map(|k| 100.0 * k as f64).collect();
        let tokens = vec![vec![2u32, 2]; 21];
        let samples = window_throughput(&done, &tokens, 10, 1.0);
        assert_eq!(samples.len(), 2);
        // 10 steps x 4 tokens over 1000 µs = 40 000 tok/s.
        assert!(
            samples.iter().all(|&s| (s - 40_000.0).abs() < 1e-6),
            "{samples:?}"
        );
        assert_eq!(
            window_throughput(&done, &tokens, 10, 4.0)[0],
            160_000.0,
            "other ranks' requests add"
        );
        assert!(
            window_throughput(&done[..5], &tokens[..5], 10, 1.0).is_empty(),
            "no partial window"
        );
    }
}
