//! The second symptom of Ozone's HDDS-16899: the leader stops while a follower downloads its
//! checkpoint, and the download fails. Here the follower keeps no "install in progress"
//! state that blocks appends, so the new leader (whose log still holds the follower's next
//! entry) brings it up to date by log and stays able to commit with it while the old leader
//! is down. Also: a follower refuses the leader-only services with the leader's address.

use std::time::Duration;

use rozone_config::Peer;
use rozone_proto::scm as pb;
use rozone_proto::scm::scm_datanode_client::ScmDatanodeClient;
use rozone_scm::config::Config;
use rozone_scm::server::ScmServer;
use rozone_scm::state::{self, SequenceIdGenerator, SEQ_CONTAINER_ID};
use rozone_tests::free_port;

const WAIT: Duration = Duration::from_secs(30);

struct Ports {
    id: u64,
    client: u16,
    peer: u16,
    checkpoint: u16,
}

impl Ports {
    fn new(id: u64) -> Self {
        Self {
            id,
            client: free_port(),
            peer: free_port(),
            checkpoint: free_port(),
        }
    }

    fn peer(&self) -> Peer {
        Peer {
            id: self.id,
            peer_addr: format!("127.0.0.1:{}", self.peer),
            client_addr: format!("127.0.0.1:{}", self.client),
        }
    }
}

fn config(dir: &std::path::Path, me: &Ports, ring: &[&Ports]) -> Config {
    // Plaintext: not a security test (mutual TLS is tested in client/tests/security*.rs).
    let mut c = Config {
        security: rozone_config::SecuritySection::insecure(),
        ..Config::default()
    };
    c.node.id = me.id;
    c.node.data_dir = dir.join(format!("scm{}", me.id));
    c.scm.client_addr = format!("127.0.0.1:{}", me.client).parse().unwrap();
    c.scm.peer_addr = format!("127.0.0.1:{}", me.peer).parse().unwrap();
    c.scm.checkpoint_addr = format!("127.0.0.1:{}", me.checkpoint).parse().unwrap();
    c.scm.bootstrap_retry_pause = Duration::from_millis(100);
    c.raft.election_timeout_min = Duration::from_millis(300);
    c.raft.election_timeout_max = Duration::from_millis(600);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c.raft.fsync = false;
    c.peers = ring.iter().map(|p| p.peer()).collect();
    c
}

/// Whether a download is staged (in progress) under the follower's state directory.
fn downloading(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir.join("raft").join("sm"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with("staging-"))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn follower_whose_download_failed_is_brought_up_to_date_by_the_new_leader() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2, p3) = (Ports::new(1), Ports::new(2), Ports::new(3));
    let all = [&p1, &p2, &p3];
    let mut c1 = config(dir.path(), &p1, &all);
    c1.startup.init = true;
    let scm1 = ScmServer::start(&c1).await.unwrap();
    let mut c2 = config(dir.path(), &p2, &all);
    c2.startup.bootstrap = true;
    let scm2 = ScmServer::start(&c2).await.unwrap();
    let mut c3 = config(dir.path(), &p3, &all);
    c3.startup.bootstrap = true;
    let scm3 = ScmServer::start(&c3).await.unwrap();

    // A follower refuses the leader-only services, naming the leader.
    let ch = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{}", p2.client))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let e = ScmDatanodeClient::new(ch)
        .heartbeat(pb::HeartbeatRequest {
            datanode_id: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert_eq!(
        rozone_raft::status::leader_hint(&e).as_deref(),
        Some(format!("127.0.0.1:{}", p1.client).as_str())
    );

    // SCM 3 stops; the leader moves on and purges its log past SCM 3's next entry, so it
    // can only offer SCM 3 its checkpoint. SCM 2's log is not purged.
    scm3.stop().await;
    let gen1 = SequenceIdGenerator::new(scm1.group.clone(), 1);
    for _ in 0..20 {
        gen1.next_id(SEQ_CONTAINER_ID).await.unwrap();
    }
    let applied = scm1.group.snapshot_now(WAIT).await.unwrap();
    scm1.group.purge_log(applied).await.unwrap();
    scm1.group
        .wait_for(WAIT, "log purged", move |m| {
            m.purged.as_ref().is_some_and(|p| p.index >= applied)
        })
        .await
        .unwrap();
    scm2.group.wait_applied(applied, WAIT).await.unwrap();
    assert!(scm2
        .group
        .metrics()
        .purged
        .is_none_or(|p| p.index < applied - 20));

    // SCM 3 restarts and starts downloading the leader's checkpoint; the transfer hangs.
    fail::cfg("raft-snapshot-transfer", "pause").unwrap();
    let c3 = config(dir.path(), &p3, &all);
    let scm3 = ScmServer::start(&c3).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !downloading(&c3.node.data_dir) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "SCM 3 never started its download"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The leader stops mid-download; the download then fails (and its retries, against a
    // leader that is gone).
    drop(gen1);
    scm1.stop().await;
    // (A transfer already past its last chunk fails verification instead.)
    fail::cfg("raft-snapshot-verify", "return").unwrap();
    fail::cfg("raft-snapshot-transfer", "return").unwrap();

    // SCM 2 leads with SCM 3 as its only other voter: committing needs SCM 3 to accept
    // appends, so a ready leader means SCM 3 is not stuck.
    scm2.group
        .wait_for(WAIT, "SCM 2 ready leader", rozone_raft::leader_ready)
        .await
        .unwrap();
    let gen2 = SequenceIdGenerator::new(scm2.group.clone(), 1);
    let mut last = 0;
    for _ in 0..5 {
        last = tokio::time::timeout(WAIT, gen2.next_id(SEQ_CONTAINER_ID))
            .await
            .expect("SCM 2 commits while SCM 1 is down")
            .unwrap();
    }
    assert!(last > 20);
    let applied = scm2.group.wait_log_applied(WAIT).await.unwrap();
    scm3.group.wait_applied(applied, WAIT).await.unwrap();
    let row = |r: &ScmServer| state::read::sequence_id(&r.group.db(), SEQ_CONTAINER_ID).unwrap();
    assert_eq!(
        row(&scm3),
        row(&scm2),
        "SCM 3 caught up with the new leader"
    );
    assert_eq!(row(&scm2), Some(last));
    // The cut download (failed, or abandoned with the stopped leader's connection) installed
    // nothing: SCM 3 got there by the new leader's log.
    assert_eq!(
        scm3.group.snapshot_stats().installs,
        0,
        "nothing was installed"
    );
    // And it keeps up.
    let more = tokio::time::timeout(WAIT, gen2.next_id(SEQ_CONTAINER_ID))
        .await
        .expect("SCM 2 still commits")
        .unwrap();
    let applied = scm2.group.wait_log_applied(WAIT).await.unwrap();
    scm3.group.wait_applied(applied, WAIT).await.unwrap();
    assert_eq!(row(&scm3), Some(more));

    fail::cfg("raft-snapshot-transfer", "off").unwrap();
    fail::cfg("raft-snapshot-verify", "off").unwrap();
    drop(gen2);
    scm3.stop().await;
    scm2.stop().await;
    scenario.teardown();
}
