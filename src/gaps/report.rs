//! What `gaps` writes: `summary.md`, led by the answer, and `gaps.json`.

use super::syncs::SyncKind;
use super::{Gaps, Headline, Site, SiteCost, Spread};
use crate::calibrate::FitRow;
use crate::report::format::{fmt_num, table_cell};
use crate::results::env::code;
use std::fmt::Write;

/// Sites a summary lists; the rest are in gaps.json.
const SITES_SHOWN: usize = 20;

/// `median [p10, p90]` of a spread of µs.
pub(super) fn us(s: &Spread) -> String {
    format!(
        "{} [{}, {}]",
        fmt_num(s.median),
        fmt_num(s.p10),
        fmt_num(s.p90)
    )
}

/// A count a step: whole where it is (`1`), else as other numbers are.
fn count(x: f64) -> String {
    match x.fract() == 0.0 {
        true => format!("{x:.0}"),
        false => fmt_num(x),
    }
}

/// `-9.8% [-10.3, -9.1]` of a spread of percentages.
pub(super) fn pct(s: &Spread) -> String {
    format!("{:+.1}% [{:+.1}, {:+.1}]", s.median, s.p10, s.p90)
}

/// Where a sync was made, in words: `Tensor.tolist()` in `draft prep` (model_runner.py(88): f).
pub fn site_name(site: &Site) -> String {
    let mut name = code(&site.op);
    if let Some(region) = &site.region {
        let _ = write!(name, " in {}", code(region));
    }
    if let Some(function) = &site.function {
        let _ = write!(name, " ({})", code(function));
    }
    name
}

fn kind_name(kind: SyncKind) -> &'static str {
    match kind {
        SyncKind::Read => "read",
        SyncKind::Upload => "upload",
        SyncKind::Other => "sync",
    }
}

/// The summary's first lines: what the step waits on, and what removing the reads wins.
pub fn headline(g: &Gaps) -> String {
    let steps = g.steps.len();
    // The costliest read by what removing it saves: a long block on GPU work costs nothing.
    let top = (g.sites.iter())
        .filter(|s| s.site.kind == SyncKind::Read)
        .max_by(|a, b| a.win_us.median.total_cmp(&b.win_us.median));
    let Some(top) = top else {
        return format!(
            "**No host read of device data** in the {steps} steps of {} (found from {}): the \
             step is {} µs [p10, p90], its GPU idle {} µs of it.\n",
            code(&g.file),
            g.steps_from,
            us(&g.period_us),
            us(&g.gpu_idle_us)
        );
    };
    let uploads = g.sites.iter().any(|s| s.site.kind == SyncKind::Upload);
    let top_read = format!(
        "{} a step: the host blocked {} µs in it, the GPU idle {} µs after it",
        count(top.calls_per_step),
        fmt_num(top.blocked_us.median),
        fmt_num(top.idle_us.median),
    );
    let of_step = format!(
        "of {} µs a step; median over {steps} steps [p10, p90]",
        fmt_num(g.period_us.median)
    );
    // Where each read is followed by an upload that waits in its place, the reads alone win
    // little, and the answer is the two together.
    if uploads && g.reads_and_uploads_win_us.median > 2.0 * g.win_us.median.max(1.0) {
        return format!(
            "**The step's reads and uploads cost it {} µs**, the costliest read {} ({top_read}); \
             removing them: ITL {} ({} {of_step}). The reads alone win {} µs, ITL {}: an upload \
             left in the step waits for the GPU in a removed read's place.{}\n",
            fmt_num(g.reads_and_uploads_win_us.median),
            site_name(&top.site),
            pct(&g.reads_and_uploads_itl_change_pct),
            fmt_num(g.reads_and_uploads_win_us.median),
            fmt_num(g.win_us.median),
            pct(&g.itl_change_pct),
            as_traced_line(g, |t| (
                &t.reads_and_uploads_itl_change_pct,
                &t.reads_and_uploads_win_us
            )),
        );
    }
    let mut line = format!(
        "**{} costs the step {} µs** ({top_read}); removing the step's reads: ITL {}, throughput \
         {} ({} {of_step}).",
        site_name(&top.site),
        fmt_num(top.win_us.median),
        pct(&g.itl_change_pct),
        pct(&g.throughput_change_pct),
        fmt_num(g.win_us.median),
    );
    if uploads {
        let _ = write!(
            line,
            " With the uploads too (an upload left in the step waits for the GPU in a removed \
             read's place): ITL {} ({} µs a step).",
            pct(&g.reads_and_uploads_itl_change_pct),
            fmt_num(g.reads_and_uploads_win_us.median),
        );
    }
    line.push_str(&as_traced_line(g, |t| (&t.itl_change_pct, &t.win_us)));
    line.push('\n');
    line
}

