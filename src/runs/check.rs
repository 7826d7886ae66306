//! `metaprep check`: every family x arm against the CPU reference of the engine path it
//! stands for (eager arms: the eager page rule; graph arms: graph replay's), bit for bit, on
//! random inputs (fresh seed, printed; every other request with a nonzero `swa_valid_from`),
//! poisoned outputs, and several steps with `seq_lens` advanced on the device by `accept`
//! between them. A reading arm's host read must also bring over the lengths the device held
//! at that step (never an earlier step's: a stale mapped flag taken for fresh shows here).

use crate::axes::Arm;
use crate::axes::Family;
use crate::gpu::Gpu;
use crate::harness::memory::{host_heap_in_use, host_resident_bytes};
use crate::prep::accept::AcceptModel;
use crate::prep::family::{PageRule, Shape};
use crate::prep::inputs::{draw_swa_valid_from, generate, HostInputs, LengthRange};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::{PrepPlan, Prepared};
use crate::prep::reference::{expected, Expected, Mismatch};
use crate::stats::rng::SplitMix64;
use anyhow::{bail, Context, Result};

/// Longest context a check draws (128k tokens).
pub const MAX_CONTEXT: u32 = 128 * 1024;

#[derive(Debug, Clone)]
pub struct CheckConfig {
    pub seed: u64,
    pub families: Vec<Family>,
    pub arms: Vec<Arm>,
    pub batch_sizes: Vec<u32>,
    pub block_sizes: Vec<u32>,
    /// Checked steps after the warm-up, `accept` between them.
    pub steps: usize,
    /// Total committed tokens a batch may hold: long contexts at small batch, shorter ones
    /// at large batch, as a KV pool allows (and the check stays minutes, not hours).
    pub token_budget: u64,
}

/// The result of one (family, arm, batch, block) cell.
#[derive(Debug, Clone)]
pub struct CellResult {
    pub family: Family,
    pub arm: Arm,
    pub batch_size: u32,
    pub block: u32,
    pub tally: Tally,
}

/// Cells compared with the CPU reference, how many differed, and the first that did with
/// the step it was found at.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub cells: u64,
    pub mismatches: u64,
    pub first: Option<(u64, Mismatch)>,
}

impl Tally {
    /// Counts `expected`'s cells and each one `got` differs in, as `output` of `step`.
    pub(crate) fn lengths(
        &mut self,
        step: u64,
        output: &'static str,
        got: &[i32],
        expected: &[i32],
    ) {
        self.cells += expected.len() as u64;
        for (row, (&got, &expected)) in got.iter().zip(expected).enumerate() {
            if got != expected {
                self.mismatches += 1;
                let mismatch = Mismatch {
                    output,
                    row,
                    col: 0,
                    expected,
                    got,
                };
                self.first.get_or_insert((step, mismatch));
            }
        }
    }

    /// Counts the checked cells of each output of `step` and each one `got` differs in.
    pub(crate) fn outputs(&mut self, step: u64, got: &[Vec<i32>], want: &[Expected]) {
        for (got, want) in got.iter().zip(want) {
            let (count, first) = want.compare(got);
            self.cells += want.checked_cells() as u64;
            self.mismatches += count as u64;
            if self.first.is_none() {
                self.first = first.map(|m| (step, m));
            }
        }
    }
}

/// One poisoned step of `arm`'s prepared prep, checked into `tally`: its outputs against
/// `want`, and for a reading arm the lengths its host read brought against `held` (the live
/// requests' lengths the device held at that step).
fn check_poisoned_step(
    plan: &mut PrepPlan,
    prepared: &Prepared,
    arm: Arm,
    step: u64,
    (want, held): (&[Expected], &[i32]),
    tally: &mut Tally,
) -> Result<()> {
    let outputs = plan.poisoned_step(prepared)?;
    if arm.reads_host() {
        // The eager path reads the live requests' lengths only.
        tally.lengths(step, "seq_lens read to the host", plan.host_lengths(), held);
    }
    tally.outputs(step, &outputs, want);
    Ok(())
}

