//! Startup and serving: the process-level half of go-plugin's contract. Nomad starts the
//! binary with its cookie; the plugin listens on a Unix socket in a fresh temp dir, prints
//! the handshake line as its first stdout output, and serves gRPC (h2c) until go-plugin's
//! `Shutdown` or SIGTERM, then exits within a second. SIGINT is ignored, as Go plugins do:
//! a Ctrl-C at a terminal reaches the whole process group, and Nomad decides when its
//! plugins stop. Tasks keep running when this process ends (they belong to the executor).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tonic::transport::Server;

use crate::base::{BaseService, Plugin};
use crate::driver::DriverService;
use crate::goplugin::{Broker, Controller, Stdio};
use crate::proto::base::base_plugin_server::BasePluginServer;
use crate::proto::drivers::driver_server::DriverServer;
use crate::proto::plugin::grpc_broker_server::GrpcBrokerServer;
use crate::proto::plugin::grpc_controller_server::GrpcControllerServer;
use crate::proto::plugin::grpc_stdio_server::GrpcStdioServer;

/// The binary's name when it was not renamed.
pub const BINARY: &str = "paddock-nomad-driver";

/// The driver name Nomad will know this plugin by: the file name it was started as (Nomad
/// matches a `plugin "<name>"` block to the file name), `paddock` for the binary as built.
/// Copy or link it as `paddock-mock` to expose a second driver under that name.
pub fn plugin_name(argv0: &std::ffi::OsStr) -> String {
    let file = std::path::Path::new(argv0)
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let file = file.strip_suffix(".exe").unwrap_or(&file).to_string();
    if file.is_empty() || file == BINARY {
        "paddock".into()
    } else {
        file
    }
}

/// Serve until shut down. `app_version` is the negotiated go-plugin app protocol version.
pub async fn run(name: String, app_version: u32) -> anyhow::Result<()> {
    let base = std::env::var_os("PLUGIN_UNIX_SOCKET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("paddock-plugin")
        .tempdir_in(&base)
        .with_context(|| format!("creating a socket dir in {}", base.display()))?;
    let socket = dir.path().join("plugin.sock");
    let listener = tokio::net::UnixListener::bind(&socket)
        .with_context(|| format!("listening on {}", socket.display()))?;

    let plugin = Plugin::new(name.clone());
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("plugin", tonic_health::ServingStatus::Serving)
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;

    let token = plugin.shutdown.clone();
    let server = Server::builder()
        .add_service(health_service)
        .add_service(GrpcControllerServer::new(Controller(plugin.clone())))
        .add_service(GrpcStdioServer::new(Stdio(plugin.clone())))
        .add_service(GrpcBrokerServer::new(Broker(plugin.clone())))
        .add_service(BasePluginServer::new(BaseService(plugin.clone())))
        .add_service(DriverServer::new(DriverService(plugin.clone())))
        .serve_with_incoming_shutdown(
            // Each connection through the relay that mends the authority grpcio sends.
            tokio_stream::StreamExt::map(
                tokio_stream::wrappers::UnixListenerStream::new(listener),
                |c| c.map(crate::authority::relay),
            ),
            token.clone().cancelled_owned(),
        );

    spawn_signal_handlers(plugin.clone()).context("installing signal handlers")?;
    // The one line go-plugin reads from stdout, and nothing before it.
    let line = crate::handshake::line(app_version, &socket);
    {
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .context("writing the handshake line")?;
    }
    tracing::info!(plugin = %name, socket = %socket.display(), version = env!("CARGO_PKG_VERSION"), "serving");

    let mut server = std::pin::pin!(server);
    tokio::select! {
        r = &mut server => r.context("serving gRPC")?,
        _ = token.cancelled() => {
            // In-flight calls (the Shutdown answer) get a moment; long waits do not hold
            // the exit.
            let _ = tokio::time::timeout(Duration::from_millis(800), &mut server).await;
        }
    }
    tracing::info!(plugin = %name, tasks = plugin.tasks.len(), "stopped; tasks keep running");
    drop(dir);
    Ok(())
}

/// SIGTERM stops the plugin; SIGINT is logged and ignored. The handlers are in place when
/// this returns (before the handshake line: a client may signal as soon as it has read it).
fn spawn_signal_handlers(plugin: Arc<Plugin>) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {
                    tracing::info!("SIGTERM: stopping");
                    plugin.shutdown.cancel();
                }
                _ = int.recv() => tracing::info!("plugin received interrupt signal, ignoring"),
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_file_name() {
        assert_eq!(
            plugin_name("/opt/nomad/plugins/paddock-nomad-driver".as_ref()),
            "paddock"
        );
        assert_eq!(
            plugin_name("/opt/nomad/plugins/paddock".as_ref()),
            "paddock"
        );
        assert_eq!(
            plugin_name("/opt/nomad/plugins/paddock-mock".as_ref()),
            "paddock-mock"
        );
        assert_eq!(plugin_name("paddock-wasm.exe".as_ref()), "paddock-wasm");
    }
}
