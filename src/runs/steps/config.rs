//! What a `steps` run is asked ([`StepsConfig`], built and validated by the command line),
//! the cells of its grid, where `--trace` writes, and the plan of which cells the GPUs'
//! memory holds. Kept apart from the loop: the command line, the rank workers and the run's
//! settings read these without the GPU code. A parent of real ranks hands its workers the
//! config whole, as JSON ([`ConfigFile`]).

use crate::axes::Arm;
use crate::axes::Drafter;
use crate::axes::Layout;
use crate::exit::BadInput;
use crate::gpu::GpuChoice;
use crate::harness::pin::CpuPin;
use crate::harness::timer::TimerKind;
use crate::model::host_profile::HostProfile;
use crate::model::memory::{Deployment, GpuMemory, NotDeployable};
use crate::model::profile::ForwardModel;
use crate::model::stop::StepRounds;
use crate::prep::accept::Acceptance;
use crate::prep::inputs::LengthRange;
use crate::results::config_file::ConfigFile;
use crate::runs::rank_world::{RankRole, RanksMode, ReadSkew};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepsConfig {
    /// The GPU (a rank's: the first plus its rank) and how it is opened.
    pub gpu: GpuChoice,
    /// Where the measuring thread is pinned once the GPU is open.
    pub cpu: CpuPin,
    pub arms: Vec<Arm>,
    pub batch_sizes: Vec<u32>,
    pub block_sizes: Vec<u32>,
    pub layouts: Vec<Layout>,
    /// `--tp` named the layouts: one that fits no batch is refused rather than left out.
    pub layouts_named: bool,
    /// `--model` or `--draft-model` named a model other than the default: a grid it fits
    /// nowhere is refused rather than planned on a stand-in GPU.
    #[serde(default)]
    pub models_named: bool,
    /// `--gpu-memory-gib`: the memory per GPU to plan for instead of the device's own.
    pub gpu_memory: Option<GpuMemory>,
    pub target: ForwardModel,
    pub draft: ForwardModel,
    /// Tokens a step accepts at each block size.
    pub acceptance: Acceptance,
    /// The host program and its costs.
    pub host: HostProfile,
    /// Which step program runs (`--drafter`): DSpark's, or EAGLE's three-graph step.
    pub drafter: Drafter,
    /// What-if factors on every host cost (1 = as measured); each adds a set of cells.
    pub host_scales: Vec<f64>,
    pub link_gb_s: f64,
    /// Per-collective latency; `None` takes
    /// [`collective_latency_us`](crate::model::profile::collective_latency_us)'s cited default.
    pub collective_latency_us: Option<f64>,
    /// How a cell's clean passes run in rounds and when it stops.
    pub rounds: StepRounds,
    /// Unmeasured steps before each clean pass.
    pub warmup_steps: usize,
    /// Steps of each arm's timeline pass, unless `timeline_cap` ends it first.
    pub timeline_steps: usize,
    /// What times the timeline pass.
    pub timer: TimerKind,
    /// `--cupti-lib`: the CUPTI library to load instead of searching for one.
    pub cupti_lib: Option<PathBuf>,
    pub timeline_cap: Duration,
    pub max_context: u32,
    pub seq_lens: LengthRange,
    pub seed: u64,
    pub out: PathBuf,
    pub resume: bool,
    /// Which cell's timeline to write as a Perfetto trace, and where.
    pub trace: Option<TraceRequest>,
    /// `--ranks`: how layouts wider than one GPU run (see [`crate::runs::ranks`]).
    pub ranks: RanksMode,
    /// `--nccl-lib`: the NCCL library file, before the places searched by default.
    pub nccl_lib: Option<PathBuf>,
    /// Set in a worker process: its rank in a world of real ranks.
    pub rank: Option<RankRole>,
    /// Extra host time after each host read, on some ranks.
    pub read_skew: ReadSkew,
}

impl StepsConfig {
    /// The context length the memory plan sizes every request's KV cache by: the middle of
    /// `--seq-lens`.
    pub fn context(&self) -> u32 {
        (self.seq_lens.min + self.seq_lens.max) / 2
    }
}

/// What a parent of real ranks hands its workers (`rank-worker --settings`).
impl ConfigFile for StepsConfig {
    const COMMAND: &'static str = "steps";
}

/// A cell of the grid: layout, batch size, block size.
pub type Cell = (Layout, u32, u32);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRequest {
    /// `--trace-cell`'s layout, batch and block; `None`: the first cell the run measures.
    pub cell: Option<Cell>,
    /// The eager-sync arm's trace; other arms' go beside it with `-<arm>` before `.json`.
    pub path: PathBuf,
}

impl TraceRequest {
    pub fn path_for(&self, arm: Arm) -> PathBuf {
        if arm == Arm::EagerSync {
            return self.path.clone();
        }
        let stem = self
            .path
            .file_stem()
            .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
        self.path.with_file_name(format!("{stem}-{arm}.json"))
    }
}

/// What the run measures on GPUs of `memory`: the cells they hold ([`Deployment::plan`];
/// every cell under `--forward-us`, which models no weights), and the cell `--trace` writes.
pub fn plan(
    config: &StepsConfig,
    context: u32,
    memory: GpuMemory,
) -> Result<(Deployment, Option<Cell>)> {
    let deployment = match (&config.target, &config.draft) {
        (ForwardModel::Profile(target), ForwardModel::Profile(draft))
            if !config.models_named && !config.layouts_named =>
        {
            let (layouts, batches) = (&config.layouts, &config.batch_sizes);
            Deployment::plan_default(target, draft, layouts, batches, context, memory)
                .map_err(BadInput::from)?
        }
        (ForwardModel::Profile(target), ForwardModel::Profile(draft)) => Deployment::plan(
            target,
            draft,
            &config.layouts,
            config.layouts_named,
            &config.batch_sizes,
            context,
            memory,
        )
        .map_err(BadInput::from)?,
        _ => Deployment::unchecked(&config.layouts, &config.batch_sizes),
    };
    let traced = traced_cell(config, &deployment)?;
    Ok((deployment, traced))
}

/// The cell `--trace` writes: `--trace-cell`'s, which must be one the GPU holds, or else the
/// first cell the run measures.
fn traced_cell(config: &StepsConfig, deployment: &Deployment) -> Result<Option<Cell>> {
    let Some(trace) = &config.trace else {
        return Ok(None);
    };
    let Some((layout, bs, block)) = trace.cell else {
        let (layout, batches) = &deployment.cells[0];
        return Ok(Some((*layout, batches[0], config.block_sizes[0])));
    };
    match deployment
        .left_out
        .iter()
        .find(|e| (e.layout, e.batch_size) == (layout, bs))
    {
        Some(e) => Err(BadInput::from(NotDeployable {
            advice: format!(
                "--trace-cell {layout}:{bs}:{block} names a cell left out: trace one that fits"
            ),
            ..e.clone()
        })
        .into()),
        None => Ok(Some((layout, bs, block))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_paths_per_arm() {
        let t = TraceRequest {
            cell: Some((Layout::Tp(4), 1, 5)),
            path: PathBuf::from("out/trace.json"),
        };
        assert_eq!(t.path_for(Arm::EagerSync), PathBuf::from("out/trace.json"));
        assert_eq!(
            t.path_for(Arm::Graph),
            PathBuf::from("out/trace-graph.json")
        );
    }
}
