//! What framework work costs right after the host waited, measured in the engine's process
//! (scripts/metaprep_host.py `post_wait_probe`), and where a step's host program pays it.
//!
//! Ops right after a wait cost more, growing with the wait: a trace taken at one forward
//! length carries that length's penalty only, and an eager-sync step pays it after every
//! read, which a flat per-op cost cannot follow (docs/h200-findings.md: post-wait cost).

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// A gap between two framework calls shorter than this is back to back (the harness's own
/// op-to-op time is well under it); a longer one starts a new post-wait sequence.
pub const GAP_US: f64 = 10.0;

/// The extra host µs of the framework calls after a wait, by the wait's length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostWait {
    /// The waits measured, µs, ascending; the first is 0 (back to back).
    pub gaps_us: Vec<f64>,
    /// Framework calls in each timed segment after a wait (the probe's: the first call, then
    /// passes of 24).
    pub segment_ops: Vec<u32>,
    /// Per gap, per segment: the segment's µs after that wait less its µs after none.
    pub extra_us: Vec<Vec<f64>>,
}

impl PostWait {
    pub fn check_well_formed(&self) -> Result<()> {
        let n = self.gaps_us.len();
        ensure!(
            n >= 2 && self.gaps_us[0] == 0.0,
            "post_wait.gaps_us: give 0 (back to back) and at least one wait"
        );
        ensure!(
            self.gaps_us.windows(2).all(|w| w[0] < w[1])
                && self.gaps_us.iter().all(|g| g.is_finite()),
            "post_wait.gaps_us must rise: {:?}",
            self.gaps_us
        );
        ensure!(
            !self.segment_ops.is_empty() && self.segment_ops.iter().all(|&o| o > 0),
            "post_wait.segment_ops: one count above 0 per timed segment"
        );
        ensure!(
            self.extra_us.len() == n
                && self
                    .extra_us
                    .iter()
                    .all(|row| row.len() == self.segment_ops.len()
                        && row.iter().all(|v| v.is_finite() && v.abs() < 1e6)),
            "post_wait.extra_us: one row per gap ({n}), one finite µs per segment ({}) in each",
            self.segment_ops.len()
        );
        Ok(())
    }

    /// How many calls after a wait the probe timed (the segments' calls): past them it adds
    /// nothing.
    pub fn calls(&self) -> u32 {
        self.segment_ops.iter().sum()
    }

    /// Every extra µs times `scale` (a framework cost, moved with the host's speed).
    pub fn scale(&mut self, scale: f64) {
        for row in &mut self.extra_us {
            for v in row {
                *v *= scale;
            }
        }
    }

    /// Extra µs of framework call `k` (0 is the first) after a wait of `gap_us`: its segment's
    /// extra spread evenly over the segment's calls, linear in the wait between the measured
    /// ones and the longest one's beyond; none past the last segment, where the probe stopped
    /// looking.
    pub fn extra_us(&self, gap_us: f64, k: u32) -> f64 {
        let mut first = 0;
        let Some(segment) = self.segment_ops.iter().position(|&ops| {
            first += ops;
            k < first
        }) else {
            return 0.0;
        };
        let per_call = |g: usize| self.extra_us[g][segment] / f64::from(self.segment_ops[segment]);
        let gaps = &self.gaps_us;
        let above = gaps.partition_point(|&g| g <= gap_us);
        match above {
            0 => per_call(0),
            n if n == gaps.len() => per_call(n - 1),
            n => {
                let (g0, g1) = (gaps[n - 1], gaps[n]);
                let w = (gap_us - g0) / (g1 - g0);
                per_call(n - 1) * (1.0 - w) + per_call(n) * w
            }
        }
    }
}

/// The waits a host program is still paying for: each wait's µs and the framework calls
/// since it. One rule for `steps` ([`AfterWait`]) and for calibrate's walk over a trace, so
/// what one takes off the other adds back.
///
/// Every wait starts a sequence of its own, and a call pays the largest extra of the live
/// ones (each at its own wait and call count; docs/h200-findings.md: post-wait cost). The
/// largest, not the sum: a short syncing copy right after a long read does not add its own
/// extra to the read's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sequence {
    /// (wait µs, calls since), oldest first; none past what the table timed.
    live: Vec<(f64, u32)>,
}

/// Live sequences kept at most (many short Python gaps within a long read's calls): past it
/// the shortest wait's goes, the one whose extras are the smallest.
const LIVE_MAX: usize = 8;

