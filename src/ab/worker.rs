//! `metaprep ab-worker`: one side of an `ab`, measuring on request. It says hello with its
//! cells before any GPU work; on `Start` it opens the GPU, draws every group's inputs, builds
//! and warms up every cell (graphs captured once, kept for the run); then each `Measure` is a
//! short burst of one cell: a warm-up, the host-speed probe, the cell's metrics as the sweep
//! measures them ([`measure`]), the probe again.

use super::protocol::{CellName, Hello, Measured, Message, Metric, Ready, Request, PROTOCOL};
use crate::axes::{Arm, FloorItem};
use crate::gpu::{nvtx, Event, Gpu, Launch, StepSource};
use crate::harness::floor::Floor;
use crate::harness::pin::pin_current_thread;
use crate::harness::prep_cell::measure;
use crate::harness::process_group::send_line;
use crate::prep::plan::{ArmSteps, PrepPlan, Prepared};
use crate::runs::sweep::{generate_inputs, grid, group_lengths, group_shape, SweepConfig};
use crate::stats::stopping::StoppingRule;
use crate::stats::summary::quantile;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, Write};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// One-node empty-graph launches a probe times: ~30 µs on an H100 or H200.
const PROBE_LAUNCHES: usize = 16;

/// A known slowdown planted in one arm's host issue, a test aid for the gate: a busy-wait in
/// each of its steps where the host's work is exposed. In an arm that reads the host it
/// follows a drain of the GPU (what its read waits for), so the GPU idles through all of it,
/// as through the host work after a real read; elsewhere it starts the step (before the read
/// it would overlap the previous step's kernels unevenly: docs/ab.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plant {
    pub arm: Arm,
    pub amount: PlantAmount,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlantAmount {
    /// A fixed busy-wait, µs.
    Us(f64),
    /// A share of the arm's step as each burst's warm-up measures it, %: the step grows by
    /// about that much whatever the cell.
    Pct(f64),
}

impl FromStr for Plant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let form = || {
            format!(
                "`{s}` is not ARM=AMOUNT with AMOUNT in us or % (eager-sync=5us, eager-sync=20%)"
            )
        };
        let (arm, amount) = s.split_once('=').ok_or_else(form)?;
        let arm: Arm = arm.trim().parse()?;
        let amount = amount.trim();
        let (number, unit) = match (amount.strip_suffix("us"), amount.strip_suffix('%')) {
            (Some(n), _) => (n, "us"),
            (None, Some(n)) => (n, "%"),
            (None, None) => return Err(form()),
        };
        let value: f64 = number.trim().parse().map_err(|_| form())?;
        let (range, amount) = match unit {
            "us" => (0.01..=10_000.0, PlantAmount::Us(value)),
            _ => (0.1..=1000.0, PlantAmount::Pct(value)),
        };
        if !range.contains(&value) {
            return Err(format!(
                "{amount} is outside {}-{} {unit}, the range a planted host slowdown takes",
                range.start(),
                range.end()
            ));
        }
        Ok(Plant { arm, amount })
    }
}

impl std::fmt::Display for PlantAmount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlantAmount::Us(us) => write!(f, "{us} µs"),
            PlantAmount::Pct(pct) => write!(f, "{pct}% of the step"),
        }
    }
}

impl std::fmt::Display for Plant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of host busy-wait a step in {}",
            self.amount, self.arm
        )
    }
}

/// A step source with `us` of host busy-wait at the start of each step, after a drain of the
/// GPU where `drain` is set.
struct Planted<'s> {
    inner: &'s mut dyn StepSource,
    gpu: &'s Gpu,
    us: f64,
    drain: bool,
}

impl Planted<'_> {
    fn wait(&self) -> Result<()> {
        if self.drain {
            self.gpu.sync()?;
        }
        let until = Instant::now() + Duration::from_secs_f64(self.us * 1e-6);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

impl StepSource for Planted<'_> {
    fn issue_step(&mut self) -> Result<()> {
        self.wait()?;
        self.inner.issue_step()
    }

    fn issue_step_marked(&mut self, gpu: &Gpu, start: &Event) -> Result<()> {
        self.wait()?;
        self.inner.issue_step_marked(gpu, start)
    }

    fn take_blocked(&mut self) -> Duration {
        self.inner.take_blocked()
    }
}

/// The cells of `config`'s grid, as both sides name them: group by group, each group's arms.
pub fn cells(config: &SweepConfig) -> Vec<CellName> {
    // The GPU count only marks cells emulated, which no cell's name holds.
    (grid(config, 1).iter())
        .flat_map(|group| {
            config.arms.iter().map(|arm| CellName {
                family: group.family.name().into(),
                arm: arm.name().into(),
                batch_size: group.batch_size,
                block: group.block,
                layout: group.layout.to_string(),
            })
        })
        .collect()
}

