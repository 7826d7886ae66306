use super::*;
use crate::calibrate::trace::{GpuEvent, HostEvent, ThreadEvents};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/torch_trace_small.json"
);

fn fixture() -> Trace {
    Trace::read(std::path::Path::new(FIXTURE)).unwrap()
}

fn site(g: &Gaps, kind: SyncKind) -> &SiteCost {
    g.sites.iter().find(|s| s.site.kind == kind).unwrap()
}

#[test]
fn the_small_traces_read_and_upload_are_found_with_their_costs() {
    let g = analyse("t", &fixture(), None, None).unwrap();
    assert_eq!(g.steps_from, "torch.profiler's `ProfilerStep#N`");
    assert_eq!(g.steps.len(), 2);
    assert_eq!(g.period_us.median, 1000.0);
    let read = site(&g, SyncKind::Read);
    assert_eq!(read.site.op, "Tensor.tolist()");
    assert_eq!(read.site.region.as_deref(), Some("draft prep"));
    assert_eq!(read.site.call, "cudaStreamSynchronize");
    assert_eq!(read.calls_per_step, 1.0);
    // It blocked 27.5 and 21.5 µs: its syncs' 24 and 18 and, before them, the copy to pageable
    // memory, which returns only once it has landed. The GPU idled from that copy to the upload's.
    assert!(
        (read.blocked_us.median - 24.5).abs() < 1e-6,
        "{:?}",
        read.blocked_us
    );
    let upload = site(&g, SyncKind::Upload);
    assert_eq!(upload.site.op, "aten::to");
    assert!((upload.blocked_us.median - 7.0).abs() < 1e-6);
    // Host-bound (the host is busy or blocked all 1000 µs, the GPU ~250). Removing the read
    // alone frees its own 3 µs and the 1.75 µs from its return to the upload: the upload after
    // it would wait for the same GPU work. With the upload too, both calls go (the `tolist()`
    // of 30.5 and 24.5 µs, the upload of 15 and 17, their waits included), with the host's
    // work on what they returned (1.75 µs to the upload, 2 µs from it to `aten::arange`).
    assert!((g.win_us.median - 4.75).abs() < 1e-6, "{:?}", g.win_us);
    assert!((g.itl_change_pct.median + 0.475).abs() < 1e-6);
    let both = &g.reads_and_uploads_win_us;
    assert!((both.median - 47.25).abs() < 1e-6, "{both:?}");
    // The sync after the last step belongs to no step.
    assert!(g
        .sites
        .iter()
        .all(|s| s.site.call != "cudaDeviceSynchronize"));
}

