//! LOCAL_LEASE reads against real OMs (HDDS-17550): who may answer from its own state, and
//! who must refuse, with real presence of leader and contact.

mod common;

use std::time::Duration;

use common::*;
use rozone_proto::om as pb;
use tonic::Code;

fn slow_elections(c: &mut rozone_om::Config) {
    // Long enough that a node held by a failpoint does not campaign during the checks.
    c.raft.election_timeout_min = Duration::from_millis(1500);
    c.raft.election_timeout_max = Duration::from_millis(3000);
}

fn lease(limit: Option<i64>) -> Option<pb::ReadOptions> {
    Some(pb::ReadOptions {
        consistency: pb::ReadConsistency::LocalLease as i32,
        lease_time_ms: None,
        log_limit: limit,
    })
}

async fn lookup(
    addr: &str,
    read: Option<pb::ReadOptions>,
) -> Result<pb::LookupKeyReply, tonic::Status> {
    om_client(addr)
        .await
        .lookup_key(pb::LookupKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "k".into(),
            read,
        })
        .await
        .map(|r| r.into_inner())
}

async fn write_key(ring: &Ring) {
    let c = ring_client(&ring.client_addrs());
    c.create_volume("vol", "", None).await.unwrap();
    c.create_bucket("vol", "bkt", None).await.unwrap();
    put_key_metadata(&c, "vol", "bkt", "k", 5).await.unwrap();
    // Every member applies as far as the one furthest along: a follower whose log does not
    // hold the last entries yet has "applied its whole log" before it has the key.
    let mut index = 0;
    for s in ring.oms.values() {
        index = index.max(s.group().wait_log_applied(WAIT).await.unwrap());
    }
    for s in ring.oms.values() {
        s.group().wait_applied(index, WAIT).await.unwrap();
    }
}

fn refused_not_leader(r: Result<pb::LookupKeyReply, tonic::Status>, who: &str) {
    let e = r.expect_err(who);
    assert_eq!(e.code(), Code::Unavailable, "{who}: {e:?}");
    assert_eq!(
        rozone_rpc::retry_reason(&e),
        Some(rozone_rpc::REASON_NOT_LEADER),
        "{who}: {e:?}"
    );
}

