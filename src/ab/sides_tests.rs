//! The coordinator against fake sides: shell scripts that speak the protocol, log what they
//! were asked, and fail in the ways a real side can.

use super::*;
use crate::ab::run::{measure, RunPlan};
use std::path::Path;

/// Two cells' hello, as a side of protocol `protocol` says it (its second cell `arm2`).
fn hello(protocol: u32, arm2: &str) -> String {
    format!(
        r#"{{"Hello":{{"protocol":{protocol},"version":"fake","cells":[{{"family":"dsa_decode","arm":"eager-sync","batch_size":8,"block":5,"layout":"tp1"}},{{"family":"dsa_decode","arm":"{arm2}","batch_size":8,"block":5,"layout":"tp1"}}],"planted":null}}}}"#
    )
}

/// A fake side named `name` in `dir`: it says `hello`, answers Start, then answers each
/// Measure with `step_us` = `step`, logging `name cell` to `dir/log`; `on_measure` is shell
/// run before each answer (`$n` counts the requests).
fn fake(dir: &Path, name: &str, hello: &str, step: f64, on_measure: &str) -> SideSpec {
    let script = dir.join(name);
    let log = dir.join("log");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             echo '{hello}'\n\
             read start || exit 0\n\
             echo {name} >> {starts}\n\
             echo '{{\"Ready\":{{\"device\":\"fake GPU\",\"pinned\":\"none\",\"emulated\":[]}}}}'\n\
             n=0\n\
             while read line; do\n\
               n=$((n+1))\n\
               cell=$(echo \"$line\" | sed 's/.*\"cell\":\\([0-9]*\\).*/\\1/')\n\
               {on_measure}\n\
               echo \"{name} $cell\" >> {log}\n\
               echo \"{{\\\"Measured\\\":{{\\\"cell\\\":$cell,\\\"probe_before_us\\\":2.0,\\\"probe_after_us\\\":2.0,\\\"metrics\\\":[{{\\\"name\\\":\\\"step_us\\\",\\\"value\\\":{step}}}]}}}}\"\n\
             done\n",
            log = log.display(),
            starts = dir.join("starts").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    SideSpec {
        name: if name == "base" { "BASE" } else { "NEW" },
        exe: script,
        args: Vec::new(),
    }
}

fn plan(base: SideSpec, new: SideSpec) -> RunPlan {
    RunPlan {
        base,
        new,
        pairs: 8,
        processes: 6,
        seed: 3,
        redo_bound: 0.15,
        start_timeout: Duration::from_secs(10),
        pair_timeout: Duration::from_secs(2),
    }
}

#[test]
fn each_pair_runs_its_two_sides_back_to_back_half_base_first() {
    let dir = tempfile::tempdir().unwrap();
    let h = hello(PROTOCOL, "graph");
    let p = plan(
        fake(dir.path(), "base", &h, 10.0, ""),
        fake(dir.path(), "new", &h, 12.0, ""),
    );
    let mut seen = Vec::new();
    let m = measure(&p, |done, total| seen.push((done, total))).unwrap();
    assert_eq!(m.pairs.len(), 16);
    // Six processes a side, the eight rounds shared out 2, 2, 1, 1, 1, 1.
    let per_process: Vec<usize> = (0..6)
        .map(|g| m.pairs.iter().filter(|p| p.process == g).count())
        .collect();
    assert_eq!(per_process, [4, 4, 2, 2, 2, 2]);
    let starts = std::fs::read_to_string(dir.path().join("starts")).unwrap();
    assert_eq!(starts.lines().count(), 12, "each side started six times");
    assert_eq!(seen.last(), Some(&(16, 16)));
    assert_eq!((m.base.ready.device.as_str(), m.redone), ("fake GPU", 0));
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 32);
    for (pair, two) in m.pairs.iter().zip(lines.chunks(2)) {
        let cell = pair.cell.to_string();
        let (first, second) = match pair.base_first {
            true => ("base", "new"),
            false => ("new", "base"),
        };
        assert_eq!(two, [format!("{first} {cell}"), format!("{second} {cell}")]);
        assert_eq!(
            (pair.base.metric("step_us"), pair.new.metric("step_us")),
            (Some(10.0), Some(12.0))
        );
    }
    for cell in 0..2 {
        let firsts = m
            .pairs
            .iter()
            .filter(|p| p.cell == cell && p.base_first)
            .count();
        assert_eq!(firsts, 4, "cell {cell}");
    }
}

