//! What a profile must hold: durations in range, a prep for every family a step prepares,
//! each GPU item once and in order.

use super::costs::read_field;
use super::{expand_passes, HostProfile, Item, EAGLE_GPU_ITEMS_IN_ORDER, GPU_ITEMS_IN_ORDER};
use crate::axes::{Arm, Drafter, ReadPath};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;

/// Every GPU item of `order` exactly once in `program`, in that order.
fn check_gpu_order(program: &[Item], order: &[Item], what: &str) -> Result<()> {
    let positions: Vec<(&Item, Vec<usize>)> = order
        .iter()
        .map(|want| {
            let at: Vec<usize> = (0..program.len())
                .filter(|&i| std::mem::discriminant(&program[i]) == std::mem::discriminant(want))
                .collect();
            (want, at)
        })
        .collect();
    for (item, at) in &positions {
        ensure!(
            at.len() == 1,
            "`{what}` must hold exactly one `{}` item, it holds {}",
            item.label(),
            at.len()
        );
    }
    let names: Vec<&str> = order.iter().map(Item::label).collect();
    ensure!(
        positions.windows(2).all(|w| w[0].1[0] < w[1].1[0]),
        "`{what}` must order {}",
        names.join(", ")
    );
    let known: Vec<_> = order.iter().map(std::mem::discriminant).collect();
    if let Some(other) = program
        .iter()
        .find(|i| i.is_gpu() && !known.contains(&std::mem::discriminant(*i)))
    {
        bail!("`{what}` cannot hold a `{}` item", other.label());
    }
    Ok(())
}

/// A duration field of a profile: finite, from 0 to a second.
fn check_us(field: &str, v: f64) -> Result<()> {
    ensure!(
        v.is_finite() && (0.0..=1e6).contains(&v),
        "{field} = {v} is not a duration in µs between 0 and 1e6"
    );
    Ok(())
}

impl HostProfile {
    /// Everything [`HostProfile::parse`] refuses beyond serde's own checks.
    pub(super) fn check_well_formed(&self) -> Result<()> {
        self.validate_costs()?;
        self.validate_preps()?;
        self.validate_programs()?;
        self.validate_read_costs()?;
        self.validate_arm_host_factors()?;
        self.validate_post_wait_scale()
    }

    /// The profile-wide costs: durations in range, a host speed above 0.
    fn validate_costs(&self) -> Result<()> {
        for (field, v) in [
            ("op_us", self.op_us.value),
            ("kernel_us", self.kernel_us.value),
            ("read_us", self.read_us.value),
            ("graph_launch_us", self.graph_launch_us.value),
            ("upload_us", self.upload_us.value),
        ] {
            check_us(field, v)?;
        }
        if let Some(post_wait) = &self.post_wait {
            post_wait.value.check_well_formed()?;
        }
        if let Some(speed) = &self.host_speed_us {
            check_us("host_speed_us", speed.value)?;
            ensure!(
                speed.value > 0.0,
                "host_speed_us = 0 is no host speed: give the µs per op it was measured at"
            );
        }
        Ok(())
    }

    /// A prep for every family a step of the profile prepares, each arm's counts consistent.
    fn validate_preps(&self) -> Result<()> {
        let mut families = Drafter::Dspark.families().to_vec();
        if self.eagle_program.is_some() {
            families.extend(Drafter::Eagle.families());
        }
        families.sort();
        families.dedup();
        for family in families {
            let prep = self.preps.get(family.name()).with_context(|| {
                format!(
                    "`preps` has no entry for {}, which a step prepares",
                    family.name()
                )
            })?;
            for (arm, ops) in [
                ("eager_sync", prep.eager_sync),
                ("eager_device", prep.eager_device),
                ("graph", prep.graph),
                ("graph_upload", prep.graph_upload.unwrap_or_default()),
            ] {
                let at = format!("preps.{}.{arm}", family.name());
                ensure!(ops.launches <= ops.ops, "{at}: more launches than ops");
                ensure!(
                    ops.ops_before_read <= ops.ops,
                    "{at}: ops_before_read is more than ops"
                );
                if let Some(v) = ops.op_us {
                    check_us(&format!("{at}.op_us"), v)?;
                }
                ensure!(
                    arm == "eager_sync" || ops.reads == 0,
                    "{at}: only eager_sync reads"
                );
            }
            if let Some(v) = prep.kernel_us {
                check_us(&format!("preps.{}.kernel_us", family.name()), v)?;
            }
            if let Some(by_batch) = &prep.kernel_us_by_batch {
                check_by_batch(
                    &format!("preps.{}.kernel_us_by_batch", family.name()),
                    by_batch,
                )?;
            }
            ensure!(
                prep.eager_sync.reads >= 1,
                "preps.{}.eager_sync: the eager-sync arm reads at least once",
                family.name()
            );
        }
        Ok(())
    }

