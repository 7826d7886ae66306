//! A trace's figures from its accounted steps: the headline, each site's cost in the summary's
//! order and the spreads over the steps, at the host scale an untraced step gives.

use super::timeline::Timeline;
use super::{Gaps, Headline, HostScale, Site, SiteCost, Spread, Step};
use crate::calibrate::{EventCosts, FitRow};
use std::collections::BTreeMap;

/// What a probe file beside the trace gave: the figures need its costs, fit and the headline
/// with the profiler's cost left in.
pub(super) struct Probe {
    pub(super) file: String,
    pub(super) costs: EventCosts,
    pub(super) fit: Vec<FitRow>,
    pub(super) as_traced: Headline,
}

/// One trace's steps found and accounted ([`super::account`]), before its figures.
pub struct Accounted {
    pub(super) file: String,
    pub(super) steps_from: String,
    pub(super) probe: Option<Probe>,
    /// Each step, its host time unscaled.
    pub steps: Vec<Step>,
    pub(super) timeline: Timeline,
    /// Each distinct site, in the order the trace met them.
    pub(super) sites: Vec<Site>,
}

impl Accounted {
    /// The figures, with every step's host time at `scale` where it is given, and every site
    /// index (the steps' `by_site`, the timeline's) renumbered from the order the trace met
    /// them into the summary's.
    pub fn summarise(self, scale: Option<HostScale>) -> Gaps {
        let Accounted {
            file,
            steps_from,
            probe,
            mut steps,
            timeline,
            sites,
        } = self;
        // With the profiler's cost left in: the probe's, or without one the steps unscaled.
        let as_traced = match (&probe, scale) {
            (Some(p), _) => Some(p.as_traced.clone()),
            (None, Some(_)) => Some(Headline::of(&mut steps.clone(), &sites)),
            (None, None) => None,
        };
        for step in steps.iter_mut() {
            step.host_scale = scale.map_or(1.0, |s| s.factor);
        }
        let Headline {
            period_us,
            win_us,
            itl_change_pct,
            reads_and_uploads_win_us,
            reads_and_uploads_itl_change_pct,
        } = Headline::of(&mut steps, &sites);
        let mut costs: Vec<(usize, SiteCost)> = (sites.into_iter().enumerate())
            // A sync outside every step (before the first, after the last) is no step's.
            .filter(|(i, _)| steps.iter().any(|s| s.by_site.contains_key(i)))
            .map(|(i, site)| {
                let of = |s: &Step| s.by_site.get(&i).copied().unwrap_or_default();
                let calls: usize = steps.iter().map(|s| of(s).calls).sum();
                let cost = SiteCost {
                    calls_per_step: calls as f64 / steps.len() as f64,
                    idle_us: Spread::over(&steps, |s| of(s).idle_us),
                    blocked_us: Spread::over(&steps, |s| of(s).blocked_us),
                    win_us: Spread::over(&steps, |s| s.win_us(|j| j == i)),
                    site,
                };
                (i, cost)
            })
            .collect();
        // Reads first, then uploads, then other waits; the costliest first within each.
        costs.sort_by(|(_, a), (_, b)| {
            (a.site.kind.cmp(&b.site.kind)).then(b.win_us.median.total_cmp(&a.win_us.median))
        });
        let place: BTreeMap<usize, usize> = (costs.iter().enumerate())
            .map(|(to, &(from, _))| (from, to))
            .collect();
        for step in steps.iter_mut() {
            let by_site = std::mem::take(&mut step.by_site);
            step.by_site = (by_site.into_iter())
                .filter_map(|(i, s)| Some((*place.get(&i)?, s)))
                .collect();
            for call in step.calls.iter_mut() {
                call.site = place[&call.site];
            }
        }
        Gaps {
            file,
            steps_from,
            probe_file: probe.as_ref().map(|p| p.file.clone()),
            profiler_us: Spread::over(&steps, |s| s.profiler_us),
            profiler_event_costs_us: probe.as_ref().map(|p| p.costs),
            probe_fit: probe.map(|p| p.fit),
            untraced: scale,
            period_us,
            gpu_idle_us: Spread::over(&steps, |s| s.bare_us() - s.gpu_busy_us),
            win_us,
            itl_change_pct,
            throughput_change_pct: Spread::over(&steps, |s| {
                100.0 * (s.bare_us() / (s.bare_us() - s.reads_win_us) - 1.0)
            }),
            reads_and_uploads_win_us,
            reads_and_uploads_itl_change_pct,
            every_sync_win_us: Spread::over(&steps, |s| s.win_us(|_| true)),
            as_traced,
            timeline: timeline.renumbered(|i| place.get(&i).copied()),
            sites: costs.into_iter().map(|(_, cost)| cost).collect(),
            steps,
        }
    }
}
