//! One prep of the step as the host runs it: the arm's host actions ([`PrepStep`]s, worked
//! out once per cell), the prepared plan and framework graph it replays, and the run of one
//! prep inside a step, reads and uploads topped up to the profile's costs. Apart from the
//! cell, which only chooses which prep runs when.

use super::host_costs::{framework_call, spin_until, HostCosts};
use super::passes::{HostSpan, Marks, SpanOf};
use crate::axes::Arm;
use crate::gpu::{Gpu, Graph, Launch, StreamHandle};
use crate::model::program::{OpLaunch, PrepStep};
use crate::model::trace::HostLane;
use crate::prep::plan::{PrepPlan, Prepared};
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

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
pub(super) fn launch_of(
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

/// What a prep needs to run its sequence.
pub(super) struct PrepRun<'a, 'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) plan: &'a mut PrepPlan<'g>,
    /// The kernel each framework op of this prep launches.
    pub(super) kernel: &'a Launch,
    pub(super) costs: &'a mut HostCosts,
    /// Host time blocked in syncing uploads (graph-upload).
    pub(super) upload_blocked: &'a mut Duration,
}

impl PrepRun<'_, '_> {
    /// Runs `prep` (see [`prep_sequence`]), telling `begin`'s timer where the GPU span of
    /// program item `item` starts.
    pub(super) fn run(
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