/// A check's inputs for `shape` from `seed` (lengths within the budget's cap, every other
/// request with a nonzero `swa_valid_from`) and the accept model that advances them.
pub fn check_inputs(shape: &Shape, seed: u64, token_budget: u64) -> (HostInputs, AcceptModel) {
    let range = LengthRange {
        min: 0,
        max: length_cap(shape.batch_size, token_budget),
    };
    let mut inputs = generate(shape, seed, range, true);
    draw_swa_valid_from(&mut inputs, shape.batch_size as usize, seed);
    let accept = AcceptModel::with_probability(0.7, shape.block, seed as u32, shape.max_seq_len());
    (inputs, accept)
}

/// Longest committed length drawn for a batch size.
pub fn length_cap(batch_size: u32, token_budget: u64) -> u32 {
    (token_budget / batch_size as u64).clamp(1, MAX_CONTEXT as u64) as u32
}

/// The row stride: room for the longest length, every step's growth and a block, in pages.
pub fn check_shape(
    family: Family,
    batch_size: u32,
    block: u32,
    steps: usize,
    token_budget: u64,
) -> Result<Shape> {
    // Validated first, so the room below cannot overflow.
    Shape::new(family, batch_size, block, MAX_CONTEXT)?;
    let room =
        length_cap(batch_size, token_budget) as u64 + (steps as u64 + 2) * (block as u64 + 1);
    Shape::new(
        family,
        batch_size,
        block,
        u32::try_from(room.div_ceil(256) * 256)?,
    )
}

/// The expected outputs of every checked step, and the lengths after each accept.
pub struct Trajectory {
    pub outputs: Vec<Vec<Expected>>,
    pub seq_lens_after: Vec<Vec<i32>>,
}

/// The expected outputs of `steps` steps of a path writing page tables by `rule`.
pub fn trajectory(
    shape: &Shape,
    inputs: &HostInputs,
    rule: PageRule,
    accept: &AcceptModel,
    steps: usize,
) -> Trajectory {
    let mut state = inputs.clone();
    let mut counters = vec![0u32; shape.padded_bs as usize];
    let (mut outputs, mut seq_lens_after) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        outputs.push(expected(shape, &state, rule));
        accept.apply(
            &mut state.seq_lens,
            &mut counters,
            shape.batch_size as usize,
        );
        seq_lens_after.push(state.seq_lens.clone());
    }
    Trajectory {
        outputs,
        seq_lens_after,
    }
}

/// Runs every arm of one shape over the same inputs and trajectory.
pub fn check_shape_arms(
    gpu: &Gpu,
    shape: Shape,
    seed: u64,
    arms: &[Arm],
    steps: usize,
    token_budget: u64,
) -> Result<Vec<CellResult>> {
    let (inputs, accept) = check_inputs(&shape, seed, token_budget);
    let mut trajectories = std::collections::HashMap::new();
    let live = shape.batch_size as usize;
    let lengths = DeviceLengths::new(gpu, &inputs.seq_lens, live, accept)?;
    let mut plan = PrepPlan::new(gpu, shape, &inputs, &lengths)?;
    let mut results = Vec::new();
    for &arm in arms {
        let rule = PageRule::of(arm);
        let want = trajectories
            .entry(rule)
            .or_insert_with(|| trajectory(&shape, &inputs, rule, &accept, steps));
        lengths.reset()?;
        let prepared = plan.prepare(arm)?;
        let mut result = CellResult {
            family: shape.family,
            arm,
            batch_size: shape.batch_size,
            block: shape.block,
            tally: Tally::default(),
        };
        for step in 0..steps {
            let held = match step {
                0 => &inputs.seq_lens,
                _ => &want.seq_lens_after[step - 1],
            };
            let checked = (&want.outputs[step][..], &held[..live]);
            check_poisoned_step(
                &mut plan,
                &prepared,
                arm,
                step as u64,
                checked,
                &mut result.tally,
            )
            .with_context(|| format!("step {step}"))?;
            lengths.issue_accept()?;
            let lens = lengths.download_seq_lens()?;
            let expected_lens = &want.seq_lens_after[step][..live];
            (result.tally).lengths(
                step as u64,
                "seq_lens after accept",
                &lens[..live],
                expected_lens,
            );
        }
        results.push(result);
    }
    Ok(results)
}

