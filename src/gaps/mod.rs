//! `metaprep gaps`: from a profiler trace of an engine's decode loop, which host syncs made the
//! GPU idle, for how long a step, and what the step would be without them.
//!
//! The model: without a sync the host runs ahead of the GPU, so a step takes the longer of its
//! host work and its GPU work instead of their serial sum around the sync. A step is the time
//! from one step's start to the next's (what the loop delivers per step); its GPU idle
//! stretches are charged to the sync the host was blocked in when each began.

pub mod chart;
mod figures;
mod profiler_lag;
pub mod ranks;
mod read_work;
pub mod report;
pub mod steps;
pub mod syncs;
pub mod timeline;
pub mod untraced_step;

use crate::calibrate::profiler_cost::ProfilerCost;
use crate::calibrate::trace::{Span, Trace};
use crate::calibrate::{EventCosts, FitRow};
use crate::stats::summary::quantile;
use anyhow::{anyhow, bail, Result};
pub use figures::Accounted;
use figures::Probe;
use profiler_lag::{lag_taken_back, launches, profiler_split_us, wait_ends};
use read_work::{launching_ops, work_around};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use syncs::{SyncCall, SyncKind};
use timeline::Timeline;
pub use untraced_step::HostScale;

/// Where a sync was made: the op or Python call around it and the region it ran in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Site {
    pub kind: SyncKind,
    /// The outermost framework op or Python built-in around the sync (`aten::item`).
    pub op: String,
    /// The innermost `record_function` region around it, if any (`draft prep`).
    pub region: Option<String>,
    /// The innermost Python frame around it with a file and line, if the trace has them.
    pub function: Option<String>,
    /// The runtime call that blocked (`cudaStreamSynchronize`).
    pub call: String,
}

/// A spread over steps: median with p10 and p90.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let q = |p| quantile(values, p).unwrap_or(f64::NAN);
        Spread {
            median: q(0.5),
            p10: q(0.1),
            p90: q(0.9),
        }
    }

    /// The spread of `f` over `items` (a trace's steps).
    pub fn over<T>(items: &[T], f: impl Fn(&T) -> f64) -> Spread {
        Spread::of(&items.iter().map(f).collect::<Vec<_>>())
    }
}

/// One step of the loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// From this step's start to the next's, µs, as traced.
    pub period_us: f64,
    /// What the profiler's events cost the host on the step's critical path, from the probe
    /// file; 0 without one.
    pub profiler_us: f64,
    /// The rest of their cost, hidden behind GPU work: bare, the host would have waited that
    /// much longer in the step's syncs.
    pub profiler_hidden_us: f64,
    pub gpu_busy_us: f64,
    /// Each site's use in the step, by its index into [`Gaps::sites`].
    pub by_site: BTreeMap<usize, SiteInStep>,
    /// The step's sync calls in order, for what removing some of them wins.
    #[serde(skip)]
    pub calls: Vec<CallInStep>,
    /// What removing the step's reads saves it, µs.
    pub reads_win_us: f64,
    /// What removing its reads and uploads saves it, µs.
    pub reads_and_uploads_win_us: f64,
    /// The factor on its host time from the untraced step given (`--untraced-step-us`), else 1.
    #[serde(skip)]
    pub host_scale: f64,
}

/// One sync call in a step: its site, its wait, the host time removing it takes off (its
/// engine call's, at least its wait, with the host work a read or upload brings,
/// `gaps::read_work`; with a probe file, less the profiler's cost in them), and whether it drains
/// the GPU's queue ([`SyncKind::drains_queue`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallInStep {
    pub site: usize,
    pub blocked_us: f64,
    pub host_us: f64,
    /// Its engine call's waits, each instant once, on the call's first sync (0 on the others).
    pub call_wait_us: f64,
    pub drains: bool,
}

/// A site in one step: its calls, the host's time blocked in them and the GPU idle charged
/// to them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SiteInStep {
    pub calls: usize,
    pub blocked_us: f64,
    pub idle_us: f64,
}

