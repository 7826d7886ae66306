//! How device lengths reach the host in the arms that read them: the three read paths
//! (`docs/read-paths.md` has what each costs and why).

use std::ffi::CStr;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadPath {
    /// A device-to-host copy into pageable memory, then a stream synchronise: what
    /// `seq_lens.tolist()` does (eager-sync).
    Pageable,
    /// An asynchronous copy into pinned memory, then a wait on an event recorded after it:
    /// `x.to("cpu", non_blocking=True)` and `event.synchronize()` (eager-pinned).
    Pinned,
    /// A one-block kernel stores the lengths and a sequence number into mapped pinned host
    /// memory; the host polls the number until it is the one it expects (eager-mapped).
    Mapped,
}

impl ReadPath {
    pub const ALL: [ReadPath; 3] = [ReadPath::Pageable, ReadPath::Pinned, ReadPath::Mapped];

    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Pageable => "pageable",
            ReadPath::Pinned => "pinned",
            ReadPath::Mapped => "mapped",
        }
    }

    /// The read as an engine writes it: the NVTX range around it and its name in traces.
    pub fn range(self) -> &'static CStr {
        match self {
            ReadPath::Pageable => c"seq_lens.tolist()",
            ReadPath::Pinned => c"seq_lens.to('cpu', non_blocking=True); event.synchronize()",
            ReadPath::Mapped => c"seq_lens -> mapped host memory; poll the flag",
        }
    }

    /// Position in [`ReadPath::ALL`], for per-path tables.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ReadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_has_its_own_index_and_range() {
        for (i, path) in ReadPath::ALL.into_iter().enumerate() {
            assert_eq!(path.index(), i);
        }
        assert_eq!(ReadPath::Pageable.range(), c"seq_lens.tolist()");
        assert_ne!(ReadPath::Pinned.range(), ReadPath::Mapped.range());
    }
}
