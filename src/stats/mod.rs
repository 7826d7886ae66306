//! Statistics that need no GPU: summaries and intervals of samples, rounds and paired
//! estimates, the stopping rules, and the seeded generator.

pub mod paired;
pub mod rng;
pub mod rounds;
pub mod stopping;
pub mod summary;
