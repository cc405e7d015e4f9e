//! A pipeline directory that cannot be opened never stops a datanode from starting
//! (RELIABILITY.md, finding 6: a closed pipeline's half-removed log made every start fail).
//!
//! Fails on the code before the fix (checked on 2026-12-07 at fb638ec, the test cut at the
//! restart since `Pipelines::broken` did not exist): the restarted datanode's `reopen_all`
//! opened the damaged log, `Datanode::start` failed with "storage: rocksdb: IO error: No
//! such file or directory ... raft/log/MANIFEST-999999", and `Node::start` panicked.

mod common;

use common::{wait_until, Cluster};
use rozone_proto::scm as spb;

/// Damages pipeline 1's log on one member, as the seed-43 chaos run left it, and plants
/// what a cut-short close and a cut-short create leave. The member restarts, serves again,
/// asks the SCM to close pipeline 1, and removes the leftovers; the SCM's close removes the
/// set-aside directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pipeline_that_cannot_be_opened_is_set_aside_and_the_datanode_starts() {
    let mut c = Cluster::start(3).await;
    c.create_pipeline(1, &[0, 1, 2]).await;
    let root = c.nodes[0].config.node.data_dir.join("pipelines");
    c.nodes[0].stop().await;

    // The log's CURRENT names a manifest that does not exist: RocksDB refuses to open it.
    std::fs::write(root.join("1/raft/log/CURRENT"), "MANIFEST-999999\n").unwrap();
    // A close cut short, and a create cut short before its pipeline.json.
    std::fs::create_dir_all(root.join(".closed-7/raft")).unwrap();
    std::fs::create_dir_all(root.join("8/raft")).unwrap();

    c.nodes[0].start().await;
    let dn = c.nodes[0].id;
    assert!(c.nodes[0].dn().pipelines.get(1).is_err());
    assert!(root.join(".broken-1").is_dir(), "set aside");
    assert!(!root.join("1").exists());
    assert!(!root.join(".closed-7").exists(), "tombstone removed");
    assert!(
        !root.join("8").exists(),
        "directory without pipeline.json removed"
    );

    let reason = wait_until("a CLOSE action for pipeline 1", || async {
        let s = c.scm.state();
        s.actions
            .iter()
            .find(|(d, a)| *d == dn && a.pipeline_id == 1)
            .map(|(_, a)| (a.action, a.reason.clone()))
    })
    .await;
    assert_eq!(reason.0, spb::pipeline_action::Action::Close as i32);
    assert!(reason.1.contains("cannot be opened"), "{}", reason.1);

    // The SCM closes it: the set-aside directory goes, and the actions stop.
    let cmd = c.scm.send(
        dn,
        spb::scm_command::Command::ClosePipeline(spb::ClosePipelineCommand { pipeline_id: 1 }),
    );
    c.scm.wait_status(cmd).await;
    assert!(!root.join(".broken-1").exists());
    assert!(c.nodes[0].dn().pipelines.broken().is_empty());

    // The other members' pipeline is untouched; a new pipeline on this node works.
    assert!(c.nodes[1].dn().pipelines.get(1).is_ok());
    c.create_pipeline(2, &[0, 1, 2]).await;
}
