//! The load pipeline: bytes → [`inspect`](crate::inspect) (wasm? a component? which world
//! and contract version?) → the compile cache (compile or deserialize, on a blocking
//! thread) → `InstancePre` (imports linked, exports checked once) → `info()` names it →
//! the operator's settings for that name give grants, limits and config. Each step's
//! failure is a [`LoadError`] naming the step; [`Runtime::prepare`] installs nothing, so a
//! refused component never replaces the version it was meant to succeed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Component;

use crate::Runtime;
use crate::bindings::v0_1;
use crate::cache::{self, CacheOutcome};
use crate::call::warm::WarmPool;
use crate::call::{CallError, CallFailure};
use crate::component::{ComponentSource, LoadedComponent, WorldPre};
use crate::context::ComponentContext;
use crate::grants::Grants;
use crate::inspect::{self, InspectError, Inspection, World};

/// Why a component was refused at load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading the file failed.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not a component Paddock can host.
    #[error(transparent)]
    Inspect(#[from] InspectError),
    /// Compilation failed.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// Imports or exports do not match the world.
    #[error("does not match the {world} world of paddock:plugin@{version}: {reason}")]
    Link {
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
    /// It reported the name of a component the operator configured or built in, and it is
    /// not the file those settings are bound to: grants follow the file, never the name a
    /// component gives itself.
    #[error(
        "it reports the name {name:?}, whose settings and grants belong to {bound}: rename the file to {name}.wasm or bind it with plugin {name:?} {{ file = \"...\" }} or {{ sha256 = \"...\" }}"
    )]
    Unbound {
        /// The name it reported.
        name: String,
        /// What the name is bound to.
        bound: String,
    },
}

/// A component and the reason it was refused.
#[derive(Debug)]
pub struct Refusal {
    /// The file (or built-in) that was refused.
    pub source: ComponentSource,
    pub error: LoadError,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "component {} refused: {}", self.source, self.error)
    }
}

impl std::error::Error for Refusal {}

/// Whether `name` is a valid component name: `[a-z0-9_-]`, 1 to 64 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

