//! The agent: wires the runtime, the plugin managers, the state DB and the alloc runners
//! together, keeps the jobs and allocations, and offers what the API and CLI do to them as
//! typed operations. Its parts are private: callers get views and results, never a
//! manager or a runner.
//!
//! A single node is its own scheduler: registering a job places `count` allocations of
//! each group here (`plan.rs` decides, `register.rs` stores the job and its evaluation,
//! `placing.rs` places, one plan at a time; the API answers before placing, as Nomad
//! does). Re-registering an identical job changes nothing; a changed job updates in place what no task sees and replaces the rest.
//! `ops.rs` acts on running allocations, `metrics.rs` collects the metrics model,
//! `views.rs` shows the node and its components.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;

use crate::allocrunner::AllocRunner;
use crate::changes::Changes;
use crate::config::AgentConfig;
use crate::jobspec::Job;
use crate::runtime::Runtime;
use crate::state::StateDb;
use crate::structs::Allocation;
use crate::taskenv::NodeInfo;

mod blocked;
mod core_gc;
mod dispatch;
mod drain;
mod evaluate;
mod jobs;
mod metrics;
mod ops;
mod outage;
mod periodic;
mod placing;
mod register;
mod restore;
mod snapshot;
mod start;
mod submission;
mod vars;
mod views;

pub use jobs::{ChildrenSummary, GroupSummary, JobSummary};

/// Types the agent's results carry.
pub use crate::devicemanager::DeviceGroupStats;
pub use crate::drivermanager::types::ResourceUsage;
pub use crate::server::plan::{DesiredUpdates, JobPlan};
pub use dispatch::{DispatchError, DispatchRequest, Dispatched, MAX_PAYLOAD};
pub use drain::{
    DrainMetadata, DrainSpec, DrainStrategy, NodeScheduling, NodeUpdate, NodeUpdateError,
};
pub use ops::{AllocActionError, AllocStats, ClientStats, TaskUsage, Validation};
pub use periodic::PeriodicError;
pub use register::{RegisterError, RegisterOptions};
pub use vars::{
    InvalidVariable, Namespaces, VarError, VarStore, VarWrite, may_read, validate_path,
};
pub use views::{NodeResourcesView, NodeView};

/// How to start an agent.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Data dir; `None` with `dev` uses a fresh temporary dir.
    pub data_dir: Option<PathBuf>,
    /// Folders of driver and device-plugin components.
    pub components: Vec<PathBuf>,
    /// Folder of hook components.
    pub hooks: Option<PathBuf>,
    /// Dev mode: temporary data dir, every built-in driver enabled with every grant.
    pub dev: bool,
    /// The config file's contents.
    pub config: AgentConfig,
    /// Config file name, for errors.
    pub config_file: String,
    /// Keep state in memory instead of a redb file (tests).
    pub in_memory_state: bool,
    /// How often drivers are fingerprinted.
    pub fingerprint_interval: Option<Duration>,
    /// Compile cache dir; defaults to `<data_dir>/cache/components`.
    pub cache_dir: Option<PathBuf>,
    /// The program that runs `executor` (the task executor); defaults to this executable.
    pub executor_program: Option<PathBuf>,
}

/// What registering (or deregistering) a job returns.
#[derive(Debug, Clone, Serialize)]
pub struct Registered {
    /// Evaluation id; empty when none was made (a periodic or parameterized job's own
    /// registration, a deregistration of a job that did not exist).
    pub eval_id: String,
    /// Index of the change.
    pub index: u64,
    /// The job's modify index after the change.
    pub job_modify_index: u64,
    /// Allocations placed.
    pub allocs: Vec<String>,
}

