//! Run files kept gzipped (`metaprep.csv.gz`, `telemetry.csv.gz`, `trace.json.gz`: the
//! committed archive stores them so), read wherever the plain file is read.

use flate2::read::MultiGzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The suffix of a gzipped file.
pub const GZ: &str = "gz";

/// The two bytes every gzip file begins with.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether a file starting with `start` is gzip's: its bytes decide, not its name (a plain
/// file named `.gz` reads as it is, a renamed gzip file is unzipped).
pub fn is_gzip(start: &[u8]) -> bool {
    start.starts_with(&GZIP_MAGIC)
}

/// The bytes of `path`, decompressed where they are gzip's ([`is_gzip`]): every member of it,
/// as `zcat` reads it (`pigz`, `bgzip` and `cat a.gz b.gz` write several). A corrupt archive,
/// or bytes after its last member that are no gzip member, is an `InvalidData` error naming
/// gzip.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let bytes = std::fs::read(path)?;
    if !is_gzip(&bytes) {
        return Ok(bytes);
    }
    let mut out = Vec::new();
    MultiGzDecoder::new(bytes.as_slice())
        .read_to_end(&mut out)
        .map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not a readable gzip file ({e}); gunzip -t it, or regenerate it"),
            )
        })?;
    Ok(out)
}

/// `dir/name`, or `dir/name.gz` where only that one exists: the file a run's `name` is read
/// from. A missing file is named by its plain name.
pub fn run_file(dir: &Path, name: &str) -> PathBuf {
    let plain = dir.join(name);
    let gzipped = dir.join(format!("{name}.{GZ}"));
    if !plain.exists() && gzipped.exists() {
        gzipped
    } else {
        plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_gzipped_file_reads_as_its_plain_text_and_the_plain_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.csv.gz"), gzip(b"a,b\n1,2\n")).unwrap();
        let found = run_file(dir.path(), "t.csv");
        assert_eq!(found, dir.path().join("t.csv.gz"));
        assert_eq!(read_file(&found).unwrap(), b"a,b\n1,2\n");
        std::fs::write(dir.path().join("t.csv"), b"plain\n").unwrap();
        assert_eq!(run_file(dir.path(), "t.csv"), dir.path().join("t.csv"));
        assert_eq!(
            run_file(dir.path(), "none.csv"),
            dir.path().join("none.csv")
        );
    }

    #[test]
    fn every_member_of_a_gzip_file_is_read_and_trailing_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv.gz");
        let mut members = gzip(b"a,b\n1,2\n");
        members.extend(gzip(b"3,4\n"));
        std::fs::write(&path, &members).unwrap();
        assert_eq!(read_file(&path).unwrap(), b"a,b\n1,2\n3,4\n");
        members.extend(b"not gzip");
        std::fs::write(&path, &members).unwrap();
        let e = read_file(&path).unwrap_err();
        assert!(e.to_string().contains("not a readable gzip file"), "{e}");
    }

    #[test]
    fn a_damaged_gzip_file_is_an_error_that_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv.gz");
        std::fs::write(&path, &gzip(b"a,b\n1,2\n")[..12]).unwrap();
        let e = read_file(&path).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("not a readable gzip file"), "{e}");
    }
}
