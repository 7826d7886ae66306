//! A step timeline from Chrome trace-event files: one panel per trace (eager-sync above
//! graph when a steps run wrote both), each cropped to three steps from the middle of the
//! pass and drawn on one shared time scale, one lane per (pid, tid), one box per complete
//! ("X") event, so the GPU's idle gaps after a host read are visible at their own size.

use super::kit::{
    self, categorical, frame, short_number, Chart, Drawn, FixedTicks, Rendered, GREY,
    WIDE_CHART_SIZE,
};
use crate::results::env::EnvRecord;
use anyhow::{bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A parsed trace: lanes in display order (by pid, then tid) and the spans on them.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// `otherData.title` (metaprep writes the arm and the cell there).
    pub title: Option<String>,
    pub lanes: Vec<Lane>,
    pub spans: Vec<Span>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub pid: i64,
    pub tid: i64,
    /// `<process>: <thread>`, from `process_name` / `thread_name` metadata when present.
    pub label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Index into [`Trace::lanes`].
    pub lane: usize,
    pub name: String,
    /// Microseconds since the earliest span of the trace.
    pub start_us: f64,
    pub dur_us: f64,
    /// `args.step`, when the event has one.
    pub step: Option<u64>,
}

/// Parses `{"traceEvents": [...]}`: `ph: "X"` events become spans, `ph: "M"` events named
/// `process_name` / `thread_name` label the lanes, other phases are ignored.
pub fn parse_trace(json: &str) -> Result<Trace> {
    let root: Value = serde_json::from_str(json)
        .context("the trace is not valid JSON; expected a Chrome trace {\"traceEvents\": [...]}")?;
    let events = root.get("traceEvents").and_then(Value::as_array).context(
        "the trace has no \"traceEvents\" array; expected a Chrome trace {\"traceEvents\": [...]}",
    )?;

    let mut names = LaneNames::default();
    let mut raw_spans: Vec<RawSpan> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match event.get("ph").and_then(Value::as_str) {
            Some("X") => raw_spans.push(complete_event(event, index)?),
            Some("M") => names.read(event),
            Some(_) => {}
            None => bail!("trace event #{index}: no \"ph\" (phase) string"),
        }
    }

    let lane_keys: BTreeSet<(i64, i64)> = raw_spans.iter().map(|s| s.0).collect();
    let lanes: Vec<Lane> = lane_keys.iter().map(|&key| names.lane(key)).collect();
    let origin = raw_spans.iter().map(|s| s.2).fold(f64::INFINITY, f64::min);
    let spans = raw_spans
        .into_iter()
        .map(|(key, name, ts, dur, step)| Span {
            lane: lane_keys.iter().position(|k| *k == key).unwrap_or(0),
            name,
            start_us: ts - origin,
            dur_us: dur,
            step,
        })
        .collect();
    let title = root
        .get("otherData")
        .and_then(|d| d.get("title"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Trace {
        title,
        lanes,
        spans,
    })
}

/// A complete event before its lane is numbered: (lane key (pid, tid), name, ts, dur, step).
type RawSpan = ((i64, i64), String, f64, f64, Option<u64>);

/// Event `index`, a complete (`ph: "X"`) one, as a span: its times must be finite numbers,
/// its duration not negative, its pid and tid integers.
fn complete_event(event: &Value, index: usize) -> Result<RawSpan> {
    let field = |key: &str| event.get(key);
    let context = || format!("trace event #{index}");
    let number = |key: &str| {
        field(key)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
            .with_context(|| format!("{}: complete event without a numeric {key:?}", context()))
    };
    let integer = |key: &str| {
        field(key)
            .and_then(Value::as_i64)
            .with_context(|| format!("{}: complete event without an integer {key:?}", context()))
    };
    let (ts, dur) = (number("ts")?, number("dur")?);
    if dur < 0.0 {
        bail!("{}: negative duration {dur} µs", context());
    }
    let name = field("name").and_then(Value::as_str).unwrap_or("");
    let step = field("args")
        .and_then(|a| a.get("step"))
        .and_then(Value::as_u64);
    Ok((
        (integer("pid")?, integer("tid")?),
        name.to_string(),
        ts,
        dur,
        step,
    ))
}

