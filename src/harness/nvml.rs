//! NVML telemetry: a background sampler tagging readings with the sweep cell now running,
//! per-cell summaries for the results CSV, and a one-shot static read for `env.json`.
//!
//! NVML missing or failing is recoverable: [`Sampler::start`] and [`read_static`] return
//! [`NvmlUnavailable`], the caller warns once and leaves the telemetry columns empty. Every
//! NVML call happens on the sampler's own thread, so a failure (or panic) while loading the
//! library ends that thread and reaches the caller as an error, never as a crash.
//!
//! NVML numbers devices in PCI order and ignores `CUDA_VISIBLE_DEVICES`: index 0 here is not
//! necessarily CUDA device 0 when that variable reorders or hides devices.

use super::gpm::{self, cell_gpm, CellGpm, GpmInterval, GpmTracker, NvmlGpm};
use crate::results::env::EnvRecord;
use crate::results::telemetry::TelemetrySample;
use crate::stats::summary::summarize;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use std::ffi::OsStr;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the sampler reads the device unless told otherwise.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(50);

/// Shortest sampling period; one round of NVML reads takes about this long anyway.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The library NVML's own loader looks for on Linux.
pub(crate) const NVML_LIB: &str = "libnvidia-ml.so.1";

// Clock-event (throttle) reason bits, `nvmlClocksEventReason*` in nvml.h; the values are the
// same under the deprecated `nvmlClocksThrottleReason*` names the wrapper exposes.
/// The GPU is idle: clocks are low because there is no work, not a slowdown.
pub const REASON_GPU_IDLE: u64 = ThrottleReasons::GPU_IDLE.bits();
/// Clocks follow the applications-clocks setting (the normal state under load on datacenter
/// parts); not a slowdown.
pub const REASON_APPLICATIONS_CLOCKS_SETTING: u64 =
    ThrottleReasons::APPLICATIONS_CLOCKS_SETTING.bits();
pub const REASON_SW_POWER_CAP: u64 = ThrottleReasons::SW_POWER_CAP.bits();
pub const REASON_HW_SLOWDOWN: u64 = ThrottleReasons::HW_SLOWDOWN.bits();
pub const REASON_SYNC_BOOST: u64 = ThrottleReasons::SYNC_BOOST.bits();
pub const REASON_SW_THERMAL_SLOWDOWN: u64 = ThrottleReasons::SW_THERMAL_SLOWDOWN.bits();
pub const REASON_HW_THERMAL_SLOWDOWN: u64 = ThrottleReasons::HW_THERMAL_SLOWDOWN.bits();
pub const REASON_HW_POWER_BRAKE_SLOWDOWN: u64 = ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN.bits();
pub const REASON_DISPLAY_CLOCK_SETTING: u64 = ThrottleReasons::DISPLAY_CLOCK_SETTING.bits();

/// Reasons that mean the clocks were held below what the workload asked for. Bits NVML may
/// add later are recorded in the hex column but not classified.
const THROTTLE_MASK: u64 = REASON_SW_POWER_CAP
    | REASON_HW_SLOWDOWN
    | REASON_SYNC_BOOST
    | REASON_SW_THERMAL_SLOWDOWN
    | REASON_HW_THERMAL_SLOWDOWN
    | REASON_HW_POWER_BRAKE_SLOWDOWN
    | REASON_DISPLAY_CLOCK_SETTING;

/// True when `reasons` holds any slowdown bit; idle and applications-clocks bits do not count.
pub fn is_throttled(reasons: u64) -> bool {
    reasons & THROTTLE_MASK != 0
}

/// Raw reason bits as the CSVs write them: `0x` and 16 hex digits.
pub fn reasons_hex(reasons: u64) -> String {
    format!("0x{reasons:016x}")
}

/// NVML could not be loaded or queried; carries NVML's own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlUnavailable(pub String);

impl std::fmt::Display for NvmlUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NVML unavailable ({}); telemetry columns will be empty. \
             NVML comes with the NVIDIA driver (libnvidia-ml.so.1)",
            self.0
        )
    }
}

impl std::error::Error for NvmlUnavailable {}

pub(crate) fn unavailable(what: &str, err: NvmlError) -> NvmlUnavailable {
    NvmlUnavailable(format!("{what}: {err}"))
}

