//! The real `rozone-om` binary: starts, stops cleanly on SIGTERM, and
//! accepts its own sample config.

use rozone_telemetry::testkit;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-om");

#[test]
fn starts_then_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("om");
    testkit::assert_starts_and_stops_on_sigterm(
        BIN,
        &[
            "--data-dir".as_ref(),
            data_dir.as_os_str(),
            "--client-addr=127.0.0.1:0".as_ref(),
            "--peer-addr=127.0.0.1:0".as_ref(),
            "--http-addr=127.0.0.1:0".as_ref(),
            "--scm-addr=127.0.0.1:19860".as_ref(),
            "--init".as_ref(),
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
        testkit::command(BIN).args(["--config-check", "--scm-addr", "scm1"]),
        "rozone-om: config error: om.scm_addrs[0] (\"scm1\") must be host:port",
    );
}

#[test]
fn plain_start_without_a_ring_is_refused_with_the_way_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = testkit::insecure_command(BIN)
        .arg("--data-dir")
        .arg(dir.path().join("om"))
        .args([
            "--client-addr=127.0.0.1:0",
            "--peer-addr=127.0.0.1:0",
            "--http-addr=127.0.0.1:0",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no OM ring in"), "{err}");
    assert!(err.contains("--init"), "{err}");
}
