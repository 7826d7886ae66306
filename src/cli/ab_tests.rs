use super::*;
use clap::Parser;

fn config_of(line: &[&str]) -> Result<AbConfig> {
    let argv = ["metaprep", "ab"].iter().chain(line);
    let cli = crate::cli::Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    let crate::cli::Command::Ab(args) = cli.command else {
        panic!("not an ab command line");
    };
    ab_config(&args)
}

fn refused(line: &[&str], needle: &str) {
    match config_of(line) {
        Ok(_) => panic!("{line:?} was taken"),
        Err(e) => assert!(format!("{e:#}").contains(needle), "{line:?}: {e:#}"),
    }
}

#[test]
fn each_side_runs_the_grid_then_its_own_flags_which_replace_the_grids() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let config = config_of(&[
        "--out",
        out.to_str().unwrap(),
        "--base-flags",
        "--forward-us 20",
        "--new-flags",
        "--forward-us 21 --plant-host eager-sync=4us",
        "--",
        "--batch-sizes",
        "1,8",
    ])
    .unwrap();
    let (base, base_plant) = worker_config(&config.plan.base.args).unwrap();
    let (new, new_plant) = worker_config(&config.plan.new.args).unwrap();
    assert_eq!((base.forward_us, new.forward_us), (20.0, 21.0));
    assert_eq!(
        base.batch_sizes,
        [1, 8],
        "the grid after -- replaces the default's"
    );
    assert_eq!(base.block_sizes, [5]);
    assert_eq!((base.rule.min_samples, base.steps_per_sample), (5, 20));
    assert_eq!(base_plant, None);
    assert_eq!(
        new_plant.map(|p| p.amount),
        Some(crate::ab::worker::PlantAmount::Us(4.0))
    );
    assert_eq!(cells(&base), cells(&new));
    assert_eq!(cells(&base).len(), 3 * 4 * 2);
    assert_eq!(
        config.own_flags[1],
        ["--forward-us", "21", "--plant-host", "eager-sync=4us"]
    );
    assert!(!out.exists(), "nothing is written before the run");
}

#[test]
fn bad_flags_are_refused_before_any_gpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("summary.md"), "a user's").unwrap();
    let full = full.to_str().unwrap();
    refused(&["--pairs", "7"], "--pairs: 7 is outside 16-1000");
    refused(
        &["--pairs", "8", "--processes", "9"],
        "--pairs: 8 is outside 9-1000",
    );
    refused(&["--processes", "5"], "--processes: 5 is outside 6-100");
    refused(
        &["--host-margin-pct", "0"],
        "--host-margin-pct: 0 is outside",
    );
    refused(&["--gpu-margin-pct", "nan"], "--gpu-margin-pct");
    refused(&["--pair-timeout-s", "0"], "--pair-timeout-s: 0 is outside");
    refused(
        &["--", "--processes", "2"],
        "--processes is a sweep flag ab does not take",
    );
    refused(&["--", "--max-rounds=3"], "--max-rounds=3 is a sweep flag");
    refused(&["--new-flags", "--batch-sizes 8"], "name different grids");
    refused(
        &["--new-flags", "--arms eager-sync"],
        "name different grids",
    );
    refused(
        &["--new-flags", "'unclosed"],
        "--new-flags: `'unclosed` is not a quoted list",
    );
    refused(&["--new-flags", "--plant-host graph=0us"], "NEW (");
    refused(&["--base-flags", "--no-such-flag"], "BASE (");
    refused(
        &["/no/such/metaprep", "/bin/sh"],
        "BASE /no/such/metaprep: no such executable",
    );
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "not a program").unwrap();
    let plain = plain.to_str().unwrap();
    refused(&["/bin/sh", plain], "not an executable file");
    refused(&["--out", full], "not empty");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("full/summary.md")).unwrap(),
        "a user's"
    );
}

#[test]
fn a_later_flag_replaces_an_earlier_one_and_its_value() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        overridden(
            s(&["--arms", "a,b", "--seed", "1", "--nvtx", "on"]),
            &s(&["--arms=c", "--seed", "2"])
        ),
        s(&["--nvtx", "on", "--arms=c", "--seed", "2"])
    );
    assert_eq!(
        overridden(s(&["--forward-us", "-1"]), &s(&["--forward-us", "3"])),
        s(&["--forward-us", "3"])
    );
}

#[test]
fn steps_sides_run_the_steps_grid_in_their_own_worker() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_of(&[
        "--steps",
        "--out",
        dir.path().join("run").to_str().unwrap(),
        "--new-flags",
        "--host-scale 1.2",
        "--",
        "--batch-sizes",
        "1",
    ])
    .unwrap();
    let (base, new) = (&config.plan.base.args, &config.plan.new.args);
    assert_eq!(
        (base[0].as_str(), new[0].as_str()),
        ("ab-steps-worker", "ab-steps-worker")
    );
    let (base, new) = (
        steps_worker_config(base).unwrap(),
        steps_worker_config(new).unwrap(),
    );
    assert_eq!(
        (base.host_scales.as_slice(), new.host_scales.as_slice()),
        (&[1.0][..], &[1.2][..])
    );
    assert_eq!(
        base.batch_sizes,
        [1],
        "the grid after -- replaces the default's"
    );
    assert_eq!((base.warmup_steps, base.rounds.steps), (5, 20));
    let memory = base.gpu_memory.unwrap();
    let names = step_cells(&base, memory).unwrap();
    assert_eq!(names, step_cells(&new, memory).unwrap());
    let shown: Vec<String> = names.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        ["eager-sync", "eager-device", "graph"]
            .map(|arm| format!("dspark+dsa_target_verify/{arm} bs 1 block 5 tp8"))
    );
    // A sweep side of the same command line is no steps side.
    assert!(steps_worker_config(&config_of(&[]).unwrap().plan.base.args).is_err());
}

#[test]
fn bad_steps_flags_are_refused_before_any_gpu_work() {
    refused(
        &["--steps", "--", "--trace", "t.json"],
        "--trace is a steps flag ab does not take",
    );
    refused(
        &["--steps", "--", "--timer=cupti"],
        "--timer=cupti is a steps flag",
    );
    refused(
        &["--steps", "--", "--max-rounds", "3"],
        "--max-rounds is a steps flag",
    );
    refused(
        &["--steps", "--new-flags", "--host-scale 1,1.2"],
        "ab pairs one host scale a side (2 given)",
    );
    refused(
        &["--steps", "--new-flags", "--batch-sizes 8"],
        "name different grids",
    );
    refused(
        &["--steps", "--new-flags", "--drafter eagle"],
        "name different grids",
    );
    refused(
        &["--steps", "--base-flags", "--families dsa_decode"],
        "BASE (",
    );
    refused(&["--steps", "--", "--tp", "tp1"], "tp1");
    // A sweep's flag that steps has too is still the sweep's to refuse under the sweep grid.
    refused(&["--", "--trace", "t.json"], "BASE (");
}
