//! `metaprep ab`: BASE against NEW, interleaved in time and tested in pairs.
//!
//! Each side runs as one long-lived worker process (`metaprep ab-worker`, of its own build)
//! holding its GPU context, inputs and graphs; the coordinator asks one side at a time for a
//! short burst of one cell, so the two sides of a pair run back to back, in the same state of
//! the host ([`schedule`], [`sides`]). Each pair's `ln(NEW / BASE)` goes into a Hodges–Lehmann
//! change with a Wilcoxon interval, and a row is called only where its whole interval lies
//! beyond its class's margin ([`verdict`]).

pub mod protocol;
pub mod report;
pub mod run;
pub mod schedule;
pub mod sides;
pub mod steps_worker;
pub mod verdict;
pub mod worker;
