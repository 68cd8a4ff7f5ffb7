//! What `/v1/components` shows of each component version: the current ones (`active`),
//! driver versions kept for the tasks a newer version refused (`draining`), and files that
//! were refused (`refused`, with the reason), each with its identity, where it came from,
//! its grants and limits, its calls and failures, and the tasks it serves; for the current
//! version also the version it replaced and what happened to the component lately (and,
//! apart, the history of components no longer loaded).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::history::{Subject, SwapEvent};
use super::{FileState, Swapper};
use crate::runtime::inspect::grants_used;
use crate::runtime::{LoadedComponent, World};

/// Where a version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentState {
    /// The current version: it serves every new call.
    Active,
    /// A driver version a newer one replaced, kept for the tasks that stay on it.
    Draining,
    /// A file, or a pull, that was refused.
    Refused,
    /// A pulled version held for `agent component approve`.
    #[serde(rename = "pending-approval")]
    PendingApproval,
}

/// The version a component's current version replaced.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct PreviousVersion {
    /// sha256 of its bytes.
    #[serde(rename = "SHA256")]
    pub sha256: String,
    /// The plugin's own version.
    pub plugin_version: String,
    /// When it was loaded, ns.
    pub loaded_at: u64,
    /// Where it came from.
    pub source: String,
    /// A driver version that still runs tasks the new version refused.
    pub draining: bool,
    /// Still held to be made current again if the new version fails its first calls
    /// (auto-revert); once let go, only its identity is remembered.
    pub kept_for_revert: bool,
}

impl PreviousVersion {
    pub(super) fn of(c: &LoadedComponent) -> Self {
        Self {
            sha256: c.sha256.clone(),
            plugin_version: c.plugin_version.clone(),
            loaded_at: c.loaded_at,
            source: c.source.to_string(),
            draining: false,
            kept_for_revert: false,
        }
    }
}

/// The history of a component that is no longer loaded.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ComponentHistory {
    pub name: String,
    pub world: String,
    /// Newest first.
    pub history: Vec<SwapEvent>,
}

/// One component version as the API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ComponentStatus {
    /// Name from its `info()` (empty for a refused file).
    pub name: String,
    /// Its state.
    pub state: ComponentState,
    /// Why a refused file was refused.
    pub reason: String,
    /// World: driver, hook or device-plugin.
    pub world: String,
    /// Contract version it was built against.
    pub contract_version: String,
    /// The plugin's own version.
    pub plugin_version: String,
    /// sha256 of its bytes.
    #[serde(rename = "SHA256")]
    pub sha256: String,
    /// The version this one replaced (empty when none, or once it was let go).
    #[serde(rename = "PreviousSHA256")]
    pub previous_sha256: String,
    /// Where it came from: `built-in <file>` or the file's path.
    pub source: String,
    /// A component from a file that took the name of a built-in one (which serves again
    /// when the file is deleted).
    pub replaces_built_in: bool,
    /// The file, for a component loaded from one.
    pub file: Option<PathBuf>,
    /// When it was loaded, ns.
    pub loaded_at: u64,
    /// `Hit` or `Miss`.
    pub compile_cache: Option<crate::runtime::CacheOutcome>,
    /// Time to compile or deserialize and pre-link, ms.
    pub load_millis: f64,
    /// Calls this version served, and those that failed (trap, memory, deadline).
    pub calls: u64,
    pub errors: u64,
    /// Running tasks bound to this version (drivers).
    pub tasks: Vec<String>,
    /// Granted capabilities.
    pub grants: Vec<String>,
    /// Memory cap, MiB.
    #[serde(rename = "MemoryMB")]
    pub memory_mb: usize,
    /// Call deadline, ms.
    pub call_timeout_millis: u64,
    /// Calls per warm instance.
    pub instance_reuse: u32,
    /// Idle warm instances.
    pub warm_idle: usize,
    /// What it imports.
    pub imports: Vec<String>,
    /// The grants those imports can use.
    pub grants_used: Vec<&'static str>,
    /// For the current version: the version it replaced, if one did.
    pub previous: Option<PreviousVersion>,
    /// What happened to the component (for a refused file, to the file) lately, newest
    /// first: loaded, swapped, refused, reverted, removed, drained. Empty on draining
    /// versions (their component's current version has it).
    pub history: Vec<SwapEvent>,
    /// For a pulled component: what it was pulled as (`oci://REGISTRY/REPO@sha256:…`, or
    /// the address); empty otherwise.
    pub reference: String,
    /// For a pulled component: its manifest digest (the bytes' for https and file).
    pub digest: String,
    /// For a pulled component verified by a key: `key <file> (sha256:<fingerprint>)`.
    pub signer: String,
    /// The grants it declares it needs (its `paddock:grants` section), if it declares any.
    pub declared_grants: Option<crate::runtime::Grants>,
    /// For a version pending approval: what it declares beyond the running version.
    pub grants_diff: Vec<String>,
}

