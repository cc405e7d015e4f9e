//! A fatal error in the SCM's Raft group (a state-machine storage error stops openraft's
//! core for good) ends `rozone_scm::run` with a clear error, so the process exits and its
//! supervisor restarts it, as the OM does (om/tests/fatal_exit.rs, whose twin failed on
//! cd62657). The SCM's exit landed with the OM's; this test guards it (not run on an
//! older commit: a `run` that only waited for its shutdown token would never end here and
//! the 30 s wait below would run out).

mod common;

use std::time::Duration;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_datanode_client::ScmDatanodeClient;
use rozone_scm::config::Config;
use rozone_telemetry::testkit::free_port;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fatal_storage_error_ends_the_process_with_a_clear_error() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config {
        security: rozone_config::SecuritySection::insecure(),
        ..Config::default()
    };
    c.node.id = 1;
    c.node.data_dir = dir.path().join("scm1");
    let client_addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    c.scm.client_addr = client_addr;
    c.scm.peer_addr = "127.0.0.1:0".parse().unwrap();
    c.scm.checkpoint_addr = "127.0.0.1:0".parse().unwrap();
    c.http.addr = "127.0.0.1:0".parse().unwrap();
    c.raft.election_timeout_min = Duration::from_millis(300);
    c.raft.election_timeout_max = Duration::from_millis(600);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c.raft.fsync = false;
    c.startup.init = true;
    let stop = CancellationToken::new();
    let run = tokio::spawn(rozone_scm::run(c, stop.clone()));

    // A datanode registers: the SCM serves (its record goes through the log).
    let deadline = tokio::time::Instant::now() + common::WAIT;
    let mut dn = loop {
        if let Ok(ch) = tonic::transport::Endpoint::from_shared(format!("http://{client_addr}"))
            .unwrap()
            .connect()
            .await
        {
            break ScmDatanodeClient::new(ch);
        }
        assert!(tokio::time::Instant::now() < deadline, "SCM never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let register = |id: u64| pb::RegisterRequest {
        datanode: Some(common::details(id)),
        node_report: Some(pb::NodeReport {
            storage: vec![common::volume(false, 1 << 40)],
        }),
        container_report: Some(pb::ContainerReport { replicas: vec![] }),
        pipeline_reports: vec![],
    };
    let deadline = tokio::time::Instant::now() + common::WAIT;
    while dn.register(register(1)).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "SCM never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The next apply fails as a disk error would: openraft stops its core.
    fail::cfg("raft-apply", "return").unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), dn.register(register(2))).await;
    let ended = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("run() must end after a fatal Raft error, not keep the process up")
        .expect("run() does not panic");
    let e = format!("{:#}", ended.expect_err("a fatal error is an error exit"));
    assert!(e.contains("Raft group stopped on a fatal error"), "{e}");
    assert!(!stop.is_cancelled());
    scenario.teardown();
}