/// One reading of one device. A field is `None` when its NVML call failed (unsupported on
/// this part, or a transient error); the other fields are still kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Seconds since the sampler started.
    pub t_s: f64,
    /// The cell label set by [`Sampler::set_cell`] when the reading began; empty between cells.
    pub cell: String,
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
    /// Raw clock-event (throttle) reason bits.
    pub reasons: Option<u64>,
}

impl Reading {
    /// The `telemetry.csv` row; a missing value becomes NaN and missing reasons an empty string.
    pub fn to_sample(&self) -> TelemetrySample {
        let value = |v: Option<f64>| v.unwrap_or(f64::NAN);
        TelemetrySample {
            t_s: self.t_s,
            cell: self.cell.clone(),
            sm_clock_mhz: value(self.sm_clock_mhz),
            mem_clock_mhz: value(self.mem_clock_mhz),
            power_w: value(self.power_w),
            temp_c: value(self.temp_c),
            gpu_util_pct: value(self.gpu_util_pct),
            clock_event_reasons: self.reasons.map(reasons_hex).unwrap_or_default(),
        }
    }
}

/// What NVML saw during one cell: medians of each reading, and the reason bits OR-ed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellTelemetry {
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
    /// `None` when no reading of the cell got reason bits, so the CSV column stays empty
    /// rather than claiming "no reasons".
    pub reasons_or: Option<u64>,
    pub throttled: bool,
    /// Readings the summary was built from.
    pub readings: usize,
    /// GPM over the cell; `None` where GPM is unavailable or no interval overlapped it.
    pub gpm: Option<CellGpm>,
}

/// Summarises one cell's readings; `None` when there are none.
pub fn summarize_cell<'a>(
    readings: impl IntoIterator<Item = &'a Reading>,
) -> Option<CellTelemetry> {
    let readings: Vec<&Reading> = readings.into_iter().collect();
    if readings.is_empty() {
        return None;
    }
    let median = |field: fn(&Reading) -> Option<f64>| {
        let values: Vec<f64> = readings.iter().filter_map(|r| field(r)).collect();
        summarize(&values).map(|s| s.median)
    };
    let reasons_or = readings
        .iter()
        .filter_map(|r| r.reasons)
        .reduce(|acc, bits| acc | bits);
    Some(CellTelemetry {
        sm_clock_mhz: median(|r| r.sm_clock_mhz),
        mem_clock_mhz: median(|r| r.mem_clock_mhz),
        power_w: median(|r| r.power_w),
        temp_c: median(|r| r.temp_c),
        gpu_util_pct: median(|r| r.gpu_util_pct),
        reasons_or,
        throttled: reasons_or.is_some_and(is_throttled),
        readings: readings.len(),
        gpm: None,
    })
}

enum Command {
    /// Read now: a new cell began, so it gets at least one reading even if it is short.
    ReadNow,
    Stop,
}

struct Shared {
    started: Instant,
    cell: Mutex<String>,
    readings: Mutex<Vec<Reading>>,
    gpm: Mutex<Vec<GpmInterval>>,
}

/// Samples one device on a background thread until [`Sampler::stop`].
pub struct Sampler {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    thread: JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling device `device_index` every `period` (raised to 1 ms if shorter).
    /// Returns once NVML is loaded and the device found, or with the reason it could not be.
    pub fn start(device_index: u32, period: Duration) -> Result<Sampler, NvmlUnavailable> {
        Self::start_with_lib(OsStr::new(NVML_LIB), device_index, period)
    }

    fn start_with_lib(
        lib: &OsStr,
        device_index: u32,
        period: Duration,
    ) -> Result<Sampler, NvmlUnavailable> {
        let lib = lib.to_owned();
        Self::spawn(period, move |thread| {
            let nvml = match Nvml::builder().lib_path(&lib).init() {
                Ok(nvml) => nvml,
                Err(err) => return thread.fail(unavailable("loading NVML", err)),
            };
            match nvml.device_by_index(device_index) {
                Ok(device) => {
                    // Unavailable GPM leaves its columns empty; env.json's note says why.
                    let mut gpm = gpm::unavailable_reason(&device)
                        .is_none()
                        .then(|| GpmTracker::new(NvmlGpm { device: &device }));
                    thread.run(
                        || read_device(&device),
                        |t_s| gpm.as_mut().and_then(|g| g.tick(t_s)),
                    )
                }
                Err(err) => {
                    thread.fail(unavailable(&format!("opening device {device_index}"), err))
                }
            }
        })
    }

