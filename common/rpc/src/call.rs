//! Call ids: what makes a retried write apply at most once.
//!
//! A client cannot tell a write that was lost from one that was applied but whose answer
//! was lost (an attempt timed out after the entry committed; a leader was deposed after
//! appending it). The failover ring resends such a write to the next leader, so without
//! help every write is at-least-once: the chaos suite caught a retried `DeleteVolume`
//! deleting a volume created after it (RELIABILITY.md, violation 1).
//!
//! The fix is Raft's client sessions (Ongaro's dissertation, §6.3), as Ozone gets them from
//! Ratis's retry cache, but replicated: every call a client makes carries one [`CallId`] —
//! the client's random id, a sequence number that is the same on every attempt of the call,
//! and the lowest sequence number of its calls still in flight — in the [`CALL_ID`] header.
//! A server wraps its services in [`CallScoped`], which makes the id of the call being
//! served visible to the Raft layer through a task-local ([`current`]); the Raft layer
//! stamps it into the log entry, and the state machine answers a repeated id from its
//! retry cache instead of applying the command again (`rozone_raft::retry_cache`).
//!
//! Reads carry ids too (the typed clients tag every leader call); a server that proposes
//! nothing for them ignores the id.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::codegen::{http, BoxFuture, Service};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::server::NamedService;

/// Metadata key of a call's id (binary: client, seq, low as big-endian u64s).
pub const CALL_ID: &str = "x-rozone-call-bin";

/// One call of one client, the same on every attempt of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId {
    /// Random per client process (per [`CallIds`]).
    pub client: u64,
    /// This call's number, from 1 up.
    pub seq: u64,
    /// Every call of this client numbered below this one has ended (answered or abandoned):
    /// the server may forget what it remembers of them.
    pub low: u64,
}

impl CallId {
    const LEN: usize = 24;

    fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..8].copy_from_slice(&self.client.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..].copy_from_slice(&self.low.to_be_bytes());
        b
    }

    /// Parses the header's bytes; `None` for anything malformed (such a call is served
    /// without at-most-once, as a call from an older client).
    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != Self::LEN {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let id = Self {
            client: u(0),
            seq: u(8),
            low: u(16),
        };
        // A low above the call's own number would let one call erase its own record.
        (id.client != 0 && id.seq != 0 && id.low <= id.seq).then_some(id)
    }

    /// The id a request's metadata carries, if well formed.
    pub fn from_metadata(m: &MetadataMap) -> Option<Self> {
        m.get_bin(CALL_ID)
            .and_then(|v| v.to_bytes().ok())
            .and_then(|b| Self::from_bytes(&b))
    }

    fn from_headers(h: &http::HeaderMap) -> Option<Self> {
        // tonic decodes binary metadata (base64, padded or not); only our header is copied.
        let mut one = http::HeaderMap::new();
        one.insert(CALL_ID, h.get(CALL_ID)?.clone());
        Self::from_metadata(&MetadataMap::from_headers(one))
    }
}

/// A client's call numbering: one per client process, shared by its clones.
#[derive(Clone)]
pub struct CallIds {
    inner: Arc<IdsInner>,
}

struct IdsInner {
    client: u64,
    next: AtomicU64,
    in_flight: Mutex<BTreeSet<u64>>,
}

impl Default for CallIds {
    fn default() -> Self {
        Self::new()
    }
}

impl CallIds {
    /// A new client identity (random, never 0).
    pub fn new() -> Self {
        Self::with_client(random_u64().max(1))
    }

