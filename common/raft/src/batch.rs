//! Group commit: the client writes that reach a leader while its earlier proposals are in
//! flight go out together, as one log entry.
//!
//! Every entry costs openraft's bookkeeping, messages between its tasks, a log record and a
//! slot in each append on every member, and a wake-up of each waiting caller; under load
//! that per-entry work, not the disk, bounds a ring's write rate (BENCHMARKS.md, "the
//! metadata write path"). So a leader keeps at most `in_flight` proposals outstanding, and
//! the writes that arrive meanwhile queue and are proposed as one entry of format 3
//! ([`envelope::V3_BATCH`]): Ozone's OM double buffer, here at the Raft layer so every
//! state machine that wants it has it. A write that finds a free slot goes out alone and at
//! once: a lone client waits for nothing.
//!
//! Each request in a batch keeps its own call tag (so the retry cache works per call) and
//! is applied in order, as if it were its own entry at the batch's log index
//! ([`crate::state_machine`]); the replies come back framed in the same order and each
//! caller gets its own. A failed proposal fails every write in it with the same error:
//! none of them was applied, or (a leader deposed after appending) the caller cannot know,
//! exactly as for a write proposed alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::envelope;
use crate::error::RaftGroupError;

/// Proposes one entry's request bytes and returns its applied response bytes.
pub type Propose =
    Arc<dyn Fn(Vec<u8>) -> BoxFuture<'static, Result<Vec<u8>, RaftGroupError>> + Send + Sync>;

/// How large a batch may grow and how many may be outstanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most writes in one entry (1 turns batching off).
    pub max_writes: usize,
    /// A batch stops growing at this many request bytes (a larger single write still goes,
    /// alone).
    pub max_bytes: usize,
    /// Proposals outstanding at once; writes queue while all are.
    pub in_flight: usize,
}

/// What the batcher did (for `/metrics`).
#[derive(Debug, Default)]
pub struct BatchStats {
    /// Entries proposed.
    pub entries: AtomicU64,
    /// Writes proposed in them.
    pub writes: AtomicU64,
}

type Reply = Result<Vec<u8>, RaftGroupError>;

struct Pending {
    sealed: Vec<u8>,
    reply: oneshot::Sender<Reply>,
}

/// The queue in front of a group's proposals. Dropping it ends its task once the
/// outstanding proposals are answered.
pub struct Batcher {
    tx: mpsc::UnboundedSender<Pending>,
    stats: Arc<BatchStats>,
}

impl Batcher {
    /// Starts the collecting task on the current Tokio runtime.
    pub fn start(limits: BatchLimits, propose: Propose) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(BatchStats::default());
        tokio::spawn(collect(rx, limits, propose, stats.clone()));
        Self { tx, stats }
    }

    /// Proposes `sealed` (a request of format 1 or 2), alone or with others, and returns
    /// its own reply once applied.
    pub async fn submit(&self, sealed: Vec<u8>) -> Reply {
        self.enqueue(sealed)?.await.map_err(|_| stopped())?
    }

    /// Queues `sealed`; the receiver gets its reply.
    fn enqueue(&self, sealed: Vec<u8>) -> Result<oneshot::Receiver<Reply>, RaftGroupError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Pending { sealed, reply })
            .map_err(|_| stopped())?;
        Ok(rx)
    }

    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }
}

fn stopped() -> RaftGroupError {
    RaftGroupError::Fatal("the group's proposer has stopped".into())
}

async fn collect(
    mut rx: mpsc::UnboundedReceiver<Pending>,
    limits: BatchLimits,
    propose: Propose,
    stats: Arc<BatchStats>,
) {
    let slots = Arc::new(Semaphore::new(limits.in_flight.max(1)));
    let max_writes = limits.max_writes.clamp(1, envelope::MAX_BATCH);
    // A write taken from the queue that did not fit the batch before: it starts the next.
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // While every slot is taken, more writes queue behind `first`.
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = first.sealed.len();
        let mut batch = vec![first];
        while batch.len() < max_writes {
            let Ok(p) = rx.try_recv() else { break };
            if bytes.saturating_add(p.sealed.len()) > limits.max_bytes {
                carried = Some(p);
                break;
            }
            bytes += p.sealed.len();
            batch.push(p);
        }
        stats.entries.fetch_add(1, Ordering::Relaxed);
        stats
            .writes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let propose = propose.clone();
        tokio::spawn(async move {
            run(&propose, batch).await;
            drop(permit);
        });
    }
}

/// Proposes one batch and answers each of its writes.
async fn run(propose: &Propose, mut batch: Vec<Pending>) {
    if batch.len() == 1 {
        let p = batch.pop().expect("one write");
        let _ = p.reply.send(propose(p.sealed).await);
        return;
    }
    let (sealed, replies): (Vec<Vec<u8>>, Vec<oneshot::Sender<Reply>>) =
        batch.into_iter().map(|p| (p.sealed, p.reply)).unzip();
    let outcome = match envelope::seal_batch(&sealed) {
        Ok(entry) => propose(entry).await,
        Err(e) => Err(e.into()),
    };
    let answers = outcome.and_then(|resp| {
        let parts = envelope::unframe_replies(&resp)?;
        if parts.len() != replies.len() {
            return Err(RaftGroupError::Other(format!(
                "a batch of {} writes was answered with {} replies",
                replies.len(),
                parts.len()
            )));
        }
        Ok(parts.into_iter().map(<[u8]>::to_vec).collect::<Vec<_>>())
    });
    match answers {
        Ok(answers) => {
            for (tx, a) in replies.into_iter().zip(answers) {
                let _ = tx.send(Ok(a));
            }
        }
        Err(e) => {
            for tx in replies {
                let _ = tx.send(Err(e.duplicate()));
            }
        }
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
