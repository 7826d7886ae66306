//! `metaprep doctor` as a user runs it: one line per library or facility, a fix under each
//! missing one, exit 3 without the driver (0 on a GPU host with everything the main commands
//! need).

use std::process::Command;

#[test]
fn doctor_lists_every_check_and_exits_3_without_a_driver() {
    let out = Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .arg("doctor")
        .output()
        .expect("running metaprep doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    // One line per check (a `fix:` line, indented, under each missing one), then the verdict.
    let names: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.get(..12).unwrap_or(l).trim())
        .collect();
    assert_eq!(
        names[..names.len() - 1],
        [
            "driver",
            "NVRTC",
            "kernels",
            "NVML",
            "GPM",
            "CUPTI",
            "NCCL",
            "CPU pinning"
        ],
        "{stdout}"
    );
    // SAFETY: only probes whether libcuda can be loaded.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        // A GPU host: the driver is found; whatever else is missing says how to fix it.
        assert!(stdout.starts_with("driver       found        "), "{stdout}");
        return;
    }
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in {stdout}"))
    };
    assert!(line("driver ").starts_with("driver       MISSING      no CUDA driver found"));
    assert!(
        stdout.contains("fix: install the NVIDIA driver"),
        "{stdout}"
    );
    // The kernels rest on the driver and are not tried; the rest is checked regardless.
    assert_eq!(
        line("kernels"),
        "kernels      not checked  needs the driver, a device and NVRTC"
    );
    assert!(line("NVRTC").contains("NVRTC"));
    assert!(
        line("CPU pinning")
            .starts_with("CPU pinning  found        measuring thread: pinned to CPU"),
        "{stdout}"
    );
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("not ready: check, sweep, steps and validate need driver")
            && last.ends_with("(exit 3); report, compare and calibrate need no GPU"),
        "{last}"
    );
}
