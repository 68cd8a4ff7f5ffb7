//! Paddock: a client agent that runs Nomad-style jobs (allocations of task groups, task
//! drivers, task-runner hooks, device plugins, restart policies, a local state DB) in which
//! every extension point is a sandboxed WebAssembly component.
//!
//! Module map (see README's architecture section):
//! - [`runtime`]: the wasmtime engine, compile cache, loader, grants, registry, host interfaces;
//! - [`drivermanager`]: drivers as components, fingerprinting, task events;
//! - [`allocrunner`] and [`taskrunner`]: running allocations and their tasks;
//! - [`taskenv`]: NOMAD_* variables and `${...}` interpolation;
//! - [`state`]: the `StateDb` trait, redb and in-memory implementations;
//! - [`jobspec`]: Nomad API JSON jobs into the typed model;
//! - [`api`], [`cli`], [`agent`], [`config`]: what users touch.

pub mod agent;
pub mod allocrunner;
pub mod api;
pub mod cli;
pub mod config;
pub mod devicemanager;
pub mod drivermanager;
pub mod evals;
pub mod events;
pub mod executor;
pub mod jobspec;
pub mod logmon;
pub mod node;
pub mod ports;
pub mod runtime;
pub mod state;
pub mod structs;
pub mod taskenv;
pub mod taskrunner;
pub mod util;
