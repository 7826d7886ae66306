//! What a coordinator and a side's worker say to each other, one JSON document a line: the
//! worker's [`Hello`] before any GPU work, its [`Ready`] once started, then a [`Measured`] for
//! each [`Request::Measure`] on its stdin.
//! Both sides of an `ab` may be different builds: the [`PROTOCOL`] number is what must agree.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The version of these messages; a worker whose number differs is refused by name.
pub const PROTOCOL: u32 = 1;

/// A cell as both sides name it: strings, so that a build with an arm or family the other does
/// not know still reads the other's list and the coordinator can say which cell is missing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellName {
    pub family: String,
    pub arm: String,
    pub batch_size: u32,
    pub block: u32,
    pub layout: String,
}

impl CellName {
    /// The cell's group: everything but the arm.
    pub fn group(&self) -> String {
        format!(
            "{} bs {} block {} {}",
            self.family, self.batch_size, self.block, self.layout
        )
    }
}

impl fmt::Display for CellName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} bs {} block {} {}",
            self.family, self.arm, self.batch_size, self.block, self.layout
        )
    }
}

/// The worker's first line, sent once its flags are read and before any GPU work: what it is
/// and which cells it would measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// `metaprep --version` of the worker's build.
    pub version: String,
    pub cells: Vec<CellName>,
    /// What its planted regression is, if any (a test aid: `--plant-host`).
    pub planted: Option<String>,
}

/// The worker's answer to [`Request::Start`]: it has opened the GPU, drawn its inputs and
/// warmed every cell up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    pub device: String,
    /// The device's PCI bus id, where the coordinator reads its clocks (NVML).
    #[serde(default)]
    pub pci_bus_id: String,
    /// Where its measuring thread is pinned.
    pub pinned: String,
    /// The layouts that need more GPUs than the host has (one rank runs).
    pub emulated: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Open the GPU and warm every cell up, then say [`Ready`].
    Start,
    /// Measure cell `cell` (an index into the Hello's cells) once: a warm-up, then a burst.
    Measure { cell: usize },
}

/// One metric of a burst: its median over the burst's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub value: f64,
}

/// A burst of a cell and the host-speed probe on either side of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub cell: usize,
    /// µs per launch of the one-node empty graph (the host's launch path) before and after.
    pub probe_before_us: f64,
    pub probe_after_us: f64,
    pub metrics: Vec<Metric>,
}

impl Measured {
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }

    /// How far the host's launch speed moved across the burst, as |ln(after / before)|.
    pub fn probe_move(&self) -> f64 {
        let moved = (self.probe_after_us / self.probe_before_us).ln().abs();
        if moved.is_finite() {
            moved
        } else {
            f64::INFINITY
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Message {
    Hello(Hello),
    Ready(Ready),
    Measured(Measured),
}
