//! Issue 29's battery: several hundred bad inputs across every command, run through the
//! binary on a host with or without a GPU. Each case is classified as the issue does:
//!
//! * clear: the expected exit code (2 for bad input, checked before any GPU work) and one
//!   line that names the flag, file, line or field (clap's own usage errors keep their
//!   `Usage:` and `For more information` tail);
//! * unclear: the right code, but a message that names nothing or runs over several lines,
//!   or a flag case whose flag the command does not have (clap's "unexpected argument");
//! * silent: exit 0, or exit 3 (the command got past its input checks to the GPU);
//! * data loss: a file the case guards (an input, an earlier output) changed or went;
//! * panic, hang (a case has 60 s).
//!
//! The test fails on anything but clear, except the few unclear cases kept in [`KEPT`];
//! `METAPREP_BATTERY_LOG=FILE` writes every case's outcome there (the findings page's counts).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The unclear cases kept, each with why (the findings page lists them too).
const KEPT: &[&str] = &[];

struct Case {
    id: String,
    args: Vec<String>,
    /// The exit code a clear refusal has (2 nearly always).
    code: i32,
    /// What the one line must contain: the flag, file, line or field.
    needle: String,
    /// Files whose bytes must be the same after the case (None: must not exist).
    guards: Vec<(PathBuf, Option<Vec<u8>>)>,
    cwd: Option<PathBuf>,
    /// The flag whose values the case tries: it must exist (clap refusing it as unknown
    /// names it too, but says nothing of its values).
    flag: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Clear,
    Unclear,
    Silent,
    DataLoss,
    Panic,
    Hang,
}

fn case(id: impl Into<String>, args: &[&str], needle: impl Into<String>) -> Case {
    Case {
        id: id.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        code: 2,
        needle: needle.into(),
        guards: Vec::new(),
        cwd: None,
        flag: None,
    }
}

impl Case {
    fn guard(mut self, path: &Path) -> Case {
        self.guards
            .push((path.to_path_buf(), std::fs::read(path).ok()));
        self
    }
    fn guard_dir(mut self, dir: &Path) -> Case {
        for entry in walk(dir) {
            self.guards
                .push((entry.clone(), std::fs::read(&entry).ok()));
        }
        self
    }
    fn of_flag(mut self, flag: &str) -> Case {
        self.flag = Some(flag.to_string());
        self
    }

    fn cwd(mut self, dir: &Path) -> Case {
        self.cwd = Some(dir.to_path_buf());
        self
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                files.extend(walk(&p));
            } else {
                files.push(p);
            }
        }
    }
    files
}

/// Lines of clap's usage tail, which a clear clap error may carry.
fn noise(line: &str) -> bool {
    let l = line.trim();
    l.is_empty()
        || l.starts_with("Usage:")
        || l.starts_with("For more information")
        || l.starts_with("tip:")
        || l.starts_with("[possible values")
}

fn run(case: &Case) -> (Class, String) {
    // $METAPREP_BIN runs the battery against another build (the findings' "before").
    let bin = std::env::var_os("METAPREP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_metaprep")));
    let mut cmd = Command::new(bin);
    cmd.args(&case.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &case.cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().expect("running metaprep");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let Some(status) = status else {
        return (Class::Hang, "timed out after 60 s".into());
    };
    let code = status.code().unwrap_or(-1);
    let shown = format!("exit {code}: {}", stderr.trim_end().replace('\n', " ⏎ "));
    let lost = case
        .guards
        .iter()
        .any(|(path, bytes)| std::fs::read(path).ok() != *bytes);
    let class = if stderr.contains("panicked") || code == 101 {
        Class::Panic
    } else if code == 0 || (code == 3 && case.code != 3) {
        Class::Silent
    } else if lost {
        Class::DataLoss
    } else {
        let lines: Vec<&str> = stderr.lines().filter(|l| !noise(l)).collect();
        // clap's own usage errors put what they name on the lines below `error:`.
        let clap = stderr.starts_with("error: ");
        let text = lines.join(" ");
        let unknown = case
            .flag
            .as_ref()
            .is_some_and(|f| stderr.contains(&format!("unexpected argument '{f}")));
        // An error quotes at most 2,000 characters of what it refuses.
        let flooded = stderr.chars().count() > 2_100;
        if code == case.code
            && !flooded
            && (lines.len() == 1 || clap)
            && text.contains(&case.needle)
            && !unknown
        {
            Class::Clear
        } else {
            Class::Unclear
        }
    };
    (class, shown)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Bad values of the numeric and list flags, per command; each must name its flag.
fn flag_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |command: &str, flag: &str, values: &[&str], extra: &[&str]| {
        for v in values {
            let mut args = vec![command, flag, v];
            args.extend(extra);
            cases.push(
                case(
                    format!("{command} {flag} {v:?} {}", extra.join(" ")),
                    &args,
                    flag,
                )
                .of_flag(flag),
            );
        }
    };
    let count = ["0", "-1", "x", "", "1e30", "99999999999999999999"];
    let real = ["-1", "nan", "inf", "x", "", "1e30"];
    let sizes = ["0", "-1", "x", "", "1,,8", "8,8", "1,", "99999999999"];
    for command in ["check", "sweep", "steps"] {
        add(command, "--batch-sizes", &sizes, &[]);
        add(
            command,
            "--block-sizes",
            &["0", "-1", "x", "", "3,3", "1000"],
            &[],
        );
        add(
            command,
            "--arms",
            &["x", "", "graph,graph", ",", "Graph"],
            &[],
        );
        add(command, "--seed", &["-1", "x", "", "1e30"], &[]);
        add(command, "--device", &["-1", "x", ""], &[]);
        add(command, "--kernel-image", &["sass", ""], &[]);
        add(command, "--sync", &["poll", ""], &[]);
    }
    for command in ["check", "sweep"] {
        add(
            command,
            "--families",
            &["dsa", "", "dsa_decode,dsa_decode", ","],
            &[],
        );
    }
    add("check", "--steps", &["0", "-1", "x"], &[]);
    add("check", "--token-budget", &["0", "-1", "x", "1e30"], &[]);
    add("check", "--soak", &["0", "-1", "x"], &[]);
    add(
        "check",
        "--dump-cases",
        &["0", "-1", "x"],
        &["--dump", "d", "--cpu-only"],
    );
    for command in ["sweep", "steps"] {
        add(command, "--cpu", &["-1", "x", "99999", ""], &[]);
        add(command, "--nvtx", &["x", ""], &[]);
        add(command, "--tp", &["tp3", "x", "", "tp1,tp1", "tp0"], &[]);
        add(command, "--forward-us", &real, &[]);
        add(command, "--max-context", &count, &[]);
        add(
            command,
            "--seq-lens",
            &["x", "5-", "-5", "0-10", "10-5", "", "1-1e30"],
            &[],
        );
        add(command, "--max-rounds", &["0", "-1", "1000", "x"], &[]);
        add(command, "--min-rounds", &["0", "5", "-1", "x", "1000"], &[]);
        add(command, "--precision-pct", &["0", "-1", "nan", "1e30"], &[]);
        add(
            command,
            "--cell-time-cap-ms",
            &["0", "-1", "nan", "inf"],
            &[],
        );
    }
    add("sweep", "--gpu-paced-max-rounds", &["-1", "1000", "x"], &[]);
    add(
        "sweep",
        "--gpu-paced-precision-pct",
        &["0", "-1", "nan", "1e30"],
        &[],
    );
    add("sweep", "--min-samples", &["0", "-1", "x"], &[]);
    add(
        "sweep",
        "--steps-per-sample",
        &["0", "-1", "x", "99999999999"],
        &[],
    );
    add("sweep", "--processes", &["0", "21", "-1"], &[]);
    add("steps", "--model", &["x", ""], &[]);
    add("steps", "--draft-model", &["x", ""], &[]);
    for flag in [
        "--custom-weight-bytes-per-layer",
        "--custom-kv-bytes-per-token-per-layer",
    ] {
        // 0 is allowed for one of the two (a forward reads weights or cache).
        add("steps", flag, &["-1", "x", ""], &["--model", "custom"]);
    }
    for flag in ["--custom-layers", "--custom-hidden-size"] {
        add("steps", flag, &["0", "-1", "x"], &["--model", "custom"]);
    }
    add("steps", "--accept-rate", &["-0.1", "1.5", "nan", "x"], &[]);
    add("steps", "--accept-length", &["0", "-1", "99", "x"], &[]);
    add("steps", "--host-speed-us", &["0", "-1", "nan", "inf"], &[]);
    add("steps", "--host-work-us", &["-1", "nan", "1e12"], &[]);
    add(
        "steps",
        "--host-scale",
        &["0", "-1", "nan", "", "1,1", "1e30"],
        &[],
    );
    add("steps", "--link-gb-s", &["0", "-1", "nan"], &[]);
    add(
        "steps",
        "--collective-latency-us",
        &["-1", "nan", "1e30"],
        &[],
    );
    add(
        "steps",
        "--round-steps",
        &["0", "-1", "x", "99999999999"],
        &[],
    );
    add("steps", "--warmup-steps", &["-1", "x", "99999999999"], &[]);
    add(
        "steps",
        "--timeline-steps",
        &["-1", "x", "99999999999"],
        &[],
    );
    add("steps", "--timeline-cap-ms", &["0", "-1", "nan"], &[]);
    add(
        "steps",
        "--gpu-memory-gib",
        &["0", "-1", "nan", "1e30"],
        &[],
    );
    add("steps", "--timer", &["nsys", ""], &[]);
    add("steps", "--ranks", &["some", ""], &[]);
    add("steps", "--read-skew-us", &["-1", "nan", "1e30"], &[]);
    add(
        "steps",
        "--read-skew-jitter-us",
        &["-1", "nan", "1e30"],
        &[],
    );
    add("steps", "--read-skew-rank", &["x", "99", "-1"], &[]);
    add(
        "steps",
        "--trace-cell",
        &["x", "tp1:1", "tp1:0:5", "tp9:1:5"],
        &["--trace", "t.json"],
    );
    add("collectives", "--gpus", &["0", "-1", "x", ""], &[]);
    add(
        "collectives",
        "--sizes-kib",
        &["", "0", "-1", "x", "8,8", "99999999999", "1,,2"],
        &[],
    );
    add("collectives", "--iters", &["0", "-1", "x"], &[]);
    add("collectives", "--samples", &["0", "-1", "x"], &[]);
    for command in ["info", "doctor", "collectives"] {
        add(command, "--device", &["-1", "x"], &[]);
    }
    add(
        "validate",
        "--step-pct",
        &["0", "-1", "nan", "1e30"],
        &["ref.csv"],
    );
    add(
        "validate",
        "--diff-pct",
        &["0", "-1", "nan", "1e30"],
        &["ref.csv"],
    );
    add(
        "compare",
        "--threshold",
        &["-1", "nan", "x", "1e30"],
        &["a", "b"],
    );
    add(
        "calibrate",
        "--batch-size",
        &["0", "-1", "x"],
        &["t.json", "--out", "p.json"],
    );
    cases
}

