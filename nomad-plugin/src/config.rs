//! The plugin's config: the agent's `plugin "paddock" { config {…} }` block, as
//! `SetConfig` delivers it (cty msgpack, see [`crate::cty`]). Every attribute may be absent
//! or nil (Nomad versions differ in what they send), so `{"driver": "mock"}` alone is a
//! whole config.

use std::path::PathBuf;

use paddock_core::config::Limits;
use paddock_core::runtime::{ComponentSettings, Grants};
use serde::Deserialize;

/// Why a config was refused: the message names the attribute.
#[derive(Debug, thiserror::Error)]
#[error("plugin config: {0}")]
pub struct ConfigError(pub String);

/// The driver exposed when the config names none.
pub const DEFAULT_DRIVER: &str = "raw_exec";

/// The decoded config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginConfig {
    /// The driver component to expose (a built-in or one in `components`).
    pub driver: Option<String>,
    /// Folders of third-party components.
    pub components: Vec<PathBuf>,
    /// The driver component's file, when its name is not `<driver>.wasm` (its settings
    /// and grants go to that file only).
    pub driver_file: Option<String>,
    /// The sha256 the driver component's bytes must have.
    pub driver_sha256: Option<String>,
    /// Where the task executor, process records and compile cache live.
    pub data_dir: Option<PathBuf>,
    /// The task config fields of a third-party driver (the built-ins' are known).
    pub task_config_fields: Vec<String>,
    /// The component's own plugin config.
    pub component_config: Option<serde_json::Value>,
    /// Capabilities granted to the component (none unless given).
    pub grant: Grants,
    /// Its call limits.
    pub limits: Limits,
}

impl PluginConfig {
    /// Decode `SetConfigRequest.msgpack_config`.
    pub fn decode(msgpack: &[u8]) -> Result<Self, ConfigError> {
        let json = crate::cty::to_json(msgpack).map_err(|e| ConfigError(e.to_string()))?;
        serde_json::from_value(json).map_err(|e| ConfigError(e.to_string()))
    }

    /// The driver's name.
    pub fn driver(&self) -> &str {
        self.driver
            .as_deref()
            .filter(|d| !d.is_empty())
            .unwrap_or(DEFAULT_DRIVER)
    }

    /// The task config fields Nomad should accept for this driver.
    pub fn task_fields(&self) -> Vec<String> {
        if !self.task_config_fields.is_empty() {
            return self.task_config_fields.clone();
        }
        crate::spec::built_in_fields(self.driver())
            .unwrap_or_default()
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// The component's settings in the runtime.
    pub fn settings(&self) -> Result<ComponentSettings, ConfigError> {
        let config = self
            .component_config
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        self.grant.validate().map_err(|e| ConfigError(e.clone()))?;
        let mut s = self
            .limits
            .settings(self.grant.clone(), config)
            .map_err(ConfigError)?;
        s.file = self.driver_file.clone();
        s.sha256 = self.driver_sha256.clone();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(v: serde_json::Value) -> Result<PluginConfig, ConfigError> {
        PluginConfig::decode(&crate::cty::from_json(&v, crate::spec::PLUGIN_CONFIG_KEYS))
    }

    #[test]
    fn a_driver_alone_is_a_config_and_nothing_is_raw_exec() {
        let c = decode(json!({"driver": "mock"})).unwrap();
        assert_eq!(c.driver(), "mock");
        assert!(c.grant.process.is_empty());
        assert_eq!(PluginConfig::decode(&[]).unwrap().driver(), "raw_exec");
        assert_eq!(c.task_fields()[0], "run_for");
    }

    #[test]
    fn grants_and_limits_take_the_agents_shape() {
        let c = decode(json!({
            "driver": "raw_exec",
            "grant": {"process": ["/bin/*"], "events": true, "env": null},
            "limits": {"call_timeout": "3s", "memory_mb": 32},
        }))
        .unwrap();
        let s = c.settings().unwrap();
        assert!(s.grants.allows_command("/bin/sh"));
        assert!(!s.grants.allows_command("/usr/bin/env"));
        assert_eq!(s.call_timeout, Some(std::time::Duration::from_secs(3)));
        assert_eq!(s.memory_bytes, Some(32 << 20));
    }

    #[test]
    fn bad_attributes_are_named() {
        let e = decode(json!({"drivr": "mock"})).unwrap_err().to_string();
        assert!(e.contains("drivr"), "{e}");
        let e = decode(json!({"limits": {"call_timeout": "soon"}}))
            .unwrap()
            .settings()
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.call_timeout"), "{e}");
    }
}
