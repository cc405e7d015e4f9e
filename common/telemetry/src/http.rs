//! The HTTP endpoint every daemon serves: `/health` (the process answers), `/ready` (it can
//! serve its role now: 200, or 503 with the reason) and `/metrics` (Prometheus text).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::health::HealthSource;

type Source = Arc<dyn HealthSource>;

async fn health() -> &'static str {
    "ok\n"
}

async fn ready(State(s): State<Source>) -> impl IntoResponse {
    match s.ready() {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics(State(s): State<Source>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics(),
    )
}

async fn set_failpoint(
    axum::extract::Path(name): axum::extract::Path<String>,
    actions: String,
) -> impl IntoResponse {
    match crate::failpoints::set(&name, actions.trim()) {
        Ok(()) => {
            tracing::warn!(failpoint = %name, actions = %actions.trim(), "failpoint set");
            (StatusCode::OK, "ok\n".to_string())
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}

async fn remove_failpoint(axum::extract::Path(name): axum::extract::Path<String>) -> &'static str {
    crate::failpoints::remove(&name);
    tracing::warn!(failpoint = %name, "failpoint removed");
    "ok\n"
}

/// Binds `addr` and serves the endpoint until `shutdown` is cancelled. Returns the bound
/// address (port 0 picks one) and the server task. Under systemd (`NOTIFY_SOCKET` set) it
/// also tells systemd `READY=1` once `source` is first ready (see [`crate::notify`]).
pub async fn serve_http(
    addr: SocketAddr,
    source: Source,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    // Started by systemd with Type=notify: report readiness from the same source as /ready.
    if let Some(socket) = crate::notify::socket_from_env() {
        tokio::spawn(crate::notify::watch_readiness(
            socket,
            source.clone(),
            shutdown.clone(),
        ));
    }
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics));
    // Fault tests only: absent from builds without failpoints (see crate::failpoints).
    if crate::failpoints::compiled_in() {
        app = app.route(
            "/failpoints/{name}",
            axum::routing::put(set_failpoint).delete(remove_failpoint),
        );
    }
    let app = app.with_state(source);
    let task = tokio::spawn(async move {
        let r = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "http endpoint stopped");
        }
    });
    Ok((bound, task))
}