/// A soak's spot checks against the CPU reference: one poisoned step every this many.
pub const SOAK_CHECK_EVERY: u64 = 10_000;
/// How far device memory in use and the process's resident memory may grow over a soak from
/// their first sample, in percent: flat, less the noise of allocator bookkeeping.
pub const SOAK_MEMORY_GROWTH_PCT: f64 = 1.0;

/// Bytes sampled over a soak, at each spot check.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryTrace {
    pub samples: Vec<u64>,
}

impl MemoryTrace {
    pub fn first(&self) -> u64 {
        self.samples.first().copied().unwrap_or(0)
    }

    pub fn max(&self) -> u64 {
        self.samples.iter().copied().max().unwrap_or(0)
    }

    pub fn last(&self) -> u64 {
        self.samples.last().copied().unwrap_or(0)
    }

    /// Growth of the largest sample over the first, in percent (0 with no samples).
    pub fn growth_pct(&self) -> f64 {
        match self.first() {
            0 => 0.0,
            first => (self.max() - first) as f64 * 100.0 / first as f64,
        }
    }

    pub fn is_flat(&self) -> bool {
        self.growth_pct() <= SOAK_MEMORY_GROWTH_PCT
    }
}

/// One (family, arm) soaked: steps run, spot checks and what they found, memory over time.
#[derive(Debug, Clone)]
pub struct SoakResult {
    pub family: Family,
    pub arm: Arm,
    pub steps: u64,
    pub checks: u64,
    pub tally: Tally,
    pub seconds: f64,
    /// Device memory in use (total less free, as the driver reports it).
    pub device: MemoryTrace,
    /// This process's resident set.
    pub host: MemoryTrace,
    /// Bytes this process's heap holds allocated (glibc's `mallinfo2`), where the C library
    /// can say: empty otherwise.
    pub heap: MemoryTrace,
}

impl SoakResult {
    /// No mismatch, device memory flat, and the host's memory flat: the heap in use where it
    /// was sampled, else the resident set. The resident set also keeps what the allocator
    /// holds for reuse after a free, and grows with no leak as the spot checks' buffers follow
    /// the lengths up (docs/h200-findings.md#soak-memory-on-the-cpu-reference).
    pub fn passed(&self) -> bool {
        let host = match self.heap.samples.is_empty() {
            true => &self.host,
            false => &self.heap,
        };
        self.tally.mismatches == 0 && self.device.is_flat() && host.is_flat()
    }
}

