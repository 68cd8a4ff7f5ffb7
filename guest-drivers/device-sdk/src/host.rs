//! What the host offers a device plugin: the imports of the `device-plugin` world.

/// Logging into the agent's log, tagged with the plugin's name.
pub mod log {
    use crate::__bindings::paddock::plugin::log::write as host_write;
    pub use crate::__bindings::paddock::plugin::types::LogLevel as Level;

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

/// The plugin's own block of the agent config (`plugin "<name>" { config { ... } }`).
pub mod config {
    use serde::de::DeserializeOwned;

    /// The config block as JSON text; `{}` when the operator gave none.
    pub fn raw() -> String {
        crate::__bindings::paddock::plugin::config::get()
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

/// Host time: short sleeps inside a call, and the wall clock.
pub mod timer {
    pub use crate::__bindings::paddock::plugin::timer::{now, sleep};
}
