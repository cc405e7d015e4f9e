//! Blocks the OM leader asked the SCM for ahead of need, handed to opens of unknown length
//! (`size = 0`, nothing excluded) and to deferred opens, so such an open does not wait for its own OM→SCM round
//! trip: one AllocateBlock call of up to [`MAX_BATCH`] blocks serves that many opens.
//!
//! What is safe about a block sitting here: the SCM gave it out (its local id is never given
//! out again) and the refill reserved it through the log before any open could take it
//! (`ReserveBlocks`, `state::logic::reserved`), so a block handed out is always in the
//! replicated state, as a reservation, an open key's block or a key's; one nobody took goes
//! to deletion when its reservation expires. That is what lets an open of one block skip its
//! own log entry (a deferred open, committed with the key in one entry). A block is handed out at most [`TTL`] after the SCM gave it, so it is as
//! fresh as one a writer holding an open key for a second has; a container or pipeline
//! closed meanwhile makes the write fail over to another block, as for any open key. The
//! batch adapts to demand: it doubles while the pool runs dry within a TTL and halves when
//! blocks expire unused, so a quiet OM asks for one block per open.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::OmError;
use crate::state::types::AllocatedBlock;

/// Most blocks one refill asks for.
pub const MAX_BATCH: u32 = 64;
/// How long after the SCM gave it a block may still be handed out.
pub const TTL: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Spare {
    blocks: VecDeque<(Instant, AllocatedBlock)>,
    /// Blocks the next refill asks for.
    batch: u32,
}

/// The pool of one OM process (used only while it leads).
#[derive(Debug)]
pub struct BlockPool {
    spare: Mutex<Spare>,
    /// One refill at a time: opens arriving meanwhile wait for it rather than each asking.
    refill: tokio::sync::Mutex<()>,
    /// The SCM's block size as its last block of unknown length said (0: not known yet).
    scm_block_size: AtomicU64,
}

impl Default for BlockPool {
    fn default() -> Self {
        Self {
            spare: Mutex::new(Spare {
                blocks: VecDeque::new(),
                batch: 1,
            }),
            refill: tokio::sync::Mutex::new(()),
            scm_block_size: AtomicU64::new(0),
        }
    }
}

