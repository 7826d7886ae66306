//! NVML telemetry over the run: SM clock above, board power below, on one time axis, with
//! the limits from the environment record and the samples where the GPU was throttled.

use super::kit::{self, frame, trimmed, Chart, Drawn, Rendered, GREY, LIGHT_GREY, WIDE_CHART_SIZE};
use crate::results::env::EnvRecord;
use crate::results::telemetry::TelemetrySample;
use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// NVML's "GPU idle" clock-event reason: clocks drop because there is no work, which is
/// not throttling.
const REASON_GPU_IDLE: u64 = 0x1;

/// Whether a sample's clock-event reasons include anything but idle. Empty means no NVML
/// reading; anything else that is not hex is an error, since it means a corrupt file.
fn throttled(sample: &TelemetrySample) -> Result<bool> {
    match sample.reason_bits() {
        Ok(bits) => Ok(bits.is_some_and(|bits| bits & !REASON_GPU_IDLE != 0)),
        Err(e) => bail!(
            "telemetry sample at {} s has {e}; the telemetry file is corrupt",
            sample.t_s
        ),
    }
}

/// SM clock and power against time, written as `telemetry`.
pub fn telemetry_chart(
    dir: &Path,
    samples: &[TelemetrySample],
    env: &EnvRecord,
) -> Result<Rendered> {
    if samples.is_empty() {
        return Ok(Rendered::Skipped {
            reason: "no telemetry samples (NVML unavailable or not sampled)".into(),
        });
    }
    let throttled = samples
        .iter()
        .map(throttled)
        .collect::<Result<Vec<bool>>>()?;
    let chart = Telemetry {
        samples,
        throttled,
        env: env.clone(),
    };
    kit::write_chart(dir, "telemetry", WIDE_CHART_SIZE, &chart)
}

struct Telemetry<'a> {
    samples: &'a [TelemetrySample],
    throttled: Vec<bool>,
    env: EnvRecord,
}

const CLOCK: RGBColor = RGBColor(31, 119, 180);
const POWER: RGBColor = RGBColor(255, 127, 14);
const THROTTLE: RGBColor = RGBColor(214, 39, 40);

/// One panel's worth: a series, its axis description and an optional limit line.
struct Trace<'a> {
    title: &'a str,
    y_desc: &'a str,
    values: Vec<(f64, f64)>,
    colour: RGBColor,
    limit: Option<(String, f64)>,
}

impl Telemetry<'_> {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        trace: &Trace,
        x_range: std::ops::Range<f64>,
    ) -> Result<()> {
        let top = trace
            .values
            .iter()
            .map(|v| v.1)
            .chain(trace.limit.as_ref().map(|l| l.1))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(trace.title, kit::font(18))
            .margin(8)
            .margin_right(20)
            .x_label_area_size(42)
            .y_label_area_size(66)
            .build_cartesian_2d(x_range.clone(), 0.0..(top * 1.1).max(1.0))
            .drawn()?;
        chart
            .configure_mesh()
            .x_desc("time since start of run (s)")
            .y_desc(trace.y_desc)
            .axis_desc_style(kit::font(14))
            .label_style(kit::font(14))
            .light_line_style(TRANSPARENT)
            .bold_line_style(LIGHT_GREY)
            .x_label_formatter(&|x| trimmed(*x, 2))
            .y_label_formatter(&|y| trimmed(*y, 0))
            .draw()
            .drawn()?;
        // A failed NVML read (NaN) is a gap in the line, not a spike to the axis.
        for run in trace
            .values
            .split(|(t, v)| !(t.is_finite() && v.is_finite()))
        {
            chart
                .draw_series(LineSeries::new(run.to_vec(), trace.colour.stroke_width(2)))
                .drawn()?;
        }
        let throttled_points = trace
            .values
            .iter()
            .zip(&self.throttled)
            .filter(|(_, t)| **t)
            .map(|(p, _)| *p);
        chart
            .draw_series(throttled_points.map(|p| Circle::new(p, 4, THROTTLE.filled())))
            .drawn()?;
        if let Some((label, value)) = &trace.limit {
            let (start, end) = (x_range.start, x_range.end);
            chart
                .draw_series(DashedLineSeries::new(
                    [(start, *value), (end, *value)],
                    6,
                    4,
                    GREY.stroke_width(1),
                ))
                .drawn()?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (end, *value),
                    kit::font(12)
                        .color(&GREY)
                        .pos(Pos::new(HPos::Right, VPos::Bottom)),
                )))
                .drawn()?;
        }
        Ok(())
    }
}

impl Chart for Telemetry<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let throttled = self.throttled.iter().filter(|t| **t).count();
        let subtitle = format!(
            "NVML, {} samples; red dots: {throttled} samples with a throttle reason other than idle; dashed: limits",
            self.samples.len()
        );
        let body = frame(
            root,
            "GPU clocks and power over the run",
            &subtitle,
            &self.env,
        )?;
        let (first, last) = self
            .samples
            .iter()
            .map(|s| s.t_s)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
                (lo.min(t), hi.max(t))
            });
        let x_range = first.min(0.0)..last.max(first + 1.0);
        let panels = body.split_evenly((2, 1));
        let clock = Trace {
            title: "SM clock",
            y_desc: "SM clock (MHz)",
            values: self
                .samples
                .iter()
                .map(|s| (s.t_s, s.sm_clock_mhz))
                .collect(),
            colour: CLOCK,
            limit: self
                .env
                .sm_clock_max_mhz
                .map(|m| (format!("max SM clock {m} MHz"), f64::from(m))),
        };
        let power = Trace {
            title: "board power",
            y_desc: "power (W)",
            values: self.samples.iter().map(|s| (s.t_s, s.power_w)).collect(),
            colour: POWER,
            limit: self
                .env
                .power_limit_w
                .map(|w| (format!("power limit {w:.0} W"), w)),
        };
        self.draw_panel(&panels[0], &clock, x_range.clone())?;
        self.draw_panel(&panels[1], &power, x_range)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(reasons: &str) -> TelemetrySample {
        TelemetrySample {
            t_s: 1.5,
            cell: String::new(),
            sm_clock_mhz: 1980.0,
            mem_clock_mhz: 3201.0,
            power_w: 350.0,
            temp_c: 50.0,
            gpu_util_pct: 90.0,
            clock_event_reasons: reasons.into(),
        }
    }

    #[test]
    fn idle_alone_is_not_throttling_but_any_other_reason_is() {
        assert!(!throttled(&sample("")).unwrap());
        assert!(!throttled(&sample("0x0000000000000000")).unwrap());
        assert!(!throttled(&sample("0x0000000000000001")).unwrap());
        assert!(throttled(&sample("0x0000000000000004")).unwrap());
        assert!(throttled(&sample("0x0000000000000041")).unwrap());
    }

    #[test]
    fn corrupt_reasons_are_an_error() {
        let err = throttled(&sample("0xzz")).unwrap_err().to_string();
        assert!(err.contains("0xzz") && err.contains("1.5"), "{err}");
    }
}