fn lease_metric(ring: &Ring, id: u64, reason: &str) -> u64 {
    let n = &ring.oms[&id].node.metrics;
    match rozone_raft::gate::Refused::ALL
        .iter()
        .find(|r| r.label() == reason)
    {
        Some(r) => n.lease_refused[r.index()].load(std::sync::atomic::Ordering::Relaxed),
        None => n.lease_served.load(std::sync::atomic::Ordering::Relaxed),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn ready_leader_and_follower_serve_leaderless_follower_and_candidate_refuse() {
    // Four voters: with two stopped, the two left can never elect a leader.
    let mut ring = Ring::start(4, |_| {}).await;
    write_key(&ring).await;
    let leader = ring.leader().await;
    let follower = *ring.oms.keys().find(|id| **id != leader).unwrap();
    let r = lookup(&ring.addr(leader), lease(None)).await.unwrap();
    assert_eq!(r.read_info.unwrap().served_by, leader);
    let r = lookup(&ring.addr(follower), lease(None)).await.unwrap();
    assert_eq!(
        r.read_info.unwrap().served_by,
        follower,
        "a follower with a known, recent leader answers locally"
    );
    assert_eq!(r.key.unwrap().size, 5);
    assert!(lease_metric(&ring, follower, "served") >= 1);

    // Leader and one more stopped: the two left lose their leader and cannot elect one.
    let left: Vec<u64> = ring
        .oms
        .keys()
        .copied()
        .filter(|id| *id != leader && *id != follower)
        .collect();
    ring.stop(leader).await;
    ring.stop(follower).await;
    // Wait until one of them has voted for the other's candidacy (a follower without a
    // leader) or campaigns itself; every such state must refuse.
    let mut seen_candidate = false;
    let mut seen_leaderless_follower = false;
    let deadline = std::time::Instant::now() + WAIT;
    while !(seen_candidate && seen_leaderless_follower) {
        assert!(std::time::Instant::now() < deadline, "states seen: candidate {seen_candidate}, leaderless follower {seen_leaderless_follower}");
        for id in &left {
            let g = ring.oms[id].group();
            let m = g
                .wait_for(Duration::from_millis(200), "candidate or leaderless", |m| {
                    m.state == rozone_raft::ServerState::Candidate
                        || (m.state == rozone_raft::ServerState::Follower
                            && m.current_leader.is_none())
                })
                .await;
            let Ok(m) = m else { continue };
            let r = lookup(&ring.addr(*id), lease(None)).await;
            refused_not_leader(r, &format!("OM {id} in {:?}", m.state));
            if m.state == rozone_raft::ServerState::Candidate {
                seen_candidate = true;
            } else {
                seen_leaderless_follower = true;
            }
        }
    }
    let refusals: u64 = left
        .iter()
        .map(|id| {
            lease_metric(&ring, *id, "no_leader")
                + lease_metric(&ring, *id, "not_follower")
                + lease_metric(&ring, *id, "lease_expired")
        })
        .sum();
    assert!(refusals >= 2);
    ring.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn new_leader_before_its_first_commit_refuses_and_so_does_its_follower() {
    let mut ring = Ring::start(4, slow_elections).await;
    write_key(&ring).await;
    let old = ring.leader().await;
    let others: Vec<u64> = ring.oms.keys().copied().filter(|id| *id != old).collect();
    let (new, held, down) = (others[0], others[1], others[2]);
    // Three of four voters left: the new leader needs every one of them to commit.
    ring.stop(down).await;
    // Appends the new leader sends to `held` wait: it cannot commit its first entry.
    fail::cfg("raft-append-hold", &format!("return({held})")).unwrap();
    ring.oms[&old].group().transfer_leader(new).await.unwrap();
    let g_new = ring.oms[&new].group().clone();
    g_new
        .wait_for(WAIT, "new leader", |m| {
            m.state == rozone_raft::ServerState::Leader
        })
        .await
        .unwrap();
    assert!(!g_new.is_ready_leader());
    let g_old = ring.oms[&old].group().clone();
    g_old
        .wait_for(WAIT, "follows the new leader", move |m| {
            m.current_leader == Some(new)
        })
        .await
        .unwrap();
    // The first append from the new leader is recorded as contact.
    let deadline = std::time::Instant::now() + WAIT;
    let contact = loop {
        match g_old.leader_contact() {
            Some(c) if c.leader == new => break c,
            _ => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no append from the new leader"
                );
                let _ = g_old
                    .wait_for(Duration::from_millis(50), "next append", |_| false)
                    .await;
            }
        }
    };
    assert!(!contact.commit_in_leader_term());

    // The not-ready leader refuses with LeaderNotReady, at log limit -1 too.
    let e = lookup(&ring.addr(new), lease(None)).await.unwrap_err();
    assert_eq!(
        rozone_rpc::retry_reason(&e),
        Some(rozone_rpc::REASON_LEADER_NOT_READY),
        "{e:?}"
    );
    let e = lookup(&ring.addr(new), None).await.unwrap_err();
    assert_eq!(
        rozone_rpc::retry_reason(&e),
        Some(rozone_rpc::REASON_LEADER_NOT_READY),
        "DEFAULT: {e:?}"
    );
    assert_eq!(lease_metric(&ring, new, "leader_not_ready"), 1);
    // Its follower knows it, heard from it just now, but its commit index is from an
    // older term: refused too.
    refused_not_leader(
        lookup(&ring.addr(old), lease(None)).await,
        "follower of the not-ready leader",
    );
    assert_eq!(lease_metric(&ring, old, "commit_not_in_leader_term"), 1);

    fail::remove("raft-append-hold");
    g_new
        .wait_for(WAIT, "ready", rozone_raft::leader_ready)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    // The new leader's commit in its term, in an append it sent holding its lease (with the
    // echo a follower's lease counts from).
    while !g_old
        .leader_contact()
        .is_some_and(|c| c.commit_in_leader_term() && c.sent_after.is_some())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "commit of the new term never reached the follower"
        );
        let _ = g_old
            .wait_for(Duration::from_millis(100), "next append", |_| false)
            .await;
    }
    assert_eq!(
        lookup(&ring.addr(old), lease(None))
            .await
            .unwrap()
            .read_info
            .unwrap()
            .served_by,
        old
    );
    assert_eq!(
        lookup(&ring.addr(new), lease(None))
            .await
            .unwrap()
            .read_info
            .unwrap()
            .served_by,
        new
    );
    ring.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn lagging_follower_refuses_with_a_finite_log_limit_then_serves_after_catching_up() {
    let ring = Ring::start(3, |_| {}).await;
    write_key(&ring).await;
    let leader = ring.leader().await;
    let lagging = *ring.oms.keys().find(|id| **id != leader).unwrap();
    // The follower keeps receiving appends (and contact) but applies nothing.
    fail::cfg("om-apply-hold", &format!("return({lagging})")).unwrap();
    let c = ring_client(&[ring.addr(leader)]);
    for i in 0..10 {
        put_key_metadata(&c, "vol", "bkt", &format!("more-{i}"), 1)
            .await
            .unwrap();
    }
    let commit = ring.oms[&leader]
        .group()
        .wait_log_applied(WAIT)
        .await
        .unwrap();
    let g = ring.oms[&lagging].group().clone();
    g.wait_for(WAIT, "contact with the leader's commit", move |_| true)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while g
        .leader_contact()
        .and_then(|c| c.leader_commit)
        .map(|l| l.index())
        != Some(commit)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "follower never heard the leader's commit"
        );
        let _ = g
            .wait_for(Duration::from_millis(100), "next append", |_| false)
            .await;
    }
    let applied = g.metrics().last_applied.map(|l| l.index()).unwrap_or(0);
    assert!(commit - applied > 5, "lag {commit} - {applied}");
    // A finite limit (request narrower than config -1): refused for lag.
    refused_not_leader(
        lookup(&ring.addr(lagging), lease(Some(5))).await,
        "lagging follower",
    );
    assert_eq!(lease_metric(&ring, lagging, "log_lag"), 1);
    // At -1 only the index comparison is skipped: it answers (from its older state).
    assert_eq!(
        lookup(&ring.addr(lagging), lease(None))
            .await
            .unwrap()
            .read_info
            .unwrap()
            .served_by,
        lagging
    );

    fail::remove("om-apply-hold");
    g.wait_applied(commit, WAIT).await.unwrap();
    let r = lookup(&ring.addr(lagging), lease(Some(5))).await.unwrap();
    assert_eq!(r.read_info.unwrap().served_by, lagging);
    assert!(r.key.is_some());
    ring.shutdown().await;
}

