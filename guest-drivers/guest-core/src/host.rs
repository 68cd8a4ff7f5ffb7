//! What the host offers a guest: one module per host interface, with small helpers. Each SDK
//! re-exports the modules its world imports as its own `host` module. Built for any target
//! but `wasm32` (a guest's unit tests), every function answers from [`crate::fake`].

/// The host's bindings in a component; the fake host in a guest's native unit tests.
#[cfg(target_arch = "wasm32")]
use crate::__bindings::paddock::plugin as imp;
#[cfg(not(target_arch = "wasm32"))]
use crate::fake as imp;

/// Logging into the agent's log, tagged with the component's name.
pub mod log {
    use super::imp::log::write as host_write;
    pub use crate::LogLevel as Level;

    /// Writes one line at `level`; lines above the agent's level are dropped.
    pub fn write(level: Level, message: &str) {
        host_write(level, message);
    }
    /// Writes a trace line.
    pub fn trace(message: &str) {
        write(Level::Trace, message);
    }
    /// Writes a debug line.
    pub fn debug(message: &str) {
        write(Level::Debug, message);
    }
    /// Writes an info line.
    pub fn info(message: &str) {
        write(Level::Info, message);
    }
    /// Writes a warning line.
    pub fn warn(message: &str) {
        write(Level::Warn, message);
    }
    /// Writes an error line.
    pub fn error(message: &str) {
        write(Level::Error, message);
    }
}

/// The component's own block of the agent config (`plugin "<name>" { config { ... } }`).
pub mod config {
    use serde::de::DeserializeOwned;

    /// The config block as JSON text; `{}` when the operator gave none.
    pub fn raw() -> String {
        super::imp::config::get()
    }

    /// The config block, deserialized.
    pub fn get<T: DeserializeOwned>() -> Result<T, serde_json::Error> {
        parse(&raw())
    }

    /// Deserializes a config block given as JSON text; blank text counts as `{}`.
    pub fn parse<T: DeserializeOwned>(json: &str) -> Result<T, serde_json::Error> {
        serde_json::from_str(if json.trim().is_empty() { "{}" } else { json })
    }
}

/// The environment of the task the current call is about (empty outside task calls).
pub mod env {
    pub use super::imp::env::{all, get, interpolate};
}

/// The devices reserved for the task the current call is about.
pub mod devices {
    pub use super::imp::devices::reserved;
    pub use crate::__bindings::paddock::plugin::devices::Reservation;
}

/// Host processes, which the agent owns: spawn, signal, stop, poll and release them.
pub mod process {
    pub use super::imp::process::{
        isolation_support, release, signal, spawn, spawn_isolated, stats, status, stop,
    };
    pub use crate::__bindings::paddock::plugin::process::{
        Command, Isolation, ProcessStatus as Status,
    };
}

/// Host time: short sleeps inside a call, and the wall clock.
pub mod timer {
    pub use super::imp::timer::{now, sleep};
}

/// The rotated log files of tasks the calling driver started.
pub mod task_logs {
    pub use super::imp::task_logs::append;
    pub use crate::__bindings::paddock::plugin::task_logs::LogStream as Stream;

    /// Appends `text` to a task's stdout.
    pub fn stdout(task_id: &str, text: &str) -> Result<(), crate::HostError> {
        append(task_id, Stream::Stdout, text.as_bytes())
    }
}

/// The Nomad Variables the task the current call is about may read (its job's
/// `nomad/jobs/...` paths), with the `variables` grant.
pub mod variables {
    pub use super::imp::variables::{get, list};
    pub use crate::__bindings::paddock::plugin::variables::VariableMetadata;
}

/// The Nomad-native services registered in the namespace of the task the current call is
/// about, with the `services` grant (contract 0.1.1).
pub mod services {
    pub use super::imp::services::{get, list};
    pub use crate::__bindings::paddock::plugin::services::{
        Choice, ServiceRegistration, ServiceStub,
    };
}

/// The `artifact` blocks of the task the current call is about, and file modes for what a
/// hook wrote in its task dir, with the `task_dir` grant (contract 0.1.2).
pub mod artifacts {
    pub use super::imp::artifacts::{list, set_mode};
    pub use crate::__bindings::paddock::plugin::artifacts::Artifact;
}

/// Task events, which reach the task's runner as events of type "Driver".
pub mod events {
    pub use super::imp::events::emit;

    /// Emits an event without details.
    pub fn message(task_id: &str, message: &str) {
        emit(task_id, message, &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::config;

    #[test]
    fn blank_config_is_an_empty_object() {
        let value: serde_json::Value = config::parse("  ").unwrap();
        assert_eq!(value, serde_json::json!({}));
        let value: serde_json::Value = config::parse("").unwrap();
        assert_eq!(value, serde_json::json!({}));
        assert!(config::parse::<Vec<u8>>("{}").is_err());
    }
}
