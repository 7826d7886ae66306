//! This process's host memory, as a soak samples it: the resident set and the heap in use.

use crate::gpu::os::memory::{page_size, trim_heap};
use anyhow::{Context, Result};

/// This process's resident set in bytes, from `/proc/self/statm`, after the allocator has
/// handed its free pages back: each spot check's CPU reference allocates buffers sized by the
/// lengths of the moment, and what glibc keeps of them after they are freed is no leak.
pub fn host_resident_bytes() -> Result<u64> {
    trim_heap();
    let statm = std::fs::read_to_string("/proc/self/statm").context("reading /proc/self/statm")?;
    resident_from_statm(&statm)
}

fn resident_from_statm(statm: &str) -> Result<u64> {
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .with_context(|| {
            format!(
                "/proc/self/statm: no resident page count in `{}`",
                statm.trim()
            )
        })?;
    Ok(pages * page_size())
}

/// Bytes this process's heap holds allocated (glibc's `mallinfo2`; `None` where it is
/// missing).
pub fn host_heap_in_use() -> Option<u64> {
    crate::gpu::os::memory::heap_in_use()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_comes_from_statm() {
        let page = page_size();
        assert_eq!(
            resident_from_statm("5000 1200 300 1 0 900 0\n").unwrap(),
            1200 * page
        );
        assert!(resident_from_statm("").is_err());
        assert!(host_resident_bytes().unwrap() > 0);
    }
}
