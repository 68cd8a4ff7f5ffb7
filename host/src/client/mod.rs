//! The client's side of the agent, as Nomad's `client/` is to its server: the allocations
//! this node runs and keeps. A [`Client`] owns the alloc runners (live, and ended ones not
//! yet collected), the records of allocations restored already ended, the list order
//! ([`order`]), what live allocations hold of the node ([`usage`]) and the client's
//! garbage collection of ended allocations ([`gc`]). The server reads it as a snapshot
//! (what it runs and holds) and hands it placements; it never reaches into its tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::allocrunner::{AllocRunner, AllocRunnerConfig};
use crate::changes::Changes;
use crate::config::ClientConfig;
use crate::state::StateDb;
use crate::structs::{Allocation, Capacity};
use crate::taskenv::NodeInfo;
use crate::taskrunner::interfaces::Plugins;

pub mod checks;
pub mod gc;
pub mod health;
pub mod history;
pub mod ops;
pub mod order;
pub mod restore;
pub mod services;
pub mod snapshot;
pub mod templates;
pub mod usage;

pub use gc::GcConfig;
pub use ops::{AllocActionError, AllocStats, ClientStats, TaskUsage, Validation};
pub use order::ListKey;
pub use snapshot::{ClientSnapshot, LiveAlloc};
pub use usage::Holdings;

/// A job's key: (namespace, id).
pub type JobKey = (String, String);

/// What a client is made of.
pub struct ClientParts {
    pub db: Arc<dyn StateDb>,
    pub changes: Arc<Changes>,
    /// The driver, device and hook managers.
    pub plugins: Plugins,
    /// Check components, for services' custom checks.
    pub checks: Arc<crate::checkcomponents::CheckComponents>,
    /// The node's identity; its attributes are the host's fingerprint.
    pub node: NodeInfo,
    /// The IP group ports are reserved on.
    pub host_ip: String,
    /// The config's overrides of the node's resources and what it reserves.
    pub resources: ClientConfig,
    /// Where allocation directories are built (`client { alloc_dir }`).
    pub alloc_root: PathBuf,
    pub gc: GcConfig,
    /// How often the node's and the allocations' resource use is sampled
    /// (`telemetry { collection_interval }`).
    pub stats_interval: std::time::Duration,
    /// The runtime allocations run on, whichever runtime asked for them.
    pub work: tokio::runtime::Handle,
}

/// What runs on this node, and what ended and is kept.
pub struct Client {
    db: Arc<dyn StateDb>,
    changes: Arc<Changes>,
    plugins: Plugins,
    /// The node, with the host's attributes (drivers' are added when asked).
    node: NodeInfo,
    /// The node's host volumes, replaced by a config reload.
    host_volumes: RwLock<BTreeMap<String, crate::taskenv::HostVolume>>,
    host_ip: String,
    resources: ClientConfig,
    work: tokio::runtime::Handle,
    /// Where allocation directories are built (`client { alloc_dir }`).
    alloc_root: PathBuf,
    /// Runners: live allocations, and ended ones the collection has not taken yet.
    allocs: RwLock<BTreeMap<String, Arc<AllocRunner>>>,
    /// Allocations found ended at restore, or collected: their records only.
    restored: RwLock<BTreeMap<String, Allocation>>,
    /// Every allocation above, in list order.
    order: order::AllocOrder,
    /// What the live allocations hold; the table's index by job.
    usage: Arc<usage::NodeUsage>,
    /// Nomad's client garbage collection of ended allocations.
    gc: Arc<gc::ClientGc>,
    /// The id of each allocation that ends, for the server to read (its reschedules).
    ended: tokio::sync::mpsc::UnboundedSender<String>,
    ended_rx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    /// Allocations in a deployment whose health is still to be judged ([`health`]).
    health_tracked: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// The id of each allocation whose health was judged, for the server.
    health_tx: tokio::sync::mpsc::UnboundedSender<String>,
    health_rx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    /// Wakes the health tracker when it has allocations to judge again.
    health_wake: Arc<tokio::sync::Notify>,
    /// Resource use over time, for the charts ([`history`]).
    history: history::History,
    /// The registrations of allocations' services, on their way to the server.
    services: Arc<services::ServiceSync>,
    /// The checks of registered services.
    checks: Arc<checks::Checks>,
}

