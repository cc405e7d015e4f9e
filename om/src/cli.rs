//! `rozone-om`'s command line: flags parsed, then the shared daemon main. A library
//! function so that `rozone-om` and the image's multi-call `rozone-daemons` run the same
//! code.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::config::{Config, Startup};
use clap::Parser;
use rozone_config::{CommonArgs, Overrides};

/// rozone Ozone Manager.
#[derive(Debug, Parser)]
#[command(name = crate::SERVICE, version)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,

    /// Sets om.client_addr: the client gRPC listener.
    #[arg(long, value_name = "ADDR")]
    client_addr: Option<SocketAddr>,

    /// Sets om.peer_addr: the Raft listener for OM ring members.
    #[arg(long, value_name = "ADDR")]
    peer_addr: Option<SocketAddr>,

    /// Sets om.scm_addrs (repeat for each SCM): host:port of an SCM's client listener.
    #[arg(long = "scm-addr", value_name = "HOST:PORT")]
    scm_addrs: Vec<String>,

    /// Create a new OM ring with this node as its first member.
    #[arg(long, conflicts_with = "bootstrap")]
    init: bool,

    /// Join an existing OM ring as a new member.
    #[arg(long)]
    bootstrap: bool,

    /// With --bootstrap: skip the check that every member already lists this node.
    #[arg(long, requires = "bootstrap")]
    force: bool,
}

/// Parses this process's arguments and runs the daemon until it stops.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut flags = Overrides::default();
    flags
        .flag("om.client_addr", cli.client_addr)
        .flag("om.peer_addr", cli.peer_addr)
        .flag_list("om.scm_addrs", &cli.scm_addrs);
    let startup = Startup {
        init: cli.init,
        bootstrap: cli.bootstrap,
        force: cli.force,
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
