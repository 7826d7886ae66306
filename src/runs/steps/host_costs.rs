//! The host side of a cell's program: the profile's costs as durations (converted once,
//! outside the timed loops, with the harness's own idle read and upload taken off), the
//! busy-waits that stand in for host work, and the framework ops with the kernels they
//! launch. Shared by the step's host items, its preps and accept.
//!
//! Where the profile gives an arm a host factor (`arm_host_factors`), that arm gets its own
//! host costs and step items, built once per cell and host scale and put in place of the
//! cell's for each of its passes. The arms rotate within a round, so each factored arm keeps
//! its own costs (and its own post-wait state and read jitter) and none leaks into another's.

use super::cell::{ArmProgram, StepCell, StepPrep};
use super::config::StepsConfig;
use crate::axes::{Arm, ReadPath};
use crate::gpu::{Gpu, KernelModule, Launch, StreamHandle};
use crate::model::host_profile::{HostProfile, Item};
use crate::model::post_wait::AfterWait;
use crate::runs::rank_world::ReadDelay;
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

/// Spins the host until `until` (host work a framework would be doing); returns the clock
/// reading that found it passed, so the timed loop need not read the clock again.
pub(super) fn spin_until(until: Instant) -> Instant {
    loop {
        let now = Instant::now();
        if now >= until {
            return now;
        }
        std::hint::spin_loop();
    }
}

pub(super) fn us(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) * 1e-6)
}

/// The host costs of a cell's program, as durations, converted once outside the timed loops.
pub(super) struct HostCosts {
    pub(super) profile: HostProfile,
    /// One framework op of a host item or of accept.
    pub(super) op: Duration,
    /// One graph replay's launch (forwards, graph arms).
    pub(super) graph_launch: Duration,
    /// What the profile's read costs beyond the harness's own idle read, per read path.
    pub(super) read_top_up: [Duration; ReadPath::ALL.len()],
    /// What the profile's upload costs beyond the harness's own idle upload.
    pub(super) upload_top_up: Duration,
    /// Extra host time after each read on this rank (`--read-skew-us`, jitter).
    pub(super) read_skew: ReadDelay,
    /// What the calls after a wait cost extra (the profile's `post_wait`), and how far the
    /// host program is past its last wait.
    pub(super) after_wait: AfterWait,
}

impl HostCosts {
    /// `profile`'s costs, with the harness's own idle read and upload costs taken off the
    /// profile's (the step loop tops its real read and copy up to them).
    pub(super) fn new(
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
pub(super) fn framework_op(
    kernel: Option<&Launch>,
    stream: StreamHandle<'_>,
    op: Duration,
    after_wait: &mut AfterWait,
) -> Result<()> {
    let start = Instant::now();
    if let Some(kernel) = kernel {
        kernel.issue(stream)?;
    }
    framework_call(start, op, after_wait);
    Ok(())
}

/// A framework call that began at `t0` and costs `cost` on the host: busy until then, plus
/// what it costs extra after a wait.
pub(super) fn framework_call(t0: Instant, cost: Duration, after_wait: &mut AfterWait) {
    let extra = after_wait.call(t0);
    after_wait.ended(spin_until(t0 + cost + extra));
}

/// A kernel a framework op launches: a spin of the profile's `kernel_us`, or an empty kernel.
pub(super) fn framework_kernel(gpu: &Gpu, us: f64) -> Result<Launch> {
    let launch = if us > 0.0 {
        Launch::spin(gpu, us)?
    } else {
        let func = gpu.function(KernelModule::Floor, "empty_kernel")?;
        Launch::new("empty_kernel", func, (1, 1, 1), (1, 1, 1))
    };
    // Loaded and run once here: a module cannot load inside a capture.
    launch.issue(gpu.cu_stream())?;
    gpu.sync()?;
    Ok(launch)
}

/// The harness's own idle read (per read path) and upload costs a cell measured.
pub(super) type IdleCosts = ([Duration; ReadPath::ALL.len()], Duration);

/// One arm's host: the costs its step runs at and the items with its host segments' µs.
pub(super) struct OwnHost {
    pub(super) costs: HostCosts,
    pub(super) items: Vec<Item>,
}

/// One arm made ready for a cell: its programs, each prep's prepared plan, and its own host
/// where the profile gives the arm a factor (else the cell's serves, as for every arm of a
/// profile without factors).
pub(super) struct ReadyArm {
    pub(super) program: ArmProgram,
    pub(super) prepared: Vec<StepPrep>,
    pub(super) own: Option<OwnHost>,
}

/// Each of `arms`' own host, in their order: `Some` for an arm `profile` gives a factor,
/// with `profile.for_arm(arm)` made into costs by `costs_of` and into items by `items_of`.
pub(super) fn own_hosts(
    profile: &HostProfile,
    arms: &[Arm],
    mut costs_of: impl FnMut(HostProfile) -> HostCosts,
    mut items_of: impl FnMut(&HostProfile) -> Result<Vec<Item>>,
) -> Result<Vec<Option<OwnHost>>> {
    arms.iter()
        .map(|&arm| {
            if profile.arm_host_factor(arm).is_none() {
                return Ok(None);
            }
            let own = profile.for_arm(arm);
            let items = items_of(&own)?;
            Ok(Some(OwnHost {
                costs: costs_of(own),
                items,
            }))
        })
        .collect()
}

/// What a cell's host runs at: the run's profile scaled, on this rank, at this block and
/// rank batch, over the harness's own idle costs.
pub(super) struct CellHost<'c> {
    pub(super) config: &'c StepsConfig,
    pub(super) rank: usize,
    pub(super) block: u32,
    pub(super) rank_bs: u32,
    pub(super) scale: f64,
    pub(super) idle: IdleCosts,
}

impl CellHost<'_> {
    /// Sets the cell's costs and items to this host's, and makes every arm of the run ready
    /// on it once (`labels` name them in errors), each at its own host where it has one.
    pub(super) fn ready_arms(
        &self,
        cell: &mut StepCell,
        labels: &[String],
    ) -> Result<Vec<ReadyArm>> {
        let config = self.config;
        let costs_of = |profile| {
            let skew = config.read_skew.on(self.rank, config.seed);
            HostCosts::new(profile, self.idle.0, self.idle.1, skew)
        };
        let items_of = |p: &HostProfile| p.step_items(config.drafter, self.block, self.rank_bs);
        let scaled = config.host.scaled(self.scale)?;
        let owns = own_hosts(&scaled, &config.arms, costs_of, items_of)?;
        cell.items = items_of(&scaled)?;
        cell.costs = costs_of(scaled);
        let mut ready = Vec::with_capacity(config.arms.len());
        for ((&arm, label), mut own) in config.arms.iter().zip(labels).zip(owns) {
            let (program, prepared) = cell.with_host(own.as_mut(), |cell| {
                let prepared = cell.prepare_all(arm).with_context(|| label.clone())?;
                Ok((cell.program(arm), prepared))
            })?;
            ready.push(ReadyArm {
                program,
                prepared,
                own,
            });
        }
        Ok(ready)
    }
}

