use super::*;
use crate::ab::protocol::Metric;
use crate::stats::rng::SplitMix64;

const MARGINS: Margins = Margins {
    host: 0.05,
    gpu: 0.02,
};

fn uniform(rng: &mut SplitMix64) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

fn normal(rng: &mut SplitMix64) -> f64 {
    let (u1, u2) = (uniform(rng), uniform(rng));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A host whose launch path flips between a fast and a slow state at random: each state
/// lasts an exponential time of mean `dwell_s`, and the slow one makes host-paced work
/// `slow` times as long (the states docs/ab.md describes).
struct TwoStateHost {
    rng: SplitMix64,
    slow: f64,
    dwell_s: f64,
    /// The times the state flips at, from 0.
    flips: Vec<f64>,
}

impl TwoStateHost {
    fn new(seed: u64, slow: f64, dwell_s: f64, span_s: f64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let mut flips = Vec::new();
        let mut t = -dwell_s * uniform(&mut rng).ln() * uniform(&mut rng);
        while t < span_s {
            flips.push(t);
            t += -dwell_s * uniform(&mut rng).ln();
        }
        TwoStateHost {
            rng,
            slow,
            dwell_s,
            flips,
        }
    }

    fn factor(&self, t: f64) -> f64 {
        let flipped = self.flips.iter().filter(|&&f| f <= t).count();
        if flipped % 2 == 1 {
            self.slow
        } else {
            1.0
        }
    }

    /// A burst at time `t` of a row whose true value is `us`, with 3% noise of its own.
    fn burst(&mut self, t: f64, us: f64) -> f64 {
        us * self.factor(t) * (0.03 * normal(&mut self.rng)).exp()
    }
}

/// The pairs of one row over a run of `rounds` rounds in which a round takes `round_s`: one
/// pair a round, its two bursts `burst_s` apart, half BASE-first; NEW is `change` times BASE.
fn interleaved(host: &mut TwoStateHost, rounds: usize, change: f64) -> Vec<(f64, f64)> {
    let (round_s, burst_s) = (0.4, 0.008);
    (0..rounds)
        .map(|r| {
            let t = r as f64 * round_s + uniform(&mut host.rng) * (round_s - 2.0 * burst_s);
            let (first, second) = (host.burst(t, 30.0), host.burst(t + burst_s, 30.0));
            if r % 2 == 0 {
                (first, second * change)
            } else {
                (second, first * change)
            }
        })
        .collect()
}

/// The same row run as two separate runs, all of BASE and then all of NEW, their bursts
/// paired by position.
fn one_after_the_other(host: &mut TwoStateHost, rounds: usize, change: f64) -> Vec<(f64, f64)> {
    let half = rounds as f64 * 0.4;
    (0..rounds)
        .map(|r| {
            let t = r as f64 * 0.4;
            (host.burst(t, 30.0), host.burst(half + t, 30.0) * change)
        })
        .collect()
}

fn call_of(pairs: &[(f64, f64)]) -> Call {
    let d = log_ratios(pairs.iter().copied());
    Call::of(hodges_lehmann(&d).as_ref(), MARGINS.host)
}

/// NEW's values moved to other pairs: what the statistic sees with the pairing removed.
fn unpaired(pairs: &[(f64, f64)], rng: &mut SplitMix64) -> Vec<(f64, f64)> {
    let mut news: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    rng.shuffle(&mut news);
    pairs.iter().zip(news).map(|(p, n)| (p.0, n)).collect()
}

/// Runs of 16 pairs on a host slowing host-paced work by 40% in its slow state, each state
/// lasting `dwell_s` on average.
fn rate(
    runs: u64,
    dwell_s: f64,
    change: f64,
    design: fn(&mut TwoStateHost, usize, f64) -> Vec<(f64, f64)>,
    pairing: bool,
) -> (f64, f64) {
    let (mut slower, mut called) = (0, 0);
    let mut shuffler = SplitMix64::new(99);
    for seed in 0..runs {
        let mut host = TwoStateHost::new(1000 + seed, 1.4, dwell_s, 40.0);
        assert!(host.dwell_s > 0.0);
        let mut pairs = design(&mut host, 16, change);
        if !pairing {
            pairs = unpaired(&pairs, &mut shuffler);
        }
        let call = call_of(&pairs);
        slower += usize::from(call == Call::Slower);
        called += usize::from(call.called());
    }
    (slower as f64 / runs as f64, called as f64 / runs as f64)
}

#[test]
fn on_a_flipping_host_interleaved_pairs_pass_an_a_a_and_catch_a_planted_change() {
    // States of half a second (a flip inside some pairs) and of twenty seconds.
    for dwell_s in [0.5, 20.0] {
        let (_, aa_called) = rate(200, dwell_s, 1.0, interleaved, true);
        assert!(
            aa_called <= 0.05,
            "A/A called in {aa_called} at {dwell_s} s"
        );
        let (caught, _) = rate(200, dwell_s, 1.20, interleaved, true);
        assert!(caught >= 0.95, "+20% caught in {caught} at {dwell_s} s");
    }
}

#[test]
fn without_the_pairing_the_same_pairs_miss_the_planted_change() {
    let (paired, _) = rate(200, 2.0, 1.10, interleaved, true);
    assert!(paired >= 0.9, "+10% caught in {paired} with the pairing");
    let (caught, _) = rate(200, 2.0, 1.10, interleaved, false);
    assert!(
        caught < 0.5,
        "+10% caught in {caught} with the pairing removed"
    );
}

#[test]
fn two_runs_one_after_the_other_call_an_a_a_on_the_same_host() {
    let (_, called) = rate(200, 20.0, 1.0, one_after_the_other, true);
    assert!(
        called >= 0.2,
        "A/A called in only {called}: the host model flips too little"
    );
}

fn measured(cell: usize, probe: f64, metrics: &[(&str, f64)]) -> Measured {
    Measured {
        cell,
        probe_before_us: probe,
        probe_after_us: probe,
        metrics: (metrics.iter())
            .map(|&(name, value)| Metric {
                name: name.into(),
                value,
            })
            .collect(),
    }
}

fn cell(family: &str, arm: &str) -> CellName {
    CellName {
        family: family.into(),
        arm: arm.into(),
        batch_size: 8,
        block: 5,
        layout: "tp1".into(),
    }
}

#[test]
fn rows_take_each_class_margin_and_the_read_cost_pairs_within_a_side() {
    let cells = [
        cell("dsa_decode", "eager-sync"),
        cell("dsa_decode", "eager-device"),
        cell("dsa_decode", "graph"),
    ];
    let mut rng = SplitMix64::new(5);
    let mut pairs = Vec::new();
    for round in 0..12 {
        // The host's state moves from round to round; both sides of a pair share it.
        let state = if round % 3 == 0 { 1.4 } else { 1.0 };
        let mut noise = || (0.005 * normal(&mut rng)).exp();
        for (index, base_us, new_us) in [(0, 40.0, 48.0), (1, 20.0, 20.0), (2, 6.0, 6.3)] {
            let host = if index == 2 { 1.0 } else { state };
            pairs.push(PairRecord {
                round,
                process: round % 6,
                cell: index,
                base_first: round % 2 == 0,
                base: measured(
                    index,
                    2.0 * state,
                    &[
                        ("step_us", base_us * host * noise()),
                        ("gpu_prep_us", 3.0 * noise()),
                    ],
                ),
                new: measured(
                    index,
                    2.0 * state,
                    &[
                        ("step_us", new_us * host * noise()),
                        ("gpu_prep_us", 3.0 * noise()),
                    ],
                ),
                redone: false,
            });
        }
    }
    let rows = rows(&cells, &pairs, MARGINS, state_threshold(&pairs, 0.15));
    let find = |arm: &str, metric: &str| {
        (rows.iter())
            .find(|r| r.cell.arm == arm && r.metric == metric)
            .unwrap_or_else(|| panic!("no {arm} {metric} row"))
    };
    let sync = find("eager-sync", "step_us");
    assert_eq!(
        (sync.pacing, sync.call, sync.fails),
        (Pacing::Host, Call::Slower, true)
    );
    let change = sync.change.unwrap();
    assert!((change.pct - 20.0).abs() < 1.0, "{change:?}");
    assert_eq!(find("eager-device", "step_us").call, Call::Same);
    // Graph's +5% is GPU-paced: beyond its 2% margin.
    let graph = find("graph", "step_us");
    assert_eq!((graph.pacing, graph.call), (Pacing::Gpu, Call::Slower));
    assert!(graph.detectable_pct.unwrap() > 2.0 && graph.detectable_pct.unwrap() < 3.0);
    // The read cost: 20 → 28 µs, +40%, formed within each side.
    let read = find(READ_COST_ARMS, READ_COST);
    assert_eq!(read.pairs, 12);
    assert!((read.change.unwrap().pct - 40.0).abs() < 3.0, "{read:?}");
    assert!(
        rows.iter().all(|r| r.state_split.is_none()),
        "both states agree"
    );
}

#[test]
fn a_row_whose_fast_and_slow_pairs_disagree_says_so() {
    let cells = [cell("dsa_decode", "eager-sync")];
    let pairs: Vec<PairRecord> = (0..24)
        .map(|round| {
            let slow = round % 2 == 0;
            let (probe, change) = if slow { (3.0, 1.3) } else { (2.0, 1.0) };
            let wobble = 1.0 + 0.0002 * round as f64;
            PairRecord {
                round,
                process: round % 6,
                cell: 0,
                base_first: slow,
                base: measured(0, probe, &[("step_us", 40.0 * wobble)]),
                new: measured(0, probe, &[("step_us", 40.0 * change / wobble)]),
                redone: false,
            }
        })
        .collect();
    let at = state_threshold(&pairs, 0.15).expect("two states");
    assert!(at > 2.0 && at < 3.0);
    let rows = rows(&cells, &pairs, MARGINS, Some(at));
    let split = rows[0].state_split.expect("the states disagree");
    assert!(
        split.fast.pct.abs() < 1.0 && (split.slow.pct - 30.0).abs() < 1.0,
        "{split:?}"
    );
    // One state only: no split is looked for.
    let steady: Vec<PairRecord> = pairs.iter().filter(|p| p.round % 2 == 1).cloned().collect();
    assert_eq!(state_threshold(&steady, 0.15), None);
}

#[test]
fn a_call_needs_the_whole_interval_beyond_the_margin() {
    let c = |lo: f64, hi: f64| LogChange {
        estimate: (lo + hi) / 2.0,
        lo: lo.ln_1p(),
        hi: hi.ln_1p(),
        pairs: 16,
    };
    assert_eq!(Call::of(Some(&c(0.051, 0.2)), 0.05), Call::Slower);
    assert_eq!(Call::of(Some(&c(0.049, 0.2)), 0.05), Call::Uncertain);
    assert_eq!(Call::of(Some(&c(-0.2, -0.06)), 0.05), Call::Faster);
    assert_eq!(Call::of(Some(&c(-0.04, 0.04)), 0.05), Call::Same);
    assert_eq!(Call::of(None, 0.05), Call::TooFewPairs);
    assert!(Call::Slower.called() && Call::Faster.called() && !Call::Uncertain.called());
}

/// A/A rows whose two processes a side each draw a GPU pace of their own (sd 2% a process, as
/// the graph arms' and fused's steps moved between A/A runs on an H100), measured over
/// `processes` processes of `per_process` pairs each with 0.3% noise a pair.
fn process_drawn_aa(seed: u64, processes: usize, per_process: usize) -> Vec<(usize, f64)> {
    let mut rng = SplitMix64::new(seed);
    let mut d = Vec::new();
    for process in 0..processes {
        let (base, new) = (
            (0.02 * normal(&mut rng)).exp(),
            (0.02 * normal(&mut rng)).exp(),
        );
        for _ in 0..per_process {
            let b = 6.0 * base * (0.003 * normal(&mut rng)).exp();
            let n = 6.0 * new * (0.003 * normal(&mut rng)).exp();
            d.push((process, (n / b).ln()));
        }
    }
    d
}

#[test]
fn an_interval_over_processes_holds_an_a_a_that_pairs_in_one_process_call() {
    let runs = 200;
    let (mut over, mut within) = (0, 0);
    for seed in 0..runs {
        // One process a side, 16 pairs: the pairs' interval is the process pair's draw.
        let one = process_drawn_aa(seed, 1, 16);
        let d: Vec<f64> = one.iter().map(|v| v.1).collect();
        within += usize::from(Call::of(hodges_lehmann(&d).as_ref(), MARGINS.gpu).called());
        let eight = process_drawn_aa(seed + 10_000, 8, 2);
        over += usize::from(Call::of(over_processes(&eight).as_ref(), MARGINS.gpu).called());
    }
    let (over, within) = (over as f64 / runs as f64, within as f64 / runs as f64);
    assert!(within > 0.2, "one process a side called only {within}");
    assert!(over <= 0.05, "over eight processes called {over}");
}

#[test]
fn a_throughput_that_drops_is_called_slower_and_one_that_rises_faster() {
    let cells = [cell("dspark+dsa_target_verify", "graph")];
    let mut rng = SplitMix64::new(9);
    let mut pairs = Vec::new();
    for round in 0..12 {
        let mut noise = || (0.005 * normal(&mut rng)).exp();
        let side = |step: f64, tok_s: f64, noise: &mut dyn FnMut() -> f64| {
            measured(
                0,
                2.0,
                &[
                    ("step_us", step * noise()),
                    ("throughput_tok_s", tok_s * noise()),
                ],
            )
        };
        let base = side(5000.0, 1000.0, &mut noise);
        // NEW: each step 10% longer, so 10% fewer tokens a second.
        let new = side(5500.0, 1000.0 / 1.1, &mut noise);
        pairs.push(PairRecord {
            round,
            process: round % 6,
            cell: 0,
            base_first: round % 2 == 0,
            base,
            new,
            redone: false,
        });
    }
    let of = |pairs: &[PairRecord], metric: &str| {
        let rows = rows(&cells, pairs, MARGINS, None);
        rows.into_iter().find(|r| r.metric == metric).unwrap()
    };
    let tok = of(&pairs, "throughput_tok_s");
    assert!((tok.change.unwrap().pct + 9.1).abs() < 0.5, "{tok:?}");
    assert_eq!((tok.call, tok.fails), (Call::Slower, true));
    assert_eq!(of(&pairs, "step_us").call, Call::Slower);
    // The same pairs the other way round: NEW is the faster build.
    let swapped: Vec<PairRecord> = (pairs.into_iter())
        .map(|p| PairRecord {
            base: p.new.clone(),
            new: p.base.clone(),
            ..p
        })
        .collect();
    let tok = of(&swapped, "throughput_tok_s");
    assert_eq!((tok.call, tok.fails), (Call::Faster, false));
}