/// Conflicting flags, and flags a run would ignore.
fn conflict_cases() -> Vec<Case> {
    // (the command line, split at spaces; what the refusal must name)
    let table: &[(&str, &str)] = &[
        ("steps --full --batch-sizes 1", "--full"),
        ("steps --accept-rate 0.5 --accept-length 2", "--accept-"),
        ("steps --custom-layers 4", "--custom-layers"),
        ("steps --cupti-lib /x/libcupti.so", "--cupti-lib"),
        ("steps --trace-cell tp1:1:5", "--trace"),
        ("steps --resume", "--resume"),
        ("sweep --resume", "--resume"),
        ("sweep --rounds 8 --max-rounds 7", "--max-rounds"),
        ("steps --min-rounds 8 --max-rounds 7", "--max-rounds"),
        ("steps --tp tp2 --read-skew-rank 1", "--read-skew"),
        ("steps --nccl-lib /nonexistent/libnccl.so.2", "--nccl-lib"),
        ("check --soak 100", "--soak"),
        ("check --soak 100 --dump d", "--soak"),
        ("check --cpu-only", "--dump"),
        ("check --dump-cases 4", "--dump"),
        ("check --dump d --cpu-only --steps 3", "--steps"),
        ("check --token-budget 7 --batch-sizes 1,8", "--token-budget"),
        ("steps --accept-length 5 --block-sizes 3", "--accept-length"),
        ("calibrate t.json", "--out"),
        ("calibrate --out p.json", "TRACE"),
        ("compare a", "NEW"),
        ("sweeps", "sweeps"),
        ("sweep --bogus", "--bogus"),
        ("sweep --seed 1 --seed 2", "--seed"),
    ];
    table
        .iter()
        .map(|(line, needle)| {
            let args: Vec<&str> = line.split(' ').collect();
            case(*line, &args, *needle)
        })
        .collect()
}

/// The steps flags validate takes from its reference, each refused by name.
fn validate_axis_cases() -> Vec<Case> {
    [
        ("--forward-us", "10"),
        ("--batch-sizes", "1"),
        ("--tp", "tp1"),
        ("--full", ""),
        ("--resume", ""),
        ("--trace", "t.json"),
        ("--host-scale", "2"),
        ("--host-speed-us", "2"),
        ("--block-sizes", "3"),
        ("--arms", "graph"),
        ("--model", "draft-small"),
        ("--custom-layers", "4"),
    ]
    .into_iter()
    .map(|(flag, value)| {
        let mut args = vec!["validate", "ref.csv", flag];
        args.extend((!value.is_empty()).then_some(value));
        case(format!("validate {flag}"), &args, flag)
    })
    .collect()
}

/// A run folder holding a copy of the run_small fixture, its env.json recording
/// `command_line`.
fn run_copy(root: &Path, name: &str, command_line: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["metaprep.csv", "telemetry.csv", "trace.json"] {
        std::fs::copy(fixture("run_small").join(file), dir.join(file)).unwrap();
    }
    let env = std::fs::read_to_string(fixture("run_small/env.json")).unwrap();
    let mut env: serde_json::Value = serde_json::from_str(&env).unwrap();
    env["command_line"] = command_line.into();
    std::fs::write(dir.join("env.json"), env.to_string()).unwrap();
    dir
}

