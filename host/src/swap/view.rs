//! What `/v1/components` shows of each component version: the current ones (`active`),
//! driver versions kept for the tasks a newer version refused (`draining`), and files that
//! were refused (`refused`, with the reason), each with its identity, where it came from,
//! its grants and limits, its calls and failures, and the tasks it serves.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::{FileState, Swapper};
use crate::runtime::LoadedComponent;
use crate::runtime::inspect::grants_used;

/// Where a version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentState {
    /// The current version: it serves every new call.
    Active,
    /// A driver version a newer one replaced, kept for the tasks that stay on it.
    Draining,
    /// A file that was refused.
    Refused,
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
                crate::runtime::ComponentSource::BuiltIn(_) => None,
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
        }
    }
}

impl Swapper {
    /// Every component version: active ones by world and name, each followed by its
    /// draining versions, then refused files.
    pub fn status(&self) -> Vec<ComponentStatus> {
        let previous = self.previous.lock().unwrap().clone();
        let mut out = Vec::new();
        for c in self.runtime.registry.list() {
            let prev = previous
                .get(&(c.world, c.name.clone()))
                .cloned()
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
        for (_, (v, tasks)) in orphans {
            out.push(ComponentStatus::of(
                &v,
                ComponentState::Draining,
                String::new(),
                tasks,
            ));
        }
        for (path, r) in self.files.lock().unwrap().iter() {
            if let FileState::Refused(reason) = &r.state {
                out.push(ComponentStatus {
                    name: String::new(),
                    state: ComponentState::Refused,
                    reason: reason.clone(),
                    world: String::new(),
                    contract_version: String::new(),
                    plugin_version: String::new(),
                    sha256: r.sha256.clone(),
                    previous_sha256: String::new(),
                    source: path.display().to_string(),
                    replaces_built_in: false,
                    file: Some(path.clone()),
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
                });
            }
        }
        out
    }
}
