//! What stands behind the driver: Paddock's component runtime with the configured built-in
//! driver and the operator's folders, the driver manager (start queue, health, event routing), and
//! the task executor that owns the tasks' processes.
//!
//! Nomad starts this binary several times: twice to check it (plugin info, config schema,
//! set config) while a long-lived copy from an earlier agent may still run, then once for
//! good. So [`Host::open`] only loads components; the state DB (process records) and the
//! executor are taken on by the first call that runs a task ([`Host::processes`]), which only
//! the long-lived copy receives. Tasks belong to the executor and outlive this process.

use std::path::PathBuf;
use std::sync::Arc;

use paddock_core::drivermanager::{Driver, DriverManager, DriverServices};
use paddock_core::pluginhost::{PluginHost, PluginHostOptions};
use paddock_core::runtime::Runtime;
use paddock_core::state::{RedbState, StateDb};

use crate::config::PluginConfig;

/// The drivers built into the binary, by name.
pub const BUILT_IN_DRIVERS: &[(&str, guest_artifacts::Artifact)] = &[
    ("mock", guest_artifacts::MOCK_DRIVER),
    ("raw_exec", guest_artifacts::RAW_EXEC_DRIVER),
    ("exec", guest_artifacts::EXEC_DRIVER),
];

/// Pull the driver from `spec`'s source (the cache in `data_dir` when the source cannot be
/// reached), verified as an agent verifies a plugin block's source, and load it.
async fn pull_driver(
    plugins: &PluginHost,
    spec: &paddock_core::remote::RemoteSpec,
    data_dir: &std::path::Path,
) -> Result<(), HostError> {
    let err = |m: String| HostError::Components(format!("{}: {m}", spec.source));
    let cache = paddock_core::remote::cache::Cache::open(&data_dir.join("cache").join("pulled"))
        .map_err(|e| err(format!("the pull cache: {e}")))?;
    let pulled = paddock_core::remote::fetch(spec, &cache)
        .await
        .map_err(|e| err(format!("refused: {e}")))?;
    let source = paddock_core::runtime::ComponentSource::Remote {
        name: spec.name.clone(),
        reference: pulled.reference.clone(),
    };
    let c = plugins
        .runtime
        .prepare(source, Arc::from(pulled.bytes.as_slice()))
        .await
        .map_err(|r| err(format!("refused: {}", r.error)))?;
    if c.name != spec.name {
        return Err(err(format!(
            "refused: it reports the name {:?}, but the plugin's driver is {:?}",
            c.name, spec.name
        )));
    }
    plugins.runtime.registry.install(c);
    if let Err(e) = cache.store(spec, &pulled) {
        tracing::warn!(source = %spec.source, error = %e, "the pulled driver could not be cached");
    }
    tracing::info!(source = %spec.source, reference = %pulled.reference, signer = pulled.signer.as_deref().unwrap_or("none"), "driver pulled");
    Ok(())
}

/// Why the host could not be built or a task's processes cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("data dir {path}: {message}")]
    DataDir { path: String, message: String },
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("component runtime: {0}")]
    Runtime(String),
    #[error("components: {0}")]
    Components(String),
    #[error(
        "no driver component named {name:?} is built in or loaded (drivers: {loaded}); set `driver` \
         in the plugin config, or add its .wasm to a `components` folder"
    )]
    NoDriver { name: String, loaded: String },
    #[error("state DB {path}: {message}")]
    State { path: String, message: String },
}

/// The runtime and driver behind one plugin process.
pub struct Host {
    pub config: PluginConfig,
    pub data_dir: PathBuf,
    pub drivers: Arc<DriverManager>,
    pub runtime: Arc<Runtime>,
    services: Arc<DriverServices>,
    state: tokio::sync::OnceCell<Arc<dyn StateDb>>,
}

impl Host {
    /// Load the components and check that the configured driver is among them. `name`
    /// (the plugin's) names the default data dir.
    pub async fn open(config: PluginConfig, name: &str) -> Result<Self, HostError> {
        let data_dir = config
            .data_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("paddock-nomad-{name}")));
        std::fs::create_dir_all(&data_dir).map_err(|e| HostError::DataDir {
            path: data_dir.display().to_string(),
            message: e.to_string(),
        })?;
        let plugins = PluginHost::build(PluginHostOptions {
            cache_dir: Some(data_dir.join("cache").join("components")),
            settings: [(config.driver().to_string(), config.settings()?)].into(),
            ..Default::default()
        })
        .map_err(|e| HostError::Runtime(e.to_string()))?;
        // The configured driver if it is built in (only it: Nomad starts this binary three
        // times, and each load costs), then every component of the operator's folders.
        let builtin = BUILT_IN_DRIVERS
            .iter()
            .find(|(name, _)| *name == config.driver());
        if let Some((_, a)) = builtin {
            plugins
                .load_built_in(a)
                .await
                .map_err(|r| HostError::Components(r.to_string()))?;
        }
        for dir in config
            .components
            .iter()
            .filter(|p| !p.to_str().is_some_and(|s| s.contains("://")))
        {
            plugins
                .load_folder(dir)
                .await
                .map_err(|e| HostError::Components(format!("{}: {e}", dir.display())))?;
        }
        if let Some(spec) = config.remote_spec()? {
            pull_driver(&plugins, &spec, &data_dir).await?;
        }
        let PluginHost {
            runtime,
            services,
            drivers,
            ..
        } = plugins;
        let host = Self {
            config,
            data_dir,
            drivers,
            runtime,
            services,
            state: tokio::sync::OnceCell::new(),
        };
        if !host.driver().is_loaded() {
            return Err(HostError::NoDriver {
                name: host.config.driver().to_string(),
                loaded: loaded_drivers(&host.drivers),
            });
        }
        Ok(host)
    }

    /// The exposed driver (its current version at every call).
    pub fn driver(&self) -> Driver {
        self.drivers.driver(self.config.driver())
    }

    /// Take on the state DB and the task executor, once: before the first task starts or
    /// is recovered.
    pub async fn processes(&self) -> Result<(), HostError> {
        self.state
            .get_or_try_init(|| async {
                let path = self.data_dir.join("state.redb");
                let state_err = |message: String| HostError::State {
                    path: path.display().to_string(),
                    message,
                };
                let db: Arc<dyn StateDb> = Arc::new(
                    RedbState::open_with_cache(&path, 4 << 20)
                        .map_err(|e| state_err(e.to_string()))?,
                );
                let program = std::env::current_exe()
                    .map_err(|e| state_err(format!("finding this executable: {e}")))?;
                self.services
                    .use_executor(program, &self.data_dir, db.clone())
                    .await
                    .map_err(|e| state_err(e.to_string()))?;
                Ok(db)
            })
            .await
            .map(|_| ())
    }
}

/// The drivers this config could name: the built-in ones and those loaded from folders.
fn loaded_drivers(drivers: &DriverManager) -> String {
    let mut names: Vec<String> = BUILT_IN_DRIVERS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    names.extend(drivers.names());
    names.sort();
    names.dedup();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
