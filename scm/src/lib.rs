//! rozone-scm: the Storage Container Manager. It tracks datanodes, pipelines,
//! containers and blocks, replicated across the SCM ring with Raft.
//!
//! - [`state`]: the replicated state machine (sequence ids, containers, pipelines,
//!   deleted-block transactions, cluster id) and the leader's sequence-id generator.
//! - [`server`]: one SCM process (listeners, Raft group, services, the leader's loop;
//!   `--init`, restart); [`join`]: `--bootstrap`, joining a running ring by checkpoint.
//! - [`node`]: [`node::ScmNode`], the core handle the services share.
//! - [`cluster`]: the leader's in-memory view (datanode registry, replica map, command
//!   queues) and the pure rules (node health, replica counting, what a replica report
//!   implies, ReplicationManager, safe mode).
//! - [`leader`]: the leader's work on the node (reports, pipelines, blocks,
//!   ReplicationManager, admin calls, the periodic loop), in domain types only.
//! - [`service`]: every gRPC service (`ScmDatanode`, `ScmBlock`, `ScmAdmin`, the shared `Ring`):
//!   decode, call the node, encode; [`convert`]: proto ↔ domain (the only other protobuf); [`error`]: [`error::ScmError`] and its one mapping to
//!   `tonic::Status`; [`health`]: `/ready` and `/metrics`.
//!
//! A library with a thin `main.rs`, so tests can start an SCM in-process.
//! Must not depend on the OM or datanode crates.

pub mod cli;
pub mod cluster;
pub mod config;
pub mod convert;
pub mod error;
pub mod health;
pub mod join;
pub mod leader;
pub mod node;
pub mod server;
pub mod service;
pub mod state;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

pub use config::Config;

/// The binary's name, as logs and errors show it.
pub const SERVICE: &str = "rozone-scm";

/// Runs an SCM until `shutdown` is cancelled, then stops and returns.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let Config {
        node,
        scm,
        http,
        startup,
        ..
    } = &config;
    info!(
        node_id = node.id,
        client_addr = %scm.client_addr,
        peer_addr = %scm.peer_addr,
        checkpoint_addr = %scm.checkpoint_addr,
        http_addr = %http.addr,
        data_dir = %node.data_dir.display(),
        init = startup.init,
        bootstrap = startup.bootstrap,
        "{SERVICE} starting"
    );
    tokio::fs::create_dir_all(&node.data_dir)
        .await
        .with_context(|| format!("create data dir {}", node.data_dir.display()))?;
    // A first start with a join token gets its certificate before anything reads it.
    rozone_rpc::enroll::ensure_certificate(&config.security, rozone_rpc::Role::Scm, config.node.id)
        .await?;
    let ring = server::ScmServer::start(&config).await?;
    let http_stop = CancellationToken::new();
    let served = rozone_telemetry::http::serve_http(
        http.addr,
        std::sync::Arc::new(health::ScmHealth {
            group: ring.group.clone(),
            node: ring.node.clone(),
        }),
        http_stop.clone(),
    )
    .await;
    let (http_addr, http_task) = match served {
        Ok(x) => x,
        Err(e) => {
            // Close the databases before reporting: the process exits next.
            ring.stop().await;
            return Err(e).with_context(|| format!("bind http.addr {}", http.addr));
        }
    };
    info!(
        node_id = node.id,
        client_addr = %ring.client_addr,
        peer_addr = %ring.peer_addr,
        checkpoint_addr = %ring.checkpoint_addr,
        http_addr = %http_addr,
        "{SERVICE} started"
    );

    let group = ring.group.clone();
    let failed = tokio::select! {
        _ = shutdown.cancelled() => None,
        why = group.failed() => Some(why),
    };
    http_stop.cancel();
    let _ = http_task.await;
    ring.stop().await;
    if let Some(why) = failed {
        error!(node_id = node.id, error = %why, "{SERVICE}: Raft stopped on a fatal error; exited");
        anyhow::bail!(
            "the SCM's Raft group stopped on a fatal error ({why}); the process exits so that \
             its supervisor restarts it (check the data dir's disk first)"
        );
    }
    info!(node_id = node.id, "{SERVICE} stopped");
    Ok(())
}