impl ComponentStatus {
    fn of(
        c: &LoadedComponent,
        state: ComponentState,
        previous: String,
        tasks: Vec<String>,
    ) -> Self {
        Self {
            name: c.name.clone(),
            state,
            reason: String::new(),
            world: c.world.to_string(),
            contract_version: c.contract_version.clone(),
            plugin_version: c.plugin_version.clone(),
            sha256: c.sha256.clone(),
            previous_sha256: previous,
            source: c.source.to_string(),
            replaces_built_in: false,
            file: match &c.source {
                crate::runtime::ComponentSource::File(p) => Some(p.clone()),
                _ => None,
            },
            loaded_at: c.loaded_at,
            compile_cache: Some(c.cache),
            load_millis: c.load_time.as_secs_f64() * 1e3,
            calls: c.stats.calls(),
            errors: c.stats.failures(),
            tasks,
            grants: c.grants().summary(),
            memory_mb: c.limits().memory_bytes >> 20,
            call_timeout_millis: c.limits().call_timeout.as_millis() as u64,
            instance_reuse: c.limits().instance_reuse,
            warm_idle: c.warm_idle(),
            imports: c.imports.clone(),
            grants_used: grants_used(&c.imports),
            previous: None,
            history: Vec::new(),
            reference: match &c.source {
                crate::runtime::ComponentSource::Remote { reference, .. } => reference.clone(),
                _ => String::new(),
            },
            digest: String::new(),
            signer: String::new(),
            declared_grants: c.declared_grants.clone(),
            grants_diff: Vec::new(),
        }
    }
}

impl Swapper {
    /// Every component version: active ones by world and name, each followed by its
    /// draining versions, then refused files.
    pub fn status(&self) -> Vec<ComponentStatus> {
        let previous = self.previous.lock().unwrap().clone();
        let remotes = self.remote_states();
        let mut history = self.history.snapshot();
        let mut out = Vec::new();
        for c in self.runtime.registry.list() {
            let before = previous.get(&(c.world, c.name.clone())).cloned();
            let prev = before
                .as_ref()
                .map(|p| p.sha256.clone())
                .unwrap_or_default();
            let mut by_version: BTreeMap<String, (Arc<LoadedComponent>, Vec<String>)> =
                BTreeMap::new();
            if c.world == crate::runtime::World::Driver {
                for b in self.drivers.bindings().of_driver(&c.name) {
                    let v = b.version();
                    by_version
                        .entry(v.sha256.clone())
                        .or_insert_with(|| (v, Vec::new()))
                        .1
                        .push(b.task_id.clone());
                }
            }
            let mine = by_version
                .remove(&c.sha256)
                .map(|(_, t)| t)
                .unwrap_or_default();
            let mut active = ComponentStatus::of(&c, ComponentState::Active, prev, mine);
            active.replaces_built_in = self.replaces_built_in(&c);
            active.previous = before.map(|mut p| {
                p.draining = by_version.contains_key(&p.sha256);
                p.kept_for_revert = self
                    .runtime
                    .registry
                    .previous(c.world, &c.name)
                    .is_some_and(|k| k.sha256 == p.sha256);
                p
            });
            active.history = history
                .remove(&Subject::Component(c.world, c.name.clone()))
                .unwrap_or_default();
            // What the latest pull that brought these bytes says (a pull of the same bytes
            // from another source changes the reference, not the component).
            if let crate::runtime::ComponentSource::Remote { name, .. } = &c.source
                && let Some(r) = remotes.get(name)
            {
                active.digest = r.digest.clone();
                active.signer = r.signer.clone();
                if !r.reference.is_empty() {
                    active.reference = r.reference.clone();
                }
            }
            out.push(active);
            for (_, (v, mut tasks)) in by_version {
                tasks.sort();
                out.push(ComponentStatus::of(
                    &v,
                    ComponentState::Draining,
                    String::new(),
                    tasks,
                ));
            }
        }
        // Drivers deleted while tasks still run on them.
        let active: Vec<String> = out.iter().map(|c| c.name.clone()).collect();
        out.extend(self.orphan_statuses(&active, &mut history));
        for (path, r) in self.files.lock().unwrap().iter() {
            if let FileState::Refused(reason) = &r.state {
                let history = history
                    .get(&Subject::File(path.clone()))
                    .cloned()
                    .unwrap_or_default();
                out.push(ComponentStatus::refused(path, &r.sha256, reason, history));
            }
        }
        for (name, r) in &remotes {
            if r.refused.is_empty() {
                continue;
            }
            let source = if r.refused_reference.is_empty() {
                r.source.clone()
            } else {
                r.refused_reference.clone()
            };
            let mut s = ComponentStatus::refused(
                std::path::Path::new(""),
                "",
                &r.refused,
                history
                    .get(&Subject::Source(name.clone()))
                    .cloned()
                    .unwrap_or_default(),
            );
            s.name = name.clone();
            s.file = None;
            s.source = source.clone();
            s.reference = source;
            out.push(s);
        }
        for p in self.remotes.pending.lock().unwrap().values() {
            let mut s = ComponentStatus::of(
                &p.component,
                ComponentState::PendingApproval,
                String::new(),
                Vec::new(),
            );
            s.reference = p.pulled.reference.clone();
            s.digest = p.pulled.digest.clone();
            s.signer = p.pulled.signer.clone().unwrap_or_default();
            s.grants_diff = p.diff.clone();
            out.push(s);
        }
        out
    }

