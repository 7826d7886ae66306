//! Ranks of one world: which worker a process is, how it joins the others through NCCL, and
//! how ranks that measure on their own stay in lock-step: every decision a rank could take
//! differently (stop a cell, size the next pass, end a timeline pass) is agreed as the
//! maximum over ranks, and cells begin with a barrier.

use crate::gpu::nccl::{Comm, Nccl};
use crate::gpu::Gpu;
use crate::harness::pin::{allowed_cpus, CpuPin};
use crate::harness::process_group::run_group;
use crate::harness::rendezvous::{await_published, publish};
use crate::stats::rng::SplitMix64;
use crate::stats::stopping::RoundsStop;
use anyhow::{bail, Context, Result};
use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

/// How long a rank waits for rank 0's NCCL id (rank 0 may still be compiling kernels).
const ID_WAIT: Duration = Duration::from_secs(300);
/// Where the ranks of the world whose folder is `dir` meet: rank 0 publishes the NCCL id
/// there.
pub fn id_file(dir: &Path) -> PathBuf {
    dir.join("nccl-id")
}

/// Runs a world of `ranks` processes in `dir` (created; a stale id file of an earlier run
/// removed, so no rank joins another world) until all have exited 0 or one has failed (see
/// [`run_group`]). `command(rank, exe)` builds rank `rank`'s command line, `exe` being this
/// program; the ranks meet at [`id_file`]`(dir)`.
pub fn start_world(
    dir: &Path,
    ranks: usize,
    command: impl Fn(usize, &Path) -> Command,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let id_file = id_file(dir);
    if id_file.exists() {
        std::fs::remove_file(&id_file)
            .with_context(|| format!("removing the stale {}", id_file.display()))?;
    }
    let exe = std::env::current_exe().context("finding this program to start its ranks")?;
    let ran = run_group((0..ranks).map(|r| command(r, &exe)).collect());
    // The id names a world that no longer exists, whether it finished or a rank died.
    match std::fs::remove_file(&id_file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            eprintln!("metaprep: could not remove {}: {e}", id_file.display())
        }
        _ => {}
    }
    ran?;
    Ok(())
}

/// `--ranks`: how layouts wider than one GPU run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RanksMode {
    /// One process per GPU, real NCCL collectives; every layout of the run (tp1 as a world
    /// of one), refused where the host lacks the GPUs or NCCL.
    Real,
    /// One rank in this process, collectives as busy-waits (layouts wider than 1 marked
    /// emulated).
    Emulated,
    /// Real for layouts wider than one GPU that the host has the GPUs for, when NCCL loads;
    /// emulated otherwise; tp1 in this process.
    Auto,
}

impl FromStr for RanksMode {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "real" => Ok(RanksMode::Real),
            "emulated" => Ok(RanksMode::Emulated),
            "auto" => Ok(RanksMode::Auto),
            _ => bail!("`{s}` is not a ranks mode: use real, emulated or auto"),
        }
    }
}

impl fmt::Display for RanksMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RanksMode::Real => "real",
            RanksMode::Emulated => "emulated",
            RanksMode::Auto => "auto",
        })
    }
}

/// A worker's place in its world.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankRole {
    pub rank: usize,
    pub world: usize,
    /// The NCCL library the parent found.
    pub nccl: PathBuf,
    /// Where rank 0 publishes the NCCL id.
    pub id_file: PathBuf,
}

impl RankRole {
    /// The CPU this rank's measuring thread takes: `auto` gives rank r the r-th CPU from
    /// the end of those allowed (ranks never share one), a number n gives n + r.
    pub fn cpu(&self, pin: CpuPin) -> Result<CpuPin> {
        Ok(match pin {
            CpuPin::Off => CpuPin::Off,
            CpuPin::Core(n) => CpuPin::Core(n + self.rank),
            CpuPin::Auto => {
                let allowed = allowed_cpus()?;
                let i = allowed.len().checked_sub(1 + self.rank).with_context(|| {
                    format!(
                        "rank {} has no CPU of its own: {} allowed",
                        self.rank,
                        allowed.len()
                    )
                })?;
                CpuPin::Core(allowed[i])
            }
        })
    }
}

