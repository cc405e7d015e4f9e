//! Compiles `proto/etcd_kv.proto` (the part of etcd's v3 KV API the load generator uses)
//! with a vendored protoc, as `proto/build.rs` does: no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; the variable is read by prost-build below.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/etcd_kv.proto");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&["proto/etcd_kv.proto"], &["proto"])?;
    Ok(())
}
