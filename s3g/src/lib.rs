//! rozone-s3g: the S3 gateway. Stateless: S3 requests are parsed, routed and
//! SigV4-verified by `s3s`, mapped onto rozone ([`mapping`]) and served through the client
//! library (OM leader failover, block pipelines, verified reads); credentials live in the
//! OM ([`auth`]). Scale by running more of them.
//!
//! - [`config`]: `[s3g]`, `[http]`, `[log]`, `[security]`;
//! - [`gateway`]: the `s3s::S3` implementation, routing to [`buckets`], [`objects`],
//!   [`copy`], [`multipart`], [`list`] (over [`listing`]); these share [`core`]
//!   ([`core::Gateway`], [`core::Metrics`]) and never import the router;
//! - [`body`]: upload hashing and download streaming; [`health`]: `/ready`, `/metrics`.

pub mod auth;
pub mod body;
pub mod buckets;
pub mod cli;
pub mod config;
pub mod copy;
pub mod core;
pub mod gateway;
pub mod health;
pub mod list;
pub mod listing;
pub mod mapping;
pub mod multipart;
pub mod objects;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use config::Config;

/// The binary's name, as logs and errors show it.
pub const SERVICE: &str = "rozone-s3g";

/// Runs a gateway until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    // A first start with a join token gets its certificate before anything reads it.
    rozone_rpc::enroll::ensure_certificate(&config.security, rozone_rpc::Role::S3g, config.s3g.id)
        .await?;
    let cc = config.client_config()?;
    cc.security()?.announce(SERVICE);
    let client = Arc::new(rozone_client::Client::new(&cc).context("cluster client")?);
    let metrics = Arc::new(crate::core::Metrics::default());
    let s = &config.s3g;
    let gw = crate::core::Gateway::new(
        client.clone(),
        s.volume.clone(),
        s.max_object_size.as_u64(),
        metrics.clone(),
    );
    let mut builder = s3s::service::S3ServiceBuilder::new(gw);
    builder.set_auth(auth::OmAuth::new(client.om.clone(), s.secret_cache_ttl));
    let service = builder.build();

    let listener = tokio::net::TcpListener::bind(s.addr)
        .await
        .with_context(|| format!("bind s3g.addr {}", s.addr))?;
    let s3_addr = listener.local_addr()?;
    let om_state = Arc::new(Mutex::new(
        Err("the OM ring was not probed yet".to_string()),
    ));
    let probe = tokio::spawn(health::probe(
        client.om.clone(),
        om_state.clone(),
        shutdown.clone(),
    ));
    let source = Arc::new(health::S3gHealth {
        metrics,
        om: om_state,
    });
    let (http_addr, http_task) =
        rozone_telemetry::http::serve_http(config.http.addr, source, shutdown.clone())
            .await
            .with_context(|| format!("bind http.addr {}", config.http.addr))?;
    info!(s3_addr = %s3_addr, http_addr = %http_addr, volume = %s.volume, om_addrs = ?s.om_addrs, "{SERVICE} started");
    serve(listener, service, shutdown.clone()).await;
    let _ = probe.await;
    let _ = http_task.await;
    info!("{SERVICE} stopped");
    Ok(())
}

/// Accepts S3 connections (HTTP/1.1) until `stop`; connections in flight are dropped
/// with the runtime.
async fn serve(
    listener: tokio::net::TcpListener,
    service: s3s::service::S3Service,
    stop: CancellationToken,
) {
    loop {
        let (stream, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let svc = service.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "S3 connection ended with an error");
            }
        });
    }
}
