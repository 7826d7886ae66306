//! The calling thread's CPU affinity (`sched_getaffinity`, `sched_setaffinity`).

use anyhow::{ensure, Result};

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above: `set` is a live cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    ensure!(
        rc == 0,
        "reading this thread's CPU affinity: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: CPU_ISSET reads within the set for indices below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Lets the calling thread run on `cpus` (and only those; numbers from CPU_SETSIZE up are
/// ignored).
pub fn set_affinity(cpus: &[usize]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: CPU_SET writes within the set for cpu < CPU_SETSIZE, which the filter
        // guarantees.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a live cpu_set_t of the size passed; the call only reads it.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    ensure!(
        rc == 0,
        "setting this thread's CPU affinity: {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}
