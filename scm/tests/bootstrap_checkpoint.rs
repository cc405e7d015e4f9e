//! Ozone's HDDS-16899, done right: a joining SCM gets its state only from the leader's
//! checkpoint. The leader's DB holds a sequence-id row its Raft log does not explain; the new
//! SCM's first checkpoint download is cut (failpoint); it retries, joins with the checkpoint,
//! holds every row of the leader, and after a leadership transfer its container ids never
//! collide with ids already handed out. A download that fails for good ends the bootstrap with
//! a clear error and leaves the ring's membership unchanged.

use std::collections::BTreeSet;
use std::time::Duration;

use rozone_config::Peer;
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
    c.scm.bootstrap_attempts = 3;
    c.scm.bootstrap_retry_pause = Duration::from_millis(100);
    c.raft.election_timeout_min = Duration::from_millis(300);
    c.raft.election_timeout_max = Duration::from_millis(600);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c.peers = ring.iter().map(|p| p.peer()).collect();
    c
}

fn seq_row(ring: &ScmServer) -> Option<u64> {
    state::read::sequence_id(&ring.group.db(), SEQ_CONTAINER_ID).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bootstrap_retries_failed_checkpoint_download_and_never_replays_log() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (Ports::new(1), Ports::new(2));
    let mut c1 = config(dir.path(), &p1, &[&p1, &p2]);
    c1.startup.init = true;
    let scm1 = ScmServer::start(&c1).await.unwrap();

    // Ids handed out through the log...
    let gen1 = SequenceIdGenerator::new(scm1.group.clone(), 10);
    let mut issued = BTreeSet::new();
    for _ in 0..5 {
        issued.insert(gen1.next_id(SEQ_CONTAINER_ID).await.unwrap());
    }
    // ...and a row the log does not explain (an upgraded or seeded cluster): containers up
    // to 1005 exist that the log never allocated.
    let db = scm1.group.db();
    db.put_cf(
        rozone_kv::cf(&db, state::CF_SEQUENCE_IDS).unwrap(),
        SEQ_CONTAINER_ID,
        rozone_raft::codec::encode(&1005u64).unwrap(),
    )
    .unwrap();
    drop(db);
    issued.extend(1..=1005);
    assert!(
        scm1.group.metrics().purged.is_none(),
        "the leader's log still starts at 1: joining by replay would be possible"
    );

    // The first checkpoint download is cut midway; the retry goes through.
    fail::cfg("raft-snapshot-transfer", "1*return->off").unwrap();
    let mut c2 = config(dir.path(), &p2, &[&p1, &p2]);
    c2.startup.bootstrap = true;
    let scm2 = ScmServer::start(&c2).await.unwrap();
    assert_eq!(
        seq_row(&scm2),
        Some(1005),
        "the joined SCM holds the leader's row"
    );

    let voters: BTreeSet<u64> = scm1
        .group
        .metrics()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    assert_eq!(voters, BTreeSet::from([1, 2]));

    // Leadership moves to the new SCM; its fresh generator never reissues an id.
    gen1.invalidate();
    scm1.group.transfer_leader(2).await.unwrap();
    scm2.group
        .wait_for(WAIT, "scm2 leads", rozone_raft::leader_ready)
        .await
        .unwrap();
    let gen2 = SequenceIdGenerator::new(scm2.group.clone(), 10);
    for _ in 0..25 {
        let id = gen2.next_id(SEQ_CONTAINER_ID).await.unwrap();
        assert!(issued.insert(id), "container id {id} issued twice");
    }
    let applied = scm2.group.wait_log_applied(WAIT).await.unwrap();
    scm1.group.wait_applied(applied, WAIT).await.unwrap();
    assert_eq!(seq_row(&scm1), seq_row(&scm2), "rows equal on both SCMs");

    drop((gen1, gen2));
    scm2.stop().await;
    scm1.stop().await;
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bootstrap_with_download_failing_for_good_exits_with_clear_error_and_changes_nothing() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (Ports::new(1), Ports::new(2));
    let mut c1 = config(dir.path(), &p1, &[&p1, &p2]);
    c1.startup.init = true;
    let scm1 = ScmServer::start(&c1).await.unwrap();
    let before = scm1.group.metrics().membership_config.clone();

    fail::cfg("raft-snapshot-transfer", "return").unwrap();
    let mut c2 = config(dir.path(), &p2, &[&p1, &p2]);
    c2.startup.bootstrap = true;
    let err = match ScmServer::start(&c2).await {
        Ok(_) => panic!("bootstrap must fail without the checkpoint"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("checkpoint download"), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{}", p1.checkpoint)),
        "names the leader's checkpoint address: {err}"
    );
    assert_eq!(scm1.group.metrics().membership_config, before);
    scm1.stop().await;
    scenario.teardown();
}
