//! What a `steps` run says about itself in env.json's notes: how its ranks ran (emulated or
//! real, the topology), the step model (models, acceptance, link, timer) and the host program
//! in one line. Text only, built once before the first cell.

use super::config::StepsConfig;
use crate::axes::Drafter;
use crate::gpu::Gpu;
use crate::harness::run_output::emulation_notes;
use crate::harness::topology;
use crate::model::host_profile::{HostProfile, Item};
use crate::model::memory::Deployment;
use crate::model::profile::{ForwardModel, COLLECTIVE_LATENCY_SOURCE};
use crate::results::env::STEP_MODEL_NOTE;
use crate::runs::rank_world::RankWorld;
use anyhow::Result;

/// The program in one line: `scheduler 50us > draft prep > ...`; a `draft_passes` group as
/// `draft passes [decode prep > ...]`.
pub(super) fn program_line(host: &HostProfile, items: &[Item]) -> String {
    items
        .iter()
        .map(|item| match item {
            Item::Host {
                name,
                us,
                us_by_batch: Some(by_batch),
                ops,
                ..
            } => {
                let at = |v: f64| host.host_item_us(v, *ops);
                let lo = by_batch.values().copied().fold(*us, f64::min);
                let hi = by_batch.values().copied().fold(*us, f64::max);
                format!("{name} {:.0}-{:.0}us by batch", at(lo), at(hi))
            }
            Item::Host { name, us, ops, .. } => {
                format!("{name} {:.0}us", host.host_item_us(*us, *ops))
            }
            Item::DraftPasses { items } => {
                format!("{} [{}]", item.label(), program_line(host, items))
            }
            other => other.label().to_string(),
        })
        .collect::<Vec<_>>()
        .join(" > ")
}

/// The run's acceptance at the blocks its accept model sees: the block sizes for DSpark,
/// N − 1 drafted tokens at block N for EAGLE (so said).
pub(super) fn acceptance_note(config: &StepsConfig) -> String {
    let drafted: Vec<u32> = (config.block_sizes.iter())
        .map(|&b| config.drafter.drafted(b))
        .collect();
    let line = config.acceptance.describe(&drafted);
    match config.drafter {
        Drafter::Dspark => line,
        Drafter::Eagle => {
            format!("{line}, `block` there being the N − 1 tokens EAGLE drafts at --block-sizes N")
        }
    }
}

pub(crate) fn model_name(m: &ForwardModel) -> String {
    match m {
        ForwardModel::Profile(p) => p.name.clone(),
        ForwardModel::FixedUs(us) => format!("fixed {us} us"),
    }
}

/// How the run's ranks ran: the emulation notes of layouts wider than the GPUs it had, a real
/// rank's place, collectives and topology, and any read skew.
pub(super) fn rank_notes(
    config: &StepsConfig,
    deployment: &Deployment,
    world: &RankWorld,
    gpu: &Gpu,
) -> Vec<String> {
    let ranks = world.size() as u32;
    let how = format!(
        "one rank ran on one GPU, collectives are busy-waits sized by their bytes at {} GB/s",
        config.link_gb_s
    );
    let mut notes = emulation_notes(&deployment.layouts(), ranks, gpu.info.device_count, &how);
    if let Some(nccl) = &world.nccl {
        // A fixed-time forward (--forward-us) has no collectives: its ranks never meet
        // inside a step, and the note must not say they do.
        let collectives = if matches!(config.target, ForwardModel::FixedUs(_)) {
            format!("the forwards are fixed busy-waits (--forward-us) with no collectives, so the ranks meet only at the cell barriers; NCCL {nccl} is loaded")
        } else {
            format!(
                "the forwards' collectives are NCCL calls captured in their graphs, through {nccl}"
            )
        };
        notes.push(format!(
            "real ranks: rank {} of {ranks} on GPU {}, its own process, host loop and stream; \
             {collectives}",
            world.rank(),
            gpu.info.ordinal
        ));
        let topology = topology::describe(&gpu.info.pci_bus_id)
            .unwrap_or_else(|e| format!("topology unknown ({e})"));
        notes.push(format!(
            "rank {} GPU {}: {topology}",
            world.rank(),
            gpu.info.ordinal
        ));
    }
    notes.extend(config.read_skew.describe());
    notes
}

/// The step model (models, acceptance, link, collective latency and `timer_line`, what
/// times the timeline pass), the host profile with its program in one line, the read paths'
/// costs and the deployment.
pub(super) fn model_notes(
    config: &StepsConfig,
    deployment: &Deployment,
    timer_line: &str,
) -> Result<Vec<String>> {
    let latency = match config.collective_latency_us {
        Some(v) => format!("{v} us per collective"),
        None => format!("per-collective latency {COLLECTIVE_LATENCY_SOURCE}"),
    };
    let mut notes = vec![format!(
        "{STEP_MODEL_NOTE} target {}, draft {}, {}, link {} GB/s, {latency}; {timer_line}",
        model_name(&config.target),
        model_name(&config.draft),
        acceptance_note(config),
        config.link_gb_s
    )];
    notes.push(format!(
        "{}; drafter {}: program: {}",
        config.host.describe(),
        config.drafter,
        program_line(&config.host, config.host.program_of(config.drafter)?)
    ));
    notes.extend(config.host.read_paths_note(&config.arms));
    notes.push(deployment.note());
    Ok(notes)
}