impl Sequence {
    /// A wait or gap of `gap_us`: a new sequence beside the live ones.
    pub fn wait(&mut self, gap_us: f64) {
        self.live.push((gap_us, 0));
        if self.live.len() > LIVE_MAX {
            let shortest = (0..self.live.len())
                .min_by(|&a, &b| self.live[a].0.total_cmp(&self.live[b].0))
                .expect("more than LIVE_MAX live");
            self.live.remove(shortest);
        }
    }

    /// The next call's extra µs, counting it in every live sequence: the largest of theirs.
    /// A negative extra (the probe's noise at short waits) counts as none: a wait never
    /// makes a call cheaper than its back-to-back cost.
    pub fn next_call(&mut self, table: &PostWait) -> f64 {
        let extra = (self.live.iter())
            .map(|&(gap, calls)| table.extra_us(gap, calls))
            .fold(0.0, f64::max);
        for (_, calls) in &mut self.live {
            *calls += 1;
        }
        let timed = table.calls();
        self.live.retain(|&(_, calls)| calls < timed);
        extra
    }
}

/// Where a running host program stands after its last wait: the stepper keeps one across
/// steps, so the wait between two steps counts too.
#[derive(Debug, Clone)]
pub struct AfterWait {
    table: Option<PostWait>,
    sequence: Sequence,
    last_end: Option<Instant>,
}

impl AfterWait {
    /// With no table every extra is zero.
    pub fn new(table: Option<PostWait>) -> AfterWait {
        AfterWait {
            table,
            sequence: Sequence::default(),
            last_end: None,
        }
    }

    /// The extra host time of a framework call beginning at `start`: a gap since the last
    /// call ended longer than [`GAP_US`] (a Python segment, the wait between two steps) is a
    /// wait by [`Sequence`]'s rule.
    pub fn call(&mut self, start: Instant) -> Duration {
        let Some(table) = &self.table else {
            return Duration::ZERO;
        };
        if let Some(end) = self.last_end {
            let gap = start.saturating_duration_since(end).as_secs_f64() * 1e6;
            if gap > GAP_US {
                self.sequence.wait(gap);
            }
        }
        Duration::from_secs_f64(self.sequence.next_call(table) * 1e-6)
    }

    /// The call that began the sequence ended at `end`.
    pub fn ended(&mut self, end: Instant) {
        self.last_end = Some(end);
    }

