//! Generates the gRPC code from `eddy.proto` with a vendored `protoc`, so no system
//! protobuf compiler is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // SAFETY: build scripts are single-threaded; the variable only tells prost-build
    // where protoc is.
    unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    tonic_prost_build::configure().compile_protos(&["eddy.proto"], &["."])?;
    println!("cargo:rerun-if-changed=eddy.proto");
    Ok(())
}
