//! The two sides of an `ab` as the coordinator holds them: a worker process each (its own
//! build's `ab-worker`), asked for one thing at a time, every answer awaited within a limit so
//! a hung side ends the run with its name instead of hanging it.

use super::protocol::{Hello, Measured, Message, Ready, Request, PROTOCOL};
use crate::exit::{BadInput, GpuUnavailable};
use crate::harness::process_group::{NextLine, Worker, WorkerFailed};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A side as the command line gives it: its name, its executable and its worker's flags.
#[derive(Debug, Clone, PartialEq)]
pub struct SideSpec {
    /// `BASE` or `NEW`.
    pub name: &'static str,
    pub exe: PathBuf,
    /// Everything after the executable: its worker's subcommand (`ab-worker`, or
    /// `ab-steps-worker` for the steps grid), the grid's flags, then the side's own.
    pub args: Vec<String>,
}

impl SideSpec {
    /// `BASE (/path/to/metaprep)`: how errors name the side.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.exe.display())
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(&self.args);
        c
    }
}

/// A side's worker process and what it has said of itself.
pub struct Side {
    pub spec: SideSpec,
    /// Taken once the side has ended.
    worker: Option<Worker>,
}

impl Side {
    pub fn spawn(spec: &SideSpec) -> Result<Side> {
        let worker = Worker::spawn_piped(&spec.label(), spec.command())
            .with_context(|| format!("{}: could not be started", spec.label()))?;
        Ok(Side {
            spec: spec.clone(),
            worker: Some(worker),
        })
    }

    /// The side's hello, within `limit`, checked to speak this protocol: sent before it does
    /// any GPU work.
    pub fn hello(&mut self, limit: Duration) -> Result<Hello> {
        let hello = match self.next("its hello", limit)? {
            Message::Hello(hello) => hello,
            other => return Err(self.unexpected("its hello", &other)),
        };
        if hello.protocol != PROTOCOL {
            self.kill();
            return Err(BadInput(format!(
                "{} is metaprep {} speaking ab protocol {}, where this one speaks {PROTOCOL}: \
                 run `ab` from a build of the same protocol as both sides",
                self.spec.label(),
                hello.version,
                hello.protocol
            ))
            .into());
        }
        Ok(hello)
    }

    /// Asks the side to open the GPU and warm its cells up; its answer within `limit`.
    pub fn start(&mut self, limit: Duration) -> Result<Ready> {
        self.send(&Request::Start, "its start")?;
        match self.next(
            "its start (opening the GPU, loading kernels, warming every cell up)",
            limit,
        )? {
            Message::Ready(ready) => Ok(ready),
            other => Err(self.unexpected("its start", &other)),
        }
    }

    /// One burst of cell `cell` (the side's own index), within `limit`.
    pub fn measure(&mut self, cell: usize, what: &str, limit: Duration) -> Result<Measured> {
        self.send(&Request::Measure { cell }, what)?;
        match self.next(what, limit)? {
            Message::Measured(m) if m.cell == cell => Ok(m),
            other => Err(self.unexpected(what, &other)),
        }
    }

    /// Ends the side: its stdin closes, and it must exit 0.
    pub fn finish(mut self) -> Result<()> {
        self.worker.take().map_or(Ok(()), Worker::finish)
    }

    fn send(&mut self, request: &Request, what: &str) -> Result<()> {
        let line = serde_json::to_string(request)?;
        let sent = match self.worker.as_mut() {
            Some(worker) => worker.send_line(&line),
            None => bail!("{} has already ended", self.spec.label()),
        };
        sent.map_err(|e| self.ended(e, what))
    }

    /// The side's next message, within `limit`: a side that ended, hung or sent what is no
    /// message of this protocol is an error naming it (and a hung one is killed).
    fn next(&mut self, what: &str, limit: Duration) -> Result<Message> {
        let label = self.spec.label();
        let Some(worker) = self.worker.as_mut() else {
            bail!("{label} has already ended");
        };
        let line = match worker.next_line_within(limit)? {
            NextLine::Line(line) => line,
            NextLine::Closed => {
                return Err(self.ended(anyhow::anyhow!("it closed its output"), what));
            }
            NextLine::TimedOut => {
                self.kill();
                bail!(
                    "{label} sent nothing for {} s awaiting {what}: killed as hung (the limits \
                     are --start-timeout-s and --pair-timeout-s)",
                    limit.as_secs()
                );
            }
        };
        serde_json::from_str::<Message>(&line).map_err(|_| {
            self.kill();
            anyhow::anyhow!(
                "{label} sent what is no message of metaprep's ab protocol {PROTOCOL} awaiting \
                 {what}: {}",
                crate::exit::one_line(&crate::exit::capped(&line, QUOTED_CHARS))
            )
        })
    }

    fn unexpected(&mut self, what: &str, message: &Message) -> anyhow::Error {
        self.kill();
        let kind = match message {
            Message::Hello(_) => "a hello",
            Message::Ready(_) => "a ready",
            Message::Measured(_) => "a measurement of another cell",
        };
        anyhow::anyhow!("{} sent {kind} awaiting {what}", self.spec.label())
    }

    fn kill(&mut self) {
        if let Some(worker) = self.worker.take() {
            worker.kill();
        }
    }

    /// The error of a side that ended: its exit status and last stderr; one that refused its
    /// flags (exit 2) is bad input, one that found no GPU (3) is that, each named.
    fn ended(&mut self, cause: anyhow::Error, what: &str) -> anyhow::Error {
        let label = self.spec.label();
        let Some(Err(e)) = self.worker.take().map(Worker::finish) else {
            return cause.context(format!("{label} ended awaiting {what}"));
        };
        // Its own errors begin as this program's do.
        let said = |f: &WorkerFailed| {
            let lines = f
                .stderr_tail
                .iter()
                .map(|l| l.trim_start_matches("metaprep: error: "));
            lines.collect::<Vec<_>>().join(" | ")
        };
        match e.downcast_ref::<WorkerFailed>() {
            Some(f) if f.code == Some(2) => BadInput(format!(
                "{label} refused its flags, or is no metaprep with `ab-worker`/`ab-steps-worker`: {}",
                said(f)
            ))
            .into(),
            Some(f) if f.code == Some(3) => GpuUnavailable(format!("{label}: {}", said(f))).into(),
            _ => e.context(format!("{label} ended awaiting {what}")),
        }
    }
}

/// The most characters of what a side sent that an error quotes.
const QUOTED_CHARS: usize = 300;

#[cfg(test)]
#[path = "sides_tests.rs"]
mod tests;
