//! Pinning the measuring thread to one CPU.
//!
//! Host costs of a few µs move by tens of percent when the OS migrates the measuring thread:
//! a wait that yields can wake on another core with cold caches (docs/h200-findings.md:
//! pinning). The thread is pinned after the CUDA context exists, so the driver's own threads
//! keep the whole mask.
//! A thread started later inherits the pinned mask: metaprep's own (the NVML sampler) start
//! through [`spawn_helper`], which keeps them off the measuring CPU.

pub use crate::gpu::os::affinity::allowed_cpus;
use crate::gpu::os::affinity::set_affinity;
use anyhow::{bail, ensure, Context, Result};
use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;
use std::thread::JoinHandle;

thread_local! {
    /// While this thread is pinned: the CPUs a helper it starts runs on (the process's CPUs
    /// but the pinned one, or all of them when there is no other).
    static HELPER_CPUS: RefCell<Option<Vec<usize>>> = const { RefCell::new(None) };
}

/// Where `--cpu` puts the measuring thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CpuPin {
    /// The last CPU the process may run on (the first ones take most interrupts).
    Auto,
    Core(usize),
    /// Leave the thread to the OS scheduler.
    Off,
}

impl FromStr for CpuPin {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "auto" => Ok(CpuPin::Auto),
            "off" => Ok(CpuPin::Off),
            n => match n.parse::<usize>() {
                Ok(core) => Ok(CpuPin::Core(core)),
                Err(_) => bail!("`{s}` is not a CPU: give a CPU number, `auto` or `off`"),
            },
        }
    }
}

impl fmt::Display for CpuPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuPin::Auto => f.write_str("auto"),
            CpuPin::Core(n) => write!(f, "{n}"),
            CpuPin::Off => f.write_str("off"),
        }
    }
}

/// Where the measuring thread ended up, and the CPUs it could have run on. Dropping it
/// gives the thread those CPUs back, so a command leaves its thread (and the processes it
/// starts afterwards, which inherit the mask) as it found it.
#[derive(Debug)]
pub struct Pinned {
    /// The CPU it is bound to; `None` with `--cpu off`.
    pub cpu: Option<usize>,
    /// The process's CPUs before pinning.
    pub allowed: Vec<usize>,
}

impl Pinned {
    /// The env.json note for where the measuring thread ran.
    pub fn note(&self) -> String {
        let allowed = ranges(&self.allowed);
        match self.cpu {
            Some(cpu) => format!(
                "{PIN_NOTE}pinned to CPU {cpu} of {allowed} (cpufreq governor: {})",
                governor(cpu).unwrap_or_else(|| "not readable".into())
            ),
            None => format!("{PIN_NOTE}not pinned (--cpu off), CPUs {allowed}"),
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.cpu.is_some() {
            HELPER_CPUS.with(|h| h.borrow_mut().take());
            if let Err(e) = set_affinity(&self.allowed) {
                // A drop cannot fail the run: say it, since later work may stay on one CPU.
                eprintln!("metaprep: unpinning the measuring thread: {e:#}");
            }
        }
    }
}

/// The CPU `pin` puts the measuring thread on (`None` for `--cpu off`), one of `allowed`:
/// checked before any GPU work, so a CPU the process may not use is a bad flag.
pub fn pinned_cpu(pin: CpuPin, allowed: &[usize]) -> Result<Option<usize>> {
    match pin {
        CpuPin::Off => Ok(None),
        CpuPin::Auto => {
            Ok(Some(*allowed.last().ok_or_else(|| {
                anyhow::anyhow!("this thread may run on no CPU")
            })?))
        }
        CpuPin::Core(n) => {
            ensure!(
                allowed.contains(&n),
                "--cpu {n} is not one of the CPUs this process may run on ({}); pick one of \
                 them, or --cpu auto",
                ranges(allowed)
            );
            Ok(Some(n))
        }
    }
}

/// Pins the calling thread as `pin` says, until the returned guard is dropped.
pub fn pin_current_thread(pin: CpuPin) -> Result<Pinned> {
    let allowed = allowed_cpus()?;
    let Some(cpu) = pinned_cpu(pin, &allowed)? else {
        return Ok(Pinned { cpu: None, allowed });
    };
    set_affinity(&[cpu]).with_context(|| format!("pinning the measuring thread to CPU {cpu}"))?;
    let others: Vec<usize> = allowed.iter().copied().filter(|&c| c != cpu).collect();
    let helpers = if others.is_empty() {
        allowed.clone()
    } else {
        others
    };
    HELPER_CPUS.with(|h| *h.borrow_mut() = Some(helpers));
    Ok(Pinned {
        cpu: Some(cpu),
        allowed,
    })
}

/// Starts a named helper thread (sampling, reading a pipe) that, when the calling thread is
/// pinned, runs anywhere but on its CPU: inheriting the pin would put the helper's wake-ups
/// on the core being measured. A mask that cannot be set is said, and the helper runs on.
pub fn spawn_helper<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    let cpus = HELPER_CPUS.with(|h| h.borrow().clone());
    let name = name.to_string();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(cpus) = cpus {
                if let Err(e) = set_affinity(&cpus) {
                    eprintln!("metaprep: the {name} thread stays on the measuring CPU: {e:#}");
                }
            }
            f()
        })
}

