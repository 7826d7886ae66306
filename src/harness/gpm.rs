//! GPM (GPU Performance Monitoring, Hopper and newer) metrics per cell: SM activity, DRAM
//! bandwidth utilisation and NVLink traffic.
//!
//! GPM works from pairs of samples: a metric is an average over the interval between two
//! `nvmlGpmSampleGet` calls, which NVML asks to be at least 100 ms apart (its counters refresh
//! at that rate). The NVML sampler thread ([`super::nvml`]) feeds a [`GpmTracker`] on each of
//! its readings; the tracker closes an interval once 100 ms have passed since its last sample.
//! A sweep's cells last a few ms per visit, so an interval usually spans several cells:
//! [`cell_gpm`] weights each interval by the time the cell ran inside it and reports that
//! share (`gpm_cell_share_pct`), so a figure blended with neighbouring cells says so.
//!
//! The NVML calls sit behind [`GpmSource`]; the arithmetic is tested with a fake source.

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{gpm_metrics_get, GpmSample};
use nvml_wrapper::Device;

/// How the `env.json` / `metaprep info` note about missing GPM begins.
pub const UNAVAILABLE_NOTE: &str = "GPM metrics unavailable";

/// NVML's shortest interval between the two samples of a GPM metric, in seconds.
pub const MIN_INTERVAL_S: f64 = 0.1;

/// Metrics over one interval; a field is `None` when NVML did not give it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpmValues {
    /// `NVML_GPM_METRIC_SM_UTIL`: % of time an SM had at least one warp, averaged over SMs.
    pub sm_util_pct: Option<f64>,
    /// `NVML_GPM_METRIC_DRAM_BW_UTIL`: % of peak DRAM bandwidth used.
    pub dram_bw_util_pct: Option<f64>,
    /// `NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC` / `_TX_`: all links, MiB/s (nvml.h's unit).
    pub nvlink_rx_mib_s: Option<f64>,
    pub nvlink_tx_mib_s: Option<f64>,
}

/// The metrics between two samples taken at `t0_s` and `t1_s` (sampler seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct GpmInterval {
    pub t0_s: f64,
    pub t1_s: f64,
    pub values: GpmValues,
}

/// Where GPM samples come from: NVML on a real device, a fake in tests.
pub trait GpmSource {
    type Sample;
    fn sample(&mut self) -> Result<Self::Sample, String>;
    fn metrics(
        &mut self,
        earlier: &Self::Sample,
        later: &Self::Sample,
    ) -> Result<GpmValues, String>;
}

/// Turns a stream of sampler ticks into GPM intervals of at least [`MIN_INTERVAL_S`].
pub struct GpmTracker<S: GpmSource> {
    source: S,
    /// The last sample and when it was taken: the start of the interval now open.
    base: Option<(f64, S::Sample)>,
}

impl<S: GpmSource> GpmTracker<S> {
    pub fn new(source: S) -> Self {
        Self { source, base: None }
    }

    /// Called on every sampler reading at `t_s`: returns the interval that closes now, if one
    /// is old enough. A failed sample or metric read drops that interval and starts afresh,
    /// so one transient NVML error costs one interval, not the run's GPM columns.
    pub fn tick(&mut self, t_s: f64) -> Option<GpmInterval> {
        if let Some((t0, _)) = &self.base {
            if t_s - t0 < MIN_INTERVAL_S {
                return None;
            }
        }
        let later = self.source.sample();
        let earlier = self.base.take();
        let later = later.ok()?;
        let interval = earlier.and_then(|(t0_s, earlier)| {
            let values = self.source.metrics(&earlier, &later).ok()?;
            Some(GpmInterval {
                t0_s,
                t1_s: t_s,
                values,
            })
        });
        self.base = Some((t_s, later));
        interval
    }
}

/// GPM over one cell: each metric's mean over the intervals that overlap the cell, weighted
/// by how long the cell ran inside each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellGpm {
    pub values: GpmValues,
    /// The cell's share (%) of the time those intervals cover: 100 when they lie wholly
    /// inside the cell, lower when they blend in the cells around it.
    pub cell_share_pct: f64,
}

/// GPM of the cell `label`, given the sampler's readings as (time, cell) in time order (each
/// reading's cell holds until the next reading) and the GPM intervals in time order. `None`
/// when no interval overlaps the cell.
pub fn cell_gpm(
    readings: &[(f64, &str)],
    intervals: &[GpmInterval],
    label: &str,
) -> Option<CellGpm> {
    let mut overlap_total = 0.0;
    let mut covered_total = 0.0;
    let mut sums = WeightedMeans::default();
    let mut first = 0; // the first reading that can still overlap the next interval
    for interval in intervals {
        while first + 1 < readings.len() && readings[first + 1].0 <= interval.t0_s {
            first += 1;
        }
        let mut overlap = 0.0;
        for (k, &(start, cell)) in readings.iter().enumerate().skip(first) {
            if start >= interval.t1_s {
                break;
            }
            let end = readings.get(k + 1).map_or(f64::INFINITY, |r| r.0);
            if cell == label {
                overlap += (end.min(interval.t1_s) - start.max(interval.t0_s)).max(0.0);
            }
        }
        if overlap > 0.0 {
            overlap_total += overlap;
            covered_total += interval.t1_s - interval.t0_s;
            sums.add(&interval.values, overlap);
        }
    }
    (overlap_total > 0.0).then(|| CellGpm {
        values: sums.means(),
        cell_share_pct: 100.0 * overlap_total / covered_total,
    })
}

