//! `steps`' flags of the modelled step: the forwards (profiles, a custom one, or a fixed
//! busy-wait), the acceptance, the host program and its what-if factors, and the emulated
//! collectives; checked into the typed pieces `StepsConfig` holds.

use super::common::forward_us;
use crate::axes::Drafter;
use crate::model::host_profile::{HostProfile, Item};
use crate::model::profile::{ForwardModel, Profile};
use crate::prep::accept::Acceptance;
use anyhow::{Context, Result};
use clap::Args;

#[derive(Args, Clone)]
pub struct StepModelArgs {
    /// Target model profile for the verify forward: moe-large (DeepSeek-V3/V4-class MoE,
    /// FP8 weights, MLA cache), draft-small, or custom (see --custom-*).
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub(crate) model: String,
    /// Model profile for the draft forward.
    #[arg(long, default_value = DEFAULT_DRAFT_MODEL)]
    pub(crate) draft_model: String,
    /// Custom profile (--model or --draft-model custom): weight bytes per layer (before the
    /// TP split), at least 1: every layer holds weights. Default: 200000000.
    #[arg(long)]
    pub(crate) custom_weight_bytes_per_layer: Option<u64>,
    /// Custom profile (--model or --draft-model custom): layers. Default: 32.
    #[arg(long)]
    pub(crate) custom_layers: Option<u32>,
    /// Custom profile (--model or --draft-model custom): KV-cache bytes per token per layer.
    /// Default: 1024.
    #[arg(long)]
    pub(crate) custom_kv_bytes_per_token_per_layer: Option<u64>,
    /// Custom profile (--model or --draft-model custom): hidden size (sizes the collectives).
    /// Default: 4096.
    #[arg(long)]
    pub(crate) custom_hidden_size: Option<u32>,
    /// Replace both forwards by a fixed GPU busy-wait of this many µs (a quick what-if that
    /// ignores the profiles and the layout).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) forward_us: Option<f64>,
    /// Per-draft-token acceptance rate α: each draft token is accepted with probability α
    /// until the first rejection, so a block of γ drafts accepts (1 − α^(γ+1)) / (1 − α)
    /// tokens per request per step, bonus token included (Leviathan et al. 2023), drawn per
    /// request per step. Default: the rate that gives the seed serving run's 3.51 tokens at
    /// block 5 (α ≈ 0.779: block 3 accepts 2.86, block 8 4.04). Under --drafter eagle a block
    /// N drafts γ = N − 1 tokens (N = 5 accepts 3.22 at the default α, N = 3 2.38).
    #[arg(long, conflicts_with = "accept_length")]
    pub(crate) accept_rate: Option<f64>,
    /// Instead of --accept-rate: this mean accepted length (tokens per request per step, 1 to
    /// block + 1; under --drafter eagle 1 to N) for one block size. With several --block-sizes it is refused, since one
    /// length for every block would give each block a different α.
    #[arg(long)]
    pub(crate) accept_length: Option<f64>,
    /// The host program of a step and what each piece costs: `pytorch` (each prep's ops,
    /// launches and reads as SGLang 0.5.23's own eager code issues them, at the framework
    /// costs scripts/calibrate_torch.py measured on an H200), `pytorch-transcription` (the
    /// same costs with that script's own transcription of the preps, which issues more ops),
    /// `native` (the Rust harness's own launches and reads, nothing added), or a JSON file
    /// (`metaprep calibrate` from your engine's traces: docs/calibration.md; every field in
    /// host-profiles/README.md).
    #[arg(long, default_value = "pytorch")]
    pub(crate) host_profile: String,
    /// Run the profile's framework costs at this measured host speed instead of the one they
    /// were calibrated at: µs per op as scripts/metaprep_host.py `host_speed()`
    /// measures it in the engine's process (0.01-10000). Ops, reads, graph launches and uploads scale by
    /// this over the profile's `host_speed_us`; host segments and GPU times stay. `metaprep
    /// validate` passes each reference cell's own.
    #[arg(long)]
    pub(crate) host_speed_us: Option<f64>,
    /// Replace the µs of the program's `scheduler` host segment (a what-if).
    #[arg(long)]
    pub(crate) host_work_us: Option<f64>,
    /// What-if factors on every host cost of the profile (host segments and per-op costs;
    /// reads, launches and op counts stay as measured), comma separated, such as 0.5,1,2,4:
    /// each factor runs the whole grid again, its rows' `host_scale` column saying which, and
    /// `report` charts graph's throughput gain against it.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub(crate) host_scale: Vec<f64>,
    /// Link bandwidth the emulated collectives move their bytes at (GB/s, 0.1-18000).
    #[arg(long, default_value_t = 450.0)]
    pub(crate) link_gb_s: f64,
    /// Latency of one collective (µs), added to bytes / bandwidth. Default: by GPU count,
    /// 4.5/4.8/7.8 µs at 2/4/8 GPUs (a custom all-reduce on H100, sgl-project/sglang#2904).
    #[arg(long)]
    pub(crate) collective_latency_us: Option<f64>,
}