/// A run (run_small's files) whose env.json records a sweep's settings: those of a default
/// sweep on an H200 at seed 1, batch sizes 1, 8, 64 and 6 rounds.
fn sweep_run_copy(root: &Path, name: &str) -> PathBuf {
    let dir = run_copy(root, name, "metaprep sweep --out r");
    let recorded = std::fs::read_to_string(fixture("h200_aa_s10/aa1/env.json")).unwrap();
    let recorded: serde_json::Value = serde_json::from_str(&recorded).unwrap();
    let mut settings = recorded["settings"].clone();
    settings["seed"] = 1.into();
    settings["batch_sizes"] = serde_json::json!([1, 8, 64]);
    settings["rounds"] = 6.into();
    let path = dir.join("env.json");
    let mut env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    env["settings"] = settings;
    std::fs::write(path, env.to_string()).unwrap();
    dir
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// One line's field `column` (0-based) of a CSV text replaced.
fn set_field(csv: &str, line: usize, column: usize, value: &str) -> String {
    let mut lines: Vec<String> = csv.lines().map(String::from).collect();
    let mut fields: Vec<String> = lines[line].split(',').map(String::from).collect();
    fields[column] = value.into();
    lines[line] = fields.join(",");
    lines.join("\n") + "\n"
}

fn drop_column(csv: &str, column: usize) -> String {
    csv.lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f.remove(column);
            f.join(",")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Damaged run files: (id, file, contents, needle).
fn damaged_runs() -> Vec<(String, &'static str, Vec<u8>, &'static str)> {
    let csv = std::fs::read_to_string(fixture("run_small/metaprep.csv")).unwrap();
    let tele = std::fs::read_to_string(fixture("run_small/telemetry.csv")).unwrap();
    let trace = std::fs::read_to_string(fixture("run_small/trace.json")).unwrap();
    let env = std::fs::read_to_string(fixture("run_small/env.json")).unwrap();
    // Columns: kind,family,arm,batch_size,block_size,layout,emulated,metric,unit,median,
    // p10,p90,ci_lo,ci_hi,samples,rounds,stop_reason,...
    let d: Vec<(String, &'static str, Vec<u8>, &'static str)> = vec![
        (
            "csv cut mid-field".into(),
            "metaprep.csv",
            csv[..csv.len() - 3].into(),
            "metaprep.csv",
        ),
        (
            "csv cut mid-line".into(),
            "metaprep.csv",
            csv[..csv.len() - 40].into(),
            "metaprep.csv",
        ),
        (
            "csv cut in the header".into(),
            "metaprep.csv",
            csv[..30].into(),
            "metaprep.csv",
        ),
        (
            "csv empty".into(),
            "metaprep.csv",
            Vec::new(),
            "metaprep.csv",
        ),
        (
            "csv header only".into(),
            "metaprep.csv",
            (csv.lines().next().unwrap().to_string() + "\n").into(),
            "rows",
        ),
        (
            "csv missing column".into(),
            "metaprep.csv",
            drop_column(&csv, 12).into(),
            "metaprep.csv",
        ),
        (
            "csv extra column".into(),
            "metaprep.csv",
            csv.lines()
                .map(|l| format!("{l},x"))
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes(),
            "metaprep.csv",
        ),
        (
            "csv short row".into(),
            "metaprep.csv",
            csv.replacen(",precision,", ",", 1).into(),
            "metaprep.csv",
        ),
        (
            "csv not utf-8".into(),
            "metaprep.csv",
            {
                let mut b = csv.clone().into_bytes();
                b[200] = 0xff;
                b
            },
            "metaprep.csv",
        ),
        (
            "csv binary".into(),
            "metaprep.csv",
            vec![0u8, 1, 2, 3, 0xff, b'\n'],
            "metaprep.csv",
        ),
        (
            "csv unknown kind".into(),
            "metaprep.csv",
            set_field(&csv, 1, 0, "pre").into(),
            "kind",
        ),
        (
            "csv unknown family".into(),
            "metaprep.csv",
            set_field(&csv, 1, 1, "dspark").into(),
            "family",
        ),
        (
            "csv unknown arm".into(),
            "metaprep.csv",
            set_field(&csv, 1, 2, "eager").into(),
            "arm",
        ),
        (
            "csv batch 0".into(),
            "metaprep.csv",
            set_field(&csv, 1, 3, "0").into(),
            "batch_size",
        ),
        (
            "csv batch -1".into(),
            "metaprep.csv",
            set_field(&csv, 1, 3, "-1").into(),
            "batch_size",
        ),
        (
            "csv block x".into(),
            "metaprep.csv",
            set_field(&csv, 1, 4, "x").into(),
            "block_size",
        ),
        (
            "csv unknown layout".into(),
            "metaprep.csv",
            set_field(&csv, 1, 5, "tp3").into(),
            "layout",
        ),
        (
            "csv emulated not bool".into(),
            "metaprep.csv",
            set_field(&csv, 1, 6, "maybe").into(),
            "emulated",
        ),
        (
            "csv nan median".into(),
            "metaprep.csv",
            set_field(&csv, 1, 9, "nan").into(),
            "median",
        ),
        (
            "csv inf median".into(),
            "metaprep.csv",
            set_field(&csv, 1, 9, "inf").into(),
            "median",
        ),
        (
            "csv negative median".into(),
            "metaprep.csv",
            set_field(&csv, 1, 9, "-4.0").into(),
            "median",
        ),
        (
            "csv empty median".into(),
            "metaprep.csv",
            set_field(&csv, 1, 9, "").into(),
            "median",
        ),
        (
            "csv ci_lo above median".into(),
            "metaprep.csv",
            set_field(&csv, 1, 12, "99.0").into(),
            "ci_lo",
        ),
        (
            "csv ci_hi below median".into(),
            "metaprep.csv",
            set_field(&csv, 1, 13, "1.0").into(),
            "ci_hi",
        ),
        (
            "csv p10 above p90".into(),
            "metaprep.csv",
            set_field(&set_field(&csv, 1, 10, "60.0"), 1, 11, "50.0").into(),
            "p10",
        ),
        (
            "csv nan p90".into(),
            "metaprep.csv",
            set_field(&csv, 1, 11, "nan").into(),
            "p90",
        ),
        (
            "csv samples -1".into(),
            "metaprep.csv",
            set_field(&csv, 1, 14, "-1").into(),
            "samples",
        ),
        (
            "csv rounds x".into(),
            "metaprep.csv",
            set_field(&csv, 1, 15, "x").into(),
            "rounds",
        ),
        (
            "csv duplicate row".into(),
            "metaprep.csv",
            {
                let l: Vec<&str> = csv.lines().collect();
                format!("{}\n{}\n{}\n", l[0], l[1], l[1..].join("\n")).into()
            },
            "metaprep.csv",
        ),
        (
            "csv gz corrupt".into(),
            "metaprep.csv.gz",
            b"\x1f\x8b\x08\x00garbage".to_vec(),
            "metaprep.csv.gz",
        ),
        (
            "csv gz cut".into(),
            "metaprep.csv.gz",
            {
                let g = gzip(csv.as_bytes());
                g[..g.len() / 2].to_vec()
            },
            "metaprep.csv.gz",
        ),
        (
            "env.json not json".into(),
            "env.json",
            b"{\"gpu_name\": ".to_vec(),
            "env.json",
        ),
        ("env.json empty".into(), "env.json", Vec::new(), "env.json"),
        (
            "env.json an array".into(),
            "env.json",
            b"[]".to_vec(),
            "env.json",
        ),
        (
            "env.json of steps".into(),
            "env.json",
            env.replace("metaprep sweep ", "metaprep steps ").into(),
            "steps",
        ),
        (
            "env.json of check".into(),
            "env.json",
            env.replace("metaprep sweep ", "metaprep check ").into(),
            "check",
        ),
        (
            "env.json wrong type".into(),
            "env.json",
            env.replace("\"sm_count\": 132", "\"sm_count\": \"many\"")
                .into(),
            "env.json",
        ),
        (
            "telemetry cut mid-field".into(),
            "telemetry.csv",
            tele[..tele.len() - 3].into(),
            "telemetry.csv",
        ),
        (
            "telemetry bad value".into(),
            "telemetry.csv",
            set_field(&tele, 1, 2, "fast").into(),
            "telemetry.csv",
        ),
        (
            "telemetry missing column".into(),
            "telemetry.csv",
            drop_column(&tele, 2).into(),
            "telemetry.csv",
        ),
        (
            "telemetry nan".into(),
            "telemetry.csv",
            set_field(&tele, 1, 0, "nan").into(),
            "telemetry.csv",
        ),
        (
            "trace truncated".into(),
            "trace.json",
            trace[..trace.len() / 2].into(),
            "trace.json",
        ),
        (
            "trace not json".into(),
            "trace.json",
            b"hello".to_vec(),
            "trace.json",
        ),
        (
            "trace wrong shape".into(),
            "trace.json",
            b"{\"traceEvents\": 3}".to_vec(),
            "trace.json",
        ),
        ("trace empty".into(), "trace.json", Vec::new(), "trace.json"),
        (
            "csv half an interval, its lower bound empty".into(),
            "metaprep.csv",
            set_field(&csv, 1, 12, "NaN").into(),
            "both bounds or neither",
        ),
        (
            "csv half an interval, its upper bound empty".into(),
            "metaprep.csv",
            set_field(&csv, 2, 13, "NaN").into(),
            "both bounds or neither",
        ),
        (
            "csv a time of 1e308 us with a consistent interval".into(),
            "metaprep.csv",
            (9..=13)
                .fold(csv.clone(), |t, c| set_field(&t, 1, c, "1e308"))
                .into(),
            "1e308 us is over",
        ),
        (
            "csv a time of 2e9 us".into(),
            "metaprep.csv",
            (9..=13)
                .fold(csv.clone(), |t, c| set_field(&t, 3, c, "2e9"))
                .into(),
            "2e9 us is over",
        ),
        (
            "csv a 5 MB field".into(),
            "metaprep.csv",
            set_field(&csv, 1, 1, &"x".repeat(5 << 20)).into(),
            "metaprep.csv",
        ),
        (
            "csv 10,000 unknown columns".into(),
            "metaprep.csv",
            {
                let extra: String = (0..10_000)
                    .map(|i| format!(",unknown_column_{i}"))
                    .collect();
                let mut lines: Vec<String> = csv.lines().map(String::from).collect();
                lines[0].push_str(&extra);
                for l in lines.iter_mut().skip(1) {
                    l.push_str(&",0".repeat(10_000));
                }
                (lines.join("\n") + "\n").into()
            },
            "metaprep.csv",
        ),
        (
            "trace gz corrupt".into(),
            "trace.json.gz",
            b"\x1f\x8b\x08garbage".to_vec(),
            "trace.json",
        ),
    ];
    d
}

/// Damaged run folders given to report, compare and a sweep's --resume.
fn run_file_cases(root: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    for (n, (id, file, bytes, needle)) in damaged_runs().into_iter().enumerate() {
        let line = "metaprep sweep --tp tp1,tp8 --batch-sizes 1,8,64 --out results/run_small";
        // report: exit 2, the earlier report (here: a marker summary) kept.
        let dir = run_copy(root, &format!("report-{n}"), line);
        if file.ends_with(".gz") {
            let plain = file.trim_end_matches(".gz");
            std::fs::remove_file(dir.join(plain)).unwrap();
        }
        std::fs::write(dir.join(file), &bytes).unwrap();
        std::fs::write(dir.join("summary.md"), "earlier").unwrap();
        let d = dir.to_str().unwrap();
        cases.push(case(format!("report: {id}"), &["report", d], needle).guard_dir(&dir));
        // compare reads only metaprep.csv and env.json.
        if !(file.starts_with("telemetry") || file.starts_with("trace")) {
            let good = fixture("run_small");
            let dir2 = root.join(format!("compare-{n}"));
            copy_dir(&dir, &dir2);
            let d2 = dir2.to_str().unwrap();
            cases.push(
                case(
                    format!("compare: {id}"),
                    &["compare", good.to_str().unwrap(), d2],
                    needle,
                )
                .guard_dir(&dir2),
            );
        }
        // resume: exit 2 before the GPU opens (exit 3 would mean it was not read first).
        // A header alone is a run killed before its first cell: resumable. A resume reads
        // no trace.
        if id != "csv header only" && !file.starts_with("trace") {
            let dir3 = root.join(format!("resume-{n}"));
            copy_dir(&dir, &dir3);
            let d3 = dir3.to_str().unwrap();
            cases.push(
                case(
                    format!("sweep --resume: {id}"),
                    &[
                        "sweep",
                        "--out",
                        d3,
                        "--resume",
                        "--tp",
                        "tp1,tp8",
                        "--batch-sizes",
                        "1,8,64",
                    ],
                    needle,
                )
                .guard_dir(&dir3),
            );
        }
    }
    cases
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Paths: missing, a folder for a file, a file for a folder, read-only, the same file
/// under another name (./x, absolute, symlink, hard link).
fn path_cases(root: &Path) -> Vec<Case> {
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let file = root.join("afile");
    std::fs::write(&file, "mine").unwrap();
    let folder = root.join("afolder");
    std::fs::create_dir_all(&folder).unwrap();
    let (f, under, dir) = (s(&file), s(&file.join("x")), s(&folder));
    let good = s(&fixture("run_small"));
    let trace_dir = root.join("traces");
    std::fs::create_dir_all(&trace_dir).unwrap();
    let trace = trace_dir.join("t.json");
    std::fs::copy(fixture("torch_trace_small.json"), &trace).unwrap();
    let t = s(&trace);
    std::os::unix::fs::symlink(&trace, trace_dir.join("sym.json")).unwrap();
    std::fs::hard_link(&trace, trace_dir.join("hard.json")).unwrap();
    std::fs::copy(&trace, trace_dir.join("g.json")).unwrap();
    let keep = "--keep-profiler-costs";
    let mut cases = vec![
        case(
            "report missing dir",
            &["report", "/nonexistent/run"],
            "/nonexistent/run",
        ),
        case("report a file", &["report", &f], "afile"),
        case("report an empty folder", &["report", &dir], "metaprep.csv"),
        case(
            "report --out a file",
            &["report", &good, "--out", &f],
            "is a file, not a folder",
        )
        .guard(&file),
        case(
            "report --out under a file",
            &["report", &good, "--out", &under],
            "is a file, so no folder",
        )
        .guard(&file),
        case(
            "report --out in /sys",
            &["report", &good, "--out", "/sys/x"],
            "--out /sys/x: cannot write in /sys",
        ),
        case(
            "compare missing base",
            &["compare", "/nonexistent", &good],
            "/nonexistent",
        ),
        case(
            "compare missing new",
            &["compare", &good, "/nonexistent"],
            "/nonexistent",
        ),
        case("compare a file", &["compare", &f, &good], "afile"),
        case(
            "compare an empty folder",
            &["compare", &dir, &good],
            "afolder",
        ),
        case(
            "compare --out a folder",
            &["compare", &good, &good, "--out", &dir],
            "--out",
        ),
        case(
            "compare --out under a file",
            &["compare", &good, &good, "--out", &under],
            "--out",
        )
        .guard(&file),
        case(
            "compare --json a folder",
            &["compare", &good, &good, "--json", &dir],
            "--json",
        ),
        case(
            "compare --details under a file",
            &["compare", &good, &good, "--details", &under],
            "--details",
        ),
        case(
            "compare --out in /sys",
            &["compare", &good, &good, "--out", "/sys/c.md"],
            "--out",
        ),
        case(
            "calibrate missing trace",
            &[
                "calibrate",
                "/nonexistent/t.json",
                "--out",
                &s(&root.join("p1.json")),
                keep,
            ],
            "t.json",
        ),
        case(
            "calibrate a folder as trace",
            &["calibrate", &dir, "--out", &s(&root.join("p2.json")), keep],
            "afolder",
        ),
        case(
            "calibrate --out a folder",
            &["calibrate", &t, "--out", &dir, keep],
            "--out",
        ),
        case(
            "calibrate --out under a file",
            &["calibrate", &t, "--out", &under, keep],
            "--out",
        )
        .guard(&file),
        case(
            "calibrate --out exists",
            &["calibrate", &t, "--out", &f, keep],
            "--force",
        )
        .guard(&file),
        case(
            "calibrate --out in /sys",
            &["calibrate", &t, "--out", "/sys/p.json", keep],
            "--out",
        ),
        case(
            "calibrate --out = input",
            &["calibrate", &t, "--out", &t, "--force", keep],
            "--out",
        )
        .guard(&trace),
        case(
            "calibrate --out = ./input",
            &["calibrate", "t.json", "--out", "./t.json", "--force", keep],
            "--out",
        )
        .guard(&trace)
        .cwd(&trace_dir),
        case(
            "calibrate --out = a symlink to the input",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&trace_dir.join("sym.json")),
                "--force",
                keep,
            ],
            "--out",
        )
        .guard(&trace),
        case(
            "calibrate --out = a hard link to the input",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&trace_dir.join("hard.json")),
                "--force",
                keep,
            ],
            "--out",
        )
        .guard(&trace),
        case(
            "calibrate --out = input via ..",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&trace_dir.join("../traces/t.json")),
                "--force",
                keep,
            ],
            "--out",
        )
        .guard(&trace),
        case(
            "calibrate --gpu-trace = --out",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&trace_dir.join("g.json")),
                "--force",
                "--gpu-trace",
                &format!("8:{}", s(&trace_dir.join("g.json"))),
                keep,
            ],
            "--out",
        )
        .guard(&trace_dir.join("g.json")),
        case(
            "calibrate --gpu-trace missing",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&root.join("p3.json")),
                "--gpu-trace",
                "8:/nonexistent/g.json",
                keep,
            ],
            "g.json",
        ),
        case(
            "calibrate --gpu-trace no colon",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&root.join("p4.json")),
                "--gpu-trace",
                "8",
                keep,
            ],
            "--gpu-trace",
        ),
        case(
            "calibrate --gpu-trace batch 0",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&root.join("p5.json")),
                "--gpu-trace",
                &format!("0:{t}"),
                keep,
            ],
            "--gpu-trace",
        ),
        case(
            "calibrate --gpu-trace batch x",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&root.join("p6.json")),
                "--gpu-trace",
                &format!("x:{t}"),
                keep,
            ],
            "--gpu-trace",
        ),
        case(
            "calibrate --gpu-trace no file",
            &[
                "calibrate",
                &t,
                "--out",
                &s(&root.join("p7.json")),
                "--gpu-trace",
                "8:",
                keep,
            ],
            "--gpu-trace",
        ),
        case(
            "calibrate without a probe file",
            &["calibrate", &t, "--out", &s(&root.join("p8.json"))],
            "probe",
        ),
        case(
            "steps --trace a folder",
            &["steps", "--trace", &dir],
            "--trace",
        ),
        case(
            "steps --trace under a file",
            &["steps", "--trace", &under],
            "--trace",
        ),
        case(
            "steps --trace in /sys",
            &["steps", "--trace", "/sys/t.json"],
            "--trace",
        ),
        case(
            "steps --trace an existing file",
            &["steps", "--trace", &f],
            "--trace",
        )
        .guard(&file),
        case(
            "steps --host-profile missing",
            &["steps", "--host-profile", "/nonexistent/p.json"],
            "--host-profile",
        ),
        case(
            "steps --host-profile a folder",
            &["steps", "--host-profile", &dir],
            "afolder",
        ),
        case(
            "steps --host-profile unknown name",
            &["steps", "--host-profile", "pytorchx"],
            "--host-profile",
        ),
        case(
            "steps --nccl-lib a folder",
            &["steps", "--ranks", "real", "--nccl-lib", &dir],
            "--nccl-lib",
        ),
        case(
            "collectives --nccl-lib missing",
            &["collectives", "--nccl-lib", "/nonexistent/libnccl.so.2"],
            "--nccl-lib",
        ),
        case(
            "check --dump a file",
            &["check", "--dump", &f, "--cpu-only"],
            "--dump",
        )
        .guard(&file),
        case(
            "check --dump under a file",
            &["check", "--dump", &under, "--cpu-only"],
            "--dump",
        )
        .guard(&file),
        case(
            "check --dump in /sys",
            &["check", "--dump", "/sys/d", "--cpu-only"],
            "--dump",
        ),
        case(
            "validate missing reference",
            &["validate", "/nonexistent/ref.csv"],
            "ref.csv",
        ),
        case(
            "validate a folder as reference",
            &["validate", &dir],
            "afolder",
        ),
        case(
            "compare --out = an input",
            &[
                "compare",
                &good,
                &good,
                "--out",
                &s(&fixture("run_small/metaprep.csv")),
            ],
            "--out",
        )
        .guard(&fixture("run_small/metaprep.csv")),
    ];
    // The run folder of each command that writes one: a file, a folder under a file, /sys.
    for command in ["sweep", "steps", "collectives"] {
        let id = format!("{command} --out a file");
        cases.push(case(id, &[command, "--out", &f], "--out").guard(&file));
        let id = format!("{command} --out under a file");
        cases.push(case(id, &[command, "--out", &under], "--out"));
        let id = format!("{command} --out in /sys");
        cases.push(case(id, &[command, "--out", "/sys/r"], "--out"));
    }
    // A dump folder holding other files, and a dump's cases.json damaged.
    let other = root.join("notes");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("mine.txt"), "mine").unwrap();
    cases.push(
        case(
            "check --dump a folder of other files",
            &["check", "--dump", &s(&other), "--cpu-only"],
            "--dump",
        )
        .guard(&other.join("mine.txt")),
    );
    let bad_dump = root.join("baddump");
    std::fs::create_dir_all(&bad_dump).unwrap();
    std::fs::write(bad_dump.join("cases.json"), "{not json").unwrap();
    std::fs::write(bad_dump.join("case-00000.safetensors"), "x").unwrap();
    cases.push(
        case(
            "check --dump over a damaged dump",
            &["check", "--dump", &s(&bad_dump), "--cpu-only"],
            "--dump",
        )
        .guard_dir(&bad_dump),
    );
    // Read-only folders bind everyone but root.
    // SAFETY: a plain query.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let locked = root.join("locked");
        copy_dir(&fixture("run_small"), &locked);
        std::fs::write(locked.join("summary.md"), "earlier").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let l = s(&locked);
        cases.push(
            case("report into a read-only run", &["report", &l], "locked").guard_dir(&locked),
        );
        cases.push(case(
            "sweep --out in a read-only folder",
            &["sweep", "--out", &s(&locked.join("r"))],
            "--out",
        ));
        cases.push(case(
            "steps --out in a read-only folder",
            &["steps", "--out", &s(&locked.join("r"))],
            "--out",
        ));
        cases.push(case(
            "check --dump in a read-only folder",
            &["check", "--dump", &s(&locked.join("d")), "--cpu-only"],
            "--dump",
        ));
        cases.push(case(
            "calibrate --out in a read-only folder",
            &["calibrate", &t, "--out", &s(&locked.join("p.json")), keep],
            "--out",
        ));
        cases.push(case(
            "compare --out in a read-only folder",
            &["compare", &good, &good, "--out", &s(&locked.join("c.md"))],
            "--out",
        ));
        cases.push(case(
            "steps --trace in a read-only folder",
            &["steps", "--trace", &s(&locked.join("t.json"))],
            "--trace",
        ));
    }
    cases
}

