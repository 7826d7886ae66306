//! The decode-step model on the GPU: the host program of a [`HostProfile`] (scheduler work,
//! draft metadata prep (the arm under test), draft forward, host work between phases,
//! verify prep, verify forward, accept; under `--drafter eagle` the draft passes' DSA decode
//! preps and forwards, the verify, the DSA draft-extend prep and forward, see
//! [`HostProfile::step_items`]), run for real with the host allowed one step ahead of the
//! GPU, as an overlap scheduler does. Host segments are busy-waits, launches and
//! reads are real: whatever a read exposes shows on the GPU timeline by itself.
//!
//! Each cell runs twice:
//! * a clean pass, one CUDA event per step (the one the one-step-ahead rule waits on, so it
//!   costs nothing extra): step wall times and completions on the device clock give ITL and
//!   throughput;
//! * a timeline pass timed by `--timer` (see [`crate::harness::timer`]): GPU busy intervals
//!   give forward occupancy and the host-bound gap, and for the traced cell the Perfetto
//!   trace. With CUDA events (ten a step, a few µs of host time) a prep phase is marked from
//!   its first launch (for eager-sync: after the host read, the list and its copy) to its
//!   last kernel's end, so for eager arms the gaps between their own launches fall inside
//!   it; with CUPTI every kernel and copy is its own interval. Occupancy is reported per step (1 - gap /
//!   step wall time), so it has a median and an interval.
//!
//! A process runs one rank. Alone, a layout wider than one GPU is emulated (the collective
//! is a busy-wait sized by the bytes it would move). As a worker of a world
//! ([`crate::runs::ranks`] starts one per GPU), the rank runs this same loop on its own GPU
//! and stream, the forward's collectives are real NCCL calls captured into the forward's
//! graph, and every decision that could differ between ranks is agreed ([`RankWorld`]).

use crate::axes::Arm;
use crate::axes::Drafter;
use crate::axes::Family;
use crate::axes::Layout;
use crate::axes::ReadPath;
use crate::gpu::nccl::Comm;
use crate::gpu::nvtx::{self, Range};
use crate::gpu::{capture_graph, Gpu, GpuChoice, KernelModule, Launch};
use crate::harness::nvml::CellTelemetry;
use crate::harness::pin::{pin_current_thread, CpuPin};
use crate::harness::rows::CellId;
use crate::harness::run_output::{
    arm_cells, emulation_notes, existing_rows, needs_measuring, progress, Recorder,
};
use crate::harness::timer::{ProgramItems, TimelineTimer, TimerKind, TimerSource};
use crate::harness::topology;
use crate::model::collectives::CollectiveBuffers;
use crate::model::forward::StreamSource;
use crate::model::host_profile::{
    family_of, first_launching_op, phases_of, prep_arm, ForwardOf, HostProfile, Item, Phase,
};
use crate::model::memory::{Deployment, GpuMemory, NotDeployable};
use crate::model::metrics::{StepRecord, Timeline};
use crate::model::post_wait::AfterWait;
use crate::model::profile::{
    collective_latency_us, CollectivePlan, ForwardModel, ForwardSpec, Link,
    COLLECTIVE_LATENCY_SOURCE,
};
use crate::model::program::{prep_sequence, span_start, OpLaunch, PrepStep};
use crate::model::stop::StepRounds;
use crate::model::trace::{HostLane, TraceBuilder};
use crate::prep::accept::Acceptance;
use crate::prep::family::PageRule;
use crate::prep::inputs::{generate, HostInputs, LengthRange};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{PrepPlan, Prepared};
use crate::prep::reference::expected;
use crate::prep::Shape;
use crate::results::csv::{
    completed_cells, host_scale_column, Row, KIND_STEP, STEP_RATIO_VS_EAGER_SYNC,
};
use crate::results::env::STEP_MODEL_NOTE;
use crate::runs::check::Tally;
use crate::runs::rank_world::{RankRole, RankWorld, RanksMode, ReadDelay, ReadSkew};
use crate::stats::summary::{quantile, Estimate};
use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaGraph};
use std::ffi::CString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Steps per throughput sample.
const THROUGHPUT_WINDOW: usize = 10;
/// Idle reads (and uploads) timed to learn what the harness's own cost before the profile's
/// top-up.
const IDLE_READS: usize = 21;

#[derive(Debug, Clone)]
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
    /// Per-collective latency; `None` takes [`collective_latency_us`]'s cited default.
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

/// A cell of the grid: layout, batch size, block size.
pub type Cell = (Layout, u32, u32);

#[derive(Debug, Clone, PartialEq)]
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

/// One forward stand-in: stream the bytes, then the collectives: a busy-wait alone, the
/// real collectives in a world (the stream and collectives captured as one graph, as an
/// engine's captured forward).
enum Forward {
    Emulated(Vec<Launch>),
    Real(CudaGraph),
}

impl Forward {
    fn emulated(gpu: &Gpu, spec: ForwardSpec, source: &StreamSource) -> Result<Self> {
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
    fn real(
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
                // SAFETY: the stream source outlives the cell; spin takes only a duration.
                unsafe { launch.issue(gpu.cu_stream())? };
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

    fn issue(&self, gpu: &Gpu) -> Result<()> {
        match self {
            Forward::Emulated(launches) => {
                for launch in launches {
                    // SAFETY: the stream source outlives the cell; spin takes only a duration.
                    unsafe { launch.issue(gpu.cu_stream())? };
                }
                Ok(())
            }
            Forward::Real(graph) => graph.launch().context("replaying the forward's graph"),
        }
    }
}

/// Spins the host until `until` (host work a framework would be doing).
/// Busy until `until`; returns the clock reading that found it passed, so a caller that
/// needs the end time does not read the clock again in the timed loop.
fn spin_until(until: Instant) -> Instant {
    loop {
        let now = Instant::now();
        if now >= until {
            return now;
        }
        std::hint::spin_loop();
    }
}

fn us(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) * 1e-6)
}

/// One host span of the timeline pass, for the trace: kept as it happens (no formatting or
/// allocation between steps, which the pass times) and named once the pass is over.
struct HostSpan {
    lane: HostLane,
    what: SpanOf,
    start: Instant,
    end: Instant,
}

/// What a host span was: a program item (by index) or the host read inside a prep.
#[derive(Clone, Copy)]
enum SpanOf {
    Item(usize),
    Read,
}

/// The timeline pass's timer and the step it is timing.
struct Marks<'t> {
    timer: &'t mut dyn TimelineTimer,
    step: usize,
}

impl Marks<'_> {
    /// Where the GPU span of program item `item` begins.
    fn gpu_start(&mut self, item: usize) -> Result<()> {
        self.timer.gpu_start(self.step, item)
    }
}

/// The host costs of a cell's program, as durations, converted once outside the timed loops.
struct HostCosts {
    profile: HostProfile,
    /// One framework op of a host item or of accept.
    op: Duration,
    /// One graph replay's launch (forwards, graph arms).
    graph_launch: Duration,
    /// What the profile's read costs beyond the harness's own idle read, per read path.
    read_top_up: [Duration; ReadPath::ALL.len()],
    /// What the profile's upload costs beyond the harness's own idle upload.
    upload_top_up: Duration,
    /// Extra host time after each read on this rank (`--read-skew-us`, jitter).
    read_skew: ReadDelay,
    /// What the calls after a wait cost extra (the profile's `post_wait`), and how far the
    /// host program is past its last wait.
    after_wait: AfterWait,
}