    /// Runs `open_and_sample` on the sampler thread and waits until it either fails or starts
    /// sampling. Kept apart from NVML so that the threading can be tested without a GPU.
    fn spawn(
        period: Duration,
        open_and_sample: impl FnOnce(SamplerThread) + Send + 'static,
    ) -> Result<Sampler, NvmlUnavailable> {
        let shared = Arc::new(Shared {
            started: Instant::now(),
            cell: Mutex::new(String::new()),
            readings: Mutex::new(Vec::new()),
            gpm: Mutex::new(Vec::new()),
        });
        let (commands, command_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread_state = SamplerThread {
            shared: Arc::clone(&shared),
            commands: command_rx,
            ready: ready_tx,
            period: period.max(MIN_PERIOD),
        };
        let thread = crate::harness::pin::spawn_helper("nvml-sampler", move || {
            open_and_sample(thread_state)
        })
        .map_err(|err| NvmlUnavailable(format!("spawning the sampler thread: {err}")))?;
        // A panic while opening NVML drops the ready sender unsent, which ends up here.
        let ready = ready_rx.recv().unwrap_or_else(|_| {
            Err(NvmlUnavailable(
                "the sampler thread panicked while loading NVML".into(),
            ))
        });
        if let Err(err) = ready {
            let _ = thread.join();
            return Err(err);
        }
        Ok(Sampler {
            shared,
            commands,
            thread,
        })
    }

    /// Tags readings from now on with `label` (empty between cells) and takes one at once.
    pub fn set_cell(&self, label: &str) {
        *lock(&self.shared.cell) = label.to_owned();
        // A send fails only if the thread is gone; readings then simply stop.
        let _ = self.commands.send(Command::ReadNow);
    }

    /// Summary of the readings tagged `label` so far; `None` when there are none (a cell
    /// shorter than one NVML read can end before its first reading lands).
    pub fn cell_summary(&self, label: &str) -> Option<CellTelemetry> {
        let readings = lock(&self.shared.readings);
        let summary = summarize_cell(readings.iter().filter(|r| r.cell == label))?;
        let intervals = lock(&self.shared.gpm);
        // Without GPM intervals (no GPM here, or none closed yet) there is nothing to share
        // out: skip listing every reading of the run while the sampler waits on the lock.
        let gpm = (!intervals.is_empty()).then(|| {
            let times: Vec<(f64, &str)> =
                readings.iter().map(|r| (r.t_s, r.cell.as_str())).collect();
            cell_gpm(&times, &intervals, label)
        });
        Some(CellTelemetry {
            gpm: gpm.flatten(),
            ..summary
        })
    }

    /// Every reading so far, in time order, as `telemetry.csv` rows; sampling goes on.
    pub fn samples(&self) -> Vec<TelemetrySample> {
        lock(&self.shared.readings)
            .iter()
            .map(Reading::to_sample)
            .collect()
    }

    /// Stops the thread and returns every reading, in time order, as `telemetry.csv` rows.
    pub fn stop(self) -> Vec<TelemetrySample> {
        let _ = self.commands.send(Command::Stop);
        // A panicked sampler thread still leaves the readings it took before.
        let _ = self.thread.join();
        let readings = std::mem::take(&mut *lock(&self.shared.readings));
        readings.iter().map(Reading::to_sample).collect()
    }
}

/// Locks ignoring poisoning: the data (a label, a list of readings) stays valid even if a
/// holder panicked, and telemetry must never take the benchmark down.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The sampler thread's side: report how opening the device went, then sample.
struct SamplerThread {
    shared: Arc<Shared>,
    commands: mpsc::Receiver<Command>,
    ready: mpsc::SyncSender<Result<(), NvmlUnavailable>>,
    period: Duration,
}

impl SamplerThread {
    fn fail(self, err: NvmlUnavailable) {
        let _ = self.ready.send(Err(err));
    }