    /// Versions of drivers deleted (none of `active`) while tasks still run on them,
    /// draining; a deleted driver's history goes with its first draining version.
    fn orphan_statuses(
        &self,
        active: &[String],
        history: &mut BTreeMap<Subject, Vec<SwapEvent>>,
    ) -> Vec<ComponentStatus> {
        let mut orphans: BTreeMap<String, (Arc<LoadedComponent>, Vec<String>)> = BTreeMap::new();
        for b in self.drivers.bindings().all() {
            if !active.contains(&b.driver_name) {
                let v = b.version();
                orphans
                    .entry(v.sha256.clone())
                    .or_insert_with(|| (v, Vec::new()))
                    .1
                    .push(b.task_id.clone());
            }
        }
        let mut out = Vec::new();
        for (_, (v, tasks)) in orphans {
            let mut s = ComponentStatus::of(&v, ComponentState::Draining, String::new(), tasks);
            s.history = history
                .remove(&Subject::Component(v.world, v.name.clone()))
                .unwrap_or_default();
            out.push(s);
        }
        out
    }

    /// The history of each component that is no longer loaded (its file deleted, no
    /// built-in of its name, no task left on it), by world and name.
    pub fn unloaded(&self) -> Vec<ComponentHistory> {
        let mut shown: Vec<(World, String)> = self
            .runtime
            .registry
            .list()
            .iter()
            .map(|c| (c.world, c.name.clone()))
            .collect();
        shown.extend(
            self.drivers
                .bindings()
                .all()
                .into_iter()
                .map(|b| (World::Driver, b.driver_name.clone())),
        );
        self.history
            .snapshot()
            .into_iter()
            .filter_map(|(who, history)| match who {
                Subject::Component(world, name) if !shown.contains(&(world, name.clone())) => {
                    Some(ComponentHistory {
                        name,
                        world: world.to_string(),
                        history,
                    })
                }
                _ => None,
            })
            .collect()
    }
}

impl ComponentStatus {
    /// A file refused at load: only what is known of it, its reason and its history.
    fn refused(
        path: &std::path::Path,
        sha256: &str,
        reason: &str,
        history: Vec<SwapEvent>,
    ) -> Self {
        ComponentStatus {
            name: String::new(),
            state: ComponentState::Refused,
            reason: reason.to_string(),
            world: String::new(),
            contract_version: String::new(),
            plugin_version: String::new(),
            sha256: sha256.to_string(),
            previous_sha256: String::new(),
            source: path.display().to_string(),
            replaces_built_in: false,
            file: Some(path.to_path_buf()),
            loaded_at: 0,
            compile_cache: None,
            load_millis: 0.0,
            calls: 0,
            errors: 0,
            tasks: Vec::new(),
            grants: Vec::new(),
            memory_mb: 0,
            call_timeout_millis: 0,
            instance_reuse: 0,
            warm_idle: 0,
            imports: Vec::new(),
            grants_used: Vec::new(),
            previous: None,
            history,
            reference: String::new(),
            digest: String::new(),
            signer: String::new(),
            declared_grants: None,
            grants_diff: Vec::new(),
        }
    }
}
