//! The `main` the three daemon binaries share: parse → load config →
//! telemetry → runtime → `run(config, shutdown)` → exit code.

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use rozone_config::{
    env_from_process, load, sample_config, CommonArgs, ConfigError, DaemonConfig, Overrides,
    Sources,
};
use tokio_util::sync::CancellationToken;

use crate::{init, shutdown_signal};

/// How long tasks still running after `run` returns (e.g. blocked in disk
/// I/O) may hold the process before it exits anyway.
const RUNTIME_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs a daemon binary: handles `--print-sample-config` and
/// `--config-check`, loads the config (defaults < `--config` file <
/// `ROZONE_*` environment < `args`' flags < `flags`), starts logging and the
/// panic hook, builds the tokio runtime and awaits `run` with a token that
/// SIGTERM/SIGINT cancel.
///
/// Exit code 0 after a clean shutdown; 1 with one line on stderr when the
/// config is wrong or `run` fails. Config errors print before logging starts
/// and carry no backtrace: they are the operator's to fix, not a bug.
pub fn daemon_main<C, F, Fut>(
    service: &'static str,
    args: &CommonArgs,
    flags: Overrides,
    run: F,
) -> ExitCode
where
    C: DaemonConfig,
    F: FnOnce(C, CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    if args.print_sample_config {
        return match sample_config::<C>().map(|s| std::io::stdout().write_all(s.as_bytes())) {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => fail(service, format!("write sample config: {e}")),
            Err(e) => fail(service, e),
        };
    }
    let config = match load_config::<C>(args, flags) {
        Ok(config) => config,
        Err(e) => return fail(service, format!("config error: {e}")),
    };
    if args.config_check {
        return match writeln!(std::io::stdout(), "config OK") {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(service, format!("write to stdout: {e}")),
        };
    }
    if let Err(e) = init(service, config.log_format()) {
        return fail(service, format!("{e:#}"));
    }
    match crate::failpoints::from_env() {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            count = n,
            spec = %std::env::var(crate::failpoints::ENV).unwrap_or_default(),
            "failpoints configured from the environment"
        ),
        Err(e) => return fail(service, e),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(service)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(service, format!("start tokio runtime: {e}")),
    };
    let result = runtime.block_on(async move {
        let shutdown = shutdown_signal().context("install signal handlers")?;
        run(config, shutdown).await
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_GRACE);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{service} failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_config<C: DaemonConfig>(args: &CommonArgs, flags: Overrides) -> Result<C, ConfigError> {
    let mut all_flags = args.overrides();
    all_flags.extend(flags);
    load(&Sources {
        file: args.config.clone(),
        toml: None,
        env: env_from_process()?,
        flags: all_flags,
    })
}

fn fail(service: &str, error: impl std::fmt::Display) -> ExitCode {
    eprintln!("{service}: {error}");
    ExitCode::FAILURE
}
