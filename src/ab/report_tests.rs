use super::*;
use crate::ab::protocol::CellName;
use crate::ab::verdict::Pacing;

fn row(family: &str, arm: &str, bs: u32, metric: &str, pct: f64, call: Call) -> ChangeRow {
    ChangeRow {
        cell: CellName {
            family: family.into(),
            arm: arm.into(),
            batch_size: bs,
            block: 5,
            layout: "tp1".into(),
        },
        metric: metric.into(),
        pacing: Pacing::Host,
        base: 20.0,
        new: 20.0 * (1.0 + pct / 100.0),
        pairs: 16,
        processes: 8,
        change: Some(PctChange {
            pct,
            lo_pct: pct - 1.0,
            hi_pct: pct + 1.0,
        }),
        margin_pct: 5.0,
        detectable_pct: Some(6.0),
        call,
        fails: call == Call::Slower,
        state_split: None,
    }
}

fn side() -> SideReport {
    SideReport {
        exe: "/bin/metaprep".into(),
        flags: String::new(),
        version: "0.1.0 (git abc)".into(),
        device: "NVIDIA H100 80GB HBM3".into(),
        pinned: "CPU 15".into(),
        planted: None,
    }
}

fn report(rows: Vec<ChangeRow>) -> AbReport {
    let (passed, verdict) = verdict_line(&rows, Margins::DEFAULT);
    AbReport {
        passed,
        verdict,
        base: side(),
        new: side(),
        grid_flags: "--batch-sizes 8".into(),
        cells: 4,
        pairs_per_cell: 16,
        processes: 8,
        redone: 2,
        redo_bound_pct: 35.0,
        margins_pct: Margins {
            host: 5.0,
            gpu: 2.0,
        },
        state_split_at_us: None,
        emulated: Vec::new(),
        seconds: 20.0,
        clocks: Clocks::of(&Err("NVML unavailable here".into())),
        rows,
    }
}

#[test]
fn the_clocks_line_says_the_median_clock_and_any_slowdown() {
    let sample = |mhz: f64, reasons: &str| TelemetrySample {
        t_s: 0.0,
        cell: String::new(),
        sm_clock_mhz: mhz,
        mem_clock_mhz: 2619.0,
        power_w: 130.0,
        temp_c: 40.0,
        gpu_util_pct: 50.0,
        clock_event_reasons: reasons.into(),
    };
    let steady = Clocks::of(&Ok(vec![sample(1980.0, "0x0000000000000000"); 10]));
    assert_eq!((steady.samples, steady.throttled_samples), (10, 0));
    assert!(
        steady
            .line()
            .starts_with("Clocks (NVML, 10 samples): SM 1980 MHz"),
        "{}",
        steady.line()
    );
    assert!(steady
        .line()
        .ends_with("no slowdown among the clock events."));
    // Idle is no slowdown; a power cap is.
    let mut mixed = vec![sample(1980.0, "0x0000000000000001"); 8];
    mixed.extend(vec![sample(1500.0, "0x0000000000000004"); 2]);
    let clocks = Clocks::of(&Ok(mixed));
    assert_eq!(
        (clocks.throttled_samples, clocks.throttle_reasons.len()),
        (2, 1)
    );
    assert!(clocks
        .line()
        .contains("⚠ 2 samples throttled (clock events 0x0000000000000004)"));
    assert!(Clocks::of(&Err("no NVML".into()))
        .line()
        .contains("not read (no NVML)"));
}

#[test]
fn the_summary_leads_with_the_verdict_then_the_rows_called_then_a_table_per_arm() {
    let rows = vec![
        row("dsa_decode", "eager-sync", 8, "step_us", 21.0, Call::Slower),
        row(
            "dsa_decode",
            "eager-sync",
            8,
            "host_issue_us",
            60.0,
            Call::Slower,
        ),
        row("dsa_decode", "graph", 8, "step_us", 0.1, Call::Same),
        row("dsa_decode", "graph", 8, "gpu_prep_us", -8.0, Call::Faster),
    ];
    let r = report(rows);
    assert!(!r.passed);
    let md = markdown(&r);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines[0], "# metaprep ab: BASE → NEW");
    assert!(
        lines[2].starts_with("**FAIL: 2 of 4 rows slower"),
        "{}",
        lines[2]
    );
    assert!(
        lines[2].contains("dsa_decode/eager-sync bs 8 block 5 tp1 step_us +21.0% [+20.0, +22.0]")
    );
    let called = md.find("## Rows called").unwrap();
    let table = md.find("## dsa_decode · eager-sync").unwrap();
    assert!(called < table);
    // The called section holds the faster device time; the arm tables only step_us.
    assert!(md[called..table].contains("gpu_prep_us") && md[called..table].contains("faster"));
    assert!(!md[table..].contains("host_issue_us |"));
    assert!(md.contains("over 8 processes a side"));
    let passed = report(vec![row(
        "dsa_decode",
        "graph",
        8,
        "step_us",
        0.1,
        Call::Same,
    )]);
    assert!(passed.passed && passed.verdict.starts_with("PASS: no row of 1 slower"));
    assert!(markdown(&passed).contains("## Rows called\n\nNone."));
}

#[test]
fn a_default_sweep_grid_stays_under_sixty_thousand_characters() {
    let mut rows = Vec::new();
    for family in [
        "dsa_decode",
        "dsa_target_verify",
        "dsa_draft_extend_v2",
        "dspark_draft_block",
    ] {
        for arm in crate::axes::Arm::ALL {
            for bs in [1, 8, 64, 256] {
                for block in [3, 5, 8] {
                    for metric in ["step_us", "step_fwd_us", "host_issue_us", "gpu_prep_us"] {
                        let mut r = row(family, arm.name(), bs, metric, 0.5, Call::Same);
                        r.cell.block = block;
                        rows.push(r);
                    }
                }
            }
        }
    }
    let md = markdown(&report(rows.clone()));
    assert!(md.chars().count() < 60_000, "{}", md.chars().count());
    // Every row called: still under it, the slower ones listed.
    for (i, r) in rows.iter_mut().enumerate() {
        r.call = if i % 2 == 0 {
            Call::Faster
        } else {
            Call::Slower
        };
        r.fails = r.call == Call::Slower;
    }
    let md = markdown(&report(rows));
    assert!(md.chars().count() < 60_000, "{}", md.chars().count());
    assert!(md.contains("more, every one in `ab.json`"));
}
