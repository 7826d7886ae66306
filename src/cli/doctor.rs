//! `metaprep doctor`: every library and facility metaprep uses on this host, each found (with
//! its file and version) or not (with what to do), and whether the main commands can run.
//! Unlike `info` it stops at nothing: a missing driver leaves the rest to be checked.

use super::common::DeviceArgs;
use crate::exit::Exit;
use crate::gpu::library_search::{open, symbol_file};
use crate::gpu::nccl::Nccl;
use crate::gpu::{nvrtc, nvrtc_library, probe, Gpu, KernelModule};
use crate::harness::nvml::{self, StaticInfo};
use crate::harness::pin::{pin_current_thread, CpuPin};
use anyhow::Result;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// What one check found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Found: where, which version, what it gives.
    Found(String),
    /// Not there or not usable: why, and what to do about it.
    Missing { why: String, fix: String },
    /// Not checked, because something it rests on is missing.
    NotChecked(String),
}

/// Which commands need a check's subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// `check`, `sweep`, `steps` and `validate` cannot run without it: missing, exit 3.
    ByAll,
    /// Only what it names needs it; the others run without it.
    By(&'static str),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub needed: Needed,
    pub outcome: Outcome,
}

pub(crate) fn doctor(args: &DeviceArgs) -> Result<ExitCode> {
    let checks = run_checks(args);
    crate::out!("{}", render(&checks));
    Ok(exit(&checks).into())
}

/// [`Exit::NoGpu`] when anything every GPU command needs is missing, else [`Exit::Ok`].
pub fn exit(checks: &[Check]) -> Exit {
    let blocked = checks
        .iter()
        .any(|c| c.needed == Needed::ByAll && !matches!(c.outcome, Outcome::Found(_)));
    if blocked {
        Exit::NoGpu
    } else {
        Exit::Ok
    }
}

/// One line per check (`name  found|MISSING|not checked  detail`), a `fix:` line under each
/// missing one, and a last line with the verdict.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        let (status, detail) = match &check.outcome {
            Outcome::Found(what) => ("found", what.as_str()),
            Outcome::Missing { why, .. } => ("MISSING", why.as_str()),
            Outcome::NotChecked(why) => ("not checked", why.as_str()),
        };
        out.push_str(&format!("{:<12} {status:<12} {detail}\n", check.name));
        if let Outcome::Missing { fix, .. } = &check.outcome {
            let needed = match check.needed {
                Needed::ByAll => "needed by every GPU command".to_string(),
                Needed::By(what) => format!("needed only for {what}"),
            };
            out.push_str(&format!("{:<12} {:<12} fix: {fix} ({needed})\n", "", ""));
        }
    }
    let missing: Vec<&str> = checks
        .iter()
        .filter(|c| c.needed == Needed::ByAll && matches!(c.outcome, Outcome::Missing { .. }))
        .map(|c| c.name)
        .collect();
    if exit(checks) == Exit::Ok {
        out.push_str("ready: check, sweep, steps and validate have what they need (exit 0)\n");
    } else {
        out.push_str(&format!(
            "not ready: check, sweep, steps and validate need {} (exit 3); report, compare and \
             calibrate need no GPU\n",
            missing.join(", ")
        ));
    }
    out
}

const DRIVER_FIX: &str = "install the NVIDIA driver (it brings libcuda.so.1 and NVML); in a \
                          container, start it with the GPUs passed through (docker run --gpus all)";
/// The pip package of a CUDA library that matches the driver's CUDA (`13.0`): CUDA 13's
/// wheels put their libraries in `nvidia/cu13/lib` (where the search looks first) and are
/// named without a suffix, CUDA 12's carry `-cu12`. With no driver, both.
fn wheel(library: &str, cuda: Option<&str>) -> String {
    let major_minor = cuda.and_then(|c| {
        let (major, minor) = c.split_once('.')?;
        Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
    });
    let cu12 = match library {
        "nccl" => "nvidia-nccl-cu12".to_string(),
        _ => format!("nvidia-cuda-{library}-cu12==12.9.*"),
    };
    let cu13 = |minor: Option<u32>| match (library, minor) {
        ("nccl", _) => "nvidia-nccl-cu13".to_string(),
        (_, Some(minor)) => format!("nvidia-cuda-{library}==13.{minor}.*"),
        (_, None) => format!("nvidia-cuda-{library} (13.x, the driver's minor version)"),
    };
    match major_minor {
        Some((major, minor)) if major >= 13 => cu13(Some(minor)),
        Some(_) => cu12,
        None => format!("{} for a CUDA 13 driver, {cu12} for CUDA 12", cu13(None)),
    }
}

