//! The bound on LOCAL_LEASE reads. Such a read may be answered by a follower from its own
//! state, so it is not linearizable and takes no part in the linearizability check; what a
//! follower promises instead is freshness: it serves only while its state is at least as new
//! as the leader's was one lease before (the lease counts from when the leader sent its last
//! append, `rozone_raft::contact`, with log limit 0). So a LOCAL_LEASE read must return a
//! value the register held at some moment no earlier than `bound` before the read was
//! invoked, and no later than its return.
//!
//! The check is per key, over the register's versions (what each write, or the start, left
//! in it):
//! - a version *may have been current* from its write's invoke on, unless it was *surely
//!   replaced*: some write that surely took effect (answered: put, delete, a create that
//!   created) was invoked after this version's write had surely returned, and returned
//!   itself at time `d` — then the version was gone from `d` on;
//! - a read of value `x` invoked at `i`, returned at `r`, is within the bound if some
//!   version holding `x` was written (invoked) before `r` and not surely replaced before
//!   `i - bound`.
//!
//! Writes of unknown outcome (`info`, a create that found or made its value) may have taken
//! effect at any time after their invoke, so they are never "surely" anything: the check
//! accepts every read they could explain, and flags only reads no order of events allows.

use std::collections::BTreeMap;
use std::time::Duration;

use super::history::{Op, Outcome};
use super::model::{Call, Output, Value};

/// What the bound check found.
#[derive(Debug, Clone, Default)]
pub struct LeaseReport {
    /// LOCAL_LEASE reads with an answer (each was checked).
    pub checked: usize,
    /// Reads outside the bound, each with why.
    pub violations: Vec<(Op, String)>,
}