impl HostCosts {
    /// `profile`'s costs, with the harness's own idle read and upload costs taken off the
    /// profile's (the step loop tops its real read and copy up to them).
    fn new(
        profile: HostProfile,
        idle_reads: [Duration; ReadPath::ALL.len()],
        idle_upload: Duration,
        read_skew: ReadDelay,
    ) -> HostCosts {
        HostCosts {
            read_skew,
            after_wait: AfterWait::new(profile.post_wait.as_ref().map(|p| p.value.clone())),
            op: us(profile.op_us.value),
            graph_launch: us(profile.graph_launch_us.value),
            read_top_up: ReadPath::ALL.map(|path| {
                let cost = profile.read_cost(path).map_or(0.0, |c| c.value);
                us(cost).saturating_sub(idle_reads[path.index()])
            }),
            upload_top_up: us(profile.upload_us.value).saturating_sub(idle_upload),
            profile,
        }
    }
}

/// One framework op: launch `kernel` (if any), then let the host be busy until the op's
/// host cost `op`, and what it costs extra so soon after a wait, has passed since it began.
fn framework_op(
    kernel: Option<&Launch>,
    stream: sys::CUstream,
    op: Duration,
    after_wait: &mut AfterWait,
) -> Result<()> {
    let start = Instant::now();
    if let Some(kernel) = kernel {
        // SAFETY: framework kernels take only a duration, or nothing.
        unsafe { kernel.issue(stream)? };
    }
    framework_call(start, op, after_wait);
    Ok(())
}

/// A framework call that began at `t0` and costs `cost` on the host: busy until then, plus
/// what it costs extra after a wait.
fn framework_call(t0: Instant, cost: Duration, after_wait: &mut AfterWait) {
    let extra = after_wait.call(t0);
    after_wait.ended(spin_until(t0 + cost + extra));
}

/// Launches what prep step `step` launches: a framework kernel or one of the plan's own.
/// Host time, reads, copies and replays are the caller's.
fn launch_of(
    step: PrepStep,
    kernel: &Launch,
    plan: &PrepPlan,
    arm: Arm,
    stream: sys::CUstream,
) -> Result<()> {
    match step {
        PrepStep::Op(Some(OpLaunch::Empty)) => {
            // SAFETY: a framework kernel takes only a duration, or nothing.
            unsafe { kernel.issue(stream) }
        }
        PrepStep::Op(Some(OpLaunch::Kernel(k))) | PrepStep::Kernel(k) => plan.issue_kernel(arm, k),
        _ => Ok(()),
    }
}

/// What a prep needs to run its sequence.
struct PrepRun<'a, 'g> {
    gpu: &'g Gpu,
    plan: &'a mut PrepPlan<'g>,
    /// The kernel each framework op of this prep launches.
    kernel: &'a Launch,
    costs: &'a mut HostCosts,
    /// Host time blocked in syncing uploads (graph-upload).
    upload_blocked: &'a mut Duration,
}

impl PrepRun<'_, '_> {
    /// Runs `prep` (see [`prep_sequence`]), telling `begin`'s timer where the GPU span of
    /// program item `item` starts.
    fn run(
        &mut self,
        arm: Arm,
        prep: &PrepProgram,
        prepared: &StepPrep,
        (item, mut begin): (usize, Option<&mut Marks>),
        log: &mut Option<&mut Vec<HostSpan>>,
    ) -> Result<()> {
        let stream = self.gpu.cu_stream();
        for (i, &step) in prep.steps.iter().enumerate() {
            if let (true, Some(marks)) = (i == prep.span_start, begin.as_deref_mut()) {
                marks.gpu_start(item)?;
            }
            let t0 = Instant::now();
            match step {
                PrepStep::Read => {
                    let path = arm
                        .read_path()
                        .with_context(|| format!("the {arm} arm reads nothing to the host"))?;
                    self.plan.read_host_lengths(path)?;
                    let read = self.plan.take_last_read();
                    if let (Some(log), Some((r0, r1))) = (log.as_deref_mut(), read) {
                        log.push(HostSpan {
                            lane: HostLane::BlockedInRead,
                            what: SpanOf::Read,
                            start: r0,
                            end: r1,
                        });
                    }
                    let end = spin_until(
                        Instant::now()
                            + self.costs.read_top_up[path.index()]
                            + self.costs.read_skew.next(),
                    );
                    let (r0, r1) = read.context("the read recorded no span")?;
                    self.costs.after_wait.waited(r1 - r0, end);
                }
                PrepStep::Op(_) => {
                    launch_of(step, self.kernel, self.plan, arm, stream)?;
                    framework_call(t0, prep.op, &mut self.costs.after_wait);
                }
                PrepStep::Kernel(_) => launch_of(step, self.kernel, self.plan, arm, stream)?,
                PrepStep::Upload => {
                    // A call (it pays for a wait before it), and with a syncing copy a wait
                    // (the calls after it pay for that): as calibrate reads a trace's.
                    let extra = self.costs.after_wait.call(t0);
                    self.plan.copy_host_list()?;
                    let blocked = if self.costs.profile.upload_syncs.value {
                        // torch.tensor(list, device=...) copies with memcpy_and_sync.
                        self.gpu.sync()?;
                        let blocked = t0.elapsed();
                        *self.upload_blocked += blocked;
                        Some(blocked)
                    } else {
                        None
                    };
                    // The profile's cost is the upload's with the GPU idle: the host pays it
                    // on top of any wait, as after a read.
                    let end = spin_until(Instant::now() + self.costs.upload_top_up + extra);
                    match blocked {
                        Some(blocked) => self.costs.after_wait.waited(blocked, end),
                        None => self.costs.after_wait.ended(end),
                    }
                }
                PrepStep::Replay => {
                    match &prepared.framework {
                        Some(graph) => graph.launch().context("replaying the prep graph")?,
                        None => self.plan.replay(&prepared.plan)?,
                    }
                    framework_call(t0, self.costs.graph_launch, &mut self.costs.after_wait);
                }
            }
        }
        if let (true, Some(marks)) = (prep.span_start == prep.steps.len(), begin) {
            marks.gpu_start(item)?;
        }
        Ok(())
    }
}

/// The NVTX range of one item of the host program: a prep names its arm, as the CSV's rows do
/// (`draft prep (eager-sync)`); every other item its label (`draft forward`, `sampling`).
fn item_range(item: &Item, arm: Arm) -> CString {
    nvtx::name(&match item.prep_phase() {
        Some(_) => format!("{} ({arm})", item.label()),
        None => item.label().to_string(),
    })
}

/// One prep of an arm made ready: the plan's own (warmed up, captured), and for graph arms
/// under a framework profile the graph of the framework's whole captured prep.
struct StepPrep {
    plan: Prepared,
    framework: Option<CudaGraph>,
}

