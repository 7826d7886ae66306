//! From analysed traces to a host profile: each value pooled over the traces that show it,
//! each trace's framework costs moved to one host speed, every value with its source.
//!
//! The host costs pooled over traces live in `costs`, the program in `program`, the preps and
//! their kernels in `preps`.

mod costs;
mod preps;
mod program;

use super::analysis::Analysis;
use super::probe::{Fit, PostWaitProbe, ProbeFile};
use crate::model::host_profile::{ArmOps, HostProfile, Item, Sourced};
use crate::model::post_wait::PostWait;
use crate::stats::summary::quantile;
use anyhow::{ensure, Result};
use costs::{costs, Samples};
use preps::preps;
use program::program;
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

/// A trace of the engine at another batch size: its preps' GPU time, and, where
/// `host_times`, its Python-only host segments (the profiler's cost taken off as from the
/// traced files, or left in with them under `--keep-profiler-costs`).
pub struct GpuTrace<'t> {
    pub batch: u32,
    pub analysis: Analysis<'t>,
    pub host_times: bool,
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

/// One program item as derived, beside what the traces recorded for it.
pub struct ProgramRow {
    pub item: Item,
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

fn how(traced: &[Traced]) -> &'static str {
    if traced.iter().all(|t| t.probe.is_some()) {
        "the profiler's per-event cost (fitted from each trace's probe file) taken off"
    } else {
        "AS THE PROFILER SAW THEM (no probe file: its own cost included)"
    }
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
    let program = program(traced, gpu_traces, batch, &cx, &mut d)?;
    let preps = if d.foreign {
        base.preps.clone()
    } else {
        preps(traced, &samples, gpu_traces, batch, &cx, &costs, &mut d)?
    };
    let host_speed_us = cx.reference.map(|r| Sourced {
        value: round3(r),
        source: format!(
            "median of the traces' probe files' bare host speed (µs per op of metaprep_host.py's host-speed pass in each trace's own process, bare, before its profiler started): {}; each trace's framework costs were moved to it by its own",
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
        post_wait: post_wait(traced, &cx)?,
        // Fitted later, against an untraced run (`validate --fit`, `--fit-post-wait`).
        arm_host_factors: None,
        post_wait_scale: None,
        host_speed_us,
        preps,
        program,
    };
    Ok(d)
}

/// The traces' post-wait probes, each moved from the speed it ran at to its trace's (its probe
/// file's) and from there to the profile's by the same factor as its trace's op costs
/// (calibrate took it off that trace's ops in that trace's µs), pooled by the median of each
/// (gap, segment); `None` when no probe file has one. Probes with other gaps or segments
/// than the first are refused.
fn post_wait(traced: &[Traced], cx: &Context) -> Result<Option<Sourced<PostWait>>> {
    let probes: Vec<(&Traced, &ProbeFile, &PostWaitProbe)> = traced
        .iter()
        .filter_map(|t| {
            let (p, _) = t.probe.as_ref()?;
            Some((t, p, p.post_wait.as_ref()?))
        })
        .collect();
    let Some(&(first_trace, _, first)) = probes.first() else {
        return Ok(None);
    };
    let mut moved = Vec::new();
    for &(t, p, pw) in &probes {
        ensure!(
            pw.gaps_us == first.gaps_us && pw.segment_ops == first.segment_ops,
            "{}: its probe file's post_wait has other gaps or segments than {}'s: record \
             every trace with the same scripts/metaprep_host.py",
            t.analysis.file,
            first_trace.analysis.file
        );
        let mut table = pw.table_at(p.host_speed_us);
        table.scale(t.to_reference(cx.reference));
        moved.push(table);
    }
    let mut table = moved[0].clone();
    for (g, row) in table.extra_us.iter_mut().enumerate() {
        for (k, v) in row.iter_mut().enumerate() {
            let values: Vec<f64> = moved.iter().map(|m| m.extra_us[g][k]).collect();
            *v = round3(median(&values).expect("one probe at least"));
        }
    }
    table.check_well_formed()?;
    let each = probes
        .iter()
        .map(|(t, p, _)| format!("{} {:.3}", t.analysis.file, p.host_speed_us))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some(Sourced {
        value: table,
        source: format!(
            "median over {} trace processes of metaprep_host.py post_wait_probe (bare, before \
             each profiler started), each moved from its own host speed to its trace's, then \
             to the profile's as its trace's op costs were (by its probe file's host speed: \
             {each})",
            probes.len()
        ),
    }))
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
