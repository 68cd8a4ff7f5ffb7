//! The plugin's config: the agent's `plugin "paddock" { config {…} }` block, as
//! `SetConfig` delivers it (cty msgpack, see [`crate::cty`]). Every attribute may be absent
//! or nil (Nomad versions differ in what they send), so `{"driver": "mock"}` alone is a
//! whole config.

use std::path::PathBuf;

use paddock_core::config::Limits;
use paddock_core::remote::{RemoteSpec, Source};
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
    /// Folders of third-party components, and at most one source of the driver
    /// (`oci://REGISTRY/REPO:TAG`, `oci://…@sha256:…`, `https://…`, `file:///…`), pulled and
    /// verified as an agent's plugin block `source` is.
    pub components: Vec<PathBuf>,
    /// The cosign public key (PEM, ECDSA P-256) the driver pulled from a `components`
    /// source must be signed by.
    pub verify_key: Option<PathBuf>,
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
        match self.remote_spec()? {
            // Only what the source brings gets the driver's settings, never a file.
            Some(spec) => s.source = Some(spec.source.to_string()),
            None => {
                s.file = self.driver_file.clone();
                s.sha256 = self.driver_sha256.clone();
            }
        }
        Ok(s)
    }

    /// The driver's source, when `components` names one: the driver's name is the name its
    /// component must report; `driver_sha256` pins the manifest digest (the bytes' for
    /// https and file); `verify_key` is the key its signature must verify under.
    pub fn remote_spec(&self) -> Result<Option<RemoteSpec>, ConfigError> {
        let sources: Vec<&str> = self
            .components
            .iter()
            .filter_map(|p| p.to_str())
            .filter(|s| s.contains("://"))
            .collect();
        let text = match sources.as_slice() {
            [] => {
                if self.verify_key.is_some() {
                    return Err(ConfigError(
                        "verify_key: applies to a driver pulled from a `components` source (oci://…); none is given".into(),
                    ));
                }
                return Ok(None);
            }
            [one] => *one,
            _ => {
                return Err(ConfigError(format!(
                    "components: at most one source, the driver's; found {}",
                    sources.join(", ")
                )));
            }
        };
        let source = Source::parse(text).map_err(|e| ConfigError(format!("components: {e}")))?;
        let pin = match &self.driver_sha256 {
            None => None,
            Some(p) => Some(
                RemoteSpec::normalize_pin(p)
                    .map_err(|e| ConfigError(format!("driver_sha256: {e}")))?,
            ),
        };
        if let Some(k) = &self.verify_key {
            paddock_core::remote::read_key(k)
                .map_err(|e| ConfigError(format!("verify_key: {e}")))?;
        }
        Ok(Some(RemoteSpec {
            name: self.driver().to_string(),
            source,
            pin,
            key: self.verify_key.clone(),
            insecure: false,
            ca_file: None,
            max_size: paddock_core::remote::DEFAULT_MAX_SIZE,
            poll_interval: None,
            auto_approve: paddock_core::remote::AutoApprove::Always,
        }))
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