impl Step {
    /// The step without the profiler: the traced step less the profiler's cost on its
    /// critical path, its host-paced rest (the GPU's idle) at [`Step::host_scale`].
    pub fn bare_us(&self) -> f64 {
        self.gpu_busy_us + self.host_scale * self.host_paced_us()
    }

    /// What of the step the host paced (the GPU idle), less the profiler's cost, unscaled.
    pub fn host_paced_us(&self) -> f64 {
        self.period_us - self.profiler_us - self.gpu_busy_us
    }

    /// What removing the calls of the sites `removed` picks saves, µs: the (bare) step
    /// becomes the longer of its host work (less the calls' time, their waits included) and
    /// its GPU work. A removed call with a read or upload left after it in the step frees
    /// only its own work: its wait moves to that call, which drains the same GPU queue.
    pub fn win_us(&self, removed: impl Fn(usize) -> bool) -> f64 {
        let (mut blocked, mut host, mut drained_later) = (0.0, 0.0, false);
        for c in self.calls.iter().rev() {
            if !removed(c.site) {
                drained_later |= c.drains;
            } else {
                // The call's waits are the GPU's time: only its own host work is scaled.
                let work = (c.host_us - c.call_wait_us).max(0.0);
                host += self.host_scale * work;
                if !drained_later {
                    host += c.host_us - work;
                    blocked += c.blocked_us;
                }
            }
        }
        let all: f64 = self.calls.iter().map(|c| c.blocked_us).sum();
        // The hidden profiler time goes to the syncs in proportion to their waits.
        let hidden = match all > 0.0 {
            true => self.profiler_hidden_us * blocked / all,
            false => 0.0,
        };
        let without = (self.bare_us() - host - hidden).max(self.gpu_busy_us);
        (self.bare_us() - without).max(0.0)
    }
}

/// A site's cost over the steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteCost {
    pub site: Site,
    /// Calls a step, the mean over steps (a read every fourth step: 0.25).
    pub calls_per_step: f64,
    /// GPU idle a step charged to it, µs.
    pub idle_us: Spread,
    /// Host time blocked in it, µs a step.
    pub blocked_us: Spread,
    /// What removing it alone would save a step, µs.
    pub win_us: Spread,
}

/// The headline's figures over a trace's steps: the step, and what removing the reads, and the
/// reads with the uploads, wins.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    pub period_us: Spread,
    pub win_us: Spread,
    pub itl_change_pct: Spread,
    pub reads_and_uploads_win_us: Spread,
    pub reads_and_uploads_itl_change_pct: Spread,
}

impl Headline {
    /// Sets each of `steps`' reads' and reads-and-uploads' wins (their sites' indices into
    /// `sites`), and gives the figures over them.
    fn of(steps: &mut [Step], sites: &[Site]) -> Headline {
        for step in steps.iter_mut() {
            step.reads_win_us = step.win_us(|i| sites[i].kind == SyncKind::Read);
            step.reads_and_uploads_win_us = step.win_us(|i| sites[i].kind.drains_queue());
        }
        Headline {
            period_us: Spread::over(steps, Step::bare_us),
            win_us: Spread::over(steps, |s| s.reads_win_us),
            itl_change_pct: Spread::over(steps, |s| -100.0 * s.reads_win_us / s.bare_us()),
            reads_and_uploads_win_us: Spread::over(steps, |s| s.reads_and_uploads_win_us),
            reads_and_uploads_itl_change_pct: Spread::over(steps, |s| {
                -100.0 * s.reads_and_uploads_win_us / s.bare_us()
            }),
        }
    }
}

