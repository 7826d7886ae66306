//! The committed archive under results/ stays small, and a run of one's own stays out of git
//! (results/README.md): checked from git's own view of the checkout, so these are skipped,
//! saying so, outside a git checkout (a source tarball).

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `git <args>` in the checkout, or `None` outside one (or without git).
fn git(args: &[&str]) -> Option<std::process::Output> {
    Command::new("git")
        .current_dir(ROOT)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success() || o.status.code() == Some(1))
}

fn in_checkout() -> bool {
    let inside = git(&["rev-parse", "--is-inside-work-tree"])
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "true");
    if !inside {
        println!("SKIPPED: not a git checkout");
    }
    inside
}

/// Bytes of the files git tracks under `path` (all of them with "."), as they are on disk.
fn tracked_bytes(path: &str) -> u64 {
    let out = git(&["ls-files", "-z", "--", path]).expect("git ls-files");
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|f| !f.is_empty())
        .filter_map(|f| std::fs::metadata(Path::new(ROOT).join(f)).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn a_run_of_ones_own_under_results_is_ignored_and_the_archive_is_not() {
    if !in_checkout() {
        return;
    }
    let ignored = |path: &str| {
        git(&["check-ignore", "-q", "--no-index", path])
            .expect("git check-ignore")
            .status
            .success()
    };
    // What `sweep` and `steps` write by default, and a chart `report` redraws in the archive.
    assert!(ignored("results/sweep-20261201-101500/metaprep.csv"));
    assert!(ignored("results/my-run/summary.md"));
    assert!(ignored(
        "results/2026-12-01-h200-sweep/charts/prep_floor.svg"
    ));
    // Every committed folder is listed, so a file added to it is seen by git.
    let out = git(&["ls-files", "-z", "results"]).expect("git ls-files");
    let tracked = String::from_utf8_lossy(&out.stdout).into_owned();
    let folders: std::collections::BTreeSet<&str> = tracked
        .split('\0')
        .filter_map(|f| f.strip_prefix("results/")?.split_once('/'))
        .map(|(folder, _)| folder)
        .collect();
    assert!(!folders.is_empty());
    for folder in folders {
        let probe = format!("results/{folder}/a-new-file.md");
        assert!(
            !ignored(&probe),
            "results/{folder}/ is committed but not listed in results/.gitignore: add `!/{folder}/`"
        );
    }
}

#[test]
fn the_archive_and_the_tree_stay_within_their_sizes() {
    if !in_checkout() {
        return;
    }
    const MIB: u64 = 1 << 20;
    let results = tracked_bytes("results");
    let tree = tracked_bytes(".");
    assert!(
        results <= 5 * MIB,
        "results/ holds {results} bytes of tracked files, over 5 MiB: see results/README.md, \
         'Adding a run'"
    );
    assert!(
        tree <= 15 * MIB,
        "the tracked tree is {tree} bytes, over 15 MiB"
    );
}

/// The product's text (README, docs, source, scripts) names no development round: a
/// "session" followed by a number, even across a line break; its source no issue number
/// either. History belongs in git.
#[test]
fn the_product_names_no_development_session_nor_issue() {
    if !in_checkout() {
        return;
    }
    let out = git(&[
        "ls-files",
        "-z",
        "--",
        "README.md",
        "docs",
        "src",
        "scripts",
    ])
    .expect("git ls-files");
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut found = Vec::new();
    for file in listed.split('\0').filter(|f| !f.is_empty()) {
        let Ok(text) = std::fs::read_to_string(Path::new(ROOT).join(file)) else {
            continue;
        };
        // Words of the text with comment markers and line breaks folded away; a number is a
        // word that begins with a digit (a `#` before it allowed): "−35" is no issue's.
        let words: Vec<&str> = text.split_whitespace().collect();
        let word = |w: &str| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        };
        for pair in words.windows(2) {
            let raw = pair[1].trim_start_matches(['(', '#']);
            let number = raw.starts_with(|c: char| c.is_ascii_digit());
            let first = word(pair[0]);
            let round = first == "session" || first == "sessions";
            let issue = file.starts_with("src/") && (first == "issue" || first == "issues");
            if (round || issue) && number {
                found.push(format!("{file}: {} {}", pair[0], pair[1]));
            }
        }
    }
    assert!(found.is_empty(), "development rounds named: {found:?}");
}

/// A new user reads the README whole: it stays within 12 KB.
#[test]
fn the_readme_fits_twelve_kilobytes() {
    let bytes = std::fs::metadata(Path::new(ROOT).join("README.md"))
        .unwrap()
        .len();
    assert!(bytes <= 12 * 1024, "README.md is {bytes} bytes, over 12 KB");
}
