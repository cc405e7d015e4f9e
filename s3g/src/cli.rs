//! `rozone-s3g`'s command line: flags parsed, then the shared daemon main. A library
//! function so that `rozone-s3g` and the image's multi-call `rozone-daemons` run the same
//! code.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::config::Config;
use clap::Parser;
use rozone_config::{CommonArgs, Overrides};

/// rozone S3 gateway.
#[derive(Debug, Parser)]
#[command(name = crate::SERVICE, version)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,

    /// Sets s3g.addr: the S3 (HTTP) listener.
    #[arg(long, value_name = "ADDR")]
    addr: Option<SocketAddr>,

    /// Sets s3g.om_addrs (repeat for each OM): host:port of an OM's client listener.
    #[arg(long = "om-addr", value_name = "HOST:PORT")]
    om_addrs: Vec<String>,
}

/// Parses this process's arguments and runs the daemon until it stops.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut flags = Overrides::default();
    flags
        .flag("s3g.addr", cli.addr)
        .flag_list("s3g.om_addrs", &cli.om_addrs);
    rozone_telemetry::daemon_main(
        crate::SERVICE,
        &cli.common,
        flags,
        |config: Config, shutdown| crate::run(config, shutdown),
    )
}
