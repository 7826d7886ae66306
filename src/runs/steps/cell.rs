//! One (layout, batch, block) cell of the step, shared by its arms: its preps, forwards and
//! framework kernels, each arm's programs made ready, the harness's idle host costs, and
//! one step of an arm's program run item by item, each prep's host actions ([`PrepStep`]s,
//! worked out once per cell) with reads and uploads topped up to the profile's costs. The
//! passes over a cell (`passes`) and the rows they give (`rows`) build on it.

use super::checked_run::StepCheck;
use super::forward::Forward;
use super::host_costs::{framework_call, framework_op, spin_until, us, HostCosts};
use super::passes::{HostSpan, Marks, SpanOf};
use crate::axes::Arm;
use crate::axes::Drafter;
use crate::axes::ReadPath;
use crate::gpu::nvtx::{self, Range};
use crate::gpu::{capture_graph, Gpu, Graph, Launch, StreamHandle};
use crate::model::host_profile::{family_of, first_launching_op, prep_arm, ForwardOf, Item, Phase};
use crate::model::nccl_collectives::CollectiveBuffers;
use crate::model::program::{prep_sequence, span_start, OpLaunch, PrepStep};
use crate::model::trace::HostLane;
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{PrepPlan, Prepared};
use crate::stats::summary::quantile;
use anyhow::{Context, Result};
use std::ffi::CString;
use std::time::{Duration, Instant};

/// Idle reads (and uploads) timed to learn what the harness's own cost before the profile's
/// top-up.
const IDLE_READS: usize = 21;

/// One prep of a cell's step: its plan, and the kernel its framework ops launch.
pub(super) struct CellPrep<'g> {
    pub(super) phase: Phase,
    pub(super) plan: PrepPlan<'g>,
    pub(super) kernel: Launch,
}

/// Everything one (layout, batch, block) needs, shared by its arms.
pub(super) struct StepCell<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) lengths: &'g DeviceLengths<'g>,
    /// The step's preps, in [`phases_of`]'s order for the run's drafter; every arm's
    /// programs and prepared graphs are indexed the same way.
    pub(super) preps: Vec<CellPrep<'g>>,
    /// The step's forwards (DSpark: draft and verify; EAGLE: draft pass, verify, extend).
    pub(super) forwards: Vec<(ForwardOf, Forward)>,
    /// What the real forwards' graphs read and write; kept as long as the graphs.
    pub(super) _collective_buffers: Option<CollectiveBuffers>,
    /// The kernel framework ops of host items and accept launch.
    pub(super) host_kernel: Launch,
    pub(super) costs: HostCosts,
    pub(super) upload_blocked: Duration,
    pub(super) initial: Vec<i32>,
    /// One step's items at this cell's block size ([`HostProfile::step_items`]) of the
    /// profile in `costs` (the programs an arm gets are built from them).
    pub(super) items: Vec<Item>,
    pub(super) drafter: Drafter,
}

/// An arm's prep programs, built once per cell.
pub(super) struct ArmProgram {
    pub(super) arm: Arm,
    /// One per prep of the cell, in the cell's order.
    pub(super) preps: Vec<PrepProgram>,
    /// The step's items (the cell's).
    pub(super) items: Vec<Item>,
    /// NVTX range names: the step's, and each item's of the host program, in order.
    pub(super) step_range: CString,
    pub(super) item_ranges: Vec<CString>,
}

/// One prep of an arm made ready: the plan's own (warmed up, captured), and for graph arms
/// under a framework profile the graph of the framework's whole captured prep.
pub(super) struct StepPrep {
    pub(super) plan: Prepared,
    pub(super) framework: Option<Graph>,
}

/// One prep's host actions with what the timed loop needs of them, worked out once.
pub(super) struct PrepProgram {
    /// The arm this prep runs as ([`prep_arm`]).
    pub(super) arm: Arm,
    pub(super) steps: Vec<PrepStep>,
    /// Host time of one of its framework ops.
    pub(super) op: Duration,
    /// The step before which its GPU span begins (see [`span_start`]).
    pub(super) span_start: usize,
}

