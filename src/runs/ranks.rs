//! `steps` with real ranks: which layouts run one process per GPU, starting each world's
//! workers (`metaprep rank-worker`, one per rank, each running [`steps::run`] on its own GPU,
//! handed the run's validated config as a file, [`WORKER_SETTINGS`]), and gathering what
//! they wrote: every rank's rows into `ranks.csv`, each cell's slowest
//! rank into `metaprep.csv` (beside any layouts run in this process), the ranks' traces
//! into one, and notes saying how many real ranks ran.

use crate::axes::Layout;
use crate::gpu::nccl::Nccl;
use crate::gpu::probe::{devices, GpuUnavailable};
use crate::harness::run_output::existing_rows;
use crate::harness::topology;
use crate::model::memory::GpuMemory;
use crate::model::trace::merge_rank_traces;
use crate::results::atomic::write_atomic;
use crate::results::config_file::ConfigFile;
use crate::results::csv::{read_rows, write_rows};
use crate::results::env::EnvRecord;
use crate::results::rank_rows::{slowest_rank_rows, write_rank_rows, RankRow, RANKS_CSV};
use crate::results::run_dir::RESULTS_CSV;
use crate::runs::rank_world::{id_file, start_world, RanksMode};
use crate::runs::steps::{self, StepsConfig, StepsOutcome};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The folder under `--out` where each world's ranks write their own runs.
pub const RANKS_DIR: &str = "ranks";
/// The file under [`RANKS_DIR`] holding the config every rank worker runs (`rank-worker
/// --settings`): the parent's, as [`ConfigFile::write_json`] writes it.
pub const WORKER_SETTINGS: &str = "steps-config.json";

/// Which layouts run as worlds of real ranks and which in this process, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub real: Vec<Layout>,
    pub here: Vec<Layout>,
    pub notes: Vec<String>,
}

/// Splits `layouts` by `mode` on a host with `gpus` usable GPUs (from the first device on),
/// with `nccl` the loaded library's description or why none loaded. `real` refuses what it
/// cannot do; `auto` says in a note what it could not.
pub fn split(
    mode: RanksMode,
    layouts: &[Layout],
    gpus: u32,
    nccl: Result<&str, &str>,
) -> Result<Split> {
    let mut s = Split {
        real: Vec::new(),
        here: Vec::new(),
        notes: Vec::new(),
    };
    match mode {
        RanksMode::Emulated => s.here = layouts.to_vec(),
        RanksMode::Real => {
            if let Some(l) = layouts.iter().find(|l| l.gpus() > gpus) {
                return Err(GpuUnavailable(format!(
                    "--ranks real: {l} needs {} GPUs and this host has {gpus} from --device on; \
                     leave {l} out (--tp), or use --ranks auto to emulate it",
                    l.gpus()
                ))
                .into());
            }
            if let Err(why) = nccl {
                bail!(crate::gpu::GpuUnavailable(format!("--ranks real: {why}")));
            }
            s.real = layouts.to_vec();
        }
        RanksMode::Auto => {
            for &l in layouts {
                match (spans_gpus_here(l, gpus), nccl) {
                    (true, Ok(_)) => s.real.push(l),
                    (true, Err(why)) => {
                        s.notes.push(format!("{l} emulated, not real: {why}"));
                        s.here.push(l);
                    }
                    (false, _) => s.here.push(l),
                }
            }
        }
    }
    Ok(s)
}

/// Whether `layout` needs several GPUs and this host (`gpus` from --device on) has them:
/// where `--ranks auto` runs real ranks.
fn spans_gpus_here(layout: Layout, gpus: u32) -> bool {
    layout.gpus() > 1 && layout.gpus() <= gpus
}

/// Where one rank worker stands in its world, and what it plans for.
pub struct WorkerPlace<'a> {
    pub rank: usize,
    pub layout: Layout,
    pub nccl: &'a Path,
    pub world_dir: &'a Path,
    /// This world writes the run's --trace.
    pub trace: bool,
    /// The config every rank runs ([`WORKER_SETTINGS`]).
    pub settings: &'a Path,
    /// NVTX ranges on, as in the parent (`--nvtx`).
    pub nvtx: bool,
}

