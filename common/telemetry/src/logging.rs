//! Log setup and the panic policy.

use std::io::IsTerminal;
use std::panic::PanicHookInfo;

use rozone_config::LogFormat;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};

/// Exit code of a process that panicked, as Rust's own default.
pub const PANIC_EXIT_CODE: i32 = 101;

/// Sends `tracing` events to stderr, filtered by `RUST_LOG` (default
/// `info`; e.g. `RUST_LOG=info,rozone_raft=debug`), and installs the panic
/// hook. Call once, before the runtime starts. Fails if `RUST_LOG` does not
/// parse or a subscriber is already installed.
pub fn init(service: &'static str, format: LogFormat) -> anyhow::Result<()> {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()
        .map_err(|e| anyhow::anyhow!("invalid RUST_LOG: {e}"))?;
    // Colours only for people: escape codes in journald or a test's captured
    // output just get in the way of grep.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Compact => builder.compact().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("install logger: {e}"))?;
    install_panic_hook(service);
    Ok(())
}

/// Logs a panic at ERROR, then ends the process with code 101.
///
/// tokio catches a panic in a spawned task and only reports it to whoever
/// awaits the task's handle — often nobody — so without this a daemon could
/// run on with a dead Raft loop or listener, looking alive to every probe.
/// A crash is honest: the supervisor restarts the node and Raft copes.
pub fn install_panic_hook(service: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let backtrace = std::backtrace::Backtrace::capture();
        tracing::error!(
            target: "panic",
            location = %location(info),
            backtrace = %backtrace,
            "{service} panicked: {}; exiting",
            message(info)
        );
        std::process::exit(PANIC_EXIT_CODE);
    }));
}

fn location(info: &PanicHookInfo<'_>) -> String {
    info.location()
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_else(|| "unknown".into())
}

fn message(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".into()
    }
}