/// A kernel a framework op launches: a spin of the profile's `kernel_us`, or an empty kernel.
fn framework_kernel(gpu: &Gpu, us: f64) -> Result<Launch> {
    let launch = if us > 0.0 {
        Launch::spin(gpu, us)?
    } else {
        let func = gpu.function(KernelModule::Floor, "empty_kernel")?;
        Launch::new("empty_kernel", func, (1, 1, 1), (1, 1, 1))
    };
    // Loaded and run once here: a module cannot load inside a capture.
    // SAFETY: both kernels take only a duration, or nothing.
    unsafe { launch.issue(gpu.cu_stream())? };
    gpu.sync()?;
    Ok(launch)
}

/// One prep of a cell's step: its plan, and the kernel its framework ops launch.
struct CellPrep<'g> {
    phase: Phase,
    plan: PrepPlan<'g>,
    kernel: Launch,
}

/// Everything one (layout, batch, block) needs, shared by its arms.
struct StepCell<'g> {
    gpu: &'g Gpu,
    lengths: &'g DeviceLengths<'g>,
    /// The step's preps, in [`phases_of`]'s order for the run's drafter; every arm's
    /// programs and prepared graphs are indexed the same way.
    preps: Vec<CellPrep<'g>>,
    /// The step's forwards (DSpark: draft and verify; EAGLE: draft pass, verify, extend).
    forwards: Vec<(ForwardOf, Forward)>,
    /// What the real forwards' graphs read and write; kept as long as the graphs.
    _collective_buffers: Option<CollectiveBuffers>,
    /// The kernel framework ops of host items and accept launch.
    host_kernel: Launch,
    costs: HostCosts,
    upload_blocked: Duration,
    initial: Vec<i32>,
    /// One step's items at this cell's block size ([`HostProfile::step_items`]) of the
    /// profile in `costs` (the programs an arm gets are built from them).
    items: Vec<Item>,
    drafter: Drafter,
}

struct Pass {
    /// Completion of every step on the device clock, µs from the anchor.
    done_us: Vec<f64>,
    tokens: Vec<Vec<u32>>,
    blocked_us: Vec<f64>,
}

/// One prep's host actions with what the timed loop needs of them, worked out once.
struct PrepProgram {
    /// The arm this prep runs as ([`prep_arm`]).
    arm: Arm,
    steps: Vec<PrepStep>,
    /// Host time of one of its framework ops.
    op: Duration,
    /// The step before which its GPU span begins (see [`span_start`]).
    span_start: usize,
}

/// An arm's prep programs, built once per cell.
struct ArmProgram {
    arm: Arm,
    /// One per prep of the cell, in the cell's order.
    preps: Vec<PrepProgram>,
    /// The step's items (the cell's).
    items: Vec<Item>,
    /// NVTX range names: the step's, and each item's of the host program, in order.
    step_range: CString,
    item_ranges: Vec<CString>,
}

/// One arm made ready for a cell: its programs and each prep's prepared plan.
type ReadyArm = (ArmProgram, Vec<StepPrep>);

