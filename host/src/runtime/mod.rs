//! The component runtime: one `Engine`, the compile cache, the loader, grants and limits,
//! and the registry that hot swap builds on.
//!
//! Data flow: bytes → [`loader::inspect`] (wasm? component? which world and contract
//! version?) → [`cache::CompileCache`] (compile or deserialize) → `InstancePre` (imports
//! linked and exports type-checked once) → `info()` names it → the operator's settings for
//! that name give grants, limits and config → [`registry::Registry`].
//!
//! Every call races a wall-clock deadline in a `Store` from the `InstancePre`
//! ([`store::new_store`]); a trap, an exhausted memory cap or a missed deadline drops that
//! store and comes back as a [`CallError`] naming the component, so a broken call never
//! poisons the next one. A store whose call ended cleanly (no trap, no cap or deadline hit,
//! no guest output) is kept warm for the next call of the same component version, re-armed
//! by [`store::arm`], until it has served `instance_reuse` calls. Guests keep no state
//! between calls by contract (their state is the handle blob), so reuse only saves the
//! instantiation; `instance_reuse = 1` gives every call a fresh store.

pub mod bindings;
pub mod cache;
mod call;
pub mod engine;
pub mod grants;
pub mod host_api;
pub mod loader;
pub mod metrics;
pub mod registry;
pub mod store;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::Semaphore;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use bindings::v0_1_0;
pub use cache::CacheOutcome;
use call::{Call, WarmPool, wrong_world};
pub use call::{CallError, CallFailure};
pub use grants::Grants;
pub use loader::World;
pub use store::{CallLimits, TaskContext};
use store::{ComponentContext, HostState};

/// Where a component came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "Kind", content = "Location")]
pub enum ComponentSource {
    /// Embedded in the agent binary.
    BuiltIn(String),
    /// A file.
    File(PathBuf),
}

impl std::fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ComponentSource::BuiltIn(n) => write!(f, "built-in {n}"),
            ComponentSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The operator's settings for one component name (`plugin "<name>" { ... }`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComponentSettings {
    /// Capabilities granted.
    pub grants: Grants,
    /// Memory cap override, bytes.
    pub memory_bytes: Option<usize>,
    /// Call deadline override.
    pub call_timeout: Option<Duration>,
    /// Calls per warm instance override (1 = a fresh store per call).
    pub instance_reuse: Option<u32>,
    /// The `config` block, as JSON.
    pub config: serde_json::Value,
}

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
}

/// A component ready to be called.
pub struct LoadedComponent {
    /// Name from its `info()`.
    pub name: String,
    /// World.
    pub world: World,
    /// Contract version it was built against.
    pub contract_version: String,
    /// The plugin's own version string.
    pub plugin_version: String,
    /// sha256 of its bytes: the version identity.
    pub sha256: String,
    /// Where it came from.
    pub source: ComponentSource,
    /// When it was loaded, ns since the Unix epoch.
    pub loaded_at: u64,
    /// Whether compilation came from the cache.
    pub cache: CacheOutcome,
    /// What it imports, and so which grants it can use ([`loader::grants_used`]).
    pub imports: Vec<String>,
    /// Time to compile or deserialize and pre-link.
    pub load_time: Duration,
    pub(crate) ctx: Arc<ComponentContext>,
    pre: WorldPre,
    warm: WarmPool,
}

impl LoadedComponent {
    /// Grants in force.
    pub fn grants(&self) -> &Grants {
        &self.ctx.grants
    }

    /// Limits in force.
    pub fn limits(&self) -> &CallLimits {
        &self.ctx.limits
    }

    /// Idle warm instances kept for the next calls.
    pub fn warm_idle(&self) -> usize {
        self.warm.idle()
    }
}

impl std::fmt::Debug for LoadedComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedComponent")
            .field("name", &self.name)
            .field("world", &self.world)
            .field("sha256", &self.sha256)
            .field("source", &self.source)
            .finish()
    }
}

enum WorldPre {
    Driver(v0_1_0::driver::DriverPre<HostState>),
    Hook(v0_1_0::hook::HookPre<HostState>),
    Device(v0_1_0::device::DevicePluginPre<HostState>),
}

