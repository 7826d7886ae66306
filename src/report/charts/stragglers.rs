//! `stragglers`: with real ranks, how long each rank's forwards waited at their collectives
//! for the slowest rank, step by step, from the merged trace (one process pair per rank).
//! Every rank streams the same bytes and runs the same collectives, so the time a rank's
//! forwards take beyond the fastest rank's, in the same step, is time spent waiting for a
//! rank that reached the collective later (the straggler shows as the rank that waits least).

use super::kit::{self, frame, Chart, Drawn, Rendered, LIGHT_GREY, WIDE_CHART_SIZE};
use super::timeline::Trace;
use crate::results::env::EnvRecord;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The GPU spans whose durations are compared across ranks.
const FORWARDS: [&str; 2] = ["draft forward", "verify forward"];

/// One rank's wait per step, µs.
#[derive(Debug, Clone, PartialEq)]
pub struct RankWaits {
    pub rank: usize,
    pub waits: Vec<(u64, f64)>,
}

/// Per rank and step: the forwards' time beyond the fastest rank's in that step. Ranks are
/// the trace's GPU processes (pid 2r+2, as `metaprep` merges rank traces); empty for a trace
/// of one rank.
pub fn waits(trace: &Trace) -> Vec<RankWaits> {
    // (step, rank) → the forwards' summed duration.
    let mut forward: BTreeMap<(u64, usize), f64> = BTreeMap::new();
    for span in &trace.spans {
        let lane = &trace.lanes[span.lane];
        let is_gpu = lane.pid >= 2 && lane.pid % 2 == 0;
        if let (true, Some(step), true) =
            (is_gpu, span.step, FORWARDS.contains(&span.name.as_str()))
        {
            let rank = (lane.pid as usize - 2) / 2;
            *forward.entry((step, rank)).or_default() += span.dur_us;
        }
    }
    let ranks = forward.keys().map(|k| k.1).max().map_or(0, |r| r + 1);
    if ranks < 2 {
        return Vec::new();
    }
    let mut out: Vec<RankWaits> = (0..ranks)
        .map(|rank| RankWaits {
            rank,
            waits: Vec::new(),
        })
        .collect();
    let steps: Vec<u64> = forward.keys().map(|k| k.0).collect();
    for step in steps.into_iter().collect::<std::collections::BTreeSet<_>>() {
        let of: Vec<Option<f64>> = (0..ranks)
            .map(|r| forward.get(&(step, r)).copied())
            .collect();
        // A step some rank lacks (a timeline cut short) is left out.
        let Some(all) = of.into_iter().collect::<Option<Vec<f64>>>() else {
            continue;
        };
        let fastest = all.iter().copied().fold(f64::INFINITY, f64::min);
        for (rank, d) in all.into_iter().enumerate() {
            out[rank].waits.push((step, d - fastest));
        }
    }
    out
}

/// Draws `stragglers` for the traces that hold two ranks or more.
pub fn render(dir: &Path, traces: &[Trace], env: &EnvRecord) -> Result<Rendered> {
    let panels: Vec<(String, Vec<RankWaits>)> = traces
        .iter()
        .map(|t| (t.title.clone().unwrap_or_default(), waits(t)))
        .filter(|(_, w)| !w.is_empty())
        .collect();
    if panels.is_empty() {
        return Ok(Rendered::Skipped {
            reason: "no trace holds more than one rank (steps --ranks real --trace)".into(),
        });
    }
    let height = WIDE_CHART_SIZE.1.max(120 + 320 * panels.len() as u32);
    let chart = Stragglers {
        panels,
        env: env.clone(),
    };
    kit::write_chart(dir, "stragglers", (WIDE_CHART_SIZE.0, height), &chart)
}

struct Stragglers {
    panels: Vec<(String, Vec<RankWaits>)>,
    env: EnvRecord,
}

