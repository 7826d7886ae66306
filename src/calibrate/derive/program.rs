//! The program: the annotation sequence every trace's steps share, host segments pooled.

use super::super::analysis::Analysis;
use super::super::trace::Span;
use super::{
    median, median_count, modal_sequence, round3, Context, Derivation, GpuTrace, ProgramRow, Traced,
};
use crate::model::host_profile::{Item, GPU_ITEMS_IN_ORDER};
use crate::stats::summary::quantile;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// The spans of item `j` of every step of `analyses` that runs the program `modal` (the
/// same items by name: a step of another sequence of as many items is left out).
fn item_spans<'a, 't>(
    analyses: impl Iterator<Item = &'a Analysis<'t>>,
    modal: &[String],
    j: usize,
) -> Vec<(&'a Analysis<'t>, Span)>
where
    't: 'a,
{
    analyses
        .flat_map(|a| {
            a.steps.iter().filter_map(move |&s| {
                let kids = a.children(s);
                let same = kids.len() == modal.len()
                    && kids.iter().zip(modal).all(|(k, name)| &k.name == name);
                same.then(|| (a, kids[j].span))
            })
        })
        .collect()
}

/// Each span's host µs.
fn host_us(spans: &[(&Analysis, Span)]) -> Vec<f64> {
    spans.iter().map(|(a, s)| a.range_us(*s)).collect()
}

/// The batch traces a Python segment's time at their batch may come from: those with host
/// times (a probe file, or `--keep-profiler-costs`) whose steps run the calibrated program.
/// The others are named in the segments' sources, not dropped unseen.
struct BatchTraces<'g, 't> {
    used: Vec<&'g GpuTrace<'t>>,
    not_used: String,
}

impl<'g, 't> BatchTraces<'g, 't> {
    fn of(gpu_traces: &'g [GpuTrace<'t>], modal: &[String]) -> Self {
        let mut used = Vec::new();
        let mut skipped = Vec::new();
        for g in gpu_traces {
            if !g.host_times {
                skipped.push(format!("{} (no probe file)", g.analysis.file));
            } else if modal_sequence(&g.analysis).0 != modal {
                skipped.push(format!(
                    "{} (its steps run another program)",
                    g.analysis.file
                ));
            } else {
                used.push(g);
            }
        }
        let not_used = match skipped.is_empty() {
            true => String::new(),
            false => format!("; no us_by_batch from {}", skipped.join(", ")),
        };
        BatchTraces { used, not_used }
    }

    /// Item `j`'s time at each batch trace's batch beside `us` at the traced `batch`
    /// (`at_traced`: its steps' µs there), where there is more than the one point, with a note
    /// for the item's source. A batch's point is kept only where its steps' interquartile
    /// range clears the traced batch's: one process's few steps at another host level would
    /// otherwise pass for the batch's effect.
    fn us_by_batch(
        &self,
        (modal, j): (&[String], usize),
        batch: u32,
        (us, at_traced): (f64, &[f64]),
    ) -> (Option<BTreeMap<u32, f64>>, String) {
        let quartiles = |v: &[f64]| Some((quantile(v, 0.25)?, quantile(v, 0.75)?));
        let Some((q1, q3)) = quartiles(at_traced) else {
            return (None, self.not_used.clone());
        };
        let mut by_batch = BTreeMap::from([(batch, us)]);
        let (mut kept, mut within) = (Vec::new(), Vec::new());
        for g in &self.used {
            let at = host_us(&item_spans(std::iter::once(&g.analysis), modal, j));
            let (Some(m), Some((lo, hi))) = (median(&at), quartiles(&at)) else {
                continue;
            };
            let what = format!("{} at batch {} ({m:.1} µs)", g.analysis.file, g.batch);
            if lo > q3 || hi < q1 {
                by_batch.insert(g.batch, round3(m));
                kept.push(what);
            } else {
                within.push(what);
            }
        }
        let mut note = String::new();
        if !kept.is_empty() {
            note += &format!(
                "; us_by_batch: at batch {batch} as above, and from --gpu-trace {} (median over its steps, the profiler's cost taken off as above)",
                kept.join(", ")
            );
        }
        if !within.is_empty() {
            note += &format!(
                "; {} within the spread of batch {batch}'s steps ({q1:.1}-{q3:.1} µs, p25-p75): not a batch point",
                within.join(", ")
            );
        }
        note += &self.not_used;
        ((by_batch.len() > 1).then_some(by_batch), note)
    }
}

/// The annotation sequence most steps of the first trace share, which every trace must
/// share, and how many of its steps run it.
fn shared_program(traced: &[Traced]) -> Result<(Vec<String>, usize)> {
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
    Ok((modal, typical))
}

/// The program: the annotation sequence every trace's steps share; host segments pooled
/// over all of them. A segment of Python work (no op inside) also gets its duration at
/// each `--gpu-trace`'s batch size, where that trace runs the same program: an engine's
/// scheduler walks every request, so its time grows with the batch.
pub(super) fn program(
    traced: &[Traced],
    gpu_traces: &[GpuTrace],
    batch: u32,
    cx: &Context,
    d: &mut Derivation,
) -> Result<Vec<Item>> {
    let (modal, typical) = shared_program(traced)?;
    d.foreign = !modal
        .iter()
        .any(|n| n == "draft prep" || n == "verify prep");
    d.n_typical = typical;
    let mut program = Vec::new();
    if d.foreign {
        program = cx.base.program.clone();
    }
    let batch_traces = BatchTraces::of(gpu_traces, &modal);
    for (j, name) in modal.iter().enumerate().filter(|_| !d.foreign) {
        let spans = item_spans(traced.iter().map(|t| &t.analysis), &modal, j);
        let ops = median_count(spans.iter().map(|(a, s)| a.tops_in(*s).len()));
        let recorded =
            median(&spans.iter().map(|(_, s)| s.dur()).collect::<Vec<_>>()).unwrap_or(0.0);
        let hosts = host_us(&spans);
        let host = median(&hosts).unwrap_or(0.0);
        let (n, from, how) = (spans.len(), &cx.from, cx.how);
        // The GPU items are named by their own labels (`draft prep`, ..., `accept`).
        let gpu_item = GPU_ITEMS_IN_ORDER.iter().find(|i| i.label() == name);
        let item = match gpu_item {
            Some(Item::Accept { .. }) => Item::Accept { ops },
            Some(item) => item.clone(),
            None if ops > 0 => Item::Host {
                name: name.clone(),
                us: 0.0,
                us_by_batch: None,
                ops,
                launches: None,
                source: format!(
                    "{from}: median {ops} top-level cpu_ops inside `{name}` over {n} steps"
                ),
            },
            None => {
                let (us_by_batch, by_batch_note) =
                    batch_traces.us_by_batch((&modal, j), batch, (round3(host), &hosts));
                Item::Host {
                    name: name.clone(),
                    us: round3(host),
                    us_by_batch,
                    ops: 0,
                    launches: None,
                    source: format!("{from}: median duration of `{name}` over {n} steps, {how} (no cpu_op inside: host busy in Python; left as measured, not moved with the host speed){by_batch_note}"),
                }
            }
        };
        d.program_rows.push(ProgramRow {
            item: item.clone(),
            recorded_us: recorded,
        });
        program.push(item);
    }
    d.modal = modal;
    Ok(program)
}