/// The lanes' names the metadata (`ph: "M"`) events give: each process's and each thread's.
#[derive(Default)]
struct LaneNames {
    processes: BTreeMap<i64, String>,
    threads: BTreeMap<(i64, i64), String>,
}

impl LaneNames {
    /// Keeps the name a `process_name` or `thread_name` event gives; other metadata is
    /// ignored.
    fn read(&mut self, event: &Value) {
        let field = |key: &str| event.get(key);
        let label = field("args")
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str);
        let pid = field("pid").and_then(Value::as_i64);
        let tid = field("tid").and_then(Value::as_i64);
        match (field("name").and_then(Value::as_str), label, pid, tid) {
            (Some("process_name"), Some(label), Some(pid), _) => {
                self.processes.insert(pid, label.to_string());
            }
            (Some("thread_name"), Some(label), Some(pid), Some(tid)) => {
                self.threads.insert((pid, tid), label.to_string());
            }
            _ => {}
        }
    }

    /// The lane of (pid, tid), named `process: thread`; an unnamed process is `host` (pid 1),
    /// `GPU` (pid 2) or `pid N`, an unnamed thread `tid N`.
    fn lane(&self, (pid, tid): (i64, i64)) -> Lane {
        let process = self
            .processes
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| match pid {
                1 => "host".into(),
                2 => "GPU".into(),
                other => format!("pid {other}"),
            });
        let thread = self
            .threads
            .get(&(pid, tid))
            .cloned()
            .unwrap_or_else(|| format!("tid {tid}"));
        Lane {
            pid,
            tid,
            label: format!("{process}: {thread}"),
        }
    }
}

/// Parses `trace_json` and draws it as `timeline`.
pub fn timeline_chart(dir: &Path, trace_json: &str, env: &EnvRecord) -> Result<Rendered> {
    render(dir, &[parse_trace(trace_json)?], env)
}

/// Steps each panel shows.
const WINDOW_STEPS: u64 = 3;

/// Draws `traces` as stacked panels of `timeline`.
pub(super) fn render(dir: &Path, traces: &[Trace], env: &EnvRecord) -> Result<Rendered> {
    let windows: Vec<Trace> = traces
        .iter()
        .filter(|t| !t.spans.is_empty())
        .map(window)
        .collect();
    if windows.is_empty() {
        return Ok(Rendered::Skipped {
            reason: "the trace has no complete (\"ph\": \"X\") events".into(),
        });
    }
    let chart = Timeline {
        traces: windows,
        env: env.clone(),
    };
    let height = WIDE_CHART_SIZE.1.max(180 + 300 * chart.traces.len() as u32);
    kit::write_chart(dir, "timeline", (WIDE_CHART_SIZE.0, height), &chart)
}

/// The spans of `WINDOW_STEPS` steps from the middle of the trace, re-based to start at 0;
/// a trace without step numbers is kept whole.
fn window(trace: &Trace) -> Trace {
    let steps: BTreeSet<u64> = trace.spans.iter().filter_map(|s| s.step).collect();
    let chosen: Vec<&Span> = if steps.len() as u64 > WINDOW_STEPS {
        let first = *steps
            .iter()
            .nth((steps.len() - WINDOW_STEPS as usize) / 2)
            .unwrap_or(&0);
        let range = first..first + WINDOW_STEPS;
        trace
            .spans
            .iter()
            .filter(|s| s.step.is_some_and(|k| range.contains(&k)))
            .collect()
    } else {
        trace.spans.iter().collect()
    };
    let origin = chosen
        .iter()
        .map(|s| s.start_us)
        .fold(f64::INFINITY, f64::min);
    Trace {
        title: trace.title.clone(),
        lanes: trace.lanes.clone(),
        spans: chosen
            .into_iter()
            .map(|s| Span {
                start_us: s.start_us - origin,
                ..s.clone()
            })
            .collect(),
    }
}

