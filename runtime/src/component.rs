//! A loaded component: where it came from, what it is (world, contract version, its own
//! name and version, sha256), the operator's settings for its name, and its pre-linked
//! form with the warm stores of earlier calls.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::bindings::v0_1;
use crate::cache::CacheOutcome;
use crate::call::warm::WarmPool;
use crate::context::{CallLimits, ComponentContext};
use crate::grants::Grants;
use crate::inspect::World;
use crate::store::HostState;

/// Where a component came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "Kind", content = "Location")]
pub enum ComponentSource {
    /// Embedded in the agent binary.
    BuiltIn(String),
    /// A file.
    File(PathBuf),
    /// Pulled for the plugin block `name` from `reference` (the source resolved to its
    /// digest, `oci://REGISTRY/REPO@sha256:…`, or the address), verified by the embedder.
    Remote { name: String, reference: String },
}

impl std::fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ComponentSource::BuiltIn(n) => write!(f, "built-in {n}"),
            ComponentSource::File(p) => write!(f, "{}", p.display()),
            ComponentSource::Remote { reference, .. } => write!(f, "{reference}"),
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
    /// Calls in flight at once override.
    pub max_concurrent_calls: Option<u32>,
    /// The file these settings belong to: a file name in a components folder, or an
    /// absolute path. Absent (and no `sha256`): the file named `<name>.wasm`.
    pub file: Option<String>,
    /// The sha256 the component's bytes must have to get these settings.
    pub sha256: Option<String>,
    /// The remote source these settings belong to (the plugin block's `source`): only a
    /// component pulled from it gets them, never a file.
    pub source: Option<String>,
    /// The `config` block, as JSON.
    pub config: serde_json::Value,
}

/// A component ready to be called.
pub struct LoadedComponent {
    /// Name from its `info()`.
    pub name: String,
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
    /// What it imports, and so which grants it can use ([`crate::inspect::grants_used`]).
    pub imports: Vec<String>,
    /// The grants it declares it needs ([`crate::inspect::GRANTS_SECTION`]); never more
    /// than the operator's are given.
    pub declared_grants: Option<crate::grants::Grants>,
    /// Time to compile or deserialize and pre-link.
    pub load_time: Duration,
    /// Calls and failures of this version.
    pub stats: VersionStats,
    pub(crate) ctx: Arc<ComponentContext>,
    pub(crate) pre: WorldPre,
    pub(crate) warm: WarmPool,
    /// Turns for calls in flight (`max_concurrent_calls`).
    pub(crate) turns: Arc<tokio::sync::Semaphore>,
}

/// What one version's calls did: what hot swap's auto-revert watches and the components
/// view shows.
#[derive(Debug, Default)]
pub struct VersionStats {
    calls: AtomicU64,
    failures: AtomicU64,
    peak_memory: AtomicU64,
    first_call_at: AtomicU64,
    changed: tokio::sync::Notify,
}

impl VersionStats {
    /// Calls made (ended).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Calls that trapped, ran out of memory or missed their deadline.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The most linear memory one instance of this version has held, bytes.
    pub fn peak_memory_bytes(&self) -> u64 {
        self.peak_memory.load(Ordering::Relaxed)
    }

    pub(crate) fn record_memory(&self, bytes: usize) {
        self.peak_memory.fetch_max(bytes as u64, Ordering::Relaxed);
    }

    /// When the first call ended, ns since the Unix epoch (0: none yet).
    pub fn first_call_at(&self) -> u64 {
        self.first_call_at.load(Ordering::Relaxed)
    }

    /// Wait until another call ends.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    pub(crate) fn record(&self, failed: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.first_call_at.compare_exchange(
            0,
            crate::now_nanos(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        self.changed.notify_waiters();
    }
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

    /// This version no longer serves new calls (another replaced it): its idle warm
    /// stores are dropped now, so their memory and pool slots are returned; calls in
    /// flight finish and do not keep theirs.
    pub fn retire(&self) {
        self.warm.clear();
    }

    /// Whether [`LoadedComponent::retire`] was called.
    pub fn retired(&self) -> bool {
        self.warm.closed()
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

/// A driver pre-linked: the `driver` world, and `task-exec` when it exports it (the
/// `exec-driver` world, since 0.1.3).
#[derive(Clone)]
pub(crate) struct DriverLinked {
    pub(crate) pre: v0_1::driver::DriverPre<HostState>,
    pub(crate) exec: Option<v0_1::exec::exports::paddock::plugin::task_exec::GuestIndices>,
}

/// A component pre-linked as the world it exports, in the bindings of its contract version.
#[derive(Clone)]
pub(crate) enum WorldPre {
    Driver(DriverLinked),
    Hook(v0_1::hook::HookPre<HostState>),
    Device(v0_1::device::DevicePluginPre<HostState>),
    Check(v0_1::check::CheckPre<HostState>),
    Secret(v0_1::secret::SecretProviderPre<HostState>),
}