impl Runtime {
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
        let inspection = inspect::inspect_with(&bytes, !self.cache.contains(&sha))
            .map_err(|e| refuse(e.into()))?;
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let sha2 = sha.clone();
        let compiles = !self.cache.contains(&sha);
        if compiles {
            tracing::info!(source = %source, bytes = bytes.len(), sha256 = %&sha[..12], "compiling component (not in the compile cache)");
        }
        // Compiling is CPU-bound: keep it off the async workers.
        let (component, outcome) =
            tokio::task::spawn_blocking(move || cache.load(&engine, &sha2, &bytes))
                .await
                .map_err(|e| refuse(LoadError::Compile(e.to_string())))?
                .map_err(|e| refuse(LoadError::Compile(e.to_string())))?;
        if compiles {
            tracing::info!(source = %source, sha256 = %&sha[..12], seconds = format!("{:.1}", started.elapsed().as_secs_f64()), "component compiled in {:.1} s", started.elapsed().as_secs_f64());
        }
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
            ComponentSource::Remote { name, .. } => name.clone(),
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
            declared_grants: inspection.declared_grants.clone(),
            plugin_version: String::new(),
            sha256: sha,
            source: source.clone(),
            loaded_at: crate::now_nanos(),
            cache: outcome,
            load_time,
            ctx: probe_ctx,
            pre,
            warm: WarmPool::default(),
            stats: Default::default(),
            turns: Arc::new(tokio::sync::Semaphore::new(1)),
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
        if !valid_name(&info.name) {
            return Err(refuse(LoadError::BadName(info.name)));
        }
        if let ComponentSource::File(path) = &source
            && let Err(bound) = self.bound(&info.name, inspection.world, path, &probe.sha256)
        {
            return Err(refuse(LoadError::Unbound {
                name: info.name,
                bound,
            }));
        }
        probe.ctx = Arc::new(self.context_for(&info.name, &source));
        probe.turns = Arc::new(tokio::sync::Semaphore::new(
            probe.ctx.limits.max_concurrent_calls.max(1) as usize,
        ));
        // A warm store keeps the folders it was built with (WASI preopens, which the guest
        // reads once when instantiated) and its socket check: the probe's, without grants,
        // cannot serve a component granted `read_paths` or `network`.
        if !probe.ctx.grants.read_paths.is_empty() || probe.ctx.grants.network.is_some() {
            probe.warm = WarmPool::default();
        }
        // The probe is not a call of the version's life: its stats start now.
        probe.stats = Default::default();
        probe.name = info.name;
        probe.plugin_version = crate::bounds::text(info.version, crate::bounds::VERSION);
        Ok(Arc::new(probe))
    }

    /// The loaded version `c` with the settings now configured for its name (grants,
    /// config, limits): the same compiled and linked code, so no bytes are read again — a
    /// newer file on disk (refused, say) does not stand in for the version that runs. Its
    /// stats and warm stores start afresh; it is installed like any new version.
    pub fn reconfigured(&self, c: &LoadedComponent) -> Arc<LoadedComponent> {
        let ctx = Arc::new(self.context_for(&c.name, &c.source));
        let turns = Arc::new(tokio::sync::Semaphore::new(
            ctx.limits.max_concurrent_calls.max(1) as usize,
        ));
        Arc::new(LoadedComponent {
            name: c.name.clone(),
            world: c.world,
            contract_version: c.contract_version.clone(),
            imports: c.imports.clone(),
            declared_grants: c.declared_grants.clone(),
            plugin_version: c.plugin_version.clone(),
            sha256: c.sha256.clone(),
            source: c.source.clone(),
            loaded_at: crate::now_nanos(),
            cache: c.cache,
            load_time: Duration::ZERO,
            ctx,
            pre: c.pre.clone(),
            warm: WarmPool::default(),
            stats: Default::default(),
            turns,
        })
    }

    /// Prepare a component and make it the current version of its name.
    pub async fn load(
        &self,
        source: ComponentSource,
        bytes: Arc<[u8]>,
    ) -> Result<Arc<LoadedComponent>, Refusal> {
        let component = self.prepare(source, bytes).await?;
        if let Some(old) = self.registry.install(component.clone()) {
            // Loading (as at start) keeps no previous version to revert to.
            self.registry
                .forget_previous(component.world, &component.name);
            tracing::info!(name = %component.name, world = %component.world, old = %&old.sha256[..12], new = %&component.sha256[..12], "component replaced");
        }
        tracing::info!(
            name = %component.name, world = %component.world, source = %component.source,
            sha256 = %&component.sha256[..12], cache = ?component.cache, load_ms = component.load_time.as_secs_f64() * 1e3,
            grants = ?component.grants().summary(), "component loaded"
        );
        Ok(component)
    }

    /// Load every `*.wasm` in `dir`, in name order. A file that is refused is logged with
    /// its reason; the rest load anyway.
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
            let result = match std::fs::read(&path) {
                Ok(b) => self.load(source, Arc::from(b)).await,
                Err(e) => Err(Refusal {
                    source,
                    error: e.into(),
                }),
            };
            match result {
                Ok(c) => loaded.push(c),
                Err(r) => {
                    tracing::error!("{r}");
                    refused.push(r);
                }
            }
        }
        Ok((loaded, refused))
    }

    /// Whether the file `path` (bytes `sha`) may be the component `name`: a name with
    /// settings, or one served now by a built-in or another file, goes only to the file the
    /// settings bind (their `file` or `sha256`; without either, `<name>.wasm`, `-` also
    /// spelled `_` as cargo names a crate's file). Else, what it is bound to.
    fn bound(&self, name: &str, world: World, path: &Path, sha: &str) -> Result<(), String> {
        let settings = self.settings(name);
        // Served now by a built-in or another file: taking the name would take its tasks.
        let current = self.registry.get(world, name);
        let built_in = current
            .as_ref()
            .is_some_and(|c| matches!(c.source, ComponentSource::BuiltIn(_)));
        let served_by_other = current
            .as_ref()
            .is_some_and(|c| c.source != ComponentSource::File(path.to_path_buf()));
        if settings.is_none() && !served_by_other {
            return Ok(());
        }
        let file_name = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(source) = settings.as_ref().and_then(|s| s.source.clone()) {
            return Err(format!(
                "what {source} brings (plugin {name:?} names a source)"
            ));
        }
        let (file, pin) = settings.map(|s| (s.file, s.sha256)).unwrap_or_default();
        let file_ok = match &file {
            Some(f) if f.contains('/') => {
                let want = std::fs::canonicalize(f).unwrap_or_else(|_| PathBuf::from(f));
                std::fs::canonicalize(path).is_ok_and(|p| p == want)
            }
            Some(f) => *f == file_name,
            // `my-driver` is built by cargo as `my_driver.wasm`: either spelling is its own.
            None => {
                pin.is_some()
                    || file_name == format!("{name}.wasm")
                    || file_name == format!("{}.wasm", name.replace('-', "_"))
            }
        };
        let sha_ok = pin.as_ref().is_none_or(|p| p.eq_ignore_ascii_case(sha));
        if file_ok && sha_ok {
            return Ok(());
        }
        Err(match (&file, &pin) {
            (Some(f), Some(p)) => format!("the file {f:?} with sha256 {p}"),
            (Some(f), None) => format!("the file {f:?}"),
            (None, Some(p)) => format!("the file with sha256 {p}"),
            (None, None) if built_in => format!("the built-in component, or {name}.wasm"),
            (None, None) => format!("{name}.wasm"),
        })
    }

    /// The context a component named `name` runs with: the operator's grants (every grant
    /// for a built-in in dev mode without settings), limits within the engine's and config.
    fn context_for(&self, name: &str, source: &ComponentSource) -> ComponentContext {
        let settings = self.settings(name);
        let settings = settings.as_ref();
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
            if let Some(n) = s.max_concurrent_calls {
                limits.max_concurrent_calls = n.max(1);
            }
        }
        let plugin_config = settings
            .filter(|s| !s.config.is_null())
            .map(|s| s.config.to_string())
            .unwrap_or_else(|| "{}".into());
        ComponentContext {
            name: name.to_string(),
            grants,
            plugin_config,
            limits,
        }
    }

    fn link(&self, component: &Component, inspection: &Inspection) -> Result<WorldPre, LoadError> {
        let link_err = |e: wasmtime::Error| LoadError::Link {
            world: inspection.world,
            version: inspection.version.clone(),
            reason: format!("{e:#}"),
        };
        let pre = self.linker.instantiate_pre(component).map_err(link_err)?;
        Ok(match inspection.world {
            World::Driver => {
                // `task-exec` is optional: looked up only when the component exports it,
                // and then it must link like the rest.
                let exec = exports_exec(component)
                    .then(|| {
                        v0_1::exec::exports::paddock::plugin::task_exec::GuestIndices::new(&pre)
                    })
                    .transpose()
                    .map_err(link_err)?;
                WorldPre::Driver(crate::component::DriverLinked {
                    pre: v0_1::driver::DriverPre::new(pre).map_err(link_err)?,
                    exec,
                })
            }
            World::Hook => WorldPre::Hook(v0_1::hook::HookPre::new(pre).map_err(link_err)?),
            World::DevicePlugin => {
                WorldPre::Device(v0_1::device::DevicePluginPre::new(pre).map_err(link_err)?)
            }
            World::Check => WorldPre::Check(v0_1::check::CheckPre::new(pre).map_err(link_err)?),
            World::SecretProvider => {
                WorldPre::Secret(v0_1::secret::SecretProviderPre::new(pre).map_err(link_err)?)
            }
        })
    }
}

/// Whether `component` exports the `task-exec` interface (the `exec-driver` world).
fn exports_exec(component: &Component) -> bool {
    component
        .component_type()
        .exports(component.engine())
        .any(|(name, _)| name.starts_with("paddock:plugin/task-exec@"))
}
