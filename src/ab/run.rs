//! The coordinator: both sides started together, their cells matched, then every pair of the
//! schedule measured one side after the other, a pair whose host moved inside it measured
//! once more.

use super::protocol::{CellName, Hello, Measured, Ready};
use super::schedule::{pair_order, PairSlot};
use super::sides::{Side, SideSpec};
use super::verdict::PairRecord;
use crate::harness::nvml::{Sampler, DEFAULT_PERIOD};
use crate::results::telemetry::TelemetrySample;
use anyhow::Result;
use std::time::{Duration, Instant};

/// What a run measures and how long it waits.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub base: SideSpec,
    pub new: SideSpec,
    /// Pairs of each cell (one a round).
    pub pairs: usize,
    /// Processes each side runs in, one after another, each measuring its share of the
    /// rounds: a process draws a GPU pace of its own, which pairs inside one process pair
    /// cannot see, so the interval is over processes.
    pub processes: usize,
    pub seed: u64,
    /// A pair whose side's probe moved by more than this share (0.35: 35%) inside its burst is
    /// redone once.
    pub redo_bound: f64,
    pub start_timeout: Duration,
    pub pair_timeout: Duration,
}

/// How long a side may take to say hello: it only reads its flags first.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// A side as it said it was (its first process): its hello, and its start once it had opened
/// the GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct SideSaid {
    pub hello: Hello,
    pub ready: Ready,
}

/// Every pair of a run, and what the sides said of themselves.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The cells, in BASE's order (the pairs' `cell` indices).
    pub cells: Vec<CellName>,
    pub pairs: Vec<PairRecord>,
    pub base: SideSaid,
    pub new: SideSaid,
    /// Pairs measured again after the host moved inside them.
    pub redone: usize,
    pub seconds: f64,
    /// NVML's readings of the device through the run, each tagged with the pair it was
    /// taken in; why none were taken where NVML could not be read.
    pub telemetry: std::result::Result<Vec<TelemetrySample>, String>,
}

/// Runs `plan`, calling `progress(done, total)` after each pair.
pub fn measure(plan: &RunPlan, mut progress: impl FnMut(usize, usize)) -> Result<Measurement> {
    let started = Instant::now();
    let first = Generation::start(plan, false)?;
    let (base, new) = (first.base.clone(), first.new.clone());
    let cells = base.hello.cells.clone();
    let order = pair_order(cells.len(), plan.pairs, plan.seed);
    let (mut pairs, mut redone) = (Vec::with_capacity(order.len()), 0);
    // Read beside the pairs, as a sweep's parent reads beside its workers.
    let sampler = Sampler::start(&base.ready.pci_bus_id, DEFAULT_PERIOD).map_err(|e| e.0);
    let mut next = Some(first);
    for generation in 0..plan.processes {
        let mut run = match next.take() {
            Some(run) => run,
            None => Generation::start(plan, generation % 2 == 1)?,
        };
        anyhow::ensure!(
            run.base.hello.cells == cells,
            "{} changed its cells between its processes",
            plan.base.label()
        );
        let rounds = rounds_of(generation, plan.processes, plan.pairs);
        for slot in order.iter().filter(|s| rounds.contains(&s.round)) {
            let what = format!("{} (round {})", cells[slot.cell], slot.round + 1);
            if let Ok(sampler) = &sampler {
                sampler.set_cell(&cells[slot.cell].to_string());
            }
            let (mut b, mut n) = run.pair(slot, &what)?;
            let moved = |m: &Measured| m.probe_move() > plan.redo_bound.ln_1p();
            let again = moved(&b) || moved(&n);
            if again {
                (b, n) = run.pair(slot, &what)?;
                redone += 1;
            }
            pairs.push(PairRecord {
                round: slot.round,
                process: generation,
                cell: slot.cell,
                base_first: slot.base_first,
                base: b,
                new: Measured {
                    cell: slot.cell,
                    ..n
                },
                redone: again,
            });
            progress(pairs.len(), order.len());
        }
        run.finish()?;
    }
    Ok(Measurement {
        cells,
        pairs,
        base,
        new,
        redone,
        seconds: started.elapsed().as_secs_f64(),
        telemetry: sampler.map(Sampler::stop),
    })
}

