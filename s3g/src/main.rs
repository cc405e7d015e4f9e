//! `rozone-s3g`: the daemon's command line ([`rozone_s3g::cli`]).

fn main() -> std::process::ExitCode {
    rozone_s3g::cli::main()
}
