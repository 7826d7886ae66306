//! The program: the annotation sequence every trace's steps share, host segments pooled.

use super::super::analysis::Analysis;
use super::super::trace::Span;
use super::{
    item_kind, median, median_count, modal_sequence, round3, Context, Derivation, GpuTrace,
    ProgramRow, Traced,
};
use crate::model::host_profile::{Item, GPU_ITEMS_IN_ORDER};
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// The spans of item `j` of every step of `analyses` that runs `n_items` items.
fn item_spans<'a, 't>(
    analyses: impl Iterator<Item = &'a Analysis<'t>>,
    n_items: usize,
    j: usize,
) -> Vec<(&'a Analysis<'t>, Span)>
where
    't: 'a,
{
    analyses
        .flat_map(|a| {
            a.steps.iter().filter_map(move |&s| {
                let kids = a.children(s);
                (kids.len() == n_items).then(|| (a, kids[j].span))
            })
        })
        .collect()
}

/// The batch traces whose steps run the calibrated program (their Python segments' time at
/// their batch), and a note naming those that do not, rather than dropping them unseen.
struct BatchTraces<'g, 't> {
    same: Vec<&'g GpuTrace<'t>>,
    not_used: String,
}

impl<'g, 't> BatchTraces<'g, 't> {
    fn of(gpu_traces: &'g [GpuTrace<'t>], batch: u32, modal: &[String]) -> Self {
        let (same, other): (Vec<&GpuTrace>, Vec<&GpuTrace>) = gpu_traces
            .iter()
            .filter(|g| g.batch != batch)
            .partition(|g| modal_sequence(&g.analysis).0 == modal);
        let not_used = if other.is_empty() {
            String::new()
        } else {
            let files: Vec<&str> = other.iter().map(|g| g.analysis.file).collect();
            format!(
                "; not from {} (its steps run another program)",
                files.join(", ")
            )
        };
        BatchTraces { same, not_used }
    }

    /// Item `j`'s median duration at the traced `batch` (`us`) and at each batch trace's,
    /// where there is more than the one, with a note for the item's source.
    fn us_by_batch(
        &self,
        (n_items, j): (usize, usize),
        batch: u32,
        us: f64,
    ) -> (Option<BTreeMap<u32, f64>>, String) {
        let mut by_batch = BTreeMap::from([(batch, us)]);
        for g in &self.same {
            let at = item_spans(std::iter::once(&g.analysis), n_items, j);
            if let Some(us) = median(&at.iter().map(|(a, s)| a.range_us(*s)).collect::<Vec<_>>()) {
                by_batch.insert(g.batch, round3(us));
            }
        }
        if by_batch.len() == 1 {
            return (None, self.not_used.clone());
        }
        let from: Vec<String> = self
            .same
            .iter()
            .map(|g| format!("{} at batch {}", g.analysis.file, g.batch))
            .collect();
        let note = format!(
            "; us_by_batch: the same at batch {batch} and, from --gpu-trace, {}{}",
            from.join(", "),
            self.not_used
        );
        (Some(by_batch), note)
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
    let n_items = modal.len();
    let mut program = Vec::new();
    if d.foreign {
        program = cx.base.program.clone();
    }
    let batch_traces = BatchTraces::of(gpu_traces, batch, &modal);
    for (j, name) in modal.iter().enumerate().filter(|_| !d.foreign) {
        let spans = item_spans(traced.iter().map(|t| &t.analysis), n_items, j);
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
                us_by_batch: None,
                ops,
                launches: None,
                source: format!(
                    "{from}: median {ops} top-level cpu_ops inside `{name}` over {n} steps"
                ),
            },
            None => {
                let (us_by_batch, by_batch_note) =
                    batch_traces.us_by_batch((n_items, j), batch, round3(host));
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
            us_by_batch: match &item {
                Item::Host { us_by_batch, .. } => us_by_batch.clone(),
                _ => None,
            },
            recorded_us: recorded,
        });
        program.push(item);
    }
    d.modal = modal;
    Ok(program)
}
