//! Curves against batch size: one panel per layout (or family), one line per arm, a shaded
//! band around each median (its 95% interval for a step's ITL and throughput, whose p10–p90
//! is the accept-length spread and would hide the lines; p10–p90 for a prep's cost), and
//! optional horizontal floor lines. Bands are drawn under every line, and lines that lie on
//! each other stay visible: each arm has its own marker, and earlier arms are drawn wider.
//!
//! `steps` holds the decode-step charts (ITL, throughput, their changes against eager-sync,
//! the host-scale chart) and `preps` the prep charts (cost against the floor, bandwidth
//! against the copy ceiling, read costs and recovery): which rows each chart takes. `panels`
//! turns rows into panels of series, `draw` draws any [`LineChart`](draw::LineChart).

mod draw;
mod panels;
mod preps;
mod steps;

pub use preps::{bandwidth_chart, prep_floor_chart, read_cost_chart, read_recovery_chart};
pub use steps::{host_scale_chart, itl_chart, step_change_chart, throughput_chart};
