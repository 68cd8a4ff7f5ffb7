//! Paddock's component runtime: one wasmtime `Engine`, the compile cache, the loader,
//! grants and limits, per-call stores and the warm pool, the registry that hot swap builds
//! on, call metrics, the contract bindings (one module per contract version) and the host
//! interfaces the guests import. It knows nothing of the agent: the embedder (the agent,
//! the Nomad driver plugin) lends it [`HostServices`] for processes, task logs, driver
//! events and variables, and calls components through the plugin clients it writes over
//! [`Runtime::call_driver`], [`Runtime::call_hook`] and [`Runtime::call_device`].
//!
//! Module map:
//! - [`inspect`]: what the bytes are (world, contract version, imports), before wasmtime;
//! - [`cache`]: compiled components on disk, keyed by sha256 and engine;
//! - [`loader`]: the load pipeline (inspect → cache → link → `info()` → settings);
//! - [`component`]: a loaded component and the operator's settings for it;
//! - [`call`]: the one generic call path, failures ([`CallError`]) and warm stores;
//! - [`store`]: what a call's `Store` holds, and the linker composition;
//! - [`context`]: the component, task and services a call is about;
//! - [`host_api`]: the host interfaces, one module each;
//! - [`contract`]: the released contract versions (pinned `wit/<version>/` folders), the ones
//!   served, and the rule for a guest's version;
//! - [`bindings`] and [`types`]: versioned bindings and the host-owned types they convert to;
//! - [`engine`], [`grants`], [`registry`], [`metrics`].
//!
//! A call races its deadline in a `Store` from the `InstancePre`; a trap, an exhausted
//! memory cap or a missed deadline drops that store and comes back as a [`CallError`]
//! naming the component, so a broken call never poisons the next one. A store whose call
//! ended cleanly (no trap, no cap or deadline hit, no guest output) is kept warm for the
//! next call of the same component version, re-armed by [`store::arm`], until it has served
//! `instance_reuse` calls. Guests keep no state between calls by contract (their state is
//! the handle blob), so reuse only saves the instantiation; `instance_reuse = 1` gives every
//! call a fresh store.

pub mod bindings;
pub mod bounds;
pub mod cache;
pub mod call;
pub mod component;
pub mod context;
pub mod contract;
pub mod engine;
pub mod grants;
pub mod host_api;
pub mod inspect;
pub mod loader;
pub mod metrics;
pub mod network;
pub mod registry;
pub mod safefs;
pub mod store;
pub mod types;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub use cache::CacheOutcome;
pub use call::{CallError, CallFailure};
pub use component::{ComponentSettings, ComponentSource, LoadedComponent};
pub use context::{CallLimits, TaskContext, TaskFiles, TaskPaths};
pub use grants::Grants;
pub use host_api::HostServices;
pub use inspect::World;
pub use loader::{LoadError, Refusal};
use store::HostState;
pub use types::{
    ServiceChoice, ServiceRegistration, ServiceStub, TaskEnv, VariableMetadata, WorkloadIdentity,
};

/// How the runtime is set up.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Engine settings.
    pub engine: engine::EngineConfig,
    /// Compile cache dir; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Settings by component name.
    pub components: BTreeMap<String, ComponentSettings>,
    /// Limits for components without overrides.
    pub default_limits: CallLimits,
    /// Dev mode: built-in components get every grant unless configured otherwise.
    pub dev: bool,
    /// What the host interfaces call into.
    pub services: HostServices,
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine could not be built with these settings.
    #[error("building the wasm engine: {0}")]
    Engine(String),
    /// The host interfaces could not be linked.
    #[error("linking host interfaces: {0}")]
    Linker(String),
    /// The compile cache dir could not be created.
    #[error("compile cache: {0}")]
    Cache(#[from] std::io::Error),
}

/// A component runtime: load components into its registry and call them.
pub struct Runtime {
    engine: Engine,
    allocator: engine::Allocator,
    linker: Linker<HostState>,
    cache: cache::CompileCache,
    services: Arc<HostServices>,
    permits: Arc<Semaphore>,
    /// Linear memory of every live instance together.
    budget: Arc<store::MemoryBudget>,
    options: RuntimeOptions,
    /// Settings by component name; replaced as a whole by a config reload.
    settings: std::sync::RwLock<Arc<BTreeMap<String, ComponentSettings>>>,
    /// Call, failure, latency and compile-cache counters.
    pub metrics: metrics::RuntimeMetrics,
    /// Current components.
    pub registry: registry::Registry,
    _ticker: engine::EpochTicker,
}

impl Runtime {
    /// Build the engine, linker and cache.
    pub fn new(options: RuntimeOptions) -> Result<Arc<Self>, RuntimeError> {
        let (engine, allocator) =
            engine::build(&options.engine).map_err(|e| RuntimeError::Engine(e.to_string()))?;
        let mut linker = Linker::new(&engine);
        store::add_to_linker(&mut linker).map_err(|e| RuntimeError::Linker(format!("{e:#}")))?;
        let cache = cache::CompileCache::new(&engine, options.cache_dir.clone())?;
        let ticker = engine::EpochTicker::start(&engine, options.engine.epoch_tick);
        tracing::info!(?allocator, "wasm runtime ready");
        Ok(Arc::new(Self {
            permits: Arc::new(Semaphore::new(options.engine.max_instances as usize)),
            budget: Arc::new(store::MemoryBudget::new(options.engine.memory_budget_bytes)),
            engine,
            allocator,
            linker,
            cache,
            services: Arc::new(options.services.clone()),
            settings: std::sync::RwLock::new(Arc::new(options.components.clone())),
            options,
            metrics: metrics::RuntimeMetrics::default(),
            registry: registry::Registry::default(),
            _ticker: ticker,
        }))
    }

    /// The operator's settings for component `name`, as of now.
    pub fn settings(&self, name: &str) -> Option<ComponentSettings> {
        self.settings.read().unwrap().get(name).cloned()
    }

    /// Replace the settings of every component (a config reload). Versions loaded before
    /// keep the settings they were prepared with; prepare them again to apply these.
    pub fn set_settings(&self, settings: BTreeMap<String, ComponentSettings>) {
        *self.settings.write().unwrap() = Arc::new(settings);
    }

    /// Which instance allocator is in use.
    pub fn allocator(&self) -> engine::Allocator {
        self.allocator
    }

    /// The agent's guest memory budget and what of it live instances hold now, bytes.
    pub fn memory_budget(&self) -> (usize, usize) {
        (self.budget.used(), self.budget.limit())
    }
}

/// Now, ns since the Unix epoch.
pub fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
