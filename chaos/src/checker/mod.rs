//! The linearizability checker: a history of register operations, split per key (each key
//! is its own register, so each is checked alone), searched Wing–Gong style
//! ([`search`]), and on a violation cut down to a minimal violating window.
//!
//! The window: the latest end time `t` such that the history cut at `t` still fails, then
//! the latest start `s` such that the operations of `[s, t]` fail from an unknown starting
//! state. Cutting is a relaxation (operations completed after `t` are dropped, those still
//! running at `t` become unknown; operations before `s` are dropped and the state at `s` is
//! unknown), so both searches are monotone and found by bisection.

pub mod history;
pub mod lease;
pub mod model;
pub mod search;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use history::{Op, Outcome};
pub use model::{Call, Output, State, Value};
use search::{Event, Found};

/// The verdict for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyVerdict {
    Linearizable,
    /// Not linearizable; the operations of a minimal violating window, by invoke time.
    Violation {
        window: Vec<Op>,
    },
    /// The search ran out of time.
    Unknown,
}

/// The verdict for a history.
#[derive(Debug, Clone)]
pub struct Report {
    /// Per key, in key order.
    pub keys: BTreeMap<String, KeyVerdict>,
    /// Operations checked (ok and info; failed ones take no part).
    pub checked: usize,
}

impl Report {
    pub fn violations(&self) -> impl Iterator<Item = (&String, &Vec<Op>)> {
        self.keys.iter().filter_map(|(k, v)| match v {
            KeyVerdict::Violation { window } => Some((k, window)),
            _ => None,
        })
    }
    pub fn ok(&self) -> bool {
        self.keys.values().all(|v| *v == KeyVerdict::Linearizable)
    }
    /// One line: "linearizable", or what failed.
    pub fn verdict(&self) -> String {
        let bad: Vec<&String> = self.violations().map(|(k, _)| k).collect();
        let unknown: Vec<&String> = self
            .keys
            .iter()
            .filter(|(_, v)| **v == KeyVerdict::Unknown)
            .map(|(k, _)| k)
            .collect();
        match (bad.is_empty(), unknown.is_empty()) {
            (true, true) => "linearizable".into(),
            (false, _) => format!("NOT linearizable: keys {bad:?}"),
            (true, false) => format!("unknown (checker timed out) on keys {unknown:?}"),
        }
    }
}

/// Checks `history` (any order), giving each key at most `timeout` of search.
pub fn check(history: &[Op], timeout: Duration) -> Report {
    let mut per_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        if op.outcome != Outcome::Fail {
            per_key.entry(&op.key).or_default().push(op);
        }
    }
    let checked = per_key.values().map(Vec::len).sum();
    let keys = per_key
        .into_iter()
        .map(|(k, ops)| (k.to_string(), check_key(&ops, timeout)))
        .collect();
    Report { keys, checked }
}

fn event(op: &Op) -> Event {
    match op.outcome {
        Outcome::Ok(out) => Event {
            call: op.call,
            out: Some(out),
            inv: op.invoke_ns,
            ret: op.return_ns.max(op.invoke_ns),
        },
        _ => Event {
            call: op.call,
            out: None,
            inv: op.invoke_ns,
            ret: u64::MAX,
        },
    }
}

fn check_key(ops: &[&Op], timeout: Duration) -> KeyVerdict {
    let deadline = Instant::now() + timeout;
    // Reads of unknown outcome constrain nothing and change nothing.
    let ops: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|o| o.call != Call::Get || matches!(o.outcome, Outcome::Ok(_)))
        .collect();
    // A write of unknown outcome whose value no read saw can always take effect last
    // (after every other operation), where it changes nothing observed: drop it, which
    // keeps the search small when faults leave many writes unknown. Deletes stay (a read
    // of "absent" may need them).
    let seen: std::collections::HashSet<Value> = ops
        .iter()
        .filter_map(|o| match o.outcome {
            Outcome::Ok(Output::Read(Some(v))) => Some(v),
            _ => None,
        })
        .collect();
    let ops: Vec<&Op> = ops
        .into_iter()
        .filter(|o| match (o.outcome, o.call) {
            (Outcome::Info, Call::Put(v) | Call::CreateIfAbsent(v)) => seen.contains(&v),
            _ => true,
        })
        .collect();
    let all: Vec<Event> = ops.iter().map(|o| event(o)).collect();
    match search::check(&all, State::Absent, deadline) {
        Found::Linearizable => return KeyVerdict::Linearizable,
        Found::Unknown => return KeyVerdict::Unknown,
        Found::Violation => {}
    }
    let window = minimal_window(&all, deadline);
    let (s, t) = window.unwrap_or((0, u64::MAX));
    let mut window: Vec<Op> = ops
        .iter()
        .filter(|o| o.invoke_ns >= s && o.invoke_ns <= t || (o.invoke_ns < s && ret_of(o) >= s))
        .map(|o| (*o).clone())
        .collect();
    window.sort_by_key(|o| o.invoke_ns);
    KeyVerdict::Violation { window }
}

fn ret_of(o: &Op) -> u64 {
    match o.outcome {
        Outcome::Ok(_) => o.return_ns,
        _ => u64::MAX,
    }
}

/// The history cut at `t`: completed by `t` as is, running at `t` as unknown, later dropped.
fn cut_end(all: &[Event], t: u64) -> Vec<Event> {
    all.iter()
        .filter(|e| e.inv <= t)
        .filter(|e| !(e.ret > t && e.call == Call::Get))
        .map(|e| {
            if e.ret > t {
                Event {
                    out: None,
                    ret: u64::MAX,
                    ..*e
                }
            } else {
                *e
            }
        })
        .collect()
}

/// Drops what completed before `s`.
fn cut_start(all: &[Event], s: u64) -> Vec<Event> {
    all.iter().filter(|e| e.ret >= s).copied().collect()
}

/// `(s, t)` of a minimal violating window, or None if the deadline passed.
fn minimal_window(all: &[Event], deadline: Instant) -> Option<(u64, u64)> {
    let mut ends: Vec<u64> = all
        .iter()
        .map(|e| e.ret)
        .filter(|r| *r != u64::MAX)
        .collect();
    ends.sort_unstable();
    ends.dedup();
    // The first end at which the cut history fails (the whole history fails).
    let fails = |v: Vec<Event>, init: State| -> Option<bool> {
        match search::check(&v, init, deadline) {
            Found::Violation => Some(true),
            Found::Linearizable => Some(false),
            Found::Unknown => None,
        }
    };
    let (mut lo, mut hi) = (0usize, ends.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fails(cut_end(all, ends[mid]), State::Absent)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let t = *ends.get(lo).unwrap_or(&u64::MAX);
    let cut = cut_end(all, t);
    let mut starts: Vec<u64> = cut.iter().map(|e| e.inv).collect();
    starts.sort_unstable();
    starts.dedup();
    // The latest start from which [s, t] still fails from an unknown state (if even the
    // whole cut passes from an unknown state, the violation needs the empty start).
    if starts.is_empty() || !fails(cut_start(&cut, starts[0]), State::Any)? {
        return Some((0, t));
    }
    let (mut lo, mut hi) = (0usize, starts.len());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fails(cut_start(&cut, starts[mid]), State::Any)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let s = starts.get(lo).copied().unwrap_or(0);
    Some((s, t))
}

#[cfg(test)]
mod tests;
