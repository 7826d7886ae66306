//! The coordinator: both sides started together, their cells matched, then every pair of the
//! schedule measured one side after the other, a pair whose host moved inside it measured
//! once more.

use super::protocol::{CellName, Hello, Measured, Ready};
use super::schedule::pair_order;
use super::sides::{Side, SideSpec};
use super::verdict::PairRecord;
use anyhow::Result;
use std::time::{Duration, Instant};

/// What a run measures and how long it waits.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub base: SideSpec,
    pub new: SideSpec,
    /// Pairs of each cell (one a round).
    pub pairs: usize,
    pub seed: u64,
    /// A pair whose side's probe moved by more than this (|ln after/before|) is redone once.
    pub redo_bound: f64,
    pub start_timeout: Duration,
    pub pair_timeout: Duration,
}

/// How long a side may take to say hello: it only reads its flags first.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// A side as it said it was: its hello, and its start once it had opened the GPU.
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
}

/// Runs `plan`, calling `progress(done, total)` after each pair.
pub fn measure(plan: &RunPlan, mut progress: impl FnMut(usize, usize)) -> Result<Measurement> {
    let started = Instant::now();
    let mut base = Side::spawn(&plan.base)?;
    let mut new = Side::spawn(&plan.new)?;
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
    let (base_ready, new_ready) = (base_ready?, new_ready?);
    let cells = base_hello.cells.clone();
    let order = pair_order(cells.len(), plan.pairs, plan.seed);
    let mut pairs = Vec::with_capacity(order.len());
    let mut redone = 0;
    for (done, slot) in order.iter().enumerate() {
        let what = format!("{} (round {})", cells[slot.cell], slot.round + 1);
        let mut measure_pair = || -> Result<(Measured, Measured)> {
            let one = |side: &mut Side, index: usize| side.measure(index, &what, plan.pair_timeout);
            Ok(if slot.base_first {
                let b = one(&mut base, slot.cell)?;
                (b, one(&mut new, new_index[slot.cell])?)
            } else {
                let n = one(&mut new, new_index[slot.cell])?;
                (one(&mut base, slot.cell)?, n)
            })
        };
        let (mut b, mut n) = measure_pair()?;
        let moved = |b: &Measured, n: &Measured| {
            b.probe_move() > plan.redo_bound || n.probe_move() > plan.redo_bound
        };
        let again = moved(&b, &n);
        if again {
            (b, n) = measure_pair()?;
            redone += 1;
        }
        pairs.push(PairRecord {
            round: slot.round,
            cell: slot.cell,
            base_first: slot.base_first,
            base: b,
            new: Measured {
                cell: slot.cell,
                ..n
            },
            redone: again,
        });
        progress(done + 1, order.len());
    }
    base.finish()?;
    new.finish()?;
    Ok(Measurement {
        cells,
        pairs,
        base: SideSaid {
            hello: base_hello,
            ready: base_ready,
        },
        new: SideSaid {
            hello: new_hello,
            ready: new_ready,
        },
        redone,
        seconds: started.elapsed().as_secs_f64(),
    })
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