/// Traces calibrate cannot use.
fn trace_cases(root: &Path) -> Vec<Case> {
    let good = std::fs::read_to_string(fixture("torch_trace_small.json")).unwrap();
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("truncated", good[..good.len() / 2].into()),
        ("cut at the end", good[..good.len() - 2].into()),
        ("not json", b"hello".to_vec()),
        ("an array", b"[]".to_vec()),
        ("traceEvents a number", b"{\"traceEvents\": 3}".to_vec()),
        ("no traceEvents", b"{\"schemaVersion\": 1}".to_vec()),
        ("no events", b"{\"traceEvents\": []}".to_vec()),
        (
            "event without ph",
            b"{\"traceEvents\": [{\"name\": \"x\"}]}".to_vec(),
        ),
        (
            "ts a string",
            good.replacen("\"ts\": 4711000100.0", "\"ts\": \"soon\"", 1)
                .into(),
        ),
        (
            "dur negative",
            good.replacen("\"dur\": 100", "\"dur\": -100", 1).into(),
        ),
        ("gz corrupt", b"\x1f\x8b\x08\x00garbage".to_vec()),
        ("not utf-8", {
            let mut b = good.clone().into_bytes();
            b[100] = 0xff;
            b
        }),
    ];
    std::fs::create_dir_all(root).unwrap();
    let mut cases = Vec::new();
    for (n, (id, bytes)) in bad.into_iter().enumerate() {
        let name = if id == "gz corrupt" {
            format!("t{n}.json.gz")
        } else {
            format!("t{n}.json")
        };
        let path = root.join(&name);
        std::fs::write(&path, &bytes).unwrap();
        let out = root.join(format!("p{n}.json"));
        cases.push(
            case(
                format!("calibrate: trace {id}"),
                &[
                    "calibrate",
                    path.to_str().unwrap(),
                    "--out",
                    out.to_str().unwrap(),
                    "--keep-profiler-costs",
                ],
                name.as_str(),
            )
            .guard(&out),
        );
    }
    cases
}

