//! `gaps` on real torch.profiler traces, a few steps cut from each.

use super::*;

/// Each site `gaps` found: its kind, its op and how many calls a step.
fn sites_found(g: &Gaps) -> Vec<(SyncKind, &str, f64)> {
    (g.sites.iter())
        .map(|s| (s.site.kind, s.site.op.as_str(), s.calls_per_step))
        .collect()
}

/// Six steps of a real trace: the reference loop's eager-sync arm (scripts/reference_loop.py,
/// forward 1000 µs, bs 1) under a bare torch.profiler on an H100, recorded by
/// scripts/gaps_check.py. −17.8%: that loop's untraced eager-device change on that H100.
const REAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/torch_trace_h100_reference_loop.json.gz"
);

#[test]
fn a_real_trace_names_the_loops_reads_and_uploads_and_bounds_the_win_from_above() {
    let g = analyse(
        "t",
        &Trace::read(std::path::Path::new(REAL)).unwrap(),
        None,
        None,
    )
    .unwrap();
    assert_eq!(
        g.steps_from,
        "the replays of the graph with the most GPU work"
    );
    assert_eq!(g.steps.len(), 6);
    let found = sites_found(&g);
    assert_eq!(
        found,
        [
            (SyncKind::Read, "aten::to", 1.0),
            (SyncKind::Read, "aten::item", 1.0),
            (SyncKind::Upload, "aten::to", 2.0),
            (SyncKind::Other, "cudaEventSynchronize", 1.0),
        ]
    );
    // `.cpu()` waits for the GPU inside its copy to pageable memory, not in the sync after it.
    assert!(g.sites[0].blocked_us.median > 700.0, "{:?}", g.sites[0]);
    // Each read is followed by an upload that would wait in its place: the reads alone free
    // only their own work and the host's on what they return, about 2% of the step.
    assert!(g.itl_change_pct.median > -2.5, "{:?}", g.itl_change_pct);
    // With the uploads, as traced (the profiler stretches the host), the win overstates the
    // bare loop's −17.8%: an upper bound, as the summary says.
    let both = g.reads_and_uploads_itl_change_pct.median;
    assert!((both + 29.72).abs() < 0.01, "{both}");
    assert!(both < -17.8);
}

/// Six steps cut from a trace of scripts/calibrate_torch.py's loop (eager-sync, forward
/// 1000 µs, bs 1) under a bare torch.profiler on an H100, recorded by scripts/gaps_check.py
/// --loop calibrate: its draft and verify forwards are graphs of one kernel of one length each.
const REAL_TWO_GRAPHS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/torch_trace_h100_calibrate_loop.json.gz"
);

#[test]
fn a_real_loop_of_two_like_graphs_takes_a_step_every_second_replay() {
    let trace = Trace::read(std::path::Path::new(REAL_TWO_GRAPHS)).unwrap();
    let g = analyse("t", &trace, None, None).unwrap();
    assert!(
        g.steps_from.starts_with("every 2 replays"),
        "{}",
        g.steps_from
    );
    assert_eq!(g.steps.len(), 6);
    // Two forwards of 1000 µs and the host's work between: not one forward's half-step.
    assert!(
        (3400.0..3900.0).contains(&g.period_us.median),
        "{:?}",
        g.period_us
    );
    let found = sites_found(&g);
    assert_eq!(
        found,
        [
            (SyncKind::Read, "aten::to", 2.0),
            (SyncKind::Upload, "aten::to", 2.0),
            (SyncKind::Other, "cudaEventSynchronize", 1.0),
        ]
    );
    // Each `.tolist()` is followed by an upload that waits in its place.
    assert!(g.reads_and_uploads_win_us.median > 10.0 * g.win_us.median);
}
