//! A sweep's state between rounds ([`RunState`]): every group's rounds so far and the floor's,
//! which groups are still open, the rows of those that stopped, each process's host speed;
//! and where a round's results go ([`Sink`]: progress, `rounds.csv`, the results file).
//! Shared by a sweep measured here and one measured in worker processes.

use super::{GroupSpec, SweepConfig};
use crate::axes::floor_item::HOST_REFERENCE;
use crate::harness::nvml::CellTelemetry;
use crate::harness::rounds_file::RoundsFile;
use crate::harness::rows::RoundLine;
use crate::harness::run_output::Recorder;
use crate::results::csv::Row;
use crate::results::pacing::gpu_paced_arm;
use crate::runs::sweep::rounds::{FloorRounds, GroupRounds, RoundResult};
use crate::stats::stopping::{RoundsRule, RoundsStop};
use anyhow::Result;
use indicatif::ProgressBar;
use std::collections::HashMap;

/// A group being measured: its rounds so far, and its rows once they have stopped.
pub(super) struct Group {
    pub(super) spec: GroupSpec,
    pub(super) rounds: GroupRounds,
    pub(super) rows: Vec<Row>,
}

/// Where a round's results go: the recorder (NVML's cell tags and the files), `rounds.csv`,
/// and the progress bar.
pub(crate) struct Sink<'r> {
    pub(super) recorder: &'r Recorder,
    pub(super) rounds_file: &'r RoundsFile,
    /// Rows an earlier invocation completed.
    pub(super) kept: &'r [Row],
    pub(super) progress: &'r ProgressBar,
}

impl Sink<'_> {
    /// A cell (of the floor, or a prep cell that `counts` as a cell visit) begins.
    pub(crate) fn mark(&self, label: &str, counts: bool) {
        self.recorder.set_cell(label);
        self.progress.set_message(label.to_string());
        if counts {
            self.progress.inc(1);
        }
    }

    /// Rounds `round..round + rounds` (from 0) are about to be measured: the bar's length
    /// grows to the rounds planned so far (those, or the rest of `--rounds`), and its heading
    /// names them against the run's range of rounds.
    pub(crate) fn plan(&self, state: &RunState, round: usize, rounds: usize) {
        let planned = state.min_rounds.saturating_sub(round).max(rounds);
        let arms = match round >= state.max_rounds {
            true => state.gpu_paced_arms,
            false => state.arms,
        };
        let visits = state.open.len() * arms * planned;
        self.progress
            .set_length(self.progress.position() + visits as u64);
        let last = round + rounds;
        let (min, max) = (state.min_rounds, state.max_rounds);
        let of = match round >= max {
            true => format!("{max}–{} (GPU-paced arms)", state.last_round),
            false => format!("{min}–{max}"),
        };
        self.progress.set_prefix(match rounds {
            1 => format!("round {last} of {of}: "),
            _ => format!("rounds {}–{last} of {of}: ", round + 1),
        });
    }

    /// Rounds first: a run stopped between the two writes then has every kept group's rounds,
    /// and a group whose rows are not yet written is measured again on resume.
    pub(crate) fn save(&self, state: &RunState) -> Result<()> {
        self.rounds_file.write(&state.round_lines())?;
        self.recorder.save(&state.rows(self.kept))
    }
}

/// The run's measurements so far: every group's rounds and the floor's, which groups are still
/// open, and which process measured each round.
pub(crate) struct RunState {
    groups: Vec<Group>,
    /// Indices into `groups` of those still measuring, in grid order.
    open: Vec<usize>,
    floor: FloorRounds,
    floor_stop: Option<RoundsStop>,
    floor_rows: Vec<Row>,
    group_rule: RoundsRule,
    floor_rule: RoundsRule,
    /// The process of each round absorbed (0: this one; workers from 1).
    processes: Vec<u32>,
    min_rounds: usize,
    max_rounds: usize,
    /// The last round any cell may get (GPU-paced arms past `max_rounds`).
    last_round: usize,
    arms: usize,
    gpu_paced_arms: usize,
}

impl RunState {
    pub(super) fn new(config: &SweepConfig, groups: Vec<Group>) -> Self {
        RunState {
            open: (0..groups.len()).collect(),
            groups,
            floor: FloorRounds::default(),
            floor_stop: None,
            floor_rows: Vec::new(),
            group_rule: config.group_rule(),
            floor_rule: config.floor_rule(),
            processes: Vec::new(),
            min_rounds: config.rounds,
            max_rounds: config.max_rounds,
            last_round: config.last_round(),
            arms: config.arms.len(),
            gpu_paced_arms: config.arms.iter().filter(|&&a| gpu_paced_arm(a)).count(),
        }
    }

    /// The next round to measure (from 0), or `None` once every group and the floor have
    /// stopped or the rounds run out.
    pub(crate) fn next_round(&self) -> Option<usize> {
        let round = self.processes.len();
        let finished = self.open.is_empty() && self.floor_stop.is_some();
        (round < self.last_round && !finished).then_some(round)
    }

