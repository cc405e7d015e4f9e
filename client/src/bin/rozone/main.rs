//! `rozone`: the command-line tool of a rozone cluster.
//!
//! - `rozone sh volume|bucket|key ...`: the namespace and key data;
//! - `rozone admin ...`: SCM/OM roles, containers, datanodes, pipelines, safe mode;
//! - `rozone dev up|down`: a local HA cluster of the real daemons;
//! - `rozone s3 getsecret`: S3 credentials for the gateway;
//! - `rozone bench ...`: load generators.
//!
//! Every failure ends as one line on stderr (`rozone: ...`) and exit code 1.

mod admin;
mod bench;
mod certs;
mod cluster;
mod dev;
mod output;
mod progress;
mod s3;
mod sh;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The rozone command-line tool.
#[derive(Debug, Parser)]
#[command(name = "rozone", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: cluster::ClusterArgs,

    /// Print JSON (stable field names) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Volumes, buckets and keys.
    #[command(subcommand)]
    Sh(sh::ShCommand),
    /// Cluster administration.
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// A local HA cluster for trying rozone out and for tests.
    #[command(subcommand)]
    Dev(dev::DevCommand),
    /// Load generators.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// S3 credentials for the S3 gateway.
    #[command(subcommand)]
    S3(s3::S3Command),
}

/// Parses this process's arguments and runs the command. Public because these sources are
/// also the `rozone_cli` library (cli/Cargo.toml) that the image's multi-call
/// `rozone-daemons` runs as `rozone`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rozone: start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run(cli));
    // Do not wait for lingering connection tasks.
    rt.shutdown_background();
    match result {
        Ok(code) => code,
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("rozone: {msg}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Sh(c) => sh::run(&cli.cluster, cli.json, c).await,
        Command::Admin(c) => admin::run(&cli.cluster, cli.json, c).await,
        Command::Dev(c) => dev::run(cli.json, c).await,
        Command::Bench(c) => bench::run(&cli.cluster, cli.json, c).await,
        Command::S3(c) => s3::run(&cli.cluster, cli.json, c).await,
    }
}

/// Logs go to stderr; quiet by default (errors are reported as the one final line), more
/// with `RUST_LOG`, e.g. `RUST_LOG=rozone_client=debug`.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
