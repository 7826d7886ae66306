//! Turning measurements into tidy CSV rows.

use super::nvml::{reasons_hex, CellTelemetry};
use crate::results::csv::{CellKey, Row};
use crate::stats::rounds::{over_rounds, paired, round_medians};
use crate::stats::summary::{summarize, Estimate, Summary};

/// A round's median of one cell's metric: what `rounds.csv` holds, so the spread between
/// rounds behind a row's interval (and the order it drifted in, and in which process) can be
/// read and re-analysed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RoundLine {
    pub cell: CellKey,
    pub metric: String,
    pub round: u32,
    pub median: f64,
    pub samples: u64,
    /// The worker process that measured the round, from 1 (`sweep --processes`); 0 for a
    /// round measured in the sweep's own process.
    pub process: u32,
}

/// A cell as the harness measures it: its key, which every row of it carries, and whether its
/// layout ran emulated (more ranks than the run had GPUs, [`Row::emulated`]).
#[derive(Debug, Clone)]
pub struct CellId {
    pub key: CellKey,
    pub emulated: bool,
}

impl CellId {
    /// `kind family/arm bs block layout` (the cell key's own form): the label NVML samples
    /// are tagged with.
    pub fn label(&self) -> String {
        self.key.to_string()
    }

    fn base(&self, metric: &str, unit: &str, telemetry: Option<&CellTelemetry>) -> Row {
        let t = telemetry.cloned().unwrap_or_default();
        let gpm = t.gpm.clone().map(|g| g.values).unwrap_or_default();
        let key = self.key.clone();
        Row {
            kind: key.kind,
            family: key.family,
            arm: key.arm,
            batch_size: key.batch_size,
            block_size: key.block_size,
            layout: key.layout,
            host_scale: key.host_scale,
            emulated: self.emulated,
            metric: metric.into(),
            unit: unit.into(),
            median: f64::NAN,
            p10: f64::NAN,
            p90: f64::NAN,
            ci_lo: f64::NAN,
            ci_hi: f64::NAN,
            samples: 0,
            rounds: 0,
            stop_reason: String::new(),
            throttled: t.throttled,
            clock_event_reasons: t.reasons_or.map(reasons_hex).unwrap_or_default(),
            sm_clock_mhz: t.sm_clock_mhz,
            mem_clock_mhz: t.mem_clock_mhz,
            power_w: t.power_w,
            temp_c: t.temp_c,
            gpu_util_pct: t.gpu_util_pct,
            gpm_sm_util_pct: gpm.sm_util_pct,
            gpm_dram_bw_util_pct: gpm.dram_bw_util_pct,
            gpm_nvlink_rx_mib_s: gpm.nvlink_rx_mib_s,
            gpm_nvlink_tx_mib_s: gpm.nvlink_tx_mib_s,
            gpm_cell_share_pct: t.gpm.as_ref().map(|g| g.cell_share_pct),
        }
    }

    /// A measured metric: median, p10/p90 and the median's 95% CI over the samples.
    /// `None` when there is no finite sample.
    pub fn summary_row(
        &self,
        metric: &str,
        unit: &str,
        samples: &[f64],
        stop: &str,
        telemetry: Option<&CellTelemetry>,
    ) -> Option<Row> {
        let s = summarize(samples)?;
        Some(self.row_of(metric, unit, &s, stop, telemetry))
    }

    fn row_of(
        &self,
        metric: &str,
        unit: &str,
        s: &Summary,
        stop: &str,
        telemetry: Option<&CellTelemetry>,
    ) -> Row {
        Row {
            median: s.median,
            p10: s.p10,
            p90: s.p90,
            ci_lo: s.ci_lo,
            ci_hi: s.ci_hi,
            samples: s.samples as u64,
            stop_reason: stop.into(),
            ..self.base(metric, unit, telemetry)
        }
    }

    /// A metric measured in rounds: the median of the rounds' medians with its interval
    /// between rounds (see [`crate::stats::rounds`]). `None` when there is no finite sample.
    pub fn rounds_row(
        &self,
        metric: &str,
        unit: &str,
        rounds: &[Vec<f64>],
        stop: &str,
        telemetry: Option<&CellTelemetry>,
        processes: &[u32],
    ) -> Option<Row> {
        let s = over_rounds(rounds, processes)?;
        Some(Row {
            rounds: round_medians(rounds).len() as u32,
            ..self.row_of(metric, unit, &s, stop, telemetry)
        })
    }