/// The rounds process `generation` of `processes` measures: `0..rounds` cut into runs of
/// near-equal length, the longer first.
pub fn rounds_of(generation: usize, processes: usize, rounds: usize) -> std::ops::Range<usize> {
    let (base, longer) = (rounds / processes, rounds % processes);
    let start = generation * base + generation.min(longer);
    start..start + base + usize::from(generation < longer)
}

/// One process of each side, started together and ended together.
struct Generation<'p> {
    plan: &'p RunPlan,
    base_side: Side,
    new_side: Side,
    base: SideSaid,
    new: SideSaid,
    /// NEW's index of each of BASE's cells.
    new_index: Vec<usize>,
}

impl<'p> Generation<'p> {
    /// Both sides' processes, NEW's spawned first where `new_first` (every other process: its
    /// context and memory are made before the other's, and neither side always goes first).
    fn start(plan: &'p RunPlan, new_first: bool) -> Result<Self> {
        let (mut base, mut new) = if new_first {
            let new = Side::spawn(&plan.new)?;
            (Side::spawn(&plan.base)?, new)
        } else {
            let base = Side::spawn(&plan.base)?;
            (base, Side::spawn(&plan.new)?)
        };
        let (base_hello, new_hello) = (base.hello(HELLO_TIMEOUT)?, new.hello(HELLO_TIMEOUT)?);
        // Refused here, the grids differ before either side has touched the GPU.
        let new_index = match_cells(&plan.base, &base_hello, &plan.new, &new_hello)?;
        // Both start at once: their GPU contexts, kernels and inputs are made side by side.
        let (base_ready, new_ready) = std::thread::scope(|s| {
            let b = s.spawn(|| base.start(plan.start_timeout));
            let n = new.start(plan.start_timeout);
            let b = b
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("starting BASE panicked")));
            (b, n)
        });
        Ok(Generation {
            plan,
            base_side: base,
            new_side: new,
            base: SideSaid {
                hello: base_hello,
                ready: base_ready?,
            },
            new: SideSaid {
                hello: new_hello,
                ready: new_ready?,
            },
            new_index,
        })
    }

    /// One pair: `slot`'s cell on both sides, back to back, in the slot's order.
    fn pair(&mut self, slot: &PairSlot, what: &str) -> Result<(Measured, Measured)> {
        let limit = self.plan.pair_timeout;
        let new_cell = self.new_index[slot.cell];
        Ok(if slot.base_first {
            let b = self.base_side.measure(slot.cell, what, limit)?;
            (b, self.new_side.measure(new_cell, what, limit)?)
        } else {
            let n = self.new_side.measure(new_cell, what, limit)?;
            (self.base_side.measure(slot.cell, what, limit)?, n)
        })
    }

    fn finish(self) -> Result<()> {
        self.base_side.finish()?;
        self.new_side.finish()
    }
}

/// NEW's index of each of BASE's cells; an error naming the side that lacks a cell of the
/// other's (both, where each does).
pub fn match_cells(
    base: &SideSpec,
    base_hello: &Hello,
    new: &SideSpec,
    new_hello: &Hello,
) -> Result<Vec<usize>> {
    let (b, n) = (&base_hello.cells, &new_hello.cells);
    let lacking = |side: &SideSpec, theirs: &[CellName], ours: &[CellName]| {
        let missing: Vec<String> = (theirs.iter())
            .filter(|c| !ours.contains(c))
            .map(ToString::to_string)
            .collect();
        (!missing.is_empty()).then(|| {
            let shown = missing
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            let more = match missing.len() {
                0..=5 => String::new(),
                n => format!(" and {} more", n - 5),
            };
            format!(
                "{} lacks {} cell(s) of the other side: {shown}{more}",
                side.label(),
                missing.len()
            )
        })
    };
    let problems: Vec<String> = [lacking(new, b, n), lacking(base, n, b)]
        .into_iter()
        .flatten()
        .collect();
    if !problems.is_empty() {
        anyhow::bail!(
            "the two sides measure different grids: {} (give both the same grid; a side's own \
             flags may change how it runs, not what it runs)",
            problems.join("; ")
        );
    }
    Ok(b.iter()
        .map(|c| n.iter().position(|m| m == c).unwrap_or_default())
        .collect())
}
