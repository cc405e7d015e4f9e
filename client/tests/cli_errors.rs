//! Bad input without a cluster: every case ends as one clear line on stderr and exit code
//! 1, never a panic or a usage dump.

mod common;

use common::*;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn no_cluster_given_says_how_to_name_one() {
    fails_with(
        rozone().args(["sh", "volume", "list"]),
        "no cluster given: use --config FILE, set ROZONE_CONFIG",
    );
}

#[test]
fn missing_config_file_is_named() {
    fails_with(
        rozone().args(["--config", "/no/such/client.toml", "sh", "volume", "list"]),
        "config file /no/such/client.toml not found",
    );
    fails_with(
        rozone()
            .env("ROZONE_CONFIG", "/no/such/env.toml")
            .args(["sh", "volume", "list"]),
        "/no/such/env.toml",
    );
}

#[test]
fn bad_config_file_names_the_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join("client.toml");
    std::fs::write(&p, "om_adrs = [\"127.0.0.1:1\"]\n").expect("write");
    fails_with(
        rozone()
            .arg("--config")
            .arg(&p)
            .args(["sh", "volume", "list"]),
        "om_adrs",
    );
    std::fs::write(&p, "om_addrs = [\"nohost\"]\n").expect("write");
    fails_with(
        rozone()
            .arg("--config")
            .arg(&p)
            .args(["sh", "volume", "list"]),
        "bad address \"nohost\"",
    );
}

#[test]
fn unreachable_cluster_gives_up_with_one_line() {
    let om = format!("127.0.0.1:{}", free_port());
    let line = fails_with(
        rozone().args([
            "--insecure",
            "--om",
            &om,
            "--timeout",
            "2s",
            "sh",
            "volume",
            "create",
            "/v1",
        ]),
        "OM unavailable: create volume: gave up after",
    );
    assert!(line.contains(&om), "{line}");
    fails_with(
        rozone().args([
            "--insecure",
            "--om",
            &om,
            "--scm",
            &om,
            "--timeout",
            "1s",
            "admin",
            "scm",
            "roles",
        ]),
        "SCM unavailable",
    );
}

#[test]
fn bad_paths_and_missing_files_fail_before_any_call() {
    let om = format!("127.0.0.1:{}", free_port());
    // Plaintext: these are about argument errors, not certificates.
    let base = ["--insecure", "--om", om.as_str(), "--timeout", "1s"];
    fails_with(
        rozone().args(base).args(["sh", "bucket", "create", "/vol"]),
        "bad bucket path \"/vol\": want /VOLUME/BUCKET",
    );
    fails_with(
        rozone()
            .args(base)
            .args(["sh", "key", "put", "/vol/b", "x"]),
        "want /VOLUME/BUCKET/KEY",
    );
    fails_with(
        rozone()
            .args(base)
            .args(["sh", "key", "put", "/vol/b/k", "/no/such/file"]),
        "open /no/such/file",
    );
    fails_with(
        rozone().args(base).args(["sh", "volume", "info", "/"]),
        "bad volume path",
    );
    fails_with(
        rozone().args(base).args(["admin", "datanode", "list"]),
        "no SCM address",
    );
}

#[test]
fn dev_down_of_an_empty_dir_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    fails_with(
        rozone().args(["dev", "down", "--dir"]).arg(dir.path()),
        "no rozone dev cluster in",
    );
}

#[test]
fn dev_up_without_daemon_binaries_says_where_it_looked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = tempfile::tempdir().expect("temp dir");
    fails_with(
        rozone()
            .args(["dev", "up", "--detach", "--dir"])
            .arg(dir.path())
            .arg("--bin-dir")
            .arg(empty.path()),
        "rozone-scm not found in --bin-dir",
    );
}
