//! Replication of a CLOSED container to a new datanode (equal checksum and BCSID), a
//! transfer cut midway (failpoint) that leaves no partial container, and container reports
//! carrying BCSID and block count for every replica.

mod common;

use common::*;
use rozone_proto::datanode::ContainerState;
use rozone_proto::scm as spb;
use rozone_types::codes::DnCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closed_container_replicates_with_equal_checksum_and_a_cut_transfer_leaves_nothing() {
    let mut c = Cluster::start(3).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let mut l = c.client(leader);
    let blocks: Vec<Vec<u8>> = (1..=3)
        .map(|i| bytes(i, 300_000 + i as usize * 1000))
        .collect();
    for (i, b) in blocks.iter().enumerate() {
        if i == 1 {
            l.stream(1, 3, 2, b, true, None).await.unwrap();
        } else {
            l.write_block(1, 3, i as u64 + 1, b, 64 * 1024)
                .await
                .unwrap();
        }
    }
    for n in &c.nodes {
        c.scm.send(
            n.id,
            spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
                container_id: 3,
                pipeline_id: 1,
                force: false,
            }),
        );
    }
    let mut closed = Vec::new();
    for i in 0..3 {
        let cl = c.client(i);
        closed.push(
            wait_until("CLOSED everywhere", || {
                let mut cl = cl.clone();
                async move {
                    cl.container(3)
                        .await
                        .ok()
                        .filter(|d| d.state == ContainerState::Closed as i32)
                }
            })
            .await,
        );
    }
    assert!(closed
        .windows(2)
        .all(|w| (w[0].bcsid, &w[0].checksum, w[0].block_count)
            == (w[1].bcsid, &w[1].checksum, w[1].block_count)));
    let src = &closed[0];
    assert!(!src.checksum.is_empty());
    assert_eq!(src.block_count, 3);

    // Reports: the SCM sees the BCSID and block count of every replica.
    for n in &c.nodes {
        let id = n.id;
        let scm = c.scm.clone();
        let want = (src.bcsid, src.block_count);
        wait_until("replica reported CLOSED with bcsid and block count", || {
            let scm = scm.clone();
            async move {
                scm.replica(id, 3)
                    .filter(|r| {
                        r.state == spb::ReplicaState::ReplicaClosed as i32
                            && (r.bcsid, r.block_count) == want
                            && !r.checksum.is_empty()
                    })
                    .map(|_| ())
            }
        })
        .await;
    }

    // A new datanode; the first transfer is cut after its first file piece.
    let new = c.add_node().await;
    let new_id = c.nodes[new].id;
    let source = c.nodes[0].details();
    fail::cfg("dn-replication-cut", "return").unwrap();
    let cmd = c.scm.send(
        new_id,
        spb::scm_command::Command::ReplicateContainer(spb::ReplicateContainerCommand {
            container_id: 3,
            sources: vec![source.clone()],
        }),
    );
    let st = c.scm.wait_status(cmd).await;
    assert_eq!(
        st.status,
        spb::command_status::Status::Failed as i32,
        "{st:?}"
    );
    assert!(st.message.contains("cut"), "{}", st.message);
    let e = c.client(new).container(3).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ContainerNotFound));
    let vol = c.nodes[new].volume();
    assert!(
        !vol.join("containers/3").exists(),
        "no partial container directory"
    );
    assert_eq!(
        std::fs::read_dir(vol.join("tmp")).unwrap().count(),
        0,
        "staging removed"
    );
    assert!(c.nodes[new].dn().store.descriptor(3).is_none());
    fail::remove("dn-replication-cut");

    // The retry copies it whole.
    let cmd = c.scm.send(
        new_id,
        spb::scm_command::Command::ReplicateContainer(spb::ReplicateContainerCommand {
            container_id: 3,
            sources: vec![source],
        }),
    );
    let st = c.scm.wait_status(cmd).await;
    assert_eq!(
        st.status,
        spb::command_status::Status::Executed as i32,
        "{st:?}"
    );
    let copy = c.client(new).container(3).await.unwrap();
    assert_eq!(
        (
            copy.state,
            copy.bcsid,
            copy.block_count,
            &copy.checksum,
            copy.used_bytes
        ),
        (
            src.state,
            src.bcsid,
            src.block_count,
            &src.checksum,
            src.used_bytes
        )
    );
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(
            &c.client(new).read_block(3, i as u64 + 1).await.unwrap().0,
            b
        );
    }
    let scm = c.scm.clone();
    wait_until("new replica reported", || {
        let scm = scm.clone();
        let want = (src.bcsid, src.block_count);
        async move {
            scm.replica(new_id, 3)
                .filter(|r| (r.bcsid, r.block_count) == want)
                .map(|_| ())
        }
    })
    .await;

    // An OPEN container is never exported.
    l.write_block(1, 4, 1, b"open", 4096).await.unwrap();
    let cmd = c.scm.send(
        new_id,
        spb::scm_command::Command::ReplicateContainer(spb::ReplicateContainerCommand {
            container_id: 4,
            sources: vec![c.nodes[0].details()],
        }),
    );
    let st = c.scm.wait_status(cmd).await;
    assert_eq!(st.status, spb::command_status::Status::Failed as i32);
    assert!(st.message.contains("only CLOSED"), "{}", st.message);
    c.nodes[new].stop().await;
}
