//! `sweep --processes N`: the sweep's rounds measured by worker processes, one after another,
//! so that what a process draws once for all its rounds (where its memory and the driver's
//! structures landed, the state of its CPU) varies between rounds and lands in the intervals
//! (see [`crate::runs::sweep`]).
//!
//! The parent writes its validated [`SweepConfig`] whole, as JSON, to [`WORKER_SETTINGS`] in
//! its `--out` and starts `metaprep sweep-worker` with that file (`--settings`; no command
//! line is parsed or validated again), its `--nvtx`, the rounds to measure and the grid
//! indices of the groups still open. A worker opens the GPU, pins its measuring thread,
//! measures those rounds exactly as a sweep measures its own ([`Measurer`]), and writes one
//! JSON [`WorkerMessage`] a line to stdout: when it has pinned, when each cell begins (the
//! parent tags its NVML samples with it), and each round's [`RoundResult`]. The parent keeps
//! every round as if it had measured it, stops groups by the same rule, and writes the files
//! after each worker.

use crate::harness::pin::pin_current_thread;
use crate::harness::process_group::{send_line, Worker};
use crate::results::config_file::ConfigFile;
use crate::runs::sweep::rounds::RoundResult;
use crate::runs::sweep::{grid, Measurer, RunState, Sink, SweepConfig};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The file under `--out` holding the config every sweep worker runs (`sweep-worker
/// --settings`): the parent's, as [`ConfigFile::write_json`] writes it.
pub const WORKER_SETTINGS: &str = "sweep-config.json";

/// What a worker hands back, one JSON document a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// The worker opened the GPU and pinned its measuring thread (env.json's note of it).
    Started { pinned: String },
    /// A cell begins; `counts` when it is a prep cell's visit (the progress counts those).
    Cell { label: String, counts: bool },
    /// A round is measured.
    Round(Box<RoundResult>),
}

/// The rounds a worker measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The first round's index over the whole run, from 0.
    pub first_round: usize,
    pub rounds: usize,
    /// Grid indices ([`grid`]) of the groups to visit.
    pub groups: Vec<usize>,
}

/// The command of a worker measuring `assignment`: this program's hidden `sweep-worker`, its
/// rounds and groups, the file of the config it runs and the parent's `--nvtx`. With no group
/// open (they all stopped before the floor did) `--groups` is left out: an empty value is no
/// list of indices.
pub fn worker_command(exe: &Path, assignment: &Assignment, settings: &Path, nvtx: bool) -> Command {
    let groups: Vec<String> = assignment.groups.iter().map(usize::to_string).collect();
    let mut c = Command::new(exe);
    c.arg("sweep-worker")
        .arg("--first-round")
        .arg(assignment.first_round.to_string())
        .arg("--rounds")
        .arg(assignment.rounds.to_string());
    if !groups.is_empty() {
        c.arg("--groups").arg(groups.join(","));
    }
    c.arg("--settings")
        .arg(settings)
        .arg("--nvtx")
        .arg(if nvtx { "on" } else { "off" });
    c
}

/// Measures the run's rounds in worker processes, keeping each round in `state` and writing
/// the files after each worker. Returns env.json's notes of each worker.
pub(crate) fn run(config: &SweepConfig, state: &mut RunState, sink: &Sink) -> Result<Vec<String>> {
    let exe = std::env::current_exe().context("finding this program to start sweep workers")?;
    let settings = config.out.join(WORKER_SETTINGS);
    config.write_json(&settings)?;
    let nvtx = crate::gpu::nvtx::enabled();
    let mut notes = Vec::new();
    let mut costs = Vec::new();
    let mut number = 1u32;
    while let Some(first_round) = state.next_round() {
        let assignment = Assignment {
            first_round,
            rounds: worker_rounds(
                [config.rounds, config.max_rounds, config.last_round()],
                config.processes,
                first_round,
            ),
            groups: state.open_specs().iter().map(|g| g.grid_index).collect(),
        };
        sink.plan(state, first_round, assignment.rounds);
        let label = format!("sweep worker {number}");
        let spawned = Instant::now();
        let mut first_cell = None;
        let mut pinned_note = String::new();
        let mut worker = Worker::spawn(&label, worker_command(&exe, &assignment, &settings, nvtx))?;
        // Kept until the worker ends: absorbing a round (stop rules, rows, NVML summaries
        // under the sampler's lock) while the worker measures the next would be the parent's
        // work beside the timed loops, and its stop decisions only shape the next worker.
        let mut rounds = Vec::with_capacity(assignment.rounds);
        while let Some(line) = worker.next_line()? {
            let message: WorkerMessage = serde_json::from_str(&line)
                .with_context(|| format!("{label} sent what is not a worker message"))?;
            match message {
                WorkerMessage::Started { pinned } => pinned_note = pinned,
                WorkerMessage::Cell { label, counts } => {
                    first_cell.get_or_insert_with(|| spawned.elapsed());
                    sink.mark(&label, counts)
                }
                WorkerMessage::Round(result) => {
                    let expected = first_round + rounds.len();
                    if result.round != expected {
                        bail!(
                            "{label} sent round {} where round {} was due",
                            result.round + 1,
                            expected + 1
                        );
                    }
                    rounds.push(result);
                }
            }
        }
        worker.finish()?;
        let cost = WorkerCost {
            start: first_cell.unwrap_or_default(),
            whole: spawned.elapsed(),
        };
        notes.push(format!(
            "worker {number}: {pinned_note}; {}",
            cost.note(rounds.len())
        ));
        costs.push(cost);
        if rounds.len() != assignment.rounds {
            bail!(
                "{label} ended after {} of its {} rounds without an error",
                rounds.len(),
                assignment.rounds
            );
        }
        for result in rounds {
            state.absorb(*result, number, sink);
        }
        sink.save(state)?;
        number += 1;
    }
    notes.push(WorkerCost::total_note(&costs));
    Ok(notes)
}

