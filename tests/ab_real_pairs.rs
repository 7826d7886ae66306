//! `ab`'s statistic held to real pairs: `metaprep ab` on an H100 (80 GB HBM3, driver 580.159;
//! results/2026-12-06-h100-ab-final/), 20 A/A runs and 20 with 1 µs more stand-in forward on
//! NEW, each run 24 cells × 16 pairs over 8 processes a side. The fixture keeps every pair's
//! `step_us` and `step_fwd_us`. A change multiplied onto NEW's values of the A/A pairs is a
//! planted change on the host's real noise.

use flate2::read::GzDecoder;
use metaprep::ab::run::rounds_of;
use metaprep::ab::verdict::{over_processes, pacing_of, Call, Margins};
use std::collections::BTreeMap;
use std::io::Read;

const RUNS: u32 = 20;
const PROCESSES: usize = 8;
const PAIRS: usize = 16;

/// (family, arm, batch size, metric) of a row.
type RowKey = (String, String, String, String);
/// Row → its pairs as (round or process, BASE, NEW).
type Rows = BTreeMap<RowKey, Vec<(usize, f64, f64)>>;
/// Run → its rows, each pair's round.
type Runs = BTreeMap<u32, Rows>;

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
        let key = (f[3].into(), f[4].into(), f[5].into(), f[6].into());
        let round = f[2].parse::<usize>().unwrap() - 1;
        let (base, new) = (f[7].parse().unwrap(), f[8].parse().unwrap());
        (runs.entry(f[1].parse().unwrap()).or_default())
            .entry(key)
            .or_default()
            .push((round, base, new));
    }
    assert_eq!(runs.len(), RUNS as usize, "{kind}");
    runs
}

/// The process that measured `round` in a run of eight processes a side.
fn process_of(round: usize) -> usize {
    (0..PROCESSES)
        .find(|&g| rounds_of(g, PROCESSES, PAIRS).contains(&round))
        .unwrap()
}

/// A run as `ab` would make it of the runs in `set`, each run's processes its own: all their
/// pairs, or (`one_each`) the first pair of each process, as 16 processes of 16 pairs would.
fn processes_of(
    runs: &Runs,
    set: &[u32],
    one_each: bool,
) -> BTreeMap<RowKey, Vec<(usize, f64, f64)>> {
    let mut merged = Rows::new();
    for (i, run) in set.iter().enumerate() {
        for (key, pairs) in &runs[run] {
            let kept = (pairs.iter()).filter(|(round, _, _)| !one_each || round % 2 == 0);
            (merged.entry(key.clone()).or_default())
                .extend(kept.map(|&(round, b, n)| (i * PROCESSES + process_of(round), b, n)));
        }
    }
    merged
}

/// Twenty runs of 16 processes, one pair each: runs n and n + 1 (mod 20) together.
fn sixteen_processes(runs: &Runs) -> Vec<Rows> {
    (1..=RUNS)
        .map(|n| processes_of(runs, &[n, n % RUNS + 1], true))
        .collect()
}

/// Each row's call, NEW's values of the rows `planted` picks multiplied by its factor.
fn calls(run: &Rows, planted: impl Fn(&RowKey) -> f64) -> Vec<(String, Call)> {
    (run.iter())
        .map(|(key @ (family, arm, bs, metric), pairs)| {
            let factor = planted(key);
            let d: Vec<(usize, f64)> = (pairs.iter())
                .map(|&(process, base, new)| (process, (new * factor / base).ln()))
                .collect();
            let margin = Margins::DEFAULT.of(pacing_of(arm, metric));
            let name = format!("{family}/{arm} bs {bs} {metric}");
            (name, Call::of(over_processes(&d).as_ref(), margin))
        })
        .collect()
}

fn called(calls: &[(String, Call)]) -> Vec<String> {
    (calls.iter())
        .filter(|(_, c)| c.called())
        .map(|(name, c)| format!("{name} {}", c.name()))
        .collect()
}