impl LeaseReport {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// One state of a register: the value a write (or the start) left in it.
#[derive(Debug, Clone, Copy)]
struct Version {
    value: Option<Value>,
    invoke: u64,
    /// When the write surely had taken effect (it answered); `None`: unknown.
    done: Option<u64>,
}

/// The versions a key's operations (of the linearizable history) may have produced.
fn versions(ops: &[&Op]) -> Vec<Version> {
    let mut v = vec![Version {
        value: None,
        invoke: 0,
        done: Some(0),
    }];
    for op in ops {
        let (value, sure) = match (op.call, op.outcome) {
            (_, Outcome::Fail) | (Call::Get, _) => continue,
            (Call::CreateIfAbsent(_), Outcome::Ok(Output::Created(false))) => continue,
            (Call::Put(x), Outcome::Ok(_)) => (Some(x), true),
            (Call::Delete, Outcome::Ok(_)) => (None, true),
            (Call::CreateIfAbsent(x), Outcome::Ok(Output::Created(true))) => (Some(x), true),
            (Call::Put(x) | Call::CreateIfAbsent(x), _) => (Some(x), false),
            (Call::Delete, Outcome::Info) => (None, false),
        };
        v.push(Version {
            value,
            invoke: op.invoke_ns,
            done: sure.then_some(op.return_ns),
        });
    }
    v
}

/// For each version, the earliest time it was surely replaced (`u64::MAX`: never).
fn replaced_at(v: &[Version]) -> Vec<u64> {
    // Sure writes by invoke time, with the earliest return among those invoked later.
    let mut sure: Vec<(u64, u64)> = v
        .iter()
        .filter_map(|x| x.done.map(|d| (x.invoke, d)))
        .collect();
    sure.sort_unstable();
    let mut suffix_min = vec![u64::MAX; sure.len() + 1];
    for i in (0..sure.len()).rev() {
        suffix_min[i] = suffix_min[i + 1].min(sure[i].1);
    }
    v.iter()
        .map(|x| match x.done {
            None => u64::MAX,
            Some(d) => {
                let first_later = sure.partition_point(|(inv, _)| *inv <= d);
                suffix_min[first_later]
            }
        })
        .collect()
}

/// Checks every answered LOCAL_LEASE read of `lease_reads` against the writes of `history`.
pub fn check(history: &[Op], lease_reads: &[Op], bound: Duration) -> LeaseReport {
    let bound = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(&op.key).or_default().push(op);
    }
    let mut versions_by_key = BTreeMap::new();
    let mut report = LeaseReport::default();
    for read in lease_reads {
        let Outcome::Ok(Output::Read(x)) = read.outcome else {
            continue;
        };
        report.checked += 1;
        let (vs, gone) = versions_by_key.entry(read.key.as_str()).or_insert_with(|| {
            let vs = versions(by_key.get(read.key.as_str()).map_or(&[][..], |v| &v[..]));
            let gone = replaced_at(&vs);
            (vs, gone)
        });
        let since = read.invoke_ns.saturating_sub(bound);
        let mut candidates = vs.iter().zip(gone.iter()).filter(|(v, _)| v.value == x);
        let mut newest_gone = None;
        let fresh = candidates.any(|(v, g)| {
            let ok = v.invoke <= read.return_ns && *g >= since;
            if !ok && v.invoke <= read.return_ns {
                newest_gone = Some(newest_gone.map_or(*g, |n: u64| n.max(*g)));
            }
            ok
        });
        if fresh {
            continue;
        }
        let why = match (x, newest_gone) {
            (Some(Value::MAX), _) => "a value no write of this run wrote".to_string(),
            (_, None) => "a value no write had produced by the read's return".to_string(),
            (_, Some(g)) => format!(
                "a value surely replaced at {:.3} ms, {:.3} ms before the read's invoke \
                 (bound {:.3} ms)",
                g as f64 / 1e6,
                (read.invoke_ns - g) as f64 / 1e6,
                bound as f64 / 1e6
            ),
        };
        report.violations.push((read.clone(), why));
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const BOUND: Duration = Duration::from_millis(100);

    fn op(inv: u64, ret: u64, call: Call, outcome: Outcome) -> Op {
        Op {
            client: 0,
            key: "k".into(),
            call,
            invoke_ns: inv * MS,
            return_ns: ret * MS,
            outcome,
        }
    }
    fn put(inv: u64, ret: u64, v: Value) -> Op {
        op(inv, ret, Call::Put(v), Outcome::Ok(Output::Done))
    }
    fn read(inv: u64, ret: u64, v: Option<Value>) -> Op {
        op(inv, ret, Call::Get, Outcome::Ok(Output::Read(v)))
    }
    fn bad(history: &[Op], r: Op) -> bool {
        !check(history, &[r], BOUND).ok()
    }

    #[test]
    fn a_read_within_the_bound_of_a_replaced_value_passes_and_one_beyond_fails() {
        let h = [put(0, 10, 1), put(20, 30, 2)];
        // Value 1 was current until 30 at the latest: a read invoked by 130 may see it.
        assert!(!bad(&h, read(129, 131, Some(1))));
        assert!(!bad(&h, read(130, 131, Some(1))));
        assert!(bad(&h, read(131, 140, Some(1))), "stale beyond the bound");
        assert!(!bad(&h, read(500, 501, Some(2))));
    }

    #[test]
    fn absent_is_the_start_and_what_deletes_leave() {
        let h = [
            put(0, 10, 1),
            op(20, 30, Call::Delete, Outcome::Ok(Output::Done)),
            put(40, 50, 2),
        ];
        assert!(
            !bad(&h, read(5, 6, None)),
            "the start, not yet surely replaced"
        );
        assert!(
            !bad(&h, read(140, 141, None)),
            "the delete's absence, within the bound"
        );
        assert!(
            bad(&h, read(151, 152, None)),
            "absent long after the put returned"
        );
    }

    #[test]
    fn never_written_and_not_yet_written_values_fail() {
        let h = [put(50, 60, 1)];
        assert!(bad(&h, read(0, 10, Some(1))), "read before the write began");
        assert!(bad(&h, read(0, 100, Some(7))), "a value no write wrote");
        assert!(bad(&h, read(0, 100, Some(Value::MAX))));
        assert!(!bad(&h, read(0, 55, Some(1))), "concurrent with its write");
    }

    #[test]
    fn writes_of_unknown_outcome_never_surely_replace_or_are_replaced() {
        // An info put may have landed at any time after its invoke: its value may be read
        // long after, and it replaced nothing for sure.
        let h = [
            put(0, 10, 1),
            op(20, 30, Call::Put(2), Outcome::Info),
            put(40, 50, 3),
        ];
        assert!(!bad(&h, read(1000, 1001, Some(2))));
        assert!(
            bad(&h, read(1000, 1001, Some(1))),
            "replaced by the sure put 3"
        );
        let h = [put(0, 10, 1), op(20, 30, Call::Put(2), Outcome::Info)];
        assert!(
            !bad(&h, read(1000, 1001, Some(1))),
            "2 may never have landed"
        );
        // A failed write never happened; a refused create left nothing.
        let h = [
            put(0, 10, 1),
            op(20, 30, Call::Put(2), Outcome::Fail),
            op(
                20,
                30,
                Call::CreateIfAbsent(3),
                Outcome::Ok(Output::Created(false)),
            ),
        ];
        assert!(bad(&h, read(40, 41, Some(2))));
        assert!(bad(&h, read(40, 41, Some(3))));
        assert!(!bad(&h, read(1000, 1001, Some(1))));
    }

    #[test]
    fn overlapping_writes_do_not_surely_replace_each_other() {
        // Put 2 began before put 1 returned: either order is possible, so 1 may be last.
        let h = [put(0, 30, 1), put(20, 40, 2)];
        assert!(!bad(&h, read(1000, 1001, Some(1))));
        assert!(!bad(&h, read(1000, 1001, Some(2))));
    }

    #[test]
    fn unanswered_reads_are_not_checked() {
        let r = op(0, 1, Call::Get, Outcome::Info);
        let rep = check(&[], &[r], BOUND);
        assert_eq!((rep.checked, rep.ok()), (0, true));
    }
}