/// `steps` steps of `arm`'s prep of `shape`, each followed by `accept` on the device (the
/// host mirrors it, so the reference follows the lengths), a poisoned step checked against
/// the CPU reference every [`SOAK_CHECK_EVERY`] and at the last, device and host memory
/// sampled at each check. `on_check` sees (steps done, mismatches so far).
pub fn soak(
    gpu: &Gpu,
    shape: Shape,
    arm: Arm,
    steps: u64,
    token_budget: u64,
    seed: u64,
    mut on_check: impl FnMut(u64, u64),
) -> Result<SoakResult> {
    let (mut state, accept) = check_inputs(&shape, seed, token_budget);
    let live = shape.batch_size as usize;
    let lengths = DeviceLengths::new(gpu, &state.seq_lens, live, accept)?;
    let mut plan = PrepPlan::new(gpu, shape, &state, &lengths)?;
    let prepared = plan.prepare(arm)?;
    lengths.reset()?;
    let rule = PageRule::of(arm);
    let mut counters = vec![0u32; shape.padded_bs as usize];
    let mut result = SoakResult {
        family: shape.family,
        arm,
        steps,
        checks: 0,
        tally: Tally::default(),
        seconds: 0.0,
        device: MemoryTrace::default(),
        host: MemoryTrace::default(),
        heap: MemoryTrace::default(),
    };
    let started = std::time::Instant::now();
    for step in 0..steps {
        if step % SOAK_CHECK_EVERY == 0 || step + 1 == steps {
            {
                // Scoped so the reference's outputs, sized by the lengths of the moment, are
                // freed before the heap is sampled: held, they make a flat heap look like it
                // grows as the lengths wander up.
                let want = expected(&shape, &state, rule);
                let checked = (&want[..], &state.seq_lens[..live]);
                check_poisoned_step(&mut plan, &prepared, arm, step, checked, &mut result.tally)
                    .with_context(|| format!("soak step {step}"))?;
                let device_lens = lengths.download_seq_lens()?;
                (result.tally).lengths(step, "seq_lens", &device_lens, &state.seq_lens);
            }
            result.checks += 1;
            let (free, total) = gpu.ctx.mem_get_info().context("reading device memory")?;
            result.device.samples.push((total - free) as u64);
            result.host.samples.push(host_resident_bytes()?);
            result.heap.samples.extend(host_heap_in_use());
            on_check(step, result.tally.mismatches);
        } else {
            plan.issue(&prepared)
                .with_context(|| format!("soak step {step}"))?;
        }
        lengths.issue_accept()?;
        accept.apply(&mut state.seq_lens, &mut counters, live);
    }
    gpu.sync().context("the soak's last steps")?;
    result.seconds = started.elapsed().as_secs_f64();
    Ok(result)
}

/// Capturing a reading arm (eager-sync, eager-pinned, eager-mapped) must be refused by the
/// capture guard; returns the guard's message.
pub fn host_read_capture_is_refused(gpu: &Gpu, family: Family, arm: Arm) -> Result<String> {
    if !arm.reads_host() {
        bail!("the {arm} arm reads nothing to the host: there is no read to refuse");
    }
    let shape = check_shape(family, 2, 5, 1, 1 << 16)?;
    let inputs = generate(&shape, 1, LengthRange { min: 0, max: 4096 }, false);
    let accept = AcceptModel::with_probability(0.7, shape.block, 1, shape.max_seq_len());
    let lengths = DeviceLengths::new(gpu, &inputs.seq_lens, shape.batch_size as usize, accept)?;
    let mut plan = PrepPlan::new(gpu, shape, &inputs, &lengths)?;
    plan.prepare(arm)?;
    match plan.capture(arm) {
        Ok(_) => bail!("capturing the {arm} prep of {family} succeeded: the capture guard let a host read into a graph"),
        Err(e) => {
            let message = format!("{e:#}");
            if !message.contains("host read during CUDA graph capture") {
                bail!("capturing {arm} failed for another reason than the guard: {message}");
            }
            // The stream must be usable again afterwards: a graph arm still captures.
            plan.prepare(Arm::Graph).context("capturing the graph arm after the refused capture")?;
            Ok(message)
        }
    }
}

/// A new seed each run (time and process id), printed by the caller so a failure replays.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ ((std::process::id() as u64) << 32)
}

/// Seed for one shape: the run seed mixed with the shape's coordinates.
pub fn shape_seed(run_seed: u64, family: Family, batch_size: u32, block: u32) -> u64 {
    let mut rng = SplitMix64::new(
        run_seed ^ ((family as u64) << 48) ^ ((batch_size as u64) << 16) ^ block as u64,
    );
    rng.next_u64()
}

