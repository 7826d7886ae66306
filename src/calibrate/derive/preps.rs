//! The preps: each prep annotation's arm, counts and host time, and its kernels' GPU time.

use super::super::analysis::{Analysis, PrepStep};
use super::costs::{Costs, Samples};
use super::{median, median_count, round3, Context, Derivation, GpuTrace, PrepRow, Traced};
use crate::model::host_profile::{ArmOps, PrepOps};
use anyhow::{bail, Result};
use std::collections::BTreeMap;

pub(super) const PREP_ANNOTATIONS: [(&str, &str); 2] = [
    ("draft prep", "dspark_draft_block"),
    ("verify prep", "dsa_target_verify"),
];

/// The arm a prep's steps show, its counts, and the host time its ops do not explain
/// (reads, replays, uploads at this trace's own costs).
fn prep_arm(per: &[PrepStep], own: [f64; 3]) -> (&'static str, ArmOps, f64) {
    let med = |f: fn(&PrepStep) -> usize| median_count(per.iter().map(f));
    let [read, replay, upload] = own;
    let (reads, replays, uploads) = (
        med(|p| p.reads),
        med(|p| p.graph_launches),
        med(|p| p.uploads),
    );
    if reads > 0 {
        let ops = ArmOps {
            ops: med(|p| p.ops),
            launches: med(|p| p.launches),
            reads,
            ops_before_read: med(|p| p.ops_before_read),
            op_us: None,
        };
        ("eager_sync", ops, f64::from(reads) * read)
    } else if replays > 0 {
        // graph-upload's upload is its own cost (upload_us), not one of its ops.
        let ops = ArmOps {
            ops: med(|p| p.graph_ops).saturating_sub(uploads),
            ..ArmOps::default()
        };
        let arm = if uploads > 0 { "graph_upload" } else { "graph" };
        (
            arm,
            ops,
            f64::from(replays) * replay + f64::from(uploads) * upload,
        )
    } else {
        let ops = ArmOps {
            ops: med(|p| p.ops),
            launches: med(|p| p.launches),
            ..ArmOps::default()
        };
        ("eager_device", ops, 0.0)
    }
}

/// The steps' prep annotations named `ann`, measured.
pub(super) fn prep_steps(a: &Analysis, ann: &str) -> Vec<PrepStep> {
    a.steps
        .iter()
        .flat_map(|&s| a.children(s))
        .filter(|c| c.name == ann)
        .map(|c| a.prep_step(c.span))
        .collect()
}

/// Each trace's preps into the arms they show; GPU time per framework kernel by batch.
pub(super) fn preps(
    traced: &[Traced],
    samples: &[Samples],
    gpu_traces: &[GpuTrace],
    batch: u32,
    cx: &Context,
    costs: &Costs,
    d: &mut Derivation,
) -> Result<BTreeMap<String, PrepOps>> {
    let mut preps = cx.base.preps.clone();
    let mut seen: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for (t, sample) in traced.iter().zip(samples) {
        let a = &t.analysis;
        let k = t.to_reference(cx.reference);
        let own = |v: &[f64], profile: f64| median(v).unwrap_or(profile / k);
        let own = [
            own(&sample.reads, costs.read_us.value),
            own(&sample.replays, costs.graph_launch_us.value),
            own(&sample.uploads, costs.upload_us.value),
        ];
        for ((ann, family), per) in PREP_ANNOTATIONS.into_iter().zip(&sample.preps) {
            if per.is_empty() {
                continue;
            }
            let (arm, mut ops, explained) = prep_arm(per, own);
            let host = median(&per.iter().map(|p| p.host_us).collect::<Vec<_>>()).unwrap_or(0.0);
            let waits = median(&per.iter().map(|p| p.waits).collect::<Vec<_>>()).unwrap_or(0.0);
            ops.launches = ops.launches.min(ops.ops);
            if ops.ops > 0 {
                ops.op_us = Some(round3(
                    ((host - waits - explained) / f64::from(ops.ops)).max(0.0) * k,
                ));
            }
            if let Some(first) = seen.insert((family, arm), a.file) {
                bail!("{}: `{ann}` is the {arm} arm, which {first} already showed: give one trace per arm", a.file);
            }
            let prep = preps
                .get_mut(family)
                .expect("a profile holds both families");
            match arm {
                "eager_sync" => prep.eager_sync = ops,
                "eager_device" => prep.eager_device = ops,
                "graph" => prep.graph = ops,
                _ => prep.graph_upload = Some(ops),
            }
            d.prep_rows.push(PrepRow {
                file: a.file.to_string(),
                annotation: ann,
                family,
                arm,
                ops,
                launch_calls: median_count(per.iter().map(|p| p.launch_calls)),
                graph_launches: median_count(per.iter().map(|p| p.graph_launches)),
                recorded_us: median(&per.iter().map(|p| p.recorded_us).collect::<Vec<_>>())
                    .unwrap_or(0.0),
                host_us: host,
            });
        }
    }
    for (j, (ann, family)) in PREP_ANNOTATIONS.into_iter().enumerate() {
        let prep = preps
            .get_mut(family)
            .expect("a profile holds both families");
        let arms: Vec<&str> = seen
            .keys()
            .filter(|(f, _)| *f == family)
            .map(|(_, a)| *a)
            .collect();
        let gpu_note = kernel_times(traced, samples, gpu_traces, batch, j, prep, cx);
        let kept: Vec<&str> = ["eager_sync", "eager_device", "graph", "graph_upload"]
            .into_iter()
            .filter(|a| !arms.contains(a))
            .collect();
        let list = |v: &[&str]| {
            if v.is_empty() {
                "no arm".to_string()
            } else {
                v.join(", ")
            }
        };
        prep.source = format!(
            "{}: `{ann}` seen as {} ({}); {gpu_note}; {} kept from base profile `{}` ({})",
            cx.from,
            list(&arms),
            cx.how,
            list(&kept),
            cx.base.name,
            cx.base.preps.get(family).map_or("", |p| p.source.as_str())
        );
    }
    Ok(preps)
}

