//! One prep plan per shape: the device buffers, the launches prepared once, and the arms.
//! The arms share every buffer and kernel; they differ only in how lengths reach the kernels
//! (a host read and a host-built list, or device tensors only), how a host read brings them
//! over (pageable, pinned or mapped: the reading arms run the very same launches), and how
//! the kernels are launched (eagerly, or as one replay of a captured graph).
//!
//! The plan (this file) owns the buffers and runs the arms: reads, the host-built list,
//! eager issue, capture and replay, poison and download. What it launches, and the argument
//! blocks those launches carry, are built once in `launches`.

mod launches;

use super::family::{page_grid_y, PageRule, Shape};
use super::inputs::HostInputs;
use super::lengths::DeviceLengths;
use crate::axes::Arm;
use crate::axes::ReadPath;
use crate::gpu::nvtx::Range;
use crate::gpu::StepSource;
use crate::gpu::{capture_graph, ensure_not_capturing, Gpu, HostReader, Launch};
use crate::gpu::{DeviceBuffer, Event, Graph, StreamHandle};
use anyhow::{Context, Result};
use launches::{
    fused_launch, issue_all, poison_launches, ptr, staged_launches, ArgBlocks, COL_LIMIT_ARG,
    PAGE_LAUNCH,
};
use std::time::{Duration, Instant};

/// An arm made ready to run: warmed up, and for graph arms captured.
pub struct Prepared {
    pub arm: Arm,
    graph: Option<Graph>,
}

pub struct PrepPlan<'g> {
    gpu: &'g Gpu,
    pub shape: Shape,
    lengths: &'g DeviceLengths<'g>,
    /// Where the reading arms' host-built `[block] * bs` list lands.
    host_block: DeviceBuffer<i32>,
    outputs: Vec<DeviceBuffer<i32>>,
    /// Inputs only the kernels read, and eager-device's device-side column count; kept
    /// alive for the launches' pointers.
    _inputs: Vec<DeviceBuffer<i32>>,
    /// eager-device's kernels: the eager page rule with the column count found on the device.
    eager_device_launches: Vec<Launch>,
    /// The reading arms' kernels (eager-sync, eager-pinned, eager-mapped: one set, whatever
    /// the read path): the eager page rule sized by the host read, the block list.
    sync_launches: Vec<Launch>,
    /// graph's kernels: the graph page rule, device tensors only.
    graph_launches: Vec<Launch>,
    /// graph-upload's kernels: the graph page rule, the block list from `host_block`.
    upload_launches: Vec<Launch>,
    fused: Launch,
    poison: Vec<Launch>,
    /// What the last host read brought over: the live requests' `seq_lens` (the eager path
    /// never pads).
    host_lens: Vec<i32>,
    host_list: Vec<i32>,
    /// One reader per [`ReadPath`], made on its first read (outside any capture).
    readers: [Option<HostReader>; ReadPath::ALL.len()],
    /// Host time blocked in the reading arms' reads since `take_blocked` last ran.
    blocked: Duration,
    /// When the last host read began and ended (for a trace's "blocked in read" lane).
    last_read: Option<(Instant, Instant)>,
    /// An event a reading arm records right before its kernels launch, once the host read
    /// has returned and the list is copied: device time spans start there, so the time the GPU
    /// waits for the host to read, build lists and copy is not counted as prep work.
    launch_start: Option<Event>,
}

