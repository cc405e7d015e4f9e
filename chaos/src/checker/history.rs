//! A history as the workload records it: one entry per operation with its call and return
//! times on one monotonic clock (nanoseconds since the run started).

use serde::{Deserialize, Serialize};

use super::model::{Call, Output};

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Answered: its output is known.
    Ok(Output),
    /// Refused before it could take effect (e.g. the leader refused the open): dropped
    /// from the check.
    Fail,
    /// Unknown (timeout, connection lost mid-call): it may take effect at any time after
    /// its call, or never.
    Info,
}

/// One operation of one client on one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub client: u32,
    pub key: String,
    pub call: Call,
    /// When it was invoked (ns since the run started).
    pub invoke_ns: u64,
    /// When its answer arrived (for `Info`: when the client gave up).
    pub return_ns: u64,
    pub outcome: Outcome,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let out = match self.outcome {
            Outcome::Ok(o) => format!("ok {o:?}"),
            Outcome::Fail => "fail".into(),
            Outcome::Info => "info".into(),
        };
        write!(
            f,
            "[{:>10.3}ms .. {:>10.3}ms] client {} {} {:?} -> {out}",
            self.invoke_ns as f64 / 1e6,
            self.return_ns as f64 / 1e6,
            self.client,
            self.key,
            self.call
        )
    }
}
