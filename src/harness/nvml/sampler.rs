//! The background sampler: its thread, the cell tag, and the NVML reads it takes.

use super::{milli_to_unit, summarize_cell, unavailable, CellTelemetry, NvmlUnavailable, Reading};
use super::{MIN_PERIOD, NVML_LIB};
use crate::gpu::nvml::clock_event_reasons;
use crate::harness::gpm::{self, cell_gpm, GpmInterval, GpmTracker, NvmlGpm};
use crate::results::telemetry::TelemetrySample;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::{Device, Nvml};
use std::ffi::OsStr;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// Starts sampling the device at PCI bus id `pci_bus_id` (a CUDA device's:
    /// `gpu::probe::pci_bus_id`) every `period` (raised to 1 ms if shorter). Returns once
    /// NVML is loaded and the device found, or with the reason it could not be.
    pub fn start(pci_bus_id: &str, period: Duration) -> Result<Sampler, NvmlUnavailable> {
        Self::start_with_lib(OsStr::new(NVML_LIB), pci_bus_id, period)
    }

    pub(super) fn start_with_lib(
        lib: &OsStr,
        pci_bus_id: &str,
        period: Duration,
    ) -> Result<Sampler, NvmlUnavailable> {
        let lib = lib.to_owned();
        let pci_bus_id = pci_bus_id.to_string();
        Self::spawn(period, move |thread| {
            let nvml = match Nvml::builder().lib_path(&lib).init() {
                Ok(nvml) => nvml,
                Err(err) => return thread.fail(unavailable("loading NVML", err)),
            };
            match super::device_at(&nvml, &pci_bus_id) {
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
                Err(err) => thread.fail(err),
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::reading;
    use super::super::{DEFAULT_PERIOD, REASON_GPU_IDLE};
    use super::*;

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
}