/// Launches what prep step `step` launches: a framework kernel or one of the plan's own.
/// Host time, reads, copies and replays are the caller's.
fn launch_of(
    step: PrepStep,
    kernel: &Launch,
    plan: &PrepPlan,
    arm: Arm,
    stream: StreamHandle<'_>,
) -> Result<()> {
    match step {
        PrepStep::Op(Some(OpLaunch::Empty)) => kernel.issue(stream),
        PrepStep::Op(Some(OpLaunch::Kernel(k))) | PrepStep::Kernel(k) => plan.issue_kernel(arm, k),
        _ => Ok(()),
    }
}

/// The NVTX range of one item of the host program: a prep names its arm, as the CSV's rows do
/// (`draft prep (eager-sync)`); every other item its label (`draft forward`, `sampling`).
pub(super) fn item_range(item: &Item, arm: Arm) -> CString {
    nvtx::name(&match item.prep_phase() {
        Some(_) => format!("{} ({arm})", item.label()),
        None => item.label().to_string(),
    })
}

impl StepCell<'_> {
    pub(super) fn program(&self, arm: Arm) -> ArmProgram {
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
    pub(super) fn prep_index(&self, phase: Phase) -> Result<usize> {
        self.preps
            .iter()
            .position(|p| p.phase == phase)
            .with_context(|| format!("the step has no {phase:?} prep"))
    }

    /// Every prep of `arm` made ready, in the cell's order.
    pub(super) fn prepare_all(&mut self, arm: Arm) -> Result<Vec<StepPrep>> {
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
    pub(super) fn prepare(&mut self, index: usize, arm: Arm) -> Result<StepPrep> {
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
    pub(super) fn idle_host_costs(
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
        let median = |v: Vec<Duration>| {
            let ns: Vec<f64> = v.iter().map(|d| d.as_nanos() as f64).collect();
            quantile(&ns, 0.5).map_or(Duration::ZERO, |m| Duration::from_nanos(m.round() as u64))
        };
        Ok((reads.map(median), median(uploads)))
    }

    /// Runs one step of `program`: every item of the host program in order. With `marks`,
    /// the timer sees each item enter, its GPU span start, and leave; with `log`, host spans
    /// are kept.
    pub(super) fn run_step(
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
                    let at = (index, marks.as_mut());
                    self.run_prep(program, prepared, k, at, &mut log, check.as_deref_mut())?;
                }
                _ if item.forward_of().is_some() => {
                    if let Some(m) = marks.as_mut() {
                        m.gpu_start(index)?;
                    }
                    let of = item.forward_of().expect("a forward item");
                    self.forward(of)?.issue(self.gpu)?;
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

    /// Runs prep `k` of the step as `program` has it, item `index` of the host program (for
    /// `marks`' timer); with `check`, its outputs are poisoned before and checked after.
    fn run_prep(
        &mut self,
        program: &ArmProgram,
        prepared: &[StepPrep],
        k: usize,
        (index, marks): (usize, Option<&mut Marks>),
        log: &mut Option<&mut Vec<HostSpan>>,
        check: Option<&mut StepCheck>,
    ) -> Result<()> {
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
        .run(&program.preps[k], &prepared[k], (index, marks), log)?;
        if let Some(check) = check {
            check.prep(self.gpu, &self.preps[k].plan, program.preps[k].arm, k)?;
        }
        Ok(())
    }

    /// The step's `of` forward.
    fn forward(&self, of: ForwardOf) -> Result<&Forward> {
        let (_, forward) = self
            .forwards
            .iter()
            .find(|(f, _)| *f == of)
            .with_context(|| format!("the step has no {of:?} forward"))?;
        Ok(forward)
    }

    /// Host time blocked in reads and syncing uploads since the last call.
    pub(super) fn take_blocked(&mut self) -> Duration {
        let preps: Duration = self.preps.iter_mut().map(|p| p.plan.take_blocked()).sum();
        preps + std::mem::take(&mut self.upload_blocked)
    }

    /// Accepted tokens of the next `steps` steps, from the CPU mirror of the accept kernel.
    pub(super) fn tokens(&self, steps: usize) -> Vec<Vec<u32>> {
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
    /// Runs `prep` (see [`prep_sequence`]) as its arm, telling `begin`'s timer where the GPU
    /// span of program item `item` starts.
    fn run(
        &mut self,
        prep: &PrepProgram,
        prepared: &StepPrep,
        (item, mut begin): (usize, Option<&mut Marks>),
        log: &mut Option<&mut Vec<HostSpan>>,
    ) -> Result<()> {
        let (arm, stream) = (prep.arm, self.gpu.cu_stream());
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