/// Why a component was refused at load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading the file failed.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not a component Paddock can host.
    #[error(transparent)]
    Inspect(#[from] loader::InspectError),
    /// Compilation failed.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// Imports or exports do not match the world.
    #[error("does not match the {world} world of paddock:plugin@{version}: {reason}")]
    Link {
        /// World.
        world: World,
        /// Contract version.
        version: String,
        /// Linker's message.
        reason: String,
    },
    /// Its `info()` call failed.
    #[error("info() failed: {0}")]
    Info(CallError),
    /// It reported an empty or invalid name.
    #[error("info() returned an invalid name {0:?} (use [a-z0-9_-], 1 to 64 characters)")]
    BadName(String),
}

/// A component and the reason it was refused.
#[derive(Debug)]
pub struct Refusal {
    /// The file (or built-in) that was refused.
    pub source: ComponentSource,
    /// Why.
    pub error: LoadError,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "component {} refused: {}", self.source, self.error)
    }
}

/// The agent's component runtime.
pub struct Runtime {
    engine: Engine,
    allocator: engine::Allocator,
    linker: Linker<HostState>,
    cache: cache::CompileCache,
    services: Arc<host_api::HostServices>,
    permits: Arc<Semaphore>,
    options: RuntimeOptions,
    /// Call, failure, latency and compile-cache counters.
    pub metrics: metrics::RuntimeMetrics,
    /// Current components.
    pub registry: registry::Registry,
    _ticker: engine::EpochTicker,
}

impl Runtime {
    /// Build the engine, linker and cache.
    pub fn new(options: RuntimeOptions) -> anyhow::Result<Arc<Self>> {
        let (engine, allocator) = engine::build(&options.engine)
            .map_err(|e| anyhow::anyhow!("building the wasm engine: {e}"))?;
        let mut linker = Linker::new(&engine);
        host_api::add_to_linker(&mut linker)
            .map_err(|e| anyhow::anyhow!("linking host interfaces: {e}"))?;
        let cache = cache::CompileCache::new(&engine, options.cache_dir.clone())?;
        let ticker = engine::EpochTicker::start(&engine, options.engine.epoch_tick);
        tracing::info!(?allocator, "wasm runtime ready");
        Ok(Arc::new(Self {
            permits: Arc::new(Semaphore::new(options.engine.max_instances as usize)),
            engine,
            allocator,
            linker,
            cache,
            services: host_api::HostServices::new(),
            options,
            metrics: metrics::RuntimeMetrics::default(),
            registry: registry::Registry::default(),
            _ticker: ticker,
        }))
    }

    /// Which instance allocator is in use.
    pub fn allocator(&self) -> engine::Allocator {
        self.allocator
    }

    /// Shared host services (process table, event router).
    pub fn services(&self) -> &Arc<host_api::HostServices> {
        &self.services
    }