impl StepCell<'_> {
    fn program(&self, arm: Arm) -> ArmProgram {
        let profile = &self.costs.profile;
        let preps = self
            .preps
            .iter()
            .map(|p| {
                let arm = prep_arm(self.drafter, p.phase, arm);
                let steps =
                    prep_sequence(arm, profile.arm_ops(p.phase, arm), p.plan.kernel_count(arm));
                PrepProgram {
                    arm,
                    op: us(profile.prep_op_us(p.phase, arm)),
                    span_start: span_start(&steps, profile.upload_syncs.value),
                    steps,
                }
            })
            .collect();
        ArmProgram {
            arm,
            preps,
            items: self.items.clone(),
            step_range: nvtx::name(&format!("step ({arm})")),
            item_ranges: self
                .items
                .iter()
                .map(|item| item_range(item, arm))
                .collect(),
        }
    }

    /// Where `phase`'s prep is in [`StepCell::preps`].
    fn prep_index(&self, phase: Phase) -> Result<usize> {
        self.preps
            .iter()
            .position(|p| p.phase == phase)
            .with_context(|| format!("the step has no {phase:?} prep"))
    }

    /// Every prep of `arm` made ready, in the cell's order.
    fn prepare_all(&mut self, arm: Arm) -> Result<Vec<StepPrep>> {
        (0..self.preps.len())
            .map(|k| {
                let phase = self.preps[k].phase;
                self.prepare(k, arm)
                    .with_context(|| format!("preparing the {} metadata", family_of(phase)))
            })
            .collect()
    }

    /// Makes `arm`'s prep for `phase` ready. A graph arm whose eager-device counterpart
    /// issues framework kernels captures those too, in the order the eager prep launches
    /// them, so a replay does the GPU work the framework's captured prep does.
    fn prepare(&mut self, index: usize, arm: Arm) -> Result<StepPrep> {
        let CellPrep {
            phase,
            plan,
            kernel,
        } = &mut self.preps[index];
        let arm = prep_arm(self.drafter, *phase, arm);
        let prepared = plan.prepare(arm)?;
        let eager = self.costs.profile.arm_ops(*phase, Arm::EagerDevice);
        if !matches!(arm, Arm::Graph | Arm::GraphUpload) || eager.launches == 0 {
            return Ok(StepPrep {
                plan: prepared,
                framework: None,
            });
        }
        let seq = prep_sequence(Arm::EagerDevice, eager, plan.kernel_count(arm));
        let what = format!(
            "the {arm} prep of {} with its framework kernels",
            plan.shape.family
        );
        let stream = self.gpu.cu_stream();
        let graph = capture_graph(&self.gpu.stream, &what, || {
            seq.iter()
                .try_for_each(|&step| launch_of(step, kernel, plan, arm, stream))
        })?;
        Ok(StepPrep {
            plan: prepared,
            framework: Some(graph),
        })
    }

    /// Median host times of the harness's own reads by each of `paths` and of its syncing
    /// upload, with the GPU idle: what the profile's read costs (`read_us`, ...) and
    /// `upload_us` top up. A path not in `paths` gets zero.
    fn idle_host_costs(
        &mut self,
        paths: &[ReadPath],
    ) -> Result<([Duration; ReadPath::ALL.len()], Duration)> {
        let mut reads: [Vec<Duration>; ReadPath::ALL.len()] = Default::default();
        let mut uploads = Vec::with_capacity(IDLE_READS);
        let first = &mut self.preps[0].plan;
        for _ in 0..IDLE_READS {
            for &path in paths {
                self.gpu.sync()?;
                let t0 = Instant::now();
                first.read_host_lengths(path)?;
                reads[path.index()].push(t0.elapsed());
            }
            self.gpu.sync()?;
            let t0 = Instant::now();
            first.copy_host_list()?;
            self.gpu.sync()?;
            uploads.push(t0.elapsed());
        }
        first.take_blocked();
        first.take_last_read();
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v.get(v.len() / 2).copied().unwrap_or_default()
        };
        Ok((reads.map(median), median(uploads)))
    }

    /// Runs one step of `program`: every item of the host program in order. With `marks`,
    /// the timer sees each item enter, its GPU span start, and leave; with `log`, host spans
    /// are kept.
    fn run_step(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        mut marks: Option<Marks>,
        mut log: Option<&mut Vec<HostSpan>>,
        mut check: Option<&mut StepCheck>,
    ) -> Result<()> {
        let (op, launch) = (self.costs.op, self.costs.graph_launch);
        let stream = self.gpu.cu_stream();
        let _step_range = Range::push(&program.step_range);
        for ((index, item), range) in program.items.iter().enumerate().zip(&program.item_ranges) {
            let item_range = Range::push(range);
            let t0 = Instant::now();
            if let Some(m) = marks.as_mut() {
                m.timer.enter(m.step, index)?;
            }
            match item {
                Item::Host {
                    us: busy,
                    ops,
                    launches,
                    ..
                } => {
                    spin_until(t0 + us(*busy));
                    let first_launch = first_launching_op(*ops, *launches);
                    for k in 0..*ops {
                        let kernel = (k >= first_launch).then_some(&self.host_kernel);
                        framework_op(kernel, stream, op, &mut self.costs.after_wait)?;
                    }
                }
                _ if item.prep_phase().is_some() => {
                    let phase = item.prep_phase().expect("a prep item");
                    let k = self.prep_index(phase)?;
                    let CellPrep { plan, kernel, .. } = &mut self.preps[k];
                    if check.is_some() {
                        plan.poison()?;
                    }
                    PrepRun {
                        gpu: self.gpu,
                        plan,
                        kernel,
                        costs: &mut self.costs,
                        upload_blocked: &mut self.upload_blocked,
                    }
                    .run(
                        program.preps[k].arm,
                        &program.preps[k],
                        &prepared[k],
                        (index, marks.as_mut()),
                        &mut log,
                    )?;
                    if let Some(check) = check.as_deref_mut() {
                        check.prep(self.gpu, &self.preps[k].plan, program.preps[k].arm, k)?;
                    }
                }
                _ if item.forward_of().is_some() => {
                    if let Some(m) = marks.as_mut() {
                        m.gpu_start(index)?;
                    }
                    let of = item.forward_of().expect("a forward item");
                    let (_, forward) = self
                        .forwards
                        .iter()
                        .find(|(f, _)| *f == of)
                        .with_context(|| format!("the step has no {of:?} forward"))?;
                    forward.issue(self.gpu)?;
                    framework_call(t0, launch, &mut self.costs.after_wait);
                }
                Item::Accept { ops } => {
                    if let Some(m) = marks.as_mut() {
                        m.gpu_start(index)?;
                    }
                    // The first op launches the accept kernel itself.
                    self.lengths.issue_accept()?;
                    framework_call(t0, op, &mut self.costs.after_wait);
                    for _ in 1..*ops {
                        framework_op(
                            Some(&self.host_kernel),
                            stream,
                            op,
                            &mut self.costs.after_wait,
                        )?;
                    }
                }
                // step_items leaves no group and every other item is matched above.
                _ => anyhow::bail!("a step cannot run a `{}` item", item.label()),
            }
            if let Some(m) = marks.as_mut() {
                m.timer.leave(m.step, index)?;
            }
            drop(item_range);
            if let Some(log) = log.as_deref_mut() {
                let lane = if item.is_gpu() {
                    HostLane::Launch
                } else {
                    HostLane::Scheduler
                };
                log.push(HostSpan {
                    lane,
                    what: SpanOf::Item(index),
                    start: t0,
                    end: Instant::now(),
                });
            }
        }
        Ok(())
    }

    /// Host time blocked in reads and syncing uploads since the last call.
    fn take_blocked(&mut self) -> Duration {
        let preps: Duration = self.preps.iter_mut().map(|p| p.plan.take_blocked()).sum();
        preps + std::mem::take(&mut self.upload_blocked)
    }

    /// Accepted tokens of the next `steps` steps, from the CPU mirror of the accept kernel.
    fn tokens(&self, steps: usize) -> Vec<Vec<u32>> {
        let mut lens = self.initial.clone();
        let mut counters = vec![0u32; lens.len()];
        let live = self.lengths.live_bs();
        (0..steps)
            .map(|_| {
                self.lengths
                    .accept_model
                    .apply(&mut lens, &mut counters, live)
                    .into_iter()
                    .map(|a| a as u32)
                    .collect()
            })
            .collect()
    }

    /// The clean pass: `total` steps, one event each.
    fn clean_pass(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        total: usize,
    ) -> Result<Pass> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        // Reads made while preparing the arms are not this pass's.
        self.take_blocked();
        let anchor = self.gpu.timing_events(1)?.remove(0);
        let done = self.gpu.timing_events(total)?;
        let mut blocked_us = Vec::with_capacity(total);
        anchor.record(&self.gpu.stream)?;
        for k in 0..total {
            if k >= 2 {
                done[k - 2].synchronize()?;
            }
            self.run_step(program, prepared, None, None, None)?;
            done[k].record(&self.gpu.stream)?;
            blocked_us.push(self.take_blocked().as_secs_f64() * 1e6);
        }
        self.gpu.sync()?;
        let done_us = done
            .iter()
            .map(|e| Ok(anchor.elapsed_ms(e)? as f64 * 1e3))
            .collect::<Result<_>>()?;
        Ok(Pass {
            done_us,
            tokens: self.tokens(total),
            blocked_us,
        })
    }

    /// `steps` steps of `program` with every prep's outputs poisoned before it and checked
    /// against the CPU reference after it, at the lengths the CPU mirror of accept gives that
    /// step; the device's lengths are checked against the mirror before each step. Slow
    /// (a sync and a download per prep): for tests, not timing.
    fn checked_pass(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        steps: usize,
        inputs: &HostInputs,
    ) -> Result<StepCheck> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        let live = self.lengths.live_bs();
        let mut check = StepCheck {
            arm: program.arm,
            families: self.preps.iter().map(|p| p.plan.shape.family).collect(),
            tallies: vec![Tally::default(); self.preps.len()],
            lengths: Tally::default(),
            preps_checked: 0,
            accepted: 0,
            step: 0,
            inputs: inputs.clone(),
        };
        let mut counters = vec![0u32; live];
        for step in 0..steps {
            check.step = step as u64;
            let held = self.lengths.download_seq_lens()?;
            check.lengths.lengths(
                check.step,
                "seq_lens before the step",
                &held[..live],
                &check.inputs.seq_lens[..live],
            );
            self.run_step(program, prepared, None, None, Some(&mut check))?;
            self.gpu.sync()?;
            let accepted =
                self.lengths
                    .accept_model
                    .apply(&mut check.inputs.seq_lens, &mut counters, live);
            check.accepted += accepted.iter().map(|&a| a as u64).sum::<u64>();
        }
        Ok(check)
    }

    /// The timeline pass: `timer` sees every item of every step; host spans and the
    /// optional trace; `steps` steps, or fewer (3 at least) once `cap` has passed.
    #[allow(clippy::too_many_arguments)] // the pass's inputs; all are used once
    fn timeline_pass(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        timer: &mut dyn TimelineTimer,
        steps: usize,
        cap: Duration,
        mut trace: Option<&mut TraceBuilder>,
    ) -> Result<Timeline> {
        self.lengths.reset()?;
        self.gpu.sync()?;
        timer.start(steps)?;
        let host0 = Instant::now();
        let host_us = |t: Instant| t.saturating_duration_since(host0).as_secs_f64() * 1e6;
        // Room for every item and a few reads a step, so the traced pass does not grow it.
        let per_step = program.items.len() + 4;
        let mut spans = Vec::with_capacity(if trace.is_some() { steps * per_step } else { 0 });
        // Where each step's host spans end in `spans`.
        let mut step_ends = Vec::with_capacity(steps);
        let mut ran = 0;
        for k in 0..steps {
            if k >= 3 && host0.elapsed() > cap {
                break;
            }
            if k >= 2 {
                timer.wait_step(k - 2)?;
            }
            ran = k + 1;
            let marks = Marks {
                timer: &mut *timer,
                step: k,
            };
            let log = trace.is_some().then_some(&mut spans);
            self.run_step(program, prepared, Some(marks), log, None)?;
            self.take_blocked();
            step_ends.push(spans.len());
        }
        self.gpu.sync()?;
        let steps = ran;
        let program_items = &program.items;
        if let Some(t) = trace.as_deref_mut() {
            let path = program.arm.read_path().unwrap_or(ReadPath::Pageable);
            let read = path.range().to_string_lossy();
            let mut from = 0;
            for (k, &end) in step_ends.iter().enumerate() {
                for s in &spans[from..end] {
                    let name = match s.what {
                        SpanOf::Item(i) => program_items[i].label(),
                        SpanOf::Read => &read,
                    };
                    let (start, len) = (host_us(s.start), (s.end - s.start).as_secs_f64() * 1e6);
                    t.host_span(s.lane, name, start, len, k as u64)?;
                }
                from = end;
            }
        }
        let measured = timer.finish(steps)?;
        let tokens = self.tokens(steps);
        let mut records = Vec::with_capacity(steps);
        let mut previous_done = 0.0;
        for (k, step) in measured.into_iter().enumerate() {
            let mut busy = Vec::with_capacity(step.spans.len());
            for span in &step.spans {
                busy.push((span.start_us, span.end_us));
                if let Some(t) = trace.as_deref_mut() {
                    t.gpu_span(
                        span.stream,
                        program_items[span.item].label(),
                        span.op.as_deref(),
                        span.start_us,
                        (span.end_us - span.start_us).max(0.0),
                        k as u64,
                    )?;
                }
            }
            records.push(StepRecord {
                host_start_us: previous_done,
                host_end_us: step.done_us,
                gpu_busy: busy,
                tokens_per_request: tokens[k].clone(),
            });
            previous_done = step.done_us;
        }
        // The first step has no previous completion on this clock: leave it out.
        Timeline::new(records.split_off(1))
    }
}