/// Serves one side: hello, then requests from `input` until it ends.
pub fn serve(
    config: &SweepConfig,
    plant: Option<Plant>,
    input: impl BufRead,
    out: &mut impl Write,
) -> Result<()> {
    let names = cells(config);
    let planted = plant.map(|p| p.to_string());
    let Some(mut requests) = greet(input, out, &names, planted)? else {
        return Ok(());
    };
    let gpu = config.gpu.open()?;
    let specs = grid(config, gpu.info.device_count);
    // Held to the end: dropping it unpins the thread.
    let pinned = pin_current_thread(config.cpu)?;
    let mut floor = Floor::new(&gpu)?;
    let mut forward = match config.forward_us > 0.0 {
        true => Some(Launch::spin(&gpu, config.forward_us)?),
        false => None,
    };
    let inputs = generate_inputs(config, &specs)?;
    let shapes = (specs.iter())
        .map(|group| group_shape(config, group))
        .collect::<Result<Vec<_>>>()?;
    let key = |shape: &crate::prep::Shape| (shape.batch_size, shape.block);
    let lengths = (shapes.iter())
        .map(|shape| group_lengths(&gpu, config, shape, &inputs[&key(shape)]))
        .collect::<Result<Vec<_>>>()?;
    let mut plans = Vec::with_capacity(specs.len());
    for (shape, lengths) in shapes.iter().zip(&lengths) {
        let what = format!(
            "setting up {} bs {} block {}",
            shape.family, shape.batch_size, shape.block
        );
        plans.push(PrepPlan::new(&gpu, *shape, &inputs[&key(shape)], lengths).context(what)?);
    }
    let mut prepared = prepare_all(&mut plans, &config.arms)?;
    let emulated = (config.layouts.iter())
        .filter(|l| l.emulated(gpu.info.device_count))
        .map(ToString::to_string)
        .collect();
    let ready = ready_message(&gpu, &pinned, emulated);
    let arms = config.arms.len();
    let rule = burst_rule(config);
    answer(&mut requests, out, ready, &names, |cell| {
        let plan = &mut plans[cell / arms];
        let arm = config.arms[cell % arms];
        let ready = prepared[cell]
            .take()
            .context("a cell measured twice at once")?;
        let mut steps = ArmSteps {
            plan,
            prepared: ready,
        };
        let burst = Burst {
            gpu: &gpu,
            config,
            rule: &rule,
            plant: plant.filter(|p| p.arm == arm),
        };
        let measured = burst.run(&mut steps, &mut floor, forward.as_mut(), arm);
        prepared[cell] = Some(steps.prepared);
        measured
    })
}

/// The lines a coordinator sends.
pub(super) type Requests<R> = std::io::Lines<R>;

/// Sends the hello with `cells` (before any GPU work) and waits for `Start`: the requests
/// that follow it, or `None` where the coordinator ended first.
pub(super) fn greet<R: BufRead>(
    input: R,
    out: &mut impl Write,
    cells: &[CellName],
    planted: Option<String>,
) -> Result<Option<Requests<R>>> {
    let mut requests = input.lines();
    send_line(
        out,
        &Message::Hello(Hello {
            protocol: PROTOCOL,
            version: crate::VERSION.to_string(),
            cells: cells.to_vec(),
            planted,
        }),
    )?;
    match next_request(&mut requests)? {
        None => Ok(None),
        Some(Request::Start) => Ok(Some(requests)),
        Some(other) => bail!("the coordinator sent {other:?} before Start"),
    }
}

/// What a side says once its cells are ready.
pub(super) fn ready_message(
    gpu: &Gpu,
    pinned: &crate::harness::pin::Pinned,
    emulated: Vec<String>,
) -> Message {
    Message::Ready(Ready {
        device: gpu.info.name.clone(),
        pci_bus_id: gpu.info.pci_bus_id.clone(),
        pinned: pinned.note(),
        emulated,
    })
}

/// Sends `ready`, then answers each `Measure` with `burst(cell)`'s probes and metrics until
/// the requests end.
pub(super) fn answer(
    requests: &mut Requests<impl BufRead>,
    out: &mut impl Write,
    ready: Message,
    names: &[CellName],
    mut burst: impl FnMut(usize) -> Result<(f64, f64, Vec<Metric>)>,
) -> Result<()> {
    send_line(out, &ready)?;
    while let Some(request) = next_request(requests)? {
        let Request::Measure { cell } = request else {
            bail!("the coordinator sent {request:?} after Start");
        };
        let name = names
            .get(cell)
            .with_context(|| format!("the coordinator asked for cell {cell} of {}", names.len()))?;
        let (probe_before_us, probe_after_us, metrics) =
            burst(cell).with_context(|| format!("measuring {name}"))?;
        send_line(
            out,
            &Message::Measured(Measured {
                cell,
                probe_before_us,
                probe_after_us,
                metrics,
            }),
        )?;
    }
    Ok(())
}

/// The host's launch speed: µs per launch of the one-node empty graph.
pub(super) fn probe(floor: &mut Floor) -> Result<f64> {
    let took = floor.batch(FloorItem::EMPTY_GRAPH, PROBE_LAUNCHES)?;
    Ok(took.as_secs_f64() * 1e6 / PROBE_LAUNCHES as f64)
}

