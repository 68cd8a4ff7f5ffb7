//! The server's side of the agent, as Nomad's `nomad/` and `scheduler/` are to its
//! `client/`: deciding what runs on the node. A [`Server`] owns the jobs and their
//! versions and submissions ([`register`], [`jobs`]), evaluations and blocked evaluations
//! ([`evaluate`], [`blocked`]), periodic launches and dispatch ([`periodic`],
//! [`dispatch`]), the node's eligibility and drain ([`drain`]), Nomad Variables
//! ([`vars`]) and the server's garbage collection ([`core_gc`]).
//!
//! It plans from a [`crate::client::ClientSnapshot`] ([`plan`], a value with no agent in
//! it; [`feasible`] filters the node, [`crate::jobspec::bounds`] is what one job may ask at all) and hands
//! the placements to the [`Client`] ([`placing`]). The server reads the client; the
//! client never calls the server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::changes::Changes;
use crate::client::Client;
use crate::jobspec::Job;
use crate::state::StateDb;

pub mod blocked;
pub mod core_gc;
pub mod deployment_ops;
pub mod deployments;
pub mod dispatch;
pub mod drain;
pub mod evaluate;
pub mod feasible;
mod fit;
pub mod jobs;
pub mod namespaces;
pub mod periodic;
pub mod placing;
pub mod plan;
pub mod planned;
pub mod register;
pub mod reschedule;
mod rollout;
pub mod scaling;
pub mod services;
pub mod snapshot;
pub mod submission;
pub mod vars;

pub use deployment_ops::DeploymentError;
pub use deployments::DeploymentUpdate;
pub use namespaces::NamespaceError;
pub use register::{RegisterError, RegisterOptions, Registered};

/// What renders the node for the `Node` event topic (the agent's view of it).
pub type NodeViewFn = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// The jobs, their evaluations and the node's scheduling state.
pub struct Server {
    db: Arc<dyn StateDb>,
    changes: Arc<Changes>,
    /// The node's client: what the server plans against and places on.
    client: Arc<Client>,
    /// Evaluations, for tools that follow them.
    evals: crate::evals::EvalBook,
    /// Nomad Variables (the API's `/v1/var`, tasks' `variables`).
    vars: Arc<vars::VarStore>,
    jobs: RwLock<BTreeMap<(String, String), Job>>,
    /// One plan at a time, from planning until its placements are in the client's table.
    plan_lock: Arc<placing::PlanLock>,
    /// The node as placement saw it when placement last failed (see `blocked.rs`).
    blocked_at: Mutex<Option<blocked::Snapshot>>,
    /// Launch timers of periodic jobs.
    periodic: periodic::PeriodicTimers,
    /// Eligibility and drain.
    scheduling: RwLock<drain::NodeScheduling>,
    /// Bumped by each drain request; a drain in progress ends when it is superseded.
    drain_generation: std::sync::atomic::AtomicU64,
    /// The node's recent events, where eligibility and drain changes are told.
    node_events: Arc<crate::node::NodeEvents>,
    /// The node as the `Node` event topic shows it, once the agent has said how.
    node_view: OnceLock<NodeViewFn>,
    /// Refuse jobs asking for what the agent does not act on, instead of warning.
    refuse_unacted: bool,
    /// Deployments of service jobs' versions.
    deployments: deployments::DeploymentBook,
    /// Namespaces as objects.
    namespaces: namespaces::NamespaceBook,
    /// Scaling events of jobs' groups.
    scaling: scaling::ScalingBook,
    /// Nomad-native service registrations.
    services: Arc<services::ServiceBook>,
}

/// What a server is made of.
pub struct ServerParts {
    pub db: Arc<dyn StateDb>,
    pub changes: Arc<Changes>,
    pub client: Arc<Client>,
    pub vars: Arc<vars::VarStore>,
    /// Nomad-native service registrations (shared with tasks' `services` interface).
    pub services: Arc<services::ServiceBook>,
    pub node_events: Arc<crate::node::NodeEvents>,
    /// `client { unsupported_job_features = "error" }`.
    pub refuse_unacted: bool,
}

impl Server {
    /// A server with no jobs yet (see [`Server::restore_jobs`]).
    pub fn new(p: ServerParts) -> Self {
        Self {
            db: p.db,
            changes: p.changes,
            client: p.client,
            evals: Default::default(),
            vars: p.vars,
            jobs: RwLock::new(BTreeMap::new()),
            plan_lock: Arc::default(),
            blocked_at: Default::default(),
            periodic: Default::default(),
            scheduling: RwLock::new(Default::default()),
            drain_generation: Default::default(),
            node_events: p.node_events,
            node_view: OnceLock::new(),
            refuse_unacted: p.refuse_unacted,
            deployments: Default::default(),
            namespaces: Default::default(),
            scaling: Default::default(),
            services: p.services,
        }
    }

    /// Say how the node is rendered for the `Node` event topic.
    pub fn set_node_view(&self, f: NodeViewFn) {
        let _ = self.node_view.set(f);
    }

    /// The node's client.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// Evaluations, for tools that follow them.
    pub fn evals(&self) -> &crate::evals::EvalBook {
        &self.evals
    }

    /// Jobs as the state DB had them at start: into the table, periodic ones' timers set.
    /// A job from before jobs kept their indexes counts as created at `index`.
    pub fn restore_jobs(self: &Arc<Self>, jobs: Vec<Job>, index: u64) {
        let mut j = self.jobs.write().unwrap();
        for mut job in jobs {
            if job.state.create_index == 0 {
                job.state.create_index = index;
                job.state.modify_index = index;
                job.state.job_modify_index = index;
            }
            j.insert((job.namespace.clone(), job.id.clone()), job);
        }
        let periodic: Vec<Job> = j.values().filter(|j| j.is_periodic()).cloned().collect();
        drop(j);
        for job in &periodic {
            self.periodic_job_changed(job);
        }
    }
}
