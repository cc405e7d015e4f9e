//! Container deletion (issue 13, item 5) through a real SCM and three real datanodes (in
//! process, real gRPC, real RocksDB): a block is written and committed, the container is
//! closed, the block is deleted (SCM deleted-block transaction executed by every replica);
//! the SCM then moves the empty CLOSED container to DELETING, the datanodes delete their
//! replicas (tombstone kept, files removed), and the container ends DELETED. A late report
//! of a replica does not bring it back (the datanode is told to delete it), and a write to
//! the deleted container is refused on every datanode.

mod common;

use std::time::Duration;

use common::*;
use rozone_datanode::{Config as DnConfig, Datanode};
use rozone_proto::datanode as dpb;
use rozone_proto::datanode::container_client::ContainerClient;
use rozone_proto::scm as pb;
use rozone_proto::scm::scm_command::Command;
use rozone_proto::scm::ReplicaState as R;
use rozone_types::checksum::{ChecksumData, ChecksumType};
use rozone_types::codes::{dn_result, DnCode};
use tonic::transport::Channel;

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

fn client(addr: std::net::SocketAddr) -> ContainerClient<Channel> {
    ContainerClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_lazy(),
    )
}

fn chunk(data: &[u8]) -> dpb::ChunkInfo {
    dpb::ChunkInfo {
        offset: 0,
        len: data.len() as u64,
        checksum: Some((&ChecksumData::compute(ChecksumType::Crc32c, 4096, data)).into()),
    }
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

/// Fails on 15e8a35 (main): nothing moved an empty CLOSED container on, so it stayed
/// CLOSED ("timed out waiting for container DELETED"), its replicas and files kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_emptied_closed_container_is_deleted_everywhere_and_stays_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |c| c.scm.safe_mode_min_datanodes = 3).await;
    let mut c = clients(&scm).await;
    let mut dns = Vec::new();
    for id in 1..=3 {
        let d = Datanode::start(&dn_config(dir.path(), id, scm.client_addr))
            .await
            .expect("start datanode");
        dns.push(d);
    }

    // A block, written and committed through the pipeline's leader.
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
    let (cid, lid) = {
        let id = b.block_id.unwrap();
        (id.container_id, id.local_id)
    };
    let pid = b.pipeline.unwrap().id;
    let data = b"a block that is deleted later".to_vec();
    let block = dpb::BlockId {
        container_id: cid,
        local_id: lid,
    };
    eventually!("the block written through the pipeline leader", {
        let mut done = None;
        for d in &dns {
            let mut cl = client(d.container_addr);
            let w = cl
                .write_chunk(dpb::WriteChunkRequest {
                    pipeline_id: pid,
                    block_id: Some(block),
                    chunk: Some(chunk(&data)),
                    data: data.clone(),
                })
                .await;
            if w.is_err() {
                continue;
            }
            let p = cl
                .put_block(dpb::PutBlockRequest {
                    pipeline_id: pid,
                    block: Some(dpb::BlockData {
                        block_id: Some(block),
                        chunks: vec![chunk(&data)],
                        length: data.len() as u64,
                        bcsid: 0,
                    }),
                })
                .await;
            if p.is_ok() {
                done = Some(());
                break;
            }
        }
        done
    });

    // Closed, then its one block deleted: every replica empty.
    c.admin
        .close_container(pb::CloseContainerRequest { container_id: cid })
        .await
        .unwrap();
    eventually!("container CLOSED", {
        (state_of(&mut c, cid).await == pb::ContainerState::ContainerClosed as i32).then_some(())
    });
    for d in &dns {
        let desc = d.store.descriptor(cid).expect("a replica on every member");
        assert_eq!(desc.block_count, 1);
    }
    c.block
        .delete_blocks(pb::DeleteBlocksRequest {
            blocks: vec![pb::BlockId {
                container_id: cid,
                local_id: lid,
            }],
        })
        .await
        .unwrap();

    // The SCM deletes it: DELETING, delete commands, DELETED once no replica remains.
    eventually!("container DELETED", {
        (state_of(&mut c, cid).await == pb::ContainerState::ContainerDeleted as i32).then_some(())
    });
    for d in &dns {
        let desc = d.store.descriptor(cid).expect("a tombstone");
        assert_eq!(
            desc.state,
            rozone_datanode::types::ContainerState::Deleted,
            "datanode {}",
            d.node_id
        );
        let cdir = d
            .store
            .volume_root(0)
            .join("containers")
            .join(cid.to_string());
        assert!(!cdir.exists(), "{} still there", cdir.display());
    }
    let info = c
        .admin
        .container_info(pb::ContainerInfoRequest { container_id: cid })
        .await
        .unwrap()
        .into_inner();
    assert!(info.replicas.is_empty(), "{:?}", info.replicas);

    // No way back: a write is refused by the tombstones, and a late report of a replica is
    // answered with a delete command while the container stays DELETED.
    let mut refusals = Vec::new();
    for d in &dns {
        let e = client(d.container_addr)
            .write_chunk(dpb::WriteChunkRequest {
                pipeline_id: pid,
                block_id: Some(dpb::BlockId {
                    container_id: cid,
                    local_id: lid + 1,
                }),
                chunk: Some(chunk(&data)),
                data: data.clone(),
            })
            .await
            .unwrap_err();
        refusals.push(dn_result(&e));
    }
    // The pipeline's leader refuses for the tombstone; the others send the client to it.
    assert!(
        refusals.contains(&Some(DnCode::ContainerNotFound)),
        "{refusals:?}"
    );
    let mut late = FakeDn::new(9, &c);
    late.register(vec![replica(cid, R::ReplicaClosed, 1, 1)])
        .await;
    eventually!("a delete command for the late replica", {
        late.beat().await;
        (!late
            .got(|x| matches!(x, Command::DeleteContainer(d) if d.container_id == cid))
            .is_empty())
        .then_some(())
    });
    assert_eq!(
        state_of(&mut c, cid).await,
        pb::ContainerState::ContainerDeleted as i32
    );
    for d in dns {
        d.stop().await;
    }
    scm.stop().await;
}
