//! The datanode's gRPC services: client I/O ([`container`]), data movement between pipeline
//! members ([`peer`]) and container replication ([`crate::replication`]).

pub mod container;
pub mod peer;

use crate::error::DnError;

/// Runs blocking store work off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DnError> + Send + 'static,
) -> Result<T, tonic::Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| tonic::Status::internal(format!("worker failed: {e}")))?
        .map_err(crate::error::to_status)
}
