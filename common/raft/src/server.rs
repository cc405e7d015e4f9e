//! The peer-port gRPC server: Raft RPCs and snapshot downloads for every hosted group.

use std::future::Future;
use std::net::SocketAddr;

use rozone_proto::raft::raft_service_server::RaftServiceServer;
use rozone_proto::raft::snapshot_service_server::SnapshotServiceServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use rozone_rpc::conns::Capped;
use rozone_rpc::{ConnectionCap, Role, Security};

use crate::registry::GroupRegistry;
use crate::service::{RaftServiceImpl, SnapshotServiceImpl};

/// Binds `addr` (port 0 picks a free port) and returns the listener and its real address.
pub async fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

/// The tonic services of the peer port, for callers that add their own services to the
/// same server.
/// Only certificates of `role` (the ring's members) may call them.
pub fn peer_services(
    registry: &GroupRegistry,
    role: Role,
) -> (
    RaftServiceServer<RaftServiceImpl>,
    SnapshotServiceServer<SnapshotServiceImpl>,
) {
    (
        RaftServiceServer::new(RaftServiceImpl {
            registry: registry.clone(),
            role,
        })
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(256 << 20),
        SnapshotServiceServer::new(SnapshotServiceImpl {
            registry: registry.clone(),
            role,
        }),
    )
}

/// Accepted connections with Nagle's algorithm off (`Server::tcp_nodelay` does not reach
/// sockets of a custom incoming stream, and Nagle plus delayed ACKs adds ~40 ms to every
/// small Raft message), at most `cap` at once: one over it is closed at once and never
/// reaches the server.
pub fn nodelay_incoming(
    listener: TcpListener,
    cap: ConnectionCap,
) -> impl futures::Stream<Item = std::io::Result<Capped<tokio::net::TcpStream>>> {
    use futures::StreamExt;
    TcpListenerStream::new(listener).filter_map(move |s| {
        // Errors go to the server as before (it logs them and keeps accepting).
        let r = match s.and_then(|s| s.set_nodelay(true).map(|()| s)) {
            Err(e) => Some(Err(e)),
            Ok(s) => cap.admit(s).map(Ok),
        };
        std::future::ready(r)
    })
}

/// Serves the peer port until `shutdown` resolves, with `security` (mutual TLS, only
/// certificates of `role`) or plaintext.
pub async fn serve_peer(
    listener: TcpListener,
    registry: GroupRegistry,
    security: &Security,
    role: Role,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (raft, snap) = peer_services(&registry, role);
    security
        .server()?
        .add_service(raft)
        .add_service(snap)
        .serve_with_incoming_shutdown(
            nodelay_incoming(listener, security.connection_cap()),
            shutdown,
        )
        .await?;
    Ok(())
}

/// Serves `router` on `listener` (Nagle off, at most `cap` connections: see
/// [`rozone_rpc::Security::connection_cap`]) until `stop` is cancelled, as a task; a server
/// that fails is logged under `name`. Every daemon's gRPC listeners run this way.
pub fn spawn_router(
    name: &'static str,
    router: tonic::transport::server::Router,
    listener: TcpListener,
    cap: ConnectionCap,
    stop: &tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let stop = stop.clone();
    tokio::spawn(async move {
        let r = router
            .serve_with_incoming_shutdown(nodelay_incoming(listener, cap), async move {
                stop.cancelled().await
            })
            .await;
        if let Err(e) = r {
            tracing::error!(server = name, error = %e, "gRPC server stopped");
        }
    })
}

/// The address others reach a bound listener at: `host` (an operator's advertised name)
/// with the bound port when given, else the bound address with a wildcard host made
/// loopback.
pub fn advertised(host: Option<&str>, bound: SocketAddr) -> String {
    match host.filter(|h| !h.is_empty()) {
        Some(h) => format!("{h}:{}", bound.port()),
        None if bound.ip().is_unspecified() => format!("127.0.0.1:{}", bound.port()),
        None => bound.to_string(),
    }
}
