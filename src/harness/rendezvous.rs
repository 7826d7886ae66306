//! How ranks of one world meet: rank 0 publishes a small text (the NCCL unique id) as a file
//! in the run directory, written atomically, and the other ranks wait for it to appear.

use crate::results::atomic::write_atomic;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// Writes `text` to `path` at once (temp file + rename): a reader sees all of it or nothing.
pub fn publish(path: &Path, text: &str) -> Result<()> {
    write_atomic(path, text.as_bytes())
}

/// Waits up to `timeout` for `path` to appear and returns its text.
pub fn await_published(path: &Path, timeout: Duration) -> Result<String> {
    let start = Instant::now();
    loop {
        match std::fs::read_to_string(path) {
            Ok(text) => return Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        }
        if start.elapsed() > timeout {
            bail!(
                "{} did not appear within {:.0} s: rank 0 never published it (did it fail?)",
                path.display(),
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_rank_gets_what_rank_0_publishes_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nccl-id");
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                publish(&path, "abc123").unwrap();
            })
        };
        let got = await_published(&path, Duration::from_secs(10)).unwrap();
        writer.join().unwrap();
        assert_eq!(got, "abc123");
    }

    #[test]
    fn waiting_too_long_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("never");
        let e = await_published(&path, Duration::from_millis(50)).unwrap_err();
        assert!(e.to_string().contains("never"), "{e}");
    }
}