/// What `gaps` found in one trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gaps {
    pub file: String,
    /// How the steps were found.
    pub steps_from: String,
    /// The probe file whose profiler cost was taken off each step; `None`: none was beside
    /// the trace, and every figure is as traced.
    pub probe_file: Option<String>,
    /// The profiler's cost taken off each step by the probe file's costs, µs (0 without one).
    pub profiler_us: Spread,
    /// What each kind of recorded event was fitted to cost from the probe file, µs: where
    /// they are large the correction decides a host-paced answer. `None` without one.
    pub profiler_event_costs_us: Option<EventCosts>,
    /// Each probe workload's counts, timings and overhead as timed and as those costs give
    /// it: where they disagree, the correction is as uncertain. `None` without a probe file.
    pub probe_fit: Option<Vec<FitRow>>,
    /// The untraced step given (`--untraced-step-us`), µs, and its [`Step::host_scale`]
    /// (`untraced_step_us` and `host_scale` in gaps.json; absent where none was given).
    #[serde(flatten)]
    pub untraced: Option<HostScale>,
    pub steps: Vec<Step>,
    /// Every site, the costliest first.
    pub sites: Vec<SiteCost>,
    /// The step, µs (with the profiler's cost taken off where a probe file gave it, and its
    /// host time scaled where an untraced step did).
    pub period_us: Spread,
    pub gpu_idle_us: Spread,
    /// Removing every read: µs a step, and the change of the step (ITL) and of throughput, %.
    pub win_us: Spread,
    pub itl_change_pct: Spread,
    pub throughput_change_pct: Spread,
    /// Removing the reads and the uploads (the calls that drain the GPU's queue, so that none
    /// is left to take over a removed read's wait): µs a step, and the change of the step, %.
    pub reads_and_uploads_win_us: Spread,
    pub reads_and_uploads_itl_change_pct: Spread,
    /// Removing every sync (reads, uploads and other waits), µs a step.
    pub every_sync_win_us: Spread,
    /// With a probe file or an untraced step, the same figures with the profiler's cost left
    /// in: where the host paces the step, the answer rests on the cost taken off. `None`
    /// without either.
    pub as_traced: Option<Headline>,
    /// Three typical steps laid out, for the chart.
    pub timeline: Timeline,
}

/// Analyses `trace` (read from `file`), its steps found as `step_marker` says, with the
/// profiler's cost taken off where `profiler` has it.
pub fn analyse(
    file: &str,
    trace: &Trace,
    step_marker: Option<&str>,
    profiler: Option<&ProfilerCost>,
) -> Result<Gaps> {
    Ok(account(file, trace, step_marker, profiler)?.summarise(None))
}

