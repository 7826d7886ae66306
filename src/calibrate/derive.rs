//! From analysed traces to a host profile: each value pooled over the traces that show it,
//! each trace's framework costs moved to one host speed, every value with its source.

use super::analysis::{Analysis, PrepStep, TopOp};
use super::probe::{Fit, ProbeFile};
use super::trace::Span;
use crate::model::host_profile::{ArmOps, HostProfile, Item, PrepOps, Sourced, GPU_ITEMS_IN_ORDER};
use crate::stats::summary::quantile;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// One trace of the engine at the calibrated cell, and what its probe says.
pub struct Traced<'t> {
    pub analysis: Analysis<'t>,
    pub probe: Option<(ProbeFile, Fit)>,
}

impl Traced<'_> {
    /// Multiplies this trace's framework costs onto the profile's host speed `reference`.
    fn to_reference(&self, reference: Option<f64>) -> f64 {
        match (&self.probe, reference) {
            (Some((p, _)), Some(r)) => r / p.host_speed_us,
            _ => 1.0,
        }
    }
}

/// A GPU-timing trace of the engine at another batch size (only its preps' GPU time is read).
pub struct GpuTrace<'t> {
    pub batch: u32,
    pub analysis: Analysis<'t>,
}

/// What the report shows besides the profile.
pub struct Derivation {
    pub profile: HostProfile,
    pub program_rows: Vec<ProgramRow>,
    pub prep_rows: Vec<PrepRow>,
    pub modal: Vec<String>,
    pub n_typical: usize,
    pub foreign: bool,
}

pub struct ProgramRow {
    pub name: String,
    pub kind: &'static str,
    pub ops: Option<u32>,
    pub us: Option<f64>,
    pub recorded_us: f64,
}

pub struct PrepRow {
    pub file: String,
    pub annotation: &'static str,
    pub family: &'static str,
    pub arm: &'static str,
    pub ops: ArmOps,
    pub launch_calls: u32,
    pub graph_launches: u32,
    pub recorded_us: f64,
    pub host_us: f64,
}

fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

fn median_count(values: impl IntoIterator<Item = usize>) -> u32 {
    let v: Vec<f64> = values.into_iter().map(|c| c as f64).collect();
    median(&v).map_or(0, |m| m.round() as u32)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

const PREP_ANNOTATIONS: [(&str, &str); 2] = [
    ("draft prep", "dspark_draft_block"),
    ("verify prep", "dsa_target_verify"),
];

/// Whose costs the profile holds, in words, for every source.
fn how(traced: &[Traced]) -> &'static str {
    if traced.iter().all(|t| t.probe.is_some()) {
        "the profiler's per-event cost (fitted from each trace's probe file) taken off"
    } else {
        "AS THE PROFILER SAW THEM (no probe file: its own cost included)"
    }
}

/// Host costs pooled over the traces, each in the profile's host speed.
struct Costs {
    op_us: Sourced<f64>,
    read_us: Sourced<f64>,
    graph_launch_us: Sourced<f64>,
    upload_us: Sourced<f64>,
    upload_syncs: Sourced<bool>,
    kernel_us: Sourced<f64>,
}

/// What calibration needs to say where a value came from.
struct Context<'a> {
    from: String,
    how: &'static str,
    base: &'a HostProfile,
    /// The profile's host speed (µs per probe op), when every trace has a probe.
    reference: Option<f64>,
}

impl Context<'_> {
    /// The value with its source, or the base profile's (saying so) where the traces show
    /// none.
    fn derived(
        &self,
        value: Option<f64>,
        source: String,
        base: &Sourced<f64>,
        missing: &str,
    ) -> Sourced<f64> {
        match value {
            Some(v) => Sourced {
                value: round3(v),
                source,
            },
            None => Sourced {
                value: base.value,
                source: format!(
                    "kept from base profile `{}`: the traces have {missing}; {}",
                    self.base.name, base.source
                ),
            },
        }
    }
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
struct Samples {
    plain: Vec<f64>,
    reads: Vec<f64>,
    replays: Vec<f64>,
    uploads: Vec<f64>,
    syncing_uploads: usize,
    /// Per entry of [`PREP_ANNOTATIONS`], that annotation in each step.
    preps: [Vec<PrepStep>; 2],
}

