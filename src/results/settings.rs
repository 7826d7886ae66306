//! What a run was asked to measure, as data: the validated settings of `sweep`, `steps`,
//! `validate` and `check --dump`, written whole into `env.json` (`settings`) and read back by
//! `compare` (its settings check), `--resume` (the same check) and `report` (the host
//! profile's name).

use crate::results::env::Difference;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The settings of one run, by command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
// Made once per run and read once per record: no size to save.
#[allow(clippy::large_enum_variant)]
pub enum Settings {
    Sweep(SweepSettings),
    Steps(StepsSettings),
    Validate(ValidateSettings),
    Check(CheckSettings),
}

/// `--seq-lens`: the committed lengths requests are drawn from, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LengthSettings {
    pub min: u32,
    pub max: u32,
}

/// `sweep`'s grid, stopping rule and rounds. What says where it writes, which GPU and CPU it
/// takes, or that it resumes is no setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSettings {
    pub families: Vec<String>,
    pub arms: Vec<String>,
    pub batch_sizes: Vec<u32>,
    pub block_sizes: Vec<u32>,
    pub layouts: Vec<String>,
    /// The stand-in forward after each prep for `step_fwd_us`; 0: none.
    pub forward_us: f64,
    pub max_context: u32,
    pub seq_lens: LengthSettings,
    /// The within-round rule: ±% of the median, or ±µs, from `min_samples` to `max_samples`.
    pub rel_ci_pct: f64,
    pub abs_ci_us: Option<f64>,
    pub min_samples: usize,
    pub max_samples: usize,
    /// A cell's time cap per metric over all its rounds.
    pub time_cap_ms: u64,
    pub rounds: usize,
    pub max_rounds: usize,
    /// The GPU-paced arms' own rounds: their cap and precision (±%). `None` in a run of a
    /// metaprep before them, whose GPU-paced arms stopped with their groups.
    #[serde(default)]
    pub gpu_paced_max_rounds: Option<usize>,
    #[serde(default)]
    pub gpu_paced_precision_pct: Option<f64>,
    pub steps_per_sample: usize,
    pub seed: u64,
    pub processes: usize,
}

/// `steps`' grid, models, host program, rounds and timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepsSettings {
    pub arms: Vec<String>,
    pub batch_sizes: Vec<u32>,
    pub block_sizes: Vec<u32>,
    pub layouts: Vec<String>,
    /// `--gpu-memory-gib` in bytes; `None`: the device's own memory.
    pub gpu_memory_bytes: Option<u64>,
    /// The forward models' names (`fixed 20 us` under `--forward-us`).
    pub target: String,
    pub draft: String,
    /// Exactly one of them: a per-draft-token acceptance rate, or a mean accepted length.
    pub accept_rate: Option<f64>,
    pub accept_length: Option<f64>,
    /// The host profile as the run used it (after `--host-work-us` and `--host-speed-us`),
    /// whole: its `name`, costs with their sources, and programs.
    pub host_profile: Value,
    pub drafter: String,
    pub host_scales: Vec<f64>,
    pub link_gb_s: f64,
    pub collective_latency_us: Option<f64>,
    pub min_rounds: usize,
    pub max_rounds: usize,
    pub round_steps: usize,
    pub precision_pct: f64,
    pub cell_time_cap_ms: u64,
    pub warmup_steps: usize,
    pub timeline_steps: usize,
    pub timeline_cap_ms: u64,
    pub timer: String,
    pub max_context: u32,
    pub seq_lens: LengthSettings,
    pub seed: u64,
    pub ranks: String,
    pub read_skew_us: f64,
    pub read_skew_jitter_us: f64,
    /// `None`: every rank.
    pub read_skew_rank: Option<usize>,
}

/// `validate`'s reference, fit file, bars and the steps settings its cells run with. Its
/// `env.json` takes the machine fields from the steps run of the reference's first cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateSettings {
    /// The reference CSV as given, and its cells in its order.
    pub reference: String,
    pub cells: Vec<ValidateCell>,
    /// `--fit`: the fit file as given and its one cell; `None` without.
    pub fit: Option<FitSettings>,
    /// `--fit-post-wait`: the file as given and the cell the post-wait scale is fitted at;
    /// `None` without (and in validations written before it existed).
    #[serde(default)]
    pub fit_post_wait: Option<FitSettings>,
    /// `--step-pct` and `--diff-pct`: the bars a cell passes within.
    pub step_pct: f64,
    pub diff_pct: f64,
    /// The settings of the steps run of the reference's first cell at the profile's own host
    /// speed: every cell runs them with its own forward (`target`), batch, block and arms,
    /// and at the host speeds of its reference rows. With `--fit`, the profile as given,
    /// before the fit: the cells run the fitted one, `fitted-profile.json` beside env.json.
    pub steps: StepsSettings,
}