struct Timeline {
    traces: Vec<Trace>,
    env: EnvRecord,
}

/// Names beyond this many share the legend's "+N more" entry (they keep their colours).
const LEGEND_NAMES: usize = 12;
const LEGEND_HEIGHT: u32 = 30;

/// Colours past the seven categorical ones, so twelve span names get distinct colours.
const MORE_SPAN_COLOURS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
];

/// The colour of the span name at `index`: distinct for the first twelve names.
fn span_colour(index: usize) -> RGBColor {
    match index.checked_sub(7) {
        Some(more) if more < MORE_SPAN_COLOURS.len() => MORE_SPAN_COLOURS[more],
        _ => categorical(index),
    }
}

impl Timeline {
    /// Span names in first-seen order over every panel; a name's position picks its colour.
    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for span in self.traces.iter().flat_map(|t| &t.spans) {
            if !names.contains(&span.name.as_str()) {
                names.push(&span.name);
            }
        }
        names
    }

    fn draw_legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        names: &[&str],
    ) -> Result<()> {
        let y = LEGEND_HEIGHT as i32 / 2;
        let mut x = 20;
        let style = kit::font(14).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, name) in names.iter().take(LEGEND_NAMES).enumerate() {
            area.draw(&Rectangle::new(
                [(x, y - 7), (x + 14, y + 7)],
                span_colour(i).filled(),
            ))
            .drawn()?;
            area.draw(&Text::new(name.to_string(), (x + 20, y), style.clone()))
                .drawn()?;
            x += 30 + 7 * name.chars().count() as i32;
        }
        if names.len() > LEGEND_NAMES {
            let more = format!("+{} more", names.len() - LEGEND_NAMES);
            area.draw(&Text::new(more, (x, y), style.color(&GREY)))
                .drawn()?;
        }
        Ok(())
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        trace: &Trace,
        index: usize,
        end: f64,
        names: &[&str],
    ) -> Result<()> {
        let lanes = trace.lanes.len();
        // Lane 0 at the top: plotters' y grows upwards.
        let lane_y = |lane: usize| (lanes - 1 - lane) as f64;
        let title = trace
            .title
            .clone()
            .unwrap_or_else(|| format!("trace {}", index + 1));
        let mut chart = ChartBuilder::on(area)
            .caption(title, kit::font(16))
            .margin(10)
            .margin_right(24)
            .x_label_area_size(46)
            .y_label_area_size(230)
            .build_cartesian_2d(
                0.0..(end * 1.01).max(1.0),
                FixedTicks::new(
                    -0.5..lanes as f64 - 0.5,
                    (0..lanes).map(|i| i as f64).collect(),
                ),
            )
            .drawn()?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("time from the first span shown (µs)")
            .axis_desc_style(kit::font(14))
            .label_style(kit::font(14))
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(225, 225, 225))
            .x_label_formatter(&|x| short_number(*x))
            .y_label_formatter(&|y| {
                let row = y.round() as usize;
                trace
                    .lanes
                    .get(lanes.saturating_sub(1 + row))
                    .map_or(String::new(), |l| l.label.clone())
            })
            .draw()
            .drawn()?;

        let text_style = kit::font(12).pos(Pos::new(HPos::Left, VPos::Center));
        for span in &trace.spans {
            let colour = span_colour(names.iter().position(|n| *n == span.name).unwrap_or(0));
            let y = lane_y(span.lane);
            let (x0, x1) = (span.start_us, span.start_us + span.dur_us);
            chart
                .draw_series([
                    Rectangle::new([(x0, y - 0.32), (x1, y + 0.32)], colour.filled()),
                    Rectangle::new(
                        [(x0, y - 0.32), (x1, y + 0.32)],
                        colour.mix(0.9).stroke_width(1),
                    ),
                ])
                .drawn()?;
            // Name the box only where the name fits inside it; the label is placed in the
            // chart's own coordinates (5 px into the box, on its middle), in black or white,
            // whichever reads on the box's colour.
            let pixels = chart.backend_coord(&(x1, y)).0 - chart.backend_coord(&(x0, y)).0;
            if pixels > 12 + 7 * span.name.chars().count() as i32 {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((x0, y))
                            + Text::new(
                                span.name.clone(),
                                (5, 0),
                                text_style.color(&label_colour(colour)),
                            ),
                    ))
                    .drawn()?;
            }
        }
        Ok(())
    }
}

