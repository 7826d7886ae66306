//! The step's forward stand-ins: which model each forward of a drafter's step runs over how
//! many tokens, and the forward itself (streamed bytes and busy-wait collectives alone, one
//! captured graph with real NCCL collectives in a world). The only part of a step that
//! stands in for the model's GPU work.

use crate::axes::Drafter;
use crate::gpu::nccl::Comm;
use crate::gpu::{capture_graph, Gpu, Graph, Launch};
use crate::model::forward::StreamSource;
use crate::model::host_profile::ForwardOf;
use crate::model::nccl_collectives::CollectiveBuffers;
use crate::model::profile::{CollectivePlan, ForwardSpec};
use anyhow::{Context, Result};

/// One forward stand-in: stream the bytes, then the collectives: a busy-wait alone, the
/// real collectives in a world (the stream and collectives captured as one graph, as an
/// engine's captured forward).
pub(super) enum Forward {
    Emulated(Vec<Launch>),
    Real(Graph),
}

impl Forward {
    pub(super) fn emulated(gpu: &Gpu, spec: ForwardSpec, source: &StreamSource) -> Result<Self> {
        let mut launches = Vec::new();
        if spec.stream_bytes > 0 {
            launches.push(source.launch(gpu, spec.stream_bytes)?);
        }
        if spec.spin_us > 0.0 {
            launches.push(Launch::spin(gpu, spec.spin_us)?);
        }
        Ok(Forward::Emulated(launches))
    }

    /// The stream kernel and `plan`'s collectives (or, under `--forward-us`, the spin),
    /// captured into one graph.
    pub(super) fn real(
        gpu: &Gpu,
        spec: ForwardSpec,
        source: &StreamSource,
        collectives: Option<(&Comm, &mut CollectiveBuffers, &CollectivePlan)>,
        what: &str,
    ) -> Result<Self> {
        let stream = match spec.stream_bytes {
            0 => None,
            bytes => Some(source.launch(gpu, bytes)?),
        };
        let spin = match (&collectives, spec.spin_us > 0.0) {
            (None, true) => Some(Launch::spin(gpu, spec.spin_us)?),
            _ => None,
        };
        // Modules load and NCCL connects outside the capture: one eager forward first.
        let issue = |collectives: Option<(&Comm, &mut CollectiveBuffers, &CollectivePlan)>| {
            for launch in stream.iter().chain(&spin) {
                launch.issue(gpu.cu_stream())?;
            }
            match collectives {
                Some((comm, buffers, plan)) => buffers.issue(comm, gpu, plan),
                None => Ok(()),
            }
        };
        let mut collectives = collectives;
        issue(collectives.as_mut().map(|(c, b, p)| (*c, &mut **b, *p)))?;
        gpu.sync()?;
        let graph = capture_graph(&gpu.stream, what, || issue(collectives))?;
        Ok(Forward::Real(graph))
    }

    pub(super) fn issue(&self, gpu: &Gpu) -> Result<()> {
        match self {
            Forward::Emulated(launches) => {
                for launch in launches {
                    launch.issue(gpu.cu_stream())?;
                }
                Ok(())
            }
            Forward::Real(graph) => graph.launch().context("replaying the forward's graph"),
        }
    }
}

/// Which model a forward runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ModelOf {
    Draft,
    Target,
}

/// The model and tokens per request of `drafter`'s `of` forward at block `block`: DSpark's
/// draft forward is the whole block, an EAGLE draft pass one token; the verify is the target
/// over the block (EAGLE: its N tokens); EAGLE's draft-extend is the draft model over the N
/// verified tokens (DRAFT_EXTEND_V2 processes the full padded width per request).
pub(super) fn forward_size(drafter: Drafter, of: ForwardOf, block: u32) -> (ModelOf, u32) {
    match of {
        ForwardOf::Draft => (ModelOf::Draft, drafter.draft_tokens(block)),
        ForwardOf::Verify => (ModelOf::Target, block),
        ForwardOf::Extend => (ModelOf::Draft, block),
    }
}

/// A forward's name in capture errors.
pub(super) fn forward_label(of: ForwardOf) -> &'static str {
    match of {
        ForwardOf::Draft => "draft",
        ForwardOf::Verify => "verify",
        ForwardOf::Extend => "draft-extend",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_forward_runs_its_model_over_its_tokens() {
        // EAGLE at N = 5: a draft pass is the draft model over one token, the verify the
        // target over N, the draft-extend the draft model over the N verified tokens.
        assert_eq!(
            [ForwardOf::Draft, ForwardOf::Verify, ForwardOf::Extend].map(|of| forward_size(
                Drafter::Eagle,
                of,
                5
            )),
            [
                (ModelOf::Draft, 1),
                (ModelOf::Target, 5),
                (ModelOf::Draft, 5)
            ]
        );
        // DSpark: the draft block forward is the whole block, then the target's verify.
        assert_eq!(
            [ForwardOf::Draft, ForwardOf::Verify].map(|of| forward_size(Drafter::Dspark, of, 3)),
            [(ModelOf::Draft, 3), (ModelOf::Target, 3)]
        );
    }
}
