//! The profiler's cost taken off with a probe file beside the trace, on constructed loops.

use super::tests::written;
use super::*;

/// A host-bound decode loop recorded as torch.profiler lays it out: per `ProfilerStep#k`,
/// `scheduler_us` of scheduler work, ten ops of a 20 µs kernel each, a read, five more ops and a 150 µs
/// forward; with `costs`, every recorded event costs the host what they say, and the
/// profiler-cost probes run first (their probe file returned beside the trace).
fn recorded_loop(
    costs: Option<crate::calibrate::EventCosts>,
    scheduler_us: f64,
) -> (String, Option<String>) {
    use crate::calibrate::synthetic::{probe_file, Op, Synth};
    let mut s = Synth::new(costs);
    let probe = costs.map(|_| {
        let (probes, _) = s.probes(50);
        probe_file(&probes, 10.0)
    });
    let op = |s: &mut Synth, kernel: &[f64]| {
        s.op(Op {
            name: "aten::add",
            bare_us: 8.0,
            nested: 1,
            kernels: kernel,
        })
    };
    for k in 0..12 {
        s.range(&format!("ProfilerStep#{k}"), |s| {
            s.host(scheduler_us);
            for _ in 0..10 {
                op(s, &[20.0]);
            }
            s.read(30.0);
            for _ in 0..5 {
                op(s, &[20.0]);
            }
            op(s, &[150.0]);
            s.host(100.0);
        });
    }
    (s.into_json(), probe)
}

#[test]
fn a_probe_file_beside_the_trace_takes_the_profilers_cost_off_each_step() {
    use crate::calibrate::profiler_cost;
    use crate::calibrate::synthetic::COSTS;
    let dir = tempfile::tempdir().unwrap();
    let (_, bare) = written(dir.path(), "bare", recorded_loop(None, 300.0));
    let (path, traced) = written(dir.path(), "traced", recorded_loop(Some(COSTS), 300.0));
    let bare = analyse("bare", &bare, None, None).unwrap();
    let cost = profiler_cost::beside("traced", &path, &traced)
        .unwrap()
        .unwrap();
    let deflated = analyse("traced", &traced, None, Some(&cost)).unwrap();
    let raw = analyse("traced", &traced, None, None).unwrap();
    let (b, d, r) = (
        bare.period_us.median,
        deflated.period_us.median,
        raw.period_us.median,
    );
    // The profiler stretches this host-bound step by a tenth; the probe takes it back off.
    assert!(r > 1.1 * b, "traced {r} against bare {b}");
    // Within 1%: taking host lag back in the GPU's bubbles between queued kernels (1 µs each
    // here) would leave it 1.4% short.
    assert!((d / b - 1.0).abs() < 0.01, "deflated {d} against bare {b}");
    assert!(deflated.profiler_us.median > 0.0 && raw.profiler_us.median == 0.0);
    // The fitted costs are in the figures, near what every event was made to cost.
    assert_eq!(raw.profiler_event_costs_us, None);
    let fitted = deflated.profiler_event_costs_us.expect("fitted");
    for (got, want) in [
        (fitted.cpu_op, COSTS.cpu_op),
        (fitted.runtime, COSTS.runtime),
    ] {
        assert!((got / want - 1.0).abs() < 0.1, "{got} against {want}");
    }
    // The probes the costs were fitted on are explained by them: every event of this trace
    // costs one amount a kind.
    let fit = deflated
        .probe_fit
        .as_ref()
        .expect("a probe file gives its fit");
    assert!(fit.len() >= 8 && raw.probe_fit.is_none(), "{fit:?}");
    assert!(
        (fit.iter()).all(|r| r.miss_pct().is_some_and(|m| m.abs() < 5.0)),
        "{fit:?}"
    );
    // Beside the corrected figures, the trace's own: what the answer would be with none.
    let t = deflated
        .as_traced
        .as_ref()
        .expect("a probe file gives both");
    assert_eq!(raw.as_traced, None);
    assert_eq!(
        (&t.period_us, &t.win_us, &t.itl_change_pct),
        (&raw.period_us, &raw.win_us, &raw.itl_change_pct)
    );
    // Its GPU idles a third of the step: the headline gives the corrected answer alone.
    assert!(!report::headline(&deflated).contains("as traced"));
    assert!(deflated
        .probe_file
        .as_deref()
        .unwrap()
        .ends_with("traced.probe.json"));
    // So is what removing the read wins, as a share of the step.
    let (b, d) = (bare.itl_change_pct.median, deflated.itl_change_pct.median);
    assert!(b < 0.0 && (d / b - 1.0).abs() < 0.05, "{d}% against {b}%");
    // A probe file that is no probe file is an error naming it, not a silent fall back to none.
    std::fs::write(dir.path().join("traced.probe.json"), "{}").unwrap();
    let e = profiler_cost::beside("traced", &path, &traced)
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("traced.probe.json"), "{e:#}");
}

#[test]
fn where_the_host_paces_a_corrected_step_the_headline_gives_the_figure_as_traced_too() {
    use crate::calibrate::profiler_cost;
    use crate::calibrate::synthetic::COSTS;
    let dir = tempfile::tempdir().unwrap();
    // A long scheduler: the GPU idles most of the step.
    let (path, traced) = written(dir.path(), "traced", recorded_loop(Some(COSTS), 1200.0));
    let cost = profiler_cost::beside("traced", &path, &traced)
        .unwrap()
        .unwrap();
    let g = analyse("traced", &traced, None, Some(&cost)).unwrap();
    let raw = analyse("traced", &traced, None, None).unwrap();
    assert!(
        g.gpu_idle_us.median > 0.5 * g.period_us.median,
        "{:?}",
        g.gpu_idle_us
    );
    let headline = report::headline(&g);
    let as_traced = format!(
        "as traced, with it left in: ITL {} ({} of {} µs a step)",
        report::pct(&raw.itl_change_pct),
        crate::report::format::fmt_num(raw.win_us.median),
        crate::report::format::fmt_num(raw.period_us.median)
    );
    assert!(headline.contains(&as_traced), "{headline}");
    assert!(headline.contains("profiler cost taken off"), "{headline}");
    // With no probe file the figures are as traced already, and said once.
    assert!(!report::headline(&raw).contains("as traced"));
}

#[test]
fn the_summary_says_how_far_the_fitted_costs_miss_the_largest_probe_workload() {
    use crate::calibrate::FitRow;
    let row = |workload: &str, overhead_us: f64, fitted_us: f64| FitRow {
        workload: workload.into(),
        counts: Default::default(),
        bare_us: 10.0,
        profiled_us: 10.0 + overhead_us,
        overhead_us,
        overhead_se_us: 1.0,
        fitted_us,
    };
    // A varied op sequence costs more under the profiler than the small probes' events say;
    // a tiny workload missed by more in percent is not what the step's correction hangs on.
    let fit = [
        row("cuda_add", 1.9, 3.3),
        row("mixed", 990.0, 612.0),
        row("cpu_add", 11.2, 13.3),
        row("graph1", -0.3, 1.2),
    ];
    let s = report::probe_fit_sentence(&fit);
    assert!(
        s.contains("largest workload (`mixed`) 612 µs of the 990 µs it was timed to cost (-38%)"),
        "{s}"
    );
    assert_eq!(report::probe_fit_sentence(&[]), "");
    // A largest workload profiled no slower than bare has no share to miss by.
    assert_eq!(report::probe_fit_sentence(&[row("range", 0.0, 0.0)]), "");
}
