//! Host interfaces the guests import, one module per WIT interface, each written the way
//! wasmtime's `wasi-config` is: a small view type that borrows what the interface needs
//! (the calling component's context, the task, an embedder service), the generated `Host`
//! traits implemented on that view, and an `add_to_linker` that takes a function
//! projecting the view out of the embedder's store data. None of them knows the store
//! type; [`crate::store`] composes them in one place.
//!
//! Every interface but `log`, `config`, `timer` and `task-logs` checks the calling
//! component's grant and answers `denied` without it.

pub mod artifacts;
pub mod config;
pub mod devices;
pub mod env;
pub mod events;
pub mod log;
pub mod process;
pub mod services;
pub mod task_logs;
pub mod timer;
pub mod variables;

use std::sync::Arc;

use events::EventSink;
use process::ProcessHost;
use services::ServiceHost;
use task_logs::TaskLogHost;
use variables::VariableHost;

/// Long-lived services of the embedder that host interfaces call: where processes are
/// started, where task logs are written, where driver events go, where variables are read.
/// A service left `None` makes its interface answer `failed` ("not available in this
/// runtime").
#[derive(Clone, Default)]
pub struct HostServices {
    /// Host processes for `process`.
    pub processes: Option<Arc<dyn ProcessHost>>,
    /// Task log files for `task-logs`.
    pub task_logs: Option<Arc<dyn TaskLogHost>>,
    /// Driver events for `events`.
    pub events: Option<Arc<dyn EventSink>>,
    /// Nomad Variables for `variables`.
    pub variables: Option<Arc<dyn VariableHost>>,
    /// Nomad-native service registrations for `services`.
    pub services: Option<Arc<dyn ServiceHost>>,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostServices")
            .field("processes", &self.processes.is_some())
            .field("task_logs", &self.task_logs.is_some())
            .field("events", &self.events.is_some())
            .field("variables", &self.variables.is_some())
            .field("services", &self.services.is_some())
            .finish()
    }
}