/// What a checked pass ([`check_steps`]) found for one arm of one cell.
pub struct StepCheck {
    pub arm: Arm,
    /// The step's preps' families, in the step's order.
    pub families: Vec<Family>,
    /// Per prep: cells compared with the CPU reference, mismatches, the first.
    pub tallies: Vec<Tally>,
    /// The device's lengths before each step against the CPU mirror of accept.
    pub lengths: Tally,
    /// Preps checked (every prep item of every step).
    pub preps_checked: usize,
    /// Tokens accept added to the lengths over the pass, summed over the live requests.
    pub accepted: u64,
    step: u64,
    /// The inputs at the step being checked: the mirror's lengths.
    inputs: HostInputs,
}

impl StepCheck {
    /// Checks prep `k` of the step, just issued as `arm`: its outputs against the reference
    /// at this step's lengths, and a reading arm's host read against those lengths.
    fn prep(&mut self, gpu: &Gpu, plan: &PrepPlan, arm: Arm, k: usize) -> Result<()> {
        gpu.sync()
            .with_context(|| format!("{} {arm} in step {}", plan.shape.family, self.step))?;
        let got = plan.download_outputs()?;
        let want = expected(&plan.shape, &self.inputs, PageRule::of(arm));
        self.tallies[k].outputs(self.step, &got, &want);
        if arm.reads_host() {
            let live = plan.shape.batch_size as usize;
            self.tallies[k].lengths(
                self.step,
                "seq_lens read to the host",
                plan.host_lengths(),
                &self.inputs.seq_lens[..live],
            );
        }
        self.preps_checked += 1;
        Ok(())
    }

    /// No cell of any prep, nor any length, differed.
    pub fn passed(&self) -> bool {
        self.lengths.mismatches == 0 && self.tallies.iter().all(|t| t.mismatches == 0)
    }
}

/// Runs `steps` steps of `config`'s program for every arm of every (layout, batch, block)
/// cell on one GPU (alone: a wider layout is one rank, its collectives busy-waits), every
/// prep inside each step poisoned, then checked bit for bit against the CPU reference at
/// the lengths accept has advanced to (`StepCell::checked_pass`). What `check` proves for
/// one prep at a time, here inside the step that interleaves them with forwards, host
/// segments and accept. The host profile's costs run as in `steps`.
pub fn check_steps(config: &StepsConfig, steps: usize) -> Result<Vec<(Cell, StepCheck)>> {
    let gpu = config.gpu.open()?;
    let world = RankWorld::alone();
    let stream_source = StreamSource::new(&gpu, 1 << 24)?;
    let maker = CellMaker {
        gpu: &gpu,
        config,
        world: &world,
        stream_source: &stream_source,
    };
    let mut results = Vec::new();
    for &layout in &config.layouts {
        for &bs in &config.batch_sizes {
            let rank_bs = layout.rank_batch(bs);
            for &block in &config.block_sizes {
                let (shapes, inputs, lengths) = maker.inputs(rank_bs, block)?;
                let mut cell = maker.cell((layout, rank_bs, block), shapes, &inputs, &lengths)?;
                for &arm in &config.arms {
                    let what = || format!("{layout} bs {bs} block {block} {arm}");
                    let prepared = cell.prepare_all(arm).with_context(what)?;
                    let program = cell.program(arm);
                    let check = cell
                        .checked_pass(&program, &prepared, steps, &inputs)
                        .with_context(what)?;
                    results.push(((layout, bs, block), check));
                }
            }
        }
    }
    Ok(results)
}

/// Throughput samples over windows of steps: tokens of the window over its wall time, times
/// `scale`, the batch's requests per request this rank holds (bs / rank batch: 1 for tp
/// layouts; for dep, the ranks holding the rest of the batch, which run in parallel).
pub fn window_throughput(
    done_us: &[f64],
    tokens: &[Vec<u32>],
    window: usize,
    scale: f64,
) -> Vec<f64> {
    (1..done_us.len())
        .step_by(window)
        .filter(|&s| s + window <= done_us.len())
        .map(|s| {
            let toks: u64 = tokens[s..s + window]
                .iter()
                .flatten()
                .map(|&a| a as u64)
                .sum();
            toks as f64 * scale / ((done_us[s + window - 1] - done_us[s - 1]) * 1e-6)
        })
        .collect()
}

pub struct StepsOutcome {
    pub rows: Vec<Row>,
    pub seconds: f64,
}

/// What the run measures on GPUs of `memory`: the cells they hold ([`Deployment::plan`];
/// every cell under `--forward-us`, which models no weights), and the cell `--trace` writes.
pub fn plan(
    config: &StepsConfig,
    context: u32,
    memory: GpuMemory,
) -> Result<(Deployment, Option<Cell>)> {
    let deployment = match (&config.target, &config.draft) {
        (ForwardModel::Profile(target), ForwardModel::Profile(draft)) => Deployment::plan(
            target,
            draft,
            &config.layouts,
            config.layouts_named,
            &config.batch_sizes,
            context,
            memory,
        )?,
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
        Some(e) => Err(NotDeployable {
            advice: format!(
                "--trace-cell {layout}:{bs}:{block} names a cell left out: trace one that fits"
            ),
            ..e.clone()
        }
        .into()),
        None => Ok(Some((layout, bs, block))),
    }
}

