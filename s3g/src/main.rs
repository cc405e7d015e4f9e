//! `rozone-s3g`: parses flags, then hands over to the shared daemon main.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use rozone_config::{CommonArgs, Overrides};
use rozone_s3g::config::Config;

/// rozone S3 gateway.
#[derive(Debug, Parser)]
#[command(name = rozone_s3g::SERVICE, version)]
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut flags = Overrides::default();
    flags
        .flag("s3g.addr", cli.addr)
        .flag_list("s3g.om_addrs", &cli.om_addrs);
    rozone_telemetry::daemon_main(
        rozone_s3g::SERVICE,
        &cli.common,
        flags,
        |config: Config, shutdown| rozone_s3g::run(config, shutdown),
    )
}
