//! Rows for unit tests across the report modules.

use super::Row;

/// A converged, unthrottled row with a ±1% interval around `median`; measured in six
/// rounds unless it is a `step` row (steps has no rounds).
pub fn row(kind: &str, family: &str, arm: &str, bs: u32, metric: &str, median: f64) -> Row {
    let unit = match metric {
        "throughput_tok_s" => "tok/s",
        "occupancy" => "ratio",
        "floor_multiple" => "x",
        "gb_s" => "GB/s",
        "bytes" => "B",
        _ => "us",
    };
    Row {
        kind: kind.into(),
        family: family.into(),
        arm: arm.into(),
        batch_size: bs,
        block_size: 5,
        layout: "tp1".into(),
        emulated: false,
        metric: metric.into(),
        unit: unit.into(),
        median,
        p10: median * 0.97,
        p90: median * 1.05,
        ci_lo: median * 0.99,
        ci_hi: median * 1.01,
        samples: 500,
        rounds: if kind == super::KIND_STEP { 0 } else { 6 },
        stop_reason: "ci".into(),
        throttled: false,
        clock_event_reasons: "0x0000000000000000".into(),
        sm_clock_mhz: Some(1980.0),
        mem_clock_mhz: Some(3201.0),
        power_w: Some(412.5),
        temp_c: Some(48.0),
        gpu_util_pct: None,
        gpm_sm_util_pct: None,
        gpm_dram_bw_util_pct: None,
        gpm_nvlink_rx_mib_s: None,
        gpm_nvlink_tx_mib_s: None,
        gpm_cell_share_pct: None,
        host_scale: None,
    }
}
