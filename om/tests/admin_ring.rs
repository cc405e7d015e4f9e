//! `OmAdmin` against three real OMs over gRPC and RocksDB: leader transfer moves leadership
//! (and writes follow it), decommission removes a follower from the ring while writes keep
//! committing, and every refusal (unknown node, the leader itself, a removal that leaves no
//! reachable quorum, a call to a follower) is clear and changes nothing.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use rozone_client::om::OmClient;
use rozone_proto::om as pb;
use tonic::Code;

async fn roles(ring: &Ring, id: u64) -> pb::RolesReply {
    admin_client(&ring.addr(id))
        .await
        .roles(pb::RolesRequest {})
        .await
        .unwrap_or_else(|e| panic!("Roles on OM {id}: {e:?}"))
        .into_inner()
}

async fn transfer(ring: &Ring, at: u64, to: u64) -> Result<(), tonic::Status> {
    admin_client(&ring.addr(at))
        .await
        .transfer_leader(pb::TransferLeaderRequest { node_id: to })
        .await
        .map(|_| ())
}

async fn decommission(ring: &Ring, at: u64, target: u64) -> Result<(), tonic::Status> {
    admin_client(&ring.addr(at))
        .await
        .decommission(pb::DecommissionRequest { node_id: target })
        .await
        .map(|_| ())
}

fn member_ids(r: &pb::RolesReply) -> BTreeSet<u64> {
    r.members.iter().map(|m| m.node_id).collect()
}

fn role(r: &pb::RolesReply, id: u64) -> pb::OmRole {
    let m = r.members.iter().find(|m| m.node_id == id);
    let m = m.unwrap_or_else(|| panic!("OM {id} missing from {r:?}"));
    pb::OmRole::try_from(m.role).unwrap()
}

fn voters(ring: &Ring, id: u64) -> BTreeSet<u64> {
    let m = ring.oms[&id].group().metrics();
    m.membership_config.membership().voter_ids().collect()
}

/// The log id of the membership `id` runs with: unchanged means no change was proposed.
fn membership_log(ring: &Ring, id: u64) -> Option<rozone_raft::LogId> {
    let m = ring.oms[&id].group().metrics();
    *m.membership_config.log_id()
}

fn refused_not_leader(e: &tonic::Status, leader_addr: &str) {
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert_eq!(
        rozone_rpc::retry_reason(e),
        Some(rozone_rpc::REASON_NOT_LEADER),
        "{e:?}"
    );
    assert_eq!(rozone_rpc::leader_hint(e).as_deref(), Some(leader_addr));
}

/// Waits until OM `id` runs with exactly `want` as voters and lists no other member.
async fn wait_membership(ring: &Ring, id: u64, want: &[u64]) {
    let want: BTreeSet<u64> = want.iter().copied().collect();
    ring.oms[&id]
        .group()
        .wait_for(WAIT, "membership", move |m| {
            let ms = m.membership_config.membership();
            ms.voter_ids().collect::<BTreeSet<_>>() == want
                && ms.nodes().all(|(n, _)| want.contains(n))
        })
        .await
        .unwrap_or_else(|e| panic!("OM {id} membership: {e}"));
}

/// Writes `key` through a client that knows only `id`'s address and asserts `id` served it
/// at once (no refusal followed): it is the ready leader.
async fn write_at(ring: &Ring, id: u64, key: &str) {
    let c = ring_client(&[ring.addr(id)]);
    put_key_metadata(&c, "vol", "bkt", key, 7)
        .await
        .unwrap_or_else(|e| panic!("write {key} at OM {id}: {e:?}"));
    assert_eq!(
        c.ring().retries(),
        0,
        "OM {id} took the write {key} without a refusal"
    );
}

/// Waits until OM `id` applied everything the leader committed, then reads `key` from
/// its own state.
async fn applied_on(ring: &Ring, leader: u64, id: u64, key: &str) {
    let last = ring.oms[&leader]
        .group()
        .wait_log_applied(WAIT)
        .await
        .unwrap();
    let g = ring.oms[&id].group();
    g.wait_applied(last, WAIT).await.unwrap();
    let k = rozone_om::state::read::key(&g.db(), "vol", "bkt", key).unwrap();
    assert!(k.is_some(), "{key} on OM {id}");
}

