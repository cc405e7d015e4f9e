//! The ReplicationManager's judgement, case by case.

use super::*;

fn closed(bcsid: u64, keys: u64) -> ContainerView {
    ContainerView {
        id: 1,
        state: ContainerState::Closed,
        bcsid,
        key_count: keys,
        used_bytes: keys * 100,
        wanted: 3,
    }
}

/// The digest a replica of `blocks` identical blocks reports.
fn digest_of(blocks: u64) -> Option<Digest> {
    Some(Digest {
        version: 1,
        sum: blocks.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    })
}

fn rep(dn: u64, state: ReplicaState, bcsid: u64, blocks: u64) -> ReplicaView {
    ReplicaView {
        datanode: dn,
        state,
        bcsid,
        block_count: blocks,
        digest: digest_of(blocks),
        node: NodeHealth::Healthy,
    }
}

fn with_digest(r: ReplicaView, digest: Option<Digest>) -> ReplicaView {
    ReplicaView { digest, ..r }
}

use ReplicaState::*;

#[test]
fn empty_closed_replica_is_not_a_copy_and_is_the_one_deleted() {
    let c = closed(20, 5);
    // The empty replica (BCSID 0, no blocks) sorts first by id: a hash-order choice
    // (Ozone's) could pick a real one.
    let rs = vec![
        rep(1, Closed, 0, 0),
        rep(2, Closed, 20, 5),
        rep(3, Closed, 20, 5),
        rep(4, Closed, 20, 5),
    ];
    assert!(!is_healthy_copy(&c, &rs, &rs[0]));
    let d = decide(&c, &rs, &InflightView::default(), &[5, 6]);
    assert_eq!(d.verdict(), Verdict::OverReplicated);
    assert_eq!(d.healthy, 3);
    assert_eq!(d.delete, vec![1]);
    assert!(d.replicate_to.is_empty());
    // Once its delete is in flight nothing more is deleted.
    let inflight = InflightView {
        adds: vec![],
        deletes: vec![1],
    };
    assert!(decide(&c, &rs, &inflight, &[5]).delete.is_empty());
}

#[test]
fn two_real_replicas_and_an_empty_one_ask_for_a_third_from_the_best_sources() {
    let c = closed(20, 5);
    let rs = vec![
        rep(1, Closed, 0, 0),
        rep(2, Closed, 20, 5),
        rep(3, Closed, 20, 5),
    ];
    let d = decide(&c, &rs, &InflightView::default(), &[1, 2, 7, 8]);
    assert_eq!(d.verdict(), Verdict::UnderReplicated);
    assert_eq!(d.healthy, 2);
    // Not onto a node that holds any replica (1 holds the empty one).
    assert_eq!(d.replicate_to, vec![7]);
    assert_eq!(d.sources, vec![2, 3]);
    assert!(d.delete.is_empty(), "no delete while under-replicated");
    let inflight = InflightView {
        adds: vec![7],
        deletes: vec![],
    };
    assert!(decide(&c, &rs, &inflight, &[7, 8]).replicate_to.is_empty());
}

#[test]
fn behind_bcsid_unhealthy_and_dead_replicas_do_not_count() {
    let c = closed(20, 5);
    let mut dead = rep(4, Closed, 20, 5);
    dead.node = NodeHealth::Dead;
    let rs = vec![
        rep(1, Closed, 19, 5),
        rep(2, Unhealthy, 20, 5),
        rep(3, Closed, 20, 5),
        dead,
    ];
    let d = decide(&c, &rs, &InflightView::default(), &[5, 6, 4]);
    assert_eq!(d.healthy, 1);
    assert_eq!(d.replicate_to, vec![5, 6]);
    assert_eq!(d.sources, vec![3]);
    // A replica that proved a higher BCSID raises the bar for the others.
    let c0 = closed(0, 0);
    let rs = vec![rep(1, Closed, 7, 1), rep(2, Closed, 3, 1)];
    let d = decide(&c0, &rs, &InflightView::default(), &[]);
    assert_eq!(d.healthy, 1);
    assert_eq!(d.verdict(), Verdict::UnderReplicated);
}

