//! `rozone-chaos --seed N --duration 60s [--faults ...]`: one seed of the fault-injection
//! suite on real processes (see docs/chaos.md). Exit 0: linearizable and the end state
//! checks passed; 1: a violation or a failed check (history and logs in --out); 2: the run
//! itself could not be carried out.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rozone_chaos::cluster::Size;
use rozone_chaos::faults::Families;
use rozone_chaos::run::{run, Options};

#[derive(Debug, Parser)]
#[command(
    name = "rozone-chaos",
    about = "Fault injection on a real rozone cluster, checked for linearizability"
)]
struct Args {
    /// The seed: the same seed injects the same fault schedule.
    #[arg(long)]
    seed: u64,
    /// How long the workload runs.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Fault families: process, network, membership, disk (comma-separated), all or none.
    /// Disk faults need daemons built with failpoints (the test build is).
    #[arg(long, default_value = "all", value_parser = Families::parse)]
    faults: Families,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=7))]
    scms: u64,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=7))]
    oms: u64,
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(3..=9))]
    datanodes: u64,
    /// Concurrent clients of the workload.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    clients: u32,
    /// Key registers (put/get/delete).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..=1000))]
    keys: u64,
    /// Volume registers (create-if-absent/get/delete).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=1000))]
    volumes: u64,
    /// Where the history, summary and daemon logs go when the run fails.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where rozone-scm, rozone-om and rozone-datanode are (default: next to this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Search time per register before the checker answers "unknown".
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    check_timeout: Duration,
    /// Failpoints for every daemon, `name=actions;...` (a build with failpoints only), e.g.
    /// `raft-lease-bypass=return` re-creates the stale read the leader lease fixed.
    #[arg(long)]
    daemon_failpoints: Option<String>,
    /// Write the history and daemon logs to --out even when the run passes.
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let bins = match a.bin_dir.clone().or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(PathBuf::from))
    }) {
        Some(b) => b,
        None => {
            eprintln!("rozone-chaos: cannot tell where the daemons are: give --bin-dir");
            return ExitCode::from(2);
        }
    };
    let o = Options {
        seed: a.seed,
        duration: a.duration,
        families: a.faults,
        size: Size {
            scms: a.scms,
            oms: a.oms,
            datanodes: a.datanodes,
        },
        clients: a.clients,
        keys: a.keys as usize,
        volumes: a.volumes as usize,
        bins,
        out: a.out,
        check_timeout: a.check_timeout,
        daemon_failpoints: a.daemon_failpoints,
        keep: a.keep,
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rozone-chaos: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(&o)) {
        Ok(r) => {
            print!("{}", r.summary());
            if r.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("rozone-chaos: seed {}: {e:#}", o.seed);
            ExitCode::from(2)
        }
    }
}
