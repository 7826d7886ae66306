//! Host costs pooled over the traces, each moved to the profile's host speed.

use super::super::analysis::{PrepStep, TopOp};
use super::super::trace::Span;
use super::preps::{prep_steps, PREP_ANNOTATIONS};
use super::{median, Context, Traced};
use crate::model::host_profile::Sourced;

/// Host costs pooled over the traces, each in the profile's host speed.
pub(super) struct Costs {
    pub(super) op_us: Sourced<f64>,
    pub(super) read_us: Sourced<f64>,
    pub(super) graph_launch_us: Sourced<f64>,
    pub(super) upload_us: Sourced<f64>,
    pub(super) upload_syncs: Sourced<bool>,
    pub(super) kernel_us: Sourced<f64>,
}

/// Host times (µs, profiler cost off) of the top-level ops inside `t`'s steps that `pick`
/// chooses, a syncing op's wait for the GPU left out.
fn op_times(t: &Traced, pick: &dyn Fn(&TopOp) -> bool) -> Vec<f64> {
    let a = &t.analysis;
    a.steps
        .iter()
        .flat_map(|&s| a.tops_in(s))
        .filter(|op| pick(op))
        .map(|op| {
            if op.sync {
                a.sync_op_us(op)
            } else {
                a.op_us(op)
            }
        })
        .collect()
}

/// Host times of `t`'s forward replays: the forward annotations (one replay and the Python
/// around it each), else the bare `cudaGraphLaunch` calls.
fn replay_times(t: &Traced) -> Vec<f64> {
    let a = &t.analysis;
    let ranges: Vec<f64> = ["draft forward", "verify forward"]
        .iter()
        .flat_map(|n| a.named(n))
        .filter(|s| a.steps.iter().any(|st| st.contains(*s)))
        .map(|s| a.range_us(s))
        .collect();
    if !ranges.is_empty() {
        return ranges;
    }
    a.steps
        .iter()
        .flat_map(|&s| a.rts_in(s))
        .filter(|r| r.kind.graph)
        .map(|r| r.span.dur())
        .collect()
}

/// One trace's host-cost samples (µs, profiler cost off, in the trace's own host speed) and
/// its prep annotations measured: everything the derivation reads off it, read once.
pub(super) struct Samples {
    pub(super) plain: Vec<f64>,
    pub(super) reads: Vec<f64>,
    pub(super) replays: Vec<f64>,
    pub(super) uploads: Vec<f64>,
    pub(super) syncing_uploads: usize,
    /// Per entry of [`PREP_ANNOTATIONS`], that annotation in each step.
    pub(super) preps: [Vec<PrepStep>; 2],
}

impl Samples {
    pub(super) fn of(t: &Traced) -> Samples {
        let a = &t.analysis;
        Samples {
            plain: op_times(t, &|op| !op.sync),
            reads: op_times(t, &|op| op.read()),
            replays: replay_times(t),
            uploads: op_times(t, &|op| op.upload),
            syncing_uploads: a
                .steps
                .iter()
                .flat_map(|&s| a.tops_in(s))
                .filter(|op| op.upload && op.sync)
                .count(),
            preps: PREP_ANNOTATIONS.map(|(ann, _)| prep_steps(a, ann)),
        }
    }
}

/// `f`'s samples of every trace, each moved to the profile's host speed.
fn pooled(
    traced: &[Traced],
    samples: &[Samples],
    reference: Option<f64>,
    f: fn(&Samples) -> &Vec<f64>,
) -> Vec<f64> {
    traced
        .iter()
        .zip(samples)
        .flat_map(|(t, s)| {
            let k = t.to_reference(reference);
            f(s).iter().map(move |v| v * k)
        })
        .collect()
}

pub(super) fn costs(traced: &[Traced], samples: &[Samples], cx: &Context) -> Costs {
    let (from, how, base) = (&cx.from, cx.how, cx.base);
    let pool = |f: fn(&Samples) -> &Vec<f64>| pooled(traced, samples, cx.reference, f);
    let plain = pool(|s| &s.plain);
    let reads = pool(|s| &s.reads);
    let graphs = pool(|s| &s.replays);
    let uploads = pool(|s| &s.uploads);
    let syncing: usize = samples.iter().map(|s| s.syncing_uploads).sum();
    // Framework kernels outside the preps (sampling, accept): GPU time per launch.
    let host_kernels: Vec<f64> = traced
        .iter()
        .flat_map(|t| {
            let a = &t.analysis;
            let preps: Vec<Span> = PREP_ANNOTATIONS
                .iter()
                .flat_map(|(n, _)| a.named(n))
                .collect();
            a.steps
                .iter()
                .flat_map(|&s| a.tops_in(s))
                .filter(|op| {
                    op.launches > 0 && !op.sync && !preps.iter().any(|p| p.contains(op.span))
                })
                .map(|op| a.gpu_launched_in(op.span) / op.launches as f64)
                .collect::<Vec<f64>>()
        })
        .collect();
    let upload_syncs = if uploads.is_empty() {
        Sourced {
            value: base.upload_syncs.value,
            source: format!(
                "kept from base profile `{}`: the traces have no upload; {}",
                base.name, base.upload_syncs.source
            ),
        }
    } else {
        Sourced {
            value: syncing > 0,
            source: format!(
                "{from}: {syncing} of {} uploads hold a stream sync",
                uploads.len()
            ),
        }
    };
    Costs {
        op_us: cx.derived(
            median(&plain),
            format!("{from}: median host time of {} top-level cpu_ops that do not sync, inside the steps, {how}", plain.len()),
            &base.op_us,
            "no top-level cpu_op that does not sync inside a step",
        ),
        read_us: cx.derived(
            median(&reads),
            format!("{from}: median over {} reads (top-level cpu_ops that sync and are not uploads) of each one's host time less its wait for the GPU, {how}", reads.len()),
            &base.read_us,
            "no read inside a step",
        ),
        graph_launch_us: cx.derived(
            median(&graphs),
            format!("{from}: median host time of {} forward replays (`draft forward` / `verify forward` annotations, one CUDAGraph.replay() each; else cudaGraphLaunch calls), {how}", graphs.len()),
            &base.graph_launch_us,
            "no graph replay inside a step",
        ),
        upload_us: cx.derived(
            median(&uploads),
            format!("{from}: median host time of {} uploads (top-level cpu_ops with an HtoD cudaMemcpyAsync) less their wait for the GPU, {how}", uploads.len()),
            &base.upload_us,
            "no HtoD upload inside a step",
        ),
        upload_syncs,
        kernel_us: cx.derived(
            median(&host_kernels),
            format!("{from}: median GPU time per launch of the {} launching ops outside the preps (CUDA activity records, which the profiler does not slow)", host_kernels.len()),
            &base.kernel_us,
            "no launching op outside the preps",
        ),
    }
}
