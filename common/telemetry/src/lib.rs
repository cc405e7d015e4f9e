//! rozone-telemetry: everything around a daemon's service code — logging,
//! the panic policy, shutdown signals, and the one `main` skeleton the three
//! binaries share ([`daemon_main`]), and systemd readiness notification ([`notify`]).
//!
//! Depends on rozone-config for the config a `main` loads, and on tokio for
//! signals and the runtime, axum for the HTTP endpoint; never on RocksDB, openraft or tonic.

mod daemon;
pub mod failpoints;
pub mod health;
pub mod http;
mod logging;
pub mod notify;
#[cfg(feature = "testkit")]
pub mod proxy;
mod signal;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use daemon::daemon_main;
pub use logging::{init, install_panic_hook};
pub use rozone_config::LogFormat;
pub use signal::shutdown_signal;
pub use tokio_util::sync::CancellationToken;