    /// A derived metric of two cells measured in rounds, `stat(a's round median, b's)` formed
    /// inside each round and summarised over rounds (see [`crate::stats::rounds::paired`]); its
    /// sample count is the smaller side's. `None` when no round has both.
    pub fn paired_row(
        &self,
        metric: &str,
        unit: &str,
        (a, b): (&[Vec<f64>], &[Vec<f64>]),
        stat: impl Fn(f64, f64) -> f64,
        telemetry: Option<&CellTelemetry>,
        processes: &[u32],
    ) -> Option<Row> {
        let p = paired(a, b, stat, processes)?;
        let finite =
            |rounds: &[Vec<f64>]| rounds.iter().flatten().filter(|v| v.is_finite()).count() as u64;
        Some(Row {
            rounds: p.rounds as u32,
            ..self.estimate_row(
                metric,
                unit,
                &p.estimate,
                finite(a).min(finite(b)),
                telemetry,
            )
        })
    }

    /// One line of `rounds.csv` per round of a metric measured in rounds: the round's median
    /// and its finite sample count (empty rounds left out), numbered from 1, with the process
    /// that measured it (`processes[index]`, 0 where not given).
    pub fn round_lines(
        &self,
        metric: &str,
        rounds: &[Vec<f64>],
        processes: &[u32],
    ) -> Vec<RoundLine> {
        rounds
            .iter()
            .enumerate()
            .filter_map(|(index, samples)| {
                let s = summarize(samples)?;
                Some(RoundLine {
                    cell: self.key.clone(),
                    metric: metric.to_string(),
                    round: index as u32 + 1,
                    median: s.median,
                    samples: s.samples as u64,
                    process: processes.get(index).copied().unwrap_or(0),
                })
            })
            .collect()
    }