/// `--read-skew-us`, `--read-skew-jitter-us` and `--read-skew-rank`: extra host time after
/// each host read on some ranks, fixed plus uniform jitter, to show how one slow (or
/// unsteady) host holds every rank back at the next collective.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReadSkew {
    pub us: f64,
    /// Each read adds a further uniform draw from [0, jitter_us].
    pub jitter_us: f64,
    /// `None`: every rank.
    pub rank: Option<usize>,
}

impl ReadSkew {
    pub const NONE: ReadSkew = ReadSkew {
        us: 0.0,
        jitter_us: 0.0,
        rank: None,
    };

    /// The delays after reads on `rank`, drawn from `seed` (and the rank).
    pub fn on(&self, rank: usize, seed: u64) -> ReadDelay {
        let here = self.rank.is_none_or(|r| r == rank);
        let us = |v: f64| if here { v.max(0.0) } else { 0.0 };
        ReadDelay {
            fixed: Duration::from_secs_f64(us(self.us) * 1e-6),
            jitter_ns: (us(self.jitter_us) * 1e3) as u64,
            rng: RefCell::new(SplitMix64::new(seed ^ (rank as u64).wrapping_mul(0x9e37))),
        }
    }

    pub fn describe(&self) -> Option<String> {
        (self.us > 0.0 || self.jitter_us > 0.0).then(|| {
            let whom = self
                .rank
                .map_or("every rank".into(), |r| format!("rank {r}"));
            format!(
                "read skew: {} us plus 0-{} us uniform jitter added after each host read on {whom}",
                self.us, self.jitter_us
            )
        })
    }
}

/// The extra host time after each read on one rank.
pub struct ReadDelay {
    fixed: Duration,
    jitter_ns: u64,
    rng: RefCell<SplitMix64>,
}

impl ReadDelay {
    pub fn none() -> ReadDelay {
        ReadSkew::NONE.on(0, 0)
    }

    /// The delay after the next read.
    pub fn next(&self) -> Duration {
        if self.jitter_ns == 0 {
            return self.fixed;
        }
        self.fixed + Duration::from_nanos(self.rng.borrow_mut().range(0, self.jitter_ns))
    }
}

/// This process's world: none (one rank, no NCCL), or a communicator.
pub struct RankWorld {
    comm: Option<Comm>,
    /// `NCCL 2.27.3 (/path)`, for notes.
    pub nccl: Option<String>,
}

impl RankWorld {
    /// A process alone: agreements return its own values.
    pub fn alone() -> RankWorld {
        RankWorld {
            comm: None,
            nccl: None,
        }
    }

    /// Joins `role`'s world on `gpu`: rank 0 makes the id and publishes it, the others
    /// wait for it.
    pub fn join(role: &RankRole, gpu: &Gpu) -> Result<RankWorld> {
        let nccl = Nccl::load(Some(&role.nccl))?;
        let id = if role.rank == 0 {
            let id = nccl.unique_id()?;
            publish(&role.id_file, &id.to_hex())?;
            id
        } else {
            crate::gpu::nccl::NcclId::from_hex(&await_published(&role.id_file, ID_WAIT)?)?
        };
        let describe = nccl.describe();
        let comm = Comm::join(nccl, gpu, id, role.rank, role.world)?;
        Ok(RankWorld {
            comm: Some(comm),
            nccl: Some(describe),
        })
    }

    pub fn comm(&self) -> Option<&Comm> {
        self.comm.as_ref()
    }

    /// Ranks in this world (1 alone).
    pub fn size(&self) -> usize {
        self.comm.as_ref().map_or(1, |c| c.world)
    }

    pub fn rank(&self) -> usize {
        self.comm.as_ref().map_or(0, |c| c.rank)
    }

    /// Waits for every rank.
    pub fn barrier(&self, gpu: &Gpu) -> Result<()> {
        self.agree(gpu, &[0.0]).map(|_| ())
    }

    fn agree(&self, gpu: &Gpu, values: &[f64]) -> Result<Vec<f64>> {
        match &self.comm {
            Some(comm) => comm.agree_max(gpu, values),
            None => Ok(values.to_vec()),
        }
    }

