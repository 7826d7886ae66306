//! `ab`'s statistic held to real pairs: a battery of `ab` runs on an H100 (80 GB HBM3, driver
//! 580.159; results/2026-12-06-h100-ab-battery/), 14 A/A runs and 14 with 1 µs more stand-in
//! forward on NEW, each run one process a side measuring 24 cells × 16 pairs. Within one
//! process pair the GPU-paced rows' intervals were ±0.2-0.3% while their changes moved 1.5-2.7%
//! from run to run: each run's two processes are one draw. Taking eight runs as the eight
//! processes of one `ab` (two pairs of each), the interval over processes is what the gate reads.

use flate2::read::GzDecoder;
use metaprep::ab::verdict::{over_processes, pacing_of, Call, Margins};
use metaprep::stats::paired::hodges_lehmann;
use metaprep::stats::rng::SplitMix64;
use std::collections::BTreeMap;
use std::io::Read;

/// (family, arm, batch size, metric) → run → that run's pairs' ln(NEW/BASE), in round order.
type Runs = BTreeMap<(String, String, String, String), BTreeMap<u32, Vec<f64>>>;

fn pairs(kind: &str) -> Runs {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ab-h100-pairs.csv.gz"
    );
    let mut text = String::new();
    GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut runs = Runs::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[0] != kind {
            continue;
        }
        let (base, new): (f64, f64) = (f[7].parse().unwrap(), f[8].parse().unwrap());
        let key = (f[3].into(), f[4].into(), f[5].into(), f[6].into());
        let run = f[1].parse().unwrap();
        runs.entry(key)
            .or_default()
            .entry(run)
            .or_default()
            .push((new / base).ln());
    }
    runs
}

/// Seven windows of eight consecutive runs and 40 drawn sets of eight.
fn eights(runs: u32) -> Vec<Vec<u32>> {
    let mut sets: Vec<Vec<u32>> = (1..=runs - 7).map(|s| (s..s + 8).collect()).collect();
    let mut rng = SplitMix64::new(20261206);
    for _ in 0..40 {
        let mut all: Vec<u32> = (1..=runs).collect();
        rng.shuffle(&mut all);
        sets.push(all[..8].to_vec());
    }
    sets
}

/// Each row's call over the eight runs of `set` as processes, two pairs of each.
fn calls(runs: &Runs, set: &[u32]) -> Vec<(String, Call)> {
    (runs.iter())
        .map(|((family, arm, bs, metric), by_run)| {
            let d: Vec<(usize, f64)> = (set.iter().enumerate())
                .flat_map(|(process, run)| by_run[run].iter().take(2).map(move |&d| (process, d)))
                .collect();
            let margin = Margins::DEFAULT.of(pacing_of(arm, metric));
            let name = format!("{family}/{arm} bs {bs} {metric}");
            (name, Call::of(over_processes(&d).as_ref(), margin))
        })
        .collect()
}

#[test]
fn one_process_pair_calls_a_gpu_paced_a_a_row_that_its_interval_says_is_certain() {
    let runs = pairs("aa");
    assert_eq!(runs.values().next().unwrap().len(), 14);
    let mut called_runs = 0;
    for run in 1..=14 {
        let called = runs.iter().any(|((_, arm, _, metric), by_run)| {
            let c = hodges_lehmann(&by_run[&run]);
            Call::of(c.as_ref(), Margins::DEFAULT.of(pacing_of(arm, metric))).called()
        });
        called_runs += usize::from(called);
    }
    assert!(
        called_runs >= 10,
        "only {called_runs} of 14 A/A runs called a row over pairs"
    );
}

#[test]
fn over_eight_processes_the_real_a_a_calls_a_row_in_at_most_one_set_of_twenty() {
    let runs = pairs("aa");
    let sets = eights(14);
    let mut calling = Vec::new();
    for set in &sets {
        let called: Vec<String> = (calls(&runs, set).into_iter())
            .filter(|(_, call)| call.called())
            .map(|(name, call)| format!("{name} {}", call.name()))
            .collect();
        if !called.is_empty() {
            calling.push(format!("{set:?}: {called:?}"));
        }
    }
    // The bar of an A/A battery: 19 of 20 runs call nothing.
    assert!(
        calling.len() * 20 <= sets.len(),
        "{} of {} sets called rows: {calling:?}",
        calling.len(),
        sets.len()
    );
}

#[test]
fn over_eight_processes_one_more_microsecond_of_forward_is_caught_on_every_gpu_paced_row() {
    let runs = pairs("gpu");
    for set in eights(14) {
        for (name, call) in calls(&runs, &set) {
            let graph = name.contains("/graph ") || name.contains("/fused ");
            if graph && name.ends_with("step_fwd_us") {
                assert_eq!(call, Call::Slower, "{name} over runs {set:?}");
            } else if call.called() {
                // The forward is in every arm's step_fwd_us; nothing else moved.
                assert!(
                    name.ends_with("step_fwd_us"),
                    "{name} {} over runs {set:?}",
                    call.name()
                );
            }
        }
    }
}
