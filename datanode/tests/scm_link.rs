//! The SCM link: a datanode follows the leader hint of a refusing SCM to an SCM it was not
//! configured with, and registers again when the SCM asks (e.g. a new leader that does not
//! know it), with a full container report.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_leader_hints_and_reregisters_when_asked() {
    let c = Cluster::start(1).await;
    c.create_pipeline(1, &[0]).await;
    c.client(0)
        .write_block(1, 9, 1, b"abc", 4096)
        .await
        .unwrap();

    // The configured SCM stops leading and points at another one.
    let (other, other_addr) = FakeScm::serve().await;
    c.scm.state().refuse_with_hint = Some(other_addr.clone());
    wait_until("registered with the hinted SCM", || {
        let o = other.clone();
        async move { o.state().registered.contains_key(&1).then_some(()) }
    })
    .await;
    assert!(
        other.replica(1, 9).is_some_and(|r| r.block_count == 1),
        "full report at registration"
    );

    // That SCM forgets the datanode (a new leader): it registers again.
    other.state().registered.clear();
    other.state().replicas.clear();
    wait_until("registered again", || {
        let o = other.clone();
        async move { o.state().registered.contains_key(&1).then_some(()) }
    })
    .await;
    wait_until("full report again", || {
        let o = other.clone();
        async move { o.replica(1, 9).map(|_| ()) }
    })
    .await;
}
