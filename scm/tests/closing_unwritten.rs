//! A container the SCM opened for a block nobody wrote goes CLOSING; no datanode holds it,
//! so no replica ever reports CLOSED. The SCM closes it as empty once it has looked
//! unwritten for `scm.replication_inflight_timeout` (never sooner: a first write may still
//! be in flight), counts it in `rozone_scm_containers_closed_empty_total`, and the
//! empty-container deletion takes it to DELETED. Real SCM, three real datanodes.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rozone_datanode::{Config as DnConfig, Datanode};
use rozone_proto::scm as pb;

fn dn_config(dir: &std::path::Path, id: u64, scm: std::net::SocketAddr) -> DnConfig {
    // Plaintext: not a security test (mutual TLS is tested in client/tests/security*.rs).
    let mut c = DnConfig {
        security: rozone_config::SecuritySection::insecure(),
        ..DnConfig::default()
    };
    c.node.id = id;
    c.node.data_dir = dir.join(format!("dn{id}"));
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    c.datanode.container_addr = any;
    c.datanode.raft_addr = any;
    c.datanode.replication_addr = any;
    c.http.addr = any;
    c.datanode.scm_addrs = vec![scm.to_string()];
    c.datanode.heartbeat_interval = Duration::from_millis(100);
    c.datanode.container_report_interval = Duration::from_secs(1);
    c.datanode.sync_writes = false;
    c.raft.fsync = false;
    c.raft.election_timeout_min = Duration::from_millis(1500);
    c.raft.election_timeout_max = Duration::from_millis(3000);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c
}

async fn state_of(c: &mut Clients, cid: u64) -> i32 {
    c.admin
        .container_info(pb::ContainerInfoRequest { container_id: cid })
        .await
        .unwrap()
        .into_inner()
        .container
        .unwrap()
        .state
}

/// Fails on main (f8c0b01): nothing closed a CLOSING container no replica reports, so it
/// stayed CLOSING ("timed out waiting for the container to leave CLOSING").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_closing_container_never_written_is_closed_empty_after_the_wait_then_deleted() {
    let wait = Duration::from_secs(3);
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |c| {
        c.scm.safe_mode_min_datanodes = 3;
        c.scm.replication_inflight_timeout = wait;
    })
    .await;
    let mut c = clients(&scm).await;
    let mut dns = Vec::new();
    for id in 1..=3 {
        let d = Datanode::start(&dn_config(dir.path(), id, scm.client_addr))
            .await
            .expect("start datanode");
        dns.push(d);
    }

    // A block handed out and never written: the container exists only in the SCM.
    let b = eventually!("a block", {
        c.block
            .allocate_block(pb::AllocateBlockRequest {
                count: 1,
                owner: "om1".into(),
                ..Default::default()
            })
            .await
            .ok()
    })
    .into_inner()
    .blocks
    .remove(0);
    let cid = b.block_id.unwrap().container_id;
    c.admin
        .close_container(pb::CloseContainerRequest { container_id: cid })
        .await
        .unwrap();
    let closing = Instant::now();
    assert_eq!(
        state_of(&mut c, cid).await,
        pb::ContainerState::ContainerClosing as i32
    );

    let left = eventually!("the container to leave CLOSING", {
        let s = state_of(&mut c, cid).await;
        (s != pb::ContainerState::ContainerClosing as i32).then(|| (s, closing.elapsed()))
    });
    // Not before it looked unwritten for the whole wait: a write may have been in flight.
    assert!(left.1 >= wait, "closed after {:?}, before the wait", left.1);
    assert_ne!(left.0, pb::ContainerState::ContainerOpen as i32);
    assert_eq!(
        scm.node
            .counters
            .containers_closed_empty
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // The empty-container deletion takes it from there.
    eventually!("container DELETED", {
        (state_of(&mut c, cid).await == pb::ContainerState::ContainerDeleted as i32).then_some(())
    });
    for d in &dns {
        assert!(
            d.store.descriptor(cid).is_none(),
            "datanode {} holds container {cid}",
            d.node_id
        );
    }
    for d in dns {
        d.stop().await;
    }
    scm.stop().await;
}
