//! The program: the annotation sequence every trace's steps share, host segments pooled.

use super::super::analysis::Analysis;
use super::super::trace::Span;
use super::{
    item_kind, median, median_count, modal_sequence, round3, Context, Derivation, ProgramRow,
    Traced,
};
use crate::model::host_profile::{Item, GPU_ITEMS_IN_ORDER};
use anyhow::{bail, Result};

/// The program: the annotation sequence most steps of the first trace share, which every
/// trace must share; host segments pooled over all of them.
pub(super) fn program(traced: &[Traced], cx: &Context, d: &mut Derivation) -> Result<Vec<Item>> {
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
