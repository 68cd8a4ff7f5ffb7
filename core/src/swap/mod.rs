//! Hot swap: component files come and go while the agent runs, and each change goes
//! through the whole loader before anything is replaced (make before break).
//!
//! - A new or changed `.wasm` file in a watched folder ([`watch`]) is prepared off every
//!   call path (inspect, compile through the cache, link, `info()`, the operator's
//!   settings for its name). Only when all of that succeeded does the registry's pointer
//!   move: calls already running finish on the old version, calls that start after use the
//!   new one, and the old version's warm stores are dropped.
//! - A refused file (not a component, a world or contract the agent does not know, a
//!   compile error, a trap in `info()`, a name another file's component already has)
//!   changes nothing: a node event and a log line name the file and the reason.
//! - A driver's running tasks are offered to the new version (`recover`); those it
//!   refuses stay on the old one, which stays loaded (`draining`) until its last task ends
//!   (see [`crate::drivermanager::Bindings`]).
//! - A new version is watched for its first calls and rolled back if too many fail
//!   ([`revert`]).
//! - A deleted file unloads its component (a built-in of the same name takes over again).
//!
//! Every change is a `Component` event on the event stream and is counted in the metrics.
//! Each component's recent history (swaps, refusals, reverts, removals) is kept in memory
//! for `/v1/components` and the UI.
//! Files: this one (applying a file), `watch.rs` (folder events, debounced), `revert.rs`
//! (auto-revert), `view.rs` (what `/v1/components` shows), `history.rs` (what happened to
//! each component), `reload.rs` (config reload).

mod history;
mod reload;
mod remote;
mod revert;
mod view;
pub mod watch;

pub use history::{Kind as SwapEventKind, SwapEvent};
pub use remote::{PendingView, RemoteState};
pub use view::{ComponentHistory, ComponentState, ComponentStatus, PreviousVersion};

use history::{History, Kind, Subject};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use serde_json::json;

use crate::changes::Changes;
use crate::config::AutoRevert;
use crate::devicemanager::DeviceManager;
use crate::drivermanager::DriverManager;
use crate::hookmanager::HookManager;
use crate::node::NodeEvents;
use crate::runtime::{ComponentSource, LoadedComponent, Refusal, Runtime, World};

/// What became of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// Its component is loaded.
    Loaded {
        /// The component's world.
        world: World,
        /// The component's name.
        name: String,
    },
    /// It was refused, for this reason.
    Refused(String),
}

/// A watched file as last applied.
#[derive(Debug, Clone)]
struct FileRecord {
    sha256: String,
    state: FileState,
}

/// What applying a file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Same bytes as the version loaded from it: nothing to do.
    Unchanged,
    /// A component new to the agent.
    Loaded(String),
    /// A new version of a loaded component; tasks moved and tasks left on the old one.
    Replaced {
        name: String,
        moved: usize,
        pinned: usize,
    },
    /// Refused; the running version (if any) stays.
    Refused(String),
    /// Pulled and verified, but held for `agent component approve` (the plugin block's
    /// name): it declares more grants than the running version.
    Pending(String),
    /// The file is gone: its component was unloaded (or a built-in took over again).
    Removed(Option<String>),
}

/// Hot-swap counters (rendered by the metrics endpoint).
#[derive(Default)]
pub struct SwapMetrics {
    /// Versions installed over a running one.
    pub swaps: AtomicU64,
    /// Files refused.
    pub refusals: AtomicU64,
    /// Versions rolled back.
    pub reverts: AtomicU64,
    /// Seconds from a file's event to the first call on the version it made, as a latency
    /// histogram.
    pub first_call: Arc<crate::runtime::metrics::OpMetrics>,
}

