//! Bad input to the SCM's services: unknown container ids, invalid states and transitions,
//! malformed requests (missing fields, count 0, unknown enum values) get clear gRPC errors,
//! and nothing changes.

mod common;

use common::*;
use rozone_proto::scm as pb;
use rozone_scm::state::{self, ContainerEvent, ScmRequest};
use tonic::Code;

fn assert_err<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, text: &str) {
    let e = r.expect_err("must be refused");
    assert_eq!(e.code(), code, "{e:?}");
    assert!(
        e.message().contains(text),
        "{:?} should mention {text:?}",
        e.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_are_refused_clearly_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |_| {}).await;
    let mut c = clients(&scm).await;
    let mut dns: Vec<FakeDn> = (1..=3).map(|i| FakeDn::new(i, &c)).collect();
    for d in &mut dns {
        d.register(vec![]).await;
    }
    let block = eventually!("a block", {
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
    let cid = block.block_id.unwrap().container_id;
    let db_rows = |scm: &rozone_scm::server::ScmServer| {
        let db = scm.group.db();
        (
            state::read::containers(&db, None).unwrap(),
            state::read::pipelines(&db).unwrap(),
            state::read::pending_deleted_blocks(&db, 100).unwrap(),
        )
    };
    let before = db_rows(&scm);

    // Unknown and zero container ids.
    let info = |id| pb::ContainerInfoRequest { container_id: id };
    assert_err(
        c.admin.container_info(info(9999)).await,
        Code::NotFound,
        "container 9999 does not exist",
    );
    assert_err(
        c.admin.container_info(info(0)).await,
        Code::InvalidArgument,
        "container_id must be above 0",
    );
    assert_err(
        c.admin
            .close_container(pb::CloseContainerRequest { container_id: 9999 })
            .await,
        Code::NotFound,
        "container 9999",
    );
    // Deleting blocks of an unknown container queues nothing, even with a known one next to it.
    let blocks = vec![
        pb::BlockId {
            container_id: cid,
            local_id: 1,
        },
        pb::BlockId {
            container_id: 9999,
            local_id: 2,
        },
    ];
    assert_err(
        c.block
            .delete_blocks(pb::DeleteBlocksRequest { blocks })
            .await,
        Code::NotFound,
        "container 9999",
    );
    assert_err(
        c.block
            .delete_blocks(pb::DeleteBlocksRequest { blocks: vec![] })
            .await,
        Code::InvalidArgument,
        "blocks must hold",
    );
    assert_err(
        c.block
            .delete_blocks(pb::DeleteBlocksRequest {
                blocks: vec![pb::BlockId {
                    container_id: cid,
                    local_id: 0,
                }],
            })
            .await,
        Code::InvalidArgument,
        "local_id must be above 0",
    );

    // Invalid states and paging.
    let list = |state, limit| pb::ListContainersRequest {
        state,
        start_after: 0,
        limit,
    };
    assert_err(
        c.admin.list_containers(list(Some(0), 0)).await,
        Code::InvalidArgument,
        "not a container state",
    );
    assert_err(
        c.admin.list_containers(list(Some(77), 0)).await,
        Code::InvalidArgument,
        "77 is not a container state",
    );
    assert_err(
        c.admin.list_containers(list(None, 5000)).await,
        Code::InvalidArgument,
        "limit must be at most 1000",
    );
    assert_err(
        c.admin
            .list_pipelines(pb::ListPipelinesRequest { state: Some(9) })
            .await,
        Code::InvalidArgument,
        "not a pipeline state",
    );

    // Malformed allocation requests.
    let alloc = |count, size, owner: &str| pb::AllocateBlockRequest {
        size,
        count,
        owner: owner.into(),
        ..Default::default()
    };
    assert_err(
        c.block.allocate_block(alloc(0, 0, "om1")).await,
        Code::InvalidArgument,
        "count must be 1..=1000, got 0",
    );
    assert_err(
        c.block.allocate_block(alloc(1, 5 << 20, "om1")).await,
        Code::InvalidArgument,
        "exceeds the SCM block size",
    );
    assert_err(
        c.block.allocate_block(alloc(1, 0, "")).await,
        Code::InvalidArgument,
        "owner is missing",
    );

    // Malformed datanode requests.
    assert_err(
        c.dn.register(pb::RegisterRequest::default()).await,
        Code::InvalidArgument,
        "datanode is missing",
    );
    let mut reg = pb::RegisterRequest {
        datanode: Some(details(7)),
        ..Default::default()
    };
    reg.datanode.as_mut().unwrap().raft_addr.clear();
    assert_err(
        c.dn.register(reg).await,
        Code::InvalidArgument,
        "datanode 7: raft_addr is missing",
    );
    let beat = |replicas: Vec<pb::ContainerReplica>| pb::HeartbeatRequest {
        datanode_id: 1,
        incremental_container_report: replicas,
        ..Default::default()
    };
    let mut bad = replica(cid, pb::ReplicaState::ReplicaClosed, 5, 5);
    bad.state = 42;
    assert_err(
        c.dn.heartbeat(beat(vec![bad])).await,
        Code::InvalidArgument,
        "unknown replica state 42",
    );
    // A good replica next to a bad one is not taken either.
    let good = replica(cid, pb::ReplicaState::ReplicaClosed, 5, 5);
    let mut unset = good.clone();
    unset.state = 0;
    assert_err(
        c.dn.heartbeat(beat(vec![good, unset])).await,
        Code::InvalidArgument,
        "replica state is missing",
    );
    assert_err(
        c.dn.heartbeat(pb::HeartbeatRequest::default()).await,
        Code::InvalidArgument,
        "datanode_id must be above 0",
    );
    let info_now = c
        .admin
        .container_info(info(cid))
        .await
        .unwrap()
        .into_inner();
    assert!(
        info_now.replicas.is_empty(),
        "no replica was recorded: {info_now:?}"
    );

    // Invalid transitions: a DELETING container cannot be closed; leader transfer needs a voter.
    scm.group
        .write(ScmRequest::UpdateContainer {
            id: cid,
            event: ContainerEvent::Finalize,
        })
        .await
        .unwrap();
    scm.group
        .write(ScmRequest::UpdateContainer {
            id: cid,
            event: ContainerEvent::Close,
        })
        .await
        .unwrap();
    scm.group
        .write(ScmRequest::UpdateContainer {
            id: cid,
            event: ContainerEvent::Delete,
        })
        .await
        .unwrap();
    let deleting = db_rows(&scm);
    assert_err(
        c.admin
            .close_container(pb::CloseContainerRequest { container_id: cid })
            .await,
        Code::FailedPrecondition,
        &format!("container {cid} is DELETING"),
    );
    assert_err(
        c.admin
            .transfer_leader(pb::TransferLeaderRequest { node_id: 0 })
            .await,
        Code::InvalidArgument,
        "node_id must be above 0",
    );
    assert_err(
        c.admin
            .transfer_leader(pb::TransferLeaderRequest { node_id: 42 })
            .await,
        Code::InvalidArgument,
        "SCM 42 is not a voter",
    );
    assert_eq!(db_rows(&scm), deleting, "refusals changed nothing");
    assert_eq!(before.1, deleting.1);
    assert_eq!(before.2, deleting.2);
    scm.stop().await;
}
