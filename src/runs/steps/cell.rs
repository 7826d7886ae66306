//! One (layout, batch, block) cell of the step, shared by its arms: its preps, forwards and
//! framework kernels, each arm's programs made ready, the harness's idle host costs, and
//! one step of an arm's program run item by item. The passes over a cell (`passes`) and the
//! rows they give (`rows`) build on it.

use super::checked_run::StepCheck;
use super::forward::Forward;
use super::host_costs::{framework_call, framework_op, spin_until, us, HostCosts};
use super::passes::{HostSpan, Marks, SpanOf};
use super::prep_run::{launch_of, PrepProgram, PrepRun, StepPrep};
use crate::axes::Arm;
use crate::axes::Drafter;
use crate::axes::ReadPath;
use crate::gpu::nvtx::{self, Range};
use crate::gpu::{capture_graph, Gpu, Launch};
use crate::model::host_profile::{family_of, first_launching_op, prep_arm, ForwardOf, Item, Phase};
use crate::model::nccl_collectives::CollectiveBuffers;
use crate::model::program::{prep_sequence, span_start};
use crate::model::trace::HostLane;
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::PrepPlan;
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
        .run(
            program.preps[k].arm,
            &program.preps[k],
            &prepared[k],
            (index, marks),
            log,
        )?;
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
