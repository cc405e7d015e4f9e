//! Three datanodes form a pipeline on SCM command; blocks written through the leader are
//! on every replica with identical bytes and BCSIDs; a follower killed and restarted
//! catches up (including a container created while it was down).

mod common;

use common::*;
use rozone_types::codes::DnCode;

async fn assert_same_everywhere(c: &Cluster, members: &[usize], blocks: &[(u64, u64, &[u8])]) {
    for &(cid, lid, data) in blocks {
        let mut seen = None;
        for &i in members {
            let cl = c.client(i);
            let (got, bcsid) = wait_until(&format!("block {cid}/{lid} on node {}", i + 1), || {
                let mut cl = cl.clone();
                async move { cl.read_block(cid, lid).await.ok() }
            })
            .await;
            assert_eq!(got, data, "bytes of {cid}/{lid} on node {}", i + 1);
            match seen {
                None => seen = Some(bcsid),
                Some(b) => assert_eq!(b, bcsid, "bcsid of {cid}/{lid} on node {}", i + 1),
            }
        }
    }
    let cids: std::collections::BTreeSet<u64> = blocks.iter().map(|b| b.0).collect();
    for cid in cids {
        let mut descs = Vec::new();
        for &i in members {
            let d = c.client(i).container(cid).await.unwrap();
            descs.push((d.state, d.bcsid, d.block_count, d.used_bytes));
        }
        assert!(
            descs.windows(2).all(|w| w[0] == w[1]),
            "container {cid} differs: {descs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocks_written_through_the_leader_are_identical_on_every_replica_and_a_restarted_follower_catches_up(
) {
    let mut c = Cluster::start(3).await;
    let all = [0, 1, 2];
    let leader = c.create_pipeline(1, &all).await;
    let follower = (leader + 1) % 3;

    // A write sent to a follower is refused with a hint naming the leader.
    let mut f = c.client(follower);
    let e = f.write_chunk(1, 1, 1, 0, b"x").await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::NotLeader), "{e:?}");
    assert_eq!(
        rozone_rpc::leader_hint(&e).as_deref(),
        Some(c.nodes[leader].container_addr().as_str())
    );

    let mut l = c.client(leader);
    let b1 = bytes(1, 100_000);
    let b2 = bytes(2, 70_000);
    l.write_block(1, 1, 1, &b1, 32 * 1024).await.unwrap();
    let r = l.stream(1, 1, 2, &b2, true, None).await.unwrap();
    assert_eq!(r.block.unwrap().length, b2.len() as u64);
    assert_same_everywhere(&c, &all, &[(1, 1, &b1), (1, 2, &b2)]).await;

    // Kill a follower; write more, including a new container it has never seen.
    c.nodes[follower].stop().await;
    let b3 = bytes(3, 50_000);
    let b4 = bytes(4, 90_000);
    let b5 = bytes(5, 10_000);
    l.write_block(1, 1, 3, &b3, 20_000).await.unwrap();
    let s = l.stream(1, 1, 4, &b4, false, None).await.unwrap();
    l.put_block(1, 1, 4, vec![s.chunk.unwrap()]).await.unwrap();
    l.write_block(1, 2, 1, &b5, 4096).await.unwrap();
    c.nodes[follower].start().await;
    c.wait_caught_up(1, leader, follower).await;
    assert_same_everywhere(
        &c,
        &all,
        &[
            (1, 1, &b1),
            (1, 2, &b2),
            (1, 3, &b3),
            (1, 4, &b4),
            (2, 1, &b5),
        ],
    )
    .await;

    // HTTP: ready once registered; metrics show the pipeline and the containers.
    let (status, _) = http_get(c.nodes[leader].dn().http_addr, "/ready").await;
    assert_eq!(status, 200);
    let (_, m) = http_get(c.nodes[leader].dn().http_addr, "/metrics").await;
    assert!(m.contains("rozone_datanode_pipelines 1"), "{m}");
    assert!(m.contains("rozone_datanode_containers_open 2"), "{m}");

    // The SCM sees every replica with its BCSID and block count.
    for n in &c.nodes {
        let id = n.id;
        let d = n.dn().store.descriptor(1).unwrap();
        wait_until("container report", || {
            let scm = c.scm.clone();
            let d = d.clone();
            async move {
                scm.replica(id, 1)
                    .filter(|r| r.bcsid == d.bcsid && r.block_count == 4)
                    .map(|_| ())
            }
        })
        .await;
    }
}