    /// The host waited `blocked` inside a call (a read, a syncing copy) that ended at `end`:
    /// the calls after it pay for that wait, by [`Sequence`]'s rule.
    pub fn waited(&mut self, blocked: Duration, end: Instant) {
        if self.table.is_some() {
            self.sequence.wait(blocked.as_secs_f64() * 1e6);
        }
        self.last_end = Some(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table shaped like a probe's (µs): the first call, then two passes of 24 calls.
    fn table() -> PostWait {
        PostWait {
            gaps_us: vec![0.0, 100.0, 1000.0, 3000.0],
            segment_ops: vec![1, 24, 24],
            extra_us: vec![
                vec![0.0, 0.0, 0.0],
                vec![-4.0, 24.0, 12.0],
                vec![12.0, 60.0, 24.0],
                vec![26.0, 108.0, 48.0],
            ],
        }
    }

    #[test]
    fn the_extra_follows_the_segment_and_the_wait() {
        let t = table();
        t.check_well_formed().unwrap();
        assert_eq!(t.extra_us(0.0, 0), 0.0);
        assert_eq!(t.extra_us(3000.0, 0), 26.0);
        assert!((t.extra_us(3000.0, 1) - 4.5).abs() < 1e-12);
        assert!((t.extra_us(3000.0, 24) - 4.5).abs() < 1e-12);
        assert!((t.extra_us(3000.0, 25) - 2.0).abs() < 1e-12);
        // Past the last segment the probe saw nothing.
        assert_eq!(t.extra_us(3000.0, 49), 0.0);
        // Linear between measured waits, the longest one's beyond.
        assert!((t.extra_us(2000.0, 0) - 19.0).abs() < 1e-12);
        assert!((t.extra_us(550.0, 1) - (1.0 + 0.5 * 1.5)).abs() < 1e-12);
        assert_eq!(t.extra_us(50_000.0, 0), 26.0);
    }

    #[test]
    fn a_bad_table_is_refused() {
        let mut t = table();
        t.gaps_us[0] = 5.0;
        assert!(t.check_well_formed().is_err());
        let mut t = table();
        t.gaps_us.swap(1, 2);
        assert!(t.check_well_formed().is_err());
        let mut t = table();
        t.extra_us[2].pop();
        assert!(t.check_well_formed().is_err());
        let mut t = table();
        t.segment_ops[1] = 0;
        assert!(t.check_well_formed().is_err());
    }

    #[test]
    fn a_sequence_starts_after_a_wait_or_a_gap_and_runs_on_back_to_back() {
        let mut w = AfterWait::new(Some(table()));
        let t0 = Instant::now();
        let us = |v: u64| Duration::from_micros(v);
        // A read blocked 3000 µs: the next call is the sequence's first.
        w.waited(us(3000), t0);
        assert_eq!(w.call(t0 + us(1)), us(26));
        w.ended(t0 + us(40));
        // Back to back: the second call.
        let second = w.call(t0 + us(41));
        assert!((second.as_secs_f64() * 1e6 - 4.5).abs() < 1e-3);
        w.ended(t0 + us(60));
        // A 1000 µs Python segment: its own first call (12 µs) over the 3 ms sequence's
        // third (4.5 µs).
        let third = w.call(t0 + us(1060));
        assert_eq!(third, us(12));
        w.ended(t0 + us(1070));
        // A 5000 µs gap: a new sequence, at that gap (the longest measured wait's extra).
        assert_eq!(w.call(t0 + us(6070)), us(26));
        // No table: nothing.
        let mut none = AfterWait::new(None);
        none.waited(us(3000), t0);
        assert_eq!(none.call(t0), Duration::ZERO);
    }

    #[test]
    fn each_wait_starts_a_sequence_and_a_call_pays_the_largest_live_extra() {
        let t = table();
        let mut seq = Sequence::default();
        seq.wait(3000.0);
        assert_eq!(seq.next_call(&t), 26.0);
        // A syncing copy that waited 20 µs: its own first call is cheaper (the 0–100 µs
        // extras interpolated: -0.8, none) than the 3 ms sequence's second, which is paid,
        // not both.
        seq.wait(20.0);
        assert!((seq.next_call(&t) - 4.5).abs() < 1e-12);
        // Past the first pass (call 25 of the 3 ms sequence: 2 µs) a 1 ms wait's first call
        // (12 µs) is paid, then its first pass (2.5 µs a call) over the older one's 2.
        for _ in 0..23 {
            seq.next_call(&t);
        }
        seq.wait(1000.0);
        assert_eq!(seq.next_call(&t), 12.0);
        assert!((seq.next_call(&t) - 2.5).abs() < 1e-12);
        // Past the probe's 49 calls a sequence ends: after a lone 100 µs wait, its calls are
        // paid alone once the others have run out.
        let mut seq = Sequence::default();
        seq.wait(3000.0);
        for _ in 0..49 {
            seq.next_call(&t);
        }
        assert_eq!(seq.next_call(&t), 0.0);
        seq.wait(300.0);
        // Its first call's extra is negative there (-4 + 200/900 of 16): none.
        assert_eq!(seq.next_call(&t), 0.0);
        assert!((seq.next_call(&t) - (1.0 + 200.0 / 900.0 * 1.5)).abs() < 1e-12);
        // Many short gaps within a long read's calls keep the read's sequence: past
        // LIVE_MAX the shortest wait's goes.
        let mut seq = Sequence::default();
        seq.wait(3000.0);
        for _ in 0..2 * LIVE_MAX {
            seq.wait(20.0);
            seq.next_call(&t);
        }
        assert_eq!(seq.live.len(), LIVE_MAX);
        assert!((seq.next_call(&t) - 4.5).abs() < 1e-12);
        // The same through AfterWait: a read, then a copy's short wait.
        let mut w = AfterWait::new(Some(t));
        let t0 = Instant::now();
        w.waited(Duration::from_micros(3000), t0);
        w.waited(Duration::from_micros(20), t0);
        assert_eq!(w.call(t0), Duration::from_micros(26));
    }

    #[test]
    fn a_negative_extra_counts_as_none() {
        let mut w = AfterWait::new(Some(table()));
        let t0 = Instant::now();
        w.waited(Duration::from_micros(100), t0);
        assert_eq!(w.call(t0), Duration::ZERO);
    }
}