    /// The groups still measuring, in grid order.
    pub(crate) fn open_specs(&self) -> Vec<GroupSpec> {
        self.open
            .iter()
            .map(|&i| self.groups[i].spec.clone())
            .collect()
    }

    /// Keeps a round measured by `process`, then forms the rows of the floor and of each group
    /// whose rounds stop now. A visit of a group that stopped already (a worker measures every
    /// round it was given), or of an arm that did, is left out.
    pub(crate) fn absorb(&mut self, result: RoundResult, process: u32, sink: &Sink) {
        let telemetry = |label: &str| sink.recorder.cell_telemetry(label);
        self.floor.push_round(result.floor);
        let by_grid: HashMap<usize, usize> = self
            .open
            .iter()
            .map(|&i| (self.groups[i].spec.grid_index, i))
            .collect();
        for visit in result.groups {
            if let Some(&i) = by_grid.get(&visit.grid_index) {
                self.groups[i].rounds.push_visit(visit);
            }
        }
        self.processes.push(process);
        // The floor is measured every round (the groups' rows pair with its rounds); once its
        // own rounds may stop, its rows are formed again each round from all of them.
        self.floor_stop = self
            .floor_stop
            .or_else(|| self.floor.stop(&self.floor_rule, &self.processes));
        if let Some(stop) = self.floor_stop {
            self.floor_rows = self.floor.rows(stop, telemetry, &self.processes);
        }
        self.open = close_stopped(
            &mut self.groups,
            &self.open,
            &self.group_rule,
            &self.floor,
            &telemetry,
            &self.processes,
        );
    }

    /// The run's rows: those kept from an earlier invocation, the floor's once its rounds have
    /// stopped, then every stopped group's in grid order.
    pub(super) fn rows(&self, kept: &[Row]) -> Vec<Row> {
        kept.iter()
            .chain(&self.floor_rows)
            .chain(self.groups.iter().flat_map(|g| &g.rows))
            .cloned()
            .collect()
    }

    /// Every round's medians so far, the floor's first: what `rounds.csv` holds.
    fn round_lines(&self) -> Vec<RoundLine> {
        let mut lines = self.floor.round_lines(&self.processes);
        for group in &self.groups {
            lines.extend(group.rounds.round_lines(&group.spec.cells, &self.processes));
        }
        lines
    }

    /// env.json's note of each worker's host speed: the median of its rounds' host-reference
    /// medians against the median worker's, naming a worker 1.25× slower or faster.
    pub(super) fn host_speed_by_process(&self) -> Vec<String> {
        let reference = self.floor.host_reference();
        let mut by_process: std::collections::BTreeMap<u32, Vec<Vec<f64>>> = Default::default();
        for (round, &process) in reference.iter().zip(&self.processes) {
            by_process.entry(process).or_default().push(round.clone());
        }
        let medians: Vec<(u32, f64)> = by_process
            .into_iter()
            .filter_map(|(p, rounds)| {
                let m = crate::stats::summary::summarize(&crate::stats::rounds::round_medians(
                    &rounds,
                ))?;
                Some((p, m.median))
            })
            .collect();
        let Some(typical) =
            crate::stats::summary::summarize(&medians.iter().map(|(_, m)| *m).collect::<Vec<_>>())
                .map(|s| s.median)
        else {
            return Vec::new();
        };
        let each: Vec<String> = medians
            .iter()
            .map(|&(p, m)| {
                let ratio = m / typical;
                let named = if ratio >= SLOW_PROCESS {
                    format!(" (its host ran {ratio:.2}× as slow)")
                } else if ratio <= 1.0 / SLOW_PROCESS {
                    format!(" (its host ran {:.2}× as fast)", 1.0 / ratio)
                } else {
                    String::new()
                };
                format!("worker {p} {m:.3} µs, {ratio:.2}× the median{named}")
            })
            .collect();
        vec![format!(
            "host-speed reference ({HOST_REFERENCE}, median µs a unit of its CPU work) by \
             worker process: {}; each round's in rounds.csv with its process",
            each.join("; ")
        )]
    }
}

/// A worker whose host-speed reference is this many times the median worker's (or its
/// inverse) is named slow (fast) in env.json.
pub(super) const SLOW_PROCESS: f64 = 1.25;

/// Forms the rows of every `open` group whose arms' rounds have all stopped now, and returns
/// the rest.
pub(super) fn close_stopped(
    groups: &mut [Group],
    open: &[usize],
    rule: &RoundsRule,
    floor: &FloorRounds,
    telemetry: &dyn Fn(&str) -> Option<CellTelemetry>,
    processes: &[u32],
) -> Vec<usize> {
    let mut still_open = Vec::new();
    for &index in open {
        let group = &mut groups[index];
        let done = group.rounds.update(rule, processes);
        match group.rounds.group_stop().filter(|_| done) {
            Some(stop) => {
                let cells = &group.spec.cells;
                let telemetry: Vec<_> = cells.iter().map(|c| telemetry(&c.label())).collect();
                group.rows = group.rounds.rows(cells, floor, stop, &telemetry, processes);
            }
            None => still_open.push(index),
        }
    }
    still_open
}
