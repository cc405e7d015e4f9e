//! Snapshot install with progress-based deadlines, both ends of `InstallSnapshot`.
//!
//! A follower downloads an offered snapshot while the leader waits for its answer. A fixed
//! deadline on that wait fails every snapshot that takes longer to move than the deadline,
//! on every retry, for good. So the follower streams how many bytes it has received, and
//! the leader gives up only when that number stops growing for the stall timeout. When the
//! leader gives up (or goes away) the follower stops downloading and removes what it
//! staged; an install already handed to openraft runs to its end.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use openraft::errors::{RPCError, Unreachable};
use rozone_proto::raft::{InstallProgress, RaftReply};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::registry::GroupHandle;
use crate::types::TypeConfig;
use crate::wire::SnapshotOffer;

/// How often a downloading follower reports its progress.
const TICK: Duration = Duration::from_millis(200);

pub(crate) type ProgressStream =
    Pin<Box<dyn Stream<Item = Result<InstallProgress, Status>> + Send>>;

/// Follower: starts receiving `offer` into group `g` and streams its progress, then the
/// answer. If the leader drops the stream, the download is withdrawn.
pub(crate) fn serve(g: Arc<dyn GroupHandle>, offer: SnapshotOffer) -> ProgressStream {
    let progress = Arc::new(AtomicU64::new(0));
    let withdrawn = CancellationToken::new();
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let job = {
        let (progress, withdrawn) = (progress.clone(), withdrawn.clone());
        tokio::spawn(async move { g.receive_snapshot(offer, progress, withdrawn).await })
    };
    tokio::spawn(async move {
        // Withdraws the offer on every way out but the answer being sent.
        let _withdraw = withdrawn.drop_guard();
        let mut job = job;
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                r = &mut job => {
                    let r = r.unwrap_or_else(|e| Err(format!("snapshot install task failed: {e}")));
                    let done = crate::wire::reply(&r);
                    let msg = done.map(|done| InstallProgress {
                        bytes_received: progress.load(Ordering::Relaxed),
                        done: Some(done),
                    });
                    let _ = tx.send(msg).await;
                    return;
                }
                _ = tick.tick() => {
                    let msg = InstallProgress {
                        bytes_received: progress.load(Ordering::Relaxed),
                        done: None,
                    };
                    if tx.send(Ok(msg)).await.is_err() {
                        return; // the leader went away
                    }
                }
            }
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Leader: the follower's answer from its progress stream, or an error once no new byte
/// was reported for `stall`.
pub(crate) async fn await_answer(
    mut s: tonic::Streaming<InstallProgress>,
    stall: Duration,
) -> Result<RaftReply, RPCError<TypeConfig>> {
    let mut received = 0u64;
    let mut deadline = Instant::now() + stall;
    loop {
        let next = tokio::time::timeout_at(deadline, s.message())
            .await
            .map_err(|_| {
                unreachable(format!(
                    "snapshot install made no progress for {stall:?} (at {received} bytes)"
                ))
            })?
            .map_err(crate::wire::status_to_rpc)?;
        let Some(p) = next else {
            return Err(unreachable(
                "the follower ended its install stream without an answer".into(),
            ));
        };
        if let Some(done) = p.done {
            return Ok(done);
        }
        if p.bytes_received > received {
            received = p.bytes_received;
            deadline = Instant::now() + stall;
        }
    }
}

fn unreachable(msg: String) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::from_string(msg))
}