/// `trace`'s steps found and accounted, as [`analyse`] does, before their figures: the steps'
/// host time can then be scaled ([`untraced_step::host_scale`]) without reading it again.
pub fn account(
    file: &str,
    trace: &Trace,
    step_marker: Option<&str>,
    profiler: Option<&ProfilerCost>,
) -> Result<Accounted> {
    if trace.gpu.is_empty() && trace.threads.is_empty() {
        bail!(
            "{file}: no torch.profiler events (cpu_op, cuda_runtime, kernel) in it: gaps reads \
             a torch.profiler Chrome trace (`prof.export_chrome_trace(\"trace.json\")`, or an \
             engine's profile endpoint), not an Nsight Systems export"
        );
    }
    if trace.gpu.is_empty() {
        bail!(
            "{file}: the trace holds no GPU activity (kernels, copies): record it with \
             `torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])`"
        );
    }
    if !trace.any_runtime {
        bail!(
            "{file}: the trace holds no CUDA runtime calls, so no sync can be seen: record it \
             with ProfilerActivity.CUDA in the engine's own process"
        );
    }
    let (thread, source) = steps::find(trace, step_marker).map_err(|e| anyhow!("{file}: {e}"))?;
    let events = &trace.threads[&thread];
    let busy = merged(trace.gpu.iter().map(|g| g.span));
    let calls = syncs::calls(events, &trace.memcpy_by_corr, source.name.as_deref());
    // Each distinct site once, in order; each call by its site's place.
    let sites: Vec<Site> = (calls.iter().map(|c| c.site.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let call_sites: Vec<usize> = (calls.iter())
        .map(|c| sites.partition_point(|s| s < &c.site))
        .collect();
    let longest = calls.iter().map(|c| c.span.dur()).fold(0.0, f64::max);
    let taken_back = profiler.map_or(Vec::new(), |p| {
        lag_taken_back(
            p,
            &busy,
            &wait_ends(&calls, &busy),
            &launches(trace, events),
        )
    });
    let launched = launching_ops(trace, events);
    let account_with = |profiler: Option<&ProfilerCost>, taken_back: &[(Span, f64)]| {
        (source.starts.windows(2))
            .map(|pair| {
                let period = Span {
                    ts: pair[0],
                    end: pair[1],
                };
                step(
                    period,
                    &busy,
                    &calls,
                    &call_sites,
                    (longest, &launched),
                    (profiler, taken_back),
                )
            })
            .collect::<Vec<Step>>()
    };
    let steps = account_with(profiler, &taken_back);
    if steps.is_empty() {
        bail!("{file}: {} gave fewer than two steps", source.how);
    }
    let timeline = Timeline::typical(&steps, &source.starts, &busy, &calls, &call_sites);
    Ok(Accounted {
        file: file.to_string(),
        steps_from: source.how,
        probe: profiler.map(|p| Probe {
            file: p.probe_file.display().to_string(),
            costs: p.costs(),
            fit: p.fit_rows.clone(),
            as_traced: Headline::of(&mut account_with(None, &[]), &sites),
        }),
        steps,
        timeline,
        sites,
    })
}

/// One step's accounting over `period`: each GPU idle stretch's parts charged to the sync
/// the host was in when each began (a sync still blocking when the GPU went idle, or one
/// begun while it was), up to the next such sync; the parts before any are no sync's. The
/// profiler's cost counts where the host set the step's pace ([`profiler_split_us`]).
fn step(
    period: Span,
    busy: &[Span],
    calls: &[SyncCall],
    sites: &[usize],
    (longest, launched): (f64, &[Span]),
    (profiler, taken_back): (Option<&ProfilerCost>, &[(Span, f64)]),
) -> Step {
    // Only the GPU work and the calls that can reach into the period (none lasts longer than
    // `longest`): a trace holds many steps, and each is read alone.
    let busy = &busy[busy.partition_point(|b| b.end <= period.ts)..];
    let busy = &busy[..busy.partition_point(|b| b.ts < period.end)];
    let first = calls.partition_point(|c| c.span.ts < period.ts - longest);
    let last = calls.partition_point(|c| c.span.ts < period.end);
    let (calls, sites) = (&calls[first..last], &sites[first..last]);
    let gpu_busy_us: f64 = (busy.iter()).map(|b| overlap(*b, period)).sum();
    let mut by_site: BTreeMap<usize, SiteInStep> = BTreeMap::new();
    let mut in_step = Vec::new();
    let mut last_op = None;
    // The call's first sync in `in_step`, and how far its syncs' waits have covered.
    let (mut first_of_op, mut covered_to) = (0, f64::MIN);
    for (k, (call, &site)) in calls.iter().zip(sites).enumerate() {
        if call.span.ts >= period.ts && call.span.ts < period.end {
            let blocked = overlap(call.span, period);
            let drains = call.site.kind.drains_queue();
            let first_sync = last_op != Some(call.op);
            last_op = Some(call.op);
            // An engine call with several syncs counts once, to its first.
            let host = match first_sync {
                true => {
                    let in_call = profiler.map_or(0.0, |p| p.in_span(call.op));
                    let brought = match drains {
                        true => {
                            let prev = calls[..k].iter().rev().find(|c| c.op != call.op);
                            let next = calls[k..].iter().find(|c| c.op != call.op);
                            work_around(
                                (call.op, call.site.kind == SyncKind::Upload),
                                (
                                    prev.map(|c| (c.op, c.site.kind.drains_queue())),
                                    next.map(|c| c.op),
                                ),
                                launched,
                                period,
                                profiler,
                            )
                        }
                        false => 0.0,
                    };
                    (call.op.dur() - in_call).max(blocked) + brought
                }
                false => 0.0,
            };
            let at = by_site.entry(site).or_default();
            at.calls += 1;
            at.blocked_us += blocked;
            if first_sync {
                (first_of_op, covered_to) = (in_step.len(), period.ts);
            }
            // A later sync's span can reach back over an earlier one's: count the time once.
            let new_wait = call.span.end.min(period.end) - call.span.ts.max(covered_to);
            covered_to = covered_to.max(call.span.end);
            in_step.push(CallInStep {
                site,
                blocked_us: blocked,
                host_us: host,
                call_wait_us: 0.0,
                drains,
            });
            in_step[first_of_op].call_wait_us += new_wait.max(0.0);
        }
    }
    let idle = idle_stretches(busy, period);
    let (profiler_us, profiler_hidden_us) =
        profiler.map_or((0.0, 0.0), |p| profiler_split_us(p, period, taken_back));
    for (part, site) in charged(&idle, calls, sites) {
        if let Some(site) = site {
            by_site.entry(site).or_default().idle_us += part.dur();
        }
    }
    Step {
        period_us: period.dur(),
        profiler_us,
        profiler_hidden_us,
        gpu_busy_us,
        by_site,
        calls: in_step,
        reads_win_us: 0.0,
        reads_and_uploads_win_us: 0.0,
        host_scale: 1.0,
    }
}

/// Each of the `idle` stretches cut at the syncs blocking in it, with the site of `sites`
/// (one a call) each part is charged to: the sync the host was in when it began, or that
/// began during it, up to the next; the part before any is no sync's.
pub(crate) fn charged(
    idle: &[Span],
    calls: &[SyncCall],
    sites: &[usize],
) -> Vec<(Span, Option<usize>)> {
    let mut out = Vec::new();
    for idle in idle {
        let blocking: Vec<(usize, &SyncCall)> = (calls.iter().enumerate())
            .filter(|(_, c)| c.span.ts < idle.end && c.span.end > idle.ts)
            .collect();
        let first = blocking
            .first()
            .map_or(idle.end, |(_, c)| c.span.ts.max(idle.ts));
        if first > idle.ts {
            out.push((
                Span {
                    ts: idle.ts,
                    end: first,
                },
                None,
            ));
        }
        for (k, &(i, call)) in blocking.iter().enumerate() {
            let from = call.span.ts.max(idle.ts);
            let to = blocking
                .get(k + 1)
                .map_or(idle.end, |(_, next)| next.span.ts.max(from));
            out.push((Span { ts: from, end: to }, Some(sites[i])));
        }
    }
    out
}

/// The union of `spans`, sorted and disjoint.
pub fn merged(spans: impl Iterator<Item = Span>) -> Vec<Span> {
    let mut all: Vec<Span> = spans.collect();
    all.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    let mut out: Vec<Span> = Vec::with_capacity(all.len());
    for s in all {
        match out.last_mut() {
            Some(last) if s.ts <= last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

/// The stretches of `period` in which no GPU work ran.
pub(crate) fn idle_stretches(busy: &[Span], period: Span) -> Vec<Span> {
    let mut out = Vec::new();
    let mut at = period.ts;
    for b in busy
        .iter()
        .filter(|b| b.end > period.ts && b.ts < period.end)
    {
        if b.ts > at {
            out.push(Span { ts: at, end: b.ts });
        }
        at = at.max(b.end);
    }
    if at < period.end {
        out.push(Span {
            ts: at,
            end: period.end,
        });
    }
    out
}

pub(crate) fn overlap(a: Span, b: Span) -> f64 {
    (a.end.min(b.end) - a.ts.max(b.ts)).max(0.0)
}

#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod real_traces_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod untraced_step_tests;
