//! A group of worker processes, one per rank, run to the end together: each one's stderr is
//! forwarded line by line with its rank in front (and its last lines kept), and the first
//! rank to fail ends the group: the others are killed and waited for, and the error names
//! the rank, its exit status and its last stderr lines. Workers die with the parent too
//! (PR_SET_PDEATHSIG), so no rank outlives a killed run.
//!
//! A single [`Worker`] is started the same way, with its stdout piped to the caller, who reads
//! what it hands back line by line (a sweep's worker processes), within a time limit where the
//! caller sets one, and writes it requests on its stdin where the caller asks for that (`ab`'s
//! sides).

use crate::gpu::os::process::die_with_parent;
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Stderr lines of a failed rank quoted in its error.
const TAIL_LINES: usize = 12;
/// How often the group looks for a rank that ended.
const POLL: Duration = Duration::from_millis(20);

/// A rank ended with a failure (or was killed): the run's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankFailed {
    pub rank: usize,
    pub status: String,
    pub stderr_tail: Vec<String>,
}

impl fmt::Display for RankFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = format!("rank {}", self.rank);
        write_failure(f, &who, &self.status, &self.stderr_tail)
    }
}

/// `<who> failed: <status>` and its last stderr lines, as every failed process is named.
fn write_failure(
    f: &mut fmt::Formatter<'_>,
    who: &str,
    status: &str,
    tail: &[String],
) -> fmt::Result {
    write!(f, "{who} failed: {status}")?;
    if tail.is_empty() {
        write!(f, " (no stderr)")
    } else {
        write!(f, "; its last stderr: {}", tail.join(" | "))
    }
}

impl std::error::Error for RankFailed {}

struct Member {
    child: Child,
    tail: Arc<Mutex<VecDeque<String>>>,
    reader: Option<JoinHandle<()>>,
}

/// Runs `commands[r]` as rank r, all at once, until every rank has exited 0 (`Ok`) or one
/// has not (`Err(RankFailed)` for the first seen, the others killed and reaped). Every
/// worker gets `NCCL_NVLS_ENABLE=0` (NVLink multicast stays off on shared hosts). Returns
/// each rank's process id, for callers that check nothing was left behind.
pub fn run_group(commands: Vec<Command>) -> Result<Vec<u32>> {
    let mut members: Vec<Member> = Vec::with_capacity(commands.len());
    for (rank, mut command) in commands.into_iter().enumerate() {
        command.env("NCCL_NVLS_ENABLE", "0").stderr(Stdio::piped());
        die_with_parent(&mut command);
        let spawned = command
            .spawn()
            .with_context(|| format!("starting rank {rank}: {command:?}"));
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                stop_all(&mut members);
                return Err(e);
            }
        };
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let reader = child
            .stderr
            .take()
            .map(|stderr| forward_stderr(format!("rank {rank}"), stderr, tail.clone()));
        members.push(Member {
            child,
            tail,
            reader,
        });
    }
    let pids = members.iter().map(|m| m.child.id()).collect();
    let mut running: Vec<usize> = (0..members.len()).collect();
    while !running.is_empty() {
        let mut still = Vec::with_capacity(running.len());
        for &rank in &running {
            match members[rank].child.try_wait() {
                Ok(None) => still.push(rank),
                Ok(Some(status)) if status.success() => join_reader(&mut members[rank]),
                Ok(Some(status)) => {
                    join_reader(&mut members[rank]);
                    let failure = failed(rank, &members[rank], describe(status));
                    stop_all(&mut members);
                    return Err(failure.into());
                }
                Err(e) => {
                    let failure = failed(rank, &members[rank], format!("waiting for it: {e}"));
                    stop_all(&mut members);
                    return Err(failure.into());
                }
            }
        }
        running = still;
        if !running.is_empty() {
            std::thread::sleep(POLL);
        }
    }
    Ok(pids)
}

fn failed(rank: usize, member: &Member, status: String) -> RankFailed {
    RankFailed {
        rank,
        status,
        stderr_tail: member
            .tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default(),
    }
}

/// Kills every member still running and reaps them all.
fn stop_all(members: &mut [Member]) {
    for m in members.iter_mut() {
        // Already exited is fine: kill only fails then, and wait reaps it either way.
        let _ = m.child.kill();
        let _ = m.child.wait();
        join_reader(m);
    }
}

