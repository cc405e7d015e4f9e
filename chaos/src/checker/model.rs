//! The register every chaos key is: put, get, delete, create-if-absent, each step a pure
//! function of the state, so the search can memoise on (linearized set, state).

use serde::{Deserialize, Serialize};

/// A value written to a register. Every write in a run writes a value no other write
/// uses, so a read names the one write it saw.
pub type Value = u64;

/// What an operation asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Call {
    Put(Value),
    Get,
    Delete,
    /// Writes the value only when the register is absent.
    CreateIfAbsent(Value),
}

/// What a completed operation answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Output {
    /// Put and Delete: done (Delete whether or not something was there: a retried delete
    /// cannot tell).
    Done,
    /// Get: the value read (None: absent).
    Read(Option<Value>),
    /// CreateIfAbsent: whether this call created the value.
    Created(bool),
    /// CreateIfAbsent refused with "exists" after the client retried: maybe by its own
    /// earlier attempt. Took effect (or found a value) within the call, either way.
    CreatedOrFound,
}

/// The register's state. `Any` and `PresentUnknown` only appear when checking a window
/// cut out of a longer history, whose starting state is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Absent,
    Val(Value),
    /// Nothing known (the start of a window).
    Any,
    /// Some value, not known which (a refused create seen from `Any`).
    PresentUnknown,
}

/// One step: the state after `call` answered `out` in state `s`, or None if it could not
/// have. `out` None is an operation whose outcome is unknown (`info`): it may have taken
/// effect, and its answer constrains nothing.
pub fn step(s: State, call: Call, out: Option<Output>) -> Option<State> {
    use State::*;
    match (call, out) {
        (Call::Put(v), None | Some(Output::Done)) => Some(Val(v)),
        (Call::Delete, None | Some(Output::Done)) => Some(Absent),
        (Call::Get, None) => Some(s),
        (Call::Get, Some(Output::Read(r))) => match (s, r) {
            (Absent | Any, None) => Some(Absent),
            (Val(a), Some(b)) if a == b => Some(s),
            (Any | PresentUnknown, Some(b)) => Some(Val(b)),
            _ => None,
        },
        (Call::CreateIfAbsent(v), None) => Some(match s {
            Absent => Val(v),
            // Unknown whether it found the register empty: the search also tries the
            // other orders, and `Any` stays `Any` (a value or this one).
            Any => Any,
            other => other,
        }),
        (Call::CreateIfAbsent(v), Some(Output::Created(true))) => match s {
            Absent | Any => Some(Val(v)),
            _ => None,
        },
        (Call::CreateIfAbsent(v), Some(Output::CreatedOrFound)) => Some(match s {
            Absent => Val(v),
            other => other,
        }),
        (Call::CreateIfAbsent(_), Some(Output::Created(false))) => match s {
            Absent => None,
            Any => Some(PresentUnknown),
            other => Some(other),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_of_a_register() {
        use State::*;
        assert_eq!(step(Absent, Call::Put(1), Some(Output::Done)), Some(Val(1)));
        assert_eq!(
            step(Val(1), Call::Get, Some(Output::Read(Some(1)))),
            Some(Val(1))
        );
        assert_eq!(step(Val(1), Call::Get, Some(Output::Read(Some(2)))), None);
        assert_eq!(step(Val(1), Call::Get, Some(Output::Read(None))), None);
        assert_eq!(step(Absent, Call::Get, Some(Output::Read(Some(1)))), None);
        assert_eq!(step(Val(1), Call::Delete, Some(Output::Done)), Some(Absent));
        let created = Some(Output::Created(true));
        assert_eq!(step(Absent, Call::CreateIfAbsent(3), created), Some(Val(3)));
        assert_eq!(step(Val(1), Call::CreateIfAbsent(3), created), None);
        let refused = Some(Output::Created(false));
        assert_eq!(step(Absent, Call::CreateIfAbsent(3), refused), None);
        assert_eq!(step(Val(1), Call::CreateIfAbsent(3), refused), Some(Val(1)));
        assert_eq!(
            step(Any, Call::Get, Some(Output::Read(Some(7)))),
            Some(Val(7))
        );
        assert_eq!(
            step(Any, Call::CreateIfAbsent(3), refused),
            Some(PresentUnknown)
        );
        assert_eq!(
            step(PresentUnknown, Call::Get, Some(Output::Read(None))),
            None
        );
    }
}