/// The worker command of `rank` in `layout`'s world: this binary's hidden `rank-worker`, its
/// place in the world, and the file of the config it runs.
pub fn worker_command(exe: &Path, place: &WorkerPlace) -> Command {
    let mut c = Command::new(exe);
    c.arg("rank-worker")
        .arg("--rank")
        .arg(place.rank.to_string())
        .arg("--layout")
        .arg(place.layout.to_string())
        .arg("--nccl-lib")
        .arg(place.nccl)
        .arg("--id-file")
        .arg(id_file(place.world_dir))
        .arg("--out")
        .arg(rank_dir(place.world_dir, place.rank));
    if place.trace {
        c.arg("--trace-here");
    }
    c.arg("--settings")
        .arg(place.settings)
        .arg("--nvtx")
        .arg(if place.nvtx { "on" } else { "off" })
        .stdout(Stdio::null());
    c
}

pub fn rank_dir(world_dir: &Path, rank: usize) -> PathBuf {
    world_dir.join(format!("rank{rank}"))
}

/// Whether `config` is a parent's (no rank of its own) that may start real ranks: told
/// `--ranks real` (which refuses what it cannot do), or `auto` on a host with several GPUs
/// from `--device` on. Anything else is one process: [`steps::run`].
pub fn wanted(config: &StepsConfig) -> Result<bool> {
    if config.rank.is_some() {
        return Ok(false);
    }
    Ok(match config.ranks {
        RanksMode::Emulated => false,
        RanksMode::Real => true,
        RanksMode::Auto => {
            // A planned memory is refused before the GPUs are looked at, as `steps` does.
            if let Some(memory) = config.gpu_memory {
                steps::plan(config, config.context(), memory)?;
            }
            gpus_and_smallest_memory(config.gpu.ordinal)?.0 > 1
        }
    })
}