/// A prep's GPU time per framework kernel: from an eager arm's launches at the traced
/// batch, and from `--gpu-trace`s at theirs (their prep's GPU time over the eager arm's
/// launching ops). Returns how, for the source.
fn kernel_times(
    traced: &[Traced],
    samples: &[Samples],
    gpu_traces: &[GpuTrace],
    batch: u32,
    prep_index: usize,
    prep: &mut PrepOps,
    cx: &Context,
) -> String {
    let ann = PREP_ANNOTATIONS[prep_index].0;
    // The eager-device trace's launches, else the eager-sync one's: a graph replay's GPU
    // time cannot be split into kernels.
    let eager = |reads: bool| {
        traced
            .iter()
            .zip(samples)
            .map(|(t, s)| (&t.analysis, &s.preps[prep_index]))
            .find(|(_, per)| {
                !per.is_empty()
                    && per
                        .iter()
                        .all(|p| (p.reads > 0) == reads && p.graph_launches == 0)
                    && per.iter().any(|p| p.launches > 0)
            })
    };
    let Some((a, per)) = eager(false).or_else(|| eager(true)) else {
        return format!(
            "kernel_us kept from base profile `{}` (no eager trace launches a kernel in it)",
            cx.base.name
        );
    };
    let per_kernel: Vec<f64> = per
        .iter()
        .filter(|p| p.launches > 0)
        .map(|p| p.gpu_us / p.launches as f64)
        .collect();
    let Some(at_batch) = median(&per_kernel) else {
        return format!("kernel_us kept from base profile `{}`", cx.base.name);
    };
    let launches = median_count(per.iter().map(|p| p.launches)).max(1);
    let mut by_batch = BTreeMap::from([(batch, round3(at_batch))]);
    for g in gpu_traces {
        let gpu: Vec<f64> = prep_steps(&g.analysis, ann)
            .iter()
            .map(|p| p.gpu_us)
            .collect();
        if let Some(v) = median(&gpu) {
            by_batch.insert(g.batch, round3(v / f64::from(launches)));
        }
    }
    prep.kernel_us = Some(round3(at_batch));
    if by_batch.len() > 1 {
        let batches: Vec<String> = by_batch.keys().map(u32::to_string).collect();
        prep.kernel_us_by_batch = Some(by_batch);
        format!("kernel_us = GPU time of the prep's launches in {} (CUDA activity records) / its {launches} launching ops; kernel_us_by_batch the same from --gpu-trace at batch {}", a.file, batches.join(", "))
    } else {
        prep.kernel_us_by_batch = None;
        format!("kernel_us = GPU time of the prep's launches in {} (CUDA activity records) / its {launches} launching ops, at the traced batch {batch} only (no --gpu-trace: every batch uses it)", a.file)
    }
}