    /// After a round: whether the cell stops and the step time the next pass is sized by (the
    /// slowest rank's). A hard stop of any rank (max rounds, time cap) stops every rank; a
    /// stop for precision needs every rank precise, so a rank's rows never say `precision`
    /// when that rank was not.
    pub fn agree_round(
        &self,
        gpu: &Gpu,
        stop: Option<RoundsStop>,
        step_us: Option<f64>,
    ) -> Result<(Option<RoundsStop>, Option<f64>)> {
        let (hard, imprecise) = stop_codes(stop);
        let agreed = self.agree(gpu, &[hard, imprecise, step_us.unwrap_or(-1.0)])?;
        Ok((
            agreed_stop(agreed[0], agreed[1]),
            (agreed[2] > 0.0).then_some(agreed[2]),
        ))
    }

    /// Steps and time cap of a timeline pass. Alone: as asked. In a world, ranks cannot
    /// each stop at the cap on their own clock (a rank still issuing a collective would wait
    /// forever), so the steps that fit the cap at the slowest rank's step time are agreed
    /// up front and run in full.
    pub fn timeline_length(
        &self,
        gpu: &Gpu,
        steps: usize,
        cap: Duration,
        step_us: Option<f64>,
    ) -> Result<(usize, Duration)> {
        if self.comm.is_none() {
            return Ok((steps, cap));
        }
        let agreed = self.agree(gpu, &[step_us.unwrap_or(-1.0)])?[0];
        Ok((fitting_steps(steps, cap, agreed), Duration::MAX))
    }
}

/// Steps of a timeline pass that fit `cap` at `step_us` (3 at least, `steps` at most).
fn fitting_steps(steps: usize, cap: Duration, step_us: f64) -> usize {
    if step_us <= 0.0 {
        return steps;
    }
    ((cap.as_secs_f64() * 1e6 / step_us) as usize).clamp(3.min(steps), steps)
}

/// A rank's stop decision as two numbers whose maxima over ranks are agreed: the hard stop
/// (0 none, 2 max rounds, 3 time cap; the latest wins) and whether the rank is short of
/// precision (1) or not (0).
fn stop_codes(stop: Option<RoundsStop>) -> (f64, f64) {
    match stop {
        None => (0.0, 1.0),
        Some(RoundsStop::Precision) => (0.0, 0.0),
        // `steps` has no GPU-paced rounds of its own: a cap is a cap.
        Some(RoundsStop::MaxRounds | RoundsStop::GpuPacedMaxRounds) => (2.0, 1.0),
        Some(RoundsStop::TimeCap) => (3.0, 1.0),
    }
}