/// An append the network delivered late must not make a follower serve data older than the
/// lease: the follower may count leader contact only from a time the leader's message is
/// known to have been sent after, never from when it arrived.
///
/// The follower's last heartbeat is copied, the follower restarts with every new append to
/// it held, a second version of the key is committed by the other two members, and more than
/// the lease later the copy is delivered, as a network that held it would. The follower must
/// then refuse a LOCAL_LEASE read at log limit 0, or answer with the second version.
///
/// Fails on 0b4dd81 (the failpoints without the fix; run 2026-12-06 with `raft-append-hold`
/// moved to the sender as here): the follower stamped contact when the old heartbeat arrived
/// and served the first version (size 5) 600 ms after the second was acknowledged, with a
/// 300 ms lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn a_heartbeat_delivered_late_gives_no_fresh_lease() {
    fn tune(c: &mut rozone_om::Config) {
        // The held follower must not stand for election while the test runs.
        c.raft.election_timeout_min = Duration::from_secs(8);
        c.raft.election_timeout_max = Duration::from_secs(16);
    }
    const LEASE_MS: u64 = 300;
    let mut ring = Ring::start(3, tune).await;
    write_key(&ring).await;
    let leader = ring.leader().await;
    let f = *ring.oms.keys().find(|id| **id != leader).unwrap();
    let read = Some(pb::ReadOptions {
        consistency: pb::ReadConsistency::LocalLease as i32,
        lease_time_ms: Some(LEASE_MS),
        log_limit: Some(0),
    });

    // Copy a heartbeat on its way to the follower.
    fail::cfg("raft-append-capture", &format!("return({f})")).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let old = loop {
        if let Some(r) = rozone_raft::service::take_captured_append() {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "no append captured");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    fail::remove("raft-append-capture");

    // The follower restarts and hears nothing new; the others commit version two.
    fail::cfg("raft-append-hold", &format!("return({f})")).unwrap();
    ring.stop(f).await;
    ring.start_member(f, rozone_om::config::Startup::default())
        .await;
    let c = ring_client(&ring.client_addrs());
    put_key_metadata(&c, "vol", "bkt", "k", 7).await.unwrap();
    // Version two is acknowledged; wait until it is older than the lease, twice over.
    tokio::time::sleep(Duration::from_millis(2 * LEASE_MS)).await;

    // The late delivery: the old heartbeat, through the follower's peer port.
    let peer = ring
        .peers
        .iter()
        .find(|p| p.id == f)
        .unwrap()
        .peer_addr
        .clone();
    let mut raft = rozone_proto::raft::raft_service_client::RaftServiceClient::connect(format!(
        "http://{peer}"
    ))
    .await
    .unwrap();
    let mut replies = raft
        .stream_append(futures::stream::iter([old]))
        .await
        .unwrap()
        .into_inner();
    replies
        .message()
        .await
        .unwrap()
        .expect("a reply to the late heartbeat");
    let g = ring.oms[&f].group().clone();
    g.wait_for(WAIT, "the follower knows its leader", move |m| {
        m.current_leader == Some(leader)
    })
    .await
    .unwrap();

    match lookup(&ring.addr(f), read).await {
        Ok(r) => assert_eq!(
            r.key.unwrap().size,
            7,
            "served version one, committed over the lease before version two was acknowledged"
        ),
        Err(e) => refused_not_leader(Err(e), "the follower after a late heartbeat"),
    }
    fail::remove("raft-append-hold");
    ring.shutdown().await;
}