fn nvrtc_fix(cuda: Option<&str>) -> String {
    format!(
        "pip install {} into the Python environment you run from (a PyTorch venv often has it \
         already), or the CUDA toolkit, or put the folder holding libnvrtc.so.* on \
         LD_LIBRARY_PATH",
        wheel("nvrtc", cuda)
    )
}

/// Every check, in order, each one run as far as what it rests on allows.
fn run_checks(args: &DeviceArgs) -> Vec<Check> {
    let ordinal = args.device;
    let mut checks = Vec::new();
    let driver = driver_check(ordinal);
    let has_device = matches!(driver.outcome, Outcome::Found(_));
    checks.push(driver);
    // The fixes name the wheels of the driver's CUDA.
    let cuda = probe::driver_library()
        .ok()
        .map(|(_, cuda)| cuda.to_string());
    let cuda = cuda.as_deref();
    let nvrtc = nvrtc_check(cuda);
    let has_nvrtc = matches!(nvrtc.outcome, Outcome::Found(_));
    checks.push(nvrtc);
    checks.push(kernels_check(args, has_device, has_nvrtc));
    let (nvml_check, nvml) = nvml_check(ordinal);
    checks.push(nvml_check);
    checks.push(gpm_check(nvml.as_ref()));
    checks.push(cupti_check(cuda));
    checks.push(nccl_check(cuda));
    checks.push(pinning_check());
    checks
}

fn driver_check(ordinal: usize) -> Check {
    let outcome = match probe::driver_library() {
        Err(e) => Outcome::Missing {
            why: e.0,
            fix: DRIVER_FIX.into(),
        },
        Ok((path, cuda)) => match probe::devices(ordinal) {
            Ok((count, _)) => Outcome::Found(format!(
                "{}, CUDA {cuda}; {count} device(s) visible",
                path.display()
            )),
            Err(e) => Outcome::Missing {
                why: format!("{} (CUDA {cuda}): {}", path.display(), e.0),
                fix: "check that the GPU is visible here (nvidia-smi; CUDA_VISIBLE_DEVICES; \
                      --device N picks another)"
                    .into(),
            },
        },
    };
    Check {
        name: "driver",
        needed: Needed::ByAll,
        outcome,
    }
}