impl<'g> PrepPlan<'g> {
    /// A plan over `inputs` (all but the lengths, which `lengths` holds on the device).
    pub fn new(
        gpu: &'g Gpu,
        shape: Shape,
        inputs: &HostInputs,
        lengths: &'g DeviceLengths<'g>,
    ) -> Result<Self> {
        if lengths.live_bs() != shape.batch_size as usize {
            anyhow::bail!(
                "the lengths hold {} requests but the {} plan has {}",
                lengths.live_bs(),
                shape.family,
                shape.batch_size
            );
        }
        let padded = shape.padded_bs as usize;
        let seq_lens = lengths.seq_lens_ptr();
        let req_pool_indices = gpu.upload(&inputs.req_pool_indices)?;
        let req_to_token = gpu.upload(&inputs.req_to_token)?;
        let out_cache_loc = gpu.upload(&inputs.out_cache_loc)?;
        let full_to_swa = gpu.upload(&inputs.full_to_swa)?;
        let swa_valid_from = gpu.upload(&inputs.swa_valid_from)?;
        let eager_cols = gpu.alloc::<i32>(1)?;
        let host_block = gpu.alloc::<i32>(padded)?;
        let specs = shape.outputs();
        let outputs = specs
            .iter()
            .map(|o| gpu.alloc::<i32>(o.len()))
            .collect::<Result<Vec<_>>>()?;

        let blocks = ArgBlocks {
            gpu,
            shape: &shape,
            seq_lens,
            req_pool_indices: &req_pool_indices,
            req_to_token: &req_to_token,
            out_cache_loc: &out_cache_loc,
            full_to_swa: &full_to_swa,
            swa_valid_from: &swa_valid_from,
            outputs: outputs.iter().map(|b| ptr(b, gpu)).collect(),
            specs,
        };
        let block_list = ptr(&host_block, gpu);
        let staged = |arm, host_block_ptr, eager_cols_ptr| {
            let args = blocks.args(host_block_ptr, eager_cols_ptr, PageRule::of(arm));
            staged_launches(gpu, &shape, arm, args)
        };
        let eager_device_launches = staged(Arm::EagerDevice, 0, ptr(&eager_cols, gpu))?;
        let sync_launches = staged(Arm::EagerSync, block_list, 0)?;
        let graph_launches = staged(Arm::Graph, 0, 0)?;
        let upload_launches = staged(Arm::GraphUpload, block_list, 0)?;
        let fused = fused_launch(gpu, &shape, blocks.args(0, 0, PageRule::Graph))?;
        let poison = poison_launches(gpu, shape.family, &outputs)?;

        Ok(Self {
            gpu,
            shape,
            lengths,
            host_block,
            outputs,
            _inputs: vec![
                req_pool_indices,
                req_to_token,
                out_cache_loc,
                full_to_swa,
                swa_valid_from,
                eager_cols,
            ],
            eager_device_launches,
            sync_launches,
            graph_launches,
            upload_launches,
            fused,
            poison,
            host_lens: vec![0; shape.batch_size as usize],
            host_list: Vec::with_capacity(padded),
            readers: [None, None, None],
            blocked: Duration::ZERO,
            last_read: None,
            launch_start: None,
        })
    }

