//! Step metrics from a measured timeline: ITL, output throughput, forward occupancy and the
//! host-bound gap.
//!
//! All times are µs on **one** clock; the step loop uses the device clock (CUDA events from
//! one anchor) for every field. A step's *window* runs from the previous step's completion
//! to its own (`host_end_us`); the first step's window starts at its own `host_start_us`, as
//! there is no earlier completion to measure from. Windows therefore tile
//! the run from the first step's start to the last step's end, the span throughput and
//! occupancy divide by.

use crate::stats::summary::quantile_sorted;
use anyhow::{ensure, Result};

/// One decode step as the step loop saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// Where the step's window starts when it is the first: the step loop gives the previous
    /// step's completion (its own start is unknown on the device clock).
    pub host_start_us: f64,
    /// When the step is complete: its accept has run and its tokens are known.
    pub host_end_us: f64,
    /// Kernel intervals `(start, end)` on the GPU for this step. They may overlap each other
    /// and may spill outside the step's window (an overlap scheduler runs the GPU a step
    /// behind the host); busy time is counted in whichever window it falls.
    pub gpu_busy: Vec<(f64, f64)>,
    /// Tokens accepted this step, one entry per request.
    pub tokens_per_request: Vec<u32>,
}

/// Medians and tails of a checked timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSummary {
    pub steps: usize,
    pub itl_median_us: f64,
    pub itl_p90_us: f64,
    pub itl_p99_us: f64,
    pub throughput_tok_s: f64,
    /// GPU busy time over wall time, 0..=1.
    pub occupancy: f64,
    pub gap_median_us: f64,
}

/// A checked run of steps with the GPU's busy intervals merged.
#[derive(Debug, Clone)]
pub struct Timeline {
    steps: Vec<StepRecord>,
    /// Union of every busy interval: sorted, disjoint.
    busy: Vec<(f64, f64)>,
}

impl Timeline {
    /// Checks the records (finite times, ends after starts, completions in order, at least
    /// one accepted token, a run longer than zero) and merges the busy intervals.
    pub fn new(steps: Vec<StepRecord>) -> Result<Timeline> {
        ensure!(
            !steps.is_empty(),
            "no steps were recorded: run at least one step"
        );
        let mut previous_end = f64::NEG_INFINITY;
        for (i, step) in steps.iter().enumerate() {
            let (start, end) = (step.host_start_us, step.host_end_us);
            ensure!(
                start.is_finite() && end.is_finite() && end >= start,
                "step {i}: host times {start}..{end} µs are not a forward interval"
            );
            ensure!(
                end >= previous_end,
                "step {i} completed at {end} µs, before step {} ({previous_end} µs): \
                 record steps in completion order",
                i - 1
            );
            previous_end = end;
            for &(s, e) in &step.gpu_busy {
                ensure!(
                    s.is_finite() && e.is_finite() && e >= s,
                    "step {i}: GPU interval {s}..{e} µs is not a forward interval"
                );
            }
        }
        let run_us = previous_end - steps[0].host_start_us;
        ensure!(
            run_us > 0.0,
            "the run lasted {run_us} µs: timestamps are not advancing"
        );
        ensure!(
            steps
                .iter()
                .flat_map(|s| &s.tokens_per_request)
                .any(|&a| a > 0),
            "no step accepted a token, so ITL and throughput are undefined"
        );
        let busy = merge(
            steps
                .iter()
                .flat_map(|s| s.gpu_busy.iter().copied())
                .collect(),
        );
        Ok(Timeline { steps, busy })
    }

    /// `(start, end)` of each step's window.
    fn windows(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let first_start = self.steps[0].host_start_us;
        let ends = self.steps.iter().map(|s| s.host_end_us);
        std::iter::once(first_start).chain(ends.clone()).zip(ends)
    }

    /// Wall time of each step's window, µs.
    pub fn step_wall_us(&self) -> Vec<f64> {
        self.windows().map(|(a, b)| b - a).collect()
    }

