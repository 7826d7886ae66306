//! The markdown report `metaprep calibrate` prints: what each trace showed, what the
//! profiler cost in it, and how every value of the profile was derived.

use super::analysis::{inside, Analysis};
use super::derive::{item_kind, Derivation, Traced};
use super::trace::Span;
use crate::model::host_profile::{HostProfile, Item};
use crate::stats::summary::quantile;
use std::fmt::Write;

pub fn render(traced: &[Traced], d: &Derivation, base: &HostProfile) -> String {
    let mut r = String::new();
    let files: Vec<&str> = traced.iter().map(|t| t.analysis.file).collect();
    let _ = writeln!(r, "# Host calibration from {}\n", files.join(", "));
    let _ = writeln!(
        r,
        "* profile `{}`, base `{}`; step annotations of {} of {} steps of the first trace: {}\n",
        d.profile.name,
        base.name,
        d.n_typical,
        traced[0].analysis.steps.len(),
        if d.modal.is_empty() {
            "(none)".to_string()
        } else {
            d.modal.join(" → ")
        }
    );
    for t in traced {
        trace_section(&mut r, t);
    }
    derived_values(&mut r, &d.profile);
    program_section(&mut r, traced, d, base);
    for t in traced {
        steps_table(&mut r, &t.analysis);
    }
    r
}

/// The derived profile's values, each with how it was derived.
fn derived_values(r: &mut String, p: &HostProfile) {
    let _ = writeln!(r, "## Derived values\n\n| value | | how |\n|---|---|---|");
    for (name, v) in [
        ("op_us", &p.op_us),
        ("read_us", &p.read_us),
        ("graph_launch_us", &p.graph_launch_us),
        ("upload_us", &p.upload_us),
        ("kernel_us", &p.kernel_us),
    ] {
        let _ = writeln!(r, "| {name} | {:.3} | {} |", v.value, v.source);
    }
    let _ = writeln!(
        r,
        "| upload_syncs | {} | {} |",
        p.upload_syncs.value, p.upload_syncs.source
    );
    if let Some(h) = &p.host_speed_us {
        let _ = writeln!(r, "| host_speed_us | {:.3} | {} |", h.value, h.source);
    }
    if let Some(w) = &p.post_wait {
        // Each gap's extras over the probe's segments (the first call, then its passes).
        let rows: Vec<String> = (w.value.gaps_us.iter().zip(&w.value.extra_us))
            .map(|(g, row)| {
                let cells: Vec<String> = row.iter().map(|v| format!("{v:.1}")).collect();
                format!("{g} µs: {}", cells.join(" / "))
            })
            .collect();
        let _ = writeln!(
            r,
            "| post_wait (extra µs of {:?} calls after a wait) | {} | {} |",
            w.value.segment_ops,
            rows.join("; "),
            w.source
        );
    }
}

