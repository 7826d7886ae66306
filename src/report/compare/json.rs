//! The comparison as JSON (`--json FILE`): the details' data, typed, for scripts.

use super::comparison::{Comparison, PowerClass};
use super::side::{Entry, Side};
use crate::report::change::{Change, Verdict};
use serde::Serialize;

/// The value of the first key of every JSON file `compare` writes: `--json` replaces only
/// such a file.
pub const JSON_SIGNATURE: &str = "{\"report\":\"metaprep compare\"";

#[derive(Serialize)]
struct Report<'a> {
    /// Always `metaprep compare` (and first, so a file can be recognised by its start).
    report: &'static str,
    base: SideInfo<'a>,
    new: SideInfo<'a>,
    /// `[base arm, new arm]` when two arms are compared.
    arms: Option<[&'a str; 2]>,
    threshold_pct: f64,
    exit_code: u8,
    allow_missing: bool,
    /// `compare --gate`: which rows called `slower` fail the comparison.
    gate: &'static str,
    /// The rows called `slower` that fail it under `gate`.
    gated_slower: usize,
    counts: Vec<Count>,
    warnings: &'a [String],
    /// Rows only in BASE: findings between two runs.
    missing: Vec<RowId<'a>>,
    only_in_new: Vec<RowId<'a>>,
    floors: Vec<Floor<'a>>,
    power: Vec<PowerClass>,
    rows: Vec<Compared<'a>>,
}

#[derive(Serialize)]
struct SideInfo<'a> {
    path: String,
    git_revision: Option<&'a str>,
    date: Option<&'a str>,
    gpu: Option<&'a str>,
}

impl<'a> SideInfo<'a> {
    fn of(side: &'a Side) -> Self {
        let env = side.env.as_ref();
        SideInfo {
            path: side.path.display().to_string(),
            git_revision: env.map(|e| e.git_revision.as_str()),
            date: env.map(|e| e.date.as_str()),
            gpu: env.map(|e| e.gpu_name.as_str()),
        }
    }
}

#[derive(Serialize)]
struct Count {
    verdict: &'static str,
    rows: usize,
}

#[derive(Serialize)]
struct RowId<'a> {
    kind: &'a str,
    family: &'a str,
    arm: &'a str,
    batch_size: u32,
    block_size: u32,
    layout: &'a str,
    metric: &'a str,
}

impl<'a> RowId<'a> {
    fn of(e: &'a Entry) -> Self {
        RowId {
            kind: &e.kind,
            family: &e.family,
            arm: &e.arm,
            batch_size: e.batch_size,
            block_size: e.block_size,
            layout: &e.layout,
            metric: &e.metric,
        }
    }
}

#[derive(Serialize)]
struct Value {
    median: f64,
    ci_lo: Option<f64>,
    ci_hi: Option<f64>,
    rounds: u32,
    throttled: bool,
}

impl Value {
    fn of(e: &Entry) -> Self {
        let finite = |v: f64| v.is_finite().then_some(v);
        Value {
            median: e.median,
            ci_lo: finite(e.ci_lo),
            ci_hi: finite(e.ci_hi),
            rounds: e.rounds,
            throttled: e.throttled,
        }
    }
}

#[derive(Serialize)]
struct Floor<'a> {
    item: &'a str,
    metric: &'a str,
    unit: &'a str,
    base: Value,
    new: Value,
    change: Option<Change>,
}

#[derive(Serialize)]
struct Compared<'a> {
    #[serde(flatten)]
    id: RowId<'a>,
    /// NEW's arm where two arms are compared (`arm` is BASE's).
    new_arm: &'a str,
    unit: &'a str,
    base: Value,
    new: Value,
    change: Option<Change>,
    vs_floor: Option<Change>,
    smallest_callable_pct: Option<f64>,
    /// What the change alone says.
    called: &'static str,
    verdict: &'static str,
    /// Whether this row fails the comparison (`slower`, and a row `gate` fails on).
    fails: bool,
}

/// Writes the comparison as one JSON document (a line) to `out`.
pub fn write(
    out: &mut dyn std::io::Write,
    c: &Comparison,
    warnings: &[String],
    exit_code: u8,
    allow_missing: bool,
) -> serde_json::Result<()> {
    let report = Report {
        report: "metaprep compare",
        base: SideInfo::of(&c.base),
        new: SideInfo::of(&c.new),
        arms: c.arms.as_ref().map(|(b, n)| [b.as_str(), n.as_str()]),
        threshold_pct: c.threshold_pct,
        exit_code,
        allow_missing,
        gate: c.gate.as_str(),
        gated_slower: c.gated_slower(),
        counts: Verdict::ALL
            .iter()
            .map(|&v| Count {
                verdict: v.as_str(),
                rows: c.count(v),
            })
            .collect(),
        warnings,
        missing: c
            .missing()
            .iter()
            .map(|&i| RowId::of(&c.base.entries[i]))
            .collect(),
        only_in_new: c
            .only_in_new
            .iter()
            .map(|&i| RowId::of(&c.new.entries[i]))
            .collect(),
        floors: c
            .floors
            .iter()
            .map(|f| {
                let (b, n) = c.floor_entries(f);
                Floor {
                    item: &b.arm,
                    metric: &b.metric,
                    unit: &b.unit,
                    base: Value::of(b),
                    new: Value::of(n),
                    change: f.change,
                }
            })
            .collect(),
        power: c.power(),
        rows: c
            .matched
            .iter()
            .map(|m| {
                let (b, n) = c.entries(m);
                Compared {
                    id: RowId::of(b),
                    new_arm: &n.arm,
                    unit: &b.unit,
                    base: Value::of(b),
                    new: Value::of(n),
                    change: m.change,
                    vs_floor: m.vs_floor,
                    smallest_callable_pct: m.smallest_callable_pct,
                    called: m.called.as_str(),
                    verdict: m.verdict.as_str(),
                    fails: c.fails(m),
                }
            })
            .collect(),
    };
    serde_json::to_writer(&mut *out, &report)?;
    out.write_all(b"\n").map_err(serde_json::Error::io)
}