    /// ITL samples as serving clients count them: a request that got `a` tokens in a step
    /// saw them after the step's wall time, so it contributes `a` samples of `wall / a`.
    /// Requests with no token in a step contribute nothing.
    pub fn itl_samples_us(&self) -> Vec<f64> {
        self.steps
            .iter()
            .zip(self.step_wall_us())
            .flat_map(|(step, wall)| {
                step.tokens_per_request
                    .iter()
                    .flat_map(move |&a| std::iter::repeat_n(wall / f64::from(a.max(1)), a as usize))
            })
            .collect()
    }

    /// Accepted tokens, summed over the batch, per second of the run.
    pub fn throughput_tok_s(&self) -> f64 {
        let tokens: u64 = self
            .steps
            .iter()
            .flat_map(|s| &s.tokens_per_request)
            .map(|&a| u64::from(a))
            .sum();
        tokens as f64 / (self.run_us() * 1e-6)
    }

    /// Share of the run during which at least one kernel ran.
    pub fn occupancy(&self) -> f64 {
        let first_start = self.steps[0].host_start_us;
        let last_end = first_start + self.run_us();
        self.covered_us(first_start, last_end) / self.run_us()
    }

    /// GPU idle time inside each step's window, µs.
    pub fn gap_per_step_us(&self) -> Vec<f64> {
        self.windows()
            .map(|(a, b)| (b - a) - self.covered_us(a, b))
            .collect()
    }

    pub fn summary(&self) -> StepSummary {
        let itl = sorted(self.itl_samples_us());
        let gaps = sorted(self.gap_per_step_us());
        StepSummary {
            steps: self.steps.len(),
            itl_median_us: quantile_sorted(&itl, 0.5),
            itl_p90_us: quantile_sorted(&itl, 0.9),
            itl_p99_us: quantile_sorted(&itl, 0.99),
            throughput_tok_s: self.throughput_tok_s(),
            occupancy: self.occupancy(),
            gap_median_us: quantile_sorted(&gaps, 0.5),
        }
    }

    fn run_us(&self) -> f64 {
        self.steps[self.steps.len() - 1].host_end_us - self.steps[0].host_start_us
    }

    /// Busy time inside `[a, b]`.
    fn covered_us(&self, a: f64, b: f64) -> f64 {
        let first = self.busy.partition_point(|&(_, end)| end <= a);
        self.busy[first..]
            .iter()
            .take_while(|&&(start, _)| start < b)
            .map(|&(start, end)| end.min(b) - start.max(a))
            .sum()
    }
}

