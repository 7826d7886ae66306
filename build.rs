// Embeds the git revision (METAPREP_GIT_REV: `--version`, env.json, every chart's footer), so a
// bundle run on a GPU host without git still records it. Outside a git checkout (a source
// tarball, a crate download) or without git it is `unknown`, or what METAPREP_GIT_REV says when
// the builder sets it.
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=METAPREP_GIT_REV");
    if let Some(given) = std::env::var("METAPREP_GIT_REV")
        .ok()
        .filter(|v| !v.is_empty())
    {
        println!("cargo:rustc-env=METAPREP_GIT_REV={given}");
        return;
    }
    let Some(rev) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        println!("cargo:rustc-env=METAPREP_GIT_REV=unknown");
        // Nothing to watch: rerun only when this script changes.
        println!("cargo:rerun-if-changed=build.rs");
        return;
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!(
        "cargo:rustc-env=METAPREP_GIT_REV={rev}{}",
        if dirty { "-dirty" } else { "" }
    );
    // What moves HEAD or the index, wherever this checkout keeps them (a worktree's `.git` is
    // a file naming its own folder). A path that does not exist would make cargo rerun this
    // script on every build, so only existing ones are named.
    let mut watched: Vec<PathBuf> = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
        watched.extend([dir.join("HEAD"), dir.join("index")]);
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(PathBuf::from) {
        watched.push(common.join("packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(common.join(branch));
        }
    }
    // An edit to a tracked source makes the tree dirty without touching HEAD or the index:
    // without these, a bundle built from edits was stamped with the clean revision.
    watched.extend(["build.rs", "src", "Cargo.toml", "Cargo.lock"].map(PathBuf::from));
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
