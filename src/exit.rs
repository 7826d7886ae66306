//! The one map from how a command ended to the process's exit status (the README's table):
//! 0 ok; 1 `compare` found a regression, `validate` a failed cell or an unconverged fit,
//! `check` a wrong cell, or a command failed while running; 2 a bad flag or bad input; 3 no
//! GPU, driver or NVRTC (or a missing CUPTI or NCCL a flag asked for). Every command returns
//! an [`Exit`] or an error, and [`Exit::of_error`] says which status an error ends the
//! process with: by the two error kinds defined here, which the layers that find such a
//! problem raise. On the ground floor (ARCHITECTURE.md): it imports nothing of the crate,
//! so `cli/` and `report/` may use it without importing upwards.

use std::fmt;
use std::process::ExitCode;

/// Input the user must fix, found once a command is under way (a `--resume` whose resolved
/// settings differ from the run's, known only once the GPU is open; a deployment that does
/// not fit the GPU): it exits 2 like a bad flag, not 1 like a failure while running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// No CUDA driver, no NVRTC, no device, or a GPU library the command needs (CUPTI, NCCL)
/// missing: the command needs a GPU host that has it; it exits 3 ([`Exit::NoGpu`]), distinct
/// from a bad flag (2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuUnavailable(pub String);

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GpuUnavailable {}

/// How a command ended, as a script reading its status tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done, nothing found wrong.
    Ok,
    /// A regression, a failed or wrong cell, or a command that failed while running.
    Failure,
    /// A bad flag (clap's usage errors exit 2 too), an unreadable run, an unusable path,
    /// mismatched settings, a deployment that does not fit the GPU.
    BadInput,
    /// No GPU, driver or NVRTC, or a missing CUPTI or NCCL a flag asked for.
    NoGpu,
}

impl Exit {
    /// The process's exit status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::BadInput => 2,
            Exit::NoGpu => 3,
        }
    }

    /// [`Exit::Failure`] when `failed`, else [`Exit::Ok`].
    pub const fn failed_if(failed: bool) -> Exit {
        if failed {
            Exit::Failure
        } else {
            Exit::Ok
        }
    }

    /// The status an error ends a command with: [`Exit::NoGpu`] for a [`GpuUnavailable`],
    /// [`Exit::BadInput`] for a [`BadInput`] (such as a cell the GPU cannot hold, known only
    /// once the memory per GPU is, or the settings a run resolves, which may take opening the
    /// device), else [`Exit::Failure`].
    pub fn of_error(e: &anyhow::Error) -> Exit {
        if e.downcast_ref::<GpuUnavailable>().is_some() {
            Exit::NoGpu
        } else if e.downcast_ref::<BadInput>().is_some() {
            Exit::BadInput
        } else {
            Exit::Failure
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_the_readmes() {
        let codes: Vec<u8> = [Exit::Ok, Exit::Failure, Exit::BadInput, Exit::NoGpu]
            .into_iter()
            .map(Exit::code)
            .collect();
        assert_eq!(codes, [0, 1, 2, 3]);
        assert_eq!(Exit::failed_if(true), Exit::Failure);
        assert_eq!(Exit::failed_if(false), Exit::Ok);
    }

    #[test]
    fn errors_map_by_their_kind_wherever_they_sit_in_the_chain() {
        let no_gpu = anyhow::Error::new(GpuUnavailable("no driver".into()));
        assert_eq!(Exit::of_error(&no_gpu), Exit::NoGpu);
        let bad = anyhow::Error::new(BadInput("cannot resume".into())).context("opening");
        assert_eq!(Exit::of_error(&bad), Exit::BadInput);
        let failed = anyhow::anyhow!("a launch failed");
        assert_eq!(Exit::of_error(&failed), Exit::Failure);
    }
}