fn nvrtc_check(cuda: Option<&str>) -> Check {
    let outcome = match nvrtc_library::load_nvrtc() {
        Err(e) => Outcome::Missing {
            why: e.0,
            fix: nvrtc_fix(cuda),
        },
        Ok(library) => match (nvrtc::version(), nvrtc::supported_archs()) {
            (Ok((major, minor)), Ok(archs)) => Outcome::Found(format!(
                "NVRTC {major}.{minor} from {}; compiles for {}",
                library.describe(),
                archs
                    .iter()
                    .map(|a| format!("sm_{a}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            (Err(e), _) | (_, Err(e)) => Outcome::Missing {
                why: format!("{} does not answer: {e:#}", library.describe()),
                fix: nvrtc_fix(cuda),
            },
        },
    };
    Check {
        name: "NVRTC",
        needed: Needed::ByAll,
        outcome,
    }
}

/// Opens the GPU as the main commands do and compiles and loads every kernel module to the
/// kernel image they would use.
fn kernels_check(args: &DeviceArgs, has_device: bool, has_nvrtc: bool) -> Check {
    let name = "kernels";
    if !(has_device && has_nvrtc) {
        return Check {
            name,
            needed: Needed::ByAll,
            outcome: Outcome::NotChecked("needs the driver, a device and NVRTC".into()),
        };
    }
    let start = Instant::now();
    let compiled = (|| -> Result<Gpu> {
        let gpu = args.open()?;
        for module in KernelModule::ALL {
            gpu.module(module)?;
        }
        Ok(gpu)
    })();
    let outcome = match compiled {
        Ok(gpu) => {
            let i = &gpu.info;
            Outcome::Found(format!(
                "{} on GPU {} {} (compute capability {}.{}, {} SMs, {:.0} GiB): {} modules \
                 compiled and loaded in {:.1} s",
                i.kernel_image,
                i.ordinal,
                i.name,
                i.compute_capability.0,
                i.compute_capability.1,
                i.sm_count,
                i.memory_bytes as f64 / f64::from(1u32 << 30),
                KernelModule::ALL.len(),
                start.elapsed().as_secs_f64()
            ))
        }
        Err(e) => Outcome::Missing {
            why: format!("{e:#}"),
            fix: "install an NVRTC that knows this GPU (12.8+ for sm_100, 12.9+ for sm_103) and \
                  no newer than the driver's CUDA, or try --kernel-image ptx"
                .into(),
        },
    };
    Check {
        name,
        needed: Needed::ByAll,
        outcome,
    }
}

/// NVML's file, driver version and the GPU's clocks and power limit; its static facts are
/// returned for the GPM check.
fn nvml_check(ordinal: usize) -> (Check, Option<StaticInfo>) {
    let needed = Needed::By("the clock, power and throttle columns (empty without it)");
    let path = open(Path::new(nvml::NVML_LIB))
        .ok()
        .and_then(|lib| symbol_file(&lib, b"nvmlInit_v2\0"))
        .map_or(nvml::NVML_LIB.to_string(), |p| p.display().to_string());
    // NVML opens the CUDA device by its PCI bus id; without a driver there is no id to open.
    let read = crate::gpu::probe::pci_bus_id(ordinal)
        .map_err(|e| nvml::NvmlUnavailable(format!("finding CUDA device {ordinal}: {}", e.0)))
        .and_then(|pci| nvml::read_static(&pci));
    let (outcome, info) = match read {
        Ok(info) => (
            Outcome::Found(format!(
                "{path}, driver {}; SM clock max {} MHz, power limit {}",
                info.driver_version,
                info.sm_clock_max_mhz
                    .map_or("n/a".into(), |mhz| mhz.to_string()),
                info.power_limit_w
                    .map_or("n/a".into(), |w| format!("{w:.0} W"))
            )),
            Some(info),
        ),
        Err(e) => (
            Outcome::Missing {
                why: e.0,
                fix: "NVML comes with the NVIDIA driver (libnvidia-ml.so.1): install the driver, \
                      or pass the library into the container"
                    .into(),
            },
            None,
        ),
    };
    (
        Check {
            name: "NVML",
            needed,
            outcome,
        },
        info,
    )
}

fn gpm_check(nvml: Option<&StaticInfo>) -> Check {
    let outcome = match nvml.map(|i| &i.gpm_note) {
        None => Outcome::NotChecked("needs NVML".into()),
        Some(None) => Outcome::Found(
            "SM activity, DRAM bandwidth and NVLink traffic per cell (gpm_* columns)".into(),
        ),
        Some(Some(why)) => Outcome::Missing {
            why: why.clone(),
            fix: "GPM needs a Hopper or newer GPU outside MIG mode and a driver of 520 or newer"
                .into(),
        },
    };
    Check {
        name: "GPM",
        needed: Needed::By("the gpm_* columns"),
        outcome,
    }
}

fn cupti_check(cuda: Option<&str>) -> Check {
    let outcome = match crate::gpu::cupti::load_cupti(None) {
        Ok(cupti) => Outcome::Found(cupti.describe()),
        Err(e) => Outcome::Missing {
            why: e.0,
            fix: format!(
                "pip install {} (or the toolkit's extras/CUPTI), or pass steps --cupti-lib FILE",
                wheel("cupti", cuda)
            ),
        },
    };
    Check {
        name: "CUPTI",
        needed: Needed::By("steps --timer cupti"),
        outcome,
    }
}

fn nccl_check(cuda: Option<&str>) -> Check {
    let outcome = match Nccl::load(None) {
        Ok(nccl) => Outcome::Found(nccl.describe()),
        Err(e) => Outcome::Missing {
            why: format!("{e:#}"),
            fix: format!(
                "pip install {} (or the libnccl2 package), or pass --nccl-lib FILE / set \
                 METAPREP_NCCL",
                wheel("nccl", cuda)
            ),
        },
    };
    Check {
        name: "NCCL",
        needed: Needed::By(
            "collectives and real ranks (steps --ranks real, or auto on several GPUs)",
        ),
        outcome,
    }
}

/// Pins a thread of its own as `--cpu auto` pins the measuring thread (this thread keeps its
/// CPUs).
fn pinning_check() -> Check {
    let pinned = std::thread::spawn(|| pin_current_thread(CpuPin::Auto).map(|p| p.note()))
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("a panic while pinning")));
    let outcome = match pinned {
        Ok(note) => Outcome::Found(note),
        Err(e) => Outcome::Missing {
            why: format!("{e:#}"),
            fix: "allow sched_setaffinity here (a container's CPU set, seccomp), or run with \
                  --cpu off and expect host times to move more"
                .into(),
        },
    };
    Check {
        name: "CPU pinning",
        needed: Needed::By("pinning the measuring thread (--cpu)"),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixes_name_the_wheels_of_the_drivers_cuda() {
        assert_eq!(wheel("nvrtc", Some("13.0")), "nvidia-cuda-nvrtc==13.0.*");
        assert_eq!(wheel("cupti", Some("13.1")), "nvidia-cuda-cupti==13.1.*");
        assert_eq!(wheel("nccl", Some("13.0")), "nvidia-nccl-cu13");
        assert_eq!(
            wheel("nvrtc", Some("12.8")),
            "nvidia-cuda-nvrtc-cu12==12.9.*"
        );
        assert_eq!(wheel("nccl", Some("12.4")), "nvidia-nccl-cu12");
        let both = wheel("nvrtc", None);
        assert!(
            both.contains("nvidia-cuda-nvrtc (13.x") && both.contains("-cu12==12.9.*"),
            "{both}"
        );
        assert!(nvrtc_fix(Some("13.0")).starts_with("pip install nvidia-cuda-nvrtc==13.0.* into"));
    }

    fn check(name: &'static str, needed: Needed, outcome: Outcome) -> Check {
        Check {
            name,
            needed,
            outcome,
        }
    }

    fn missing(why: &str, fix: &str) -> Outcome {
        Outcome::Missing {
            why: why.into(),
            fix: fix.into(),
        }
    }

    #[test]
    fn a_host_without_the_driver_is_not_ready_and_exits_3() {
        let checks = [
            check(
                "driver",
                Needed::ByAll,
                missing("no CUDA driver found", "install it"),
            ),
            check(
                "NVRTC",
                Needed::ByAll,
                Outcome::Found("NVRTC 12.9 from /v/libnvrtc.so.12".into()),
            ),
            check(
                "kernels",
                Needed::ByAll,
                Outcome::NotChecked("needs the driver".into()),
            ),
            check(
                "CUPTI",
                Needed::By("steps --timer cupti"),
                missing("CUPTI not found", "pip install"),
            ),
        ];
        assert_eq!(exit(&checks), Exit::NoGpu);
        assert_eq!(
            render(&checks),
            "driver       MISSING      no CUDA driver found\n\
             \x20                         fix: install it (needed by every GPU command)\n\
             NVRTC        found        NVRTC 12.9 from /v/libnvrtc.so.12\n\
             kernels      not checked  needs the driver\n\
             CUPTI        MISSING      CUPTI not found\n\
             \x20                         fix: pip install (needed only for steps --timer cupti)\n\
             not ready: check, sweep, steps and validate need driver (exit 3); report, \
             compare and calibrate need no GPU\n"
        );
    }

    #[test]
    fn optional_libraries_missing_leave_the_host_ready() {
        let checks = [
            check(
                "driver",
                Needed::ByAll,
                Outcome::Found("/usr/lib/libcuda.so.1".into()),
            ),
            check(
                "NCCL",
                Needed::By("collectives"),
                missing("not found", "pip install"),
            ),
        ];
        assert_eq!(exit(&checks), Exit::Ok);
        assert!(render(&checks)
            .ends_with("ready: check, sweep, steps and validate have what they need (exit 0)\n"));
    }
}