fn join_reader(member: &mut Member) {
    if let Some(reader) = member.reader.take() {
        // A reader ends when the pipe closes; a panic in it only loses forwarded lines.
        let _ = reader.join();
    }
}

/// `exit status 3`, `killed by signal 9`.
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

fn forward_stderr(
    label: String,
    stderr: std::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            eprintln!("[{label}] {line}");
            if let Ok(mut t) = tail.lock() {
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    })
}

/// What a worker writes back: one JSON document a line, flushed at once (its reader acts on
/// each as it comes: a sweep's parent tags NVML samples as cells begin).
pub fn send_line(out: &mut impl std::io::Write, message: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer(&mut *out, message).context("writing to the parent process")?;
    out.write_all(b"\n")
        .context("writing to the parent process")?;
    out.flush().context("writing to the parent process")
}

/// One worker process whose stdout the caller reads line by line, its stderr forwarded with
/// its label in front; it dies with the parent, and is killed and reaped if dropped running.
pub struct Worker {
    label: String,
    member: Member,
    /// Its stdout's lines, read on a thread of their own so a read can have a time limit.
    lines: Receiver<std::io::Result<String>>,
    /// Its stdin, where it was started with [`Worker::spawn_piped`].
    stdin: Option<ChildStdin>,
    finished: bool,
}

/// What a read of a worker's next line within a time limit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextLine {
    Line(String),
    /// It closed its stdout (it ended, or is ending).
    Closed,
    /// Nothing came within the limit.
    TimedOut,
}

impl Worker {
    /// Starts `command` as the worker `label` (e.g. `sweep worker 2`).
    pub fn spawn(label: &str, command: Command) -> Result<Worker> {
        Self::start(label, command, false)
    }

    /// The same, with its stdin piped for [`Worker::send_line`].
    pub fn spawn_piped(label: &str, command: Command) -> Result<Worker> {
        Self::start(label, command, true)
    }

    fn start(label: &str, mut command: Command, piped: bool) -> Result<Worker> {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if piped {
            command.stdin(Stdio::piped());
        }
        die_with_parent(&mut command);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {label}: {command:?}"))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let reader = child
            .stderr
            .take()
            .map(|stderr| forward_stderr(label.to_string(), stderr, tail.clone()));
        let stdout = child
            .stdout
            .take()
            .context("the worker's stdout was not piped")?;
        let (send, lines) = std::sync::mpsc::channel();
        // Ends when the pipe closes or nobody listens any more.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Worker {
            label: label.to_string(),
            stdin: child.stdin.take(),
            member: Member {
                child,
                tail,
                reader,
            },
            lines,
            finished: false,
        })
    }

    /// The worker's label, as its errors name it.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The next line the worker wrote to stdout, without its newline; `None` once it closed
    /// stdout (ended).
    pub fn next_line(&mut self) -> Result<Option<String>> {
        match self.lines.recv() {
            Ok(line) => line
                .map(Some)
                .with_context(|| format!("reading what {} sent", self.label)),
            Err(_) => Ok(None),
        }
    }

    /// The next line within `limit`.
    pub fn next_line_within(&mut self, limit: Duration) -> Result<NextLine> {
        match self.lines.recv_timeout(limit) {
            Ok(line) => line
                .map(NextLine::Line)
                .with_context(|| format!("reading what {} sent", self.label)),
            Err(RecvTimeoutError::Timeout) => Ok(NextLine::TimedOut),
            Err(RecvTimeoutError::Disconnected) => Ok(NextLine::Closed),
        }
    }

    /// Writes `line` and a newline to the worker's stdin, flushed.
    pub fn send_line(&mut self, line: &str) -> Result<()> {
        let label = &self.label;
        let stdin = (self.stdin.as_mut())
            .with_context(|| format!("{label} was started without a stdin to write to"))?;
        (|| {
            stdin.write_all(line.as_bytes())?;
            stdin.write_all(b"\n")?;
            stdin.flush()
        })()
        .with_context(|| format!("writing to {label}"))
    }

    /// Kills the worker (a hung one) and reaps it; its error is then the caller's to say.
    pub fn kill(mut self) {
        self.finished = true;
        stop_all(std::slice::from_mut(&mut self.member));
    }

    /// Waits for the worker to end: `Ok` on exit status 0, else an error naming it, its exit
    /// status and its last stderr lines.
    pub fn finish(mut self) -> Result<()> {
        // A worker reading requests ends at the end of its stdin.
        drop(self.stdin.take());
        let status = self.member.child.wait();
        self.finished = true;
        join_reader(&mut self.member);
        let status = status.with_context(|| format!("waiting for {}", self.label))?;
        if status.success() {
            return Ok(());
        }
        let tail = failed(0, &self.member, describe(status));
        Err(WorkerFailed {
            label: self.label.clone(),
            code: status.code(),
            status: tail.status,
            stderr_tail: tail.stderr_tail,
        }
        .into())
    }
}