/// Black on a light box, white on a dark one (by the colour's luma).
fn label_colour(fill: RGBColor) -> RGBColor {
    let luma = 0.299 * f64::from(fill.0) + 0.587 * f64::from(fill.1) + 0.114 * f64::from(fill.2);
    if luma > 150.0 {
        BLACK
    } else {
        WHITE
    }
}

impl Chart for Timeline {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let spans: usize = self.traces.iter().map(|t| t.spans.len()).sum();
        let subtitle = format!(
            "{} steps per panel from the middle of each pass, one time scale; {spans} spans; \
             white space in the GPU lane is idle time",
            WINDOW_STEPS
        );
        let body = frame(root, "Step timeline", &subtitle, &self.env)?;
        let (legend, plots) = body.split_vertically(LEGEND_HEIGHT);
        let names = self.names();
        self.draw_legend(&legend, &names)?;
        let end = self
            .traces
            .iter()
            .flat_map(|t| &t.spans)
            .map(|s| s.start_us + s.dur_us)
            .fold(0.0, f64::max);
        let panels = plots.split_evenly((self.traces.len(), 1));
        for (i, (area, trace)) in panels.iter().zip(&self.traces).enumerate() {
            self.draw_panel(area, trace, i, end, &names)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"{"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "X", "name": "verify", "pid": 2, "tid": 7, "ts": 1030.0, "dur": 40},
        {"ph": "X", "name": "prep", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 12.5},
        {"ph": "i", "name": "marker", "pid": 1, "tid": 1, "ts": 1001.0},
        {"ph": "X", "name": "draft", "pid": 2, "tid": 7, "ts": 1012.5, "dur": 10}
    ]}"#;

    #[test]
    fn lanes_are_ordered_by_pid_and_labelled_from_metadata() {
        let trace = parse_trace(TRACE).unwrap();
        let labels: Vec<&str> = trace.lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["host: tid 1", "GPU: stream 7"]);
    }

    #[test]
    fn spans_start_at_the_earliest_event_and_keep_their_lane() {
        let trace = parse_trace(TRACE).unwrap();
        let spans: Vec<(&str, usize, f64, f64)> = trace
            .spans
            .iter()
            .map(|s| (s.name.as_str(), s.lane, s.start_us, s.dur_us))
            .collect();
        assert_eq!(
            spans,
            [
                ("verify", 1, 30.0, 40.0),
                ("prep", 0, 0.0, 12.5),
                ("draft", 1, 12.5, 10.0)
            ]
        );
    }

    #[test]
    fn malformed_traces_are_errors_that_say_what_is_wrong() {
        let cases = [
            ("not json", "not valid JSON"),
            (r#"{"events": []}"#, "traceEvents"),
            (
                r#"{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0}]}"#,
                "\"dur\"",
            ),
            (
                r#"{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": "0", "dur": 1}]}"#,
                "\"ts\"",
            ),
            (
                r#"{"traceEvents": [{"ph": "X", "pid": "a", "tid": 1, "ts": 0, "dur": 1}]}"#,
                "\"pid\"",
            ),
            (
                r#"{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]}"#,
                "negative",
            ),
            (r#"{"traceEvents": [{"name": "x"}]}"#, "#0"),
        ];
        for (json, expected) in cases {
            let err = format!("{:#}", parse_trace(json).unwrap_err());
            assert!(err.contains(expected), "{json}: {err}");
        }
    }
}
