//! Constructors and defaults of the contract types this crate owns (their bindings are
//! generated here, so their inherent and trait impls can only live here).

use crate::{ExitResult, PluginInfo, ResourceUsage};

impl PluginInfo {
    /// A plugin's name and version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }
}

impl Default for ExitResult {
    /// Exit code 0, no signal, not OOM-killed, no error.
    fn default() -> Self {
        Self {
            exit_code: 0,
            signal: 0,
            oom_killed: false,
            err: None,
        }
    }
}

impl Default for ResourceUsage {
    /// All zeros.
    fn default() -> Self {
        Self {
            rss_bytes: 0,
            cpu_user_ns: 0,
            cpu_system_ns: 0,
            cpu_percent: 0.0,
            timestamp: 0,
        }
    }
}