#[test]
fn excess_real_copies_delete_the_worst_never_the_best() {
    let c = closed(10, 5);
    let mut stale = rep(1, Closed, 10, 5);
    stale.node = NodeHealth::Stale;
    let rs = vec![
        stale,
        rep(2, Closed, 10, 5),
        rep(3, QuasiClosed, 10, 5),
        rep(4, Closed, 10, 5),
        rep(5, Closed, 10, 5),
    ];
    let qc = ContainerView {
        state: ContainerState::QuasiClosed,
        ..c.clone()
    };
    let d = decide(&qc, &rs, &InflightView::default(), &[]);
    assert_eq!(d.verdict(), Verdict::OverReplicated);
    // Ranked 2, 4, 5 (CLOSED, healthy node), 1 (stale node), 3 (QUASI_CLOSED); two
    // excess: 3 then 1.
    assert_eq!(d.delete, vec![3, 1]);
    let rs: Vec<ReplicaView> = (1..=5).map(|i| rep(i, Closed, 10, 5)).collect();
    // With wanted 1 every copy but the best goes.
    let one = ContainerView {
        wanted: 1,
        ..c.clone()
    };
    let d = decide(&one, &rs, &InflightView::default(), &[]);
    assert_eq!(d.delete.len(), 4);
    assert!(!d.delete.contains(&1));
    // A replica that proved a higher BCSID makes the others stale copies: they are
    // deleted only once enough good copies exist, never before.
    let rs = vec![rep(1, Closed, 12, 5), rep(2, Closed, 10, 5)];
    let d = decide(&c, &rs, &InflightView::default(), &[7, 8]);
    assert_eq!(d.healthy, 1);
    assert!(d.delete.is_empty());
    assert_eq!(d.replicate_to, vec![7, 8]);
    assert_eq!(d.sources, vec![1]);
}

#[test]
fn missing_healthy_and_unjudged_states() {
    let c = closed(5, 1);
    let d = decide(
        &c,
        &[rep(1, Closed, 0, 0)],
        &InflightView::default(),
        &[2, 3],
    );
    assert_eq!(d.verdict(), Verdict::Missing);
    assert!(d.replicate_to.is_empty() && d.delete.is_empty());
    let rs = vec![
        rep(1, Closed, 5, 1),
        rep(2, Closed, 5, 1),
        rep(3, Closed, 5, 1),
    ];
    assert_eq!(
        decide(&c, &rs, &InflightView::default(), &[]).verdict(),
        Verdict::Healthy
    );
    // An empty container's empty replicas are copies.
    let e = closed(0, 0);
    let rs = vec![
        rep(1, Closed, 0, 0),
        rep(2, Closed, 0, 0),
        rep(3, Closed, 0, 0),
    ];
    assert_eq!(
        decide(&e, &rs, &InflightView::default(), &[]).verdict(),
        Verdict::Healthy
    );
    let open = ContainerView {
        state: ContainerState::Open,
        ..c
    };
    assert_eq!(
        decide(&open, &rs, &InflightView::default(), &[4]).verdict(),
        Verdict::NotChecked
    );
}

#[test]
fn quasi_closed_majority_is_force_closed() {
    let c = ContainerView {
        state: ContainerState::QuasiClosed,
        ..closed(4, 1)
    };
    let rs = vec![
        rep(1, QuasiClosed, 4, 1),
        rep(2, QuasiClosed, 4, 1),
        rep(3, QuasiClosed, 3, 1),
    ];
    let d = decide(&c, &rs, &InflightView::default(), &[]);
    assert_eq!(d.force_close, vec![1, 2]);
    let rs = vec![rep(1, QuasiClosed, 4, 1), rep(3, QuasiClosed, 3, 1)];
    assert!(decide(&c, &rs, &InflightView::default(), &[])
        .force_close
        .is_empty());
}

/// A replica at the full BCSID with fewer blocks (a pipeline member that caught up by
/// snapshot and was closed without the data) is not a copy: never a source, replaced by a
/// new copy from the full ones, and deleted once enough full copies exist. Before content
/// checks (commit cd62657) all three counted as healthy: the verdict was Healthy.
#[test]
fn short_copy_at_the_full_bcsid_is_not_a_copy() {
    let c = closed(20, 5);
    let rs = vec![
        rep(1, Closed, 20, 5),
        rep(2, Closed, 20, 3),
        rep(3, Closed, 20, 5),
    ];
    assert!(!is_healthy_copy(&c, &rs, &rs[1]));
    let d = decide(&c, &rs, &InflightView::default(), &[2, 4]);
    assert_eq!(d.verdict(), Verdict::UnderReplicated);
    assert_eq!(d.healthy, 2);
    assert_eq!(d.replicate_to, vec![4], "not onto the short copy's node");
    assert_eq!(d.sources, vec![1, 3], "the short copy is never a source");
    assert!(d.delete.is_empty());
    // With the new copy in place the short one goes, and only it.
    let mut rs = rs;
    rs.push(rep(4, Closed, 20, 5));
    let d = decide(&c, &rs, &InflightView::default(), &[]);
    assert_eq!(d.verdict(), Verdict::OverReplicated);
    assert_eq!(d.delete, vec![2]);
}

