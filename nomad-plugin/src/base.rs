//! Nomad's `BasePlugin` service: who this plugin is, its config schema, and its config.
//! The shared state of the process ([`Plugin`]) lives here too: the host that `SetConfig`
//! builds, the tasks, the driver events and the shutdown signal.

use std::sync::Arc;

use tokio::sync::{RwLock, broadcast};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::config::PluginConfig;
use crate::host::Host;
use crate::proto::base as pb;
use crate::proto::base::base_plugin_server::BasePlugin;
use crate::proto::drivers::DriverTaskEvent;
use crate::tasks::Tasks;

/// The driver API version this plugin speaks (Nomad's `drivers.ApiVersion010`).
pub const API_VERSION: &str = "v0.1.0";

/// The state one plugin process serves from.
pub struct Plugin {
    /// The driver's name as jobs use it (`driver = "paddock"`).
    pub name: String,
    host: RwLock<Option<Arc<Host>>>,
    /// The config the host was built from, to tell a repeated `SetConfig` from a new one.
    config_bytes: RwLock<Vec<u8>>,
    pub tasks: Tasks,
    pub events: broadcast::Sender<DriverTaskEvent>,
    /// Cancelled by go-plugin's `Shutdown`: the server stops and the process exits.
    pub shutdown: CancellationToken,
}

impl Plugin {
    pub fn new(name: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            host: RwLock::new(None),
            config_bytes: RwLock::new(Vec::new()),
            tasks: Tasks::default(),
            events: broadcast::channel(1024).0,
            shutdown: CancellationToken::new(),
        })
    }

    /// The host `SetConfig` built.
    pub async fn host(&self) -> Result<Arc<Host>, Status> {
        self.host.read().await.clone().ok_or_else(|| {
            Status::failed_precondition("the plugin has no config yet: SetConfig comes first")
        })
    }

    /// Build the host from a config (what `SetConfig` does).
    pub async fn configure(&self, msgpack: &[u8]) -> Result<(), Status> {
        let mut host = self.host.write().await;
        let mut bytes = self.config_bytes.write().await;
        if host.is_some() && *bytes == msgpack {
            return Ok(());
        }
        let config =
            PluginConfig::decode(msgpack).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if host.is_some() && !self.tasks.is_empty() {
            return Err(Status::failed_precondition(
                "plugin config: a new config while tasks run; restart the plugin to change it",
            ));
        }
        let built = Host::open(config, &self.name)
            .await
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        tracing::info!(
            driver = built.config.driver(),
            data_dir = %built.data_dir.display(),
            "configured"
        );
        *host = Some(Arc::new(built));
        *bytes = msgpack.to_vec();
        Ok(())
    }
}

/// The `BasePlugin` service over the shared state.
pub struct BaseService(pub Arc<Plugin>);

#[tonic::async_trait]
impl BasePlugin for BaseService {
    async fn plugin_info(
        &self,
        _: Request<pb::PluginInfoRequest>,
    ) -> Result<Response<pb::PluginInfoResponse>, Status> {
        Ok(Response::new(pb::PluginInfoResponse {
            r#type: pb::PluginType::Driver as i32,
            plugin_api_versions: vec![API_VERSION.into()],
            plugin_version: env!("CARGO_PKG_VERSION").into(),
            name: self.0.name.clone(),
        }))
    }

    async fn config_schema(
        &self,
        _: Request<pb::ConfigSchemaRequest>,
    ) -> Result<Response<pb::ConfigSchemaResponse>, Status> {
        Ok(Response::new(pb::ConfigSchemaResponse {
            spec: Some(crate::spec::plugin_config()),
        }))
    }

    async fn set_config(
        &self,
        req: Request<pb::SetConfigRequest>,
    ) -> Result<Response<pb::SetConfigResponse>, Status> {
        let req = req.into_inner();
        if !req.plugin_api_version.is_empty() && req.plugin_api_version != API_VERSION {
            return Err(Status::invalid_argument(format!(
                "plugin_api_version {:?}: this plugin speaks {API_VERSION}",
                req.plugin_api_version
            )));
        }
        self.0.configure(&req.msgpack_config).await?;
        Ok(Response::new(pb::SetConfigResponse {}))
    }
}