/// Host profiles bad in each field, given to steps (and as calibrate's --base).
fn profile_cases(root: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("host-profiles/pytorch.json"),
    )
    .unwrap();
    let good: serde_json::Value = serde_json::from_str(&text).unwrap();
    // (case, profile, the field its error must name)
    let mut bad: Vec<(String, serde_json::Value, String)> = Vec::new();
    let obj = good.as_object().unwrap();
    // Optional fields: a profile without them is whole.
    // eagle_program only `--drafter eagle` needs (refused there without it, a unit test).
    let optional = [
        "host_speed_us",
        "pinned_read_us",
        "mapped_read_us",
        "eagle_program",
    ];
    for (key, value) in obj {
        let mut v = good.clone();
        v.as_object_mut().unwrap().remove(key);
        if !optional.contains(&key.as_str()) {
            bad.push((format!("{key} missing"), v, key.clone()));
        }
        let mut v = good.clone();
        v[key] = serde_json::json!([1, 2]);
        if value.is_array() {
            v[key] = serde_json::json!("x");
        }
        bad.push((format!("{key} of the wrong type"), v, key.clone()));
        if value.get("value").is_some_and(|x| x.is_number()) {
            for n in [-1.0, 1e30] {
                let mut v = good.clone();
                v[key]["value"] = serde_json::json!(n);
                bad.push((format!("{key} {n}"), v, key.clone()));
            }
        }
    }
    let mut v = good.clone();
    v["surprise"] = serde_json::json!(1);
    bad.push(("an unknown field".into(), v, "surprise".into()));
    let mut cases = Vec::new();
    for (n, (id, v, field)) in bad.into_iter().enumerate() {
        let path = root.join(format!("profile-{n}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        let p = path.to_str().unwrap();
        cases.push(case(
            format!("steps --host-profile: {id}"),
            &["steps", "--host-profile", p],
            field,
        ));
    }
    for (id, body) in [("not json", "{"), ("empty", ""), ("an array", "[]")] {
        let path = root.join(format!("profile-{}.json", id.replace(' ', "-")));
        std::fs::write(&path, body).unwrap();
        let p = path.to_str().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        cases.push(case(
            format!("steps --host-profile: {id}"),
            &["steps", "--host-profile", p],
            name.as_str(),
        ));
        cases.push(case(
            format!("calibrate --base: {id}"),
            &["calibrate", "t.json", "--out", "p.json", "--base", p],
            "--base",
        ));
    }
    cases
}

/// Validation references validate cannot use.
fn reference_cases(root: &Path) -> Vec<Case> {
    let head = "forward_us,batch_size,block,arm,step_us,host_speed_us\n";
    let bad: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "ref"),
        ("header only", head.into(), "no rows"),
        ("cut mid-line", format!("{head}1000,1,5,graph,20"), "newline"),
        ("missing column", "forward_us,batch_size,arm,step_us\n1000,1,graph,2000\n".into(), "block"),
        ("unknown arm", format!("{head}1000,1,5,graphs,2000,8\n"), "arm"),
        ("nan step", format!("{head}1000,1,5,graph,nan,8\n"), "step_us"),
        ("negative step", format!("{head}1000,1,5,graph,-1,8\n"), "step_us"),
        ("zero forward", format!("{head}0,1,5,graph,2000,8\n"), "forward_us"),
        ("batch 0", format!("{head}1000,0,5,graph,2000,8\n"), "batch_size"),
        ("block x", format!("{head}1000,1,x,graph,2000,8\n"), "block"),
        ("host speed -1", format!("{head}1000,1,5,graph,2000,-1\n"), "host_speed_us"),
        ("duplicate row", format!("{head}1000,1,5,graph,2000,8\n1000,1,5,graph,2100,8\n"), "second row"),
        ("p10 above p90", "forward_us,batch_size,block,arm,step_us,step_us_p10,step_us_p90\n1000,1,5,graph,2000,2100,1900\n".into(), "p10"),
        ("p10 above median", "forward_us,batch_size,block,arm,step_us,step_us_p10,step_us_p90\n1000,1,5,graph,2000,2050,2100\n".into(), "p10"),
        ("block 1000", format!("{head}1000,1,1000,graph,2000,8\n"), "block"),
        ("batch huge", format!("{head}1000,99999999,5,graph,2000,8\n"), "batch"),
        ("binary", "\u{0}\u{1}\n".into(), "ref"),
    ];
    let mut cases = Vec::new();
    for (n, (id, text, needle)) in bad.into_iter().enumerate() {
        let path = root.join(format!("ref{n}.csv"));
        std::fs::write(&path, text).unwrap();
        let out = root.join(format!("val{n}"));
        cases.push(
            case(
                format!("validate: reference {id}"),
                &[
                    "validate",
                    path.to_str().unwrap(),
                    "--out",
                    out.to_str().unwrap(),
                ],
                needle,
            )
            .guard(&out),
        );
    }
    let good = root.join("ref-good.csv");
    std::fs::write(&good, format!("{head}1000,1,5,graph,2000,8\n")).unwrap();
    let g = good.to_str().unwrap();
    let existing = root.join("val-existing");
    std::fs::create_dir_all(&existing).unwrap();
    std::fs::write(existing.join("mine"), "mine").unwrap();
    cases.push(
        case(
            "validate --out exists",
            &["validate", g, "--out", existing.to_str().unwrap()],
            "--out",
        )
        .guard(&existing.join("mine")),
    );
    cases.push(case(
        "validate --host-profile missing",
        &["validate", g, "--host-profile", "/nonexistent/p.json"],
        "--host-profile",
    ));
    cases.push(case(
        "validate --out under a file",
        &["validate", g, "--out", &format!("{g}/x")],
        "--out",
    ));
    cases.push(case(
        "validate --seed -1",
        &["validate", g, "--seed", "-1"],
        "--seed",
    ));
    cases.push(case(
        "validate --max-rounds 1000",
        &["validate", g, "--max-rounds", "1000"],
        "--max-rounds",
    ));
    cases.extend(fit_cases(root, g, head));
    cases
}

