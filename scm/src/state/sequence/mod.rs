//! [`SequenceIdGenerator`]: the leader's in-memory dispenser of sequence ids.
//!
//! Ids come from a batch per sequence name, reserved by a replicated compare-and-set
//! ([`ScmRequest::AllocateBatch`]). The generator never reads or writes the sequence rows
//! itself: its guess of a row's value is only an expectation, and a failed compare-and-set
//! teaches it the real value. So two leaders (an old one that has not noticed yet and a new
//! one) can never hand out the same id: at most one of their proposals for a given
//! `expected_last` succeeds.
//!
//! Proposals go through [`BatchProposer`], implemented by the SCM's `RaftGroup` and by
//! fakes in tests.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use rozone_raft::{RaftGroup, RaftGroupError};

use super::logic::ScmLogic;
use super::request::{ScmRequest, ScmResponse};

/// Ids reserved per batch unless configured otherwise.
pub const DEFAULT_BATCH_SIZE: u64 = 1000;
/// Proposals per batch before giving up: each failed compare-and-set means another leader
/// allocated meanwhile, which should not happen more than once or twice in a row.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// Sends an [`ScmRequest`] through the log and returns its applied response.
pub trait BatchProposer: Send + Sync {
    type Error: std::error::Error + Send + Sync + 'static;

    fn propose(
        &self,
        req: ScmRequest,
    ) -> impl Future<Output = Result<ScmResponse, Self::Error>> + Send;
}

impl BatchProposer for RaftGroup<ScmLogic> {
    type Error = RaftGroupError;

    fn propose(
        &self,
        req: ScmRequest,
    ) -> impl Future<Output = Result<ScmResponse, RaftGroupError>> + Send {
        self.write(req)
    }
}

impl<P: BatchProposer> BatchProposer for Arc<P> {
    type Error = P::Error;

    fn propose(
        &self,
        req: ScmRequest,
    ) -> impl Future<Output = Result<ScmResponse, Self::Error>> + Send {
        (**self).propose(req)
    }
}

/// Why no id could be handed out.
#[derive(Debug, thiserror::Error)]
pub enum SequenceIdError<E: std::error::Error + 'static> {
    /// The proposal failed (e.g. not the leader any more); retry on the current leader.
    #[error("propose batch for {name}: {source}")]
    Propose {
        name: String,
        #[source]
        source: E,
    },
    /// Every compare-and-set failed: other proposers keep moving the row.
    #[error("no batch for {name} after {attempts} attempts (row now {current})")]
    Contended {
        name: String,
        attempts: u32,
        current: u64,
    },
    /// The batch was reserved but the generator was invalidated meanwhile (leader change);
    /// its ids are skipped, never handed out.
    #[error("sequence ids invalidated while allocating {name}")]
    Invalidated { name: String },
    /// The sequence would pass `u64::MAX`.
    #[error("sequence {name} exhausted")]
    Exhausted { name: String },
    /// The state machine refused the request itself (unknown name, …).
    #[error("allocate batch for {name} refused: {response:?}")]
    Refused { name: String, response: ScmResponse },
}

/// Ids `next ..= last` are still free.
#[derive(Debug, Clone, Copy)]
struct Batch {
    next: u64,
    last: u64,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bumped by `invalidate`, so an allocation that was in flight across it is discarded.
    epoch: u64,
    batches: HashMap<String, Batch>,
    /// Last known value of each row: the next compare-and-set's expectation.
    rows: HashMap<String, u64>,
}

/// Hands out sequence ids on the leader. Cheap to share behind an `Arc`.
pub struct SequenceIdGenerator<P> {
    proposer: P,
    batch_size: u64,
    max_attempts: u32,
    inner: Mutex<Inner>,
    /// One batch allocation at a time, so concurrent callers do not race each other's
    /// compare-and-set and waste batches.
    alloc: tokio::sync::Mutex<()>,
}

impl<P: BatchProposer> SequenceIdGenerator<P> {
    /// A generator reserving `batch_size` ids per proposal (at least 1).
    pub fn new(proposer: P, batch_size: u64) -> Self {
        Self {
            proposer,
            batch_size: batch_size.max(1),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            inner: Mutex::new(Inner::default()),
            alloc: tokio::sync::Mutex::new(()),
        }
    }

    /// Sets how many proposals one batch may take (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    pub fn proposer(&self) -> &P {
        &self.proposer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The guarded maps are always left consistent, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, name: &str) -> Option<u64> {
        let mut g = self.lock();
        let b = g.batches.get_mut(name)?;
        if b.next > b.last {
            return None;
        }
        let id = b.next;
        b.next += 1;
        Some(id)
    }

    /// Drops every batch and row guess (on leader change: a new term may follow writes
    /// this node has not seen, and another leader may have used the rest of our batches).
    pub fn invalidate(&self) {
        let mut g = self.lock();
        g.epoch += 1;
        g.batches.clear();
        g.rows.clear();
    }

    /// The next id of sequence `name`.
    pub async fn next_id(&self, name: &str) -> Result<u64, SequenceIdError<P::Error>> {
        if let Some(id) = self.take(name) {
            return Ok(id);
        }
        let _alloc = self.alloc.lock().await;
        // Another caller may have refilled the batch while we waited.
        if let Some(id) = self.take(name) {
            return Ok(id);
        }
        let (epoch, mut expected) = {
            let g = self.lock();
            (g.epoch, g.rows.get(name).copied().unwrap_or(0))
        };
        for _ in 0..self.max_attempts {
            let new_last = expected.checked_add(self.batch_size).ok_or_else(|| {
                SequenceIdError::Exhausted {
                    name: name.to_string(),
                }
            })?;
            let resp = self
                .proposer
                .propose(ScmRequest::AllocateBatch {
                    name: name.to_string(),
                    expected_last: expected,
                    new_last,
                })
                .await
                .map_err(|source| SequenceIdError::Propose {
                    name: name.to_string(),
                    source,
                })?;
            match resp {
                ScmResponse::BatchAllocated { first, last, .. } => {
                    let mut g = self.lock();
                    if g.epoch != epoch {
                        return Err(SequenceIdError::Invalidated {
                            name: name.to_string(),
                        });
                    }
                    g.rows.insert(name.to_string(), last);
                    // `first` is handed out now; the batch keeps the rest.
                    g.batches.insert(
                        name.to_string(),
                        Batch {
                            next: first + 1,
                            last,
                        },
                    );
                    return Ok(first);
                }
                ScmResponse::CasFailed { current, .. } => {
                    tracing::debug!(sequence = name, expected, current, "batch CAS failed");
                    expected = current;
                }
                other => {
                    return Err(SequenceIdError::Refused {
                        name: name.to_string(),
                        response: other,
                    })
                }
            }
        }
        tracing::warn!(
            sequence = name,
            current = expected,
            "no sequence id batch after {} attempts",
            self.max_attempts
        );
        Err(SequenceIdError::Contended {
            name: name.to_string(),
            attempts: self.max_attempts,
            current: expected,
        })
    }
}

#[cfg(test)]
mod tests;
