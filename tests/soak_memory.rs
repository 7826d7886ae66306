//! What a soak's memory check reads, without a GPU: the process heap in use (glibc's
//! mallinfo2) follows allocations and frees, and the CPU reference's spot checks hold nothing
//! between them while accept moves the lengths. One test in its own binary: the heap is the
//! whole process's, and tests beside it on other threads would move it.

use metaprep::axes::Family;
use metaprep::harness::memory::host_heap_in_use;
use metaprep::prep::family::PageRule;
use metaprep::prep::reference::expected;
use metaprep::runs::check::{check_inputs, check_shape, MemoryTrace, SOAK_CHECK_EVERY};

#[test]
fn the_heap_in_use_follows_frees_and_the_references_spot_checks_hold_nothing() {
    let Some(before) = host_heap_in_use() else {
        eprintln!("SKIPPED: no glibc mallinfo2 here; the soak judges the resident set");
        return;
    };
    let held = vec![1u8; 64 << 20];
    let during = host_heap_in_use().unwrap();
    assert!(during >= before + (63 << 20), "{before} → {during}");
    drop(std::hint::black_box(held));
    let after = host_heap_in_use().unwrap();
    assert!(
        after + (60 << 20) < during,
        "{during} → {after} after the free"
    );

    // 3×10^5 soak steps of target verify at bs 8: the reference's buffers follow the lengths
    // toward 128k, and the resident set grows with what the allocator keeps of them.
    let shape = check_shape(Family::DsaTargetVerify, 8, 5, 1, 1 << 21).unwrap();
    let (mut state, accept) = check_inputs(&shape, 42, 1 << 21);
    let mut counters = vec![0u32; shape.padded_bs as usize];
    let mut heap = MemoryTrace::default();
    let mut longest = 0;
    for step in 0..300_000u64 {
        if step % SOAK_CHECK_EVERY == 0 {
            drop(std::hint::black_box(expected(
                &shape,
                &state,
                PageRule::Graph,
            )));
            heap.samples.push(host_heap_in_use().unwrap());
            longest = longest.max(*state.seq_lens[..8].iter().max().unwrap());
        }
        accept.apply(&mut state.seq_lens, &mut counters, 8);
    }
    assert_eq!(heap.samples.len(), 30);
    assert!(longest > 100_000, "the lengths never grew: {longest}");
    assert!(heap.is_flat(), "heap in use grew {:.3}%", heap.growth_pct());
    // A buffer kept at each check (a leak of one reference output) is seen.
    let mut kept = Vec::new();
    let mut leaking = MemoryTrace::default();
    for _ in 0..5 {
        kept.push(expected(&shape, &state, PageRule::Graph));
        leaking.samples.push(host_heap_in_use().unwrap());
    }
    assert!(!leaking.is_flat(), "{:.3}%", leaking.growth_pct());
}
