//! The order a round visits the sweep's cell groups in.
//!
//! Each round visits every group still measuring once, in a fresh random order drawn from
//! the run's seed and the round's index (a Fisher–Yates shuffle driven by SplitMix64), so a
//! slow drift of the host or GPU lands on different groups in different rounds instead of
//! always on the same end of the grid. The arms of a group are visited back to back, their
//! order rotated by one each round, so drift during a group hits all its arms alike and no
//! arm always runs first.

use crate::stats::rng::SplitMix64;

/// One group's turn in a round: the group's index and its arms' indices in visiting order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visit {
    pub group: usize,
    pub arms: Vec<usize>,
}

/// The visits of round `round` (from 0) over `groups` (indices into the grid, each with
/// `arms` arms): the same for the same seed and round, a fresh order for another round.
pub fn round_order(groups: &[usize], arms: usize, seed: u64, round: usize) -> Vec<Visit> {
    let mut order = groups.to_vec();
    round_rng(seed, round).shuffle(&mut order);
    let mut arm_order: Vec<usize> = (0..arms).collect();
    arm_order.rotate_left(round % arms.max(1));
    order
        .into_iter()
        .map(|group| Visit {
            group,
            arms: arm_order.clone(),
        })
        .collect()
}

/// A generator for one round: seed and round hashed apart, so neither nearby seeds nor
/// nearby rounds share a stream (SplitMix64's streams from seeds `s` and `s + 1` would).
fn round_rng(seed: u64, round: usize) -> SplitMix64 {
    let base = SplitMix64::new(seed).next_u64();
    let salt = SplitMix64::new(round as u64 ^ 0xD1B5_4A32_D192_ED03).next_u64();
    SplitMix64::new(base ^ salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups_of(visits: &[Visit]) -> Vec<usize> {
        visits.iter().map(|v| v.group).collect()
    }

    #[test]
    fn every_group_once_per_round_in_a_seeded_order_that_changes_by_round() {
        let groups: Vec<usize> = (0..48).collect();
        let first = round_order(&groups, 5, 1, 0);
        assert_eq!(
            first,
            round_order(&groups, 5, 1, 0),
            "deterministic per seed"
        );
        let mut orders = Vec::new();
        for round in 0..6 {
            let visits = round_order(&groups, 5, 1, round);
            let mut seen = groups_of(&visits);
            seen.sort_unstable();
            assert_eq!(seen, groups, "round {round} visits every group once");
            orders.push(groups_of(&visits));
        }
        for (i, a) in orders.iter().enumerate() {
            for b in &orders[i + 1..] {
                assert_ne!(a, b, "rounds get fresh orders");
            }
        }
        assert_ne!(orders[0], groups, "shuffled, not the grid's order");
        assert_ne!(
            groups_of(&round_order(&groups, 5, 2, 0)),
            orders[0],
            "another seed, another order"
        );
        // Seed s round 1 is not seed s + 1 round 0.
        assert_ne!(groups_of(&round_order(&groups, 5, 2, 0)), orders[1]);
    }

    #[test]
    fn arms_of_a_group_are_adjacent_and_rotate_by_round() {
        let visits = round_order(&[3, 7, 9], 5, 42, 0);
        // A visit holds all of a group's arms: measured back to back, never interleaved.
        assert!(visits.iter().all(|v| v.arms == vec![0, 1, 2, 3, 4]));
        let later = round_order(&[3, 7, 9], 5, 42, 2);
        assert!(later.iter().all(|v| v.arms == vec![2, 3, 4, 0, 1]));
        // Over as many rounds as arms, each arm goes first once.
        let firsts: Vec<usize> = (0..5)
            .map(|round| round_order(&[0], 5, 42, round)[0].arms[0])
            .collect();
        assert_eq!(firsts, vec![0, 1, 2, 3, 4]);
        // Only the groups asked for are visited (later rounds skip stopped groups).
        assert_eq!(round_order(&[], 5, 42, 7), vec![]);
        let mut open = groups_of(&round_order(&[4, 1], 5, 42, 7));
        open.sort_unstable();
        assert_eq!(open, vec![1, 4]);
    }
}
