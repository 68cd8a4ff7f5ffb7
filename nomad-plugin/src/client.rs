//! A gRPC channel to a plugin's Unix socket, dialled as go-plugin's client does (h2c, the
//! path from the handshake line): for tools, tests and benches that play Nomad's part.

use std::path::Path;

use tonic::transport::{Channel, Endpoint, Uri};

/// Connect to the plugin listening on `socket`.
pub async fn connect_unix(socket: &Path) -> Result<Channel, tonic::transport::Error> {
    let path = socket.to_path_buf();
    // The URI is required by the API and unused: every connection goes to `socket`.
    Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await
}