/// The component lifecycle: loads, swaps, refuses, reverts and unloads components as their
/// files change, and says what it did.
pub struct Swapper {
    runtime: Arc<Runtime>,
    drivers: Arc<DriverManager>,
    devices: Arc<DeviceManager>,
    hooks: Arc<HookManager>,
    node_events: Arc<NodeEvents>,
    changes: Arc<Changes>,
    /// Watched folders.
    dirs: Vec<PathBuf>,
    /// One change at a time, in the order they are seen.
    lock: tokio::sync::Mutex<()>,
    files: Mutex<BTreeMap<PathBuf, FileRecord>>,
    /// Built-in components by name, to take over when their file is deleted.
    builtins: BTreeMap<(World, String), &'static guest_artifacts::Artifact>,
    /// Refusals of built-ins at start.
    builtin_refusals: Vec<String>,
    auto_revert: RwLock<BTreeMap<String, AutoRevert>>,
    /// The version each component's current version replaced.
    previous: Mutex<BTreeMap<(World, String), PreviousVersion>>,
    /// What happened to each component and refused file, newest first.
    history: History,
    /// Plugin blocks' remote sources, what their pulls brought, versions held for approval.
    remotes: remote::Remotes,
    /// Hot-swap counters.
    pub metrics: SwapMetrics,
}

/// What the swapper is given.
pub struct SwapperParts {
    pub runtime: Arc<Runtime>,
    pub drivers: Arc<DriverManager>,
    pub devices: Arc<DeviceManager>,
    pub hooks: Arc<HookManager>,
    pub node_events: Arc<NodeEvents>,
    pub changes: Arc<Changes>,
    pub dirs: Vec<PathBuf>,
    pub auto_revert: BTreeMap<String, AutoRevert>,
    /// Where pulled components are kept (`None`: sources are refused).
    pub pull_cache: Option<PathBuf>,
    /// The plugin blocks that name a source.
    pub remotes: BTreeMap<String, crate::remote::RemoteSpec>,
}

impl Swapper {
    /// Load the built-in components, then every `*.wasm` file of `dirs` in name order (a
    /// refused one is logged and recorded; the rest load anyway).
    pub async fn start(parts: SwapperParts) -> std::io::Result<Arc<Self>> {
        let mut builtins = BTreeMap::new();
        let mut builtin_refusals = Vec::new();
        for a in guest_artifacts::BUILT_IN {
            let source = ComponentSource::BuiltIn(a.file_name.to_string());
            match parts.runtime.load(source, Arc::from(a.bytes)).await {
                Ok(c) => {
                    builtins.insert((c.world, c.name.clone()), a);
                }
                Err(r) => {
                    tracing::error!("{r}");
                    builtin_refusals.push(r.to_string());
                }
            }
        }
        let cache = match &parts.pull_cache {
            Some(dir) => Some(crate::remote::cache::Cache::open(dir)?),
            None => None,
        };
        let s = Arc::new(Self {
            remotes: remote::Remotes::new(cache, parts.remotes),
            runtime: parts.runtime,
            drivers: parts.drivers,
            devices: parts.devices,
            hooks: parts.hooks,
            node_events: parts.node_events,
            changes: parts.changes,
            dirs: parts.dirs,
            lock: tokio::sync::Mutex::new(()),
            files: Mutex::new(BTreeMap::new()),
            builtins,
            builtin_refusals,
            auto_revert: RwLock::new(parts.auto_revert),
            previous: Mutex::new(BTreeMap::new()),
            history: History::default(),
            metrics: SwapMetrics::default(),
        });
        for dir in s.dirs.clone() {
            for path in wasm_files(&dir)? {
                let bytes = match std::fs::read(&path) {
                    Ok(b) => b,
                    Err(e) => {
                        s.refused(&path, String::new(), &format!("cannot read: {e}"));
                        continue;
                    }
                };
                let sha = crate::runtime::cache::sha256_hex(&bytes);
                let source = ComponentSource::File(path.clone());
                match s.runtime.load(source, Arc::from(bytes)).await {
                    Ok(c) => {
                        s.warn_if_replacing_built_in(&c);
                        s.remember(Kind::Loaded, &c, None, "loaded at start");
                        s.record(
                            &path,
                            sha,
                            FileState::Loaded {
                                world: c.world,
                                name: c.name.clone(),
                            },
                        )
                    }
                    Err(r) => {
                        tracing::error!("{r}");
                        let reason = r.error.to_string();
                        s.remember_refusal(&path, &sha, &reason);
                        s.record(&path, sha, FileState::Refused(reason));
                    }
                }
            }
        }
        s.pull_all("pulled at start").await;
        s.start_pollers();
        Ok(s)
    }

