//! rozone-om: the Ozone Manager. It will keep the namespace — volumes,
//! buckets, keys — replicated across the OM ring with Raft, asking the SCM
//! for blocks; for now it loads its config and runs until told to stop.
//!
//! A library with a thin `main.rs`, so tests can start an OM in-process.
//! Must not depend on the SCM or datanode crates (only on their clients).

pub mod config;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::info;

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
    let data_dir = &config.node.data_dir;
    tokio::fs::create_dir_all(data_dir)
        .await
        .with_context(|| format!("create data dir {}", data_dir.display()))?;
    info!(node_id, "{SERVICE} started");

    shutdown.cancelled().await;
    info!(node_id, "{SERVICE} stopped");
    Ok(())
}
