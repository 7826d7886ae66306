//! Host profiles the GPU tests of `steps` share.

use metaprep::model::host_profile::{HostProfile, Sourced};

/// The measured `pytorch` profile, given a pinned read cost where it has none: the pageable
/// read's, as a stand-in so every arm runs (these tests check structure, not that figure).
pub fn pytorch_with_every_read_path() -> HostProfile {
    let mut host = HostProfile::load("pytorch").unwrap();
    host.pinned_read_us.get_or_insert_with(|| Sourced {
        value: host.read_us.value,
        source: "test stand-in: the pageable read's read_us".into(),
    });
    host
}