    /// The watched folders.
    /// Whether `c`, from a file, took the name of a built-in component.
    pub fn replaces_built_in(&self, c: &LoadedComponent) -> bool {
        matches!(c.source, ComponentSource::File(_))
            && self.builtins.contains_key(&(c.world, c.name.clone()))
    }

    /// A component from a file that takes a built-in's name is said loudly: it is easy to
    /// do by accident (a third party's driver called `mock`).
    fn warn_if_replacing_built_in(&self, c: &LoadedComponent) {
        if self.replaces_built_in(c) {
            tracing::warn!(
                name = %c.name,
                world = %c.world,
                source = %c.source,
                "component from a file replaces the built-in {} {:?}; delete the file to have the built-in serve again",
                c.world,
                c.name
            );
        }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Every refusal: built-ins at start, and files as they stand now.
    pub fn refusals(&self) -> Vec<String> {
        let mut out = self.builtin_refusals.clone();
        for (path, r) in self.files.lock().unwrap().iter() {
            if let FileState::Refused(reason) = &r.state {
                out.push(format!("component {} refused: {reason}", path.display()));
            }
        }
        for (name, r) in self.remotes.state.lock().unwrap().iter() {
            if !r.refused.is_empty() {
                let what = if r.refused_reference.is_empty() {
                    &r.source
                } else {
                    &r.refused_reference
                };
                out.push(format!(
                    "component {name} from {what} refused: {}",
                    r.refused
                ));
            }
        }
        out
    }

    /// Look at every watched folder now: apply new and changed files, unload deleted ones
    /// (`POST /v1/components/reload`, and where file events are not delivered).
    pub async fn rescan(self: &Arc<Self>) -> Vec<(PathBuf, Applied)> {
        let mut out = Vec::new();
        let mut present = Vec::new();
        for dir in &self.dirs {
            match wasm_files(dir) {
                Ok(files) => present.extend(files),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "reading a components folder failed")
                }
            }
        }
        for path in &present {
            let a = self.apply_file(path, Instant::now()).await;
            if a != Applied::Unchanged {
                out.push((path.clone(), a));
            }
        }
        let gone: Vec<PathBuf> = self
            .files
            .lock()
            .unwrap()
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in gone {
            let a = self.apply_file(&path, Instant::now()).await;
            out.push((path, a));
        }
        out
    }

    /// Apply what `path` holds now (seen changed at `seen`): load, replace, refuse, or, if
    /// it is gone, unload.
    pub async fn apply_file(self: &Arc<Self>, path: &Path, seen: Instant) -> Applied {
        let _one_at_a_time = self.lock.lock().await;
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return self.remove(path).await,
            Err(e) => {
                return self.refused(path, String::new(), &format!("cannot read: {e}"));
            }
        };
        let sha = crate::runtime::cache::sha256_hex(&bytes);
        if self
            .files
            .lock()
            .unwrap()
            .get(path)
            .is_some_and(|r| r.sha256 == sha)
        {
            return Applied::Unchanged;
        }
        let source = ComponentSource::File(path.to_path_buf());
        let new = match self.runtime.prepare(source, Arc::from(bytes)).await {
            Ok(c) => c,
            Err(Refusal { error, .. }) => return self.refused(path, sha, &error.to_string()),
        };
        // Another file's component of the same name keeps it.
        if let Some(cur) = self.runtime.registry.get(new.world, &new.name)
            && let ComponentSource::File(other) = &cur.source
            && other != path
            && other.exists()
        {
            return self.refused(
                path,
                sha,
                &format!(
                    "its component name {:?} is already served by {}",
                    new.name,
                    other.display()
                ),
            );
        }
        self.record(
            path,
            sha,
            FileState::Loaded {
                world: new.world,
                name: new.name.clone(),
            },
        );
        self.install(new, seen, "file changed").await
    }

    /// Make `new` the current version of its name: hand a driver's tasks over, tell what
    /// happened, and watch the new version if it replaced one.
    async fn install(
        self: &Arc<Self>,
        new: Arc<LoadedComponent>,
        seen: Instant,
        why: &str,
    ) -> Applied {
        let old = self.runtime.registry.install(new.clone());
        // Told with the version before the handoff: whoever sees the new version serving
        // (the versions list) also sees what it replaced.
        let key = (new.world, new.name.clone());
        match &old {
            None => self.previous.lock().unwrap().remove(&key),
            Some(old) => self
                .previous
                .lock()
                .unwrap()
                .insert(key, PreviousVersion::of(old)),
        };
        if let ComponentSource::File(p) = &new.source {
            self.history.adopt(p, new.world, &new.name);
        }
        let handoff = if new.world == World::Driver {
            self.drivers.bindings().handoff(&new).await
        } else {
            Default::default()
        };
        match new.world {
            World::Driver => self.drivers.fingerprint_all().await,
            World::DevicePlugin => self.devices.fingerprint_all().await,
            World::Hook | World::Check | World::SecretProvider => {}
        }
        self.time_first_call(new.clone(), seen);
        self.warn_if_replacing_built_in(&new);
        match old {
            None => {
                tracing::info!(name = %new.name, world = %new.world, source = %new.source, sha256 = %&new.sha256[..12], "component loaded");
                self.tell(Kind::Loaded, &new, None, why);
                Applied::Loaded(new.name.clone())
            }
            Some(old) => {
                self.metrics.swaps.fetch_add(1, Ordering::Relaxed);
                tracing::info!(name = %new.name, world = %new.world, source = %new.source, old = %&old.sha256[..12], new = %&new.sha256[..12], moved = handoff.moved.len(), pinned = handoff.pinned.len(), "component replaced");
                self.tell(Kind::Swapped, &new, Some(&old), why);
                if !handoff.pinned.is_empty() {
                    self.watch_draining(old.clone());
                }
                self.watch_new_version(new.clone());
                Applied::Replaced {
                    name: new.name.clone(),
                    moved: handoff.moved.len(),
                    pinned: handoff.pinned.len(),
                }
            }
        }
    }

    /// `path` is gone: unload its component, or let the built-in of its name take over
    /// again. A driver's running tasks stay on their versions until they end.
    async fn remove(self: &Arc<Self>, path: &Path) -> Applied {
        self.files.lock().unwrap().remove(path);
        self.history.forget_file(path);
        let Some(cur) = self.runtime.registry.by_file(path) else {
            return Applied::Removed(None);
        };
        self.unload(&cur, "file deleted").await
    }

    /// Unload `cur` (its file deleted, its source removed), or let the built-in of its name
    /// take over again. A driver's running tasks stay on their versions until they end.
    async fn unload(self: &Arc<Self>, cur: &Arc<LoadedComponent>, why: &str) -> Applied {
        let key = (cur.world, cur.name.clone());
        if let Some(a) = self.builtins.get(&key) {
            let source = ComponentSource::BuiltIn(a.file_name.to_string());
            match self.runtime.prepare(source, Arc::from(a.bytes)).await {
                Ok(b) => {
                    self.remember(Kind::Removed, cur, None, why);
                    self.install(
                        b,
                        Instant::now(),
                        &format!("{why}: the built-in version serves again"),
                    )
                    .await;
                    return Applied::Removed(Some(cur.name.clone()));
                }
                Err(r) => tracing::error!("{r}"),
            }
        }
        self.runtime.registry.remove(cur.world, &cur.name);
        self.previous.lock().unwrap().remove(&key);
        if cur.world == World::DevicePlugin {
            self.devices.fingerprint_all().await;
        }
        let tasks = self.drivers.bindings().versions_in_use(&cur.name);
        tracing::info!(name = %cur.name, world = %cur.world, source = %cur.source, running_tasks = tasks.values().sum::<usize>(), "component unloaded: {why}");
        self.tell(Kind::Removed, cur, None, why);
        Applied::Removed(Some(cur.name.clone()))
    }

    fn record(&self, path: &Path, sha256: String, state: FileState) {
        self.files
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), FileRecord { sha256, state });
    }

    /// Record and tell a refusal; nothing else changes.
    fn refused(&self, path: &Path, sha256: String, reason: &str) -> Applied {
        self.metrics.refusals.fetch_add(1, Ordering::Relaxed);
        self.remember_refusal(path, &sha256, reason);
        self.record(path, sha256, FileState::Refused(reason.to_string()));
        tracing::error!(file = %path.display(), reason, "component refused; the running version (if any) stays");
        let details = BTreeMap::from([("file".to_string(), path.display().to_string())]);
        self.node_events.push(
            "Component",
            format!("Component {} refused: {reason}", path.display()),
            details,
        );
        let payload = json!({ "File": path, "Reason": reason });
        self.publish(
            "ComponentRefused",
            path.display().to_string(),
            Vec::new(),
            payload,
        );
        Applied::Refused(reason.to_string())
    }

    /// Add what happened to `c` (with the other version, `old`) to its history.
    fn remember(&self, kind: Kind, c: &LoadedComponent, old: Option<&LoadedComponent>, why: &str) {
        let e = SwapEvent {
            time: crate::util::now_nanos(),
            kind,
            sha256: c.sha256.clone(),
            previous_sha256: old.map(|o| o.sha256.clone()).unwrap_or_default(),
            reason: why.to_string(),
            source: c.source.to_string(),
        };
        self.history
            .record(Subject::Component(c.world, c.name.clone()), e);
    }

    /// Add a refusal of `path` to its history, and to that of the component the file
    /// serves, which keeps serving.
    fn remember_refusal(&self, path: &Path, sha256: &str, reason: &str) {
        let e = SwapEvent {
            time: crate::util::now_nanos(),
            kind: Kind::Refused,
            sha256: sha256.to_string(),
            previous_sha256: String::new(),
            reason: reason.to_string(),
            source: path.display().to_string(),
        };
        if let Some(cur) = self.runtime.registry.by_file(path) {
            self.history
                .record(Subject::Component(cur.world, cur.name.clone()), e.clone());
        }
        self.history.record(Subject::File(path.to_path_buf()), e);
    }

    /// Remember, and tell with a node event, a change and a `Component` event, what
    /// happened to `c`.
    fn tell(&self, kind: Kind, c: &LoadedComponent, old: Option<&LoadedComponent>, why: &str) {
        self.remember(kind, c, old, why);
        let (event_type, verb) = (kind.event_type(), kind.verb());
        let mut details = BTreeMap::from([
            ("component".to_string(), c.name.clone()),
            ("sha256".to_string(), c.sha256.clone()),
            ("source".to_string(), c.source.to_string()),
        ]);
        if let Some(o) = old {
            details.insert("previous_sha256".into(), o.sha256.clone());
        }
        self.node_events.push(
            "Component",
            format!("Component {} {verb}: {why}", c.name),
            details,
        );
        let payload = json!({
            "Name": c.name, "World": c.world.as_str(), "SHA256": c.sha256,
            "PreviousSHA256": old.map(|o| o.sha256.clone()).unwrap_or_default(),
            "Source": c.source.to_string(), "Reason": why,
        });
        self.publish(
            event_type,
            c.name.clone(),
            vec![c.world.as_str().to_string()],
            payload,
        );
    }

    /// A `Component` event on the event stream (and a change of the index).
    fn publish(
        &self,
        event_type: &'static str,
        key: String,
        filter_keys: Vec<String>,
        payload: serde_json::Value,
    ) {
        let index = self.changes.bump();
        self.changes.events.publish(|| crate::events::Event {
            topic: "Component",
            event_type,
            key,
            namespace: String::new(),
            filter_keys,
            index,
            payload: crate::events::Payload::Component(Box::new(payload)),
            line: Default::default(),
        });
    }

    /// Record how long after `seen` the version served its first call.
    fn time_first_call(&self, new: Arc<LoadedComponent>, seen: Instant) {
        let samples = Arc::downgrade(&self.metrics.first_call);
        let seen_wall = crate::util::now_nanos().saturating_sub(seen.elapsed().as_nanos() as u64);
        let weak = Arc::downgrade(&new);
        drop(new);
        tokio::spawn(async move {
            loop {
                let Some(v) = weak.upgrade() else { return };
                let first = v.stats.first_call_at();
                if first > 0 {
                    if let Some(m) = samples.upgrade() {
                        let secs = first.saturating_sub(seen_wall);
                        m.record(std::time::Duration::from_nanos(secs), false, None);
                    }
                    return;
                }
                let changed = v.stats.changed();
                let _ = tokio::time::timeout(std::time::Duration::from_millis(200), changed).await;
            }
        });
    }
}

/// The `*.wasm` files of `dir`, in name order.
pub fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    out.sort();
    Ok(out)
}
