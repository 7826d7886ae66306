//! The loop's untraced step given (`--untraced-step-us`): the host time scaled to it, on the
//! constructed loops of `tests`.

use super::tests::{synthetic, with_a_second_sync};
use super::untraced_step::host_scale;
use super::*;

/// `trace`'s figures with its host time scaled to make the median step `step`.
fn at(trace: &Trace, step: f64) -> Gaps {
    let accounted = account("t", trace, None, None).unwrap();
    let scale = host_scale(&[&accounted.steps[..]], step).unwrap();
    accounted.summarise(Some(scale))
}

#[test]
fn an_untraced_step_scales_the_host_time_and_leaves_the_gpus_work() {
    // GPU-paced: 950 µs of GPU work in 1000 µs traced steps; untraced, the loop's step is
    // 980 µs, so the host's 50 µs of idle was 30 µs bare: removing the read leaves the GPU's
    // 950, a 30 µs win where the trace alone says 50.
    let g = at(&synthetic(5, 1000.0, 950.0, 939.5), 980.0);
    assert!(
        (g.untraced.unwrap().factor - 0.6).abs() < 1e-9,
        "{:?}",
        g.untraced
    );
    assert_eq!(g.untraced.map(|s| s.untraced_step_us), Some(980.0));
    assert!(
        (g.period_us.median - 980.0).abs() < 1e-6,
        "{:?}",
        g.period_us
    );
    assert!((g.win_us.median - 30.0).abs() < 1e-6, "{:?}", g.win_us);
    let as_traced = g.as_traced.as_ref().unwrap();
    assert!((as_traced.win_us.median - 50.0).abs() < 1e-6);
    let md = report::markdown(&g);
    assert!(
        md.contains("is scaled x0.60, so that the median step (across the run's ranks, where it has several) lasts the 980 µs measured without"),
        "{md}"
    );
    // Host-paced: 100 µs of GPU work, 900 µs of host time a 1000 µs step; untraced 550 µs, so
    // the host runs at half its traced time. The read's 61 µs blocked (copy and wait) are the
    // GPU's and stay; the 1 µs of its own work halves: the step sheds 61.5 µs.
    let g = at(&synthetic(5, 1000.0, 100.0, 60.0), 550.0);
    assert!((g.untraced.unwrap().factor - 0.5).abs() < 1e-9);
    assert!((g.win_us.median - 61.5).abs() < 1e-6, "{:?}", g.win_us);
    assert!((g.itl_change_pct.median + 100.0 * 61.5 / 550.0).abs() < 1e-6);
    // Untraced slower than traced: the host time grows, and the summary says what that means.
    let g = at(&synthetic(5, 1000.0, 100.0, 60.0), 1450.0);
    assert!((g.untraced.unwrap().factor - 1.5).abs() < 1e-9);
    let md = report::markdown(&g);
    assert!(
        md.contains("A factor over 1 says the loop ran slower untraced"),
        "{md}"
    );
    assert!(
        md.contains("the 450 µs a step added to the host's time"),
        "{md}"
    );
}

#[test]
fn one_factor_serves_every_rank_and_makes_the_slowest_ranks_median_step_the_untraced_one() {
    // Rank 0 waits long on its read (1000 µs steps, 100 µs of GPU work), rank 1 is near GPU
    // paced (950 µs steps, 900 of GPU work): as traced, the step across them is rank 0's.
    let (t0, t1) = (
        synthetic(6, 1000.0, 100.0, 300.0),
        synthetic(6, 950.0, 900.0, 10.0),
    );
    let r0 = account("r0", &t0, None, None).unwrap();
    let r1 = account("r1", &t1, None, None).unwrap();
    let scale = host_scale(&[&r0.steps[..], &r1.steps[..]], 910.0).unwrap();
    // Rank 0 alone would need (910 - 100) / 900 = 0.9; at 0.9 rank 1 is 900 + 0.9 * 50 = 945,
    // longer, so the factor is the one that makes rank 1's step 910: 0.2.
    assert!((scale.factor - 0.2).abs() < 1e-9, "{scale:?}");
    let ranks = [r0.summarise(Some(scale)), r1.summarise(Some(scale))];
    let a = ranks::across(&ranks).unwrap();
    assert!(
        (a.period_us.median - 910.0).abs() < 1e-6,
        "{:?}",
        a.period_us
    );
}

#[test]
fn an_untraced_step_shorter_than_the_gpus_work_is_not_this_loops() {
    let g = account("t", &synthetic(5, 1000.0, 950.0, 939.5), None, None).unwrap();
    let e = host_scale(&[&g.steps[..]], 900.0).unwrap_err().to_string();
    assert!(
        e.contains(
            "--untraced-step-us 900 is no longer than the traced steps' GPU work alone (950"
        ),
        "{e}"
    );
}

#[test]
fn every_wait_of_a_call_stays_unscaled_where_it_holds_several_syncs() {
    // At half the host time the call sheds its 61.4 µs of waits whole and half of its 0.6 µs of
    // own work.
    let g = at(&with_a_second_sync(), 550.0);
    assert!((g.untraced.unwrap().factor - 0.5).abs() < 1e-9);
    assert!((g.win_us.median - 61.7).abs() < 1e-6, "{:?}", g.win_us);
}