/// The target model a run plans for unless --model names another.
pub(crate) const DEFAULT_MODEL: &str = "moe-large";
/// The draft model a run plans for unless --draft-model names another.
pub(crate) const DEFAULT_DRAFT_MODEL: &str = "draft-small";

impl StepModelArgs {
    /// Whether --model or --draft-model names a model other than the default.
    pub(crate) fn models_named(&self) -> bool {
        self.model != DEFAULT_MODEL || self.draft_model != DEFAULT_DRAFT_MODEL
    }
}

/// The slowest link a collective is emulated over, GB/s: a PCIe 1.0 lane (0.25 GB/s) and
/// then some.
const MIN_LINK_GB_S: f64 = 0.1;
/// The fastest: ten times an NVLink 5 GPU's 1.8 TB/s.
const MAX_LINK_GB_S: f64 = 18_000.0;

/// [`StepModelArgs`], checked.
pub(crate) struct StepModel {
    pub target: ForwardModel,
    pub draft: ForwardModel,
    pub acceptance: Acceptance,
    pub host: HostProfile,
}

impl StepModelArgs {
    /// The forwards, the acceptance at `block_sizes` and the host program of `drafter`'s
    /// step, every flag of the model checked (the what-if factors against the profile).
    pub(crate) fn checked(&self, drafter: Drafter, block_sizes: &[u32]) -> Result<StepModel> {
        // The accept model's block is the tokens the drafter proposes (EAGLE: N − 1).
        let drafted: Vec<u32> = block_sizes.iter().map(|&b| drafter.drafted(b)).collect();
        let acceptance =
            acceptance(self.accept_rate, self.accept_length, &drafted).with_context(|| {
                let blocks: Vec<String> = (block_sizes.iter().zip(&drafted))
                    .map(|(b, d)| format!("block {b} drafts {d}"))
                    .collect();
                format!(
                    "--block-sizes with --drafter {drafter}: {}",
                    blocks.join(", ")
                )
            })?;
        for (v, flag, lo, hi, why) in [
            (self.host_work_us, "--host-work-us", 0.0, 1e6, "µs"),
            (
                Some(self.link_gb_s),
                "--link-gb-s",
                MIN_LINK_GB_S,
                MAX_LINK_GB_S,
                "GB/s",
            ),
            (
                self.collective_latency_us,
                "--collective-latency-us",
                0.0,
                1e6,
                "µs",
            ),
        ] {
            let Some(v) = v else { continue };
            anyhow::ensure!(
                (lo..=hi).contains(&v),
                "{flag}: {v} is outside {lo}-{hi} {why}"
            );
        }
        let host = self.host_program(drafter)?;
        for &scale in &self.host_scale {
            host.scaled(scale)?;
        }
        anyhow::ensure!(
            !self
                .host_scale
                .iter()
                .enumerate()
                .any(|(i, s)| self.host_scale[..i].contains(s)),
            "--host-scale lists a factor twice"
        );
        self.custom_flags_used()?;
        Ok(StepModel {
            target: self.forward_model(&self.model, "--model")?,
            draft: self.forward_model(&self.draft_model, "--draft-model")?,
            acceptance,
            host,
        })
    }

