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