    /// A derived metric (a difference or ratio): the point and its interval; p10 and p90 are
    /// not defined for it and stay NaN.
    pub fn estimate_row(
        &self,
        metric: &str,
        unit: &str,
        estimate: &Estimate,
        samples: u64,
        telemetry: Option<&CellTelemetry>,
    ) -> Row {
        Row {
            median: estimate.point,
            ci_lo: estimate.lo,
            ci_hi: estimate.hi,
            samples,
            stop_reason: "derived".into(),
            ..self.base(metric, unit, telemetry)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell() -> CellId {
        CellId {
            key: CellKey::new("prep", "dsa_decode", "graph", (8, 5), "tp8"),
            emulated: true,
        }
    }

    #[test]
    fn round_lines_give_each_non_empty_rounds_median_and_samples() {
        let rounds = vec![vec![3.0, 1.0, 2.0], vec![], vec![f64::NAN, 4.0]];
        let lines = cell().round_lines("step_us", &rounds, &[1, 1, 2]);
        // The empty round is left out; the others keep their numbers and processes.
        assert_eq!(
            lines
                .iter()
                .map(|l| (l.round, l.median, l.samples, l.process))
                .collect::<Vec<_>>(),
            [(1, 2.0, 3, 1), (3, 4.0, 1, 2)]
        );
        assert!(cell()
            .round_lines("step_us", &rounds, &[])
            .iter()
            .all(|l| l.process == 0));
    }

    #[test]
    fn summary_rows_carry_statistics_and_telemetry() {
        let telemetry = CellTelemetry {
            sm_clock_mhz: Some(1980.0),
            reasons_or: Some(0x4),
            throttled: true,
            readings: 3,
            ..Default::default()
        };
        let samples: Vec<f64> = (1..=11).map(f64::from).collect();
        let row = cell()
            .summary_row("step_us", "us", &samples, "ci", Some(&telemetry))
            .unwrap();
        assert_eq!(
            (row.median, row.samples, row.stop_reason.as_str()),
            (6.0, 11, "ci")
        );
        assert!(row.ci_lo <= 6.0 && row.ci_hi >= 6.0 && row.p10 < row.p90);
        assert_eq!(
            (
                row.throttled,
                row.clock_event_reasons.as_str(),
                row.sm_clock_mhz
            ),
            (true, "0x0000000000000004", Some(1980.0))
        );
        assert!(row.emulated && row.layout == "tp8");
        assert!(cell()
            .summary_row("step_us", "us", &[], "ci", None)
            .is_none());
        let plain = cell()
            .summary_row("step_us", "us", &[1.0], "ci", None)
            .unwrap();
        assert_eq!(
            (plain.clock_event_reasons.as_str(), plain.power_w),
            ("", None),
            "no NVML: empty columns"
        );
        assert_eq!(
            (plain.gpm_sm_util_pct, plain.gpm_cell_share_pct),
            (None, None)
        );
    }

    #[test]
    fn rows_carry_the_cells_gpm() {
        use crate::harness::gpm::{CellGpm, GpmValues};
        let telemetry = CellTelemetry {
            gpm: Some(CellGpm {
                values: GpmValues {
                    sm_util_pct: Some(91.0),
                    dram_bw_util_pct: Some(37.5),
                    nvlink_rx_mib_s: Some(0.0),
                    nvlink_tx_mib_s: None,
                },
                cell_share_pct: 80.0,
            }),
            ..Default::default()
        };
        let row = cell()
            .summary_row("step_us", "us", &[1.0, 2.0], "ci", Some(&telemetry))
            .unwrap();
        assert_eq!(
            (
                row.gpm_sm_util_pct,
                row.gpm_dram_bw_util_pct,
                row.gpm_nvlink_rx_mib_s,
                row.gpm_nvlink_tx_mib_s,
                row.gpm_cell_share_pct
            ),
            (Some(91.0), Some(37.5), Some(0.0), None, Some(80.0))
        );
    }

    #[test]
    fn rounds_rows_count_rounds_and_paired_rows_pair_them() {
        // Eight rounds drifting by ±10%; the second cell is 2 µs cheaper in every round.
        let levels = [20.0, 22.0, 18.0, 21.0, 19.5, 20.5, 22.5, 17.5];
        let a: Vec<Vec<f64>> = levels.iter().map(|&l| vec![l, l + 0.1, l - 0.1]).collect();
        let b: Vec<Vec<f64>> = levels
            .iter()
            .map(|&l| vec![l - 2.0, l - 1.9, l - 2.1, l - 2.0])
            .collect();
        let row = cell()
            .rounds_row("step_us", "us", &a, "precision", None, &[])
            .unwrap();
        assert_eq!((row.rounds, row.samples), (8, 24));
        assert_eq!(row.stop_reason, "precision");
        // Eight round medians: the interval is their whole range, drift included.
        assert_eq!((row.ci_lo, row.ci_hi), (17.5, 22.5));
        let cost = cell()
            .paired_row("read_cost_us", "us", (&a, &b), |x, y| x - y, None, &[])
            .unwrap();
        assert_eq!((cost.rounds, cost.samples), (8, 24));
        assert_eq!(cost.stop_reason, "derived");
        assert!((cost.median - 2.0).abs() < 1e-9, "{}", cost.median);
        assert!(
            cost.ci_hi - cost.ci_lo < 1e-9,
            "drift both cells share cancels"
        );
        assert!(cell()
            .paired_row("read_cost_us", "us", (&a, &[]), |x, y| x - y, None, &[])
            .is_none());
    }

    #[test]
    fn estimate_rows_are_marked_derived() {
        let row = cell().estimate_row(
            "read_cost_us",
            "us",
            &Estimate {
                point: 18.0,
                lo: 17.5,
                hi: 18.4,
            },
            40,
            None,
        );
        assert_eq!(
            (row.median, row.ci_lo, row.ci_hi, row.stop_reason.as_str()),
            (18.0, 17.5, 18.4, "derived")
        );
        assert!(row.p10.is_nan() && row.p90.is_nan());
        assert_eq!(cell().label(), "prep dsa_decode/graph bs=8 block=5 tp8");
        assert_eq!(cell().key, row.cell_key(), "rows of a cell share its key");
    }

    #[test]
    fn a_cells_rows_and_round_lines_read_back_under_the_key_the_harness_gave_it() {
        use crate::harness::rounds_file::RoundsFile;
        use crate::results::csv::{read_rows, write_rows, STEP_FAMILY};
        use crate::results::run_dir::ROUNDS_CSV;
        let scaled = CellId {
            key: CellKey {
                host_scale: Some(2.0),
                ..CellKey::new("step", STEP_FAMILY, "graph", (4, 3), "tp2")
            },
            emulated: false,
        };
        let cells = [cell(), scaled];
        let rows: Vec<Row> = (cells.iter())
            .map(|c| c.summary_row("step_us", "us", &[1.0, 2.0], "ci", None))
            .collect::<Option<_>>()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &rows).unwrap();
        let back = read_rows(&path).unwrap();
        assert_eq!(back.len(), cells.len());
        for (cell, row) in cells.iter().zip(&back) {
            // Every field (Debug shows each, a new one too): keys compare by the cell family.
            assert_eq!(format!("{:?}", row.cell_key()), format!("{:?}", cell.key));
            assert_eq!(row.cell_key(), cell.key);
        }
        // rounds.csv names a cell by its key's columns: a resume keeping the cell keeps every
        // line it wrote.
        let lines = cell().round_lines("step_us", &[vec![1.0], vec![2.0]], &[1, 2]);
        RoundsFile::open(dir.path(), false, &Default::default())
            .unwrap()
            .write(&lines)
            .unwrap();
        let written = std::fs::read_to_string(dir.path().join(ROUNDS_CSV)).unwrap();
        RoundsFile::open(dir.path(), true, &[cell().key].into())
            .unwrap()
            .write(&[])
            .unwrap();
        let resumed = std::fs::read_to_string(dir.path().join(ROUNDS_CSV)).unwrap();
        assert_eq!((resumed.lines().count(), &resumed), (3, &written));
    }
}
