//! Faults on a real GPU, through the metaprep binary: a `steps` run killed with SIGKILL in
//! the middle of a cell and resumed, an out-of-memory at run time, and (two GPUs) one rank
//! of a real world killed. Each prints a `RESULT` line with what it measured. Run on a GPU
//! host: `cargo test --release --test gpu_faults -- --ignored --nocapture --test-threads 1`,
//! or the bundle's `tests/gpu_faults-*` (it finds `../metaprep`, or $METAPREP_BIN). With
//! $METAPREP_FAULTS_OUT set, each test's run folder is kept there instead of in a temporary
//! folder.

use metaprep::results::csv::{read_rows, Row, KIND_STEP};
use metaprep::results::env::EnvRecord;
use metaprep::results::run_dir::RunDir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{metaprep_bin, skipped};

/// Where a test runs: `$METAPREP_FAULTS_OUT/<name>` (kept), else a temporary folder.
fn work_dir(name: &str) -> (Option<tempfile::TempDir>, PathBuf) {
    match std::env::var_os("METAPREP_FAULTS_OUT") {
        Some(root) => {
            let dir = PathBuf::from(root).join(name);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            (None, dir)
        }
        None => {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().to_path_buf();
            (Some(tmp), dir)
        }
    }
}

/// Temporary files (`.<name>.tmp<pid>`) or staging folders left in `dir`: a write torn by a
/// kill would leave one.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// The line metaprep's error is on.
fn error_line(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.starts_with("metaprep: error:"))
        .unwrap_or_default()
        .to_string()
}

/// A grid of six cells of about a second each (two arms, six rounds of 150 steps with a
/// 200 µs forward), so a kill lands inside a cell.
const KILL_GRID: &[&str] = &[
    "steps",
    "--forward-us",
    "200",
    "--arms",
    "eager-sync,graph",
    "--batch-sizes",
    "1,4,16",
    "--block-sizes",
    "3,5",
    "--min-rounds",
    "6",
    "--max-rounds",
    "6",
    "--round-steps",
    "150",
    "--warmup-steps",
    "5",
    "--timeline-steps",
    "10",
];
const KILL_GROUPS: usize = 6;
/// The layout of the kill test: tp1 in this process.
const IN_PROCESS: &[&str] = &["--tp", "tp1", "--ranks", "emulated"];

/// The (layout, batch, block) groups with rows.
fn groups(rows: &[Row]) -> BTreeSet<(String, u32, u32)> {
    rows.iter()
        .map(|r| (r.layout.clone(), r.batch_size, r.block_size))
        .collect()
}

/// Each row's median by its cell and metric.
fn medians(rows: &[Row]) -> BTreeMap<String, f64> {
    rows.iter()
        .map(|r| (format!("{} {}", r.cell_key(), r.metric), r.median))
        .collect()
}

/// Starts `KILL_GRID` into `out` (resuming with `resume`), waits until the CSV holds
/// `groups_before` groups more than `had`, lets the next cell start, and kills the process
/// with SIGKILL. Returns the rows the CSV held then, and the seconds the process ran.
fn run_and_kill(out: &Path, resume: bool, had: usize) -> (Vec<Row>, f64) {
    let mut command = Command::new(metaprep_bin());
    command
        .args(KILL_GRID)
        .args(IN_PROCESS)
        .arg("--out")
        .arg(out);
    if resume {
        command.arg("--resume");
    }
    let started = Instant::now();
    let mut child = command.stderr(Stdio::null()).spawn().unwrap();
    let csv = out.join("metaprep.csv");
    loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be killed"
        );
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "no group in 3 minutes"
        );
        // A reader sees the CSV whole or not at all: it is renamed into place.
        if let Ok(rows) = read_rows(&csv) {
            if groups(&rows).len() > had {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Into the next cell: its setup and first rounds take longer than this.
    std::thread::sleep(Duration::from_millis(400));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let ran = started.elapsed().as_secs_f64();
    let rows = read_rows(&csv).expect("the CSV after a kill reads whole");
    RunDir::open(out).expect("env.json and telemetry.csv read whole after a kill");
    // A kill inside a write leaves its temporary file (the file itself stays whole); the
    // resume removes it.
    let torn = leftovers(out);
    if !torn.is_empty() {
        println!("the kill left {torn:?}");
    }
    (rows, ran)
}

/// `steps` killed with SIGKILL inside a cell, twice, then resumed to the end: every
/// group written before a kill is kept as it was, the rest is measured, nothing is torn or
/// written twice.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_steps_run_killed_mid_cell_resumes_without_torn_or_duplicate_rows() {
    let (_keep, dir) = work_dir("kill-resume");
    let out = dir.join("run");
    let (first, ran1) = run_and_kill(&out, false, 0);
    let (second, ran2) = run_and_kill(&out, true, groups(&first).len());
    let started = Instant::now();
    let status = Command::new(metaprep_bin())
        .args(KILL_GRID)
        .args(IN_PROCESS)
        .arg("--out")
        .arg(&out)
        .arg("--resume")
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let resume_s = started.elapsed().as_secs_f64();
    assert!(status.success(), "the last resume: {status}");
    // read_rows refuses a cell's metric twice and a cut line.
    let last = read_rows(&out.join("metaprep.csv")).unwrap();
    assert_eq!(groups(&last).len(), KILL_GROUPS, "every group measured");
    assert!(last.iter().all(|r| r.kind == KIND_STEP));
    let final_medians = medians(&last);
    for (kept, when) in [(&first, "the first kill"), (&second, "the second kill")] {
        for (key, median) in medians(kept) {
            assert_eq!(
                final_medians.get(&key).map(|m| m.to_bits()),
                Some(median.to_bits()),
                "{key}, written before {when}, changed or went"
            );
        }
    }
    let env = EnvRecord::read(&out).unwrap();
    let resumed = env
        .notes
        .iter()
        .filter(|n| n.starts_with("resumed "))
        .count();
    assert_eq!(resumed, 2, "{:?}", env.notes);
    assert_eq!(leftovers(&out), Vec::<String>::new());
    println!(
        "RESULT kill-resume: first SIGKILL after {ran1:.1} s with {} of {KILL_GROUPS} groups \
         ({} rows) written; resumed and killed again after {ran2:.1} s with {} groups ({} rows); \
         the last --resume took {resume_s:.1} s to finish the other {} groups; {} rows in all, \
         every row written before a kill kept with the same median, 0 duplicate, 0 torn",
        groups(&first).len(),
        first.len(),
        groups(&second).len(),
        second.len(),
        KILL_GROUPS - groups(&second).len(),
        last.len()
    );
}