impl Client {
    /// A client with no allocations.
    pub fn new(p: ClientParts) -> Self {
        let (ended, ended_rx) = tokio::sync::mpsc::unbounded_channel();
        let (health_tx, health_rx) = tokio::sync::mpsc::unbounded_channel();
        let health_wake: Arc<tokio::sync::Notify> = Arc::default();
        Self {
            health_tracked: Default::default(),
            checks: Arc::new(checks::Checks::new(health_wake.clone(), p.checks)),
            health_wake,
            health_tx,
            health_rx: std::sync::Mutex::new(Some(health_rx)),
            ended,
            ended_rx: std::sync::Mutex::new(Some(ended_rx)),
            db: p.db,
            changes: p.changes,
            plugins: p.plugins,
            host_volumes: RwLock::new(p.node.host_volumes.clone()),
            node: p.node,
            host_ip: p.host_ip,
            resources: p.resources,
            work: p.work,
            alloc_root: p.alloc_root,
            allocs: RwLock::new(BTreeMap::new()),
            restored: RwLock::new(BTreeMap::new()),
            order: Default::default(),
            usage: Arc::default(),
            gc: Arc::new(gc::ClientGc::new(p.gc)),
            history: history::History::new(p.stats_interval),
            services: Arc::default(),
        }
    }

    /// The ids of allocations as they end, from now on (for one reader: `None` after the
    /// first call).
    pub fn take_ended(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.ended_rx.lock().unwrap().take()
    }

    /// Where allocation directories are built.
    pub fn alloc_root(&self) -> &Path {
        &self.alloc_root
    }

    /// The node, with current driver attributes.
    pub fn node(&self) -> NodeInfo {
        let mut n = self.node.clone();
        n.attributes.extend(self.plugins.drivers.node_attributes());
        n.host_volumes = self.host_volumes.read().unwrap().clone();
        n
    }

    /// Replace the node's host volumes (a config reload): placements from now on see them;
    /// running tasks keep the folders they were given.
    pub fn set_host_volumes(&self, volumes: BTreeMap<String, crate::taskenv::HostVolume>) {
        *self.host_volumes.write().unwrap() = volumes;
    }

    /// The driver, device and hook managers.
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// The config's `client` block: the node's resource overrides and reservations.
    pub fn resources(&self) -> &ClientConfig {
        &self.resources
    }

    /// The runtime allocations run on.
    pub fn work(&self) -> &tokio::runtime::Handle {
        &self.work
    }

    /// What alloc runners are given; the node as of now.
    pub fn runner_config(&self) -> AllocRunnerConfig {
        let usage = self.usage.clone();
        let gc = self.gc.clone();
        let ended = self.ended.clone();
        AllocRunnerConfig {
            db: self.db.clone(),
            changes: self.changes.clone(),
            alloc_root: self.alloc_root.clone(),
            node: Arc::new(self.node()),
            // The node's holdings and the collection's queue follow each allocation as it
            // stops or starts being live.
            on_live: Arc::new(move |id: &str, live: bool| {
                usage.set_live(id, live);
                gc.ended(id, !live);
                if !live {
                    let _ = ended.send(id.to_string());
                }
            }),
            on_change: self.service_hook(),
            plugins: self.plugins.clone(),
        }
    }

    /// `f` of every allocation (live or restored) that it keeps, in (create index, id)
    /// order, without copying the allocations.
    pub fn visit_allocations<T>(&self, f: impl FnMut(&Allocation) -> Option<T>) -> Vec<T> {
        self.visit(self.runners(), f)
    }

    /// `f` of every allocation of job `key` (its runners through the job index, then every
    /// restored record `f` keeps), in (create index, id) order.
    pub fn visit_job_allocations<T>(
        &self,
        key: &JobKey,
        f: impl FnMut(&Allocation) -> Option<T>,
    ) -> Vec<T> {
        self.visit(self.usage.runners_of(key), f)
    }

    /// `f` of each of `runners`' allocations and of every restored record, what it keeps
    /// in (create index, id) order.
    fn visit<T>(
        &self,
        runners: Vec<Arc<AllocRunner>>,
        mut f: impl FnMut(&Allocation) -> Option<T>,
    ) -> Vec<T> {
        let mut out: Vec<(u64, String, T)> = Vec::new();
        let mut keep = |a: &Allocation| {
            if let Some(t) = f(a) {
                out.push((a.create_index, a.id.clone(), t));
            }
        };
        for r in runners {
            r.shared().peek(&mut keep);
        }
        for a in self.restored.read().unwrap().values() {
            keep(a);
        }
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out.into_iter().map(|(_, _, t)| t).collect()
    }

    /// How many allocations the client holds (live or restored).
    pub fn allocation_count(&self) -> usize {
        self.allocs.read().unwrap().len() + self.restored.read().unwrap().len()
    }

