//! `rozone-scm`'s command line: flags parsed, then the shared daemon main. A library
//! function so that `rozone-scm` and the image's multi-call `rozone-daemons` run the same
//! code.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::config::{Config, Startup};
use clap::Parser;
use rozone_config::{CommonArgs, Overrides};

/// rozone Storage Container Manager.
#[derive(Debug, Parser)]
#[command(name = crate::SERVICE, version)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,

    /// Sets scm.client_addr: the client gRPC listener.
    #[arg(long, value_name = "ADDR")]
    client_addr: Option<SocketAddr>,

    /// Sets scm.peer_addr: the Raft listener for SCM ring members.
    #[arg(long, value_name = "ADDR")]
    peer_addr: Option<SocketAddr>,

    /// Sets scm.checkpoint_addr: serves DB checkpoints to joining SCMs.
    #[arg(long, value_name = "ADDR")]
    checkpoint_addr: Option<SocketAddr>,

    /// Create a new SCM ring with this node as its first member.
    #[arg(long, conflicts_with = "bootstrap")]
    init: bool,

    /// Join an existing SCM ring, taking its state from the leader's checkpoint.
    #[arg(long)]
    bootstrap: bool,
}

/// Parses this process's arguments and runs the daemon until it stops.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut flags = Overrides::default();
    flags
        .flag("scm.client_addr", cli.client_addr)
        .flag("scm.peer_addr", cli.peer_addr)
        .flag("scm.checkpoint_addr", cli.checkpoint_addr);
    let startup = Startup {
        init: cli.init,
        bootstrap: cli.bootstrap,
    };
    rozone_telemetry::daemon_main(
        crate::SERVICE,
        &cli.common,
        flags,
        |mut config: Config, shutdown| {
            config.startup = startup;
            crate::run(config, shutdown)
        },
    )
}
