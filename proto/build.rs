//! Compiles every `proto/*.proto` with a vendored protoc: no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; the variable is read by prost-build below.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto");
    let mut protos: Vec<std::path::PathBuf> = std::fs::read_dir("proto")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "proto"))
        .collect();
    protos.sort();
    for p in &protos {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    tonic_prost_build::configure()
        // Chunk bytes a client reads are sliced out of the received message, not copied
        // into a Vec of their own (BENCHMARKS.md, "2026-12-08": copies led the read path).
        .bytes(".rozone.datanode.v1.ReadSegment.data")
        .compile_protos(&protos, &[std::path::PathBuf::from("proto")])?;
    Ok(())
}