fn site_row(out: &mut String, rank: usize, s: &SiteCost) {
    let _ = writeln!(
        out,
        "| {rank} | {} | {} | `{}` | {} | {} | {} | {} |",
        kind_name(s.site.kind),
        table_cell(&site_name(&s.site)),
        s.site.call,
        count(s.calls_per_step),
        us(&s.blocked_us),
        us(&s.idle_us),
        us(&s.win_us),
    );
}

/// What the figures make of the profiler's own cost.
fn profiler_line(g: &Gaps) -> String {
    if let Some(s) = g.untraced {
        return untraced_step_line(g, s.untraced_step_us, s.factor);
    }
    match &g.probe_file {
        Some(probe) => format!(
            "The profiler's own cost, fitted from {}, is taken off: {} µs a step on the \
             step's critical path (what the host lagged by its events' cost since it last \
             waited, taken back where the GPU idled), and what it hid behind GPU work is added \
             to the syncs' waits.{}",
            code(probe),
            us(&g.profiler_us),
            probe_fit_sentence(g.probe_fit.as_deref().unwrap_or_default())
        ),
        None => "No probe file is beside the trace, so every figure is as traced: host times \
                 under `torch.profiler` are 1.5-2.5× their bare cost, which stretches the step \
                 and shortens the waits the reads would free, and the change can be far off \
                 either way. Record with `scripts/metaprep_host.py`'s probes beside the trace \
                 (docs/gaps.md)."
            .into(),
    }
}

/// With `--untraced-step-us`: the host time scaled to the step the user measured.
fn untraced_step_line(g: &Gaps, step: f64, scale: f64) -> String {
    let probe = match &g.probe_file {
        Some(probe) => format!(
            ", after the per-event costs fitted from {} ({} µs a step)",
            code(probe),
            us(&g.profiler_us)
        ),
        None => String::new(),
    };
    let slower = match scale > 1.0 {
        true => {
            " A factor over 1 says the loop ran slower untraced than traced: the step given \
                  is of another load, or the host's speed moved between the two."
        }
        false => "",
    };
    format!(
        "The steps' host time (each step less its GPU work) is scaled x{scale:.2}{probe}, so that \
         the median step (across the run's ranks, where it has several) lasts the {} µs measured \
         without the profiler (`--untraced-step-us`): what the profiler stretched comes off in \
         proportion to the host's time, and the GPU's work stays as traced.{slower}",
        fmt_num(step)
    )
}

/// How far the fitted per-event costs miss the probe workload with the most overhead: its
/// many events of varied ops are the nearest to a step's (a tiny workload's miss of a µs or two
/// is noise, not a step's uncertainty).
pub(super) fn probe_fit_sentence(fit: &[FitRow]) -> String {
    let largest = fit
        .iter()
        .max_by(|a, b| a.overhead_us.total_cmp(&b.overhead_us));
    let Some((row, miss)) = largest.and_then(|r| Some((r, r.miss_pct()?))) else {
        return String::new();
    };
    format!(
        " The fitted costs give the probe's largest workload ({}) {} µs of the {} µs it was \
         timed to cost ({:+.0}%): the correction is no surer than that.",
        code(&row.workload),
        fmt_num(row.fitted_us),
        fmt_num(row.overhead_us),
        miss
    )
}