fn error_of(p: &RunPlan) -> String {
    match measure(p, |_, _| {}) {
        Ok(_) => panic!("the run did not fail"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_side_that_dies_mid_run_is_named_with_its_last_words() {
    let dir = tempfile::tempdir().unwrap();
    let h = hello(PROTOCOL, "graph");
    let p = plan(
        fake(dir.path(), "base", &h, 10.0, ""),
        fake(
            dir.path(),
            "new",
            &h,
            10.0,
            r#"[ $n -ge 3 ] && { echo 'CUDA_ERROR_ILLEGAL_ADDRESS' >&2; exit 1; }"#,
        ),
    );
    let e = error_of(&p);
    assert!(e.contains("NEW (") && e.contains("ended awaiting"), "{e}");
    assert!(
        e.contains("exit status 1") && e.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{e}"
    );
}

#[test]
fn a_side_that_hangs_is_killed_at_the_pair_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let h = hello(PROTOCOL, "graph");
    let p = plan(
        fake(
            dir.path(),
            "base",
            &h,
            10.0,
            r#"[ $n -ge 3 ] && exec sleep 60"#,
        ),
        fake(dir.path(), "new", &h, 10.0, ""),
    );
    let started = std::time::Instant::now();
    let e = error_of(&p);
    assert!(e.contains("BASE (") && e.contains("killed as hung"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn sides_of_another_protocol_or_grid_are_refused_before_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let ours = hello(PROTOCOL, "graph");
    let old = fake(dir.path(), "base", &hello(PROTOCOL + 1, "graph"), 10.0, "");
    let e = error_of(&plan(old, fake(dir.path(), "new", &ours, 10.0, "")));
    assert!(e.contains("BASE (") && e.contains("ab protocol"), "{e}");
    let lacking = fake(dir.path(), "new", &hello(PROTOCOL, "fused"), 10.0, "");
    let e = error_of(&plan(fake(dir.path(), "base", &ours, 10.0, ""), lacking));
    assert!(e.contains("different grids"), "{e}");
    assert!(
        e.contains("NEW (") && e.contains("dsa_decode/graph bs 8"),
        "{e}"
    );
    assert!(
        e.contains("BASE (") && e.contains("dsa_decode/fused bs 8"),
        "{e}"
    );
    // Neither side was asked to start: nothing was measured.
    assert!(!dir.path().join("log").exists());
}

#[test]
fn a_side_that_refuses_its_flags_or_is_no_worker_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("old-metaprep");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"error: unrecognized subcommand '$1'\" >&2\nexit 2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let old = SideSpec {
        name: "BASE",
        exe: script,
        args: vec!["ab-worker".into()],
    };
    let ours = fake(dir.path(), "new", &hello(PROTOCOL, "graph"), 10.0, "");
    let e = measure(&plan(old, ours), |_, _| {}).err().unwrap();
    assert_eq!(crate::exit::Exit::of_error(&e), crate::exit::Exit::BadInput);
    let text = format!("{e:#}");
    assert!(
        text.contains("BASE (") && text.contains("unrecognized subcommand 'ab-worker'"),
        "{text}"
    );
}

#[test]
fn a_pair_whose_host_moved_is_measured_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let h = hello(PROTOCOL, "graph");
    let base = fake(dir.path(), "base", &h, 10.0, "");
    // NEW's probe doubles inside its first burst of the run only.
    let new = fake(
        dir.path(),
        "new",
        &h,
        10.0,
        r#"if [ ! -e DIR/moved ]; then touch DIR/moved; echo "new $cell" >> DIR/log; echo "{\"Measured\":{\"cell\":$cell,\"probe_before_us\":2.0,\"probe_after_us\":4.0,\"metrics\":[{\"name\":\"step_us\",\"value\":10.0}]}}"; continue; fi"#
            .replace("DIR", &dir.path().display().to_string())
            .as_str(),
    );
    let m = measure(&plan(base, new), |_, _| {}).unwrap();
    assert_eq!(m.redone, 1);
    assert_eq!(m.pairs.iter().filter(|p| p.redone).count(), 1);
    assert_eq!(m.pairs.len(), 16);
    assert!(
        m.pairs.iter().all(|p| p.new.probe_after_us == 2.0),
        "the redo's values are kept"
    );
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert_eq!(log.lines().count(), 34, "one pair twice");
}