/// Per-metric weighted sums, each over the intervals that have that metric.
#[derive(Default)]
struct WeightedMeans {
    /// (Σ weight·value, Σ weight) for sm util, DRAM BW, NVLink RX, NVLink TX.
    sums: [(f64, f64); 4],
}

impl WeightedMeans {
    fn fields(v: &GpmValues) -> [Option<f64>; 4] {
        [
            v.sm_util_pct,
            v.dram_bw_util_pct,
            v.nvlink_rx_mib_s,
            v.nvlink_tx_mib_s,
        ]
    }

    fn add(&mut self, values: &GpmValues, weight: f64) {
        for (sum, value) in self.sums.iter_mut().zip(Self::fields(values)) {
            if let Some(v) = value.filter(|v| v.is_finite()) {
                sum.0 += weight * v;
                sum.1 += weight;
            }
        }
    }

    fn means(&self) -> GpmValues {
        let mean = |(sum, weight): (f64, f64)| (weight > 0.0).then(|| sum / weight);
        let [sm, dram, rx, tx] = self.sums.map(mean);
        GpmValues {
            sm_util_pct: sm,
            dram_bw_util_pct: dram,
            nvlink_rx_mib_s: rx,
            nvlink_tx_mib_s: tx,
        }
    }
}

/// Why GPM cannot be used on `device`, as one line for `env.json` and `metaprep info`;
/// `None` when it can.
pub fn unavailable_reason(device: &Device) -> Option<String> {
    let why = match device.gpm_support() {
        Ok(true) => match device.mig_mode() {
            Ok(mode) if mode.current != 0 => Some(
                "the GPU is in MIG mode (whole-device GPM samples are refused there)".to_string(),
            ),
            // A GPU without MIG answers NotSupported: nothing stands in the way.
            _ => device
                .gpm_sample()
                .err()
                .map(|e| format!("taking a GPM sample failed: {e}")),
        },
        Ok(false) => Some("this GPU does not support it (Hopper or newer needed)".into()),
        Err(e) => Some(format!(
            "NVML cannot query it ({e}); a driver of 520 or newer has GPM"
        )),
    }?;
    Some(format!(
        "{UNAVAILABLE_NOTE}: {why}; the gpm_* columns stay empty"
    ))
}

/// GPM from NVML on one device.
pub struct NvmlGpm<'nvml, 'device> {
    pub device: &'device Device<'nvml>,
}

/// The metrics asked of NVML, in [`GpmValues`] field order.
const METRICS: [GpmMetricId; 4] = [
    GpmMetricId::SmUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::NvlinkTotalRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
];

impl<'nvml> GpmSource for NvmlGpm<'nvml, '_> {
    type Sample = GpmSample<'nvml>;

    fn sample(&mut self) -> Result<Self::Sample, String> {
        self.device.gpm_sample().map_err(|e| e.to_string())
    }

    fn metrics(
        &mut self,
        earlier: &Self::Sample,
        later: &Self::Sample,
    ) -> Result<GpmValues, String> {
        let results = gpm_metrics_get(self.device.nvml(), earlier, later, &METRICS)
            .map_err(|e| e.to_string())?;
        let value = |i: usize| -> Option<f64> {
            results
                .get(i)
                .and_then(|r| r.as_ref().ok())
                .map(|r| r.value)
                .filter(|v| v.is_finite())
        };
        Ok(GpmValues {
            sm_util_pct: value(0),
            dram_bw_util_pct: value(1),
            nvlink_rx_mib_s: value(2),
            nvlink_tx_mib_s: value(3),
        })
    }
}

