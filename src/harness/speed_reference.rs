//! The host-speed reference: a fixed piece of CPU work, timed on the measuring thread (pinned
//! to its core) in every round of a sweep, so that each host-paced row can be read per unit of
//! host speed and a process whose host runs slower is seen as such.
//!
//! The work is a chase through one random cycle over a table of [`TABLE_ENTRIES`] `u32`s
//! (256 KiB: past L1, within a server core's L2; 64 pages, so the TLB takes part): every step a
//! dependent load, as a driver's launch path walks its structures. A unit is [`UNIT_STEPS`]
//! steps; the table is made once per process from a fixed seed, so every process does the same
//! work in memory of its own placement.

use crate::stats::rng::SplitMix64;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Entries of the chased table.
pub const TABLE_ENTRIES: usize = 1 << 16;
/// Steps of the chase in one unit of work (about a microsecond on a 2020s server core).
pub const UNIT_STEPS: usize = 256;
/// The seed of the cycle: the same work in every run.
const SEED: u64 = 0x6d65_7461_7072_6570;

pub struct HostReference {
    next: Vec<u32>,
    at: u32,
}

impl Default for HostReference {
    fn default() -> Self {
        Self::new()
    }
}

impl HostReference {
    /// The table: one cycle through every entry (Sattolo's shuffle), from the fixed seed.
    pub fn new() -> Self {
        let mut next: Vec<u32> = (0..TABLE_ENTRIES as u32).collect();
        let mut rng = SplitMix64::new(SEED);
        for i in (1..TABLE_ENTRIES).rev() {
            let j = rng.range(0, i as u64 - 1) as usize;
            next.swap(i, j);
        }
        Self { next, at: 0 }
    }

    /// Does `units` units of the work and returns how long they took.
    pub fn batch(&mut self, units: usize) -> Duration {
        let started = Instant::now();
        let mut at = self.at;
        for _ in 0..units * UNIT_STEPS {
            at = self.next[at as usize];
        }
        self.at = black_box(at);
        started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_is_one_cycle_through_every_entry_and_the_same_in_every_process() {
        let reference = HostReference::new();
        let (mut at, mut seen) = (0u32, vec![false; TABLE_ENTRIES]);
        for _ in 0..TABLE_ENTRIES {
            assert!(!seen[at as usize], "entry {at} came round twice");
            seen[at as usize] = true;
            at = reference.next[at as usize];
        }
        assert_eq!(at, 0, "back at the start after every entry");
        assert!(seen.iter().all(|&s| s));
        assert_eq!(reference.next, HostReference::new().next, "a fixed seed");
    }

    #[test]
    fn a_batch_walks_its_units_from_where_the_last_stopped() {
        // Two batches, of 1 and 2 units, end where one walk of 3 units from 0 does: the
        // second starts where the first stopped, not at 0.
        let mut reference = HostReference::new();
        reference.batch(1);
        reference.batch(2);
        let mut expected = 0u32;
        for _ in 0..3 * UNIT_STEPS {
            expected = reference.next[expected as usize];
        }
        assert_eq!(reference.at, expected);
    }
}
