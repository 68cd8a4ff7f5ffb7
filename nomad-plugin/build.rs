//! Generates the gRPC code from our own `.proto` files (wire-compatible with Nomad's and
//! go-plugin's) with `protox`, a protobuf compiler in Rust, so the build needs no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/internal/plugin/grpc_controller.proto",
        "proto/internal/plugin/grpc_stdio.proto",
        "proto/internal/plugin/grpc_broker.proto",
        "proto/plugins/base/proto/base.proto",
        "proto/plugins/drivers/proto/driver.proto",
        "proto/plugins/shared/hclspec/hcl_spec.proto",
        "proto/plugins/shared/structs/proto/attribute.proto",
        "proto/plugins/shared/structs/proto/stats.proto",
        "proto/plugins/shared/structs/proto/recoverable_error.proto",
        "proto/google/rpc/status.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(files, ["proto"])?;
    // Servers for the plugin, clients for the tests and benches that play Nomad's part.
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
