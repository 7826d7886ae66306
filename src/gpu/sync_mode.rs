//! How the host waits for the GPU when it synchronises: the context's scheduling flag.
//!
//! A host read of device lengths (`seq_lens.tolist()`) ends in a synchronise, so this flag is
//! part of what the read costs. With `auto` (what PyTorch and most engines leave it at) the
//! driver picks; `spin` busy-waits, `yield` yields the CPU between polls, `blocking` sleeps
//! until the GPU interrupts. It does not remove the steps a read queued behind running GPU
//! work completes in: those are the copy engine's (docs/sync-modes.md).

use anyhow::{ensure, Context, Result};
use clap::ValueEnum;
use cudarc::driver::{result, sys, CudaContext};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The first driver with cuCtxSetFlags (CUDA 12.1, as cuDriverGetVersion writes it).
const SET_FLAGS_DRIVER: i32 = 12010;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// The driver's choice (CU_CTX_SCHED_AUTO).
    #[default]
    Auto,
    /// Busy-wait (CU_CTX_SCHED_SPIN).
    Spin,
    /// Yield the thread between polls (CU_CTX_SCHED_YIELD).
    Yield,
    /// Sleep until the GPU signals (CU_CTX_SCHED_BLOCKING_SYNC).
    Blocking,
}

impl SyncMode {
    fn flag(self) -> sys::CUctx_flags {
        match self {
            SyncMode::Auto => sys::CUctx_flags::CU_CTX_SCHED_AUTO,
            SyncMode::Spin => sys::CUctx_flags::CU_CTX_SCHED_SPIN,
            SyncMode::Yield => sys::CUctx_flags::CU_CTX_SCHED_YIELD,
            SyncMode::Blocking => sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC,
        }
    }

    /// The mode a context's flags hold (their scheduling bits); `None` for bits no mode has.
    pub fn of_flags(flags: u32) -> Option<SyncMode> {
        let sched = flags & sys::CUctx_flags::CU_CTX_SCHED_MASK as u32;
        SyncMode::value_variants()
            .iter()
            .copied()
            .find(|m| m.flag() as u32 == sched)
    }

    /// Sets the mode on `ctx` (made current on this thread; a driver of CUDA `driver`, as
    /// cuDriverGetVersion gives it) and reads it back: a context that does not take it is an
    /// error, not a run in another mode. `auto` leaves the context as the driver made it
    /// (its flags may name the policy the driver chose, so they are not checked), which is
    /// what a process that never asks gets; a process runs in one mode.
    pub fn apply(self, ctx: &CudaContext, driver: i32) -> Result<()> {
        if self == SyncMode::Auto {
            return Ok(());
        }
        self.settable_on(driver)?;
        ctx.bind_to_thread()
            .context("making the context current to set its synchronisation")?;
        result::ctx::set_flags(self.flag())
            .with_context(|| format!("setting the context's synchronisation to {self}"))?;
        let now = current_mode()?;
        ensure!(
            now == Some(self),
            "the context's synchronisation is {now:?} after asking for {self}"
        );
        Ok(())
    }

    /// Whether a driver of CUDA `driver` has cuCtxSetFlags to set this mode with.
    fn settable_on(self, driver: i32) -> Result<()> {
        ensure!(
            driver >= SET_FLAGS_DRIVER,
            "--sync {self} needs a driver of CUDA 12.1 or newer (cuCtxSetFlags); this one is \
             CUDA {}.{}: update the driver or leave --sync at auto",
            driver / 1000,
            (driver % 1000) / 10
        );
        Ok(())
    }
}

/// The calling thread's current context's mode.
fn current_mode() -> Result<Option<SyncMode>> {
    let mut flags = 0u32;
    // SAFETY: cuCtxGetFlags writes one unsigned int for the current context.
    unsafe { sys::cuCtxGetFlags(&mut flags) }
        .result()
        .context("reading the context's flags")?;
    Ok(SyncMode::of_flags(flags))
}

/// The flag's value as `--sync` takes it.
impl fmt::Display for SyncMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_possible_value() {
            Some(value) => f.write_str(value.get_name()),
            None => write!(f, "{self:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_is_its_own_scheduling_flag_and_reads_back_from_flags() {
        for mode in SyncMode::value_variants() {
            assert_eq!(SyncMode::of_flags(mode.flag() as u32), Some(*mode));
            // Other context flags beside the scheduling bits do not change the reading.
            let map_host = sys::CUctx_flags::CU_CTX_MAP_HOST as u32;
            assert_eq!(
                SyncMode::of_flags(mode.flag() as u32 | map_host),
                Some(*mode)
            );
            // The CLI value and the display name agree.
            let value = mode.to_possible_value().unwrap();
            assert_eq!(value.get_name(), mode.to_string());
        }
        assert_eq!(SyncMode::of_flags(3), None, "spin | yield is no mode");
        assert_eq!(SyncMode::default(), SyncMode::Auto);
    }

    #[test]
    fn a_driver_without_cu_ctx_set_flags_is_refused_before_any_driver_call() {
        // Checked before the driver is asked anything, so this runs without a GPU.
        let err = SyncMode::Spin.settable_on(12000).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("--sync spin needs a driver of CUDA 12.1")
                && text.contains("this one is CUDA 12.0")
                && text.contains("leave --sync at auto"),
            "{text}"
        );
    }
}
