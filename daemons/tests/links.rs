//! The multi-call binary run through links named after each program, as the container image
//! runs it: each link is that daemon (its version line and its own sample config) or the
//! CLI, and any other name is refused with a clear error.

use std::path::Path;
use std::process::Command;

fn run(link: &Path, arg: &str) -> std::process::Output {
    Command::new(link)
        .arg(arg)
        .env_remove("ROZONE_CONFIG")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", link.display()))
}

#[test]
fn each_link_runs_its_daemon_and_other_names_are_refused() {
    let exe = env!("CARGO_BIN_EXE_rozone-daemons");
    let dir = tempfile::tempdir().unwrap();
    for (name, section) in [
        ("rozone-scm", "[scm]"),
        ("rozone-om", "[om]"),
        ("rozone-datanode", "[datanode]"),
        ("rozone-s3g", "[s3g]"),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(exe, &link).unwrap();
        let v = run(&link, "--version");
        assert!(v.status.success(), "{name} --version: {v:?}");
        let v = String::from_utf8_lossy(&v.stdout);
        assert!(
            v.starts_with(&format!("{name} ")),
            "{name} --version printed {v:?}"
        );
        let s = run(&link, "--print-sample-config");
        assert!(s.status.success(), "{name} --print-sample-config: {s:?}");
        let s = String::from_utf8_lossy(&s.stdout);
        assert!(
            s.contains(section),
            "{name}'s sample config lacks {section}: {s}"
        );
    }
    let cli = dir.path().join("rozone");
    std::os::unix::fs::symlink(exe, &cli).unwrap();
    let v = run(&cli, "--version");
    assert!(v.status.success(), "rozone --version: {v:?}");
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("rozone "));
    let h = String::from_utf8_lossy(&run(&cli, "--help").stdout).into_owned();
    assert!(
        h.contains("dev") && h.contains("admin"),
        "rozone --help: {h}"
    );
    let other = dir.path().join("rozone-nope");
    std::os::unix::fs::symlink(exe, &other).unwrap();
    let o = run(&other, "--version");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rozone-scm, rozone-om"), "{err}");
}