    /// Reports success, then calls `read` every period and on each [`Command::ReadNow`]
    /// until stopped; `read` fills the device values, this loop the time and cell. `gpm` is
    /// told the time of each reading and returns the GPM interval that closes then, if any.
    fn run(
        self,
        mut read: impl FnMut() -> Reading,
        mut gpm: impl FnMut(f64) -> Option<GpmInterval>,
    ) {
        let _ = self.ready.send(Ok(()));
        let mut next = Instant::now();
        loop {
            match self
                .commands
                .recv_timeout(next.saturating_duration_since(Instant::now()))
            {
                Ok(Command::ReadNow) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // Keep a fixed cadence, but skip missed ticks rather than burst to catch up.
                    next = (next + self.period).max(Instant::now());
                }
                Ok(Command::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            let t_s = self.shared.started.elapsed().as_secs_f64();
            let cell = lock(&self.shared.cell).clone();
            let reading = Reading {
                t_s,
                cell,
                ..read()
            };
            lock(&self.shared.readings).push(reading);
            if let Some(interval) = gpm(t_s) {
                lock(&self.shared.gpm).push(interval);
            }
        }
    }
}

fn read_device(device: &Device) -> Reading {
    Reading {
        sm_clock_mhz: device.clock_info(Clock::SM).ok().map(f64::from),
        mem_clock_mhz: device.clock_info(Clock::Memory).ok().map(f64::from),
        power_w: device.power_usage().ok().map(milli_to_unit),
        temp_c: device
            .temperature(TemperatureSensor::Gpu)
            .ok()
            .map(f64::from),
        gpu_util_pct: device.utilization_rates().ok().map(|u| f64::from(u.gpu)),
        reasons: clock_event_reasons(device).ok(),
        ..Reading::default()
    }
}

fn milli_to_unit(milli: u32) -> f64 {
    f64::from(milli) / 1000.0
}

/// Raw reason bits, through the NVML 13 clock-events call where the driver has it and the
/// deprecated throttle-reasons call otherwise. The wrapper only offers the latter, and drops
/// bits it does not know, so both are called through its raw symbol table.
fn clock_event_reasons(device: &Device) -> Result<u64, NvmlError> {
    let lib = device.nvml().lib();
    let sym = nvml_sym(
        lib.nvmlDeviceGetCurrentClocksEventReasons
            .as_ref()
            .or(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref()),
    )?;
    let mut reasons = 0;
    // SAFETY: `device` holds a live handle from this NVML instance, and `reasons` is a valid
    // out-pointer of the C type (`unsigned long long`) the symbol's signature declares.
    nvml_try(unsafe { sym(device.handle(), &mut reasons) })?;
    Ok(reasons)
}

/// NVML facts that do not change during a run, for `env.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticInfo {
    pub gpu_name: String,
    pub device_count: u32,
    /// e.g. `580.159.03`.
    pub driver_version: String,
    /// The CUDA version the driver supports, e.g. `13.0`.
    pub cuda_driver_version: String,
    pub sm_clock_max_mhz: Option<u32>,
    pub mem_clock_max_mhz: Option<u32>,
    /// Enforced power limit.
    pub power_limit_w: Option<f64>,
    /// Why GPM metrics are unavailable, one line; `None` when they are available.
    pub gpm_note: Option<String>,
}

impl StaticInfo {
    /// Fills the NVML fields of `env`; the GPU name and count only where the CUDA side left
    /// them empty, since CUDA's view (with `CUDA_VISIBLE_DEVICES`) is what the run used.
    pub fn fill_env(&self, env: &mut EnvRecord) {
        if env.gpu_name.is_empty() {
            env.gpu_name = self.gpu_name.clone();
        }
        if env.gpu_count == 0 {
            env.gpu_count = self.device_count;
        }
        env.driver_version = self.driver_version.clone();
        env.cuda_driver_version = self.cuda_driver_version.clone();
        env.sm_clock_max_mhz = self.sm_clock_max_mhz;
        env.mem_clock_max_mhz = self.mem_clock_max_mhz;
        env.power_limit_w = self.power_limit_w;
        if let Some(note) = &self.gpm_note {
            if !env.notes.contains(note) {
                env.notes.push(note.clone());
            }
        }
    }
}

/// Reads [`StaticInfo`] for device `device_index`.
pub fn read_static(device_index: u32) -> Result<StaticInfo, NvmlUnavailable> {
    read_static_with_lib(OsStr::new(NVML_LIB), device_index)
}

fn read_static_with_lib(lib: &OsStr, device_index: u32) -> Result<StaticInfo, NvmlUnavailable> {
    let lib = lib.to_owned();
    // On its own thread for the same reason as the sampler: a panic while loading NVML
    // becomes an error.
    std::thread::spawn(move || {
        let nvml = Nvml::builder()
            .lib_path(&lib)
            .init()
            .map_err(|e| unavailable("loading NVML", e))?;
        let device = nvml
            .device_by_index(device_index)
            .map_err(|e| unavailable(&format!("opening device {device_index}"), e))?;
        let cuda = nvml
            .sys_cuda_driver_version()
            .map_err(|e| unavailable("reading the CUDA driver version", e))?;
        Ok(StaticInfo {
            gpu_name: device
                .name()
                .map_err(|e| unavailable("reading the GPU name", e))?,
            device_count: nvml
                .device_count()
                .map_err(|e| unavailable("counting devices", e))?,
            driver_version: nvml
                .sys_driver_version()
                .map_err(|e| unavailable("reading the driver version", e))?,
            cuda_driver_version: format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(cuda),
                nvml_wrapper::cuda_driver_version_minor(cuda)
            ),
            sm_clock_max_mhz: device.max_clock_info(Clock::SM).ok(),
            mem_clock_max_mhz: device.max_clock_info(Clock::Memory).ok(),
            power_limit_w: device.enforced_power_limit().ok().map(milli_to_unit),
            gpm_note: gpm::unavailable_reason(&device),
        })
    })
    .join()
    .unwrap_or_else(|_| Err(NvmlUnavailable("a panic while reading NVML".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MISSING_LIB: &str = "libnvidia-ml-metaprep-test-missing.so.1";

    fn reading(cell: &str, sm: Option<f64>, reasons: Option<u64>) -> Reading {
        Reading {
            cell: cell.into(),
            sm_clock_mhz: sm,
            mem_clock_mhz: Some(2619.0),
            power_w: Some(120.5),
            temp_c: Some(40.0),
            gpu_util_pct: Some(100.0),
            reasons,
            ..Reading::default()
        }
    }

    #[test]
    fn reason_bits_match_nvml_header() {
        // Values from nvml.h (`nvmlClocksEventReason*`).
        assert_eq!(REASON_GPU_IDLE, 0x1);
        assert_eq!(REASON_APPLICATIONS_CLOCKS_SETTING, 0x2);
        assert_eq!(REASON_SW_POWER_CAP, 0x4);
        assert_eq!(REASON_HW_SLOWDOWN, 0x8);
        assert_eq!(REASON_SYNC_BOOST, 0x10);
        assert_eq!(REASON_SW_THERMAL_SLOWDOWN, 0x20);
        assert_eq!(REASON_HW_THERMAL_SLOWDOWN, 0x40);
        assert_eq!(REASON_HW_POWER_BRAKE_SLOWDOWN, 0x80);
        assert_eq!(REASON_DISPLAY_CLOCK_SETTING, 0x100);
    }

    #[test]
    fn idle_and_application_clocks_are_not_throttling() {
        assert!(!is_throttled(0));
        assert!(!is_throttled(REASON_GPU_IDLE));
        assert!(!is_throttled(REASON_APPLICATIONS_CLOCKS_SETTING));
        assert!(!is_throttled(
            REASON_GPU_IDLE | REASON_APPLICATIONS_CLOCKS_SETTING
        ));
        // An unknown future bit is recorded but not classified.
        assert!(!is_throttled(1 << 40));
    }

    #[test]
    fn every_slowdown_bit_is_throttling() {
        for bit in [0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100] {
            assert!(is_throttled(bit), "{bit:#x}");
            assert!(is_throttled(bit | REASON_GPU_IDLE), "{bit:#x} with idle");
        }
    }

    #[test]
    fn hex_is_zero_padded_to_16_digits() {
        assert_eq!(reasons_hex(0), "0x0000000000000000");
        assert_eq!(reasons_hex(0x44), "0x0000000000000044");
        assert_eq!(reasons_hex(u64::MAX), "0xffffffffffffffff");
    }

    #[test]
    fn cell_summary_takes_medians_and_ors_reasons() {
        let readings = [
            reading("a", Some(1980.0), Some(REASON_GPU_IDLE)),
            reading("a", Some(1500.0), Some(REASON_SW_POWER_CAP)),
            reading("a", Some(1900.0), None),
            reading("a", None, Some(REASON_APPLICATIONS_CLOCKS_SETTING)),
        ];
        let t = summarize_cell(&readings).unwrap();
        assert_eq!(t.sm_clock_mhz, Some(1900.0)); // median of the three present
        assert_eq!(t.power_w, Some(120.5));
        assert_eq!(t.reasons_or, Some(0x7));
        assert!(t.throttled);
        assert_eq!(t.readings, 4);
    }

    #[test]
    fn cell_summary_without_slowdown_is_not_throttled() {
        let readings = [
            reading("a", Some(1980.0), Some(REASON_GPU_IDLE)),
            reading("a", Some(1970.0), Some(REASON_APPLICATIONS_CLOCKS_SETTING)),
        ];
        let t = summarize_cell(&readings).unwrap();
        assert_eq!(t.sm_clock_mhz, Some(1975.0));
        assert_eq!(t.reasons_or, Some(0x3));
        assert!(!t.throttled);
    }

    #[test]
    fn cell_summary_keeps_missing_values_missing() {
        assert!(summarize_cell(&[]).is_none());
        let t = summarize_cell(&[reading("a", None, None)]).unwrap();
        assert_eq!(
            (t.sm_clock_mhz, t.reasons_or, t.throttled),
            (None, None, false)
        );
    }

    #[test]
    fn reading_to_sample_marks_missing_values() {
        let full = reading("dspark/graph/4/5/tp1", Some(1980.0), Some(0x44)).to_sample();
        assert_eq!(full.cell, "dspark/graph/4/5/tp1");
        assert_eq!(full.sm_clock_mhz, 1980.0);
        assert_eq!(full.clock_event_reasons, "0x0000000000000044");
        let empty = reading("", None, None).to_sample();
        assert!(empty.sm_clock_mhz.is_nan());
        assert_eq!(empty.clock_event_reasons, "");
    }

    #[test]
    fn static_info_fills_env_without_overriding_cuda_view() {
        let info = StaticInfo {
            gpu_name: "NVIDIA H200".into(),
            device_count: 8,
            driver_version: "580.159.03".into(),
            cuda_driver_version: "13.0".into(),
            sm_clock_max_mhz: Some(1980),
            mem_clock_max_mhz: Some(3201),
            power_limit_w: Some(700.0),
            gpm_note: Some("GPM metrics unavailable: test".into()),
        };
        let mut env = EnvRecord::default();
        info.fill_env(&mut env);
        assert_eq!((env.gpu_name.as_str(), env.gpu_count), ("NVIDIA H200", 8));
        assert_eq!(env.driver_version, "580.159.03");
        assert_eq!(env.cuda_driver_version, "13.0");
        assert_eq!(env.sm_clock_max_mhz, Some(1980));
        assert_eq!(env.power_limit_w, Some(700.0));
        assert_eq!(env.notes, vec!["GPM metrics unavailable: test".to_string()]);
        info.fill_env(&mut env);
        assert_eq!(env.notes.len(), 1, "the note is added once");
        let mut cuda_env = EnvRecord {
            gpu_name: "NVIDIA H200 (CUDA)".into(),
            gpu_count: 2,
            ..EnvRecord::default()
        };
        info.fill_env(&mut cuda_env);
        assert_eq!(
            (cuda_env.gpu_name.as_str(), cuda_env.gpu_count),
            ("NVIDIA H200 (CUDA)", 2)
        );
    }

    /// Polls until `done` holds, failing after a few seconds rather than hanging.
    fn wait_for(done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for the sampler"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A sampler over a fake device whose SM clock counts readings and whose GPM closes an
    /// interval at every reading, at 75% SM and 25% DRAM utilisation.
    fn fake_sampler(period: Duration) -> Sampler {
        Sampler::spawn(period, |thread| {
            let mut count = 0.0;
            let mut last_t = None;
            thread.run(
                move || {
                    count += 1.0;
                    reading("ignored", Some(count), Some(REASON_GPU_IDLE))
                },
                move |t_s| {
                    let t0_s = last_t.replace(t_s)?;
                    Some(GpmInterval {
                        t0_s,
                        t1_s: t_s,
                        values: gpm::GpmValues {
                            sm_util_pct: Some(75.0),
                            dram_bw_util_pct: Some(25.0),
                            ..gpm::GpmValues::default()
                        },
                    })
                },
            )
        })
        .expect("a fake device always opens")
    }

    #[test]
    fn a_cell_summary_carries_the_gpm_of_its_intervals() {
        let sampler = fake_sampler(Duration::from_secs(3600));
        sampler.set_cell("a");
        wait_for(|| sampler.cell_summary("a").is_some());
        // The interval that closes at b's first reading is a's, whole.
        sampler.set_cell("b");
        wait_for(|| sampler.cell_summary("a").is_some_and(|s| s.gpm.is_some()));
        let gpm = sampler.cell_summary("a").unwrap().gpm.unwrap();
        let close = |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() < 1e-9);
        assert!(close(gpm.values.sm_util_pct, 75.0), "{gpm:?}");
        assert!(close(gpm.values.dram_bw_util_pct, 25.0), "{gpm:?}");
        assert!(close(Some(gpm.cell_share_pct), 100.0), "{gpm:?}");
        assert_eq!(gpm.values.nvlink_rx_mib_s, None);
        sampler.stop();
    }

    #[test]
    fn set_cell_tags_readings_and_reads_at_once() {
        // An hour-long period: every reading after the first comes from `set_cell`.
        let sampler = fake_sampler(Duration::from_secs(3600));
        sampler.set_cell("a");
        wait_for(|| sampler.cell_summary("a").is_some());
        sampler.set_cell("b");
        wait_for(|| sampler.cell_summary("b").is_some());
        assert_eq!(
            sampler.cell_summary("a").unwrap().reasons_or,
            Some(REASON_GPU_IDLE)
        );
        assert!(sampler.cell_summary("never-set").is_none());
        let samples = sampler.stop();
        assert!(samples.len() <= 4, "{samples:?}");
        let cells: Vec<&str> = samples.iter().map(|s| s.cell.as_str()).collect();
        let first_b = cells.iter().position(|c| *c == "b").unwrap();
        assert!(cells[first_b..].iter().all(|c| *c == "b"), "{cells:?}");
        assert!(samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
        // The loop, not the reader, sets the cell: "ignored" never shows.
        assert!(samples.iter().all(|s| s.cell != "ignored"));
    }

    #[test]
    fn samples_every_period_without_bursting() {
        let sampler = fake_sampler(Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(100));
        let n = sampler.stop().len();
        // About 20 expected; loose bounds for a loaded test machine.
        assert!((3..=30).contains(&n), "{n} readings in 100 ms at 5 ms");
    }

    #[test]
    fn open_failure_and_panic_become_errors() {
        let err = Sampler::spawn(DEFAULT_PERIOD, |thread| {
            thread.fail(NvmlUnavailable("no device 3".into()))
        })
        .err()
        .unwrap();
        assert_eq!(err.0, "no device 3");
        let err = Sampler::spawn(DEFAULT_PERIOD, |_| panic!("simulated NVML loader panic"))
            .err()
            .unwrap();
        assert!(err.0.contains("panicked"), "{err}");
    }

    #[test]
    fn missing_library_is_an_error_not_a_panic() {
        let err = Sampler::start_with_lib(OsStr::new(MISSING_LIB), 0, DEFAULT_PERIOD)
            .err()
            .expect("a missing NVML library must fail to start");
        assert!(err.0.contains("loading NVML"), "{err}");
        assert!(err.to_string().contains("NVML unavailable"), "{err}");
        let err = read_static_with_lib(OsStr::new(MISSING_LIB), 0).unwrap_err();
        assert!(err.0.contains("loading NVML"), "{err}");
    }

    /// On a machine without the driver this checks the error path of the real entry points;
    /// on a GPU host it exercises sampling end to end.
    #[test]
    fn real_nvml_starts_or_reports_why_not() {
        match Sampler::start(0, Duration::from_millis(5)) {
            Err(err) => {
                assert!(!err.0.is_empty());
                assert!(read_static(0).is_err());
            }
            Ok(sampler) => {
                sampler.set_cell("cell-a");
                std::thread::sleep(Duration::from_millis(30));
                sampler.set_cell("");
                let summary = sampler.cell_summary("cell-a").expect("readings for cell-a");
                assert!(summary.readings >= 1);
                let samples = sampler.stop();
                assert!(samples.iter().any(|s| s.cell == "cell-a"));
                assert!(samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
                let info = read_static(0).expect("static NVML info where sampling works");
                assert!(info.device_count >= 1 && !info.gpu_name.is_empty());
            }
        }
    }
}