    /// Load, validate, pre-link and name a component; does not install it.
    pub async fn prepare(
        &self,
        source: ComponentSource,
        bytes: Arc<[u8]>,
    ) -> Result<Arc<LoadedComponent>, Refusal> {
        let refuse = |error: LoadError| Refusal {
            source: source.clone(),
            error,
        };
        let started = Instant::now();
        let sha = cache::sha256_hex(&bytes);
        let inspection = loader::inspect_with(&bytes, !self.cache.contains(&sha))
            .map_err(|e| refuse(e.into()))?;
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let sha2 = sha.clone();
        // Compiling is CPU-bound: keep it off the async workers.
        let (component, outcome) =
            tokio::task::spawn_blocking(move || cache.load(&engine, &sha2, &bytes))
                .await
                .map_err(|e| refuse(LoadError::Compile(e.to_string())))?
                .map_err(|e| refuse(LoadError::Compile(e.to_string())))?;
        let pre = self.link(&component, &inspection).map_err(refuse)?;
        let load_time = started.elapsed();
        self.metrics.record_load(outcome == CacheOutcome::Hit);

        // Ask the component its name with no grants; the name then selects its settings.
        let probe_name = match &source {
            ComponentSource::BuiltIn(n) => n.clone(),
            ComponentSource::File(p) => p
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let probe_ctx = Arc::new(ComponentContext {
            name: probe_name,
            grants: Grants::default(),
            plugin_config: "{}".into(),
            limits: self.options.default_limits.clone(),
        });
        let mut probe = LoadedComponent {
            name: String::new(),
            world: inspection.world,
            contract_version: inspection.version.clone(),
            imports: inspection.imports.clone(),
            plugin_version: String::new(),
            sha256: sha,
            source: source.clone(),
            loaded_at: crate::util::now_nanos(),
            cache: outcome,
            load_time,
            ctx: probe_ctx,
            pre,
            warm: WarmPool::default(),
        };
        let info = self.info(&probe).await.map_err(|e| {
            refuse(match e.kind {
                CallFailure::ContractMismatch => LoadError::Link {
                    world: inspection.world,
                    version: inspection.version.clone(),
                    reason: e.detail,
                },
                _ => LoadError::Info(e),
            })
        })?;
        let valid = !info.name.is_empty()
            && info.name.len() <= 64
            && info
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !valid {
            return Err(refuse(LoadError::BadName(info.name)));
        }
        probe.ctx = Arc::new(self.context_for(&info.name, &source));
        probe.name = info.name;
        probe.plugin_version = info.version;
        Ok(Arc::new(probe))
    }

    /// Prepare a component and make it the current version of its name.
    pub async fn load(
        &self,
        source: ComponentSource,
        bytes: Arc<[u8]>,
    ) -> Result<Arc<LoadedComponent>, Refusal> {
        let component = self.prepare(source, bytes).await?;
        if let Some(old) = self.registry.install(component.clone()) {
            tracing::info!(name = %component.name, world = %component.world, old = %&old.sha256[..12], new = %&component.sha256[..12], "component replaced");
        }
        tracing::info!(
            name = %component.name, world = %component.world, source = %component.source,
            sha256 = %&component.sha256[..12], cache = ?component.cache, load_ms = component.load_time.as_secs_f64() * 1e3,
            grants = ?component.grants().summary(), "component loaded"
        );
        Ok(component)
    }

    /// Load the components embedded in the binary.
    pub async fn load_builtins(&self) -> Vec<Refusal> {
        let mut refused = Vec::new();
        for a in guest_artifacts::BUILT_IN {
            if let Err(r) = self
                .load(
                    ComponentSource::BuiltIn(a.file_name.to_string()),
                    Arc::from(a.bytes),
                )
                .await
            {
                tracing::error!("{r}");
                refused.push(r);
            }
        }
        refused
    }

    /// Load every `*.wasm` in `dir`. A file that is refused is logged with its reason; the
    /// rest load anyway.
    pub async fn load_dir(
        &self,
        dir: &Path,
    ) -> Result<(Vec<Arc<LoadedComponent>>, Vec<Refusal>), std::io::Error> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        entries.sort();
        let (mut loaded, mut refused) = (Vec::new(), Vec::new());
        for path in entries {
            let source = ComponentSource::File(path.clone());
            let bytes = match std::fs::read(&path) {
                Ok(b) => Arc::<[u8]>::from(b),
                Err(e) => {
                    let r = Refusal {
                        source,
                        error: e.into(),
                    };
                    tracing::error!("{r}");
                    refused.push(r);
                    continue;
                }
            };
            match self.load(source, bytes).await {
                Ok(c) => loaded.push(c),
                Err(r) => {
                    tracing::error!("{r}");
                    refused.push(r);
                }
            }
        }
        Ok((loaded, refused))
    }

    fn context_for(&self, name: &str, source: &ComponentSource) -> ComponentContext {
        let settings = self.options.components.get(name);
        let grants = match settings {
            Some(s) => s.grants.clone(),
            None if self.options.dev && matches!(source, ComponentSource::BuiltIn(_)) => {
                Grants::all()
            }
            None => Grants::default(),
        };
        let mut limits = self.options.default_limits.clone();
        if let Some(s) = settings {
            if let Some(m) = s.memory_bytes {
                limits.memory_bytes = m.min(self.options.engine.max_memory_bytes);
            }
            if let Some(t) = s.call_timeout {
                limits.call_timeout = t;
            }
            if let Some(n) = s.instance_reuse {
                limits.instance_reuse = n.max(1);
            }
        }
        let plugin_config = settings
            .map(|s| {
                if s.config.is_null() {
                    "{}".to_string()
                } else {
                    s.config.to_string()
                }
            })
            .unwrap_or_else(|| "{}".into());
        ComponentContext {
            name: name.to_string(),
            grants,
            plugin_config,
            limits,
        }
    }