pub fn run(config: &StepsConfig) -> Result<StepsOutcome> {
    let started = Instant::now();
    config.host.require_read_costs(&config.arms)?;
    let read_paths: Vec<ReadPath> = config.arms.iter().filter_map(|a| a.read_path()).collect();
    let (csv_path, mut rows) = existing_rows(&config.out, config.resume)?;
    let context = config.context();
    // A planned memory is checked before the GPU opens, the device's once it is open: either
    // way before any measurement.
    let planned = config
        .gpu_memory
        .map(|memory| plan(config, context, memory))
        .transpose()?;
    let gpu = config.gpu.open()?;
    let world = match &config.rank {
        Some(role) => RankWorld::join(role, &gpu)?,
        None => RankWorld::alone(),
    };
    let ranks = world.size() as u32;
    let (deployment, trace_cell) = match planned {
        Some(p) => p,
        None => plan(config, context, GpuMemory::device(gpu.info.memory_bytes))?,
    };
    let done = completed_cells(&rows);
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
        let topology = topology::describe(gpu.info.ordinal as u32)
            .unwrap_or_else(|e| format!("topology unknown ({e})"));
        notes.push(format!(
            "rank {} GPU {}: {topology}",
            world.rank(),
            gpu.info.ordinal
        ));
    }
    notes.extend(config.read_skew.describe());
    // Held to the end of the run: dropping it unpins the thread.
    let pinned = pin_current_thread(config.cpu)?;
    notes.push(pinned.note());
    let latency = match config.collective_latency_us {
        Some(v) => format!("{v} us per collective"),
        None => format!("per-collective latency {COLLECTIVE_LATENCY_SOURCE}"),
    };
    // Each cell gets its own timer: an EAGLE step's items depend on the block size.
    let (timers, timer_line) = TimerSource::open(config.timer, config.cupti_lib.as_deref())?;
    notes.push(format!(
        "{STEP_MODEL_NOTE} target {}, draft {}, {}, link {} GB/s, {latency}; {timer_line}",
        model_name(&config.target),
        model_name(&config.draft),
        acceptance_note(config),
        config.link_gb_s
    ));
    notes.push(format!(
        "{}; drafter {}: program: {}",
        config.host.describe(),
        config.drafter,
        program_line(&config.host, config.host.program_of(config.drafter)?)
    ));
    notes.extend(config.host.read_paths_note(&config.arms));
    notes.push(deployment.note());
    let recorder = Recorder::start(
        &gpu,
        &config.out,
        csv_path,
        config.resume,
        notes,
        config.settings(),
    )?;
    let stream_source = StreamSource::new(&gpu, 1 << 30)?;
    let maker = CellMaker {
        gpu: &gpu,
        config,
        world: &world,
        stream_source: &stream_source,
    };
    let total_cells = config.host_scales.len()
        * deployment.cells.iter().map(|(_, b)| b.len()).sum::<usize>()
        * config.block_sizes.len()
        * config.arms.len();
    let progress = progress(total_cells, "cells");
    for &(layout, ref batch_sizes) in &deployment.cells {
        for &bs in batch_sizes {
            let rank_bs = layout.rank_batch(bs);
            for &block in &config.block_sizes {
                // One group per (layout, batch, block): every host scale's cells, measured whole.
                let groups: Vec<(f64, Vec<CellId>)> = config
                    .host_scales
                    .iter()
                    .map(|&scale| {
                        let family = config.drafter.step_family();
                        let cells =
                            arm_cells(KIND_STEP, family, &config.arms, bs, block, layout, ranks)
                                .into_iter()
                                .map(|c| CellId {
                                    host_scale: host_scale_column(scale),
                                    ..c
                                })
                                .collect();
                        (scale, cells)
                    })
                    .collect();
                let all: Vec<CellId> = groups.iter().flat_map(|(_, c)| c.clone()).collect();
                if !needs_measuring(&all, &done, &mut rows, &progress) {
                    continue;
                }
                // Ranks begin each cell together.
                world.barrier(&gpu)?;
                let (shapes, inputs, lengths) = maker.inputs(rank_bs, block)?;
                let mut cell = maker.cell((layout, rank_bs, block), shapes, &inputs, &lengths)?;
                let mut timer = timers.timer(
                    &gpu,
                    ProgramItems {
                        gpu: cell.items.iter().map(Item::is_gpu).collect(),
                    },
                )?;
                let (idle_reads, idle_upload) = cell.idle_host_costs(&read_paths)?;
                for (scale, cells) in &groups {
                    cell.costs = HostCosts::new(
                        config.host.scaled(*scale)?,
                        idle_reads,
                        idle_upload,
                        config.read_skew.on(world.rank(), config.seed),
                    );
                    // The scaled profile's items: its host segments at this scale.
                    cell.items = cell.costs.profile.step_items(config.drafter, block)?;
                    let traced = *scale == config.host_scales[0];
                    let labels: Vec<String> = cells.iter().map(CellId::label).collect();
                    progress.set_message(format!("{layout} bs {bs} block {block} x{scale}"));
                    // Every arm made ready once; the rounds then run them back to back.
                    let mut ready = Vec::with_capacity(config.arms.len());
                    for (&arm, label) in config.arms.iter().zip(&labels) {
                        let prepared = cell.prepare_all(arm).with_context(|| label.clone())?;
                        ready.push((cell.program(arm), prepared));
                    }
                    let ready: Vec<ReadyArm> = ready;
                    let batch_scale = bs as f64 / rank_bs as f64;
                    let mut measured: Vec<ArmRounds> =
                        config.arms.iter().map(|_| ArmRounds::default()).collect();
                    let cell_start = Instant::now();
                    // The slowest rank's mean step time of the last round (this rank's alone).
                    let mut step_us = None;
                    let stop = loop {
                        let round = measured[0].step_us.len();
                        let (warmup, steps) =
                            config
                                .rounds
                                .pass_length(ready.len(), step_us, config.warmup_steps);
                        // Rotated each round, so no arm always runs first after another.
                        for i in (0..ready.len()).map(|i| (i + round) % ready.len()) {
                            recorder.set_cell(&labels[i]);
                            let (program, prepared) = &ready[i];
                            let clean = cell.clean_pass(program, prepared, warmup + steps)?;
                            measured[i].push(&clean, warmup, batch_scale)?;
                        }
                        let step_times: Vec<&[Vec<f64>]> =
                            measured.iter().map(|m| m.step_us.as_slice()).collect();
                        let here = config.rounds.check(
                            &config.arms,
                            &step_times,
                            round + 1,
                            cell_start.elapsed(),
                        );
                        let agreed =
                            world.agree_round(&gpu, here, last_round_step_us(&measured))?;
                        step_us = agreed.1;
                        if let Some(why) = agreed.0 {
                            break why.as_str();
                        }
                    };
                    let (timeline_steps, timeline_cap) = world.timeline_length(
                        &gpu,
                        config.timeline_steps,
                        config.timeline_cap,
                        step_us,
                    )?;
                    let eager_sync = config.arms.iter().position(|&a| a == Arm::EagerSync);
                    for (i, ((&arm, id), (program, prepared))) in
                        config.arms.iter().zip(cells).zip(&ready).enumerate()
                    {
                        recorder.set_cell(&labels[i]);
                        let request = config
                            .trace
                            .as_ref()
                            .filter(|_| trace_cell == Some((layout, bs, block)))
                            .filter(|_| traced);
                        let mut trace = request.map(|_| TraceBuilder::new());
                        if let Some(t) = trace.as_mut() {
                            t.set_arm(arm.name());
                            t.set_title(&format!(
                                "{arm}: {layout} bs {bs} block {block}, host profile `{}` x{scale}",
                                config.host.name
                            ));
                        }
                        // Ranks start each timeline together, so their traces line up.
                        world.barrier(&gpu)?;
                        let timeline = cell.timeline_pass(
                            program,
                            prepared,
                            timer.as_mut(),
                            timeline_steps,
                            timeline_cap,
                            trace.as_mut(),
                        )?;
                        if let (Some(t), Some(request)) = (trace, request) {
                            t.write(&request.path_for(arm))?;
                        }
                        let against_sync = eager_sync.filter(|&s| s != i).map(|s| &measured[s]);
                        let telemetry = recorder.cell_telemetry(&labels[i]);
                        rows.extend(step_rows(
                            id,
                            arm,
                            &measured[i],
                            stop,
                            against_sync,
                            &timeline,
                            telemetry.as_ref(),
                        ));
                    }
                    progress.inc(config.arms.len() as u64);
                    if progress.is_hidden() {
                        // No terminal (a log file): the same progress, one line per cell.
                        eprintln!(
                            "{}/{} cells in {:.0} s, ETA {:.0} s ({layout} bs {bs} block {block} x{scale}: {stop})",
                            progress.position(),
                            progress.length().unwrap_or(0),
                            progress.elapsed().as_secs_f64(),
                            progress.eta().as_secs_f64()
                        );
                    }
                }
                recorder.save(&rows)?;
            }
        }
    }
    progress.finish_and_clear();
    recorder.finish()?;
    Ok(StepsOutcome {
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// What makes a run's cells: the GPU, the run's settings, its world and the forwards'
/// stream source.
struct CellMaker<'a, 'g> {
    gpu: &'g Gpu,
    config: &'a StepsConfig,
    world: &'a RankWorld,
    stream_source: &'a StreamSource,
}

impl<'g> CellMaker<'_, 'g> {
    /// A cell's prep shapes (in [`phases_of`]'s order), the host inputs every prep of its step
    /// reads, and the lengths on the device with the accept model that advances them.
    fn inputs(
        &self,
        rank_bs: u32,
        block: u32,
    ) -> Result<(Vec<Shape>, HostInputs, DeviceLengths<'g>)> {
        let (gpu, config) = (self.gpu, self.config);
        let shapes = phases_of(config.drafter)
            .iter()
            .map(|&p| Shape::new(family_of(p), rank_bs, block, config.max_context))
            .collect::<Result<Vec<_>>>()?;
        // Every prep of the step reads the same inputs and lengths.
        let inputs: HostInputs = generate(
            &shapes[0],
            config.seed ^ ((rank_bs as u64) << 32 | block as u64),
            config.seq_lens,
            false,
        );
        let accept = config.acceptance.model(
            config.drafter.drafted(block),
            config.seed as u32,
            shapes[0].max_seq_len(),
        )?;
        let lengths = DeviceLengths::new(gpu, &inputs.seq_lens, rank_bs as usize, accept)?;
        Ok((shapes, inputs, lengths))
    }

    /// The cell (layout, rank batch, block) of `config`'s step: its preps over `inputs` and
    /// `lengths`, its forwards (real collectives in a world, busy-waits alone), the kernels its
    /// framework ops launch, at the profile's costs until the run sets each host scale's.
    fn cell(
        &self,
        (layout, rank_bs, block): (Layout, u32, u32),
        shapes: Vec<Shape>,
        inputs: &HostInputs,
        lengths: &'g DeviceLengths<'g>,
    ) -> Result<StepCell<'g>> {
        let (gpu, config, world, stream_source) =
            (self.gpu, self.config, self.world, self.stream_source);
        let link = Link {
            gb_s: config.link_gb_s,
            latency_us: config
                .collective_latency_us
                .unwrap_or_else(|| collective_latency_us(layout)),
        };
        let items = config.host.step_items(config.drafter, block)?;
        // Each forward of the step, once: its model and tokens per request.
        let mut kinds: Vec<ForwardOf> = Vec::new();
        for of in items.iter().filter_map(Item::forward_of) {
            if !kinds.contains(&of) {
                kinds.push(of);
            }
        }
        let forward_kinds: Vec<(ForwardOf, &ForwardModel, u32)> = kinds
            .into_iter()
            .map(|of| match forward_size(config.drafter, of, block) {
                (ModelOf::Draft, tokens) => (of, &config.draft, tokens),
                (ModelOf::Target, tokens) => (of, &config.target, tokens),
            })
            .collect();
        let context = config.context();
        let spec = |m: &ForwardModel, tokens| m.spec(layout, rank_bs, context, tokens, link);
        let forward_plans: Vec<Option<CollectivePlan>> = forward_kinds
            .iter()
            .map(|&(_, m, tokens)| m.collective_plan(layout, rank_bs, tokens))
            .collect();
        let plans: Vec<CollectivePlan> = forward_plans.iter().flatten().copied().collect();
        let mut buffers = match world.comm() {
            Some(_) => Some(CollectiveBuffers::new(gpu, &plans, world.size())?),
            None => None,
        };
        let mut forwards = Vec::with_capacity(forward_kinds.len());
        for (&(of, model, tokens), plan) in forward_kinds.iter().zip(forward_plans) {
            let what = format!("the {} forward", forward_label(of));
            let forward = match (world.comm(), buffers.as_mut()) {
                (Some(comm), Some(buffers)) => {
                    let collectives = plan.as_ref().map(|p| (comm, buffers, p));
                    Forward::real(gpu, spec(model, tokens)?, stream_source, collectives, &what)?
                }
                _ => Forward::emulated(gpu, spec(model, tokens)?, stream_source)?,
            };
            forwards.push((of, forward));
        }
        let mut preps = Vec::with_capacity(shapes.len());
        for (phase, shape) in phases_of(config.drafter).into_iter().zip(shapes) {
            preps.push(CellPrep {
                phase,
                plan: PrepPlan::new(gpu, shape, inputs, lengths)?,
                kernel: framework_kernel(gpu, config.host.prep_kernel_us(phase, rank_bs))?,
            });
        }
        Ok(StepCell {
            gpu,
            lengths,
            preps,
            forwards,
            _collective_buffers: buffers,
            host_kernel: framework_kernel(gpu, config.host.kernel_us.value)?,
            // A run sets each host scale's costs once the idle costs are known.
            costs: HostCosts::new(
                config.host.clone(),
                [Duration::ZERO; ReadPath::ALL.len()],
                Duration::ZERO,
                ReadDelay::none(),
            ),
            upload_blocked: Duration::ZERO,
            initial: inputs.seq_lens.clone(),
            items,
            drafter: config.drafter,
        })
    }
}

