//! Wing–Gong search with Lowe's memoisation, as Porcupine does it: walk the call and
//! return events in time order, linearize a call whose step the model allows, backtrack at
//! a return whose call is not linearized yet, and never revisit a (linearized set, state)
//! pair. Exponential in the worst case, so it runs against a deadline.

use std::collections::HashSet;
use std::time::Instant;

use super::model::{step, Call, Output, State};

/// One operation as the search sees it: `ret` u64::MAX for an unknown outcome.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub call: Call,
    pub out: Option<Output>,
    pub inv: u64,
    pub ret: u64,
}

/// The search's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Linearizable,
    Violation,
    /// The deadline passed first.
    Unknown,
}

/// Whether `ops` (one key) is linearizable from `init`.
pub fn check(ops: &[Event], init: State, deadline: Instant) -> Found {
    let n = ops.len();
    if n == 0 {
        return Found::Linearizable;
    }
    // Entries: 2i = call of op i, 2i+1 = its return. Sorted by time, calls before returns
    // at the same instant (touching operations count as concurrent).
    let mut order: Vec<usize> = (0..2 * n).collect();
    order.sort_by_key(|&e| {
        let op = &ops[e / 2];
        if e % 2 == 0 {
            (op.inv, 0, e)
        } else {
            (op.ret, 1, e)
        }
    });
    // A doubly linked list over the entries, with a head sentinel at index 2n.
    let head = 2 * n;
    let mut next = vec![usize::MAX; 2 * n + 1];
    let mut prev = vec![usize::MAX; 2 * n + 1];
    let mut last = head;
    for &e in &order {
        next[last] = e;
        prev[e] = last;
        last = e;
    }
    let words = n.div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut state = init;
    let mut entry = next[head];
    let mut steps: u64 = 0;
    while next[head] != usize::MAX {
        steps += 1;
        if steps.is_multiple_of(4096) && Instant::now() > deadline {
            return Found::Unknown;
        }
        if entry == usize::MAX {
            // Every remaining call was tried at this point: backtrack.
            let Some((call_entry, s)) = stack.pop() else {
                return Found::Violation;
            };
            state = s;
            let i = call_entry / 2;
            linearized[i / 64] &= !(1 << (i % 64));
            unlift(&mut next, &mut prev, call_entry);
            entry = next[call_entry];
            continue;
        }
        if entry.is_multiple_of(2) {
            let i = entry / 2;
            let op = &ops[i];
            if let Some(s2) = step(state, op.call, op.out) {
                let mut l2 = linearized.clone();
                l2[i / 64] |= 1 << (i % 64);
                if seen.insert((l2.clone(), s2)) {
                    stack.push((entry, state));
                    state = s2;
                    linearized = l2;
                    lift(&mut next, &mut prev, entry);
                    entry = next[head];
                    continue;
                }
            }
            entry = next[entry];
        } else {
            // A return whose call is still in the list: that call must have been
            // linearized by now and was not. Backtrack.
            let Some((call_entry, s)) = stack.pop() else {
                return Found::Violation;
            };
            state = s;
            let i = call_entry / 2;
            linearized[i / 64] &= !(1 << (i % 64));
            unlift(&mut next, &mut prev, call_entry);
            entry = next[call_entry];
        }
    }
    Found::Linearizable
}

/// Removes a call entry and its return entry from the list.
fn lift(next: &mut [usize], prev: &mut [usize], call: usize) {
    for e in [call, call + 1] {
        let (p, n) = (prev[e], next[e]);
        next[p] = n;
        if n != usize::MAX {
            prev[n] = p;
        }
    }
}

/// Puts them back (in reverse order of removal; their own links were kept).
fn unlift(next: &mut [usize], prev: &mut [usize], call: usize) {
    for e in [call + 1, call] {
        let (p, n) = (prev[e], next[e]);
        next[p] = e;
        if n != usize::MAX {
            prev[n] = e;
        }
    }
}
