//! Tests that need a CUDA GPU. Run them on a GPU host with
//! `cargo test --release -- --ignored` (or the bundle's `tests/gpu-*` executable with `--ignored`).

use metaprep::check::{check_shape, check_shape_arms, eager_sync_capture_is_refused, shape_seed};
use metaprep::gpu::{capture_graph, Gpu};
use metaprep::prep::{Arm, Family};

fn gpu() -> Gpu {
    Gpu::open(0).expect("these tests need a CUDA GPU")
}

fn fresh_seed() -> u64 {
    let seed = metaprep::check::fresh_seed();
    println!("seed {seed}");
    seed
}

fn assert_all_equal(gpu: &Gpu, family: Family, bs: u32, block: u32, steps: usize, seed: u64) {
    let shape = check_shape(family, bs, block, steps, 1 << 20).unwrap();
    let results = check_shape_arms(
        gpu,
        shape,
        shape_seed(seed, family, bs, block),
        &Arm::ALL,
        steps,
        1 << 20,
    )
    .unwrap();
    for r in &results {
        assert!(r.cells > 0);
        assert_eq!(
            r.mismatches, 0,
            "{family} {} bs {bs} block {block} seed {seed}: first {:?}",
            r.arm, r.first
        );
    }
}

/// The regression the original fix added: graph replay equals eager prep after several
/// replays with lengths changing between them, at batch sizes 1 and 2.
#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_equals_eager_after_replays_at_batch_1_and_2() {
    let gpu = gpu();
    let seed = fresh_seed();
    for family in Family::ALL {
        for bs in [1, 2] {
            assert_all_equal(&gpu, family, bs, 5, 8, seed);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_arm_matches_the_reference_with_padding_and_large_batches() {
    let gpu = gpu();
    let seed = fresh_seed();
    for family in Family::ALL {
        for (bs, block) in [(3, 1), (5, 8), (200, 3), (1000, 6)] {
            assert_all_equal(&gpu, family, bs, block, 3, seed);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn capturing_eager_sync_is_refused_by_the_guard() {
    let gpu = gpu();
    for family in Family::ALL {
        let message = eager_sync_capture_is_refused(&gpu, family).unwrap();
        assert!(message.contains("seq_lens.tolist()"), "{message}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn any_host_read_inside_a_capture_is_an_error() {
    let gpu = gpu();
    let buf = gpu.upload(&[1i32, 2, 3]).unwrap();
    let err = capture_graph(&gpu.stream, "a test body", || {
        gpu.download("test buffer", &buf).map(drop)
    })
    .err()
    .expect("a download inside a capture must fail");
    let message = format!("{err:#}");
    assert!(
        message.contains("host read during CUDA graph capture") && message.contains("test buffer"),
        "{message}"
    );
    // The stream is usable afterwards.
    assert_eq!(gpu.download("after", &buf).unwrap(), vec![1, 2, 3]);
}