/// The world's stop from the agreed maxima of [`stop_codes`].
fn agreed_stop(hard: f64, imprecise: f64) -> Option<RoundsStop> {
    match hard as u32 {
        2 => Some(RoundsStop::MaxRounds),
        3 => Some(RoundsStop::TimeCap),
        _ if imprecise == 0.0 => Some(RoundsStop::Precision),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_world_starts_in_its_folder_without_an_earlier_worlds_id() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ranks/tp2");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(id_file(&dir), "an id from the last run").unwrap();
        // Each rank checks that no id waits for it, as a joining rank would read one.
        let check = format!("test ! -e {}", id_file(&dir).display());
        start_world(&dir, 2, |_, _| {
            let mut c = Command::new("sh");
            c.args(["-c", &check]);
            c
        })
        .unwrap();
        // Rank 0 publishes an id, then a rank dies: no id file outlives the world.
        let other = root.path().join("other");
        let publish = format!("echo id > {}; exit 3", id_file(&other).display());
        let failing = start_world(&other, 2, |r, _| {
            let mut c = Command::new("sh");
            c.args(["-c", if r == 0 { &publish } else { "exec sleep 5" }]);
            c
        });
        assert!(failing.is_err(), "a rank's failure is the world's");
        assert!(other.is_dir() && !id_file(&other).exists());
        start_world(&dir, 1, |_, _| {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("echo id > {}", id_file(&dir).display())]);
            c
        })
        .unwrap();
        assert!(!id_file(&dir).exists(), "nor one that finished");
    }

    /// The world's stop over ranks' decisions, as the agreed maxima give it.
    fn world_stop(ranks: &[Option<RoundsStop>]) -> Option<RoundsStop> {
        let codes: Vec<_> = ranks.iter().map(|&s| stop_codes(s)).collect();
        let max = |f: fn(&(f64, f64)) -> f64| codes.iter().map(f).fold(0.0, f64::max);
        agreed_stop(max(|c| c.0), max(|c| c.1))
    }

    #[test]
    fn precision_needs_every_rank_and_a_hard_stop_any_rank() {
        use RoundsStop::*;
        for s in [None, Some(Precision), Some(MaxRounds), Some(TimeCap)] {
            assert_eq!(world_stop(&[s]), s, "a world of one keeps its own decision");
        }
        assert_eq!(world_stop(&[Some(Precision), None]), None);
        assert_eq!(
            world_stop(&[Some(Precision), Some(Precision)]),
            Some(Precision)
        );
        assert_eq!(
            world_stop(&[Some(Precision), Some(MaxRounds)]),
            Some(MaxRounds)
        );
        assert_eq!(world_stop(&[None, Some(TimeCap)]), Some(TimeCap));
        assert_eq!(world_stop(&[Some(MaxRounds), Some(TimeCap)]), Some(TimeCap));
    }

    #[test]
    fn timeline_steps_fit_the_cap_at_the_slowest_rank() {
        let cap = Duration::from_millis(1);
        assert_eq!(fitting_steps(40, cap, 100.0), 10);
        assert_eq!(fitting_steps(40, cap, 10.0), 40);
        assert_eq!(fitting_steps(40, cap, 1e6), 3, "3 at least");
        assert_eq!(fitting_steps(40, cap, -1.0), 40, "no step time yet");
    }

    #[test]
    fn skew_lands_on_the_named_rank_or_every_rank() {
        let one = ReadSkew {
            us: 50.0,
            jitter_us: 0.0,
            rank: Some(1),
        };
        assert_eq!(one.on(0, 1).next(), Duration::ZERO);
        assert_eq!(one.on(1, 1).next(), Duration::from_micros(50));
        let all = ReadSkew { rank: None, ..one };
        assert_eq!(all.on(3, 1).next(), Duration::from_micros(50));
        assert_eq!(ReadSkew::NONE.describe(), None);
        assert_eq!(ReadDelay::none().next(), Duration::ZERO);
        assert!(one.describe().unwrap().contains("rank 1"));
    }

    #[test]
    fn jitter_varies_within_its_bound_and_repeats_from_the_seed() {
        let skew = ReadSkew {
            us: 10.0,
            jitter_us: 100.0,
            rank: None,
        };
        let draws = |seed| {
            let d = skew.on(1, seed);
            (0..200).map(|_| d.next()).collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7));
        assert!(a
            .iter()
            .all(|d| (10_000..=110_000).contains(&(d.as_nanos() as u64))));
        assert!(a.iter().any(|d| *d > Duration::from_micros(60)));
        assert!(a.iter().any(|d| *d < Duration::from_micros(60)));
    }

    #[test]
    fn ranks_take_cpus_of_their_own() {
        let role = |rank| RankRole {
            rank,
            world: 2,
            nccl: PathBuf::new(),
            id_file: PathBuf::new(),
        };
        assert_eq!(role(1).cpu(CpuPin::Core(4)).unwrap(), CpuPin::Core(5));
        assert_eq!(role(1).cpu(CpuPin::Off).unwrap(), CpuPin::Off);
        let cpus = allowed_cpus().unwrap();
        if cpus.len() >= 2 {
            let (a, b) = (
                role(0).cpu(CpuPin::Auto).unwrap(),
                role(1).cpu(CpuPin::Auto).unwrap(),
            );
            assert_ne!(a, b);
        }
    }

    #[test]
    fn a_process_alone_agrees_with_itself() {
        let world = RankWorld::alone();
        assert_eq!((world.size(), world.rank()), (1, 0));
        assert!(world.comm().is_none());
    }
}
