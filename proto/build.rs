//! Compiles the .proto files with a vendored protoc: no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; the variable is read by prost-build below.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let protos = ["proto/raft.proto", "proto/scm.proto"];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    tonic_prost_build::configure().compile_protos(&protos, &["proto"])?;
    Ok(())
}