/// `validate --fit` files it cannot fit at: each refused naming the file and what to run,
/// with nothing written.
fn fit_cases(root: &Path, reference: &str, head: &str) -> Vec<Case> {
    let recipe = "--no-traces --forward-us 100 --batch-sizes 1";
    let bad: Vec<(&str, String, &str)> = vec![
        (
            "two cells",
            format!("{head}100,1,5,graph,300,8\n100,8,5,graph,320,8\n"),
            recipe,
        ),
        (
            "an arm short",
            format!("{head}100,1,5,eager-sync,400,8\n"),
            "no graph row",
        ),
        ("malformed", format!("{head}100,1,5,graph\n"), "--fit"),
        ("cut mid-line", format!("{head}100,1,5,graph,30"), "newline"),
        (
            "block 1000",
            format!("{head}100,1,1000,graph,300,8\n"),
            "block",
        ),
    ];
    let mut cases = Vec::new();
    for (n, (id, text, needle)) in bad.into_iter().enumerate() {
        let path = root.join(format!("fit{n}.csv"));
        std::fs::write(&path, text).unwrap();
        let out = root.join(format!("val-fit{n}"));
        let (p, o) = (path.to_str().unwrap(), out.to_str().unwrap());
        cases.push(
            case(
                format!("validate --fit: {id}"),
                &["validate", reference, "--fit", p, "--out", o],
                needle,
            )
            .guard(&out),
        );
    }
    // A fit file it could fit at, with a what-if the factors would take in.
    let good = root.join("fit-good.csv");
    std::fs::write(&good, format!("{head}100,1,5,graph,300,8\n")).unwrap();
    let out = root.join("val-fit-host-work");
    let (p, o) = (good.to_str().unwrap(), out.to_str().unwrap());
    cases.push(
        case(
            "validate --fit with --host-work-us",
            &[
                "validate",
                reference,
                "--fit",
                p,
                "--host-work-us",
                "50",
                "--out",
                o,
            ],
            "--host-work-us with --fit",
        )
        .guard(&out),
    );
    // --fit-post-wait files it cannot scale at, beside a good --fit file.
    let long_bad: Vec<(&str, String, &str)> = vec![
        (
            "graph only",
            format!("{head}3000,1,5,graph,6100,8\n"),
            "no eager-sync row",
        ),
        (
            "not longer than --fit's",
            format!("{head}100,1,5,eager-sync,700,8\n100,1,5,graph,300,8\n"),
            "not longer than --fit's",
        ),
        (
            "two cells",
            format!(
                "{head}3000,1,5,eager-sync,7000,8\n3000,1,5,graph,6100,8\n\
                 3000,8,5,eager-sync,7000,8\n3000,8,5,graph,6100,8\n"
            ),
            "holds 2 cells",
        ),
        (
            "a profile without a post-wait table",
            format!("{head}3000,1,5,eager-sync,7000,8\n3000,1,5,graph,6100,8\n"),
            "no post_wait table",
        ),
    ];
    for (n, (id, text, needle)) in long_bad.into_iter().enumerate() {
        let path = root.join(format!("fit-long{n}.csv"));
        std::fs::write(&path, text).unwrap();
        let out = root.join(format!("val-fit-long{n}"));
        let (l, o) = (path.to_str().unwrap(), out.to_str().unwrap());
        let args = [
            "validate",
            reference,
            "--fit",
            p,
            "--fit-post-wait",
            l,
            "--out",
            o,
        ];
        cases.push(case(format!("validate --fit-post-wait: {id}"), &args, needle).guard(&out));
    }
    let out = root.join("val-fit-long-alone");
    let o = out.to_str().unwrap();
    cases.push(
        case(
            "validate --fit-post-wait without --fit",
            &["validate", reference, "--fit-post-wait", p, "--out", o],
            "--fit <FIT.csv>",
        )
        .guard(&out),
    );
    let out = root.join("val-fit-missing");
    cases.push(
        case(
            "validate --fit missing",
            &[
                "validate",
                reference,
                "--fit",
                "/nonexistent/fit.csv",
                "--out",
                out.to_str().unwrap(),
            ],
            "/nonexistent/fit.csv",
        )
        .guard(&out),
    );
    cases
}

