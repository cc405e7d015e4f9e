//! rozone-datanode: stores containers of chunks on local disks, serves chunk I/O, runs one
//! Raft group per pipeline and reports to (and takes commands from) the SCM.
//!
//! Layers, bottom up: [`types`] and [`error`] (block ids, checksums and result codes are
//! `rozone_types`'); the container [`store`] (one RocksDB per data directory, chunk files
//! per container); [`pipeline`] (one Raft group per pipeline: the leader's and the
//! followers' write stages, the apply stage and the replay guard); [`node`], the core
//! handle the services share, with the block-token check ([`tokens`]); the gRPC
//! [`service`]s with [`convert`] at their edge; the
//! replication client ([`replication`]), the [`scm`] link and its [`commands`]; [`server`]
//! wires one process.
//!
//! A library with a thin `main.rs`, so tests can start datanodes in-process. Must not
//! depend on the SCM or OM crates (only on their wire types).

pub mod cli;
pub mod clients;
pub mod commands;
pub mod config;
pub mod convert;
pub mod error;
pub mod health;
pub mod node;
pub mod pipeline;
pub mod replication;
pub mod scm;
pub mod server;
pub mod service;
pub mod store;
pub mod tokens;
pub mod types;

use tokio_util::sync::CancellationToken;
use tracing::info;

pub use config::Config;
pub use server::Datanode;

/// The binary's name, as logs and errors show it.
pub const SERVICE: &str = "rozone-datanode";

/// Runs a datanode until `shutdown` is cancelled, then stops and returns.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let node_id = config.node.id;
    info!(node_id, scm_addrs = ?config.datanode.scm_addrs, data_dir = %config.node.data_dir.display(), volumes = ?config.volumes(), "{SERVICE} starting");
    // A first start with a join token gets its certificate before anything reads it.
    rozone_rpc::enroll::ensure_certificate(
        &config.security,
        rozone_rpc::Role::Datanode,
        config.node.id,
    )
    .await?;
    let dn = Datanode::start(&config).await?;
    info!(
        node_id,
        container_addr = %dn.container_addr,
        raft_addr = %dn.raft_addr,
        replication_addr = %dn.replication_addr,
        http_addr = %dn.http_addr,
        "{SERVICE} started"
    );
    shutdown.cancelled().await;
    dn.stop().await;
    info!(node_id, "{SERVICE} stopped");
    Ok(())
}