/// Same blocks, different content: the odd digest out is not a copy.
#[test]
fn a_differing_digest_is_not_a_copy() {
    let c = closed(20, 5);
    let odd = with_digest(rep(2, Closed, 20, 5), digest_of(99));
    let rs = vec![rep(1, Closed, 20, 5), odd, rep(3, Closed, 20, 5)];
    let d = decide(&c, &rs, &InflightView::default(), &[4]);
    assert_eq!(d.healthy, 2);
    assert_eq!(d.sources, vec![1, 3]);
    // Two copies that disagree with no majority: nothing can be trusted, nothing is
    // deleted or copied.
    let rs = vec![
        rep(1, Closed, 20, 5),
        with_digest(rep(2, Closed, 20, 5), digest_of(99)),
    ];
    let d = decide(&c, &rs, &InflightView::default(), &[4]);
    assert_eq!(d.verdict(), Verdict::Missing);
    assert!(d.delete.is_empty() && d.replicate_to.is_empty());
}

/// A datanode that reports no digest (or another digest version) is judged by its block
/// count alone, so a mixed-version cluster keeps its copies.
#[test]
fn replicas_without_comparable_digests_are_judged_by_block_count() {
    let c = closed(20, 5);
    let rs = vec![
        rep(1, Closed, 20, 5),
        with_digest(rep(2, Closed, 20, 5), None),
        with_digest(rep(3, Closed, 20, 5), Some(Digest { version: 2, sum: 7 })),
    ];
    // Version 2 is the newest reported: only replica 3 holds one, so it is the reference
    // and the others are not comparable with it.
    assert_eq!(
        decide(&c, &rs, &InflightView::default(), &[]).verdict(),
        Verdict::Healthy
    );
    let short = with_digest(rep(2, Closed, 20, 4), None);
    let rs = vec![rep(1, Closed, 20, 5), short, rep(3, Closed, 20, 5)];
    assert_eq!(decide(&c, &rs, &InflightView::default(), &[]).healthy, 2);
}

/// Chaos finding 5 (seed 2, 2026-12-06): four datanodes; two CLOSED copies and two stale
/// QUASI_CLOSED replicas (one copied from the other before the container closed at a higher
/// BCSID). Every datanode holds a replica, so no target was free, and non-copies were
/// deleted only once the container had its three copies: it stayed under-replicated for
/// good. Fails on 32b2589 (no delete while under-replicated).
#[test]
fn stale_replicas_on_every_free_datanode_make_room_for_the_missing_copy() {
    let c = closed(9, 4);
    let rs = vec![
        rep(1, Closed, 9, 4),
        rep(2, QuasiClosed, 7, 3),
        rep(3, Closed, 9, 4),
        rep(4, QuasiClosed, 7, 3),
    ];
    let all = [1, 2, 3, 4];
    let d = decide(&c, &rs, &InflightView::default(), &all);
    assert_eq!(d.verdict(), Verdict::UnderReplicated);
    assert_eq!(d.healthy, 2);
    assert!(d.replicate_to.is_empty(), "{d:?}");
    // One copy short: one non-copy goes, the worst (the higher id among equals).
    assert_eq!(d.delete, vec![4]);
    // While that delete is in flight nothing more is deleted.
    let inflight = InflightView {
        adds: vec![],
        deletes: vec![4],
    };
    assert!(decide(&c, &rs, &inflight, &all).delete.is_empty());
    // Once it is gone the freed datanode takes the copy, from the real copies.
    let rs: Vec<ReplicaView> = rs.into_iter().filter(|r| r.datanode != 4).collect();
    let d = decide(&c, &rs, &InflightView::default(), &all);
    assert_eq!(d.replicate_to, vec![4]);
    assert_eq!(d.sources, vec![1, 3]);
    assert!(d.delete.is_empty());
    // With three copies the last non-copy is deleted as before.
    let mut rs = rs;
    rs.push(rep(4, Closed, 9, 4));
    let d = decide(&c, &rs, &InflightView::default(), &all);
    assert_eq!(d.verdict(), Verdict::OverReplicated);
    assert_eq!(d.delete, vec![2]);
}

#[test]
fn no_room_is_made_when_no_copy_could_be_made() {
    let c = closed(9, 4);
    let mut stale = rep(1, Closed, 9, 4);
    stale.node = NodeHealth::Stale;
    let rs = vec![stale, rep(2, QuasiClosed, 7, 3), rep(3, QuasiClosed, 7, 3)];
    let d = decide(&c, &rs, &InflightView::default(), &[1, 2, 3]);
    assert_eq!(d.verdict(), Verdict::UnderReplicated);
    assert!(d.delete.is_empty() && d.replicate_to.is_empty(), "{d:?}");
}