/// `compare` of runs that do not match, and of runs with bad flags.
fn compare_cases(root: &Path) -> Vec<Case> {
    let good = fixture("run_small");
    let g = good.to_str().unwrap();
    let steps = run_copy(root, "cmp-steps", "metaprep steps --out r");
    let mut cases = vec![
        case(
            "compare --base-arm unknown",
            &["compare", g, g, "--base-arm", "x", "--new-arm", "graph"],
            "--base-arm",
        ),
        case(
            "compare --new-arm unknown",
            &[
                "compare",
                g,
                g,
                "--base-arm",
                "graph",
                "--new-arm",
                "graphs",
            ],
            "--new-arm",
        ),
        case(
            "compare --base-arm without --new-arm",
            &["compare", g, g, "--base-arm", "graph"],
            "--new-arm",
        ),
        case(
            "compare a sweep with a steps run",
            &["compare", g, steps.to_str().unwrap()],
            "steps",
        ),
        case(
            "compare --out = --json",
            &[
                "compare",
                g,
                g,
                "--out",
                &root.join("same.md").to_string_lossy(),
                "--json",
                &root.join("same.md").to_string_lossy(),
            ],
            "--json",
        ),
        case(
            "compare --out = --details",
            &[
                "compare",
                g,
                g,
                "--out",
                &root.join("same2.md").to_string_lossy(),
                "--details",
                &root.join("same2.md").to_string_lossy(),
            ],
            "--details",
        ),
    ];
    // Runs with no cell in common.
    let disjoint = sweep_run_copy(root, "cmp-disjoint");
    let csv = std::fs::read_to_string(disjoint.join("metaprep.csv")).unwrap();
    let head = csv.lines().next().unwrap();
    let floors: Vec<&str> = csv.lines().filter(|l| l.starts_with("floor,")).collect();
    std::fs::write(
        disjoint.join("metaprep.csv"),
        format!("{head}\n{}\n", floors.join("\n")),
    )
    .unwrap();
    cases.push(case(
        "compare runs of other settings",
        &["compare", g, disjoint.to_str().unwrap()],
        "--allow-mismatch",
    ));
    cases
}

/// `--resume` of a finished, mismatched or corrupt run, and `--out` at an existing run.
fn resume_cases(root: &Path) -> Vec<Case> {
    let line = "metaprep sweep --seed 1 --batch-sizes 1,8,64 --rounds 6 --out r";
    let mut cases = Vec::new();
    let run = sweep_run_copy(root, "resume-base");
    let r = run.to_str().unwrap().to_string();
    let mut add = |id: &str, command: &str, extra: &[&str], needle: &str| {
        let mut args = vec![command, "--out", &r];
        args.extend(extra);
        cases.push(case(id, &args, needle).guard_dir(&run));
    };
    add("sweep --out an existing run", "sweep", &[], "--resume");
    add("steps --out an existing run", "steps", &[], "--resume");
    add(
        "sweep --resume other seed",
        "sweep",
        &["--resume", "--seed", "2", "--batch-sizes", "1,8,64"],
        "seed",
    );
    add(
        "sweep --resume other batches",
        "sweep",
        &["--resume", "--seed", "1", "--batch-sizes", "1,8"],
        "batch_sizes",
    );
    add(
        "sweep --resume other rounds",
        "sweep",
        &[
            "--resume",
            "--seed",
            "1",
            "--batch-sizes",
            "1,8,64",
            "--rounds",
            "8",
        ],
        "rounds: `6` vs `8`",
    );
    add(
        "sweep --resume other families",
        "sweep",
        &[
            "--resume",
            "--seed",
            "1",
            "--batch-sizes",
            "1,8,64",
            "--families",
            "dsa_decode",
        ],
        "families",
    );
    add(
        "steps --resume of a sweep run",
        "steps",
        &["--resume", "--seed", "1"],
        "steps",
    );
    let no_env = run_copy(root, "resume-noenv", line);
    std::fs::remove_file(no_env.join("env.json")).unwrap();
    cases.push(
        case(
            "sweep --resume without env.json",
            &["sweep", "--out", no_env.to_str().unwrap(), "--resume"],
            "env.json",
        )
        .guard_dir(&no_env),
    );
    let steps_run = run_copy(root, "resume-steps", "metaprep steps --seed 1 --out r");
    std::fs::write(steps_run.join("metaprep.csv"), "kind,family\nprep").unwrap();
    cases.push(
        case(
            "steps --resume of a corrupt run",
            &[
                "steps",
                "--out",
                steps_run.to_str().unwrap(),
                "--resume",
                "--seed",
                "1",
            ],
            "metaprep.csv",
        )
        .guard_dir(&steps_run),
    );
    cases
}

