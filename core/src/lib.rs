//! Paddock's node-side parts, below the agent: what the agent and the Nomad driver plugin
//! (`paddock-nomad-driver`) share. The agent crate (`paddock`) re-exports every module here
//! at the path it has there; the plugin depends on this crate alone, not on the agent, its
//! API, UI or ACL.
//!
//! Module map, top down (each uses only the ones below it):
//! - [`pluginhost`] builds the runtime and the three managers in one place for every
//!   embedder; [`swap`] is the component lifecycle (load, hot swap, refuse, revert, unload,
//!   config reload); [`config`] is the agent's HCL config;
//! - the plugin edge, the only code that sees versioned bindings: [`drivermanager`],
//!   [`devicemanager`], [`hookmanager`], with [`pluginbook`] (what the managers know of their
//!   plugins) and [`node`] (identity, fingerprint, node events);
//! - [`taskenv`] (the env builder), [`evals`], [`events`] and [`changes`] (the change index
//!   and event stream), [`structs`] (Nomad-shaped records), [`jobspec`] (HCL and JSON jobs),
//!   [`constraint`] (Nomad's constraint language), [`cron`], [`state`] (the state DB),
//!   [`executor`] (the task executor and the process table), [`logmon`] (log files),
//!   [`safefs`] (files in folders a task or a component can write, never through a link),
//!   [`volumes`] (host volumes: placement and the mounts they become), [`util`];
//! - [`runtime`]: the component runtime crate, which knows nothing of the agent.

/// The component runtime (the `paddock-runtime` crate).
pub use paddock_runtime as runtime;

pub mod changes;
pub mod checkcomponents;
pub mod config;
pub mod constraint;
pub mod cron;
pub mod devicemanager;
pub mod drivermanager;
pub mod evals;
pub mod events;
pub mod execstream;
pub mod executor;
pub mod filter;
pub mod hookmanager;
pub mod hoststats;
pub mod jobspec;
pub mod logmon;
pub mod node;
pub mod pluginbook;
pub mod pluginhost;
pub mod remote;
pub mod secretproviders;
/// Files in folders a task or a component can write, never through a link (the runtime's,
/// which opens them for host interfaces too).
pub use paddock_runtime::safefs;
pub mod state;
pub mod structs;
pub mod swap;
pub mod taskenv;
pub mod util;
pub mod volumes;
