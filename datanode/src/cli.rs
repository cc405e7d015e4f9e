//! `rozone-datanode`'s command line: flags parsed, then the shared daemon main. A library
//! function so that `rozone-datanode` and the image's multi-call `rozone-daemons` run the same
//! code.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use rozone_config::{CommonArgs, Overrides};

/// rozone datanode.
#[derive(Debug, Parser)]
#[command(name = crate::SERVICE, version)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,

    /// Sets datanode.container_addr: the container (chunk I/O) gRPC listener.
    #[arg(long, value_name = "ADDR")]
    container_addr: Option<SocketAddr>,

    /// Sets datanode.raft_addr: the pipeline Raft listener.
    #[arg(long, value_name = "ADDR")]
    raft_addr: Option<SocketAddr>,

    /// Sets datanode.replication_addr: serves container copies to other datanodes.
    #[arg(long, value_name = "ADDR")]
    replication_addr: Option<SocketAddr>,

    /// Sets datanode.scm_addrs (repeat for each SCM): host:port of an SCM's client listener.
    #[arg(long = "scm-addr", value_name = "HOST:PORT")]
    scm_addrs: Vec<String>,
}

/// Parses this process's arguments and runs the daemon until it stops.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut flags = Overrides::default();
    flags
        .flag("datanode.container_addr", cli.container_addr)
        .flag("datanode.raft_addr", cli.raft_addr)
        .flag("datanode.replication_addr", cli.replication_addr)
        .flag_list("datanode.scm_addrs", &cli.scm_addrs);
    rozone_telemetry::daemon_main(crate::SERVICE, &cli.common, flags, crate::run)
}
