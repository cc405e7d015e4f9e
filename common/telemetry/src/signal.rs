//! Shutdown on SIGTERM (systemd, docker stop, kubelet) or SIGINT (Ctrl-C).

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// Exit code after a second signal cut a graceful shutdown short
/// (128 + SIGINT, as shells report it).
pub const FORCED_EXIT_CODE: i32 = 130;

/// A token cancelled on the first SIGTERM or SIGINT: the daemon's one
/// shutdown signal, passed to every task. A second signal exits at once,
/// for when a graceful shutdown hangs and the operator insists.
///
/// Must be called inside a tokio runtime. Fails only if the signal handlers
/// cannot be installed.
pub fn shutdown_signal() -> std::io::Result<CancellationToken> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let name = next_signal(&mut term, &mut int).await;
        tracing::info!("received {name}, shutting down");
        cancel.cancel();
        let name = next_signal(&mut term, &mut int).await;
        tracing::warn!("received {name} again, exiting without a clean shutdown");
        std::process::exit(FORCED_EXIT_CODE);
    });
    Ok(token)
}

async fn next_signal(term: &mut Signal, int: &mut Signal) -> &'static str {
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
