//! NVTX ranges, so an Nsight Systems capture (`nsys profile --trace=cuda,nvtx`) names every
//! phase of a step and every arm's prep as the CSV and the trace do. NVTX3 is header-only: with
//! no tool attached (no `NVTX_INJECTION64_PATH`, no preloaded tool) each call is a no-op
//! behind a function pointer, plus the `nvtx` crate's copy of the name. `--nvtx off` turns
//! them off entirely, to measure what they cost.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the ranges on or off for the whole process (the `--nvtx` flag).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// An open NVTX push/pop range on this thread, popped when dropped.
#[must_use = "the range ends when this is dropped"]
pub struct Range {
    pushed: bool,
    /// Push and pop must happen on one thread.
    _not_send: PhantomData<*const ()>,
}

impl Range {
    /// Opens a range named `name` (nested inside any range open on this thread).
    pub fn push(name: &str) -> Range {
        let pushed = ENABLED.load(Ordering::Relaxed);
        if pushed {
            nvtx::range_push!("{name}");
        }
        Range {
            pushed,
            _not_send: PhantomData,
        }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        if self.pushed {
            // Returns the level popped, or a negative number when no tool tracks ranges:
            // nothing to act on either way.
            nvtx::range_pop!();
        }
    }
}
