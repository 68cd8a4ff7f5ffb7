//! Generates `paddock-nomad-driver`'s gRPC code from its own `.proto` files (wire-compatible
//! with Nomad's and go-plugin's) with `protox`, a protobuf compiler in Rust (no `protoc`),
//! into `nomad-plugin/src/generated/`, and records the protos' digest there
//! (`PROTO_SHA256`, which a test of the plugin compares with the protos as they are).
//!
//! The generated code is checked in, so building the workspace compiles no code generator:
//! `protox` and `tonic-prost-build` would otherwise be build-dependencies, and their
//! features, unified with the runtime's proc macros, made `cargo test` rebuild wasmtime
//! after `cargo build`. Run after editing a `.proto`:
//!
//! ```sh
//! cargo run --manifest-path nomad-plugin/codegen/Cargo.toml
//! ```

use std::path::Path;

use sha2::Digest;

/// The protos, in the order their digest is taken: `nomad-plugin/proto/FILES`, which the
/// plugin's test reads too.
const FILES: &str = include_str!("../../proto/FILES");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::env::set_current_dir(&plugin)?;
    let out = plugin.join("src/generated");
    std::fs::create_dir_all(&out)?;
    let files: Vec<&str> = FILES.lines().filter(|l| !l.is_empty()).collect();
    let fds = protox::compile(&files, ["proto"])?;
    // Servers for the plugin, clients for the tests and benches that play Nomad's part.
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .out_dir(&out)
        .compile_fds(fds)?;
    let mut digest = sha2::Sha256::new();
    for f in &files {
        digest.update(f.as_bytes());
        digest.update([0]);
        digest.update(std::fs::read(f)?);
        digest.update([0]);
    }
    std::fs::write(out.join("PROTO_SHA256"), format!("{}\n", hex(&digest.finalize())))?;
    println!("wrote {}", out.display());
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