impl Chart for Stragglers {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = frame(
            root,
            "Wait at the collectives per step, by rank",
            "each rank's forwards beyond the fastest rank's, from its device timers: the straggler \
             is the rank that waits least",
            &self.env,
        )?;
        let areas = body.split_evenly((self.panels.len(), 1));
        for (area, (title, ranks)) in areas.iter().zip(&self.panels) {
            draw_panel(area, title, ranks)?;
        }
        Ok(())
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    ranks: &[RankWaits],
) -> Result<()> {
    let points = ranks.iter().flat_map(|r| r.waits.iter());
    let (x_hi, y_hi) = points.fold((1.0f64, 1.0f64), |(x, y), &(s, w)| {
        (x.max(s as f64), y.max(w))
    });
    let mut chart = ChartBuilder::on(area)
        .caption(title, kit::font(16))
        .margin(10)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_hi + 1.0, 0f64..y_hi * 1.1)
        .drawn()?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("wait (µs)")
        .axis_desc_style(kit::font(14))
        .label_style(kit::font(14))
        .light_line_style(LIGHT_GREY)
        .draw()
        .drawn()?;
    for r in ranks {
        let colour = Palette99::pick(r.rank).to_rgba();
        chart
            .draw_series(LineSeries::new(
                r.waits.iter().map(|&(s, w)| (s as f64, w)),
                colour.stroke_width(2),
            ))
            .drawn()?
            .label(format!("rank {}", r.rank))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .label_font(kit::font(14))
        .background_style(WHITE.mix(0.8))
        .border_style(LIGHT_GREY)
        .draw()
        .drawn()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::parse_trace;
    use serde_json::json;

    /// A trace as `metaprep` merges ranks: rank r's GPU is process 2r+2. `forward_us[r][k]`
    /// is rank r's verify forward in step k (its draft forward takes 10 µs).
    fn merged(forward_us: &[[f64; 2]]) -> String {
        let mut events = Vec::new();
        for (rank, steps) in forward_us.iter().enumerate() {
            let pid = 2 * rank + 2;
            for (step, us) in steps.iter().enumerate() {
                let at = step as f64 * 1000.0;
                for (name, ts, dur) in [
                    ("draft forward", at, 10.0),
                    ("verify prep", at + 50.0, 5.0),
                    ("verify forward", at + 100.0, *us),
                ] {
                    events.push(json!({"ph": "X", "name": name, "pid": pid, "tid": 0,
                        "ts": ts, "dur": dur, "args": {"step": step}}));
                }
                // Host spans (odd pids) never count.
                events.push(json!({"ph": "X", "name": "verify forward", "pid": pid - 1,
                    "tid": 2, "ts": at, "dur": 999.0, "args": {"step": step}}));
            }
        }
        json!({ "traceEvents": events }).to_string()
    }

    #[test]
    fn each_rank_waits_what_its_forwards_take_beyond_the_fastest() {
        // Step 0: rank 1 is late, rank 0 waits 40 µs; step 1: rank 0 is late.
        let w = waits(&parse_trace(&merged(&[[140.0, 100.0], [100.0, 125.0]])).unwrap());
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].waits, [(0, 40.0), (1, 0.0)]);
        assert_eq!(w[1].waits, [(0, 0.0), (1, 25.0)]);
    }

    #[test]
    fn one_rank_has_no_stragglers_and_the_chart_is_skipped() {
        let one = parse_trace(&merged(&[[100.0, 100.0]])).unwrap();
        assert!(waits(&one).is_empty());
        let dir = tempfile::tempdir().unwrap();
        let r = render(dir.path(), &[one], &EnvRecord::default()).unwrap();
        assert!(matches!(r, Rendered::Skipped { .. }));
    }

    #[test]
    fn two_ranks_draw_a_chart() {
        let trace = parse_trace(&merged(&[[140.0, 100.0], [100.0, 125.0]])).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let r = render(dir.path(), &[trace], &EnvRecord::default()).unwrap();
        let Rendered::Files { svg, .. } = r else {
            panic!("{r:?}")
        };
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(text.contains("rank 1"), "the legend names the ranks");
    }
}
