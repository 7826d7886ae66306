//! The metaprep command line.

use metaprep::cli;
use metaprep::gpu::probe::EXIT_NO_GPU;
use metaprep::gpu::GpuUnavailable;
use metaprep::model::memory::NotDeployable;
use metaprep::report::compare::EXIT_BAD_INPUT;
use metaprep::results::BadInput;
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
            if e.downcast_ref::<GpuUnavailable>().is_some() {
                ExitCode::from(EXIT_NO_GPU)
            } else if e.downcast_ref::<NotDeployable>().is_some()
                || e.downcast_ref::<BadInput>().is_some()
            {
                // Known only once the memory per GPU is, or the settings a run resolves,
                // which may take opening the device.
                ExitCode::from(EXIT_BAD_INPUT)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
