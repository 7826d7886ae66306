//! The one map from how a command ended to the process's exit status (the README's table):
//! 0 ok; 1 `compare` found a regression, `validate` a failed cell or an unconverged fit,
//! `check` a wrong cell, or a command failed while running; 2 a bad flag or bad input; 3 no
//! GPU, driver or NVRTC (or a missing CUPTI or NCCL a flag asked for). Every command returns
//! an [`Exit`] or an error, and [`Exit::of_error`] says which status an error ends the
//! process with: by the two error kinds defined here, which the layers that find such a
//! problem raise. On the ground floor (ARCHITECTURE.md): it imports nothing of the crate,
//! so `cli/` and `report/` may use it without importing upwards. It also prints: an error on
//! one line ([`print_error`]) and standard output that cannot panic ([`out!`](crate::out)).

use std::fmt;
use std::process::ExitCode;

/// Writes `args` to standard output as `print!` does, but where it cannot be written (a full
/// disk, `/dev/full`) says so and ends the process with [`Exit::Failure`], where `print!`
/// panics. A closed pipe ends the process before this sees it (SIGPIPE's default, restored
/// at start). Through [`out!`](crate::out) and [`outln!`](crate::outln).
#[allow(clippy::print_stdout)]
pub fn print_out(args: fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        eprintln!("metaprep: error: writing to standard output: {e}");
        std::process::exit(Exit::Failure.code().into());
    }
}

/// `message` on one line, as an error is printed: each control character (a newline or an
/// escape from a quoted field of an input file, say) written as its Rust escape, so that a
/// value quoted back can neither split the line nor drive the terminal.
pub fn one_line(message: &str) -> String {
    message
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// The most characters an error prints: a value quoted back from a bad input (a 5 MB CSV
/// field, 10,000 unknown columns) is cut, not echoed whole.
pub const MAX_ERROR_CHARS: usize = 2000;

/// Prints `error` (its whole chain) as every command ends with one: `metaprep: error: ...` on
/// one line of stderr ([`one_line`]), at most [`MAX_ERROR_CHARS`] characters in all.
pub fn print_error(error: &anyhow::Error) {
    eprintln!("{}", error_line(error));
}

/// The line [`print_error`] prints.
pub fn error_line(error: &anyhow::Error) -> String {
    capped(
        &format!("metaprep: error: {}", one_line(&format!("{error:#}"))),
        MAX_ERROR_CHARS,
    )
}

/// `text` cut to at most `most` characters, its end saying how much was left out.
pub fn capped(text: &str, most: usize) -> String {
    let total = text.chars().count();
    if total <= most {
        return text.to_string();
    }
    let note = |cut: usize| format!("… ({cut} more characters)");
    let keep = most.saturating_sub(note(total).chars().count());
    let kept: String = text.chars().take(keep).collect();
    format!("{kept}{}", note(total - keep))
}

/// `print!` that does not panic where standard output cannot be written ([`print_out`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::exit::print_out(format_args!($($arg)*)) };
}

/// `println!` that does not panic where standard output cannot be written ([`print_out`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::exit::print_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::exit::print_out(format_args!("{}\n", format_args!($($arg)*))) };
}

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
    fn an_error_is_cut_to_its_most_characters_saying_so() {
        let huge = anyhow::anyhow!("{}", "x".repeat(5_000_000)).context("reading field 3");
        let line = error_line(&huge);
        assert!(line.chars().count() <= MAX_ERROR_CHARS, "{}", line.len());
        assert!(
            line.starts_with("metaprep: error: reading field 3: xxx"),
            "{}",
            &line[..40]
        );
        assert!(
            line.ends_with("more characters)"),
            "{}",
            &line[line.len() - 40..]
        );
        let wide = anyhow::anyhow!("{}", "é\n".repeat(3000));
        let line = error_line(&wide);
        assert!(line.chars().count() <= MAX_ERROR_CHARS);
        assert!(!line.contains('\n'));
        assert_eq!(
            error_line(&anyhow::anyhow!("short")),
            "metaprep: error: short"
        );
        assert_eq!(capped("abc", 3), "abc");
    }

    #[test]
    fn an_error_is_printed_on_one_line_with_its_control_characters_escaped() {
        let quoted = "r.csv: line 2: unknown arm 'gr\naph\u{1b}[31m' (µs)";
        assert_eq!(
            one_line(quoted),
            "r.csv: line 2: unknown arm 'gr\\naph\\u{1b}[31m' (µs)"
        );
        assert_eq!(one_line("plain: kept as it is"), "plain: kept as it is");
    }

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
