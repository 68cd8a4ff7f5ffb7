//! go-plugin's own services, which its client calls beside the plugin's: `GRPCController`
//! (`Shutdown`: the client's polite way to stop the plugin before it kills it),
//! `GRPCStdio` (forwarded stdout/stderr; this plugin logs to stderr directly, so the stream
//! stays open and empty) and `GRPCBroker` (extra connections, which this plugin never
//! offers: the stream is held open and what arrives is ignored).

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::base::Plugin;
use crate::proto::plugin as pb;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A stream that sends nothing and ends when the plugin shuts down.
fn until_shutdown<T: Send + 'static>(plugin: &Arc<Plugin>) -> BoxStream<T> {
    let token = plugin.shutdown.clone();
    Box::pin(
        futures::stream::once(async move {
            token.cancelled().await;
        })
        .filter_map(|_| async { None }),
    )
}

use futures::StreamExt as _;

pub struct Controller(pub Arc<Plugin>);

#[tonic::async_trait]
impl pb::grpc_controller_server::GrpcController for Controller {
    async fn shutdown(&self, _: Request<pb::Empty>) -> Result<Response<pb::Empty>, Status> {
        tracing::info!("shutdown requested by the plugin client");
        self.0.shutdown.cancel();
        Ok(Response::new(pb::Empty {}))
    }
}

pub struct Stdio(pub Arc<Plugin>);

#[tonic::async_trait]
impl pb::grpc_stdio_server::GrpcStdio for Stdio {
    type StreamStdioStream = BoxStream<pb::StdioData>;

    async fn stream_stdio(
        &self,
        _: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(until_shutdown(&self.0)))
    }
}

pub struct Broker(pub Arc<Plugin>);

#[tonic::async_trait]
impl pb::grpc_broker_server::GrpcBroker for Broker {
    type StartStreamStream = BoxStream<pb::ConnInfo>;

    async fn start_stream(
        &self,
        req: Request<Streaming<pb::ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        let mut incoming = req.into_inner();
        tokio::spawn(async move { while let Some(Ok(_)) = incoming.next().await {} });
        Ok(Response::new(until_shutdown(&self.0)))
    }
}
