//! Paddock's integration tests: one binary (each test binary links wasmtime), real
//! components built from the repo's guest crates, real redb files, real HTTP on loopback.

mod harness;

mod acl;
mod api;
mod bad_input;
mod cli;
mod client;
mod component_new;
mod device_rules;
mod devices;
mod exec;
mod frozen;
mod fs;
mod gocheck;
mod gotypes;
mod gotypes_cluster;
mod guide;
mod hooks;
mod host_devices;
mod hostile;
mod job_ops;
mod jobs;
mod lifecycle;
mod load;
mod mock;
mod network;
mod node;
mod nomad_plugin;
mod nomad_plugin_go;
mod nomad_plugin_python;
mod placement;
mod polyglot;
mod python;
mod raw_exec;
mod restore;
mod runtime;
mod sdk;
mod shutdown;
mod state;
mod swap;
mod swap_config;
mod swap_drivers;
mod telemetry;
mod ui;
mod vars;