/// Runs `config` (a parent's: no rank of its own, [`wanted`]), its layouts of real ranks as
/// worlds of workers.
pub fn run(config: &StepsConfig) -> Result<StepsOutcome> {
    let started = Instant::now();
    let context = config.context();
    // A planned memory is checked before the GPUs are looked at, as `steps` alone does.
    let planned = config
        .gpu_memory
        .map(|memory| steps::plan(config, context, memory))
        .transpose()?;
    let (gpus, memory) = gpus_and_smallest_memory(config.gpu.ordinal)?;
    let (deployment, _) = match planned {
        Some(p) => p,
        None => steps::plan(config, context, GpuMemory::device(memory))?,
    };
    // NCCL is looked for only where some layout could use it.
    let wants_real = |&l: &Layout| config.ranks == RanksMode::Real || spans_gpus_here(l, gpus);
    let nccl = if deployment.layouts().iter().any(wants_real) {
        Nccl::load(config.nccl_lib.as_deref()).map_err(|e| e.to_string())
    } else {
        Err("no layout needs it".into())
    };
    let described = nccl.as_ref().map(|n| n.describe());
    let s = split(
        config.ranks,
        &deployment.layouts(),
        gpus,
        described.as_deref().map_err(|e| e.as_str()),
    )?;
    for note in &s.notes {
        eprintln!("metaprep: {note}");
    }
    let nccl = match nccl.as_ref() {
        Ok(nccl) if !s.real.is_empty() => nccl,
        // Nothing runs for real (split refused `real` where it could not).
        _ => return run_here(config, s.notes),
    };
    if config.resume {
        return Err(crate::exit::BadInput(
            "--resume is not supported with real ranks: rerun into a new --out".into(),
        )
        .into());
    }
    existing_rows(&config.out, false)?;
    // Without --trace-cell, the first cell of the first real layout with several ranks (or
    // of the first real layout) is traced: the stragglers chart needs two ranks.
    let traced_here = config
        .trace
        .as_ref()
        .and_then(|t| t.cell)
        .is_some_and(|(l, _, _)| s.here.contains(&l));
    let mut rows = Vec::new();
    let mut notes = s.notes.clone();
    if !s.here.is_empty() {
        let here = StepsConfig {
            layouts: s.here.clone(),
            trace: config.trace.clone().filter(|_| traced_here),
            ..config.clone()
        };
        // steps unpins this thread when it returns, so the rank workers started next do
        // not inherit its one CPU.
        rows = steps::run(&here)?.rows;
    }
    // Every rank plans on the memory this run planned on: the GPUs' smallest, or the stand-in
    // the default models were planned on where they fit no layout of it.
    let planned_on = deployment.memory.unwrap_or(GpuMemory::device(memory));
    let settings = write_worker_settings(config, planned_on)?;
    let worlds = run_worlds(config, &settings, &s.real, nccl, traced_here)?;
    let (first_world_env, all_rank_rows) = (worlds.first_env, worlds.rank_rows);
    notes.extend(worlds.notes);
    let (slowest, picked) = slowest_rank_rows(&all_rank_rows);
    notes.push(slowest_note(&picked));
    rows.extend(slowest);
    write_rank_rows(&config.out.join(RANKS_CSV), &all_rank_rows)?;
    write_rows(&config.out.join(RESULTS_CSV), &rows)?;
    let mut env = match s.here.is_empty() {
        true => first_world_env.context("no world ran")?,
        false => EnvRecord::read(&config.out)?,
    };
    env.command_line = std::env::args().collect::<Vec<_>>().join(" ");
    // The whole run's settings, not those of a world or of the layouts run here.
    env.settings = Some(config.settings());
    env.notes.extend(notes);
    env.write(&config.out)?;
    Ok(StepsOutcome {
        rows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Writes the config every rank worker runs into the run's [`RANKS_DIR`] and returns its path:
/// `config` planned for `memory` (unless `--gpu-memory-gib` gave one), the memory the run
/// planned on, so every rank plans the same cells (a rank planning from a larger GPU of its
/// own would wait at a barrier for a cell the others skip).
pub fn write_worker_settings(config: &StepsConfig, memory: GpuMemory) -> Result<PathBuf> {
    let workers = StepsConfig {
        gpu_memory: config.gpu_memory.or(Some(memory)),
        ..config.clone()
    };
    let path = config.out.join(RANKS_DIR).join(WORKER_SETTINGS);
    workers.write_json(&path)?;
    Ok(path)
}

/// How many GPUs the run may use (`--device` on), and the memory of the smallest of them:
/// the run is planned for it, as every rank is, so ranks on mixed GPUs plan the same cells.
fn gpus_and_smallest_memory(ordinal: usize) -> Result<(u32, u64)> {
    let (count, first) = devices(ordinal)?;
    let others = (ordinal + 1..count as usize).map(|o| devices(o).map(|(_, bytes)| bytes));
    let memory = others
        .collect::<Result<Vec<u64>, _>>()?
        .into_iter()
        .fold(first, u64::min);
    Ok((count - ordinal as u32, memory))
}

/// Runs every layout of `config` in this process, `notes` (why none ran for real) added to
/// its env.json.
fn run_here(config: &StepsConfig, notes: Vec<String>) -> Result<StepsOutcome> {
    let outcome = steps::run(config)?;
    if !notes.is_empty() {
        let mut env = EnvRecord::read(&config.out)?;
        env.notes.extend(notes);
        env.write(&config.out)?;
    }
    Ok(outcome)
}

/// What the worlds of real ranks gave: every rank's rows, the notes on each world (its GPUs,
/// how it ran), and the first world's rank-0 env.json.
struct Worlds {
    rank_rows: Vec<RankRow>,
    notes: Vec<String>,
    first_env: Option<EnvRecord>,
}

/// Starts a world of real ranks for each layout of `real`, one after another, and gathers
/// each: its rows, notes and (for the traced world) the ranks' traces merged into one. Without
/// `--trace-cell` (and with nothing traced here) the first world with several ranks is traced.
fn run_worlds(
    config: &StepsConfig,
    settings: &Path,
    real: &[Layout],
    nccl: &Nccl,
    traced_here: bool,
) -> Result<Worlds> {
    let traced_world = real.iter().position(|l| l.gpus() > 1).unwrap_or(0);
    let mut worlds = Worlds {
        rank_rows: Vec::new(),
        notes: Vec::new(),
        first_env: None,
    };
    for (w, &layout) in real.iter().enumerate() {
        let world_dir = config.out.join(RANKS_DIR).join(layout.to_string());
        let trace = config.trace.as_ref().is_some_and(|t| match t.cell {
            Some((l, _, _)) => l == layout,
            None => w == traced_world && !traced_here,
        });
        let n = layout.gpus() as usize;
        eprintln!("metaprep: {layout}: starting {n} rank(s), one process per GPU");
        start_world(&world_dir, n, |rank, exe| {
            let place = WorkerPlace {
                rank,
                layout,
                nccl: &nccl.path,
                world_dir: &world_dir,
                trace,
                settings,
                nvtx: crate::gpu::nvtx::enabled(),
            };
            worker_command(exe, &place)
        })
        .with_context(|| format!("{layout} with real ranks"))?;
        let world = gather(&world_dir, layout, n)?;
        worlds.rank_rows.extend(world.rows);
        // Where each rank's GPU sits, read here from NVML (rank r ran on GPU --device + r),
        // not back out of the ranks' notes.
        worlds
            .notes
            .extend((0..n).map(|r| gpu_note(layout, r, config.gpu.ordinal + r)));
        worlds.first_env.get_or_insert(world.rank0_env);
        if let (true, Some(t)) = (trace, &config.trace) {
            merge_traces(&world_dir, n, t, &config.arms)?;
        }
        worlds.notes.push(format!(
            "real ranks: {layout} ran {n} ranks, one process per GPU (GPUs {}-{}), collectives \
             through {}; every rank's rows in {RANKS_CSV}, each cell's slowest rank (by step_us) \
             in {RESULTS_CSV}; each rank's own run in {}",
            config.gpu.ordinal,
            config.gpu.ordinal + n - 1,
            nccl.describe(),
            Path::new(RANKS_DIR).join(layout.to_string()).display()
        ));
    }
    Ok(worlds)
}

/// What a world's ranks left in their run folders.
struct World {
    rows: Vec<RankRow>,
    rank0_env: EnvRecord,
}

/// `tp2 rank 1 GPU 1: PCI 00000000:18:00.0, 18 NVLinks active (...)`: where rank `rank` of
/// `layout`'s GPU sits, or why that is unknown.
fn gpu_note(layout: Layout, rank: usize, ordinal: usize) -> String {
    let topology = crate::gpu::probe::pci_bus_id(ordinal)
        .map_err(|e| e.to_string())
        .and_then(|pci| topology::describe(&pci).map_err(|e| e.to_string()))
        .unwrap_or_else(|e| format!("topology unknown ({e})"));
    format!("{layout} rank {rank} GPU {ordinal}: {topology}")
}

/// Reads the rows and env of each of `ranks` ranks of `layout` under `world_dir`.
fn gather(world_dir: &Path, layout: Layout, ranks: usize) -> Result<World> {
    let mut rows = Vec::new();
    let mut rank0_env = None;
    for r in 0..ranks {
        let dir = rank_dir(world_dir, r);
        let rank_rows = read_rows(&dir.join(RESULTS_CSV))
            .with_context(|| format!("reading rank {r}'s rows of {layout}"))?;
        rows.extend(rank_rows.into_iter().map(|row| RankRow {
            rank: r as u32,
            row,
        }));
        if r == 0 {
            rank0_env = Some(EnvRecord::read(&dir)?);
        }
    }
    Ok(World {
        rows,
        rank0_env: rank0_env.context("a world of no rank")?,
    })
}

/// `slowest rank per cell: rank 1 in 6 cells, rank 0 in 2`.
fn slowest_note(picked: &[(crate::results::csv::CellKey, u32)]) -> String {
    let mut counts: Vec<(u32, usize)> = Vec::new();
    for &(_, rank) in picked {
        match counts.iter_mut().find(|c| c.0 == rank) {
            Some(c) => c.1 += 1,
            None => counts.push((rank, 1)),
        }
    }
    counts.sort();
    let parts: Vec<String> = counts
        .iter()
        .map(|(r, n)| format!("rank {r} in {n} cell(s)"))
        .collect();
    format!("slowest rank per cell (by step_us): {}", parts.join(", "))
}

/// Writes each arm's trace of the world's ranks as one, where `--trace` asked.
fn merge_traces(
    world_dir: &Path,
    ranks: usize,
    request: &steps::TraceRequest,
    arms: &[crate::axes::Arm],
) -> Result<()> {
    for &arm in arms {
        let target = request.path_for(arm);
        let name = target.file_name().context("--trace names no file")?;
        let texts: Vec<String> = (0..ranks)
            .map(|r| {
                let path = rank_dir(world_dir, r).join(name);
                std::fs::read_to_string(&path)
                    .with_context(|| format!("reading rank {r}'s trace {}", path.display()))
            })
            .collect::<Result<_>>()?;
        write_atomic(&target, merge_rank_traces(&texts)?.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Layout; 3] = [Layout::Tp(1), Layout::Tp(2), Layout::Dep(4)];

    #[test]
    fn auto_runs_what_fits_for_real_and_the_rest_here() {
        let s = split(RanksMode::Auto, &ALL, 2, Ok("NCCL 2.27")).unwrap();
        assert_eq!(s.real, [Layout::Tp(2)]);
        assert_eq!(s.here, [Layout::Tp(1), Layout::Dep(4)]);
        let one_gpu = split(RanksMode::Auto, &ALL, 1, Ok("NCCL")).unwrap();
        assert!(
            one_gpu.real.is_empty(),
            "the default is unchanged on one GPU"
        );
        let no_nccl = split(RanksMode::Auto, &ALL, 4, Err("NCCL not found")).unwrap();
        assert!(no_nccl.real.is_empty());
        assert_eq!(no_nccl.notes.len(), 2, "{:?}", no_nccl.notes);
        assert!(no_nccl.notes[0].contains("NCCL not found"));
    }

    #[test]
    fn real_refuses_what_the_host_cannot_run() {
        let e = split(RanksMode::Real, &ALL, 2, Ok("NCCL")).unwrap_err();
        assert!(e.downcast_ref::<GpuUnavailable>().is_some());
        assert!(e.to_string().contains("dep4 needs 4 GPUs"), "{e}");
        let e = split(
            RanksMode::Real,
            &[Layout::Tp(1)],
            1,
            Err("NCCL (libnccl.so.2) not found"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
        let ok = split(RanksMode::Real, &[Layout::Tp(1)], 1, Ok("NCCL")).unwrap();
        assert_eq!(ok.real, [Layout::Tp(1)], "tp1 as a world of one");
        let em = split(RanksMode::Emulated, &ALL, 8, Ok("NCCL")).unwrap();
        assert_eq!((em.real.len(), em.here.len()), (0, 3));
    }

    #[test]
    fn workers_get_their_rank_world_and_the_parents_settings_file() {
        let mut place = WorkerPlace {
            rank: 1,
            layout: Layout::Tp(2),
            nccl: Path::new("/n/libnccl.so.2"),
            world_dir: Path::new("/out/ranks/tp2"),
            trace: true,
            settings: Path::new("/out/ranks/steps-config.json"),
            nvtx: true,
        };
        let args = |place: &WorkerPlace| -> String {
            let c = worker_command(Path::new("/bin/metaprep"), place);
            let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into()).collect();
            args.join(" ")
        };
        assert_eq!(
            args(&place),
            "rank-worker --rank 1 --layout tp2 --nccl-lib /n/libnccl.so.2 --id-file \
             /out/ranks/tp2/nccl-id --out /out/ranks/tp2/rank1 --trace-here \
             --settings /out/ranks/steps-config.json --nvtx on"
        );
        place.nvtx = false;
        assert!(args(&place).ends_with("--nvtx off"));
    }

    #[test]
    fn a_worlds_rows_are_gathered_from_every_rank() {
        use crate::harness::rows::CellId;
        use crate::results::csv::CellKey;
        let dir = tempfile::tempdir().unwrap();
        let id = CellId {
            key: CellKey::new("step", "dspark+dsa_target_verify", "graph", (1, 5), "tp2"),
            emulated: false,
        };
        for (r, step_us) in [(0, 100.0), (1, 120.0)] {
            let rank = rank_dir(dir.path(), r);
            let row = id
                .summary_row("step_us", "us", &[step_us; 8], "ci", None)
                .unwrap();
            write_rows(&rank.join(RESULTS_CSV), &[row]).unwrap();
            let env = EnvRecord {
                notes: vec![
                    format!("rank {r} GPU {r}: PCI 0000:0{r}:00.0, no NVLink active"),
                    "other".into(),
                ],
                ..EnvRecord::default()
            };
            env.write(&rank).unwrap();
        }
        let world = gather(dir.path(), Layout::Tp(2), 2).unwrap();
        assert_eq!(
            world.rows.iter().map(|r| r.rank).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(
            world.rank0_env.notes[0],
            "rank 0 GPU 0: PCI 0000:00:00.0, no NVLink active"
        );
        let (slowest, picked) = slowest_rank_rows(&world.rows);
        assert_eq!((slowest[0].median, picked[0].1), (120.0, 1));
        // A rank that wrote nothing is named.
        let e = gather(dir.path(), Layout::Tp(2), 3).err().unwrap();
        assert!(format!("{e:#}").contains("rank 2's rows of tp2"), "{e:#}");
    }

    #[test]
    fn a_ranks_gpu_note_names_it_and_says_why_its_topology_is_unknown() {
        // No GPU 99 anywhere: the note names the layout, rank and GPU, and why there is no
        // topology, never an error or a panic.
        let note = gpu_note(Layout::Tp(4), 3, 99);
        assert!(
            note.starts_with("tp4 rank 3 GPU 99: topology unknown ("),
            "{note}"
        );
    }

    #[test]
    fn the_slowest_note_counts_cells_per_rank() {
        let key = |arm: &str| crate::results::csv::CellKey::new("step", "f", arm, (1, 5), "tp2");
        let note = slowest_note(&[(key("a"), 1), (key("b"), 0), (key("c"), 1)]);
        assert_eq!(
            note,
            "slowest rank per cell (by step_us): rank 0 in 1 cell(s), rank 1 in 2 cell(s)"
        );
    }
}
