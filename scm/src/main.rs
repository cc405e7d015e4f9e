//! `rozone-scm`: the daemon's command line ([`rozone_scm::cli`]).

fn main() -> std::process::ExitCode {
    rozone_scm::cli::main()
}