/// What one worker process took, as the parent saw it: its start (the process, its GPU
/// context, the kernels' load, the inputs) up to its first cell, and its whole life.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WorkerCost {
    start: Duration,
    whole: Duration,
}

impl WorkerCost {
    fn note(&self, rounds: usize) -> String {
        format!(
            "started in {:.2} s (to its first cell), {rounds} rounds in {:.1} s in all",
            self.start.as_secs_f64(),
            self.whole.as_secs_f64()
        )
    }

    /// What the workers' starts cost the run together: the price of `--processes`.
    fn total_note(costs: &[WorkerCost]) -> String {
        let starts: Duration = costs.iter().map(|c| c.start).sum();
        let whole: Duration = costs.iter().map(|c| c.whole).sum();
        let (starts, whole) = (starts.as_secs_f64(), whole.as_secs_f64());
        format!(
            "worker processes: {} started; their starts took {starts:.1} s of their {whole:.1} \
             s ({:.1}%)",
            costs.len(),
            100.0 * starts / whole.max(f64::MIN_POSITIVE)
        )
    }
}

/// Rounds the worker starting at round `first_round` measures, given the run's stage ends
/// (`--rounds`, `--max-rounds`, the last GPU-paced round), each stage shared out over up to
/// `processes` workers. No worker crosses a stage end: past `--rounds` groups begin to stop
/// (their visits would be thrown away), past `--max-rounds` rounds visit fewer arms.
pub fn worker_rounds(stage_ends: [usize; 3], processes: usize, first_round: usize) -> usize {
    let mut start = 0;
    for end in stage_ends {
        if first_round < end {
            return share(end - start, processes, first_round - start);
        }
        start = start.max(end);
    }
    0
}

/// From `at` to the end of its part, with `0..span` cut into `parts` runs of near-equal
/// length, the longer first.
fn share(span: usize, parts: usize, at: usize) -> usize {
    let parts = parts.clamp(1, span.max(1));
    let (base, longer) = (span / parts, span % parts);
    let mut end = 0;
    for part in 0..parts {
        end += base + usize::from(part < longer);
        if at < end {
            return end - at;
        }
    }
    0
}

