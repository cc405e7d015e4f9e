//! The peer-port gRPC server: Raft RPCs and snapshot downloads for every hosted group.

use std::future::Future;
use std::net::SocketAddr;

use rozone_proto::raft::raft_service_server::RaftServiceServer;
use rozone_proto::raft::snapshot_service_server::SnapshotServiceServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use crate::service::{GroupRegistry, RaftServiceImpl, SnapshotServiceImpl};

/// Binds `addr` (port 0 picks a free port) and returns the listener and its real address.
pub async fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

/// The tonic services of the peer port, for callers that add their own services to the
/// same server.
pub fn peer_services(
    registry: &GroupRegistry,
) -> (
    RaftServiceServer<RaftServiceImpl>,
    SnapshotServiceServer<SnapshotServiceImpl>,
) {
    (
        RaftServiceServer::new(RaftServiceImpl {
            registry: registry.clone(),
        })
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(256 << 20),
        SnapshotServiceServer::new(SnapshotServiceImpl {
            registry: registry.clone(),
        }),
    )
}

/// Accepted connections with Nagle's algorithm off: `Server::tcp_nodelay` does not reach
/// sockets of a custom incoming stream, and Nagle plus delayed ACKs adds ~40 ms to every
/// small Raft message.
pub fn nodelay_incoming(
    listener: TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use futures::StreamExt;
    TcpListenerStream::new(listener).map(|s| {
        let s = s?;
        s.set_nodelay(true)?;
        Ok(s)
    })
}

/// Serves the peer port until `shutdown` resolves.
pub async fn serve_peer(
    listener: TcpListener,
    registry: GroupRegistry,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let (raft, snap) = peer_services(&registry);
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(raft)
        .add_service(snap)
        .serve_with_incoming_shutdown(nodelay_incoming(listener), shutdown)
        .await
}
