//! The floor's items, the harness and the host-speed reference round by round, and their rows.

use super::{difference, floor_cell, FloorRound, Rounds, HARNESS};
use crate::axes::floor_item::HOST_REFERENCE;
use crate::axes::FloorItem;
use crate::harness::bandwidth::gb_s_row;
use crate::harness::nvml::CellTelemetry;
use crate::harness::rows::RoundLine;
use crate::results::csv::Row;
use crate::stats::rounds::over_rounds;
use crate::stats::stopping::{RoundsRule, RoundsStop};
use std::time::Duration;

/// The floor's items, the harness and the host-speed reference, round by round.
#[derive(Debug, Clone, Default)]
pub struct FloorRounds {
    /// In [`FloorItem::ALL`]'s order.
    items: [Rounds; FloorItem::ALL.len()],
    harness: Rounds,
    host_reference: Rounds,
    /// Time spent measuring the floor, over all rounds.
    pub elapsed: Duration,
}

fn index_of(item: FloorItem) -> usize {
    FloorItem::ALL
        .iter()
        .position(|&i| i == item)
        .expect("every item is in ALL")
}

impl FloorRounds {
    pub fn push(&mut self, item: FloorItem, per_step_us: Vec<f64>) {
        self.items[index_of(item)].push(per_step_us);
    }

    pub fn push_harness(&mut self, per_step_us: Vec<f64>) {
        self.harness.push(per_step_us);
    }

    pub fn push_host_reference(&mut self, per_unit_us: Vec<f64>) {
        self.host_reference.push(per_unit_us);
    }

    /// Adds one round of the floor (its items in [`FloorItem::ALL`]'s order).
    pub fn push_round(&mut self, round: FloorRound) {
        for (item, samples) in FloorItem::ALL.iter().zip(round.items) {
            self.push(*item, samples);
        }
        self.push_harness(round.harness);
        self.push_host_reference(round.host_reference);
        self.elapsed += Duration::from_secs_f64(round.seconds);
    }

    /// The host-speed reference's rounds (none in a floor measured without it).
    pub fn host_reference(&self) -> &[Vec<f64>] {
        &self.host_reference
    }

    pub fn item(&self, item: FloorItem) -> &[Vec<f64>] {
        &self.items[index_of(item)]
    }

    /// Each item's `step_us` rounds, the harness's and the host-speed reference's, by name.
    fn step_rounds(&self) -> impl Iterator<Item = (&'static str, &Rounds)> {
        let names = FloorItem::ALL.iter().map(|i| i.name());
        let rounds = self.items.iter();
        names
            .chain([HARNESS, HOST_REFERENCE])
            .zip(rounds.chain([&self.harness, &self.host_reference]))
    }

    fn rounds(&self) -> usize {
        self.step_rounds().map(|(_, r)| r.len()).min().unwrap_or(0)
    }

    /// Whether the floor's rounds may stop, and why: every item's `step_us` and the
    /// harness's judged as a group's arms are (no read cost); `processes[r]` measured round
    /// `r` (the units of each interval: [`crate::stats::rounds::units`]).
    pub fn stop(&self, rule: &RoundsRule, processes: &[u32]) -> Option<RoundsStop> {
        let steps: Vec<_> = (self.step_rounds())
            .map(|(_, r)| over_rounds(r, processes))
            .collect();
        rule.check(self.rounds(), &steps, &[], self.elapsed)
    }

    /// Every round's median of each item's `step_us`, the harness's and the host reference's;
    /// `processes[r]` measured round `r`.
    pub fn round_lines(&self, processes: &[u32]) -> Vec<RoundLine> {
        self.step_rounds()
            .flat_map(|(name, rounds)| floor_cell(name).round_lines("step_us", rounds, processes))
            .collect()
    }

    /// The floor's rows: each item's `step_us`, the harness's and its overhead over the empty
    /// graph, and the host-speed reference's (µs per unit of its work); `telemetry` gives a
    /// floor cell's NVML summary by label; `processes[r]` measured round `r`.
    pub fn rows(
        &self,
        stop: RoundsStop,
        telemetry: impl Fn(&str) -> Option<CellTelemetry>,
        processes: &[u32],
    ) -> Vec<Row> {
        let stop = stop.as_str();
        let mut rows = Vec::new();
        for (item, rounds) in FloorItem::ALL.iter().zip(&self.items) {
            let cell = floor_cell(item.name());
            let t = telemetry(&cell.label());
            rows.extend(cell.rounds_row("step_us", "us", rounds, stop, t.as_ref(), processes));
            if let Some(bytes) = item.bytes_moved() {
                rows.extend(gb_s_row(&cell, bytes, rounds, stop, t.as_ref(), processes));
            }
        }
        let cell = floor_cell(HARNESS);
        let t = telemetry(&cell.label());
        let harness = &self.harness;
        rows.extend(cell.rounds_row("step_us", "us", harness, stop, t.as_ref(), processes));
        let empty_graph = self.item(FloorItem::EMPTY_GRAPH);
        rows.extend(cell.paired_row(
            "overhead_us",
            "us",
            (&self.harness, empty_graph),
            difference,
            None,
            processes,
        ));
        let cell = floor_cell(HOST_REFERENCE);
        let t = telemetry(&cell.label());
        let host = &self.host_reference;
        rows.extend(cell.rounds_row("step_us", "us", host, stop, t.as_ref(), processes));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::KIND_FLOOR;
    use crate::runs::sweep::rounds::fixtures::*;
    use crate::stats::rounds::ONE_PROCESS;

    #[test]
    fn floor_rows_and_the_harness_overhead() {
        let (_, floor) = drifting();
        let rows = floor.rows(RoundsStop::Precision, |_| None, ONE_PROCESS);
        let items: Vec<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
        assert_eq!(
            items,
            [
                "empty-kernel",
                "empty-graph",
                "empty-graph-2",
                "empty-graph-3",
                "d2h-int",
                "d2h-int-busy",
                "h2d-pinned",
                "h2d-pageable",
                "d2d-copy",
                "d2d-copy",
                "harness",
                "harness",
                HOST_REFERENCE
            ]
        );
        // 128 MiB a copy over 32 µs times the drift; inside a round the middle samples are
        // 1.001 times the level, and over rounds the median is between 1/1.05 and 1/1.0.
        let copy = rows
            .iter()
            .find(|r| r.arm == "d2d-copy" && r.metric == "gb_s")
            .unwrap();
        let expected = 134_217_728.0 / 32.0 / 1e3 / 1.001 * (1.0 / 1.05 + 1.0) / 2.0;
        assert!((copy.median / expected - 1.0).abs() < 1e-12, "{copy:?}");
        assert_eq!((copy.unit.as_str(), copy.rounds), ("GB/s", 6));
        assert!(rows.iter().all(|r| r.kind == KIND_FLOOR && r.rounds == 6));
        let overhead = find(&rows, HARNESS, "overhead_us");
        // 0.2 µs times the drift, formed round by round.
        assert!(
            (overhead.median - 0.2 * 1.001 * 1.025).abs() < 1e-9,
            "{overhead:?}"
        );
        assert!(overhead.ci_lo >= 0.9 * 0.2 && overhead.ci_hi <= 1.1 * 0.2 * 1.001 + 1e-12);
    }
}