pub fn run(
    gpu: &Gpu,
    config: &CheckConfig,
    mut on_cell: impl FnMut(&CellResult),
) -> Result<Vec<CellResult>> {
    let mut all = Vec::new();
    for &family in &config.families {
        for &bs in &config.batch_sizes {
            for &block in &config.block_sizes {
                let shape = check_shape(family, bs, block, config.steps, config.token_budget)?;
                let seed = shape_seed(config.seed, family, bs, block);
                let results = check_shape_arms(
                    gpu,
                    shape,
                    seed,
                    &config.arms,
                    config.steps,
                    config.token_budget,
                )
                .with_context(|| format!("checking {family} bs {bs} block {block}"))?;
                results.iter().for_each(&mut on_cell);
                all.extend(results);
            }
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_cap_trades_context_for_batch() {
        assert_eq!(length_cap(1, 1 << 21), MAX_CONTEXT);
        assert_eq!(length_cap(64, 1 << 21), 32 * 1024);
        assert_eq!(length_cap(1024, 1 << 21), 2048);
        let s = check_shape(Family::DsaTargetVerify, 1, 8, 4, 1 << 21).unwrap();
        assert!(
            s.max_seq_len() as u32 >= MAX_CONTEXT + 4 * 9,
            "room for four steps of growth"
        );
        assert_eq!(s.max_context % 256, 0);
    }

    #[test]
    fn trajectory_follows_the_accept_model() {
        let shape = check_shape(Family::DsaDecode, 3, 5, 3, 1 << 12).unwrap();
        let inputs = generate(&shape, 3, LengthRange { min: 0, max: 1000 }, false);
        let accept = AcceptModel::with_probability(1.0, 5, 3, shape.max_seq_len());
        let t = trajectory(&shape, &inputs, PageRule::Graph, &accept, 3);
        assert_eq!(t.outputs.len(), 3);
        for i in 0..3 {
            assert_eq!(
                t.seq_lens_after[2][i],
                inputs.seq_lens[i] + 18,
                "p = 1 accepts block + 1 each step"
            );
        }
        assert_eq!(
            t.seq_lens_after[2][3],
            crate::prep::inputs::PAD_SEQ_LEN,
            "padding row untouched"
        );
        assert_ne!(t.outputs[0], t.outputs[1], "lengths change between steps");
    }

    #[test]
    fn expected_rows_fit_their_buffers_at_every_checked_shape() {
        // The GPU tests' shapes (budget 2^20, 3 steps) and the check's extremes: a short row
        // stride at large batch must not receive edge lengths it cannot hold.
        for family in Family::ALL {
            for (bs, block, budget) in [
                (1000, 6, 1 << 20),
                (1024, 8, 1 << 21),
                (5, 8, 1 << 20),
                (3, 1, 1 << 20),
            ] {
                let shape = check_shape(family, bs, block, 3, budget).unwrap();
                let inputs = generate(
                    &shape,
                    7,
                    LengthRange {
                        min: 0,
                        max: length_cap(bs, budget),
                    },
                    true,
                );
                assert!(
                    inputs.seq_lens.iter().all(|&l| l <= shape.max_seq_len()),
                    "{family} bs {bs}"
                );
                let accept = AcceptModel::with_probability(0.7, block, 7, shape.max_seq_len());
                // push_row asserts every row fits its buffer.
                for rule in [PageRule::Eager, PageRule::Graph] {
                    trajectory(&shape, &inputs, rule, &accept, 3);
                }
            }
        }
    }

    #[test]
    fn seeds_differ_per_shape() {
        let a = shape_seed(1, Family::DsaDecode, 8, 5);
        assert_ne!(a, shape_seed(1, Family::DsaDecode, 8, 6));
        assert_ne!(a, shape_seed(1, Family::DsaTargetVerify, 8, 5));
        assert_ne!(a, shape_seed(2, Family::DsaDecode, 8, 5));
    }

    #[test]
    fn memory_traces_flat_and_growing() {
        let flat = MemoryTrace {
            samples: vec![1_000_000, 1_004_000, 1_009_999, 1_001_000],
        };
        assert_eq!(
            (flat.first(), flat.max(), flat.last()),
            (1_000_000, 1_009_999, 1_001_000)
        );
        assert!(flat.is_flat() && flat.growth_pct() < 1.0);
        let leaking = MemoryTrace {
            samples: vec![1_000_000, 1_006_000, 1_012_000],
        };
        assert!(!leaking.is_flat());
        assert!((leaking.growth_pct() - 1.2).abs() < 1e-9);
        assert!(MemoryTrace::default().is_flat());
    }
}