impl StepCell<'_> {
    /// Runs `f` on the cell with `own`'s costs and items in place of the cell's, putting
    /// the cell's back after it whatever it returned; with `None`, on the cell's own.
    pub(super) fn with_host<T>(
        &mut self,
        own: Option<&mut OwnHost>,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let Some(own) = own else { return f(self) };
        self.swap_host(own);
        let out = f(self);
        self.swap_host(own);
        out
    }

    fn swap_host(&mut self, own: &mut OwnHost) {
        std::mem::swap(&mut self.costs, &mut own.costs);
        std::mem::swap(&mut self.items, &mut own.items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axes::Drafter;
    use crate::model::host_profile::Sourced;

    #[test]
    fn each_factored_arm_gets_its_own_host_and_the_others_the_cell_s() {
        let mut p = HostProfile::load("pytorch").unwrap();
        let factor = |value| Sourced {
            value,
            source: "test".into(),
        };
        p.arm_host_factors = Some(
            [
                ("eager-device".to_string(), factor(2.0)),
                ("graph".to_string(), factor(0.5)),
            ]
            .into(),
        );
        let arms = [Arm::EagerSync, Arm::EagerDevice, Arm::Graph];
        let idle = Duration::from_micros(1);
        let costs_of = |p| HostCosts::new(p, [idle; ReadPath::ALL.len()], idle, ReadDelay::none());
        let items_of = |p: &HostProfile| p.step_items(Drafter::Dspark, 5, 8);
        let owns = own_hosts(&p, &arms, costs_of, items_of).unwrap();
        assert!(
            owns[0].is_none(),
            "eager-sync has no factor: the cell's costs serve it"
        );
        let cell = costs_of(p.clone());
        let scheduler = |items: &[Item]| match &items[0] {
            Item::Host { us, .. } => *us,
            other => panic!("{other:?}"),
        };
        let cell_items = items_of(&p).unwrap();
        for (own, arm, k) in [
            (&owns[1], Arm::EagerDevice, 2.0),
            (&owns[2], Arm::Graph, 0.5),
        ] {
            let own = own.as_ref().unwrap();
            let c = &own.costs;
            let near = |a: Duration, b: f64| (a.as_secs_f64() * 1e6 - b).abs() < 1e-3;
            assert!(near(c.op, p.op_us.value * k), "{:?}", c.op);
            assert!(near(c.graph_launch, p.graph_launch_us.value * k));
            assert!(near(c.read_top_up[0], p.read_us.value * k - 1.0));
            assert!(near(c.upload_top_up, p.upload_us.value * k - 1.0));
            assert_eq!(c.profile, p.for_arm(arm));
            assert_eq!(scheduler(&own.items), scheduler(&cell_items) * k);
        }
        assert_ne!(owns[1].as_ref().unwrap().costs.op, cell.op);
    }
}