/// Named metrics, in order.
pub(super) fn metrics(named: Vec<(&str, f64)>) -> Vec<Metric> {
    (named.into_iter())
        .map(|(name, value)| Metric {
            name: name.into(),
            value,
        })
        .collect()
}

/// Every cell warmed up and its graph captured once, before the first pair: group by group,
/// each group's arms.
fn prepare_all(plans: &mut [PrepPlan], arms: &[Arm]) -> Result<Vec<Option<Prepared>>> {
    let mut prepared = Vec::with_capacity(plans.len() * arms.len());
    for plan in plans.iter_mut() {
        for &arm in arms {
            let what = format!(
                "preparing {}/{arm} bs {}",
                plan.shape.family, plan.shape.batch_size
            );
            prepared.push(Some(plan.prepare(arm).context(what)?));
        }
    }
    Ok(prepared)
}

/// A burst's rule: exactly `--min-samples` samples of `--steps-per-sample` steps.
fn burst_rule(config: &SweepConfig) -> StoppingRule {
    StoppingRule {
        rel_ci: 0.0,
        abs_ci_us: None,
        min_samples: config.rule.min_samples,
        max_samples: config.rule.min_samples,
        time_cap: Duration::from_secs(60),
    }
}

/// What one burst runs with.
struct Burst<'b> {
    gpu: &'b Gpu,
    config: &'b SweepConfig,
    rule: &'b StoppingRule,
    plant: Option<Plant>,
}

impl Burst<'_> {
    /// The probe, the cell's metrics (each the median of its samples), the probe again.
    fn run(
        &self,
        steps: &mut ArmSteps,
        floor: &mut Floor,
        forward: Option<&mut Launch>,
        arm: Arm,
    ) -> Result<(f64, f64, Vec<Metric>)> {
        let per_sample = self.config.steps_per_sample;
        // The side's own warm-up, timed bare: a sample's steps, their reads taken off.
        let warm = Instant::now();
        for _ in 0..per_sample {
            steps.issue_step()?;
        }
        self.gpu.sync()?;
        steps.take_blocked();
        let step_us = warm.elapsed().as_secs_f64() * 1e6 / per_sample as f64;
        let mut planted;
        let source: &mut dyn StepSource = match self.plant {
            Some(p) => {
                let us = match p.amount {
                    PlantAmount::Us(us) => us,
                    PlantAmount::Pct(pct) => step_us * pct / 100.0,
                };
                planted = Planted {
                    inner: steps,
                    gpu: self.gpu,
                    us,
                    drain: arm.reads_host(),
                };
                &mut planted
            }
            None => steps,
        };
        let before = probe(floor)?;
        let range = nvtx::name(&format!("ab ({arm})"));
        let event_steps = per_sample * self.rule.min_samples;
        let m = measure(
            self.gpu,
            source,
            &range,
            self.rule,
            (per_sample, event_steps),
            forward,
        )?;
        let after = probe(floor)?;
        let median = |v: &[f64]| quantile(v, 0.5).unwrap_or(f64::NAN);
        let mut metrics = vec![("step_us", median(&m.step.per_step_us))];
        if let Some(fwd) = &m.step_fwd {
            metrics.push(("step_fwd_us", median(&fwd.per_step_us)));
        }
        metrics.push(("host_issue_us", median(&m.host_issue_us)));
        if arm.reads_host() {
            metrics.push(("host_blocked_us", median(&m.host_blocked_us)));
        }
        metrics.push(("gpu_prep_us", median(&m.gpu_prep_us)));
        Ok((before, after, self::metrics(metrics)))
    }
}

fn next_request(
    requests: &mut impl Iterator<Item = std::io::Result<String>>,
) -> Result<Option<Request>> {
    match requests.next() {
        None => Ok(None),
        Some(line) => {
            let line = line.context("reading the coordinator's request")?;
            serde_json::from_str(&line).map(Some).with_context(|| {
                format!(
                    "the coordinator sent what is no request: {}",
                    crate::exit::one_line(&line)
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plant_names_an_arm_and_a_bounded_amount() {
        let p: Plant = "eager-sync=6.5us".parse().unwrap();
        assert_eq!((p.arm, p.amount), (Arm::EagerSync, PlantAmount::Us(6.5)));
        assert_eq!(
            p.to_string(),
            "6.5 µs of host busy-wait a step in eager-sync"
        );
        let p: Plant = "graph = 20%".parse().unwrap();
        assert_eq!((p.arm, p.amount), (Arm::Graph, PlantAmount::Pct(20.0)));
        assert_eq!(
            p.to_string(),
            "20% of the step of host busy-wait a step in graph"
        );
        for bad in [
            "eager-sync",
            "eager-sync=",
            "eager-sync=5",
            "nope=5us",
            "graph=0us",
            "graph=1e-300us",
            "graph=1e9us",
            "graph=nanus",
            "graph=0%",
            "graph=5000%",
            "graph=%",
        ] {
            assert!(bad.parse::<Plant>().is_err(), "{bad}");
        }
    }
}
