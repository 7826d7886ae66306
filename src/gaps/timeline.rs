//! Three typical steps of a trace laid out for the chart: the GPU's work, the host's time in
//! each sync, and the GPU's idle stretches each charged to the sync it waited on.

use super::syncs::SyncCall;
use super::{charged, idle_stretches, overlap, Step};
use crate::calibrate::trace::Span;
use serde::Serialize;

/// Steps the timeline shows.
const SHOWN: usize = 3;

/// A stretch of the timeline, µs from its start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stretch {
    pub from_us: f64,
    pub to_us: f64,
    /// The site (an index into [`super::Gaps::sites`]) it was made at or is charged to.
    pub site: Option<usize>,
}

/// The typical steps, laid out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timeline {
    pub steps: usize,
    pub span_us: f64,
    /// Where each step begins.
    pub step_starts_us: Vec<f64>,
    pub gpu_busy: Vec<Stretch>,
    pub syncs: Vec<Stretch>,
    pub idle: Vec<Stretch>,
}

impl Timeline {
    /// The steps around the one of median length: `SHOWN` in a row from `starts` (each
    /// step's start, and the end of the last), with `busy` GPU work and `calls` at `sites`
    /// (the sites as the trace met them, one a call).
    pub(super) fn typical(
        steps: &[Step],
        starts: &[f64],
        busy: &[Span],
        calls: &[SyncCall],
        sites: &[usize],
    ) -> Timeline {
        let n = steps.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| steps[a].period_us.total_cmp(&steps[b].period_us));
        let median = order[n / 2];
        let first = median.saturating_sub(1).min(n.saturating_sub(SHOWN));
        let last = (first + SHOWN).min(n);
        let window = Span {
            ts: starts[first],
            end: starts[last],
        };
        let at = |s: Span, site| Stretch {
            from_us: s.ts.max(window.ts) - window.ts,
            to_us: s.end.min(window.end) - window.ts,
            site,
        };
        let within = |s: &Span| overlap(*s, window) > 0.0;
        let (near, near_sites): (Vec<SyncCall>, Vec<usize>) = (calls.iter().zip(sites))
            .filter(|(c, _)| within(&c.span))
            .map(|(c, &s)| (c.clone(), s))
            .unzip();
        let idle = idle_stretches(busy, window);
        Timeline {
            steps: last - first,
            span_us: window.dur(),
            step_starts_us: starts[first..last].iter().map(|t| t - window.ts).collect(),
            gpu_busy: busy
                .iter()
                .filter(|b| within(b))
                .map(|&b| at(b, None))
                .collect(),
            syncs: (near.iter().zip(&near_sites))
                .map(|(c, &s)| at(c.span, Some(s)))
                .collect(),
            idle: (charged(&idle, &near, &near_sites).into_iter())
                .map(|(part, site)| at(part, site))
                .collect(),
        }
    }

    /// The same timeline with every site renumbered by `to` (none where it gives none).
    pub(super) fn renumbered(mut self, to: impl Fn(usize) -> Option<usize>) -> Timeline {
        for s in self.syncs.iter_mut().chain(self.idle.iter_mut()) {
            s.site = s.site.and_then(&to);
        }
        self
    }
}
