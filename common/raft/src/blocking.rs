//! Blocking storage calls off the async workers.
//!
//! RocksDB calls block their thread: a write stall, a slow fsync or a hung disk holds it for
//! as long as the disk does. Run on a tokio worker, that stalls every task the worker
//! runs, among them the Raft heartbeats and election timers of every group in the process,
//! so one slow disk would depose leaders (or start elections) across the whole node. The
//! log store therefore hands each storage call to tokio's blocking pool through [`run`]:
//! the caller's task waits, its worker keeps running the others.

use std::io;

/// Runs `f` on tokio's blocking pool and waits for it. A panic in `f` (or a runtime
/// shutting down) becomes an `io::Error`, the log store's error type, so openraft stops
/// the group on it as on any storage error instead of the panic unwinding through it.
pub async fn run<T, F>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(io::Error::other(format!("storage task failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_the_call_is_an_io_error() {
        let r: io::Result<()> = run(|| panic!("disk on fire")).await;
        let e = r.unwrap_err();
        assert!(e.to_string().contains("storage task failed"), "{e}");
        assert_eq!(run(|| Ok(7)).await.unwrap(), 7);
    }
}