/// One cell of a validation: its forward (µs), batch, block and the arms it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateCell {
    pub forward_us: f64,
    pub batch_size: u32,
    pub block: u32,
    pub arms: Vec<String>,
}

/// `validate --fit FIT.csv`: the file as given and the cell the factors are fitted at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitSettings {
    pub file: String,
    pub cell: ValidateCell,
}

/// What `check --dump DIR` was asked to write (`DIR/env.json`; the check and `--soak` write
/// no env.json): the seed and number of its cases, which cycle through every family, batch
/// 1–8 and blocks 1–8 whatever the check's own axes say, and the arms dumped beside the CPU
/// reference (none with `--cpu-only`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckSettings {
    pub seed: u64,
    /// `--dump-cases`.
    pub dump_cases: u32,
    /// `--cpu-only`: the CPU reference alone, no arm run.
    pub cpu_only: bool,
    /// The arms whose buffers the dump holds; empty with `--cpu-only`.
    pub arms: Vec<String>,
}

impl Settings {
    /// The command the settings are of (`sweep`, `steps`, `validate`, `check`).
    pub fn command(&self) -> &'static str {
        match self {
            Settings::Sweep(_) => "sweep",
            Settings::Steps(_) => "steps",
            Settings::Validate(_) => "validate",
            Settings::Check(_) => "check",
        }
    }

    /// The name of the host profile a steps run (or a validation's) used.
    pub fn host_profile(&self) -> Option<&str> {
        let steps = match self {
            Settings::Steps(s) => s,
            Settings::Validate(v) => &v.steps,
            Settings::Sweep(_) | Settings::Check(_) => return None,
        };
        steps.host_profile.get("name").and_then(Value::as_str)
    }

    /// Every setting recorded differently in `other`, `self`'s value first: the command,
    /// then the rest by name (a nested one as `host_profile.op_us.value`). A list of plain
    /// values (an axis) is compared as a set, since its order is the order cells ran in, not
    /// what they measure; a list of objects (a program) in order.
    pub fn differences(&self, other: &Settings) -> Vec<Difference> {
        let (mine, theirs) = (leaves(self), leaves(other));
        let mut names: Vec<&String> = mine.keys().chain(theirs.keys()).collect();
        names.sort_by_key(|name| (name.as_str() != "command", name.as_str()));
        names.dedup();
        names
            .into_iter()
            .filter(|name| mine.get(*name).map(as_set) != theirs.get(*name).map(as_set))
            .map(|name| Difference {
                name: name.clone(),
                this: mine.get(name).map(shown),
                other: theirs.get(name).map(shown),
            })
            .collect()
    }
}

