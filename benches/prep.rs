//! Criterion benches over the same prep plan as `metaprep sweep`: one group per family, one
//! bench per (arm, batch size, block size, layout), plus the floor. A sample is the wall time
//! of N whole steps, the GPU done at the end (`iter_custom`); device time per step from
//! CUDA events recorded alongside is printed after each group.
//!
//!   cargo bench                                   # the default grid, a few minutes on an H200
//!   cargo bench -- 'dsa_decode/graph'             # narrow it with a filter
//!   cargo bench -- --save-baseline before         # then, after a change:
//!   cargo bench -- --baseline before              # before/after in two commands

use criterion::{criterion_group, criterion_main, Criterion};
use metaprep::axes::layout::Layout;
use metaprep::axes::Arm;
use metaprep::axes::Family;
use metaprep::axes::FloorItem;
use metaprep::gpu::Gpu;
use metaprep::harness::floor::Floor;
use metaprep::prep::accept::AcceptModel;
use metaprep::prep::inputs::{generate, LengthRange};
use metaprep::prep::lengths::DeviceLengths;
use metaprep::prep::plan::PrepPlan;
use metaprep::prep::Shape;
use std::time::{Duration, Instant};

const BATCH_SIZES: [u32; 4] = [1, 8, 64, 256];
const BLOCK_SIZES: [u32; 1] = [5];
const LAYOUTS: [Layout; 1] = [Layout::Tp(1)];
const MAX_CONTEXT: u32 = 131072;
const SEQ_LENS: LengthRange = LengthRange {
    min: 2048,
    max: 8192,
};

/// Benches cannot return errors: a GPU failure ends the run with a clear line, no panic.
fn or_exit<T>(result: anyhow::Result<T>) -> T {
    result.unwrap_or_else(|e| {
        eprintln!("metaprep bench: error: {e:#}");
        std::process::exit(metaprep::exit::Exit::of_error(&e).code().into())
    })
}

/// Runs `steps` of `issue` and returns the host wall time and the device time per step.
fn timed(gpu: &Gpu, steps: u64, mut issue: impl FnMut() -> anyhow::Result<()>) -> (Duration, f64) {
    let events = or_exit(gpu.timing_events(2));
    let (begin, end) = (&events[0], &events[1]);
    let start = Instant::now();
    or_exit(begin.record(&gpu.stream));
    for _ in 0..steps {
        or_exit(issue());
    }
    or_exit(end.record(&gpu.stream));
    or_exit(gpu.sync());
    let wall = start.elapsed();
    let device_us = or_exit(begin.elapsed_ms(end)) as f64 * 1e3 / steps as f64;
    (wall, device_us)
}

fn print_device_times(group: &str, times: &[(String, f64)]) {
    if times.is_empty() {
        return;
    }
    println!("\n{group}: device time per step (CUDA events, last sample)");
    for (id, us) in times {
        println!("  {id:<40} {us:>10.2} us");
    }
}

fn benches(c: &mut Criterion) {
    let gpu = or_exit(Gpu::open(0));
    let mut floor = or_exit(Floor::new(&gpu));
    let mut group = c.benchmark_group("floor");
    for item in FloorItem::ALL {
        group.bench_function(item.name(), |b| {
            b.iter_custom(|iters| or_exit(floor.batch(item, iters as usize)))
        });
    }
    group.finish();

    for family in Family::ALL {
        let mut group = c.benchmark_group(family.name());
        let mut device_times = Vec::new();
        for layout in LAYOUTS {
            for bs in BATCH_SIZES {
                for block in BLOCK_SIZES {
                    let shape = or_exit(Shape::new(
                        family,
                        layout.rank_batch(bs),
                        block,
                        MAX_CONTEXT,
                    ));
                    let inputs = generate(&shape, 1, SEQ_LENS, false);
                    let accept = AcceptModel::with_probability(0.7, block, 1, shape.max_seq_len());
                    let lengths = or_exit(DeviceLengths::new(
                        &gpu,
                        &inputs.seq_lens,
                        shape.batch_size as usize,
                        accept,
                    ));
                    let mut plan = or_exit(PrepPlan::new(&gpu, shape, &inputs, &lengths));
                    for arm in Arm::ALL {
                        let prepared = or_exit(plan.prepare(arm));
                        let id = format!("{arm}/bs{bs}/block{block}/{layout}");
                        let mut last_device_us = f64::NAN;
                        group.bench_function(&id, |b| {
                            b.iter_custom(|iters| {
                                let (wall, device_us) =
                                    timed(&gpu, iters, || plan.issue(&prepared));
                                last_device_us = device_us;
                                wall
                            })
                        });
                        if last_device_us.is_finite() {
                            device_times.push((id, last_device_us));
                        }
                    }
                }
            }
        }
        group.finish();
        print_device_times(family.name(), &device_times);
    }
}

/// The smallest change Criterion calls a regression or an improvement: the whole 99%
/// interval of the change must lie beyond ±20%. On the H200 an unchanged build benched twice
/// back to back, with Criterion's default ±1% at 95%, was called "regressed" in 34 of 69
/// benches and "improved" in 9, its point changes reaching +14.7% and −19.2% (issue 10): the
/// host drifts between runs by that much and one run's samples cannot see it. For smaller
/// changes use `metaprep sweep` and `metaprep compare`, whose intervals come from rounds.
const NOISE_THRESHOLD: f64 = 0.20;
const CONFIDENCE: f64 = 0.99;

criterion_group! {
    name = prep;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .noise_threshold(NOISE_THRESHOLD)
        .confidence_level(CONFIDENCE)
        .significance_level(1.0 - CONFIDENCE);
    targets = benches
}
criterion_main!(prep);
