//! NVTX ranges, so an Nsight Systems capture (`nsys profile --trace=cuda,nvtx`) names every
//! phase of a step and every arm's prep as the CSV and the trace do. NVTX3 is header-only: with
//! no tool attached (no `NVTX_INJECTION64_PATH`, no preloaded tool) each call is a no-op
//! behind a function pointer. `--nvtx off` turns them off entirely, to measure what they cost.

use std::ffi::{c_char, c_int, CStr, CString};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

// The `nvtx` crate (1.3.x, pinned in Cargo.toml) compiles NVTX3 into a static library whose
// C entry point its `range_push!` calls; the macro first copies the name into a `String` and a
// `CString`, which costs many times the call itself (docs/nvtx.md has the figures).
// So names are made C strings once by the caller and handed to the entry point directly; a
// newer `nvtx` without it fails to link, and tests/nvtx.rs checks the ranges reach a tool.
extern "C" {
    fn ffi_range_push(message: *const c_char) -> c_int;
}

/// Turns the ranges on or off for the whole process (the `--nvtx` flag).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the ranges are on (what [`set_enabled`] last said; on by default).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A range name made once, outside the timed loops. A name with a NUL byte is cut there.
pub fn name(text: &str) -> CString {
    let text = text.split('\0').next().unwrap_or_default();
    CString::new(text).unwrap_or_default()
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
    pub fn push(name: &CStr) -> Range {
        let pushed = ENABLED.load(Ordering::Relaxed);
        if pushed {
            // SAFETY: `name` is NUL-terminated and outlives the call; NVTX copies what it keeps.
            unsafe { ffi_range_push(name.as_ptr()) };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_c_strings_cut_at_a_nul() {
        assert_eq!(name("draft prep (graph)").as_bytes(), b"draft prep (graph)");
        assert_eq!(name("a\0b").as_bytes(), b"a");
    }
}