/// The share of the step its GPU idles.
fn idle_share(g: &Gaps) -> f64 {
    g.gpu_idle_us.median / g.period_us.median
}

/// Whether the host paces the step: its GPU idles half of it or more.
fn host_paced(g: &Gaps) -> bool {
    idle_share(g) >= 0.5
}

/// Where the host paces a corrected step (a probe file, an untraced step), the headline's figure
/// as traced beside it: the win is a share of host time, and the answer rests on the correction.
fn as_traced_line(g: &Gaps, figure: fn(&Headline) -> (&Spread, &Spread)) -> String {
    let Some(t) = g.as_traced.as_ref().filter(|_| host_paced(g)) else {
        return String::new();
    };
    let (change, win) = figure(t);
    // What the correction took off the median step; an untraced step may have added to it.
    let moved = t.period_us.median - g.period_us.median;
    let rests_on = match moved < 0.0 {
        true => format!("{} µs a step added to the host's time", fmt_num(-moved)),
        false => format!("{} µs a step of profiler cost taken off", fmt_num(moved)),
    };
    format!(
        " **The host paces this step, so the answer rests on the {rests_on}**; as traced, \
         with it left in: ITL {} ({} of {} µs a step). Checked against loops whose change was \
         measured, such steps read 0.5–2.2× it, and that change itself moved between hosts \
         (docs/gaps.md, How well it holds): record a few traces and read both.",
        pct(change),
        fmt_num(win.median),
        fmt_num(t.period_us.median),
    )
}

/// Where the host paces the step, what the win leaves out: the code before a read.
fn host_paced_line(g: &Gaps) -> String {
    if !host_paced(g) {
        return String::new();
    }
    format!(
        " The host paces this step (its GPU idles {:.0}% of it), so removing a read wins the host \
         time it frees, not the GPU's idle. Code before a read that exists for it (a `.max()` \
         launched to be read) looks like other host work in a trace and is not counted.",
        100.0 * idle_share(g)
    )
}

/// The whole summary.md.
pub fn markdown(g: &Gaps) -> String {
    let mut out = headline(g);
    let _ = writeln!(
        out,
        "\nTrace {}; {} steps, found from {}. A step is the time from its start to the next \
         step's: {} µs [p10, p90]; its GPU was idle {} µs of it.\n",
        code(&g.file),
        g.steps.len(),
        g.steps_from,
        us(&g.period_us),
        us(&g.gpu_idle_us)
    );
    let _ = writeln!(
        out,
        "**The model.** Without a sync the host runs ahead of the GPU, so a step takes the \
         longer of its host work (the step less the calls removed: each `.item()` or copy whole, \
         its wait included, with the host's work on what a read returned up to the next launch \
         and, for an upload, since the last launch) and its GPU work, instead of their serial \
         sum. Each GPU idle \
         stretch is charged to the sync the host was blocked in when it began (or that began \
         during it), up to the next sync: the wait, and the host work between the sync's return \
         and the next launch. A read copies device data to the host (`.item()`, `.tolist()`); \
         an upload waits for a copy from pageable memory. {}{}\n",
        profiler_line(g),
        host_paced_line(g)
    );
    if g.sites.is_empty() {
        out.push_str("No host sync call in the steps.\n");
        return out;
    }
    out.push_str(
        "| # | kind | where | call | calls a step | host blocked, µs a step | GPU idle after it, µs a step | removing it alone saves, µs a step |\n\
         |---:|---|---|---|---:|---:|---:|---:|\n",
    );
    for (i, s) in g.sites.iter().take(SITES_SHOWN).enumerate() {
        site_row(&mut out, i + 1, s);
    }
    if g.sites.len() > SITES_SHOWN {
        let _ = writeln!(
            out,
            "\n{} more sites in gaps.json.",
            g.sites.len() - SITES_SHOWN
        );
    }
    out
}