    fn stream(&self) -> StreamHandle<'_> {
        self.gpu.cu_stream()
    }

    /// A reading arm's host inputs: read the live `seq_lens` to the host by `path`
    /// (eager-sync's `.tolist()`, eager-pinned's pinned copy, eager-mapped's mapped store;
    /// the eager path never pads), build `[block] * bs` and the max length there, copy the
    /// list back, and size the page-table columns and grid by that max. Returns when the read
    /// is back and the copy issued.
    pub fn read_host_lengths(&mut self, path: ReadPath) -> Result<()> {
        let reader = match &mut self.readers[path.index()] {
            Some(reader) => reader,
            slot => {
                // Making a reader loads a module, which a capture cannot hold: the guard
                // first, so a capture is refused here as in every read.
                ensure_not_capturing(&self.gpu.stream, &HostReader::operation(path))?;
                let src = self.lengths.seq_lens_ptr();
                slot.insert(HostReader::new(self.gpu, path, src, self.host_lens.len())?)
            }
        };
        let range = Range::push(path.range());
        let (read_start, read_end) = reader
            .read(&mut self.host_lens)
            .with_context(|| format!("reading seq_lens to the host ({path})"))?;
        drop(range);
        self.blocked += read_end - read_start;
        self.last_read = Some((read_start, read_end));
        let col_limit = self
            .shape
            .family
            .host_col_limit(&self.host_lens, self.shape.block);
        self.copy_block_list(self.shape.batch_size as usize)?;
        let cols = col_limit.min(self.shape.page_width() as u32);
        let page = &mut self.sync_launches[PAGE_LAUNCH];
        page.set_arg(COL_LIMIT_ARG, cols as i32);
        page.grid.1 = page_grid_y(page.grid.0, cols, self.gpu.info.sm_count);
        Ok(())
    }

    /// What the last host read brought over: the live requests' `seq_lens`.
    pub fn host_lengths(&self) -> &[i32] {
        &self.host_lens
    }

    /// The constant `[block] * bs` graph-upload copies up before each replay, for the
    /// padded batch (see `copy_block_list`).
    pub fn copy_host_list(&mut self) -> Result<()> {
        self.copy_block_list(self.shape.padded_bs as usize)
    }

    /// Builds `[block] * n` on the host and copies it up from pageable memory, as
    /// `torch.tensor([block] * bs, device=...)` does: eager-sync's list for the live batch,
    /// graph-upload's for the padded one.
    fn copy_block_list(&mut self, n: usize) -> Result<()> {
        ensure_not_capturing(&self.gpu.stream, "copying the host-built block list up")?;
        self.host_list.clear();
        self.host_list.resize(n, self.shape.block as i32);
        // host_block holds padded_bs >= n elements; a pageable copy is staged before the call
        // returns, so host_list may change afterwards.
        self.host_block
            .write_from_host(&self.host_list)
            .context("copying the host-built block list to the device")
    }

    /// The kernels `arm` launches each step (eagerly, or captured into its graph).
    fn kernels(&self, arm: Arm) -> &[Launch] {
        match arm {
            Arm::EagerSync | Arm::EagerPinned | Arm::EagerMapped => &self.sync_launches,
            Arm::EagerDevice => &self.eager_device_launches,
            Arm::Graph => &self.graph_launches,
            Arm::GraphUpload => &self.upload_launches,
            Arm::Fused => std::slice::from_ref(&self.fused),
        }
    }

    /// How many kernels `arm` launches eagerly.
    pub fn kernel_count(&self, arm: Arm) -> usize {
        self.kernels(arm).len()
    }

    /// Launches `arm`'s kernel `index` (eager arms: a framework issues them one op at a
    /// time, with host work between). A reading arm's must follow `read_host_lengths`.
    pub fn issue_kernel(&self, arm: Arm, index: usize) -> Result<()> {
        self.kernels(arm)[index].issue(self.stream())
    }

    /// Issues `arm`'s launches eagerly, with its host inputs first: how eager arms run and
    /// graph arms warm up.
    fn issue_eagerly(&mut self, arm: Arm) -> Result<()> {
        match arm.read_path() {
            Some(path) => self.read_host_lengths(path)?,
            None if arm == Arm::GraphUpload => self.copy_host_list()?,
            None => {}
        }
        if let Some(event) = self.launch_start.as_ref().filter(|_| arm.reads_host()) {
            event
                .record(&self.gpu.stream)
                .context("recording the launch-start event")?;
        }
        issue_all(self.kernels(arm), self.stream())
    }

    /// Warms `arm` up (modules loaded, every kernel run once) and captures it if it is a
    /// graph arm. A failed capture is an error, never a fallback to eager launches.
    pub fn prepare(&mut self, arm: Arm) -> Result<Prepared> {
        self.issue_eagerly(arm)?;
        self.gpu
            .sync()
            .with_context(|| format!("warming up the {arm} arm"))?;
        let graph = if arm.uses_graph() {
            Some(self.capture(arm)?)
        } else {
            None
        };
        Ok(Prepared { arm, graph })
    }

    /// Captures `arm`'s prep into a graph. For a reading arm this must fail: its host read
    /// cannot live in a graph (the mapped read's store kernel could, and the host would then
    /// poll for a flag nothing writes), and the capture guard says so.
    pub fn capture(&mut self, arm: Arm) -> Result<Graph> {
        let stream = self.gpu.stream.clone();
        let what = format!("the {} prep of {}", arm, self.shape.family);
        // graph-upload's copy is host work before each replay, never part of the graph.
        capture_graph(&stream, &what, || match arm {
            Arm::GraphUpload => issue_all(self.kernels(arm), self.stream()),
            _ => self.issue_eagerly(arm),
        })
    }

    /// Replays a graph arm's graph (graph-upload: without its copy, see `copy_host_list`).
    pub fn replay(&self, prepared: &Prepared) -> Result<()> {
        let graph = prepared
            .graph
            .as_ref()
            .with_context(|| format!("the {} arm has no graph to replay", prepared.arm))?;
        graph.launch().context("replaying the prep graph")
    }

    /// Issues one step's prep the way `prepared.arm` does it.
    pub fn issue(&mut self, prepared: &Prepared) -> Result<()> {
        match prepared.arm {
            Arm::GraphUpload => {
                self.copy_host_list()?;
                self.replay(prepared)
            }
            arm if arm.uses_graph() => self.replay(prepared),
            arm => self.issue_eagerly(arm),
        }
    }

    /// Fills every output with the poison on the stream, so the cells the next prep does
    /// not write show (a check of a prep inside a running step).
    pub fn poison(&self) -> Result<()> {
        issue_all(&self.poison, self.stream())
    }

    /// One checked step: every output filled with the poison (so cells the arm does not
    /// write show), `prepared`'s prep issued, waited for and its outputs downloaded.
    pub fn poisoned_step(&mut self, prepared: &Prepared) -> Result<Vec<Vec<i32>>> {
        issue_all(&self.poison, self.stream())?;
        self.issue(prepared)?;
        self.gpu
            .sync()
            .with_context(|| format!("{} {}", self.shape.family, prepared.arm))?;
        self.download_outputs()
    }

    /// Issues one step's prep with `start` recorded on the stream right before its kernels
    /// launch: for a reading arm after the host read, the host-built list and its copy, for
    /// the other arms just before the launch or replay. Device time from `start` to an event
    /// recorded after the call is the prep's own span on the GPU.
    pub fn issue_marked(&mut self, prepared: &Prepared, start: &Event) -> Result<()> {
        if !prepared.arm.reads_host() {
            start.record(&self.gpu.stream)?;
            return self.issue(prepared);
        }
        self.launch_start = Some(start.clone());
        let issued = self.issue(prepared);
        self.launch_start = None;
        issued
    }

    /// The last host read's (start, end), once.
    pub fn take_last_read(&mut self) -> Option<(Instant, Instant)> {
        self.last_read.take()
    }

    /// Host time blocked in the reading arms' reads since the last call.
    pub fn take_blocked(&mut self) -> Duration {
        std::mem::take(&mut self.blocked)
    }

    pub fn download_outputs(&self) -> Result<Vec<Vec<i32>>> {
        let names = self.shape.outputs();
        self.outputs
            .iter()
            .zip(names)
            .map(|(b, spec)| self.gpu.download(spec.name, b))
            .collect()
    }
}

/// A plan and a prepared arm: one prep per step, for the measuring harness.
pub struct ArmSteps<'p, 'g> {
    pub plan: &'p mut PrepPlan<'g>,
    pub prepared: Prepared,
}

impl StepSource for ArmSteps<'_, '_> {
    fn issue_step(&mut self) -> Result<()> {
        self.plan.issue(&self.prepared)
    }

    fn issue_step_marked(&mut self, _gpu: &Gpu, start: &Event) -> Result<()> {
        self.plan.issue_marked(&self.prepared, start)
    }

    fn take_blocked(&mut self) -> Duration {
        self.plan.take_blocked()
    }
}