    /// `f` of one allocation, without copying it.
    pub fn peek_allocation<R>(&self, id: &str, f: impl FnOnce(&Allocation) -> R) -> Option<R> {
        if let Some(r) = self.runner(id) {
            return Some(r.shared().peek(f));
        }
        self.restored.read().unwrap().get(id).map(f)
    }

    /// The runner of an allocation the client runs or has not collected yet.
    pub fn runner(&self, id: &str) -> Option<Arc<AllocRunner>> {
        self.allocs.read().unwrap().get(id).cloned()
    }

    /// Every runner.
    pub fn runners(&self) -> Vec<Arc<AllocRunner>> {
        self.allocs.read().unwrap().values().cloned().collect()
    }

    /// The live (not terminal) allocations of job `key`.
    pub fn live_runners(&self, key: &JobKey) -> Vec<Arc<AllocRunner>> {
        self.usage
            .runners_of(key)
            .into_iter()
            .filter(|r| !r.shared().peek(Allocation::is_terminal))
            .collect()
    }

    /// What the live allocations of every job but `except` hold over the node's empty
    /// capacity `base`, and `except`'s own live allocations.
    pub fn holdings(&self, except: &JobKey, base: Capacity) -> Holdings {
        self.usage.holdings(except, base)
    }

    /// Placed allocations' runners enter the table (before they run): the next plan counts
    /// what they hold, and the collection sees whether the client keeps too many.
    pub fn add(&self, runners: &[Arc<AllocRunner>]) {
        {
            let mut table = self.allocs.write().unwrap();
            for r in runners {
                table.insert(r.shared().id().to_string(), r.clone());
                r.shared().peek(|a| self.order.insert(a));
            }
        }
        for r in runners {
            self.usage.track(r);
        }
        self.gc.placed();
    }

    /// Placed allocations whose write failed leave the table again.
    pub fn remove_unwritten(&self, ids: &[String]) {
        let mut table = self.allocs.write().unwrap();
        for id in ids {
            if let Some(r) = table.remove(id) {
                self.order.remove(r.shared().peek(|a| a.create_index), id);
            }
            self.usage.forget(id);
        }
    }

    /// A restored allocation that ended before the restart: its record is kept.
    pub fn restore_ended(&self, a: Allocation) {
        self.order.insert(&a);
        self.restored.write().unwrap().insert(a.id.clone(), a);
    }

    /// A restored allocation's runner enters the table (before it runs again).
    pub fn restore_runner(&self, runner: &Arc<AllocRunner>) {
        runner.shared().peek(|a| self.order.insert(a));
        self.allocs
            .write()
            .unwrap()
            .insert(runner.shared().id().to_string(), runner.clone());
        self.usage.track(runner);
    }

    /// The ended allocation `id` is gone for good (its runner destroyed, or its record
    /// deleted): out of every table and off the collection's queue. Returns whether it was
    /// known.
    pub fn forget(&self, id: &str) -> bool {
        let runner = self.allocs.write().unwrap().remove(id);
        let record = self.restored.write().unwrap().remove(id);
        let create_index = match (&runner, &record) {
            (Some(r), _) => r.shared().peek(|a| a.create_index),
            (None, Some(a)) => a.create_index,
            (None, None) => return false,
        };
        self.usage.forget(id);
        self.gc.forget(id);
        self.order.remove(create_index, id);
        true
    }

    /// Change allocation `id`'s lineage (its runner's, or its restored record's, written
    /// to the state DB and told on the event stream as its runner's would be). Returns
    /// whether the allocation is known.
    pub fn update_lineage(&self, id: &str, f: impl FnOnce(&mut crate::structs::Lineage)) -> bool {
        if let Some(r) = self.runner(id) {
            r.shared().update_lineage(f);
            return true;
        }
        let record = {
            let mut restored = self.restored.write().unwrap();
            let Some(a) = restored.get_mut(id) else {
                return false;
            };
            f(&mut a.lineage);
            a.modify_index = self.changes.bump();
            a.modify_time = crate::util::now_nanos();
            a.clone()
        };
        self.changes
            .events
            .allocation("AllocationUpdated", record.modify_index, &record);
        if let Err(e) = self
            .db
            .queue_alloc(&record)
            .and_then(crate::state::Durable::wait)
        {
            crate::state::log_write_failed(&e, "allocation state", id);
        }
        true
    }

    /// The create index of a restored (ended, runner-less) allocation.
    pub fn restored_create_index(&self, id: &str) -> Option<u64> {
        self.restored
            .read()
            .unwrap()
            .get(id)
            .map(|a| a.create_index)
    }
}
