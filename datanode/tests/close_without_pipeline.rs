//! A container whose pipeline is gone is still closed: the SCM's close quasi-closes each
//! replica with the BCSID it applied, and a forced close (the SCM chose that replica) turns
//! a quasi-closed replica CLOSED. Before, a close without the pipeline was refused with
//! PIPELINE_NOT_FOUND and a forced one left a quasi-closed replica as it was, so such
//! containers stayed CLOSING for good (RELIABILITY.md, finding 2).
//!
//! Run against the code before the fix (7a74ba1): the first close was reported FAILED
//! ("PIPELINE_NOT_FOUND: this datanode is not a member of pipeline 1"), so the test failed
//! at its first status check.

mod common;

use common::*;
use rozone_proto::datanode as pb;
use rozone_proto::scm as spb;
use spb::command_status::Status as St;
use spb::scm_command::Command as Cmd;

fn close(container_id: u64, pipeline_id: u64, force: bool) -> Cmd {
    Cmd::CloseContainer(spb::CloseContainerCommand {
        container_id,
        pipeline_id,
        force,
    })
}

/// Sends `cmd` to every node and requires each to report it EXECUTED.
async fn run_everywhere(c: &Cluster, cmd: Cmd, what: &str) {
    let ids: Vec<u64> = c
        .nodes
        .iter()
        .map(|n| c.scm.send(n.id, cmd.clone()))
        .collect();
    for id in ids {
        let st = c.scm.wait_status(id).await;
        assert_eq!(st.status, St::Executed as i32, "{what}: {st:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_container_whose_pipeline_closed_is_quasi_closed_then_force_closed() {
    let c = Cluster::start(3).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let data = bytes(11, 20_000);
    c.client(leader)
        .write_block(1, 1, 1, &data, 4096)
        .await
        .unwrap();
    for i in 0..3 {
        c.wait_caught_up(1, leader, i).await;
    }
    let bcsid = c.client(leader).container(1).await.unwrap().bcsid;
    assert!(bcsid > 0);

    run_everywhere(
        &c,
        Cmd::ClosePipeline(spb::ClosePipelineCommand { pipeline_id: 1 }),
        "close pipeline",
    )
    .await;
    run_everywhere(&c, close(1, 1, false), "close without the pipeline").await;
    for i in 0..3 {
        let d = c.client(i).container(1).await.unwrap();
        assert_eq!(d.state, pb::ContainerState::QuasiClosed as i32, "node {i}");
        assert_eq!(d.bcsid, bcsid, "node {i} keeps the BCSID it applied");
    }
    // The replica report says so too: the SCM decides on it.
    let reported = wait_until("a QUASI_CLOSED replica report from node 0", || async {
        c.scm
            .replica(c.nodes[0].id, 1)
            .filter(|r| r.state == spb::ReplicaState::ReplicaQuasiClosed as i32)
    })
    .await;
    assert_eq!(reported.bcsid, bcsid);

    // The SCM chose node 0's replica: forced, it turns CLOSED; the others stay quasi-closed.
    let id = c.scm.send(c.nodes[0].id, close(1, 0, true));
    assert_eq!(c.scm.wait_status(id).await.status, St::Executed as i32);
    let d = c.client(0).container(1).await.unwrap();
    assert_eq!(d.state, pb::ContainerState::Closed as i32);
    assert_eq!(d.bcsid, bcsid);
    assert!(
        !d.checksum.is_empty(),
        "a closed replica carries its checksum"
    );
    let d1 = c.client(1).container(1).await.unwrap();
    assert_eq!(d1.state, pb::ContainerState::QuasiClosed as i32);
    assert_eq!(
        d1.checksum, d.checksum,
        "the same blocks, the same checksum"
    );
    let (read, _) = c.client(0).read_block(1, 1).await.unwrap();
    assert_eq!(read, data);

    // Repeats change nothing, and a close for a container a node never held is a no-op.
    run_everywhere(&c, close(1, 1, false), "repeated close").await;
    run_everywhere(&c, close(77, 1, false), "close of a container never held").await;
    assert_eq!(
        c.client(0).container(1).await.unwrap().state,
        pb::ContainerState::Closed as i32
    );
    assert!(
        c.client(0).container(77).await.is_err(),
        "container 77 appeared"
    );
}
