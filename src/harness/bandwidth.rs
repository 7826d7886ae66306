//! Bandwidth rows: a prep cell's bytes ([`crate::prep::bytes`]) and the GB/s they make over
//! its device time, and the same GB/s for the floor's device-to-device copy, the ceiling
//! preps are read against. Both count bytes read plus bytes written.

use super::nvml::CellTelemetry;
use super::rows::CellId;
use crate::results::csv::Row;
use crate::stats::summary::Estimate;

/// GB/s of `bytes` moved in `us` µs.
pub fn gb_per_s(bytes: u64, us: f64) -> f64 {
    bytes as f64 / us / 1e3
}

/// `gb_s` (unit `GB/s`) of a cell that moves `bytes` per step, from its per-step times in
/// rounds: each sample becomes the bandwidth of its steps, inside its round, and the rounds
/// are summarised as any measured metric ([`CellId::rounds_row`]).
pub fn gb_s_row(
    cell: &CellId,
    bytes: u64,
    rounds_us: &[Vec<f64>],
    stop: &str,
    telemetry: Option<&CellTelemetry>,
    processes: &[u32],
) -> Option<Row> {
    let rounds: Vec<Vec<f64>> = rounds_us
        .iter()
        .map(|round| round.iter().map(|&us| gb_per_s(bytes, us)).collect())
        .collect();
    cell.rounds_row("gb_s", "GB/s", &rounds, stop, telemetry, processes)
}

/// `bytes` (unit `B`) of a prep cell: computed from its shape and lengths, not measured, so
/// its interval is the value itself; `rounds` are those of the rows beside it.
pub fn bytes_row(cell: &CellId, bytes: u64, rounds: usize) -> Row {
    let exact = bytes as f64;
    let estimate = Estimate {
        point: exact,
        lo: exact,
        hi: exact,
    };
    Row {
        rounds: rounds as u32,
        ..cell.estimate_row("bytes", "B", &estimate, 0, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::{CellKey, KIND_PREP};

    fn cell() -> CellId {
        CellId {
            key: CellKey::new(KIND_PREP, "dsa_target_verify", "fused", (256, 8), "tp1"),
            emulated: false,
        }
    }

    #[test]
    fn gb_s_is_formed_per_sample_and_summarised_over_rounds() {
        // 40 MB in 10, 20 and 40 µs: 4000, 2000 and 1000 GB/s.
        assert_eq!(gb_per_s(40_000_000, 10.0), 4000.0);
        let rounds: Vec<Vec<f64>> = [10.0, 20.0, 10.0, 40.0, 20.0, 10.0]
            .iter()
            .map(|&us| vec![us, us, us])
            .collect();
        let row = gb_s_row(&cell(), 40_000_000, &rounds, "precision", None, &[]).unwrap();
        assert_eq!((row.metric.as_str(), row.unit.as_str()), ("gb_s", "GB/s"));
        // Round medians 4000, 2000, 4000, 1000, 2000, 4000: median 3000, interval their range.
        assert_eq!((row.median, row.ci_lo, row.ci_hi), (3000.0, 1000.0, 4000.0));
        assert_eq!((row.rounds, row.samples), (6, 18));
        assert!(gb_s_row(&cell(), 1, &[], "precision", None, &[]).is_none());
    }

    #[test]
    fn the_bytes_row_is_exact() {
        let row = bytes_row(&cell(), 42_000_000, 6);
        assert_eq!((row.metric.as_str(), row.unit.as_str()), ("bytes", "B"));
        assert_eq!((row.median, row.ci_lo, row.ci_hi), (42e6, 42e6, 42e6));
        assert_eq!((row.rounds, row.stop_reason.as_str()), (6, "derived"));
    }
}
