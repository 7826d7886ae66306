//! The validated configs of `sweep`, `steps` and `check` as the [`Settings`] their `env.json`
//! records (`validate`'s are built in `cli/validate/settings.rs`, from its first cell's steps
//! config and the reference).

use super::check::CheckConfig;
use super::steps::{model_name, StepsConfig};
use super::sweep::SweepConfig;
use crate::prep::accept::Acceptance;
use crate::prep::inputs::LengthRange;
use crate::results::settings::{
    CheckSettings, LengthSettings, Settings, StepsSettings, SweepSettings,
};
use std::fmt::Display;

fn names<T: Display>(items: &[T]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

fn lengths(range: &LengthRange) -> LengthSettings {
    LengthSettings {
        min: range.min,
        max: range.max,
    }
}

impl SweepConfig {
    /// What this sweep measures (not where it writes, which GPU or CPU, or that it resumes).
    pub fn settings(&self) -> Settings {
        Settings::Sweep(SweepSettings {
            families: names(&self.families),
            arms: names(&self.arms),
            batch_sizes: self.batch_sizes.clone(),
            block_sizes: self.block_sizes.clone(),
            layouts: names(&self.layouts),
            forward_us: self.forward_us,
            max_context: self.max_context,
            seq_lens: lengths(&self.seq_lens),
            rel_ci_pct: self.rule.rel_ci * 100.0,
            abs_ci_us: self.rule.abs_ci_us,
            min_samples: self.rule.min_samples,
            max_samples: self.rule.max_samples,
            time_cap_ms: self.rule.time_cap.as_millis() as u64,
            rounds: self.rounds,
            max_rounds: self.max_rounds,
            // Recorded only where the GPU-paced arms get rounds of their own: a run without
            // them measures as a run before them did, and resumes or compares with one.
            gpu_paced_max_rounds: (self.last_round() > self.max_rounds)
                .then_some(self.gpu_paced_max_rounds),
            gpu_paced_precision_pct: (self.last_round() > self.max_rounds)
                .then_some(self.gpu_paced_rel_ci * 100.0),
            steps_per_sample: self.steps_per_sample,
            seed: self.seed,
            processes: self.processes,
        })
    }
}

impl StepsConfig {
    /// What this steps run measures (not where it writes or traces, which GPU, CPU, CUPTI or
    /// NCCL, or that it resumes).
    pub fn settings(&self) -> Settings {
        Settings::Steps(self.steps_settings())
    }

    /// [`StepsConfig::settings`]' fields, for a command that runs steps (`validate`).
    pub fn steps_settings(&self) -> StepsSettings {
        let (accept_rate, accept_length) = match self.acceptance {
            Acceptance::Rate(rate) => (Some(rate), None),
            Acceptance::Length(length) => (None, Some(length)),
        };
        StepsSettings {
            arms: names(&self.arms),
            batch_sizes: self.batch_sizes.clone(),
            block_sizes: self.block_sizes.clone(),
            layouts: names(&self.layouts),
            gpu_memory_bytes: self.gpu_memory.map(|m| m.bytes),
            target: model_name(&self.target),
            draft: model_name(&self.draft),
            accept_rate,
            accept_length,
            host_profile: serde_json::to_value(&self.host).expect("a host profile serialises"),
            drafter: self.drafter.to_string(),
            host_scales: self.host_scales.clone(),
            link_gb_s: self.link_gb_s,
            collective_latency_us: self.collective_latency_us,
            min_rounds: self.rounds.min,
            max_rounds: self.rounds.max,
            round_steps: self.rounds.steps,
            precision_pct: self.rounds.precision_pct,
            cell_time_cap_ms: self.rounds.cap.as_millis() as u64,
            warmup_steps: self.warmup_steps,
            timeline_steps: self.timeline_steps,
            timeline_cap_ms: self.timeline_cap.as_millis() as u64,
            timer: self.timer.to_string(),
            max_context: self.max_context,
            seq_lens: lengths(&self.seq_lens),
            seed: self.seed,
            ranks: self.ranks.to_string(),
            read_skew_us: self.read_skew.us,
            read_skew_jitter_us: self.read_skew.jitter_us,
            read_skew_rank: self.read_skew.rank,
        }
    }
}

impl CheckConfig {
    /// What `check --dump` with this config writes: `dump_cases` cases of its seed, and its
    /// arms' buffers unless `cpu_only`.
    pub fn dump_settings(&self, dump_cases: u32, cpu_only: bool) -> Settings {
        Settings::Check(CheckSettings {
            seed: self.seed,
            dump_cases,
            cpu_only,
            arms: match cpu_only {
                true => Vec::new(),
                false => names(&self.arms),
            },
        })
    }
}