/// The running agent.
pub struct Agent {
    runtime: Arc<Runtime>,
    db: Arc<dyn StateDb>,
    /// The allocations this node runs and keeps.
    client: Arc<crate::client::Client>,
    /// Evaluations, for tools that follow them.
    evals: crate::evals::EvalBook,
    changes: Arc<Changes>,
    /// Nomad Variables (the API's `/v1/var`, tasks' `variables`).
    vars: Arc<vars::VarStore>,
    data_dir: PathBuf,
    /// The component lifecycle: loads, swaps, refuses, reverts, unloads.
    swapper: Arc<crate::swap::Swapper>,
    /// The components folders' watch, once started.
    watch: std::sync::Mutex<Option<crate::swap::watch::FolderWatch>>,
    /// The config file, for reloads (`<none>` when there is none).
    config_file: String,
    /// The API token every request must carry, if set (`acl { token = ... }`).
    acl_token: Option<String>,
    /// Nomad's ACL system: tokens and policies.
    acl: crate::acl::AclStore,
    /// The node as placement saw it when placement last failed (see `blocked.rs`).
    blocked_at: std::sync::Mutex<Option<blocked::Snapshot>>,
    /// The node's recent events, shared with the driver and device managers.
    node_events: Arc<crate::node::NodeEvents>,
    /// Eligibility and drain.
    scheduling: RwLock<drain::NodeScheduling>,
    /// Bumped by each drain request; a drain in progress ends when it is superseded.
    drain_generation: std::sync::atomic::AtomicU64,
    jobs: RwLock<BTreeMap<(String, String), Job>>,
    /// One plan at a time, from planning until its placements are in `allocs`.
    plan_lock: Arc<placing::PlanLock>,
    /// Launch timers of periodic jobs.
    periodic: periodic::PeriodicTimers,
    /// The address the HTTP API serves on, once it does (the node's `HTTPAddr`).
    http_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// The HTTP API's connection limits (`limits { }`).
    http_limits: crate::config::HttpLimits,
    _tempdir: Option<tempfile::TempDir>,
}

impl Agent {
    /// The node, with current driver attributes.
    pub fn node(&self) -> NodeInfo {
        self.client.node()
    }

    /// All allocations, live and restored.
    pub fn allocations(&self) -> Vec<Allocation> {
        self.visit_allocations(|a| Some(a.clone()))
    }

    /// `f` of every allocation (live or restored) that it keeps, in (create index, id)
    /// order, without copying the allocations: a list of 10,000 stubs does not clone
    /// 10,000 jobs.
    pub fn visit_allocations<T>(&self, f: impl FnMut(&Allocation) -> Option<T>) -> Vec<T> {
        self.client.visit_allocations(f)
    }

    /// How many allocations the agent holds (live or restored).
    pub fn allocation_count(&self) -> usize {
        self.client.allocation_count()
    }

    /// One allocation by id.
    pub fn allocation(&self, id: &str) -> Option<Allocation> {
        self.peek_allocation(id, Allocation::clone)
    }

    /// `f` of one allocation, without copying it.
    pub fn peek_allocation<R>(&self, id: &str, f: impl FnOnce(&Allocation) -> R) -> Option<R> {
        self.client.peek_allocation(id, f)
    }

    /// The runner of a live allocation.
    fn alloc_runner(&self, id: &str) -> Option<Arc<AllocRunner>> {
        self.client.runner(id)
    }

    /// Stop one allocation. Returns the evaluation's id and the change index, or `None`
    /// if the allocation is unknown.
    pub fn stop_allocation(&self, id: &str) -> Option<(String, u64)> {
        let r = self.client.runner(id)?;
        r.stop("alloc stopped by user");
        let job = r.shared().peek(|a| a.job.clone());
        let index = self.changes.bump();
        let eval = self.evaluate(&job, crate::evals::Trigger::AllocStop, index);
        Some((eval, index))
    }

    /// The data dir.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// Where allocation directories are built (`client { alloc_dir }`).
    pub fn alloc_root(&self) -> &std::path::Path {
        self.client.alloc_root()
    }

    /// The state DB the agent writes, for inspection (tests and tools read it while the
    /// agent holds the file).
    pub fn state(&self) -> &Arc<dyn StateDb> {
        &self.db
    }

    /// Components refused at start, with reasons.
    pub fn refusals(&self) -> Vec<String> {
        self.swapper.refusals()
    }

    /// The API token every request must carry, if one is set (`acl { token = ... }`).
    pub fn acl_token(&self) -> Option<&str> {
        self.acl_token.as_deref()
    }

    /// Nomad's ACL system: tokens and policies, and whether it is on.
    pub fn acl(&self) -> &crate::acl::AclStore {
        &self.acl
    }

    /// Evaluations, for tools that follow them.
    pub fn evals(&self) -> &crate::evals::EvalBook {
        &self.evals
    }

    /// The change index now.
    pub fn index(&self) -> u64 {
        self.changes.index()
    }

    /// The event stream of what changes.
    pub fn events(&self) -> &crate::events::EventBroker {
        &self.changes.events
    }

    /// Wait until the change index passes `index` or `timeout` elapses; returns the index.
    pub async fn wait_for_change(&self, index: u64, timeout: Duration) -> u64 {
        let mut rx = self.changes.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|i| *i > index)).await;
        self.changes.index()
    }
}