/// A worker that ended with a failure: its label, exit status and last stderr lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFailed {
    pub label: String,
    /// Its exit code, where it exited rather than being killed.
    pub code: Option<i32>,
    pub status: String,
    pub stderr_tail: Vec<String>,
}

impl fmt::Display for WorkerFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_failure(f, &self.label, &self.status, &self.stderr_tail)
    }
}

impl std::error::Error for WorkerFailed {}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.finished {
            stop_all(std::slice::from_mut(&mut self.member));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    fn alive(pid: u32) -> bool {
        crate::gpu::os::process::exists(pid)
    }

    #[test]
    fn every_rank_succeeding_is_ok_and_sees_nvls_off() {
        let pids = run_group(vec![
            sh("test \"$NCCL_NVLS_ENABLE\" = 0"),
            sh("test \"$NCCL_NVLS_ENABLE\" = 0 && echo fine >&2"),
        ])
        .unwrap();
        assert_eq!(pids.len(), 2);
    }

    #[test]
    fn a_rank_that_dies_ends_the_group_naming_it_and_leaves_no_process() {
        let start = Instant::now();
        let err = run_group(vec![
            sh("exec sleep 30"),
            sh("echo starting >&2; sleep 0.2; echo 'CUDA out of memory' >&2; exit 3"),
            sh("exec sleep 30"),
        ])
        .unwrap_err();
        let failed = err.downcast_ref::<RankFailed>().expect("a RankFailed");
        assert_eq!(failed.rank, 1);
        assert_eq!(failed.status, "exit status 3");
        assert_eq!(failed.stderr_tail, ["starting", "CUDA out of memory"]);
        let text = err.to_string();
        assert!(text.contains("rank 1 failed: exit status 3"), "{text}");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the others were killed"
        );
    }

    #[test]
    fn the_killed_ranks_are_reaped() {
        // Rank 0 writes its pid, then sleeps; rank 1 waits for the pid and fails.
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let p = pidfile.display();
        let err = run_group(vec![
            sh(&format!(
                "echo $$ > {p}.tmp && mv {p}.tmp {p} && exec sleep 30"
            )),
            sh(&format!(
                "while [ ! -s {p} ]; do sleep 0.01; done; kill -9 $$"
            )),
        ])
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("rank 1 failed: killed by signal 9"),
            "{err}"
        );
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!alive(pid), "rank 0 ({pid}) was left running");
    }

    #[test]
    fn a_worker_hands_back_its_lines_and_a_failed_one_is_named() {
        let mut worker = Worker::spawn("sweep worker 1", sh("echo one; echo two")).unwrap();
        assert_eq!(worker.next_line().unwrap().as_deref(), Some("one"));
        assert_eq!(worker.next_line().unwrap().as_deref(), Some("two"));
        assert_eq!(worker.next_line().unwrap(), None);
        worker.finish().unwrap();
        let mut failing =
            Worker::spawn("sweep worker 2", sh("echo half; echo 'no GPU' >&2; exit 3")).unwrap();
        while failing.next_line().unwrap().is_some() {}
        let error = failing.finish().unwrap_err().to_string();
        assert_eq!(
            error,
            "sweep worker 2 failed: exit status 3; its last stderr: no GPU"
        );
    }

    #[test]
    fn a_dropped_worker_is_killed_and_reaped() {
        let mut worker = Worker::spawn("w", sh("echo $$; exec sleep 30")).unwrap();
        let pid: u32 = worker.next_line().unwrap().unwrap().parse().unwrap();
        assert!(alive(pid));
        let start = Instant::now();
        drop(worker);
        assert!(!alive(pid), "the worker ({pid}) was left running");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_command_that_cannot_start_names_its_rank() {
        let err = run_group(vec![
            sh("exec sleep 30"),
            Command::new("/nonexistent/worker"),
        ])
        .unwrap_err();
        assert!(format!("{err:#}").contains("starting rank 1"), "{err:#}");
    }
}