/// Values no physical host, link, model or batch has, each refused naming its flag and
/// bound; a trace whose times are out of a profiler's range; one file given as two traces.
fn sane_bound_cases(root: &Path) -> Vec<Case> {
    let dir = root.join("bounds");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = fixture("torch_trace_small.json");
    let t = trace.to_str().unwrap();
    let out = dir.join("p.json");
    let o = out.to_str().unwrap();
    let mut cases = Vec::new();
    for v in ["1e-300", "0.05", "1e9", "nan"] {
        cases.push(
            case(
                format!("steps --link-gb-s {v}"),
                &["steps", "--link-gb-s", v],
                "--link-gb-s",
            )
            .of_flag("--link-gb-s"),
        );
    }
    for v in ["1e-300", "0.001", "1e5", "inf"] {
        cases.push(
            case(
                format!("steps --host-speed-us {v}"),
                &["steps", "--host-speed-us", v],
                "--host-speed-us",
            )
            .of_flag("--host-speed-us"),
        );
    }
    for v in ["0", "00"] {
        cases.push(case(
            format!("steps custom weights {v}"),
            &[
                "steps",
                "--model",
                "custom",
                "--custom-weight-bytes-per-layer",
                v,
            ],
            "--custom-weight-bytes-per-layer",
        ));
    }
    for v in ["4294967295", "65537"] {
        cases.push(
            case(
                format!("calibrate --batch-size {v}"),
                &[
                    "calibrate",
                    t,
                    "--out",
                    o,
                    "--keep-profiler-costs",
                    "--batch-size",
                    v,
                ],
                "--batch-size",
            )
            .guard(&out),
        );
        let g = format!("{v}:{t}");
        cases.push(
            case(
                format!("calibrate --gpu-trace {v}:"),
                &[
                    "calibrate",
                    t,
                    "--out",
                    o,
                    "--keep-profiler-costs",
                    "--gpu-trace",
                    &g,
                ],
                "--gpu-trace",
            )
            .guard(&out),
        );
    }
    // The traced file again as another batch's GPU trace, under two spellings.
    let spelled = format!(
        "{}/../{}",
        trace.parent().unwrap().join("run_small").display(),
        "torch_trace_small.json"
    );
    for (id, again) in [
        ("the same path", t.to_string()),
        ("another spelling", spelled),
    ] {
        let g = format!("8:{again}");
        cases.push(
            case(
                format!("calibrate --gpu-trace {id}"),
                &[
                    "calibrate",
                    t,
                    "--out",
                    o,
                    "--keep-profiler-costs",
                    "--gpu-trace",
                    &g,
                ],
                "one file given twice",
            )
            .guard(&out),
        );
    }
    let good = std::fs::read_to_string(&trace).unwrap();
    for (n, (from, to)) in [
        ("\"ts\": 4711000100.0", "\"ts\": 1e300"),
        ("\"ts\": 4711000100.0", "\"ts\": -1e300"),
        ("\"dur\": 100", "\"dur\": 1e300"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.join(format!("times-{n}.json"));
        std::fs::write(&path, good.replacen(from, to, 1)).unwrap();
        cases.push(
            case(
                format!("calibrate: trace {to}"),
                &[
                    "calibrate",
                    path.to_str().unwrap(),
                    "--out",
                    o,
                    "--keep-profiler-costs",
                ],
                "out of range",
            )
            .guard(&out),
        );
    }
    // Names no filesystem takes, found before any work: each arm's trace name is longer.
    let long = "t".repeat(250);
    let trace_out = dir.join(format!("{long}.json"));
    cases.push(
        case(
            "steps --trace whose arms' names are too long",
            &["steps", "--trace", trace_out.to_str().unwrap()],
            "--trace",
        )
        .guard(&trace_out),
    );
    let long_out = dir.join(format!("{}.json", "p".repeat(300)));
    cases.push(case(
        "calibrate --out of a name too long",
        &[
            "calibrate",
            t,
            "--out",
            long_out.to_str().unwrap(),
            "--keep-profiler-costs",
        ],
        "--out",
    ));
    let long_dir = dir.join("q".repeat(300));
    cases.push(case(
        "sweep --out of a name too long",
        &["sweep", "--out", long_dir.to_str().unwrap()],
        "--out",
    ));
    // EAGLE's block N drafts N - 1 tokens: the refusal names the block given.
    cases.push(case(
        "steps eagle accept length over block 5",
        &[
            "steps",
            "--drafter",
            "eagle",
            "--block-sizes",
            "5",
            "--accept-length",
            "5.5",
        ],
        "block 5 drafts 4",
    ));
    cases
}

/// Outputs a command did not write are not replaced: a user's summary.md in report's --out.
fn own_output_cases(root: &Path) -> Vec<Case> {
    let run = fixture("run_small");
    let mut cases = Vec::new();
    for (n, text) in ["my notes\n", "", "# metaprep compare\n\n**0 slower**\n"]
        .into_iter()
        .enumerate()
    {
        let dir = root.join(format!("own-summary-{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let summary = dir.join("summary.md");
        std::fs::write(&summary, text).unwrap();
        cases.push(
            case(
                format!("report --out holding a user's summary.md ({n})"),
                &[
                    "report",
                    run.to_str().unwrap(),
                    "--out",
                    dir.to_str().unwrap(),
                ],
                "not a summary `metaprep report` wrote",
            )
            .guard(&summary)
            .guard(&dir.join("charts")),
        );
    }
    cases
}

/// A later cell of a validate reference that its settings cannot run, refused before any
/// cell runs (exit 2, not 3 on a host without a GPU), and a flag given at its default.
fn every_cell_cases(root: &Path) -> Vec<Case> {
    let dir = root.join("every-cell");
    std::fs::create_dir_all(&dir).unwrap();
    let head = "forward_us,batch_size,block,arm,step_us\n";
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let two = write(
        "two.csv",
        &format!("{head}1000,1,5,graph,2000\n1000,1,3,graph,2000\n"),
    );
    let eagle = write(
        "eagle.csv",
        &format!("{head}1000,1,5,graph,2000\n1000,1,1,graph,2000\n"),
    );
    let mut cases = Vec::new();
    for (id, args, needle) in [
        (
            "an accept length the later block cannot take",
            vec!["validate", two.as_str(), "--accept-length", "4.5"],
            "--accept-length",
        ),
        (
            "EAGLE at a later block of 1",
            vec!["validate", eagle.as_str(), "--drafter", "eagle"],
            "block",
        ),
        (
            "--batch-sizes at its default",
            vec!["validate", two.as_str(), "--batch-sizes", "1,4,16,64"],
            "--batch-sizes",
        ),
        (
            "--host-scale at its default",
            vec!["validate", two.as_str(), "--host-scale", "1"],
            "--host-scale",
        ),
        (
            "--arms at its default",
            vec![
                "validate",
                two.as_str(),
                "--arms",
                "eager-sync,eager-pinned,eager-mapped,eager-device,graph,graph-upload,fused",
            ],
            "--arms",
        ),
    ] {
        let out = dir.join(format!("v-{}", cases.len()));
        let mut args = args;
        let o = out.to_str().unwrap().to_string();
        args.extend(["--out", o.as_str()]);
        cases.push(case(format!("validate: {id}"), &args, needle).guard(&out));
    }
    cases
}

#[test]
fn the_battery_of_bad_inputs_is_refused_clearly() {
    let root = tempfile::tempdir().unwrap();
    let mut cases = flag_cases();
    cases.extend(conflict_cases());
    cases.extend(validate_axis_cases());
    cases.extend(run_file_cases(&root.path().join("runs")));
    cases.extend(path_cases(root.path()));
    cases.extend(trace_cases(&root.path().join("traces-bad")));
    cases.extend(profile_cases(root.path()));
    cases.extend(reference_cases(root.path()));
    cases.extend(compare_cases(root.path()));
    cases.extend(resume_cases(root.path()));
    cases.extend(sane_bound_cases(root.path()));
    cases.extend(own_output_cases(root.path()));
    cases.extend(every_cell_cases(root.path()));
    // The cases run in a scratch folder so that relative outputs (d, t.json) land there.
    let scratch = root.path().join("cwd");
    std::fs::create_dir_all(&scratch).unwrap();
    // A good reference for the validate flag cases, so that each is refused for its flag.
    std::fs::write(
        scratch.join("ref.csv"),
        "forward_us,batch_size,block,arm,step_us,host_speed_us\n1000,1,5,graph,2000,8\n",
    )
    .unwrap();
    for c in &mut cases {
        if c.cwd.is_none() {
            c.cwd = Some(scratch.clone());
        }
    }
    let threads = 4;
    let chunks: Vec<Vec<&Case>> = (0..threads)
        .map(|t| cases.iter().skip(t).step_by(threads).collect())
        .collect();
    let results: Vec<(String, Class, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|c| {
                            let (class, shown) = run(c);
                            (c.id.clone(), class, shown)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut log = String::new();
    for (id, class, shown) in &results {
        *counts.entry(format!("{class:?}")).or_default() += 1;
        log.push_str(&format!("{class:?}\t{id}\t{shown}\n"));
    }
    log.push_str(&format!("{} cases: {counts:?}\n", results.len()));
    if let Some(path) = std::env::var_os("METAPREP_BATTERY_LOG") {
        std::fs::write(path, &log).unwrap();
    }
    assert!(results.len() >= 300, "{} cases", results.len());
    let failures: Vec<String> = results
        .iter()
        .filter(|(id, class, _)| *class != Class::Clear && !KEPT.contains(&id.as_str()))
        .map(|(id, class, shown)| format!("{class:?}: {id}: {shown}"))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases not clear:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}
