//! No stale reads from a leader that lost its ring (issue 12, item 1), on real `rozone-om`
//! processes: a leader cut off and paused while the others elected a new leader and took a
//! write, and a leader SIGKILLed and restarted (openraft's leader restore would make it
//! leader again from its committed vote) while the others moved on. Each must refuse DEFAULT reads with the
//! retryable not-leader refusal instead of answering from its old state.

mod procs;

use procs::ProcRing;
use rozone_proto::om as pb;

/// The read must not be answered from stale state: a retryable refusal is the only right
/// answer from a member that cannot know whether `name` exists.
fn assert_refused_not_stale(r: Result<pb::VolumeInfoReply, tonic::Status>, name: &str) {
    match r {
        Ok(v) => panic!("a leader without its ring answered {name}: {v:?}"),
        Err(s) => {
            assert_ne!(
                s.code(),
                tonic::Code::NotFound,
                "stale read: {name} was created by the new leader, but the old one says: {}",
                s.message()
            );
            assert!(
                rozone_rpc::is_retryable(&s),
                "the refusal is one a client retries elsewhere: {s:?}"
            );
        }
    }
}

/// Fails on 00e069b: the resumed old leader answered "volume bbb not found" and reported
/// itself a ready leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_leader_cut_off_from_its_ring_refuses_default_reads() {
    let ring = ProcRing::start(3).await;
    let l = ring.wait_leader(&ring.ids()).await;
    ring.create_volume(l, "aaa").await;
    // Cut first: nothing from the next leader may wait in L's socket buffers for it.
    ring.members[&l].proxy.cut();
    ring.signal(l, "STOP");
    let others: Vec<u64> = ring.ids().into_iter().filter(|id| *id != l).collect();
    let n = ring.wait_leader(&others).await;
    ring.create_volume(n, "bbb").await;
    for id in &others {
        ring.signal(*id, "STOP");
    }
    ring.signal(l, "CONT");
    assert_refused_not_stale(ring.volume_info(l, "bbb").await, "bbb");
    assert_refused_not_stale(ring.volume_info(l, "aaa").await, "aaa");
    let info = ring.ring_info(l).await.expect("L answers ring info");
    assert!(
        !info.leader_ready,
        "L must not report itself a ready leader: {info:?}"
    );
    // Heal: the ring comes back and has both volumes.
    for id in &others {
        ring.signal(*id, "CONT");
    }
    ring.members[&l].proxy.heal();
    let leader = ring.wait_leader(&ring.ids()).await;
    for name in ["aaa", "bbb"] {
        ring.volume_info(leader, name).await.expect("volume kept");
    }
}

/// Fails on 00e069b: restored as leader of its old term from its committed vote (openraft's
/// leader restore), with the other members stopped, the old leader reported itself a ready
/// leader (`role: Leader, leader_ready: true`): the state in which it answers DEFAULT reads
/// from its old state ("volume bbb not found").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_leader_earns_its_lease_before_serving_default_reads() {
    let mut ring = ProcRing::start(3).await;
    let l = ring.wait_leader(&ring.ids()).await;
    ring.create_volume(l, "aaa").await;
    ring.kill(l);
    let others: Vec<u64> = ring.ids().into_iter().filter(|id| *id != l).collect();
    let n = ring.wait_leader(&others).await;
    ring.create_volume(n, "bbb").await;
    for id in &others {
        ring.signal(*id, "STOP");
    }
    ring.restart(l);
    let info = ring.ring_info(l).await.expect("L answers ring info");
    // openraft's leader restore is off, so L comes back as a follower; with it on (as on
    // 00e069b) L is leader of its old term without an acknowledgement: never ready either way.
    assert!(
        !info.leader_ready,
        "no lease without acknowledgements: {info:?}"
    );
    assert_refused_not_stale(ring.volume_info(l, "bbb").await, "bbb");
    for id in &others {
        ring.signal(*id, "CONT");
    }
    let leader = ring.wait_leader(&ring.ids()).await;
    for name in ["aaa", "bbb"] {
        ring.volume_info(leader, name).await.expect("volume kept");
    }
}