    /// Refuses a `--custom-*` flag the run would ignore.
    fn custom_flags_used(&self) -> Result<()> {
        let custom = [self.model.as_str(), self.draft_model.as_str()].contains(&"custom");
        for (given, flag) in [
            (
                self.custom_weight_bytes_per_layer.is_some(),
                "--custom-weight-bytes-per-layer",
            ),
            (self.custom_layers.is_some(), "--custom-layers"),
            (
                self.custom_kv_bytes_per_token_per_layer.is_some(),
                "--custom-kv-bytes-per-token-per-layer",
            ),
            (self.custom_hidden_size.is_some(), "--custom-hidden-size"),
        ] {
            anyhow::ensure!(
                !given || (custom && self.forward_us.is_none()),
                "{flag} sizes the custom profile, which this run does not use: give --model \
                 custom (or --draft-model custom) without --forward-us, or leave {flag} out"
            );
        }
        Ok(())
    }

    /// The forward `flag` (`--model`, `--draft-model`) names, or `--forward-us`'s busy-wait,
    /// which replaces both (its errors name `--forward-us`, not a flag the user may not have
    /// given).
    fn forward_model(&self, name: &str, flag: &str) -> Result<ForwardModel> {
        if let Some(us) = self.forward_us {
            return Ok(ForwardModel::FixedUs(forward_us(us)?));
        }
        let profile = if name == "custom" {
            Profile::custom(
                self.custom_weight_bytes_per_layer.unwrap_or(200_000_000),
                self.custom_layers.unwrap_or(32),
                self.custom_kv_bytes_per_token_per_layer.unwrap_or(1024),
                self.custom_hidden_size.unwrap_or(4096),
            )
        } else {
            Profile::named(name)
        };
        Ok(ForwardModel::Profile(profile.context(flag.to_string())?))
    }

    /// The `--host-profile`, with `--host-work-us` replacing its scheduler segment.
    fn host_program(&self, drafter: Drafter) -> Result<HostProfile> {
        let mut host = HostProfile::load(&self.host_profile)?;
        if let Some(v) = self.host_work_us {
            host.program_of(drafter)?;
            let program = match (drafter, host.eagle_program.as_mut()) {
                (Drafter::Eagle, Some(eagle)) => eagle,
                _ => &mut host.program,
            };
            let scheduler = program.iter_mut().find_map(|item| match item {
                Item::Host {
                    name,
                    us,
                    us_by_batch,
                    ..
                } if name == "scheduler" => Some((us, us_by_batch)),
                _ => None,
            });
            let Some((us, us_by_batch)) = scheduler else {
                anyhow::bail!(
                    "--host-work-us: host profile `{}` has no `scheduler` segment to replace",
                    host.name
                );
            };
            // The what-if value holds at every batch.
            *us = v;
            *us_by_batch = None;
        }
        match self.host_speed_us {
            Some(speed) => host.at_host_speed(speed).context("--host-speed-us"),
            None => Ok(host),
        }
    }
}

/// `--accept-rate` / `--accept-length`, checked against the run's block sizes.
pub(crate) fn acceptance(
    rate: Option<f64>,
    length: Option<f64>,
    blocks: &[u32],
) -> Result<Acceptance> {
    match (rate, length) {
        (_, Some(l)) if blocks.len() > 1 => anyhow::bail!(
            "--accept-length {l} fixes one block size's mean, but --block-sizes lists {}: \
             give --accept-rate (one α, each block its own length) or one block size",
            blocks.len()
        ),
        (_, Some(l)) => Acceptance::Length(l)
            .check(blocks)
            .context("--accept-length"),
        (Some(r), None) => Acceptance::Rate(r).check(blocks).context("--accept-rate"),
        (None, None) => Ok(Acceptance::seed()),
    }
}