/// NVML's own name and unit of each metric asked for, read over a short interval; for the
/// GPU test, which prints them so the units can be checked against the column names.
pub fn describe_metrics(device: &Device) -> Result<Vec<String>, NvmlError> {
    let earlier = device.gpm_sample()?;
    std::thread::sleep(std::time::Duration::from_secs_f64(MIN_INTERVAL_S * 1.5));
    let later = device.gpm_sample()?;
    Ok(gpm_metrics_get(device.nvml(), &earlier, &later, &METRICS)?
        .into_iter()
        .zip(METRICS)
        .map(|(r, id)| match r {
            Ok(r) => format!(
                "{id:?}: {} = {} {}",
                r.metric_info.short_name, r.value, r.metric_info.unit
            ),
            Err(e) => format!("{id:?}: {e}"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake device whose samples are the tick number and whose DRAM utilisation over an
    /// interval is the later sample's number; sample `fail_at` fails.
    struct Fake {
        next: u32,
        fail_at: Option<u32>,
        metric_calls: Vec<(u32, u32)>,
    }

    impl GpmSource for Fake {
        type Sample = u32;
        fn sample(&mut self) -> Result<u32, String> {
            self.next += 1;
            if Some(self.next) == self.fail_at {
                return Err("transient".into());
            }
            Ok(self.next)
        }
        fn metrics(&mut self, a: &u32, b: &u32) -> Result<GpmValues, String> {
            self.metric_calls.push((*a, *b));
            Ok(GpmValues {
                dram_bw_util_pct: Some(f64::from(*b)),
                ..GpmValues::default()
            })
        }
    }

    fn tracker(fail_at: Option<u32>) -> GpmTracker<Fake> {
        GpmTracker::new(Fake {
            next: 0,
            fail_at,
            metric_calls: Vec::new(),
        })
    }

    #[test]
    fn intervals_close_only_after_the_minimum() {
        let mut t = tracker(None);
        assert_eq!(t.tick(0.0), None); // first sample opens an interval
        assert_eq!(t.tick(0.05), None); // too soon: no sample taken
        let i = t.tick(0.12).unwrap();
        assert_eq!((i.t0_s, i.t1_s), (0.0, 0.12));
        assert_eq!(i.values.dram_bw_util_pct, Some(2.0));
        assert_eq!(t.tick(0.2), None);
        let i = t.tick(0.25).unwrap();
        assert_eq!((i.t0_s, i.t1_s), (0.12, 0.25));
        assert_eq!(t.source.metric_calls, vec![(1, 2), (2, 3)]);
    }

    #[test]
    fn a_failed_sample_costs_one_interval() {
        let mut t = tracker(Some(2));
        assert_eq!(t.tick(0.0), None);
        assert_eq!(t.tick(0.2), None); // sample 2 fails: interval dropped
        assert_eq!(t.tick(0.25), None); // sample 3 opens a new interval at once
        let i = t.tick(0.4).unwrap();
        assert_eq!((i.t0_s, i.t1_s), (0.25, 0.4));
    }

    fn assert_close(got: Option<f64>, want: f64) {
        let got = got.expect("a value");
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    }

    fn interval(t0_s: f64, t1_s: f64, sm: f64, dram: Option<f64>) -> GpmInterval {
        GpmInterval {
            t0_s,
            t1_s,
            values: GpmValues {
                sm_util_pct: Some(sm),
                dram_bw_util_pct: dram,
                nvlink_rx_mib_s: Some(0.0),
                nvlink_tx_mib_s: None,
            },
        }
    }

    #[test]
    fn a_cell_inside_its_intervals_takes_their_time_weighted_mean() {
        let readings = [(0.0, "a"), (0.05, "a"), (0.4, "b")];
        let intervals = [
            interval(0.0, 0.1, 20.0, Some(10.0)),
            interval(0.1, 0.4, 60.0, Some(50.0)),
        ];
        let g = cell_gpm(&readings, &intervals, "a").unwrap();
        assert_close(g.values.sm_util_pct, 50.0); // (20·0.1 + 60·0.3) / 0.4
        assert_close(g.values.dram_bw_util_pct, 40.0);
        assert_eq!(g.values.nvlink_rx_mib_s, Some(0.0));
        assert_eq!(g.values.nvlink_tx_mib_s, None);
        assert_close(Some(g.cell_share_pct), 100.0);
        assert!(cell_gpm(&readings, &intervals, "b").is_none()); // b starts as they end
        assert!(cell_gpm(&readings, &intervals, "never").is_none());
    }

    #[test]
    fn short_cells_blend_and_say_how_much() {
        // a, b, a, "" in turn; one interval over all of it, another over the idle tail.
        let readings = [(0.0, "a"), (0.02, "b"), (0.05, "a"), (0.07, ""), (0.3, "")];
        let intervals = [
            interval(0.0, 0.1, 80.0, Some(30.0)),
            interval(0.1, 0.3, 0.0, None),
        ];
        let a = cell_gpm(&readings, &intervals, "a").unwrap();
        assert_close(a.values.sm_util_pct, 80.0);
        assert_close(Some(a.cell_share_pct), 40.0); // 0.02 + 0.02 of 0.1
        let b = cell_gpm(&readings, &intervals, "b").unwrap();
        assert_close(Some(b.cell_share_pct), 30.0);
        // The idle label spans both intervals; DRAM is missing in the second, so its mean
        // comes from the first alone.
        let idle = cell_gpm(&readings, &intervals, "").unwrap();
        assert_close(idle.values.dram_bw_util_pct, 30.0);
        assert_close(idle.values.sm_util_pct, 80.0 * 0.03 / 0.23);
    }

    #[test]
    fn a_cell_visited_in_rounds_gathers_every_visit() {
        let readings = [(0.0, "a"), (0.2, "b"), (0.4, "a"), (0.6, "b")];
        let intervals = [
            interval(0.0, 0.2, 10.0, None),
            interval(0.2, 0.4, 90.0, None),
            interval(0.4, 0.6, 30.0, None),
        ];
        let a = cell_gpm(&readings, &intervals, "a").unwrap();
        assert_close(a.values.sm_util_pct, 20.0);
        assert_close(Some(a.cell_share_pct), 100.0);
    }
}