    fn with_client(client: u64) -> Self {
        Self {
            inner: Arc::new(IdsInner {
                client,
                next: AtomicU64::new(1),
                in_flight: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// Starts a call: its id, held until the returned guard drops (when the call has its
    /// final answer or is given up).
    pub fn begin(&self) -> Call {
        let seq = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let mut f = self
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f.insert(seq);
        let low = f.first().copied().unwrap_or(seq);
        Call {
            id: CallId {
                client: self.inner.client,
                seq,
                low,
            },
            ids: self.clone(),
        }
    }
}

fn random_u64() -> u64 {
    use ring::rand::SecureRandom as _;
    let mut b = [0u8; 8];
    match ring::rand::SystemRandom::new().fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        // No system randomness: the process id and the clock still separate clients in
        // practice; a collision only risks two clients sharing a cache line of calls.
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            t ^ (u64::from(std::process::id()) << 32)
        }
    }
}

/// One call in flight; dropping it ends the call.
pub struct Call {
    id: CallId,
    ids: CallIds,
}

impl Call {
    pub fn id(&self) -> CallId {
        self.id
    }

    /// `msg` as a request carrying this call's id (one per attempt).
    pub fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.metadata_mut()
            .insert_bin(CALL_ID, MetadataValue::from_bytes(&self.id.to_bytes()));
        r
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let mut f = self
            .ids
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f.remove(&self.id.seq);
    }
}

/// The call a server is serving, and how many writes it has proposed so far.
struct Scope {
    id: CallId,
    writes: AtomicU32,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// The id of the call being served on this task and the index of this write within it
/// (0 for its first proposal, 1 for the next, ...), or `None` outside a tagged call.
/// A handler that proposes several entries proposes them in the same order on every
/// attempt, so each keeps its own record.
pub fn current() -> Option<(CallId, u32)> {
    SCOPE
        .try_with(|s| (s.id, s.writes.fetch_add(1, Ordering::Relaxed)))
        .ok()
}

/// Runs `fut` as the call `id` (what [`CallScoped`] does for each request; tests use it).
pub async fn scoped<F: Future>(id: CallId, fut: F) -> F::Output {
    SCOPE
        .scope(
            Scope {
                id,
                writes: AtomicU32::new(0),
            },
            fut,
        )
        .await
}

/// A gRPC service whose requests run inside their call's scope, so the writes they propose
/// carry the call's id.
#[derive(Clone)]
pub struct CallScoped<S>(pub S);

impl<S: NamedService> NamedService for CallScoped<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for CallScoped<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let id = CallId::from_headers(req.headers());
        let fut = self.0.call(req);
        match id {
            Some(id) => Box::pin(scoped(id, fut)),
            None => Box::pin(fut),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_number_and_the_lowest_in_flight() {
        let ids = CallIds::with_client(7);
        let a = ids.begin();
        let b = ids.begin();
        assert_eq!((a.id().seq, a.id().low), (1, 1));
        assert_eq!((b.id().seq, b.id().low), (2, 1));
        drop(a);
        let c = ids.begin();
        assert_eq!((c.id().seq, c.id().low), (3, 2));
        drop(b);
        drop(c);
        let d = ids.begin();
        assert_eq!((d.id().seq, d.id().low), (4, 4));
    }

    #[test]
    fn the_header_round_trips_and_bad_ones_are_ignored() {
        let ids = CallIds::with_client(9);
        let call = ids.begin();
        let r = call.request(());
        assert_eq!(CallId::from_metadata(r.metadata()), Some(call.id()));
        // Through HTTP headers, as the server sees them.
        let headers = r.metadata().clone().into_headers();
        assert_eq!(CallId::from_headers(&headers), Some(call.id()));
        assert_eq!(CallId::from_bytes(&[0u8; 23]), None);
        let zero_client = CallId {
            client: 0,
            seq: 1,
            low: 1,
        };
        assert_eq!(CallId::from_bytes(&zero_client.to_bytes()), None);
        let low_above = CallId {
            client: 1,
            seq: 1,
            low: 2,
        };
        assert_eq!(CallId::from_bytes(&low_above.to_bytes()), None);
    }

    #[tokio::test]
    async fn writes_in_a_scope_count_up_and_none_outside() {
        assert_eq!(current(), None);
        let id = CallId {
            client: 1,
            seq: 5,
            low: 3,
        };
        let seen = scoped(id, async { (current(), current()) }).await;
        assert_eq!(seen, (Some((id, 0)), Some((id, 1))));
    }
}