impl Samples {
    fn of(t: &Traced) -> Samples {
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

fn costs(traced: &[Traced], samples: &[Samples], cx: &Context) -> Costs {
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

/// The program: the annotation sequence most steps of the first trace share, which every
/// trace must share; host segments pooled over all of them.
fn program(traced: &[Traced], cx: &Context, d: &mut Derivation) -> Result<Vec<Item>> {
    let (modal, typical) = modal_sequence(&traced[0].analysis);
    for t in &traced[1..] {
        let (m, _) = modal_sequence(&t.analysis);
        if m != modal {
            bail!(
                "{}: its steps run {} but {} runs {}: calibrate traces of one engine's program (one per arm)",
                t.analysis.file,
                m.join(" → "),
                traced[0].analysis.file,
                modal.join(" → ")
            );
        }
    }
    d.foreign = !modal
        .iter()
        .any(|n| n == "draft prep" || n == "verify prep");
    d.n_typical = typical;
    let n_items = modal.len();
    let mut program = Vec::new();
    if d.foreign {
        program = cx.base.program.clone();
    }
    for (j, name) in modal.iter().enumerate().filter(|_| !d.foreign) {
        let spans: Vec<(&Analysis, Span)> = traced
            .iter()
            .flat_map(|t| {
                let a = &t.analysis;
                a.steps.iter().filter_map(move |&s| {
                    let kids = a.children(s);
                    (kids.len() == n_items).then(|| (a, kids[j].span))
                })
            })
            .collect();
        let ops = median_count(spans.iter().map(|(a, s)| a.tops_in(*s).len()));
        let recorded =
            median(&spans.iter().map(|(_, s)| s.dur()).collect::<Vec<_>>()).unwrap_or(0.0);
        let host = median(
            &spans
                .iter()
                .map(|(a, s)| a.range_us(*s))
                .collect::<Vec<_>>(),
        )
        .unwrap_or(0.0);
        let (n, from, how) = (spans.len(), &cx.from, cx.how);
        // The GPU items are named by their own labels (`draft prep`, ..., `accept`).
        let gpu_item = GPU_ITEMS_IN_ORDER.iter().find(|i| i.label() == name);
        let item = match gpu_item {
            Some(Item::Accept { .. }) => Item::Accept { ops },
            Some(item) => item.clone(),
            None if ops > 0 => Item::Host {
                name: name.clone(),
                us: 0.0,
                ops,
                launches: None,
                source: format!("{from}: median {ops} top-level cpu_ops inside `{name}` over {n} steps"),
            },
            None => Item::Host {
                name: name.clone(),
                us: round3(host),
                ops: 0,
                launches: None,
                source: format!("{from}: median duration of `{name}` over {n} steps, {how} (no cpu_op inside: host busy in Python; left as measured, not moved with the host speed)"),
            },
        };
        d.program_rows.push(ProgramRow {
            name: name.clone(),
            kind: item_kind(&item),
            ops: match &item {
                Item::Host { ops, .. } | Item::Accept { ops } => Some(*ops),
                _ => None,
            },
            us: match &item {
                Item::Host { us, .. } => Some(*us),
                _ => None,
            },
            recorded_us: recorded,
        });
        program.push(item);
    }
    d.modal = modal;
    Ok(program)
}

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
fn prep_steps(a: &Analysis, ann: &str) -> Vec<PrepStep> {
    a.steps
        .iter()
        .flat_map(|&s| a.children(s))
        .filter(|c| c.name == ann)
        .map(|c| a.prep_step(c.span))
        .collect()
}

/// Each trace's preps into the arms they show; GPU time per framework kernel by batch.
fn preps(
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

pub fn derive(
    traced: &[Traced],
    gpu_traces: &[GpuTrace],
    batch: u32,
    base: &HostProfile,
) -> Result<Derivation> {
    let files: Vec<&str> = traced.iter().map(|t| t.analysis.file).collect();
    let speeds: Vec<f64> = traced
        .iter()
        .filter_map(|t| t.probe.as_ref().map(|(p, _)| p.host_speed_us))
        .collect();
    let cx = Context {
        from: format!("metaprep calibrate {}", files.join(" ")),
        how: how(traced),
        base,
        reference: (speeds.len() == traced.len())
            .then(|| median(&speeds))
            .flatten(),
    };
    let mut d = Derivation {
        profile: base.clone(),
        program_rows: Vec::new(),
        prep_rows: Vec::new(),
        modal: Vec::new(),
        n_typical: 0,
        foreign: false,
    };
    let samples: Vec<Samples> = traced.iter().map(Samples::of).collect();
    let costs = costs(traced, &samples, &cx);
    let program = program(traced, &cx, &mut d)?;
    let preps = if d.foreign {
        base.preps.clone()
    } else {
        preps(traced, &samples, gpu_traces, batch, &cx, &costs, &mut d)?
    };
    let host_speed_us = cx.reference.map(|r| Sourced {
        value: round3(r),
        source: format!(
            "median of the traces' probe files' bare host speed (µs per op of metaprep_host.py's host-speed pass in each trace's own process, bare, before its profiler started and after it stopped): {}; each trace's framework costs were moved to it by its own",
            traced
                .iter()
                .filter_map(|t| t.probe.as_ref().map(|(p, _)| format!("{} {:.3}", t.analysis.file, p.host_speed_us)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    });
    let stem = std::path::Path::new(files[0])
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    let n_steps: usize = traced.iter().map(|t| t.analysis.steps.len()).sum();
    d.profile = HostProfile {
        name: format!("calibrated-{stem}"),
        source: format!("{}: {n_steps} steps at batch {batch}, {}", cx.from, cx.how),
        op_us: costs.op_us,
        kernel_us: costs.kernel_us,
        read_us: costs.read_us,
        graph_launch_us: costs.graph_launch_us,
        upload_us: costs.upload_us,
        upload_syncs: costs.upload_syncs,
        // A trace shows one read path (the pageable `.tolist()`); the others stay the base's.
        pinned_read_us: base.pinned_read_us.clone(),
        mapped_read_us: base.mapped_read_us.clone(),
        // The traces are of a DSpark step: the EAGLE step is not calibrated from them.
        eagle_program: None,
        host_speed_us,
        preps,
        program,
    };
    Ok(d)
}

/// The annotation sequence most of `a`'s steps share (ties: the earliest), and how many do.
pub fn modal_sequence(a: &Analysis) -> (Vec<String>, usize) {
    let mut counts: BTreeMap<Vec<String>, (usize, usize)> = BTreeMap::new();
    for (i, &s) in a.steps.iter().enumerate() {
        let names: Vec<String> = a.children(s).iter().map(|c| c.name.clone()).collect();
        counts.entry(names).or_insert((0, i)).0 += 1;
    }
    counts
        .into_iter()
        .max_by(|x, y| x.1 .0.cmp(&y.1 .0).then(y.1 .1.cmp(&x.1 .1)))
        .map(|(k, (n, _))| (k, n))
        .unwrap_or_default()
}

pub fn item_kind(item: &Item) -> &'static str {
    match item {
        Item::Host { .. } => "host",
        Item::DraftPrep => "draft_prep",
        Item::DraftForward => "draft_forward",
        Item::VerifyPrep => "verify_prep",
        Item::VerifyForward => "verify_forward",
        Item::Accept { .. } => "accept",
        Item::DecodePrep => "decode_prep",
        Item::ExtendPrep => "extend_prep",
        Item::ExtendForward => "extend_forward",
        Item::DraftPasses { .. } => "draft_passes",
    }
}