/// Which model a forward runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelOf {
    Draft,
    Target,
}

/// The model and tokens per request of `drafter`'s `of` forward at block `block`: DSpark's
/// draft forward is the whole block, an EAGLE draft pass one token; the verify is the target
/// over the block (EAGLE: its N tokens); EAGLE's draft-extend is the draft model over the N
/// verified tokens (DRAFT_EXTEND_V2 processes the full padded width per request).
fn forward_size(drafter: Drafter, of: ForwardOf, block: u32) -> (ModelOf, u32) {
    match of {
        ForwardOf::Draft => (ModelOf::Draft, drafter.draft_tokens(block)),
        ForwardOf::Verify => (ModelOf::Target, block),
        ForwardOf::Extend => (ModelOf::Draft, block),
    }
}

/// The program in one line: `scheduler 50us > draft prep > ...`; a `draft_passes` group as
/// `draft passes [decode prep > ...]`.
fn program_line(host: &HostProfile, items: &[Item]) -> String {
    items
        .iter()
        .map(|item| match item {
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
fn acceptance_note(config: &StepsConfig) -> String {
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

/// A forward's name in capture errors.
fn forward_label(of: ForwardOf) -> &'static str {
    match of {
        ForwardOf::Draft => "draft",
        ForwardOf::Verify => "verify",
        ForwardOf::Extend => "draft-extend",
    }
}

pub(crate) fn model_name(m: &ForwardModel) -> String {
    match m {
        ForwardModel::Profile(p) => p.name.clone(),
        ForwardModel::FixedUs(us) => format!("fixed {us} us"),
    }
}

/// The mean step time of the arms' last round, `None` before the first: what the next
/// round's pass length is sized by.
fn last_round_step_us(measured: &[ArmRounds]) -> Option<f64> {
    let last: Vec<f64> = measured
        .iter()
        .filter_map(|m| m.step_us.last())
        .flatten()
        .copied()
        .collect();
    (!last.is_empty()).then(|| last.iter().sum::<f64>() / last.len() as f64)
}

/// One arm's clean passes of a cell, round by round, each pass's warm-up left out.
#[derive(Default)]
struct ArmRounds {
    step_us: Vec<Vec<f64>>,
    itl_us: Vec<Vec<f64>>,
    throughput_tok_s: Vec<Vec<f64>>,
    blocked_us: Vec<Vec<f64>>,
}

impl ArmRounds {
    /// Adds one round's clean pass; `batch_scale` as in [`window_throughput`].
    fn push(&mut self, clean: &Pass, warmup: usize, batch_scale: f64) -> Result<()> {
        let first = warmup.max(1);
        let measured: Vec<StepRecord> = (first..clean.done_us.len())
            .map(|k| StepRecord {
                host_start_us: clean.done_us[k - 1],
                host_end_us: clean.done_us[k],
                gpu_busy: Vec::new(),
                tokens_per_request: clean.tokens[k].clone(),
            })
            .collect();
        let steps = Timeline::new(measured).context("the clean pass")?;
        self.itl_us.push(steps.itl_samples_us());
        self.step_us.push(steps.step_wall_us());
        // A pass shorter than the window (long steps) is one window, not none.
        let window = THROUGHPUT_WINDOW.min(clean.done_us.len().saturating_sub(first));
        self.throughput_tok_s.push(window_throughput(
            &clean.done_us[first - 1..],
            &clean.tokens[first - 1..],
            window.max(1),
            batch_scale,
        ));
        self.blocked_us
            .push(clean.blocked_us[first.min(clean.blocked_us.len())..].to_vec());
        Ok(())
    }
}

/// The rows of one step cell: ITL, throughput, step time and blocked time from its rounds
/// (each the median of round medians with the interval between rounds), its step time over
/// eager-sync's paired within rounds, occupancy and gaps from the timeline pass.
fn step_rows(
    id: &CellId,
    arm: Arm,
    rounds: &ArmRounds,
    stop: &str,
    eager_sync: Option<&ArmRounds>,
    timeline: &Timeline,
    telemetry: Option<&CellTelemetry>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    rows.extend(id.rounds_row("itl_us", "us", &rounds.itl_us, stop, telemetry));
    let itl = rounds.itl_us.concat();
    if let Some(p99) = quantile(&itl, 0.99) {
        let point = Estimate {
            point: p99,
            lo: f64::NAN,
            hi: f64::NAN,
        };
        rows.push(id.estimate_row("itl_p99_us", "us", &point, itl.len() as u64, telemetry));
    }
    rows.extend(id.rounds_row("step_us", "us", &rounds.step_us, stop, telemetry));
    rows.extend(id.rounds_row(
        "throughput_tok_s",
        "tok/s",
        &rounds.throughput_tok_s,
        stop,
        telemetry,
    ));
    if arm.reads_host() || arm == Arm::GraphUpload {
        rows.extend(id.rounds_row("host_blocked_us", "us", &rounds.blocked_us, stop, telemetry));
    }
    if let Some(sync) = eager_sync {
        rows.extend(id.paired_row(
            STEP_RATIO_VS_EAGER_SYNC,
            "x",
            (&rounds.step_us, &sync.step_us),
            |arm, sync| arm / sync,
            telemetry,
        ));
    }
    let walls = timeline.step_wall_us();
    let gaps = timeline.gap_per_step_us();
    let occupancy: Vec<f64> = walls.iter().zip(&gaps).map(|(w, g)| 1.0 - g / w).collect();
    rows.extend(id.summary_row("occupancy", "ratio", &occupancy, "timeline", telemetry));
    rows.extend(id.summary_row("gap_us", "us", &gaps, "timeline", telemetry));
    rows
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

    #[test]
    fn a_round_shorter_than_the_throughput_window_still_gives_one_window() {
        // 3 warm-up and 5 measured steps, 100 µs apart, 2 requests accepting 2 tokens each.
        let pass = Pass {
            done_us: (0..8).map(|k| 100.0 * k as f64).collect(),
            tokens: vec![vec![2, 2]; 8],
            blocked_us: vec![0.0; 8],
        };
        let mut rounds = ArmRounds::default();
        rounds.push(&pass, 3, 1.0).unwrap();
        assert_eq!(rounds.step_us[0].len(), 5);
        // 5 steps x 4 tokens over 500 µs.
        assert_eq!(rounds.throughput_tok_s[0], vec![40_000.0]);
    }

    #[test]
    fn throughput_windows_count_tokens_over_their_wall_time() {
        // Steps complete every 100 µs; each of 2 requests accepts 2 tokens a step.
        let done: Vec<f64> = (0..21).map(|k| 100.0 * k as f64).collect();
        let tokens = vec![vec![2u32, 2]; 21];
        let samples = window_throughput(&done, &tokens, 10, 1.0);
        assert_eq!(samples.len(), 2);
        // 10 steps x 4 tokens over 1000 µs = 40 000 tok/s.
        assert!(
            samples.iter().all(|&s| (s - 40_000.0).abs() < 1e-6),
            "{samples:?}"
        );
        assert_eq!(
            window_throughput(&done, &tokens, 10, 4.0)[0],
            160_000.0,
            "other ranks' requests add"
        );
        assert!(
            window_throughput(&done[..5], &tokens[..5], 10, 1.0).is_empty(),
            "no partial window"
        );
    }

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
