//! `metaprep --version` names the build: the crate's version and the git revision the build
//! script embedded (`unknown` outside a git checkout), as env.json and the charts do.

#[test]
fn version_names_the_git_revision() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .arg("--version")
        .output()
        .expect("running metaprep --version");
    assert!(out.status.success());
    let revision = env!("METAPREP_GIT_REV");
    assert!(!revision.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("metaprep {} (git {revision})\n", env!("CARGO_PKG_VERSION"))
    );
}