/// The program (or, for a trace of no metaprep-annotated engine, its segments) and the
/// preps, each with what the traces recorded.
fn program_section(r: &mut String, traced: &[Traced], d: &Derivation, base: &HostProfile) {
    let _ = writeln!(r, "\n## Program\n");
    if d.foreign {
        let _ = writeln!(
            r,
            "No step holds `draft prep` or `verify prep`: not a metaprep-annotated engine, so the program and preps are kept from base profile `{}`.\n",
            base.name
        );
        let _ = writeln!(r, "{}", segments(&traced[0].analysis));
    } else {
        let _ = writeln!(
            r,
            "| # | annotation | item | ops | us | recorded median µs |\n|---|---|---|---|---|---|"
        );
        for (i, row) in d.program_rows.iter().enumerate() {
            let (ops, us) = match &row.item {
                Item::Host {
                    us,
                    us_by_batch,
                    ops,
                    ..
                } => {
                    let us = match us_by_batch {
                        Some(by_batch) => by_batch
                            .iter()
                            .map(|(bs, u)| format!("bs {bs}: {u:.3}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        None => format!("{us:.3}"),
                    };
                    (ops.to_string(), us)
                }
                Item::Accept { ops } => (ops.to_string(), String::new()),
                _ => (String::new(), String::new()),
            };
            let _ = writeln!(
                r,
                "| {} | `{}` | {} | {ops} | {us} | {:.3} |",
                i + 1,
                row.item.label(),
                item_kind(&row.item),
                row.recorded_us
            );
        }
        let _ = writeln!(
            r,
            "\n## Preps\n\n| trace | annotation | family | arm | ops | launching (calls) | reads | ops before read | op_us | replays | recorded µs | host µs |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for row in &d.prep_rows {
            let o = row.ops;
            let _ = writeln!(
                r,
                "| {} | `{}` | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {:.3} | {:.3} |",
                row.file,
                row.annotation,
                row.family,
                row.arm,
                o.ops,
                o.launches,
                row.launch_calls,
                o.reads,
                o.ops_before_read,
                o.op_us.map_or("-".to_string(), |v| format!("{v:.3}")),
                row.graph_launches,
                row.recorded_us,
                row.host_us
            );
        }
        let _ = writeln!(
            r,
            "\nRecorded µs is the trace's own median; host µs has the profiler's cost taken off (and the reads' waits are still in it). Arms no trace showed keep base profile `{}`'s entries.\n",
            base.name
        );
    }
}

fn trace_section(r: &mut String, t: &Traced) {
    let a = &t.analysis;
    let _ = writeln!(r, "## Trace `{}`\n", a.file);
    let _ = writeln!(
        r,
        "* main thread: pid {}, tid {} ({} cpu_ops; {} thread(s) hold cpu_ops); steps: {} ({})",
        a.main.0,
        a.main.1,
        a.main_ops,
        a.threads_with_ops,
        a.steps.len(),
        a.step_kind
    );
    let Some((probe, fit)) = &t.probe else {
        let _ = writeln!(
            r,
            "* **no probe file: its costs are the profiler's** (`--keep-profiler-costs`)\n"
        );
        return;
    };
    let _ = writeln!(
        r,
        "* probe file: host speed {:.3} µs per op (metaprep_host.py host_speed) bare, torch {}, {}",
        probe.host_speed_us, probe.torch, probe.date
    );
    if probe.profiler_ran_before {
        let _ = writeln!(
            r,
            "* **warning:** a profiler had already run in this process before this trace; its CUDA calls then stay slower even bare (about 2 µs each on the H200), which this calibration cannot see. Record each trace in a fresh process."
        );
    }
    let c = fit.costs;
    let _ = writeln!(
        r,
        "* what one recorded event cost the host: cpu op {:.3} µs, runtime call {:.3} µs ({:.3} into a busy GPU), annotation {:.3} µs, graph launch {:.3} µs ({:.3} into a busy GPU), graph kernel node {:.3} µs\n",
        c.cpu_op, c.runtime, c.runtime_busy, c.annotation, c.graph_launch, c.graph_launch_busy, c.graph_node
    );
    let _ = writeln!(
        r,
        "| workload | cpu ops | runtime (busy) | annotations | graph launches (busy) | graph nodes | bare µs | profiled µs | overhead µs | fitted µs |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for row in &fit.rows {
        let n = row.counts;
        let _ = writeln!(
            r,
            "| {} | {:.2} | {:.2} ({:.2}) | {:.2} | {:.2} ({:.2}) | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} |",
            row.workload,
            n.cpu_ops,
            n.runtime,
            n.runtime_busy,
            n.annotations,
            n.graph_launches,
            n.graph_launches_busy,
            n.graph_nodes,
            row.bare_us,
            row.profiled_us,
            row.overhead_us,
            row.fitted_us
        );
    }
    let _ = writeln!(r);
}

fn steps_table(r: &mut String, a: &Analysis) {
    let _ = writeln!(
        r,
        "## Steps of `{}`\n\n| step | wall µs | host busy µs | syncs | launches | graph launches | GPU busy µs | GPU idle µs |\n|---|---|---|---|---|---|---|---|",
        a.file
    );
    for (i, &step) in a.steps.iter().enumerate() {
        let tops = a.tops_in(step);
        let mut host_busy: f64 = tops.iter().map(|t| t.span.dur()).sum();
        for child in a.children(step) {
            if a.tops_in(child.span).is_empty() {
                host_busy += child.span.dur();
            }
        }
        let busy = a.gpu_busy(step);
        let _ = writeln!(
            r,
            "| {i} | {:.3} | {:.3} | {} | {} | {} | {:.3} | {:.3} |",
            step.dur(),
            host_busy,
            inside(&a.sync_points, |s| s.span, step).len(),
            inside(&a.launches, |s| *s, step).len(),
            a.rts_in(step).iter().filter(|r| r.kind.graph).count(),
            busy,
            (step.dur() - busy).max(0.0)
        );
    }
    let _ = writeln!(r);
}

/// Host segments between consecutive syncs, medians over the steps that have the most
/// common number of segments (for a trace that is not a metaprep-annotated engine).
fn segments(a: &Analysis) -> String {
    struct Seg {
        until: String,
        dur: f64,
        launches: usize,
        ops: usize,
    }
    let per_step: Vec<Vec<Seg>> = a
        .steps
        .iter()
        .map(|&step| {
            let syncs = inside(&a.sync_points, |s| s.span, step);
            let mut segs = Vec::new();
            let mut from = step.ts;
            let ends = syncs
                .iter()
                .map(|&i| {
                    let s = &a.sync_points[i];
                    (s.span.ts, s.span.end, format!("`{}`", s.name))
                })
                .chain(std::iter::once((
                    step.end,
                    step.end,
                    "step end".to_string(),
                )));
            for (ts, end, until) in ends {
                let span = Span {
                    ts: from,
                    end: ts.max(from),
                };
                segs.push(Seg {
                    until,
                    dur: span.dur(),
                    launches: inside(&a.launches, |s| *s, span).len(),
                    ops: a.tops_in(span).len(),
                });
                from = end.max(from);
            }
            segs
        })
        .collect();
    let mut by_len = std::collections::BTreeMap::<usize, usize>::new();
    for segs in &per_step {
        *by_len.entry(segs.len()).or_default() += 1;
    }
    let len = by_len
        .iter()
        .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
        .map_or(0, |(l, _)| *l);
    let same: Vec<&Vec<Seg>> = per_step.iter().filter(|s| s.len() == len).collect();
    let med = |v: Vec<f64>| quantile(&v, 0.5).unwrap_or(0.0);
    let mut r = String::new();
    let _ = writeln!(
        r,
        "## Host segments between syncs\n\n{} of {} steps have {} segment(s); medians over those.\n\n| # | until | median µs | launches | top-level ops |\n|---|---|---|---|---|",
        same.len(),
        a.steps.len(),
        len
    );
    for k in 0..len {
        let _ = writeln!(
            r,
            "| {k} | {} | {:.3} | {:.0} | {:.0} |",
            same[0][k].until,
            med(same.iter().map(|s| s[k].dur).collect()),
            med(same.iter().map(|s| s[k].launches as f64).collect()),
            med(same.iter().map(|s| s[k].ops as f64).collect()),
        );
    }
    r
}
