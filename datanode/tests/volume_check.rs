//! A volume whose filesystem hangs (statvfs never answers: a dead disk, a hung mount) is
//! marked failed once `datanode.volume_check_timeout` passes and reported to the SCM like
//! any failed volume (its replicas reported lost), while the datanode keeps heartbeating
//! and answering. The `dn-statvfs-hang` failpoint (payload: the volume's path) hangs
//! statvfs on that volume until it is removed.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rozone_proto::scm as spb;
use rozone_types::codes::DnCode;

/// Fails on main (f8c0b01, run with this file minus the `volume_check_timeout` tweak, a key
/// main lacks): statvfs ran inline in each node report and nothing bounded it, so nothing
/// ever reported the hung volume failed (the wait for `failed` times out).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_volume_is_reported_failed_within_the_check_timeout_and_the_node_keeps_answering() {
    let timeout = Duration::from_millis(500);
    let c = Cluster::start_with(1, |cfg| cfg.datanode.volume_check_timeout = timeout).await;
    let id = c.nodes[0].id;
    let leader = c.create_pipeline(1, &[0]).await;
    let mut l = c.client(leader);
    l.write_block(1, 1, 1, b"before the disk hung", 4096)
        .await
        .unwrap();
    c.scm
        .wait_volume(id, "volume reported healthy", |v| {
            !v.failed && v.capacity > 0
        })
        .await;

    let hung = Instant::now();
    fail::cfg(
        "dn-statvfs-hang",
        &format!("return({})", c.nodes[0].volume().display()),
    )
    .unwrap();
    c.scm
        .wait_volume(id, "volume reported failed", |v| v.failed)
        .await;
    let took = hung.elapsed();
    // One check interval (the heartbeat, 100 ms) + the timeout + one heartbeat, with room
    // for a loaded machine; far below the 30 s the wait allows.
    assert!(took < timeout + Duration::from_secs(5), "took {took:?}");
    // Its replica is reported lost, as for any failed volume.
    wait_until("replica 1 reported lost", || async {
        c.scm
            .replica(id, 1)
            .filter(|r| r.state == spb::ReplicaState::ReplicaDeleted as i32)
    })
    .await;

    // The node still heartbeats and answers, promptly, while statvfs stays hung.
    let beats = c.scm.state().heartbeats;
    wait_until("heartbeats after the volume failed", || async {
        (c.scm.state().heartbeats >= beats + 3).then_some(())
    })
    .await;
    let quick = Duration::from_secs(5);
    let (status, metrics) =
        tokio::time::timeout(quick, http_get(c.nodes[0].dn().http_addr, "/metrics"))
            .await
            .expect("/metrics answered");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("rozone_datanode_capacity_bytes"),
        "{metrics}"
    );
    let e = tokio::time::timeout(quick, l.read_block(1, 1))
        .await
        .expect("a read answered")
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::IoError), "{e:?}");
    assert!(
        c.nodes[0].dn().store.volumes()[0].is_failed(),
        "failed for the life of the process"
    );
    // Lets the stuck check thread finish.
    fail::remove("dn-statvfs-hang");
}