/// Runs one worker: measures `assignment`'s rounds of `config`'s grid, writing each message
/// to `out`.
pub fn serve(config: &SweepConfig, assignment: &Assignment, out: &mut impl Write) -> Result<()> {
    let gpu = config.gpu.open()?;
    let whole = grid(config, gpu.info.device_count);
    let mut groups = Vec::with_capacity(assignment.groups.len());
    for &index in &assignment.groups {
        let spec = whole.get(index).with_context(|| {
            format!(
                "--groups: the grid has {} groups, no group {index}: a worker measures the \
                 grid of its parent's --settings",
                whole.len()
            )
        })?;
        groups.push(spec.clone());
    }
    // Held to the end: dropping it unpins the thread.
    let pinned = pin_current_thread(config.cpu)?;
    send_line(
        out,
        &WorkerMessage::Started {
            pinned: pinned.note(),
        },
    )?;
    let mut measurer = Measurer::new(&gpu, config, &groups)?;
    for round in assignment.first_round..assignment.first_round + assignment.rounds {
        let mut mark = |label: &str, counts: bool| {
            send_line(
                &mut *out,
                &WorkerMessage::Cell {
                    label: label.to_string(),
                    counts,
                },
            )
        };
        let result = measurer.round(round, &groups, &mut mark)?;
        send_line(out, &WorkerMessage::Round(Box::new(result)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::sweep::rounds::{ArmRound, FloorRound, GroupRound};

    /// The rounds of each worker of a run that no group leaves early.
    fn split(rounds: usize, max_rounds: usize, processes: usize) -> Vec<usize> {
        let mut sizes = Vec::new();
        let mut first = 0;
        while first < max_rounds {
            let n = worker_rounds([rounds, max_rounds, max_rounds], processes, first);
            assert!(
                n > 0,
                "worker at round {first} of {max_rounds} got no rounds"
            );
            sizes.push(n);
            first += n;
        }
        assert_eq!(first, max_rounds, "the workers' rounds overrun the run");
        sizes
    }

    #[test]
    fn the_fewest_rounds_see_every_process_and_no_worker_spans_their_end() {
        assert_eq!(split(6, 12, 5), [2, 1, 1, 1, 1, 2, 1, 1, 1, 1]);
        assert_eq!(split(6, 20, 5), [2, 1, 1, 1, 1, 3, 3, 3, 3, 2]);
        assert_eq!(split(6, 6, 5), [2, 1, 1, 1, 1]);
        // More processes than rounds: one round each.
        assert_eq!(split(6, 8, 9), [1, 1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(split(6, 12, 1), [6, 6]);
        // A resumed run starting inside a worker's share measures to that share's end.
        assert_eq!(worker_rounds([6, 12, 12], 5, 1), 1);
        assert_eq!(worker_rounds([6, 12, 12], 5, 3), 1);
        assert_eq!(worker_rounds([6, 12, 12], 5, 7), 1);
        // The GPU-paced arms' rounds past --max-rounds, over up to five more workers.
        let gpu_paced: Vec<usize> = std::iter::successors(Some(12), |&first| {
            Some(first + worker_rounds([6, 12, 30], 5, first)).filter(|&next| next < 30)
        })
        .map(|first| worker_rounds([6, 12, 30], 5, first))
        .collect();
        assert_eq!(gpu_paced, [4, 4, 4, 3, 3]);
        assert_eq!(worker_rounds([6, 12, 30], 5, 30), 0);
    }

    #[test]
    fn the_workers_starts_are_summed_against_their_lives() {
        let cost = |start: f64, whole: f64| WorkerCost {
            start: Duration::from_secs_f64(start),
            whole: Duration::from_secs_f64(whole),
        };
        let costs = [cost(1.25, 10.0), cost(2.75, 30.0)];
        assert_eq!(
            costs[0].note(2),
            "started in 1.25 s (to its first cell), 2 rounds in 10.0 s in all"
        );
        assert_eq!(
            WorkerCost::total_note(&costs),
            "worker processes: 2 started; their starts took 4.0 s of their 40.0 s (10.0%)"
        );
        assert!(WorkerCost::total_note(&[]).ends_with("(0.0%)"));
    }

    #[test]
    fn a_worker_gets_its_rounds_groups_and_the_parents_settings_file() {
        let assignment = Assignment {
            first_round: 4,
            rounds: 4,
            groups: vec![0, 3, 7],
        };
        let args = |nvtx: bool| -> String {
            let settings = Path::new("/out/sweep-config.json");
            let c = worker_command(Path::new("/bin/metaprep"), &assignment, settings, nvtx);
            let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into()).collect();
            args.join(" ")
        };
        assert_eq!(
            args(true),
            "sweep-worker --first-round 4 --rounds 4 --groups 0,3,7 --settings \
             /out/sweep-config.json --nvtx on"
        );
        assert!(args(false).ends_with("--nvtx off"));
    }

    #[test]
    fn messages_go_one_a_line_and_come_back_whole() {
        let round = RoundResult {
            round: 2,
            floor: FloorRound {
                items: vec![vec![2.0, 2.1]; 9],
                harness: vec![1.5],
                host_reference: vec![1.25, 1.26],
                seconds: 0.01,
            },
            groups: vec![GroupRound {
                grid_index: 7,
                arms: vec![(
                    1,
                    ArmRound {
                        step: vec![10.0, 10.5],
                        step_fwd: None,
                        host_issue: vec![3.0],
                        host_blocked: vec![0.0],
                        gpu_prep: vec![4.0],
                    },
                )],
                bytes: Some(8000),
                seconds: 0.2,
            }],
        };
        let messages = [
            WorkerMessage::Started {
                pinned: "measuring thread: pinned to CPU 15".into(),
            },
            WorkerMessage::Cell {
                label: "prep dsa_decode/graph bs=8 block=5 tp1".into(),
                counts: true,
            },
            WorkerMessage::Round(Box::new(round)),
        ];
        let mut out = Vec::new();
        for m in &messages {
            send_line(&mut out, m).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        let back: Vec<WorkerMessage> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, messages);
        assert_eq!(text.lines().count(), 3);
    }
}