/// `settings` as one value per leaf, keyed by its dotted path.
fn leaves(settings: &Settings) -> BTreeMap<String, Value> {
    fn walk(prefix: &str, value: Value, out: &mut BTreeMap<String, Value>) {
        match value {
            Value::Object(fields) => {
                for (name, value) in fields {
                    let path = match prefix {
                        "" => name,
                        _ => format!("{prefix}.{name}"),
                    };
                    walk(&path, value, out);
                }
            }
            leaf => {
                out.insert(prefix.to_string(), leaf);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(
        "",
        serde_json::to_value(settings).expect("settings serialise"),
        &mut out,
    );
    out
}

/// A list of plain values as the sorted set of its items; anything else as it is.
fn as_set(value: &Value) -> Value {
    match value {
        Value::Array(items) if !items.iter().any(|i| i.is_object() || i.is_array()) => {
            let mut items: Vec<String> = items.iter().map(Value::to_string).collect();
            items.sort();
            items.dedup();
            Value::Array(items.into_iter().map(Value::String).collect())
        }
        other => other.clone(),
    }
}

/// A setting's value as a difference shows it: a string bare, a list of plain values
/// comma-separated (as the flag takes it), anything else as compact JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) if !items.iter().any(|i| i.is_object() || i.is_array()) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// Sweep settings for tests across modules.
#[cfg(test)]
pub(crate) fn test_sweep() -> SweepSettings {
    SweepSettings {
        families: vec!["dsa_decode".into()],
        arms: vec!["eager-sync".into(), "graph".into()],
        batch_sizes: vec![1, 8, 64],
        block_sizes: vec![5],
        layouts: vec!["tp1".into(), "tp8".into()],
        forward_us: 0.0,
        max_context: 16384,
        seq_lens: LengthSettings {
            min: 2048,
            max: 8192,
        },
        rel_ci_pct: 1.0,
        abs_ci_us: Some(0.02),
        min_samples: 10,
        max_samples: 1000,
        time_cap_ms: 5000,
        rounds: 6,
        max_rounds: 12,
        gpu_paced_max_rounds: Some(30),
        gpu_paced_precision_pct: Some(0.7),
        steps_per_sample: 10,
        seed: 1,
        processes: 1,
    }
}

/// Steps settings for tests across modules.
#[cfg(test)]
pub(crate) fn test_steps() -> StepsSettings {
    StepsSettings {
        arms: vec!["eager-sync".into(), "graph".into()],
        batch_sizes: vec![1],
        block_sizes: vec![5],
        layouts: vec!["tp1".into()],
        gpu_memory_bytes: None,
        target: "fixed 1000 us".into(),
        draft: "draft-small".into(),
        accept_rate: Some(0.78),
        accept_length: None,
        host_profile: serde_json::json!({"name": "pytorch", "op_us": {"value": 7.9}}),
        drafter: "dspark".into(),
        host_scales: vec![1.0],
        link_gb_s: 450.0,
        collective_latency_us: None,
        min_rounds: 6,
        max_rounds: 12,
        round_steps: 200,
        precision_pct: 1.0,
        cell_time_cap_ms: 20000,
        warmup_steps: 50,
        timeline_steps: 200,
        timeline_cap_ms: 2000,
        timer: "events".into(),
        max_context: 16384,
        seq_lens: LengthSettings {
            min: 2048,
            max: 8192,
        },
        seed: 1,
        ranks: "auto".into(),
        read_skew_us: 0.0,
        read_skew_jitter_us: 0.0,
        read_skew_rank: None,
    }
}

/// The settings of a validation with a fit, and of a CPU-only dump, for tests.
#[cfg(test)]
pub(crate) fn test_validate_and_check() -> [Settings; 2] {
    let cell = |forward_us: f64, arms: &[&str]| ValidateCell {
        forward_us,
        batch_size: 1,
        block: 5,
        arms: arms.iter().map(|a| a.to_string()).collect(),
    };
    let validate = Settings::Validate(ValidateSettings {
        reference: "ref/reference.csv".into(),
        cells: vec![
            cell(1000.0, &["eager-sync", "graph"]),
            cell(100.0, &["graph"]),
        ],
        fit: Some(FitSettings {
            file: "fit/reference.csv".into(),
            cell: cell(100.0, &["eager-sync", "graph"]),
        }),
        fit_post_wait: Some(FitSettings {
            file: "fit-long/reference.csv".into(),
            cell: cell(3000.0, &["eager-sync", "graph"]),
        }),
        step_pct: 10.0,
        diff_pct: 15.0,
        steps: test_steps(),
    });
    let check = Settings::Check(CheckSettings {
        seed: 3,
        dump_cases: 12,
        cpu_only: false,
        arms: vec!["eager-sync".into(), "graph".into()],
    });
    [validate, check]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_and_check_settings_are_tagged_and_round_trip() {
        let [validate, check] = test_validate_and_check();
        for (settings, command) in [(&validate, "validate"), (&check, "check")] {
            let json = serde_json::to_value(settings).unwrap();
            assert_eq!(json["command"], command);
            let back: Settings = serde_json::from_value(json).unwrap();
            assert_eq!(&back, settings);
            assert_eq!(back.command(), command);
            assert_eq!(back.differences(settings), []);
        }
        let json = serde_json::to_value(&validate).unwrap();
        assert_eq!(json["steps"]["seed"], 1);
        assert_eq!(json["fit"]["cell"]["forward_us"], 100.0);
        // A validation names the profile its steps ran with; a check has none.
        assert_eq!(validate.host_profile(), Some("pytorch"));
        assert_eq!(check.host_profile(), None);
        // Nested settings are named by their path.
        let Settings::Validate(mut other) = validate.clone() else {
            unreachable!()
        };
        other.steps.seed = 2;
        other.diff_pct = 20.0;
        let names: Vec<String> = validate
            .differences(&Settings::Validate(other))
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["diff_pct", "steps.seed"]);
        assert_eq!(
            check.differences(&validate)[0].to_string(),
            "command: `check` vs `validate`"
        );
    }

    #[test]
    fn settings_are_tagged_by_command_and_round_trip() {
        let settings = Settings::Sweep(test_sweep());
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json["command"], "sweep");
        assert_eq!(json["batch_sizes"], serde_json::json!([1, 8, 64]));
        let back: Settings = serde_json::from_value(json).unwrap();
        assert_eq!(back, settings);
        assert_eq!(back.command(), "sweep");
        assert_eq!(back.host_profile(), None);
    }

    #[test]
    fn the_gpu_paced_rounds_are_recorded_and_a_run_before_them_still_loads() {
        let json = serde_json::to_value(Settings::Sweep(test_sweep())).unwrap();
        assert_eq!(json["gpu_paced_max_rounds"], 30);
        assert_eq!(json["gpu_paced_precision_pct"], 0.7);
        let mut before = json.clone();
        let fields = before.as_object_mut().unwrap();
        fields.remove("gpu_paced_max_rounds");
        fields.remove("gpu_paced_precision_pct");
        let Settings::Sweep(old) = serde_json::from_value(before).unwrap() else {
            panic!("not a sweep's settings");
        };
        assert_eq!(
            (old.gpu_paced_max_rounds, old.gpu_paced_precision_pct),
            (None, None)
        );
        // A run before them differs from one with them in just those settings.
        let shown: Vec<String> = Settings::Sweep(old)
            .differences(&Settings::Sweep(test_sweep()))
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert!(shown.iter().all(|d| d.contains("gpu_paced")), "{shown:?}");
    }

    #[test]
    fn differences_name_each_setting_and_take_axes_as_sets() {
        let base = Settings::Sweep(test_sweep());
        let mut reordered = test_sweep();
        reordered.batch_sizes = vec![64, 1, 8];
        reordered.layouts.reverse();
        assert_eq!(base.differences(&Settings::Sweep(reordered)), []);
        let mut other = test_sweep();
        other.batch_sizes = vec![1, 8];
        other.seed = 2;
        other.abs_ci_us = None;
        let shown: Vec<String> = base
            .differences(&Settings::Sweep(other))
            .iter()
            .map(Difference::to_string)
            .collect();
        assert_eq!(
            shown,
            [
                "abs_ci_us: `0.02` vs `null`",
                "batch_sizes: `1,8,64` vs `1,8`",
                "seed: `1` vs `2`",
            ]
        );
    }

    #[test]
    fn a_steps_run_names_its_host_profile_and_compares_its_program_in_order() {
        let steps = |op_us: f64, program: serde_json::Value| -> Settings {
            serde_json::from_value(serde_json::json!({
                "command": "steps",
                "arms": ["eager-sync", "graph"], "batch_sizes": [1, 8], "block_sizes": [5],
                "layouts": ["tp1"], "gpu_memory_bytes": null, "target": "moe-large",
                "draft": "draft-small", "accept_rate": 0.78, "accept_length": null,
                "host_profile": {"name": "pytorch", "op_us": {"value": op_us}, "program": program},
                "drafter": "dspark", "host_scales": [1.0], "link_gb_s": 450.0,
                "collective_latency_us": null, "min_rounds": 6, "max_rounds": 12,
                "round_steps": 200, "precision_pct": 1.0, "cell_time_cap_ms": 20000,
                "warmup_steps": 50, "timeline_steps": 200, "timeline_cap_ms": 2000,
                "timer": "events", "max_context": 16384, "seq_lens": {"min": 2048, "max": 8192},
                "seed": 1, "ranks": "auto", "read_skew_us": 0.0, "read_skew_jitter_us": 0.0,
                "read_skew_rank": null
            }))
            .unwrap()
        };
        let a = steps(7.9, serde_json::json!([{"host": "a"}, {"host": "b"}]));
        assert_eq!(a.command(), "steps");
        assert_eq!(a.host_profile(), Some("pytorch"));
        let b = steps(8.1, serde_json::json!([{"host": "b"}, {"host": "a"}]));
        let names: Vec<String> = a.differences(&b).into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["host_profile.op_us.value", "host_profile.program"]);
        let sweep = Settings::Sweep(test_sweep());
        let first = a.differences(&sweep).remove(0).to_string();
        assert_eq!(first, "command: `steps` vs `sweep`");
    }
}
