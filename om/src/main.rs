//! `rozone-om`: the daemon's command line ([`rozone_om::cli`]).

fn main() -> std::process::ExitCode {
    rozone_om::cli::main()
}
