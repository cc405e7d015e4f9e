//! An application hook on log appends: it runs before entries are written to this node's
//! log, on the leader for its own proposals and on followers for replicated entries.
//! Entries already in the log (replayed after a restart) never pass it again.
//!
//! Datanode pipelines use it as the follower's write stage: chunk bytes are fetched and
//! stored before the entry that commits them is appended, so chunk data stays out of the
//! log and an entry is only ever in a member's log after its write stage ran there.

use futures::future::BoxFuture;

/// Called with the normal entries of one append.
pub trait AppendHook: Send + Sync + 'static {
    /// `entries`: (log index, the application request bytes) of each normal entry about to
    /// be appended. It cannot fail: an append error stops the Raft node, so a hook handles
    /// its own errors (the apply stage then sees what is missing).
    fn before_append<'a>(&'a self, entries: &'a [(u64, Vec<u8>)]) -> BoxFuture<'a, ()>;
}
