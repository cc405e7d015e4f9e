//! Known histories: each non-linearizable one must be rejected, each linearizable one
//! (with concurrency and unknown outcomes) accepted.

use std::time::Duration;

use super::*;

const T: Duration = Duration::from_secs(10);

fn op(client: u32, inv: u64, ret: u64, call: Call, outcome: Outcome) -> Op {
    Op {
        client,
        key: "k".into(),
        call,
        invoke_ns: inv,
        return_ns: ret,
        outcome,
    }
}
fn put(c: u32, inv: u64, ret: u64, v: Value) -> Op {
    op(c, inv, ret, Call::Put(v), Outcome::Ok(Output::Done))
}
fn get(c: u32, inv: u64, ret: u64, v: Option<Value>) -> Op {
    op(c, inv, ret, Call::Get, Outcome::Ok(Output::Read(v)))
}
fn del(c: u32, inv: u64, ret: u64) -> Op {
    op(c, inv, ret, Call::Delete, Outcome::Ok(Output::Done))
}
fn create(c: u32, inv: u64, ret: u64, v: Value, created: bool) -> Op {
    op(
        c,
        inv,
        ret,
        Call::CreateIfAbsent(v),
        Outcome::Ok(Output::Created(created)),
    )
}

fn rejected(h: &[Op]) -> Vec<Op> {
    let r = check(h, T);
    match &r.keys["k"] {
        KeyVerdict::Violation { window } => window.clone(),
        other => panic!("expected a violation, got {other:?} for {h:#?}"),
    }
}

fn accepted(h: &[Op]) {
    let r = check(h, T);
    assert!(r.ok(), "expected linearizable, got {:?} for {h:#?}", r.keys);
}

#[test]
fn stale_read_is_rejected() {
    // 1 then 2 are written one after the other; a read that starts after 2 was
    // acknowledged returns 1 (a cut-off leader answering from old state).
    let h = [put(1, 0, 10, 1), put(1, 20, 30, 2), get(2, 40, 50, Some(1))];
    let w = rejected(&h);
    assert!(w.contains(&h[2]), "the stale read is in the window: {w:#?}");
    assert!(!w.contains(&h[0]), "the window is minimal: {w:#?}");
}

#[test]
fn lost_write_is_rejected() {
    // An acknowledged write that a later read does not see (and nothing deleted it).
    let h = [put(1, 0, 10, 1), get(2, 20, 30, None)];
    rejected(&h);
    // Same with a concurrent unknown delete that started only after the read.
    let h = [
        put(1, 0, 10, 1),
        get(2, 20, 30, None),
        op(3, 40, 50, Call::Delete, Outcome::Info),
    ];
    rejected(&h);
}

#[test]
fn read_of_a_never_written_value_is_rejected() {
    let h = [put(1, 0, 10, 1), get(2, 5, 30, Some(99))];
    rejected(&h);
    // A failed write (refused before it took effect) writes nothing either.
    let h = [
        op(1, 0, 10, Call::Put(7), Outcome::Fail),
        get(2, 20, 30, Some(7)),
    ];
    rejected(&h);
}

#[test]
fn create_if_absent_twice_is_rejected() {
    // Both creates claim to have created, with no delete between them.
    let h = [create(1, 0, 10, 1, true), create(2, 20, 30, 2, true)];
    rejected(&h);
    // A create refused on an empty register.
    let h = [create(1, 0, 10, 1, false)];
    rejected(&h);
}

#[test]
fn concurrent_histories_are_accepted() {
    // Two overlapping writes; reads during the overlap may see either, in one order.
    accepted(&[
        put(1, 0, 100, 1),
        put(2, 10, 90, 2),
        get(3, 20, 30, Some(2)),
        get(3, 40, 50, Some(1)),
        get(4, 110, 120, Some(1)),
    ]);
    // Delete then create, concurrent reads see the steps in order.
    accepted(&[
        put(1, 0, 10, 1),
        del(1, 20, 30),
        get(2, 25, 35, None),
        create(2, 40, 50, 3, true),
        create(3, 45, 60, 4, false),
        get(1, 70, 80, Some(3)),
    ]);
}

#[test]
fn unknown_outcomes_may_or_may_not_take_effect() {
    // An unknown write seen later.
    accepted(&[
        op(1, 0, 10, Call::Put(1), Outcome::Info),
        get(2, 1000, 1010, Some(1)),
    ]);
    // An unknown write never seen.
    accepted(&[
        put(2, 0, 5, 5),
        op(1, 10, 20, Call::Put(1), Outcome::Info),
        get(2, 1000, 1010, Some(5)),
    ]);
    // An unknown write taking effect long after the client gave up, between two reads.
    accepted(&[
        put(2, 0, 5, 5),
        op(1, 10, 20, Call::Put(1), Outcome::Info),
        get(2, 100, 110, Some(5)),
        get(2, 200, 210, Some(1)),
    ]);
    // But never before its call.
    rejected(&[
        get(2, 0, 5, Some(1)),
        op(1, 10, 20, Call::Put(1), Outcome::Info),
    ]);
}

#[test]
fn long_histories_check_quickly_and_keys_are_independent() {
    let mut h = Vec::new();
    let mut t = 0;
    for v in 1..=2000u64 {
        // Pairs of overlapping writers and a reader overlapping both.
        h.push(put(1, t, t + 20, v * 2));
        h.push(put(2, t + 5, t + 25, v * 2 + 1));
        h.push(get(3, t + 10, t + 30, Some(v * 2)));
        t += 40;
    }
    let mut other = put(9, 0, 1, 1);
    other.key = "other".into();
    h.push(other);
    let start = std::time::Instant::now();
    let r = check(&h, T);
    assert!(r.ok(), "{:?}", r.verdict());
    assert_eq!(r.checked, 6001);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // One stale read near the end is found, and the window stays near it.
    h.push(get(4, t + 100, t + 110, Some(4)));
    let w = rejected(&h);
    assert!(w.len() <= 6, "window of {} ops: {w:#?}", w.len());
}

#[test]
fn unseen_unknown_writes_are_dropped_but_a_refused_create_counts() {
    // Hundreds of unknown writes nobody read do not slow the search down.
    let mut h = vec![put(1, 0, 10, 1)];
    for i in 0..500 {
        h.push(op(2, 20 + i, 30 + i, Call::Put(1000 + i), Outcome::Info));
    }
    h.push(get(3, 2000, 2010, Some(1)));
    accepted(&h);
    // "Created or found" on an empty register created it.
    accepted(&[
        op(
            1,
            0,
            10,
            Call::CreateIfAbsent(5),
            Outcome::Ok(Output::CreatedOrFound),
        ),
        get(2, 20, 30, Some(5)),
    ]);
    rejected(&[
        op(
            1,
            0,
            10,
            Call::CreateIfAbsent(5),
            Outcome::Ok(Output::CreatedOrFound),
        ),
        get(2, 20, 30, None),
    ]);
}