/// The cpufreq governor of `cpu`, where the host exposes it (VMs often do not).
pub fn governor(cpu: usize) -> Option<String> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
    ))
    .ok()
    .map(|s| s.trim().to_string())
}

/// Prefix of [`Pinned::note`]'s line.
pub const PIN_NOTE: &str = "measuring thread: ";

/// `[0, 1, 2, 5]` → `0-2,5`.
fn ranges(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        out.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_undone_when_its_guard_drops() {
        // Affinity is per thread: this test's own thread only.
        let before = allowed_cpus().unwrap();
        let pinned = pin_current_thread(CpuPin::Auto).unwrap();
        assert_eq!(allowed_cpus().unwrap(), vec![pinned.cpu.unwrap()]);
        drop(pinned);
        assert_eq!(allowed_cpus().unwrap(), before);
    }

    #[test]
    fn parses_cpu_choices() {
        assert_eq!("auto".parse::<CpuPin>().unwrap(), CpuPin::Auto);
        assert_eq!("off".parse::<CpuPin>().unwrap(), CpuPin::Off);
        assert_eq!("3".parse::<CpuPin>().unwrap(), CpuPin::Core(3));
        let err = "-1".parse::<CpuPin>().unwrap_err().to_string();
        assert!(err.contains("not a CPU"), "{err}");
    }

    #[test]
    fn cpu_lists_print_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(ranges(&[4]), "4");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn auto_pins_to_the_last_allowed_cpu_and_off_leaves_the_mask() {
        // A fresh thread, so the test runner's own thread keeps its mask.
        std::thread::spawn(|| {
            let allowed = allowed_cpus().unwrap();
            assert_eq!(pin_current_thread(CpuPin::Off).unwrap().cpu, None);
            assert_eq!(allowed_cpus().unwrap(), allowed);
            let pinned = pin_current_thread(CpuPin::Auto).unwrap();
            let cpu = pinned.cpu.unwrap();
            assert_eq!(cpu, *allowed.last().unwrap());
            assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
            assert!(pinned.note().contains(&format!("pinned to CPU {cpu}")));
            // The note names the CPUs the process had, not the one it is now bound to.
            assert!(
                pinned.note().contains(&format!("of {}", ranges(&allowed))),
                "{}",
                pinned.note()
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_helper_started_by_a_pinned_thread_runs_off_its_cpu() {
        std::thread::spawn(|| {
            let allowed = allowed_cpus().unwrap();
            let helper_cpus = || {
                spawn_helper("probe", || allowed_cpus().unwrap())
                    .unwrap()
                    .join()
                    .unwrap()
            };
            let pinned = pin_current_thread(CpuPin::Auto).unwrap();
            let cpu = pinned.cpu.unwrap();
            let expected: Vec<usize> = match allowed.len() {
                1 => allowed.clone(),
                _ => allowed.iter().copied().filter(|&c| c != cpu).collect(),
            };
            assert_eq!(helper_cpus(), expected);
            drop(pinned);
            assert_eq!(
                helper_cpus(),
                allowed,
                "unpinned, a helper keeps the whole mask"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_outside_the_mask_is_refused_by_name() {
        std::thread::spawn(|| {
            let err = pin_current_thread(CpuPin::Core(100_000))
                .unwrap_err()
                .to_string();
            assert!(err.contains("--cpu 100000 is not one of the CPUs"), "{err}");
        })
        .join()
        .unwrap();
    }
}