impl BlockPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Spare> {
        // Every statement leaves the pool consistent, so a poisoned lock is usable.
        self.spare.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest spare block still within its TTL; expired ones are dropped (and the
    /// batch halved: fewer were needed).
    fn take(&self, now: Instant) -> Option<AllocatedBlock> {
        let mut s = self.lock();
        let mut expired = false;
        while let Some((at, b)) = s.blocks.pop_front() {
            if now.saturating_duration_since(at) < TTL {
                return Some(b);
            }
            expired = true;
        }
        if expired {
            s.batch = (s.batch / 2).max(1);
        }
        None
    }

    /// One block: a spare one, else from a refill through `fetch(count)` (the SCM call),
    /// whose other blocks stay spare. A failed refill is returned as is and keeps nothing.
    pub async fn one<F, Fut>(&self, fetch: F) -> Result<AllocatedBlock, OmError>
    where
        F: FnOnce(u32) -> Fut,
        Fut: Future<Output = Result<Vec<AllocatedBlock>, OmError>>,
    {
        if let Some(b) = self.take(Instant::now()) {
            return Ok(b);
        }
        let _refill = self.refill.lock().await;
        // Another open may have refilled while this one waited.
        if let Some(b) = self.take(Instant::now()) {
            return Ok(b);
        }
        let batch = self.lock().batch;
        let mut got = fetch(batch).await?.into_iter();
        let first = got
            .next()
            .ok_or_else(|| OmError::Scm(format!("asked for {batch} block(s), got none")))?;
        let now = Instant::now();
        let mut s = self.lock();
        s.blocks.extend(got.map(|b| (now, b)));
        // Ran dry with nothing expired since the last refill: demand outgrew the batch.
        s.batch = s.batch.saturating_mul(2).min(MAX_BATCH);
        Ok(first)
    }

    /// The largest size the SCM takes in `AllocateBlockRequest.size` (it refuses more than
    /// its block size, which the OM is not configured with): 0 until a block of unknown
    /// length, whose `max_size` is the SCM's block size, came back.
    pub fn scm_block_size(&self) -> u64 {
        self.scm_block_size.load(Ordering::Relaxed)
    }

    /// Notes the `max_size` of a block of unknown length; 0 forgets (the SCM refused).
    pub fn note_scm_block_size(&self, max_size: u64) {
        self.scm_block_size.store(max_size, Ordering::Relaxed);
    }

    /// Spare blocks now (for tests).
    pub fn spare(&self) -> usize {
        self.lock().blocks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::logic::testkit::block;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use std::sync::Arc;

    /// A fake SCM: numbered blocks, counting calls and blocks asked for.
    struct Scm {
        calls: AtomicU32,
        next: AtomicU64,
    }

    impl Scm {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                calls: AtomicU32::new(0),
                next: AtomicU64::new(1),
            })
        }
        async fn fetch(&self, n: u32) -> Result<Vec<AllocatedBlock>, OmError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let first = self.next.fetch_add(u64::from(n), Ordering::SeqCst);
            Ok((first..first + u64::from(n))
                .map(|l| block(1, l, 1 << 28))
                .collect())
        }
    }

    #[tokio::test]
    async fn every_block_is_handed_out_once_and_the_batch_grows_with_demand() {
        let (pool, scm) = (BlockPool::default(), Scm::new());
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let b = pool.one(|n| scm.fetch(n)).await.unwrap();
            assert!(
                seen.insert(b.id.local_id),
                "block {} handed out twice",
                b.id
            );
        }
        // Batches 1, 2, 4, ..., 64, 64: far fewer calls than opens.
        let calls = scm.calls.load(Ordering::SeqCst);
        assert!(calls <= 9, "{calls} SCM calls for 200 opens");
        assert!(pool.lock().batch == MAX_BATCH);
    }

    #[tokio::test]
    async fn concurrent_opens_share_one_refill_and_get_distinct_blocks() {
        let (pool, scm) = (Arc::new(BlockPool::default()), Scm::new());
        pool.lock().batch = MAX_BATCH;
        let mut tasks = Vec::new();
        for _ in 0..MAX_BATCH {
            let (pool, scm) = (pool.clone(), scm.clone());
            tasks.push(tokio::spawn(async move {
                pool.one(|n| scm.fetch(n)).await.unwrap().id.local_id
            }));
        }
        let mut ids = std::collections::BTreeSet::new();
        for t in tasks {
            assert!(ids.insert(t.await.unwrap()));
        }
        assert_eq!(scm.calls.load(Ordering::SeqCst), 1, "one refill for all");
        assert_eq!(pool.spare(), 0);
    }

    #[test]
    fn expired_blocks_are_never_handed_out_and_halve_the_batch() {
        let pool = BlockPool::default();
        let old = Instant::now();
        {
            let mut s = pool.lock();
            s.batch = 8;
            s.blocks.push_back((old, block(1, 1, 10)));
            s.blocks.push_back((old, block(1, 2, 10)));
        }
        assert_eq!(pool.take(old + TTL), None);
        assert_eq!(pool.spare(), 0);
        assert_eq!(pool.lock().batch, 4);
        pool.lock().blocks.push_back((old, block(1, 3, 10)));
        assert_eq!(pool.take(old + TTL / 2).map(|b| b.id.local_id), Some(3));
    }

    #[tokio::test]
    async fn a_failed_refill_keeps_nothing_and_the_next_open_asks_again() {
        let (pool, scm) = (BlockPool::default(), Scm::new());
        let e = pool
            .one(|_| async { Err(OmError::ScmUnavailable("down".into())) })
            .await;
        assert!(e.is_err());
        assert_eq!(pool.spare(), 0);
        assert!(pool.one(|n| scm.fetch(n)).await.is_ok());
        assert_eq!(scm.calls.load(Ordering::SeqCst), 1);
    }
}
