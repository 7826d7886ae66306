//! The metaprep command line.

#![deny(unsafe_code)]

use metaprep::cli;
use metaprep::exit::Exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    metaprep::gpu::os::process::die_on_closed_pipe();
    let cli = cli::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            metaprep::exit::print_error(&e);
            Exit::of_error(&e).into()
        }
    }
}