/// Device memory another process holds, leaving `leave` bytes free: what a second process
/// on a shared GPU does.
fn hold_device_memory(leave: usize) -> (Vec<cudarc::driver::CudaSlice<u8>>, usize, usize) {
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let (free, _) = ctx.mem_get_info().unwrap();
    let mut held = Vec::new();
    let mut holding = 0;
    while free - holding > leave {
        let chunk = (free - holding - leave).min(1 << 30);
        match stream.alloc_zeros::<u8>(chunk) {
            Ok(buf) => {
                held.push(buf);
                holding += chunk;
            }
            Err(_) => break,
        }
    }
    let (left, _) = ctx.mem_get_info().unwrap();
    (held, holding, left)
}

/// With all but 600 MiB of the GPU held by another process, `steps` (whose plan fits: a
/// fixed forward holds no weights) fails to allocate at run time: one clear error, exit 1,
/// no CSV, no temporary file.
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_out_of_memory_at_run_time_fails_clearly_with_exit_1_and_nothing_half_written() {
    let (_keep, dir) = work_dir("oom");
    let out = dir.join("run");
    let (_held, holding, left) = hold_device_memory(600 << 20);
    let o = Command::new(metaprep_bin())
        .args([
            "steps",
            "--tp",
            "tp1",
            "--ranks",
            "emulated",
            "--forward-us",
            "100",
            "--arms",
            "graph",
            "--batch-sizes",
            "1",
            "--block-sizes",
            "3",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let error = error_line(&stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(error.contains("out of memory"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.join("metaprep.csv").exists(), "no results file");
    if out.join("env.json").exists() {
        EnvRecord::read(&out).expect("env.json, where written, is whole");
    }
    assert_eq!(leftovers(&out), Vec::<String>::new());
    println!(
        "RESULT oom: another process held {} MiB, {} MiB left free; steps exited 1 with: {error}",
        holding >> 20,
        left >> 20
    );
}

/// Processes whose parent is `pid`, with their command lines.
fn children_of(pid: u32) -> Vec<(u32, String)> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so read after its `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            children.push((child, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    children
}

/// One rank of a real tp2 world killed with SIGKILL mid-run: the parent names it and
/// fails, the other rank is stopped, and no worker process or NCCL id file is left.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_rank_killed_mid_run_ends_the_world_naming_it_and_leaves_nothing() {
    if skipped(2) {
        return;
    }
    let (_keep, dir) = work_dir("rank-kill");
    let out = dir.join("run");
    let mut parent = Command::new(metaprep_bin())
        .args(KILL_GRID)
        .args(["--tp", "tp2", "--ranks", "real", "--out"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let rank1 = loop {
        assert!(parent.try_wait().unwrap().is_none(), "the run ended early");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no rank 1 started"
        );
        let workers = children_of(parent.id());
        if let Some((pid, _)) = workers
            .iter()
            .find(|(_, cmd)| cmd.contains("rank-worker") && cmd.contains("--rank 1 "))
        {
            break *pid;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Let the world join and measure its first cells (six of about a second) before the kill.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        parent.try_wait().unwrap().is_none(),
        "the run ended before the kill"
    );
    // SAFETY: a signal to a process this test found as the run's rank 1.
    assert_eq!(unsafe { libc::kill(rank1 as i32, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    let o = parent.wait_with_output().unwrap();
    let ended_s = killed.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let error = error_line(&stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(error.contains("rank 1 failed"), "{stderr}");
    let left: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(out.to_str().unwrap()))
                .unwrap_or(false)
        })
        .collect();
    assert!(left.is_empty(), "worker processes left: {left:?}");
    let id = out.join("ranks/tp2/nccl-id");
    assert!(!id.exists(), "{} left", id.display());
    println!(
        "RESULT rank-kill: SIGKILL to rank 1 (pid {rank1}); the parent exited 1 after \
         {ended_s:.1} s with: {error}; no worker process, no NCCL id file left"
    );
}