/// On a ring of five, a leader cut off with one follower is deposed by the other three, yet
/// it can still reach that follower: its appends must not keep the follower's lease fresh.
/// Only a leader holding its leader lease (a quorum acknowledged it recently, so no other
/// leader can exist) vouches for the freshness of what it sends.
///
/// Fails on 0b4dd81 (the failpoints without the fix; run 2026-12-06): any append refreshed
/// the follower's lease, and the follower, still hearing from the deposed leader, served the
/// first version (size 5) 600 ms after the new leader had acknowledged the second, with a
/// 300 ms lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn a_deposed_leader_that_still_reaches_a_follower_gives_it_no_lease() {
    const LEASE_MS: u64 = 300;
    let ring = Ring::start(5, |_| {}).await;
    write_key(&ring).await;
    let old = ring.leader().await;
    let ids: Vec<u64> = ring.oms.keys().copied().collect();
    let f = *ids.iter().find(|id| **id != old).unwrap();
    let others: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|id| *id != old && *id != f)
        .collect();
    let read = Some(pb::ReadOptions {
        consistency: pb::ReadConsistency::LocalLease as i32,
        lease_time_ms: Some(LEASE_MS),
        log_limit: Some(0),
    });

    // {old, f} | the other three, both ways.
    let mut pairs = Vec::new();
    for a in [old, f] {
        for b in &others {
            pairs.push(format!("{a}>{b}"));
            pairs.push(format!("{b}>{a}"));
        }
    }
    fail::cfg("raft-link-cut", &format!("return({})", pairs.join(","))).unwrap();

    // The three elect a leader of their own and acknowledge version two.
    let addrs: Vec<String> = others.iter().map(|id| ring.addr(*id)).collect();
    let c = ring_client(&addrs);
    put_key_metadata(&c, "vol", "bkt", "k", 7).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2 * LEASE_MS)).await;

    // The follower still hears from the old leader (nothing else told it of the new term).
    let g = ring.oms[&f].group().clone();
    let m = g.metrics();
    assert_eq!(
        m.current_leader,
        Some(old),
        "the follower still follows the old leader"
    );
    assert!(g.leader_contact().unwrap().age() < Duration::from_millis(LEASE_MS));
    match lookup(&ring.addr(f), read).await {
        Ok(r) => assert_eq!(
            r.key.unwrap().size,
            7,
            "served version one, replaced by a write acknowledged over the lease before"
        ),
        Err(e) => refused_not_leader(Err(e), "the follower of a deposed leader"),
    }
    fail::remove("raft-link-cut");
    ring.shutdown().await;
}
