//! The metaprep command line.

use metaprep::cli;
use metaprep::exit::Exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`metaprep compare A B | head`), as Unix tools do,
    // instead of panicking in println!.
    #[cfg(unix)]
    // SAFETY: restores the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = cli::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("metaprep: error: {e:#}");
            Exit::of_error(&e).into()
        }
    }
}
