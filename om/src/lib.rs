//! rozone-om: the Ozone Manager. It keeps the namespace — volumes, buckets, keys, open
//! keys — replicated across the OM ring with Raft, asks the SCM for blocks, and serves
//! reads with the consistency each request asks for (DEFAULT, LINEARIZABLE_LEADER_ONLY,
//! LINEARIZABLE_ALLOW_FOLLOWER, LOCAL_LEASE).
//!
//! A library with a thin `main.rs`, so tests start OMs in-process ([`server::OmServer`]).
//! Must not depend on the SCM or datanode crates (only on their wire types).

pub mod block_pool;
pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod convert;
pub mod error;
pub mod health;
pub mod names;
pub mod node;
pub mod peers;
pub mod scm_client;
pub mod server;
pub mod service;
pub mod state;
pub mod tasks;
pub mod tokens;

use tokio_util::sync::CancellationToken;
use tracing::{error, info};

pub use config::Config;

/// The binary's name, as logs and errors show it.
pub const SERVICE: &str = "rozone-om";

/// Runs an OM until `shutdown` is cancelled, then stops and returns.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let node_id = config.node.id;
    info!(
        node_id,
        client_addr = %config.om.client_addr,
        peer_addr = %config.om.peer_addr,
        http_addr = %config.http.addr,
        scm_addrs = ?config.om.scm_addrs,
        data_dir = %config.node.data_dir.display(),
        startup = ?config.startup,
        "{SERVICE} starting"
    );
    // A first start with a join token gets its certificate before anything reads it.
    rozone_rpc::enroll::ensure_certificate(&config.security, rozone_rpc::Role::Om, config.node.id)
        .await?;
    let server = server::OmServer::start(config).await?;
    info!(
        node_id,
        client_addr = %server.client_addr,
        peer_addr = %server.peer_addr,
        http_addr = %server.http_addr,
        "{SERVICE} started"
    );
    let group = server.node.group.clone();
    tokio::select! {
        _ = shutdown.cancelled() => {}
        why = group.failed() => {
            error!(node_id, error = %why, "{SERVICE}: Raft stopped on a fatal error; exiting");
            server.stop().await;
            anyhow::bail!(
                "the OM's Raft group stopped on a fatal error ({why}); the process exits so \
                 that its supervisor restarts it (check the data dir's disk first)"
            );
        }
    }
    server.stop().await;
    info!(node_id, "{SERVICE} stopped");
    Ok(())
}
