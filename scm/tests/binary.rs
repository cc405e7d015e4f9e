//! The real `rozone-scm` binary: starts, stops cleanly on SIGTERM, and
//! accepts its own sample config.

use rozone_telemetry::testkit;
use rozone_tests::free_port;

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

/// A plaintext SCM (these tests are about startup and HTTP, not security).
fn scm(data_dir: &std::path::Path, extra: &[&str]) -> std::process::Command {
    let mut c = testkit::insecure_command(BIN);
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

struct Node {
    id: u64,
    client: u16,
    peer: u16,
    checkpoint: u16,
}

fn ring_config(dir: &std::path::Path, me: &Node, all: &[&Node]) -> std::path::PathBuf {
    let mut toml = format!(
        "[node]\nid = {}\ndata_dir = {:?}\n[scm]\nclient_addr = \"127.0.0.1:{}\"\npeer_addr = \"127.0.0.1:{}\"\ncheckpoint_addr = \"127.0.0.1:{}\"\nbootstrap_retry_pause = \"200ms\"\n[http]\naddr = \"127.0.0.1:0\"\n[raft]\nelection_timeout_min = \"300ms\"\nelection_timeout_max = \"600ms\"\nheartbeat_interval = \"100ms\"\n",
        me.id,
        dir.join(format!("scm{}", me.id)),
        me.client,
        me.peer,
        me.checkpoint
    );
    for n in all {
        toml += &format!(
            "[[peers]]\nid = {}\npeer_addr = \"127.0.0.1:{}\"\nclient_addr = \"127.0.0.1:{}\"\n",
            n.id, n.peer, n.client
        );
    }
    let path = dir.join(format!("scm{}.toml", me.id));
    std::fs::write(&path, toml).expect("write config");
    path
}

#[test]
fn second_scm_joins_by_checkpoint_with_bootstrap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let n1 = Node {
        id: 1,
        client: free_port(),
        peer: free_port(),
        checkpoint: free_port(),
    };
    let n2 = Node {
        id: 2,
        client: free_port(),
        peer: free_port(),
        checkpoint: free_port(),
    };
    let c1 = ring_config(dir.path(), &n1, &[&n1, &n2]);
    let c2 = ring_config(dir.path(), &n2, &[&n1, &n2]);

    let mut s1 = testkit::Daemon::spawn({
        let mut c = testkit::insecure_command(BIN);
        c.arg("--config").arg(&c1).arg("--init");
        c
    })
    .expect("spawn scm1");
    s1.wait_for_stderr("cluster created", testkit::TIMEOUT)
        .expect("scm1 created the cluster");

    let mut s2 = testkit::Daemon::spawn({
        let mut c = testkit::insecure_command(BIN);
        c.arg("--config").arg(&c2).arg("--bootstrap");
        c
    })
    .expect("spawn scm2");
    s2.wait_for_stderr("joined the SCM ring", testkit::TIMEOUT)
        .unwrap_or_else(|e| panic!("scm2 did not join: {e}\n--- scm2 ---\n{}", s2.stderr()));
    assert!(s2.stderr().contains("took the leader's checkpoint"));

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let info = rt.block_on(async {
        let mut c = rozone_proto::ring::ring_client::RingClient::connect(format!(
            "http://127.0.0.1:{}",
            n1.client
        ))
        .await
        .expect("connect scm1");
        c.ring_info(rozone_proto::ring::RingInfoRequest {})
            .await
            .expect("ring info")
            .into_inner()
    });
    let voters: Vec<u64> = info
        .members
        .iter()
        .filter(|m| m.voter)
        .map(|m| m.id)
        .collect();
    assert_eq!(voters, vec![1, 2], "both SCMs are voters: {info:?}");

    for d in [&mut s2, &mut s1] {
        d.signal("TERM").expect("sigterm");
        assert!(d.wait_exit(testkit::TIMEOUT).expect("exit").success());
    }
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect http");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

#[test]
fn http_endpoint_reports_health_readiness_and_metrics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let mut c = testkit::insecure_command(BIN);
    c.arg("--data-dir")
        .arg(dir.path().join("scm"))
        .args([
            "--init",
            "--client-addr=127.0.0.1:0",
            "--peer-addr=127.0.0.1:0",
            "--checkpoint-addr=127.0.0.1:0",
        ])
        .arg(format!("--http-addr=127.0.0.1:{port}"));
    let mut d = testkit::Daemon::spawn(c).expect("spawn");
    d.wait_for_stderr("started", testkit::TIMEOUT)
        .expect("started");
    assert!(http_get(port, "/health").starts_with("HTTP/1.1 200"));
    let ready = http_get(port, "/ready");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let metrics = http_get(port, "/metrics");
    assert!(metrics.contains("rozone_raft_is_leader 1"), "{metrics}");
    assert!(
        metrics.contains("# TYPE rozone_raft_applied_index gauge"),
        "{metrics}"
    );
    d.signal("TERM").expect("sigterm");
    assert!(d.wait_exit(testkit::TIMEOUT).expect("exit").success());
}
