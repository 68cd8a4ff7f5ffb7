//! One plugin host, built in one place: the component runtime, the host services its guests
//! reach (processes through the task executor, task logs, driver events, variables, services), and the
//! three plugin managers over it. The agent, `paddock-nomad-driver`, `component check` and
//! `call`, the tests and the benches all build it here, so the start-up wiring is written
//! once: what the runtime's guests call into is given to the builder, never patched in
//! afterwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::HookAttach;
use crate::devicemanager::DeviceManager;
use crate::drivermanager::{DriverManager, DriverServices, StartLimits};
use crate::hookmanager::HookManager;
use crate::node::NodeEvents;
use crate::runtime::host_api::services::ServiceHost;
use crate::runtime::host_api::variables::VariableHost;
use crate::runtime::{
    ComponentSettings, ComponentSource, LoadedComponent, Runtime, RuntimeError, RuntimeOptions,
};
use crate::state::StateDb;

/// What a plugin host is built from; `Default` is a host with nothing configured: no compile
/// cache, no settings (so no grants), no state, children of this process.
#[derive(Default)]
pub struct PluginHostOptions {
    /// Compile cache folder; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// The operator's settings and grants, by component name.
    pub settings: BTreeMap<String, ComponentSettings>,
    /// Dev mode: built-in components get every grant unless configured otherwise.
    pub dev: bool,
    /// Engine settings (the guest memory budget among them).
    pub engine: crate::runtime::engine::EngineConfig,
    /// Nomad Variables for the `variables` interface; `None` denies it.
    pub variables: Option<Arc<dyn VariableHost>>,
    /// Nomad-native service registrations for the `services` interface; `None` answers
    /// it `failed` (not available).
    pub services: Option<Arc<dyn ServiceHost>>,
    /// Where the managers keep what they know of their plugins across restarts.
    pub db: Option<Arc<dyn StateDb>>,
    /// How many driver starts run at once, and how long one waits for its turn.
    pub start_limits: StartLimits,
    /// Which tasks each hook attaches to (the agent config's `hook` blocks).
    pub hooks: BTreeMap<String, HookAttach>,
}

/// The plugin blocks that name a source, and where what they pull is kept.
#[derive(Default)]
pub struct RemoteSources {
    /// The pull cache (`<data_dir>/cache/pulled`, next to the compile cache).
    pub cache: Option<PathBuf>,
    pub specs: BTreeMap<String, crate::remote::RemoteSpec>,
}

/// The runtime and the plugin managers over it.
pub struct PluginHost {
    pub runtime: Arc<Runtime>,
    /// Processes, task logs and driver events, shared by the runtime and the drivers.
    pub services: Arc<DriverServices>,
    pub drivers: Arc<DriverManager>,
    pub devices: Arc<DeviceManager>,
    pub hooks: Arc<HookManager>,
    /// Check components (services' custom checks).
    pub checks: Arc<crate::checkcomponents::CheckComponents>,
    /// Secret providers (tasks' `secret` blocks).
    pub secrets: Arc<crate::secretproviders::SecretProviders>,
    /// The node's recent events, raised by the driver and device managers.
    pub node_events: Arc<NodeEvents>,
}

impl PluginHost {
    /// Build the runtime with its services and the managers over it. Nothing is loaded yet.
    pub fn build(opts: PluginHostOptions) -> Result<Self, RuntimeError> {
        let services = DriverServices::new();
        let mut host_services = services.host_services();
        host_services.variables = opts.variables;
        host_services.services = opts.services;
        let runtime = Runtime::new(RuntimeOptions {
            engine: opts.engine,
            cache_dir: opts.cache_dir,
            components: opts.settings,
            dev: opts.dev,
            services: host_services,
            ..Default::default()
        })?;
        let node_events = Arc::new(NodeEvents::default());
        let drivers = DriverManager::with_state(
            runtime.clone(),
            services.clone(),
            node_events.clone(),
            opts.db.clone(),
            opts.start_limits,
        );
        let devices = DeviceManager::new(runtime.clone(), node_events.clone(), opts.db);
        let hooks = HookManager::new(runtime.clone(), &opts.hooks);
        let checks = crate::checkcomponents::CheckComponents::new(runtime.clone());
        let secrets = crate::secretproviders::SecretProviders::new(runtime.clone());
        Ok(Self {
            runtime,
            services,
            drivers,
            devices,
            hooks,
            checks,
            secrets,
            node_events,
        })
    }

    /// Run host processes through the task executor of `data_dir` (started from `program`,
    /// or found running from an earlier life), recorded in `db`, taking back the processes
    /// `db` recorded: tasks outlive this process.
    pub async fn use_executor(
        &self,
        program: PathBuf,
        data_dir: &Path,
        db: Arc<dyn StateDb>,
    ) -> Result<(), crate::state::StateError> {
        self.services.use_executor(program, data_dir, db).await
    }

    /// Load one built-in component.
    pub async fn load_built_in(
        &self,
        artifact: &guest_artifacts::Artifact,
    ) -> Result<Arc<LoadedComponent>, crate::runtime::Refusal> {
        let source = ComponentSource::BuiltIn(artifact.file_name.to_string());
        self.runtime.load(source, Arc::from(artifact.bytes)).await
    }

    /// Load every `*.wasm` file of `dir` in name order, without watching it: a refused
    /// file is logged and the rest load. The error is the folder's own.
    pub async fn load_folder(&self, dir: &Path) -> std::io::Result<()> {
        for path in crate::swap::wasm_files(dir)? {
            let bytes = std::fs::read(&path)?;
            if let Err(r) = self
                .runtime
                .load(ComponentSource::File(path), Arc::from(bytes))
                .await
            {
                // Refused (not a component, wrong world, unbound name…): said, and the
                // rest load.
                tracing::error!("{r}");
            }
        }
        Ok(())
    }

    /// The built-in components, then every file of `dirs`, under the component lifecycle
    /// (hot swap, refusals, auto-revert, unloads).
    pub async fn start_swapper(
        &self,
        changes: Arc<crate::changes::Changes>,
        dirs: Vec<PathBuf>,
        auto_revert: BTreeMap<String, crate::config::AutoRevert>,
        remote: RemoteSources,
    ) -> std::io::Result<Arc<crate::swap::Swapper>> {
        crate::swap::Swapper::start(crate::swap::SwapperParts {
            runtime: self.runtime.clone(),
            drivers: self.drivers.clone(),
            devices: self.devices.clone(),
            hooks: self.hooks.clone(),
            node_events: self.node_events.clone(),
            changes,
            dirs,
            auto_revert,
            pull_cache: remote.cache,
            remotes: remote.specs,
        })
        .await
    }
}
