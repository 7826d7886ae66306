//! The order of an `ab` run's pairs: round by round every cell once, the cells shuffled anew
//! each round, and each cell's pairs half BASE-first and half NEW-first in a shuffled order,
//! so neither side is always measured first or always after the same cell.

use crate::stats::rng::SplitMix64;

/// One pair: cell `cell` measured on both sides back to back in round `round`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairSlot {
    pub round: usize,
    pub cell: usize,
    pub base_first: bool,
}

/// Every pair of `cells` cells over `rounds` rounds, in the order they run.
pub fn pair_order(cells: usize, rounds: usize, seed: u64) -> Vec<PairSlot> {
    let mut rng = SplitMix64::new(seed ^ 0xab_ab_ab_ab);
    // Each cell's first sides, balanced: with an odd count the extra pair's side is drawn.
    let firsts: Vec<Vec<bool>> = (0..cells)
        .map(|_| {
            let mut sides: Vec<bool> = (0..rounds).map(|r| r < rounds / 2).collect();
            if rounds % 2 == 1 {
                sides[rounds - 1] = rng.next_u64() & 1 == 1;
            }
            rng.shuffle(&mut sides);
            sides
        })
        .collect();
    let mut order = Vec::with_capacity(cells * rounds);
    for round in 0..rounds {
        let mut visit: Vec<usize> = (0..cells).collect();
        rng.shuffle(&mut visit);
        order.extend(visit.into_iter().map(|cell| PairSlot {
            round,
            cell,
            base_first: firsts[cell].get(round).copied().unwrap_or(true),
        }));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_once_a_round_with_its_first_sides_balanced() {
        for (cells, rounds) in [(24, 16), (5, 7), (1, 6), (3, 1)] {
            let order = pair_order(cells, rounds, 7);
            assert_eq!(order.len(), cells * rounds);
            for round in 0..rounds {
                let mut seen: Vec<usize> = (order.iter())
                    .filter(|p| p.round == round)
                    .map(|p| p.cell)
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..cells).collect::<Vec<_>>(), "round {round}");
            }
            for cell in 0..cells {
                let firsts = (order.iter())
                    .filter(|p| p.cell == cell && p.base_first)
                    .count();
                assert!(
                    firsts == rounds / 2 || firsts == rounds.div_ceil(2),
                    "cell {cell}: {firsts} BASE-first of {rounds}"
                );
            }
            // Rounds run in order.
            assert!(order.windows(2).all(|w| w[0].round <= w[1].round));
        }
    }

    #[test]
    fn the_order_is_shuffled_and_the_seed_repeats_it() {
        let order = pair_order(24, 16, 7);
        assert_eq!(order, pair_order(24, 16, 7));
        assert_ne!(order, pair_order(24, 16, 8));
        let round = |r: usize| -> Vec<usize> {
            order
                .iter()
                .filter(|p| p.round == r)
                .map(|p| p.cell)
                .collect()
        };
        assert_ne!(round(0), round(1), "each round its own cell order");
        assert_ne!(
            round(0),
            (0..24).collect::<Vec<_>>(),
            "not the grid's order"
        );
        // Not all of one cell's BASE-first pairs first: runs of one side stay short.
        let cell0: Vec<bool> = (order.iter())
            .filter(|p| p.cell == 0)
            .map(|p| p.base_first)
            .collect();
        assert_ne!(cell0, (0..16).map(|r| r < 8).collect::<Vec<_>>());
    }
}
