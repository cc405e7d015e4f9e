//! `rozone-datanode`: the daemon's command line ([`rozone_datanode::cli`]).

fn main() -> std::process::ExitCode {
    rozone_datanode::cli::main()
}
