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

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::allocrunner::AllocRunner;
use crate::changes::Changes;
use crate::config::AgentConfig;
use crate::runtime::Runtime;
use crate::state::StateDb;
use crate::structs::Allocation;
use crate::taskenv::NodeInfo;

mod metrics;
mod start;
mod views;

pub use crate::server::jobs::{ChildrenSummary, GroupSummary, JobSummary};

pub use crate::client::{AllocActionError, AllocStats, ClientStats, TaskUsage, Validation};
/// Types the agent's results carry.
pub use crate::devicemanager::DeviceGroupStats;
pub use crate::drivermanager::types::ResourceUsage;
pub use crate::server::dispatch::{DispatchError, DispatchRequest, Dispatched, MAX_PAYLOAD};
pub use crate::server::drain::{
    DrainMetadata, DrainSpec, DrainStrategy, NodeScheduling, NodeUpdate, NodeUpdateError,
};
pub use crate::server::periodic::PeriodicError;
pub use crate::server::plan::{DesiredUpdates, JobPlan};
pub use crate::server::vars::{
    InvalidVariable, Namespaces, VarError, VarStore, VarWrite, may_read, validate_path,
};
pub use crate::server::{RegisterError, RegisterOptions, Registered};
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

/// The running agent.
pub struct Agent {
    runtime: Arc<Runtime>,
    db: Arc<dyn StateDb>,
    /// The allocations this node runs and keeps.
    client: Arc<crate::client::Client>,
    /// The jobs, their evaluations and the node's scheduling state.
    server: Arc<crate::server::Server>,
    changes: Arc<Changes>,
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
    /// The node's recent events, shared with the driver and device managers.
    node_events: Arc<crate::node::NodeEvents>,
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

    /// The jobs, their evaluations and the node's scheduling state.
    pub fn server(&self) -> &Arc<crate::server::Server> {
        &self.server
    }

    /// The allocations this node runs and keeps, and the node's plugins.
    pub fn client(&self) -> &Arc<crate::client::Client> {
        &self.client
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
        self.server.evals()
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
