//! The real `rozone-datanode` binary: starts, stops cleanly on SIGTERM, and
//! accepts its own sample config.

use rozone_telemetry::testkit;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-datanode");

#[test]
fn starts_then_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("dn");
    testkit::assert_starts_and_stops_on_sigterm(
        BIN,
        &[
            "--data-dir".as_ref(),
            data_dir.as_os_str(),
            "--container-addr=127.0.0.1:0".as_ref(),
            "--raft-addr=127.0.0.1:0".as_ref(),
            "--replication-addr=127.0.0.1:0".as_ref(),
            "--http-addr=127.0.0.1:0".as_ref(),
            "--scm-addr=127.0.0.1:19860".as_ref(),
        ],
    );
    assert!(data_dir.join("hdds").is_dir(), "default volume created");
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
            .env("ROZONE_DATANODE__DATA_DIRS", "/disk1,/disk1"),
        "rozone-datanode: config error: datanode.data_dirs[1] (/disk1) is listed twice",
    );
}
