//! rozone-datanode: stores containers of chunks on local disks, serves
//! chunk I/O, replicates pipelines with Raft and reports to the SCM; for now
//! it loads its config, prepares its directories and runs until told to stop.
//!
//! A library with a thin `main.rs`, so tests can start datanodes
//! in-process. Must not depend on the SCM or OM crates (only on clients).

pub mod config;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub use config::Config;

/// The binary's name, as logs and errors show it.
pub const SERVICE: &str = "rozone-datanode";

/// Runs a datanode until `shutdown` is cancelled, then stops and returns.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let node_id = config.node.id;
    let dn = &config.datanode;
    let volumes = config.volumes();
    info!(
        node_id,
        container_addr = %dn.container_addr,
        raft_addr = %dn.raft_addr,
        replication_addr = %dn.replication_addr,
        http_addr = %config.http.addr,
        scm_addrs = ?dn.scm_addrs,
        data_dir = %config.node.data_dir.display(),
        ?volumes,
        "{SERVICE} starting"
    );
    for dir in std::iter::once(&config.node.data_dir).chain(&volumes) {
        tokio::fs::create_dir_all(dir)
            .await
            .with_context(|| format!("create directory {}", dir.display()))?;
    }
    info!(node_id, "{SERVICE} started");

    shutdown.cancelled().await;
    info!(node_id, "{SERVICE} stopped");
    Ok(())
}