    /// Each program's GPU items once and in order, `draft_passes` groups holding only what a
    /// pass runs, and every host item's cost in range.
    fn validate_programs(&self) -> Result<()> {
        check_gpu_order(&self.program, &GPU_ITEMS_IN_ORDER, "program")?;
        let mut hosts: Vec<&Item> = self.program.iter().collect();
        if let Some(eagle) = &self.eagle_program {
            for item in eagle {
                match item {
                    Item::DraftPasses { items } => {
                        if let Some(bad) = items.iter().find(|i| {
                            !matches!(i, Item::Host { .. } | Item::DecodePrep | Item::DraftForward)
                        }) {
                            bail!(
                                "`eagle_program`: a `draft_passes` group holds host items, \
                                 decode preps and draft forwards only, not `{}`",
                                bad.label()
                            );
                        }
                        hosts.extend(items);
                    }
                    Item::DecodePrep | Item::DraftForward => bail!(
                        "`eagle_program`: a `{}` belongs inside a `draft_passes` group",
                        item.label()
                    ),
                    other => hosts.push(other),
                }
            }
            check_gpu_order(
                &expand_passes(eagle, 1),
                &EAGLE_GPU_ITEMS_IN_ORDER,
                "eagle_program",
            )?;
        }
        for item in hosts {
            if let Item::Host {
                name,
                us,
                us_by_batch,
                ops,
                launches,
                ..
            } = item
            {
                check_us(&format!("host item `{name}`: us"), *us)?;
                if let Some(by_batch) = us_by_batch {
                    check_by_batch(&format!("host item `{name}`: us_by_batch"), by_batch)?;
                }
                ensure!(
                    launches.unwrap_or(0) <= *ops,
                    "host item `{name}`: more launches than ops"
                );
            }
        }
        Ok(())
    }

    /// The other read paths' costs, where given, in range.
    fn validate_read_costs(&self) -> Result<()> {
        for path in [ReadPath::Pinned, ReadPath::Mapped] {
            if let Some(cost) = self.read_cost(path) {
                check_us(&read_field(path), cost.value)?;
            }
        }
        Ok(())
    }

    /// A fitted post-wait scale scales a table, and is a factor a host could differ by.
    fn validate_post_wait_scale(&self) -> Result<()> {
        let Some(scale) = &self.post_wait_scale else {
            return Ok(());
        };
        let v = scale.value;
        ensure!(
            self.post_wait.is_some(),
            "post_wait_scale without a post_wait table: remove it, or calibrate the table again"
        );
        ensure!(
            v.is_finite() && v > 0.0 && v <= 100.0,
            "post_wait_scale = {v}: a scale is above 0 and at most 100; refit it with \
             validate --fit-post-wait or remove it"
        );
        Ok(())
    }

    /// Each arm host factor names an arm and is a factor a host could differ by.
    fn validate_arm_host_factors(&self) -> Result<()> {
        for (name, factor) in self.arm_host_factors.iter().flatten() {
            name.parse::<Arm>()
                .map_err(|e| anyhow::anyhow!("arm_host_factors: {e}"))?;
            let v = factor.value;
            ensure!(
                v.is_finite() && v > 0.0 && v <= 100.0,
                "arm_host_factors.{name} = {v}: a host factor is above 0 and at most 100 \
                 (1 runs the arm at the profile's costs); refit it with validate --fit or \
                 remove the entry"
            );
        }
        Ok(())
    }
}

/// A batch size → µs map: not empty, batch sizes from 1, every value a duration.
fn check_by_batch(at: &str, by_batch: &BTreeMap<u32, f64>) -> Result<()> {
    ensure!(!by_batch.is_empty(), "{at}: give at least one batch size");
    ensure!(!by_batch.contains_key(&0), "{at}: batch sizes start at 1");
    for (bs, &v) in by_batch {
        check_us(&format!("{at}.{bs}"), v)?;
    }
    Ok(())
}
