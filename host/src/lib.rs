//! Paddock: a client agent that runs Nomad-style jobs (allocations of task groups, task
//! drivers, task-runner hooks, device plugins, restart policies, a local state DB) in which
//! every extension point is a sandboxed WebAssembly component.
//!
//! Module map, top down (see README's architecture section). Each layer uses only the ones
//! below it:
//! - [`cli`], [`api`], [`ui`]: what users touch; they parse, call the [`agent`] and render;
//! - [`agent`]: wiring only: starts the parts, restores them, shows the node and its
//!   components, collects metrics; [`config`] is its HCL config;
//! - [`server`]: jobs, versions, evaluations, periodic and dispatch, drain, variables, the
//!   server GC, and the plan, a value computed from a client snapshot;
//! - [`client`]: the allocations this node runs and keeps, the node's plugins and
//!   resources, allocation operations, restore and the client GC; it never calls the
//!   server;
//! - [`allocrunner`]: one allocation, its lifecycle order, its record; above
//! - [`taskrunner`]: one task, its hook phases and built-in hooks, its restarts;
//! - [`swap`]: the component lifecycle (load, hot swap, refuse, revert, unload, config
//!   reload), over the managers below;
//! - the plugin edge, the only code that sees versioned bindings: [`drivermanager`],
//!   [`devicemanager`], [`hookmanager`], with [`pluginbook`] (what the managers know of
//!   their plugins) and [`node`] (identity, fingerprint, node events); [`pluginhost`] builds
//!   the runtime and the three managers in one place for every embedder;
//! - [`taskenv`] (the env builder), [`allocdir`], [`ports`], [`evals`], [`events`] and
//!   [`changes`] (the change index and event stream), [`metrics`] (the metrics model),
//!   [`structs`] (Nomad-shaped records), [`jobspec`] (HCL and JSON jobs), [`constraint`]
//!   (Nomad's constraint language: attributes with units, operands, versions), [`state`] (the
//!   state DB), [`executor`] (the task executor and the process table), [`logmon`] (log
//!   files), [`safefs`] (files in folders a task or a component can write, never through a
//!   link), [`util`];
//! - [`runtime`]: the component runtime crate, which knows nothing of the agent.

/// The component runtime this agent is built on (the `paddock-runtime` crate).
pub use paddock_runtime as runtime;

/// The node-side parts the agent shares with the Nomad driver plugin (the `paddock-core`
/// crate), at the paths they always had.
pub use paddock_core::{
    changes, checkcomponents, config, constraint, cron, devicemanager, drivermanager, evals,
    events, execstream, executor, filter, hookmanager, hoststats, jobspec, logmon, node,
    pluginbook, pluginhost, remote, safefs, secretproviders, state, structs, swap, taskenv, util,
    volumes,
};

pub mod acl;
pub mod agent;
pub mod allocdir;
pub mod allocrunner;
pub mod api;
pub mod cli;
pub mod client;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod jobdiff;
pub mod metrics;
pub mod node_class;
pub mod ports;
pub mod server;
pub mod taskrunner;
pub mod ui;