/// A run's planted rows that were not called slower, and its other rows that were called.
fn missed_and_stray(
    calls: &[(String, Call)],
    planted: impl Fn(&str) -> bool,
) -> (usize, Vec<String>) {
    let missed = (calls.iter())
        .filter(|(name, call)| planted(name) && *call != Call::Slower)
        .count();
    let stray = (calls.iter())
        .filter(|(name, call)| call.called() && !planted(name))
        .map(|(name, _)| name.clone())
        .collect();
    (missed, stray)
}

fn eager_sync_step(name: &str) -> bool {
    name.contains("/eager-sync ") && name.ends_with(" step_us")
}

fn gpu_paced_forward(name: &str) -> bool {
    (name.contains("/graph ") || name.contains("/fused ")) && name.ends_with(" step_fwd_us")
}

fn plant(rows: fn(&str) -> bool, factor: f64) -> impl Fn(&RowKey) -> f64 {
    move |(family, arm, bs, metric): &RowKey| match rows(&format!(
        "{family}/{arm} bs {bs} {metric}"
    )) {
        true => factor,
        false => 1.0,
    }
}

#[test]
fn the_real_a_a_runs_call_no_row_over_eight_processes_or_sixteen() {
    let runs = pairs("aa");
    let eight = (runs.keys()).map(|&n| processes_of(&runs, &[n], false));
    for (processes, run) in eight.chain(sixteen_processes(&runs)).enumerate() {
        let called = called(&calls(&run, |_| 1.0));
        assert!(called.is_empty(), "set {processes}: {called:?}");
    }
}

/// Over eight processes a side a planted +20% on eager-sync's step was missed on a row in 4
/// of 20 runs: the host's states move a process's median by more than a pair's; over 16
/// processes (the default) it is caught on every row of every run, and nothing else called.
#[test]
fn a_fifth_more_eager_sync_step_is_caught_over_sixteen_processes_not_eight() {
    let runs = pairs("aa");
    let planted = plant(eager_sync_step, 1.2);
    let missing = |sets: Vec<Rows>| {
        (sets.iter())
            .filter(|run| {
                let (missed, stray) = missed_and_stray(&calls(run, &planted), eager_sync_step);
                assert!(stray.is_empty(), "{stray:?}");
                missed > 0
            })
            .count()
    };
    let eight = (runs.keys())
        .map(|&n| processes_of(&runs, &[n], false))
        .collect();
    assert!(missing(eight) > 1, "eight processes reach the bar");
    assert!(missing(sixteen_processes(&runs)) <= 1);
}

#[test]
fn five_percent_more_gpu_paced_step_is_caught_over_sixteen_processes() {
    let runs = pairs("aa");
    let planted = plant(gpu_paced_forward, 1.05);
    for run in sixteen_processes(&runs) {
        let (missed, stray) = missed_and_stray(&calls(&run, &planted), gpu_paced_forward);
        assert_eq!((missed, stray), (0, vec![]));
    }
}

/// What the GPU measured with 1 µs more stand-in forward on NEW (+3-4% of a GPU-paced
/// step_fwd_us) over eight processes: every run called step_fwd_us rows alone, and the graph
/// and fused ones in all but two runs, each of which missed one of 12.
#[test]
fn one_more_microsecond_of_forward_is_caught_on_the_gpu_paced_rows_of_most_runs() {
    let runs = pairs("gpu");
    let mut missed = 0;
    for &n in runs.keys() {
        let calls = calls(&processes_of(&runs, &[n], false), |_| 1.0);
        let (m, stray) = missed_and_stray(&calls, gpu_paced_forward);
        assert!(
            stray.iter().all(|s| s.ends_with("step_fwd_us")),
            "run {n}: {stray:?}"
        );
        missed += m;
    }
    assert!(missed <= 2, "{missed} rows missed");
}
