//! This process's host memory, as a soak samples it: the resident set and the heap in use.

use anyhow::{Context, Result};

/// This process's resident set in bytes, from `/proc/self/statm`, after the allocator has
/// handed its free pages back: each spot check's CPU reference allocates buffers sized by the
/// lengths of the moment, and what glibc keeps of them after they are freed is no leak. On the
/// H200 this took target verify's graph soak from +20.2% to +7.5% (results/2026-12-01-h200-check/).
pub fn host_resident_bytes() -> Result<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heap.
    unsafe {
        libc::malloc_trim(0);
    }
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
    // SAFETY: a plain query.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * page.max(1) as u64)
}

/// Bytes this process's heap holds allocated: glibc's `mallinfo2`'s arena and mmapped bytes
/// in use, looked up at run time (glibc 2.33 and later have it; `None` without it, or on
/// another C library).
pub fn host_heap_in_use() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        type Mallinfo2 = unsafe extern "C" fn() -> libc::mallinfo2;
        // Looked up once per process, not at every sample.
        static MALLINFO2: std::sync::OnceLock<Option<Mallinfo2>> = std::sync::OnceLock::new();
        let mallinfo2 = (*MALLINFO2.get_or_init(|| {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the symbol
            // up; the pointer, when not null, is glibc's mallinfo2, whose signature this is.
            let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mallinfo2".as_ptr()) };
            (!f.is_null())
                .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, Mallinfo2>(f) })
        }))?;
        // SAFETY: a query of the allocator's counters.
        let info = unsafe { mallinfo2() };
        Some((info.uordblks + info.hblkhd) as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_comes_from_statm() {
        // SAFETY: a plain query.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        assert_eq!(
            resident_from_statm("5000 1200 300 1 0 900 0\n").unwrap(),
            1200 * page
        );
        assert!(resident_from_statm("").is_err());
        assert!(host_resident_bytes().unwrap() > 0);
    }
}
