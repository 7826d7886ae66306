//! The timer seam of the step timeline: what the timeline pass calls around each item of
//! the host program, and the GPU spans it gets back, whichever timer measured them.
//!
//! * `events` (default): CUDA events around each GPU item; one span per item, from where its
//!   GPU work begins (for eager-sync after the host read) to its last kernel's end, so gaps
//!   between an eager arm's own launches fall inside the span.
//! * `cupti`: CUPTI's activity records, one span per kernel, copy and memset, each launch
//!   tagged with its step and item; gaps between launches stay gaps, and kernels of host
//!   items (framework ops) and the read's copy count as busy.

mod assign;
mod cupti;
mod events;

pub use assign::{assign, external_id};
pub use cupti::CuptiTimer;
pub use events::EventsTimer;

use crate::gpu::cupti::{load_cupti, CuptiLibrary};
use crate::gpu::Gpu;
use anyhow::Result;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// `--timer`: which timer measures the timeline pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimerKind {
    #[default]
    Events,
    Cupti,
}

impl FromStr for TimerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "events" => Ok(TimerKind::Events),
            "cupti" => Ok(TimerKind::Cupti),
            other => Err(format!("`{other}` is not a timer: use events or cupti")),
        }
    }
}

impl fmt::Display for TimerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimerKind::Events => "events",
            TimerKind::Cupti => "cupti",
        })
    }
}

/// One interval of GPU work, µs on the timer's clock from the pass's origin.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSpan {
    /// Index of the program item that issued it.
    pub item: usize,
    /// The kernel or copy, where the timer sees each one (CUPTI); `None` for a whole item.
    pub op: Option<String>,
    pub stream: u32,
    pub start_us: f64,
    pub end_us: f64,
}

/// One step's GPU spans and its completion.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSpans {
    pub spans: Vec<GpuSpan>,
    pub done_us: f64,
}

/// The items of a step's host program, as the timers need them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramItems {
    /// Whether each item issues GPU work (the events timer brackets only those).
    pub gpu: Vec<bool>,
}

impl ProgramItems {
    /// The last GPU item: its end completes a step.
    pub fn last_gpu(&self) -> Option<usize> {
        self.gpu.iter().rposition(|&g| g)
    }
}

/// What the timeline pass calls, per step `step` and program item `item`.
pub trait TimelineTimer {
    /// Readies a pass of at most `steps` steps with the GPU idle; the clock's origin is the
    /// moment this returns.
    fn start(&mut self, steps: usize) -> Result<()>;
    /// Before the item's first host action.
    fn enter(&mut self, step: usize, item: usize) -> Result<()>;
    /// Where the item's GPU span begins (a prep: after its host read and list upload).
    fn gpu_start(&mut self, step: usize, item: usize) -> Result<()>;
    /// After the item's last host action.
    fn leave(&mut self, step: usize, item: usize) -> Result<()>;
    /// Blocks until step `step`'s GPU work is done (the host's one-step-ahead rule).
    fn wait_step(&mut self, step: usize) -> Result<()>;
    /// Once the GPU is synchronised: the spans of steps `0..steps`.
    fn finish(&mut self, steps: usize) -> Result<Vec<StepSpans>>;
}

/// What makes a run's timers: the timer kind, with CUPTI loaded once where it is CUPTI's.
/// A timer is made per program ([`TimerSource::timer`]), since a step's items can differ
/// between cells (an EAGLE step's draft passes follow the block size).
pub struct TimerSource {
    kind: TimerKind,
    cupti: Option<CuptiLibrary>,
}

impl TimerSource {
    /// The source of `kind` timers; CUPTI is loaded from `cupti_lib` or found. Returns with
    /// it the line `env.json` records.
    pub fn open(kind: TimerKind, cupti_lib: Option<&Path>) -> Result<(TimerSource, String)> {
        Ok(match kind {
            TimerKind::Events => (
                TimerSource { kind, cupti: None },
                "occupancy and gap_us from a separate pass with CUDA events around each GPU \
                 item (--timer events)"
                    .to_string(),
            ),
            TimerKind::Cupti => {
                let library = load_cupti(cupti_lib)?;
                let line = format!(
                    "occupancy and gap_us from a separate pass timed by CUPTI's activity \
                     records, every kernel, copy and memset its own span (--timer cupti; {})",
                    library.describe()
                );
                (
                    TimerSource {
                        kind,
                        cupti: Some(library),
                    },
                    line,
                )
            }
        })
    }

    /// A timer of a program of `items` on `gpu`.
    pub fn timer<'g>(
        &self,
        gpu: &'g Gpu,
        items: ProgramItems,
    ) -> Result<Box<dyn TimelineTimer + 'g>> {
        Ok(match (self.kind, &self.cupti) {
            (TimerKind::Cupti, Some(library)) => {
                Box::new(CuptiTimer::new(gpu, items, library.clone())?)
            }
            _ => Box::new(EventsTimer::new(gpu, items)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_names_round_trip_and_bad_names_say_what_to_use() {
        for kind in [TimerKind::Events, TimerKind::Cupti] {
            assert_eq!(kind.to_string().parse::<TimerKind>(), Ok(kind));
        }
        assert_eq!(TimerKind::default(), TimerKind::Events);
        let e = "nsys".parse::<TimerKind>().unwrap_err();
        assert!(e.contains("use events or cupti"), "{e}");
    }

    #[test]
    fn the_last_gpu_item_ends_a_step() {
        let items = ProgramItems {
            gpu: vec![false, true, true, false],
        };
        assert_eq!(items.last_gpu(), Some(2));
        assert_eq!(ProgramItems { gpu: vec![false] }.last_gpu(), None);
    }
}