async fn ring_with_bucket() -> (Ring, OmClient) {
    let ring = Ring::start(3, |_| {}).await;
    let c = ring_client(&ring.client_addrs());
    c.create_volume("vol", "", None).await.unwrap();
    c.create_bucket("vol", "bkt", None).await.unwrap();
    (ring, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn transfer_leader_moves_leadership_to_the_named_follower_and_refuses_unknown_nodes() {
    let (ring, client) = ring_with_bucket().await;
    let old = ring.leader().await;
    let to = *ring.oms.keys().find(|id| **id != old).unwrap();
    let before = roles(&ring, old).await;
    assert_eq!(before.leader_id, Some(old));

    // Asked of a follower: refused, pointing at the leader.
    let e = transfer(&ring, to, to).await.unwrap_err();
    refused_not_leader(&e, &ring.addr(old));

    // An unknown node: refused by name, and leadership stays where it was.
    let e = transfer(&ring, old, 42).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(
        e.message().contains("OM 42 is not a voter of the ring"),
        "{e:?}"
    );
    write_at(&ring, old, "before").await;
    for id in ring.oms.keys() {
        let r = roles(&ring, *id).await;
        assert_eq!(r.leader_id, Some(old), "seen by OM {id}");
        assert_eq!(r.term, before.term, "seen by OM {id}");
    }

    // To the named follower: it leads, every OM follows it, writes go there.
    transfer(&ring, old, to).await.unwrap();
    for (id, s) in &ring.oms {
        s.group()
            .wait_for(WAIT, "new leader known", move |m| {
                m.current_leader == Some(to)
            })
            .await
            .unwrap_or_else(|e| panic!("OM {id}: {e}"));
    }
    ring.oms[&to]
        .group()
        .wait_for(WAIT, "new leader ready", rozone_raft::leader_ready)
        .await
        .unwrap();
    for id in ring.oms.keys() {
        let r = roles(&ring, *id).await;
        assert_eq!(r.leader_id, Some(to), "seen by OM {id}");
        assert!(r.term > before.term, "seen by OM {id}: {r:?}");
        assert_eq!(role(&r, to), pb::OmRole::Leader, "seen by OM {id}");
    }
    let r = roles(&ring, to).await;
    assert!(r.members.iter().any(|m| m.node_id == to && m.leader_ready));
    assert_eq!(role(&r, old), pb::OmRole::Follower);
    assert_eq!(role(&roles(&ring, old).await, old), pb::OmRole::Follower);
    // The client still thinks `old` leads: it is refused there and follows the hint.
    put_key_metadata(&client, "vol", "bkt", "after", 9)
        .await
        .unwrap();
    write_at(&ring, to, "after-direct").await;
    let e = transfer(&ring, old, old).await.unwrap_err();
    refused_not_leader(&e, &ring.addr(to));
    for id in ring.oms.keys() {
        applied_on(&ring, to, *id, "after").await;
        applied_on(&ring, to, *id, "after-direct").await;
    }
    ring.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn decommission_removes_a_follower_and_refuses_the_leader_itself() {
    let (ring, _client) = ring_with_bucket().await;
    let leader = ring.leader().await;
    let others: Vec<u64> = ring
        .oms
        .keys()
        .copied()
        .filter(|id| *id != leader)
        .collect();
    let (gone, kept) = (others[0], others[1]);
    let all = [1, 2, 3];
    let membership = membership_log(&ring, leader);

    // Asked of a follower: refused, pointing at the leader.
    let e = decommission(&ring, kept, gone).await.unwrap_err();
    refused_not_leader(&e, &ring.addr(leader));
    // An unknown node.
    let e = decommission(&ring, leader, 42).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(
        e.message().contains("OM 42 is not a member of the ring"),
        "{e:?}"
    );
    // The leader itself: transfer first.
    let e = decommission(&ring, leader, leader).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message()
            .contains("is the leader: transfer leadership to another OM first"),
        "{e:?}"
    );
    // Nothing changed: same membership entry, same leader, and it still takes writes.
    assert_eq!(membership_log(&ring, leader), membership);
    assert_eq!(voters(&ring, leader), all.into_iter().collect());
    write_at(&ring, leader, "before").await;
    for id in ring.oms.keys() {
        let r = roles(&ring, *id).await;
        assert_eq!(member_ids(&r), all.into_iter().collect(), "seen by OM {id}");
        assert_eq!(r.leader_id, Some(leader), "seen by OM {id}");
    }

    // A follower: removed; the two left no longer list it and still commit writes (the
    // removed OM keeps running, as it would until an operator stops it).
    decommission(&ring, leader, gone).await.unwrap();
    let left = [leader, kept];
    for id in left {
        wait_membership(&ring, id, &left).await;
        let r = roles(&ring, id).await;
        assert_eq!(
            member_ids(&r),
            left.into_iter().collect(),
            "seen by OM {id}"
        );
        assert!(r.members.iter().all(|m| m.voter), "seen by OM {id}: {r:?}");
        assert_eq!(r.leader_id, Some(leader), "seen by OM {id}");
    }
    assert_ne!(membership_log(&ring, leader), membership);
    write_at(&ring, leader, "after").await;
    applied_on(&ring, leader, kept, "after").await;
    // Decommissioning it again: it is not a member any more.
    let e = decommission(&ring, leader, gone).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    ring.shutdown().await;
}

/// Waits until the leader has heard nothing from `id` for longer than `quiet`.
async fn wait_silent(ring: &Ring, leader: u64, id: u64, quiet: Duration) {
    let g = ring.oms[&leader].group();
    let deadline = Instant::now() + WAIT;
    loop {
        let ages = rozone_raft::contact::member_ack_ages(&g.metrics());
        match ages.get(&id) {
            Some(Some(age)) if *age <= quiet => {}
            _ => return,
        }
        assert!(
            Instant::now() < deadline,
            "OM {id} still answers the leader"
        );
        // Bounded pacing on metrics changes (heartbeat acks of the other follower).
        let _ = g
            .wait_for(Duration::from_millis(200), "ack ages grow", |_| false)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn decommission_that_leaves_no_reachable_quorum_is_refused_then_the_dead_member_goes() {
    let (mut ring, _client) = ring_with_bucket().await;
    let leader = ring.leader().await;
    let others: Vec<u64> = ring
        .oms
        .keys()
        .copied()
        .filter(|id| *id != leader)
        .collect();
    let (alive, dead) = (others[0], others[1]);
    ring.stop(dead).await;
    // The rule counts a voter as reachable if it acknowledged within twice the longest
    // election timeout.
    let recent = ring.config(leader).raft.election_timeout_max * 2;
    wait_silent(&ring, leader, dead, recent).await;
    let membership = membership_log(&ring, leader);

    // Removing the live follower would leave {leader, dead}: one of two answers.
    let e = decommission(&ring, leader, alive).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains(&format!(
            "removing OM {alive} leaves 2 voter(s) of which only 1 answer now; 2 are needed for a quorum"
        )),
        "{e:?}"
    );
    // Membership unchanged, everywhere it runs; the two live voters still commit.
    assert_eq!(membership_log(&ring, leader), membership);
    for id in [leader, alive] {
        assert_eq!(voters(&ring, id), [1, 2, 3].into_iter().collect());
        let r = roles(&ring, id).await;
        assert_eq!(member_ids(&r), [1, 2, 3].into_iter().collect(), "OM {id}");
        assert_eq!(r.leader_id, Some(leader), "seen by OM {id}");
    }
    write_at(&ring, leader, "refused").await;
    applied_on(&ring, leader, alive, "refused").await;

    // Removing the dead one leaves {leader, alive}, both answering: allowed.
    decommission(&ring, leader, dead).await.unwrap();
    let left = [leader, alive];
    for id in left {
        wait_membership(&ring, id, &left).await;
        assert_eq!(
            member_ids(&roles(&ring, id).await),
            left.into_iter().collect()
        );
    }
    write_at(&ring, leader, "two-voters").await;
    applied_on(&ring, leader, alive, "two-voters").await;

    // Down to two voters, the leader still cannot remove itself.
    let membership = membership_log(&ring, leader);
    let e = decommission(&ring, leader, leader).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("transfer leadership"), "{e:?}");
    assert_eq!(membership_log(&ring, leader), membership);
    assert_eq!(voters(&ring, alive), left.into_iter().collect());

    // With two voters the rule never refuses the live follower (one voter would be left,
    // and it answers). With the follower down, {leader} would be left and answers, but the
    // change must also commit in the old voter set, where only 1 of 2 answers: refused
    // up front, clearly, and nothing changes.
    ring.stop(alive).await;
    wait_silent(&ring, leader, alive, recent).await;
    let r = tokio::time::timeout(WAIT, decommission(&ring, leader, alive))
        .await
        .expect("a removal without a quorum is answered, not left hanging");
    let e = r.expect_err("removing the dead follower of a two-voter ring");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("only 1 answer now"), "{e:?}");
    assert_eq!(membership_log(&ring, leader), membership);
    assert_eq!(voters(&ring, leader), left.into_iter().collect());
    ring.shutdown().await;
}
