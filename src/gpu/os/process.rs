//! Process lifetime and signals: a child that dies with its parent, whether a process is
//! still there, and the default SIGPIPE disposition.

use std::process::Command;

/// The command's child gets SIGKILL when the thread that spawned it ends (Linux's
/// `PR_SET_PDEATHSIG`; elsewhere nothing is set).
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl, which
    // is async-signal-safe, and errno through last_os_error.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut Command) {}

/// Whether a process `pid` exists (signal 0: a check, nothing sent).
#[cfg(unix)]
pub fn exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

/// Restores SIGPIPE's default disposition, so that writing to a closed pipe ends the process
/// quietly as Unix tools do (`metaprep compare A B | head`), not with a panic in `println!`.
/// Call it before any thread starts.
pub fn die_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: sets one signal's disposition to the default; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