#[test]
fn a_named_marker_gives_the_same_steps_and_a_missing_one_says_how_to_name_one() {
    let g = analyse("t", &fixture(), Some("step"), None).unwrap();
    assert_eq!(g.steps_from, "the `step` marker");
    assert_eq!(g.steps.len(), 2);
    // The marker is the step, not a place in it: the read is still in `draft prep`.
    assert_eq!(
        site(&g, SyncKind::Read).site.region.as_deref(),
        Some("draft prep")
    );
    let e = analyse("t", &fixture(), Some("decode_step"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no two `decode_step` events"), "{e}");
}

/// One thread's events: a step region every `period` µs with a read of `wait` µs at 10 µs
/// into it, and GPU work from 0 to `gpu` µs of each step (the read waits for it).
pub(super) fn synthetic(steps: usize, period: f64, gpu: f64, wait: f64) -> Trace {
    let mut thread = ThreadEvents::default();
    let mut trace = Trace::default();
    let ev = |name: &str, ts: f64, dur: f64, corr| HostEvent {
        name: name.into(),
        span: Span { ts, end: ts + dur },
        corr,
    };
    for k in 0..steps {
        let t = k as f64 * period;
        thread.annotations.push(ev("decode", t, period - 1.0, None));
        thread
            .ops
            .push(ev("aten::item", t + 10.0, wait + 2.0, None));
        thread
            .runtime
            .push(ev("cudaMemcpyAsync", t + 10.5, 1.0, Some(k as u64)));
        thread
            .runtime
            .push(ev("cudaStreamSynchronize", t + 11.5, wait, None));
        trace
            .memcpy_by_corr
            .insert(k as u64, "Memcpy DtoH (Device -> Pageable)".into());
        trace.gpu.push(GpuEvent {
            span: Span {
                ts: t,
                end: t + gpu,
            },
            corr: None,
        });
    }
    trace.any_runtime = true;
    trace.threads.insert(("1".into(), "1".into()), thread);
    trace
}

#[test]
fn removing_a_read_saves_its_wait_when_the_host_paces_and_the_gpu_idle_when_the_gpu_does() {
    // Host-paced: 1000 µs steps, 100 µs of GPU work, a 60 µs wait in a 62 µs `.item()`: the
    // step sheds the whole call.
    let g = analyse("t", &synthetic(5, 1000.0, 100.0, 60.0), None, None).unwrap();
    assert_eq!(g.steps_from, "the repeating `decode` region");
    assert!((g.win_us.median - 62.0).abs() < 1e-6, "{:?}", g.win_us);
    // GPU-paced: 1000 µs steps, 950 µs of GPU work the read waits for (until 1 µs after it
    // ends): the step can only shrink to the GPU's 950 µs.
    let g = analyse("t", &synthetic(5, 1000.0, 950.0, 939.5), None, None).unwrap();
    assert!((g.win_us.median - 50.0).abs() < 1e-6, "{:?}", g.win_us);
    let read = site(&g, SyncKind::Read);
    assert_eq!(read.site.op, "aten::item");
    // The `decode` region is the step, no place in it.
    assert_eq!(read.site.region, None);
    // The GPU idles 50 µs a step, from the end of its work, which the read was waiting on.
    assert!(
        (read.idle_us.median - 50.0).abs() < 1e-6,
        "{:?}",
        read.idle_us
    );
}

#[test]
fn a_trace_without_gpu_activity_or_steps_is_refused_with_the_fix() {
    let mut no_gpu = fixture();
    no_gpu.gpu.clear();
    let e = analyse("t", &no_gpu, None, None).unwrap_err().to_string();
    assert!(e.contains("ProfilerActivity.CUDA"), "{e}");
    let e = analyse("t", &Trace::default(), None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an Nsight Systems export"), "{e}");
    // With its regions gone, the small trace's steps are its forward graph's replays...
    let mut no_regions = fixture();
    for thread in no_regions.threads.values_mut() {
        thread.annotations.clear();
    }
    let g = analyse("t", &no_regions, None, None).unwrap();
    assert_eq!(
        g.steps_from,
        "the replays of the graph with the most GPU work"
    );
    // ...and with its replays gone too, there are none.
    for thread in no_regions.threads.values_mut() {
        thread.runtime.retain(|e| e.name != "cudaGraphLaunch");
    }
    let e = analyse("t", &no_regions, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--step-marker NAME"), "{e}");
}

#[test]
fn merged_spans_are_disjoint_and_cover_their_union() {
    let s = |ts, end| Span { ts, end };
    let m = merged([s(5.0, 7.0), s(0.0, 2.0), s(1.0, 3.0), s(7.0, 8.0)].into_iter());
    assert_eq!(m, vec![s(0.0, 3.0), s(5.0, 8.0)]);
    assert_eq!(
        idle_stretches(&m, s(-1.0, 10.0)),
        vec![s(-1.0, 0.0), s(3.0, 5.0), s(8.0, 10.0)]
    );
}

/// The constructed loop of 5 steps of 1000 µs without its `decode` region, each step
/// replaying each of `graphs`: (starting at µs into the step, kernels, GPU µs in all).
fn replaying(graphs: &[(f64, u64, f64)]) -> Trace {
    let mut trace = synthetic(5, 1000.0, 100.0, 60.0);
    let thread = trace.threads.values_mut().next().unwrap();
    thread.annotations.clear();
    for k in 0..5u64 {
        let t = k as f64 * 1000.0;
        for (g, &(at, kernels, gpu)) in graphs.iter().enumerate() {
            let corr = 100 * (g as u64 + 1) + k;
            thread.runtime.push(HostEvent {
                name: "cudaGraphLaunch".into(),
                span: Span {
                    ts: t + at,
                    end: t + at + 5.0,
                },
                corr: Some(corr),
            });
            let each = gpu / kernels as f64;
            for j in 0..kernels {
                let ts = t + at + 6.0 + j as f64 * each;
                trace.gpu.push(GpuEvent {
                    span: Span { ts, end: ts + each },
                    corr: Some(corr),
                });
            }
        }
    }
    trace.gpu.sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
    trace
}

#[test]
fn with_no_region_the_steps_are_the_replays_of_the_largest_graph() {
    // Each step replays a 40 µs draft graph and a 700 µs forward graph.
    let trace = replaying(&[(200.0, 1, 40.0), (300.0, 1, 700.0)]);
    let g = analyse("t", &trace, None, None).unwrap();
    assert_eq!(
        g.steps_from,
        "the replays of the graph with the most GPU work"
    );
    assert_eq!(g.steps.len(), 4);
    assert_eq!(g.period_us.median, 1000.0);
    assert_eq!(site(&g, SyncKind::Read).calls_per_step, 1.0);
}

#[test]
fn a_probe_files_own_regions_are_never_the_steps() {
    // A probe file's profiled probes run first, each in its region, many times over.
    let mut trace = replaying(&[(200.0, 1, 40.0), (300.0, 1, 700.0)]);
    let thread = trace.threads.values_mut().next().unwrap();
    for (k, name) in ["metaprep probe mixed", "metaprep empty range"]
        .iter()
        .enumerate()
    {
        for i in 0..20 {
            let ts = -10_000.0 + (k * 20 + i) as f64 * 100.0;
            thread.annotations.push(HostEvent {
                name: name.to_string(),
                span: Span { ts, end: ts + 90.0 },
                corr: None,
            });
        }
    }
    thread
        .annotations
        .sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
    let g = analyse("t", &trace, None, None).unwrap();
    assert_eq!(
        (g.steps_from.as_str(), g.steps.len()),
        ("the replays of the graph with the most GPU work", 4)
    );
}

#[test]
fn two_graphs_of_equal_gpu_work_are_told_apart_by_their_kernels() {
    // As in reference_loop.py: a draft graph of three 100 µs kernels and a verify graph of
    // one 300 µs kernel, each replayed once a step. Only one of them marks the steps.
    let trace = replaying(&[(200.0, 3, 300.0), (600.0, 1, 300.0)]);
    let g = analyse("t", &trace, None, None).unwrap();
    assert_eq!(g.steps.len(), 4, "{:?}", g.period_us);
    assert_eq!(g.period_us.median, 1000.0);
}

#[test]
fn two_graphs_alike_in_kernels_and_work_make_one_step_between_them() {
    // As in calibrate_torch.py: a draft and a verify graph of one 300 µs kernel each; the
    // step's read falls between the verify and the next draft, so the host ops repeat every
    // second replay.
    let trace = replaying(&[(200.0, 1, 300.0), (600.0, 1, 300.0)]);
    let g = analyse("t", &trace, None, None).unwrap();
    assert_eq!(g.steps.len(), 4, "{}: {:?}", g.steps_from, g.period_us);
    assert_eq!(g.period_us.median, 1000.0);
    assert!(
        g.steps_from.starts_with("every 2 replays"),
        "{}",
        g.steps_from
    );
}

#[test]
fn across_ranks_the_slowest_rank_sets_each_step_and_what_removing_reads_wins() {
    // Rank 0 waits 300 µs a step in its read, rank 1 only 10 µs but runs 950 µs a step.
    let r0 = analyse("r0", &synthetic(6, 1000.0, 100.0, 300.0), None, None).unwrap();
    let r1 = analyse("r1", &synthetic(6, 950.0, 100.0, 10.0), None, None).unwrap();
    assert!((r0.win_us.median - 302.0).abs() < 1.0, "{:?}", r0.win_us);
    let a = ranks::across(&[r0.clone(), r1.clone()]).unwrap();
    assert_eq!(
        (a.steps, a.files.clone()),
        (5, vec!["r0".into(), "r1".into()])
    );
    assert_eq!(a.slowest_share, [1.0, 0.0]);
    assert_eq!(a.slowest_rank(), 0);
    assert!((a.period_us.median - 1000.0).abs() < 1e-6);
    // Without its reads rank 0 takes 698 µs, so rank 1's 938 (its own 12 µs read gone) sets
    // the step: 62 µs saved, not the 302 rank 0 alone would say.
    assert!((a.win_us.median - 62.0).abs() < 1.0, "{:?}", a.win_us);
    assert!((a.itl_change_pct.median + 6.2).abs() < 0.1);
    let md = a.markdown(&[r0.clone(), r1]);
    assert!(md.starts_with("**Across 2 ranks**"), "{md}");
    assert!(
        md.contains("| 0 | `r0` |") && md.contains("| 100% of steps |"),
        "{md}"
    );
    assert!(ranks::across(&[r0]).is_err(), "one rank is no set of ranks");
}

#[test]
fn the_timeline_lays_out_typical_steps_with_idle_charged_to_the_summarys_sites() {
    let g = analyse("t", &fixture(), None, None).unwrap();
    let t = &g.timeline;
    assert_eq!(
        (t.steps, t.step_starts_us.as_slice()),
        (2, &[0.0, 1000.0][..])
    );
    assert!((t.span_us - 2000.0).abs() < 1e-6);
    // The read is the summary's first site; the idle charged to it is what its row says.
    assert_eq!(g.sites[0].site.kind, SyncKind::Read);
    let charged: f64 = (t.idle.iter())
        .filter(|s| s.site == Some(0))
        .map(|s| s.to_us - s.from_us)
        .sum();
    assert!(
        (charged / 2.0 - g.sites[0].idle_us.median).abs() < 1e-6,
        "{t:?}"
    );
    assert!(
        t.syncs.iter().any(|s| s.site == Some(1)),
        "the upload's sync"
    );
    assert!(
        t.idle.iter().any(|s| s.site.is_none()),
        "idle no sync caused"
    );
    let (png, svg) = chart::timeline_chart(&g).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    assert!(
        svg.contains("Tensor.tolist() in draft prep"),
        "the legend names the read"
    );
}

#[test]
fn every_step_and_the_timeline_number_the_sites_as_the_summary_orders_them() {
    use crate::calibrate::synthetic::{Op, Synth};
    // Two reads a step: `a short wait` (met first, in name order too) after a 20 µs kernel,
    // `b long wait` after a 500 µs one. The summary puts the costlier first.
    let mut s = Synth::new(None);
    let kernel = |s: &mut Synth, us: f64| {
        s.op(Op {
            name: "aten::add",
            bare_us: 8.0,
            nested: 0,
            kernels: &[us],
        })
    };
    for k in 0..6 {
        s.range(&format!("ProfilerStep#{k}"), |s| {
            s.host(100.0);
            kernel(s, 20.0);
            s.range("a short wait", |s| s.read(10.0));
            kernel(s, 500.0);
            s.range("b long wait", |s| s.read(10.0));
        });
    }
    let g = analysed(s);
    assert_eq!(g.sites[0].site.region.as_deref(), Some("b long wait"));
    assert_eq!(g.sites[1].site.region.as_deref(), Some("a short wait"));
    for (i, site) in g.sites.iter().enumerate() {
        let blocked: Vec<f64> = (g.steps.iter()).map(|s| s.by_site[&i].blocked_us).collect();
        assert_eq!(Spread::of(&blocked), site.blocked_us, "site {i}");
    }
    let long = (g.timeline.syncs.iter())
        .filter(|s| s.site == Some(0))
        .count();
    assert_eq!(
        long, g.timeline.steps,
        "one long wait a step in the timeline"
    );
}

#[test]
fn the_headline_names_the_read_whose_removal_saves_most_not_the_longest_wait() {
    let mut g = analyse("t", &fixture(), None, None).unwrap();
    let read = site(&g, SyncKind::Read).clone();
    let flat = |v| Spread {
        median: v,
        p10: v,
        p90: v,
    };
    // A read blocked long on GPU work (it costs little) and a short one the GPU idles after.
    let mut long_wait = read.clone();
    long_wait.site.op = "aten::item".into();
    (long_wait.blocked_us, long_wait.idle_us, long_wait.win_us) =
        (flat(2826.0), flat(60.0), flat(9.0));
    let mut costly = read;
    costly.site.op = "seq_lens.tolist()".into();
    (costly.blocked_us, costly.idle_us, costly.win_us) = (flat(40.0), flat(30.0), flat(412.0));
    g.sites = vec![long_wait, costly];
    let line = report::headline(&g);
    assert!(line.starts_with("**`seq_lens.tolist()`"), "{line}");
    assert!(line.contains("costs the step 412 µs"), "{line}");
}

#[test]
fn removing_a_read_inside_a_larger_op_takes_off_the_read_not_the_op() {
    // The host-paced loop, its `.item()` inside a 400 µs op that launches a kernel too.
    let mut trace = synthetic(5, 1000.0, 100.0, 60.0);
    let thread = trace.threads.values_mut().next().unwrap();
    for k in 0..5 {
        let t = k as f64 * 1000.0;
        let span = Span {
            ts: t + 5.0,
            end: t + 405.0,
        };
        let op = HostEvent {
            name: "engine::forward_metadata".into(),
            span,
            corr: None,
        };
        thread.ops.push(op);
        thread.runtime.push(HostEvent {
            name: "cudaLaunchKernel".into(),
            span: Span {
                ts: t + 300.0,
                end: t + 304.0,
            },
            corr: None,
        });
    }
    let by_start = |a: &HostEvent, b: &HostEvent| a.span.ts.total_cmp(&b.span.ts);
    thread.ops.sort_by(by_start);
    thread.runtime.sort_by(by_start);
    let g = analyse("t", &trace, None, None).unwrap();
    // The 62 µs `.item()` goes, not the 400 µs op around it.
    assert!((g.win_us.median - 62.0).abs() < 1e-6, "{:?}", g.win_us);
}

#[test]
fn a_host_paced_step_says_what_removing_a_read_frees_and_what_it_leaves() {
    let host_paced = analyse("t", &synthetic(5, 1000.0, 100.0, 60.0), None, None).unwrap();
    let md = report::markdown(&host_paced);
    assert!(
        md.contains("The host paces this step (its GPU idles 90% of it)"),
        "{md}"
    );
    let gpu_paced = analyse("t", &synthetic(5, 1000.0, 950.0, 939.5), None, None).unwrap();
    assert!(!report::markdown(&gpu_paced).contains("host paces"));
}

#[test]
fn a_removed_read_takes_the_host_work_on_its_value_and_an_upload_the_work_building_it() {
    use crate::calibrate::synthetic::{Op, Synth};
    // Host-paced steps of one layout, 40 µs of host work before an upload and 25 µs after a
    // read either next to them (`near`) or beyond a launch (the scheduler's, the bookkeeping's).
    let win = |near: bool| {
        let mut s = Synth::new(None);
        let kernel = |s: &mut Synth| {
            s.op(Op {
                name: "aten::add",
                bare_us: 8.0,
                nested: 0,
                kernels: &[5.0],
            })
        };
        for k in 0..6 {
            s.range(&format!("ProfilerStep#{k}"), |s| {
                s.host(300.0);
                s.host(if near { 0.0 } else { 40.0 });
                kernel(s);
                s.host(if near { 40.0 } else { 0.0 });
                s.upload(10.0);
                kernel(s);
                s.read(10.0);
                s.host(if near { 25.0 } else { 0.0 });
                kernel(s);
                s.host(if near { 0.0 } else { 25.0 });
                s.host(100.0);
            });
        }
        analysed(s).reads_and_uploads_win_us.median
    };
    let (near, far) = (win(true), win(false));
    assert!((near - far - 65.0).abs() < 1e-6, "{near} against {far}");
}

#[test]
fn an_upload_before_any_launch_in_its_step_claims_none_of_the_steps_start() {
    use crate::calibrate::synthetic::{Op, Synth};
    // The step opens with the scheduler's host work (300 or 600 µs), then an upload before
    // the step's first launch: that work is the step's, not the building of the upload.
    let win = |scheduler_us: f64| {
        let mut s = Synth::new(None);
        for k in 0..6 {
            s.range(&format!("ProfilerStep#{k}"), |s| {
                s.host(scheduler_us);
                s.upload(10.0);
                s.op(Op {
                    name: "aten::add",
                    bare_us: 8.0,
                    nested: 0,
                    kernels: &[5.0],
                });
                s.host(50.0);
            });
        }
        analysed(s).reads_and_uploads_win_us.median
    };
    let (short, long) = (win(300.0), win(600.0));
    assert!(short > 0.0 && short < 100.0, "{short}");
    assert!((short - long).abs() < 1e-6, "{short} against {long}");
}

/// What `gaps` makes of a synthetic trace, read back from its file, with no probe file.
fn analysed(s: crate::calibrate::synthetic::Synth) -> Gaps {
    let dir = tempfile::tempdir().unwrap();
    let (_, trace) = written(dir.path(), "t", (s.into_json(), None));
    analyse("t", &trace, None, None).unwrap()
}

/// `name.json` in `dir` with its probe file beside it where there is one, read back.
pub(super) fn written(
    dir: &std::path::Path,
    name: &str,
    (json, probe): (String, Option<String>),
) -> (std::path::PathBuf, Trace) {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, json).unwrap();
    if let Some(probe) = probe {
        std::fs::write(dir.join(format!("{name}.probe.json")), probe).unwrap();
    }
    let trace = Trace::read(&path).unwrap();
    (path, trace)
}

/// The host-paced loop of [`synthetic`] with a second, 0.4 µs sync inside each `.item()`, after
/// the first.
pub(super) fn with_a_second_sync() -> Trace {
    let mut trace = synthetic(5, 1000.0, 100.0, 60.0);
    let thread = trace.threads.values_mut().next().unwrap();
    for k in 0..5 {
        let ts = k as f64 * 1000.0 + 71.5;
        thread.runtime.push(HostEvent {
            name: "cudaStreamSynchronize".into(),
            span: Span { ts, end: ts + 0.4 },
            corr: None,
        });
    }
    thread
        .runtime
        .sort_by(|a, b| a.span.ts.total_cmp(&b.span.ts));
    trace
}

#[test]
fn a_second_sync_inside_one_call_adds_no_time_of_its_own() {
    // The call is removed whole (62 µs) once, its second wait already inside it.
    let g = analyse("t", &with_a_second_sync(), None, None).unwrap();
    assert!((g.win_us.median - 62.0).abs() < 1e-6, "{:?}", g.win_us);
}
