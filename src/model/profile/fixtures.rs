//! Test fixtures of the model profiles: the large target, a small dense model, a link.

use super::{Link, Profile};

pub(super) fn link(gb_s: f64, latency_us: f64) -> Link {
    Link { gb_s, latency_us }
}

pub(super) fn large() -> Profile {
    Profile::named("moe-large").unwrap()
}

pub(super) fn dense() -> Profile {
    Profile::custom(1_000_000, 4, 100, 4096).unwrap()
}