    fn link(
        &self,
        component: &Component,
        inspection: &loader::Inspection,
    ) -> Result<WorldPre, LoadError> {
        let link_err = |e: wasmtime::Error| LoadError::Link {
            world: inspection.world,
            version: inspection.version.clone(),
            reason: format!("{e:#}"),
        };
        let pre = self.linker.instantiate_pre(component).map_err(link_err)?;
        Ok(match inspection.world {
            World::Driver => {
                WorldPre::Driver(v0_1_0::driver::DriverPre::new(pre).map_err(link_err)?)
            }
            World::Hook => WorldPre::Hook(v0_1_0::hook::HookPre::new(pre).map_err(link_err)?),
            World::DevicePlugin => {
                WorldPre::Device(v0_1_0::device::DevicePluginPre::new(pre).map_err(link_err)?)
            }
        })
    }

    /// Ask a component for its `info()`, whatever its world.
    pub async fn info(
        &self,
        comp: &LoadedComponent,
    ) -> Result<v0_1_0::info::PluginInfo, CallError> {
        match &comp.pre {
            WorldPre::Driver(_) => {
                self.call_driver(comp, None, "info", |d, s| {
                    Box::pin(d.paddock_plugin_task_driver().call_info(s))
                })
                .await
            }
            WorldPre::Hook(_) => {
                self.call_hook(comp, None, "info", |h, s| {
                    Box::pin(h.paddock_plugin_task_hook().call_info(s))
                })
                .await
            }
            WorldPre::Device(_) => {
                self.call_device(comp, "info", |d, s| {
                    Box::pin(d.paddock_plugin_device().call_info(s))
                })
                .await
            }
        }
    }

    /// Call a driver: a warm store or a fresh one and instance, then `f`, bounded by the
    /// component's limits.
    pub async fn call_driver<R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1_0::driver::Driver,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, task, op, f).await
    }

    /// Call a hook (see [`Runtime::call_driver`]).
    pub async fn call_hook<R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1_0::hook::Hook,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, task, op, f).await
    }

    /// Call a device plugin (see [`Runtime::call_driver`]).
    pub async fn call_device<R, F>(
        &self,
        comp: &LoadedComponent,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1_0::device::DevicePlugin,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, None, op, f).await
    }

    /// One call into a component of world `W`: its store (warm, or fresh and instantiated
    /// here), `f` under the call's deadline, then the outcome (see [`Call::finish`]).
    async fn call_world<W: call::WorldInstance, R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(&'a W, &'a mut Store<HostState>) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        let Some(pre) = W::pre(&comp.pre) else {
            return Err(wrong_world(comp, op));
        };
        let mut call = self.begin(comp, task, op).await?;
        let Call {
            store,
            instance,
            timeout,
            ..
        } = &mut call;
        let result = tokio::time::timeout(*timeout, async {
            if instance.is_none() {
                let inst = W::instantiate(pre, &mut *store)
                    .await
                    .map_err(|e| e.context(call::INSTANTIATING))?;
                *instance = Some(inst.into_instance());
            }
            let inst = instance
                .as_ref()
                .and_then(W::of_instance)
                .expect("a component's store holds an instance of its world");
            f(inst, store).await
        })
        .await;
        call.finish(comp, op, result)
    }

    async fn begin(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
    ) -> Result<Call, CallError> {
        let reusable = !store::needs_preopens(&comp.ctx, task.as_deref());
        let metrics = self.metrics.op(&comp.ctx.name, comp.world.as_str(), op);
        if reusable && let Some(mut call) = comp.warm.take() {
            store::arm(&mut call.store, comp.ctx.clone(), task);
            call.timeout = comp.ctx.limits.call_timeout;
            call.started = std::time::Instant::now();
            call.metrics = metrics;
            call.warm = true;
            return Ok(call);
        }
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError {
                component: comp.ctx.name.clone(),
                op,
                kind: CallFailure::Closed,
                detail: "the runtime is shutting down".into(),
            })?;
        let (store, witness) =
            store::new_store(&self.engine, comp.ctx.clone(), task, self.services.clone());
        Ok(Call {
            store,
            witness,
            timeout: comp.ctx.limits.call_timeout,
            instance: None,
            served: 0,
            reusable,
            started: std::time::Instant::now(),
            metrics,
            warm: false,
            _permit: permit,
        })
    }
}
