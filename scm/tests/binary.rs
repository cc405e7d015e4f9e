//! The real `rozone-scm` binary: starts, stops cleanly on SIGTERM, and
//! accepts its own sample config.

use rozone_telemetry::testkit;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-scm");

#[test]
fn starts_then_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("scm");
    testkit::assert_starts_and_stops_on_sigterm(
        BIN,
        &[
            "--init".as_ref(),
            "--data-dir".as_ref(),
            data_dir.as_os_str(),
            "--client-addr=127.0.0.1:0".as_ref(),
            "--peer-addr=127.0.0.1:0".as_ref(),
            "--checkpoint-addr=127.0.0.1:0".as_ref(),
            "--http-addr=127.0.0.1:0".as_ref(),
        ],
    );
    assert!(data_dir.is_dir(), "data dir created");
}

#[test]
fn sample_config_passes_config_check() {
    let dir = tempfile::tempdir().expect("temp dir");
    testkit::assert_sample_config_passes_check(BIN, dir.path());
}

#[test]
fn config_errors_are_one_line_naming_the_key() {
    testkit::assert_config_error(
        testkit::command(BIN)
            .arg("--config-check")
            .env("ROZONE_RAFT__ELECTION_TIMEOUT_MIN", "3s"),
        "rozone-scm: config error: raft.election_timeout_min (3s) must be less than \
         raft.election_timeout_max (2s)",
    );
}

fn scm(data_dir: &std::path::Path, extra: &[&str]) -> std::process::Command {
    let mut c = testkit::command(BIN);
    c.arg("--data-dir")
        .arg(data_dir)
        .args([
            "--client-addr=127.0.0.1:0",
            "--peer-addr=127.0.0.1:0",
            "--checkpoint-addr=127.0.0.1:0",
            "--http-addr=127.0.0.1:0",
        ])
        .args(extra);
    c
}

#[test]
fn plain_start_without_a_ring_is_refused_with_the_way_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = scm(&dir.path().join("scm"), &[]).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no SCM ring in"), "{err}");
    assert!(err.contains("--init"), "{err}");
}

#[test]
fn init_creates_the_cluster_and_a_plain_restart_keeps_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("scm");
    let mut d = testkit::Daemon::spawn(scm(&data, &["--init"])).expect("spawn");
    d.wait_for_stderr("cluster created", testkit::TIMEOUT)
        .expect("cluster created");
    let log = d.stderr();
    let id = log
        .split("cluster_id=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("cluster id in log")
        .to_string();
    d.signal("TERM").expect("sigterm");
    assert!(d.wait_exit(testkit::TIMEOUT).expect("exit").success());

    // A plain start reopens the ring from disk; --init again does not make a new cluster.
    let mut d = testkit::Daemon::spawn(scm(&data, &["--init"])).expect("respawn");
    d.wait_for_stderr("cluster id", testkit::TIMEOUT)
        .expect("cluster id logged");
    assert!(
        d.stderr().contains(&id),
        "same cluster id {id} after restart"
    );
    assert!(!d.stderr().contains("cluster created"));
    d.signal("TERM").expect("sigterm");
    assert!(d.wait_exit(testkit::TIMEOUT).expect("exit").success());

    let mut d = testkit::Daemon::spawn(scm(&data, &[])).expect("plain start");
    d.wait_for_stderr("started", testkit::TIMEOUT)
        .expect("started");
    d.signal("TERM").expect("sigterm");
    assert!(d.wait_exit(testkit::TIMEOUT).expect("exit").success());
}
