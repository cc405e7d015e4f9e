//! A cap on the connections one gRPC server holds at once (`rpc.max_connections`): the
//! other `[rpc]` limits bound what one connection may do, this bounds how many there are,
//! so a caller opening connections in a loop cannot run the process out of memory or file
//! descriptors. A connection over the cap is accepted and closed at once (the caller sees
//! the connection reset and retries, as after any transport failure) rather than left in
//! the kernel's backlog, where it would hang until the caller's connect timeout and keep
//! the accept queue full for callers that would fit. Each accepted connection holds a
//! permit until it is dropped (closed by either side).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::Connected;

/// The connection cap of one server (each server gets its own: see
/// [`crate::Security::connection_cap`]). Cheap to clone; clones share the count.
#[derive(Clone, Debug)]
pub struct ConnectionCap {
    max: usize,
    slots: Arc<Semaphore>,
    refused: Arc<AtomicU64>,
}

impl ConnectionCap {
    /// At most `max` connections at once (0 is taken as 1: a server that accepts nothing
    /// is a misconfiguration the config check refuses first).
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            max,
            slots: Arc::new(Semaphore::new(max)),
            refused: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Connections closed at once because the cap was reached, since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Admits `conn` if a slot is free; otherwise drops it (closing the socket) and
    /// returns `None`.
    pub fn admit<T>(&self, conn: T) -> Option<Capped<T>> {
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => Some(Capped {
                inner: conn,
                _permit: permit,
            }),
            Err(_) => {
                let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
                // One line per power of two: a flood must not flood the log too.
                if n.is_power_of_two() {
                    tracing::warn!(
                        max_connections = self.max,
                        refused_so_far = n,
                        "connection refused: rpc.max_connections reached"
                    );
                }
                None
            }
        }
    }
}

/// An admitted connection: the stream itself plus its slot, freed when it is dropped.
#[derive(Debug)]
pub struct Capped<T> {
    inner: T,
    _permit: OwnedSemaphorePermit,
}

impl<T> Capped<T> {
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Capped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Capped<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The same connection info as the wrapped stream, so `Request::remote_addr` and (under
/// TLS) `Request::peer_certs` work unchanged.
impl<T: Connected> Connected for Capped<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_held_while_admitted_and_freed_on_drop() {
        let cap = ConnectionCap::new(2);
        let a = cap.admit(1u8).expect("first");
        let b = cap.admit(2u8).expect("second");
        assert_eq!(cap.open(), 2);
        assert!(cap.admit(3u8).is_none(), "third over the cap");
        assert_eq!(cap.refused(), 1);
        drop(a);
        assert_eq!(cap.open(), 1);
        let c = cap.admit(4u8).expect("a freed slot is reused");
        assert_eq!((*b.get_ref(), *c.get_ref()), (2, 4));
        assert_eq!(cap.refused(), 1);
    }
}