/// Union of intervals as sorted, disjoint intervals.
fn merge(mut intervals: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    intervals.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(start: f64, end: f64, busy: &[(f64, f64)], tokens: &[u32]) -> StepRecord {
        StepRecord {
            host_start_us: start,
            host_end_us: end,
            gpu_busy: busy.to_vec(),
            tokens_per_request: tokens.to_vec(),
        }
    }

    /// Windows 0..100, 100..250, 250..300. Kernels overlap inside step 0, one kernel
    /// (90..120) straddles steps 0 and 1, and requests get different token counts.
    fn hand_worked() -> Timeline {
        Timeline::new(vec![
            step(0.0, 100.0, &[(10.0, 40.0), (30.0, 60.0)], &[3, 1]),
            step(
                80.0,
                250.0,
                &[(90.0, 120.0), (200.0, 210.0), (205.0, 230.0)],
                &[2, 2, 0],
            ),
            step(240.0, 300.0, &[(250.0, 300.0)], &[1, 4]),
        ])
        .unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn windows_run_from_previous_completion() {
        assert_eq!(hand_worked().step_wall_us(), vec![100.0, 150.0, 50.0]);
    }

    #[test]
    fn itl_splits_each_gap_over_each_requests_tokens() {
        let mut itl = hand_worked().itl_samples_us();
        itl.sort_by(f64::total_cmp);
        let third = 100.0 / 3.0;
        let want = [
            12.5, 12.5, 12.5, 12.5, third, third, third, 50.0, 75.0, 75.0, 75.0, 75.0, 100.0,
        ];
        assert_eq!(itl.len(), want.len());
        for (got, want) in itl.iter().zip(want) {
            assert!(close(*got, want), "{itl:?}");
        }
    }

    #[test]
    fn gap_is_idle_time_inside_each_window() {
        // Step 0: busy 10..60 (merged) + 90..100 = 60 of 100. Step 1: 100..120 + 200..230
        // = 50 of 150. Step 2: fully busy.
        assert_eq!(hand_worked().gap_per_step_us(), vec![40.0, 100.0, 0.0]);
    }

    #[test]
    fn summary_of_the_hand_worked_timeline() {
        let s = hand_worked().summary();
        assert_eq!(s.steps, 3);
        // 13 samples; sorted index 6 is 100/3; p90 at h = 10.8 lies between two 75s;
        // p99 at h = 11.88 is 75 + 0.88 · 25.
        assert!(close(s.itl_median_us, 100.0 / 3.0), "{s:?}");
        assert!(close(s.itl_p90_us, 75.0), "{s:?}");
        assert!(close(s.itl_p99_us, 97.0), "{s:?}");
        // 13 tokens in 300 µs.
        assert!(close(s.throughput_tok_s, 13.0 / 300e-6), "{s:?}");
        // Busy 10..60, 90..120, 200..230, 250..300 = 160 of 300.
        assert!(close(s.occupancy, 160.0 / 300.0), "{s:?}");
        assert!(close(s.gap_median_us, 40.0), "{s:?}");
    }

    #[test]
    fn busy_time_outside_the_run_is_not_counted() {
        let t = Timeline::new(vec![step(0.0, 10.0, &[(-50.0, 5.0), (8.0, 30.0)], &[1])]).unwrap();
        assert_eq!(t.gap_per_step_us(), vec![3.0]);
        assert!(close(t.occupancy(), 0.7));
    }

    #[test]
    fn nested_and_touching_intervals_merge() {
        assert_eq!(
            merge(vec![(5.0, 6.0), (0.0, 10.0), (10.0, 12.0), (20.0, 21.0)]),
            vec![(0.0, 12.0), (20.0, 21.0)]
        );
    }

    #[test]
    fn quantile_interpolates_linearly() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert!(close(quantile_sorted(&v, 0.5), 2.5));
        assert!(close(quantile_sorted(&v, 0.9), 3.7));
        assert!(close(quantile_sorted(&v, 0.0), 1.0));
        assert!(close(quantile_sorted(&v, 1.0), 4.0));
        assert!(close(quantile_sorted(&[7.0], 0.99), 7.0));
    }

    fn rejected(steps: Vec<StepRecord>, needle: &str) {
        let e = Timeline::new(steps).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }

    #[test]
    fn rejects_bad_timelines() {
        rejected(vec![], "no steps");
        rejected(vec![step(10.0, 5.0, &[], &[1])], "step 0: host times");
        rejected(vec![step(f64::NAN, 5.0, &[], &[1])], "step 0: host times");
        rejected(
            vec![step(0.0, 10.0, &[], &[1]), step(1.0, 9.0, &[], &[1])],
            "record steps in completion order",
        );
        rejected(
            vec![step(0.0, 10.0, &[(4.0, 3.0)], &[1])],
            "GPU interval 4..3",
        );
        rejected(
            vec![step(0.0, 10.0, &[(0.0, f64::INFINITY)], &[1])],
            "GPU interval",
        );
        rejected(
            vec![step(5.0, 5.0, &[], &[1])],
            "timestamps are not advancing",
        );
        rejected(
            vec![step(0.0, 10.0, &[], &[0, 0])],
            "no step accepted a token",
        );
    }
}
