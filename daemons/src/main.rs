//! `rozone-daemons`: every rozone daemon and the `rozone` CLI in one executable, chosen by
//! the name it runs under — a link named `rozone-scm`, `rozone-om`, `rozone-datanode`,
//! `rozone-s3g` or `rozone` runs that program exactly as its own binary does (the same
//! `cli::main` of its crate; the CLI's sources as the `rozone_cli` library).
//!
//! Why: each binary carries its own copy of RocksDB and of the Rust stack (tokio, tonic,
//! hyper, openraft, prost), most of its 10–24 MB; the container image ships this one
//! executable and five links instead of five binaries (BENCHMARKS.md, "The image"). The
//! separate binaries stay for `rozone dev up`, systemd and the tests.

use std::ffi::OsStr;
use std::path::Path;
use std::process::ExitCode;

/// A daemon's whole command line: its crate's `cli::main`.
type DaemonMain = fn() -> ExitCode;

/// The daemons this executable runs, by the name it is invoked as.
const DAEMONS: [(&str, DaemonMain); 5] = [
    ("rozone-scm", rozone_scm::cli::main),
    ("rozone-om", rozone_om::cli::main),
    ("rozone-datanode", rozone_datanode::cli::main),
    ("rozone-s3g", rozone_s3g::cli::main),
    // The CLI too (its sources are the `rozone` binary's, as the rozone_cli library).
    ("rozone", rozone_cli::main),
];

/// The daemon `argv0` names, if any (its file name, whatever directory it was run from).
fn daemon_for(argv0: &OsStr) -> Option<DaemonMain> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    DAEMONS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    match daemon_for(&argv0) {
        Some(run) => run(),
        None => {
            let names: Vec<&str> = DAEMONS.iter().map(|(n, _)| *n).collect();
            eprintln!(
                "rozone-daemons: run it through a link named after a program ({}), not as {:?}",
                names.join(", "),
                Path::new(&argv0).file_name().unwrap_or_default()
            );
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_it_runs_under_picks_the_daemon() {
        assert!(daemon_for(OsStr::new("/usr/local/bin/rozone-scm")).is_some());
        assert!(daemon_for(OsStr::new("rozone-s3g")).is_some());
        let om = daemon_for(OsStr::new("./rozone-om")).unwrap();
        assert!(std::ptr::fn_addr_eq(
            om,
            rozone_om::cli::main as fn() -> ExitCode
        ));
        assert!(daemon_for(OsStr::new("rozone")).is_some());
        assert!(daemon_for(OsStr::new("rozone-daemons")).is_none());
        assert!(daemon_for(OsStr::new("rozone-scm.old")).is_none());
        assert!(daemon_for(OsStr::new("")).is_none());
    }
}
