//! exec's task and plugin configs (Nomad's exec driver), checked field by field.

use paddock_driver_sdk::{DriverError, FieldError};
use serde_json::{Map, Value};

/// A task's `config` block.
#[derive(Debug, PartialEq)]
pub struct TaskConfig {
    /// Executable.
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
    /// A PID namespace of its own (`pid_mode = "private"`, the default) or the host's.
    pub private_pid: bool,
    /// An IPC namespace of its own (`ipc_mode = "private"`, the default) or the host's.
    pub private_ipc: bool,
}

/// The plugin's `config` block. What a task's chroot holds and which users it may not run
/// as are the host's to decide, from the operator's grant (`chroot_env`,
/// `denied_host_uids`): this driver does not choose them.
#[derive(Debug, PartialEq)]
pub struct PluginConfig {
    /// `false` disables the driver.
    pub enabled: Option<bool>,
    /// User for tasks that name none.
    pub default_user: String,
}

impl Default for PluginConfig {
    fn default() -> Self {
        Self {
            enabled: None,
            default_user: "nobody".into(),
        }
    }
}

fn field(f: &str, m: impl Into<String>) -> FieldError {
    FieldError::new(f, m)
}

/// "private" → true, "host" → false.
fn mode(map: &Map<String, Value>, key: &str, errors: &mut Vec<FieldError>) -> bool {
    match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) if s.is_empty() || s == "private" => true,
        Some(Value::String(s)) if s == "host" => false,
        Some(other) => {
            errors.push(field(
                key,
                format!("expected \"private\" or \"host\", got {other}"),
            ));
            true
        }
    }
}

/// Parse and check a task's config; every bad field is reported.
pub fn task(json: &str) -> Result<TaskConfig, DriverError> {
    let map: Map<String, Value> = serde_json::from_str(json).map_err(|e| {
        DriverError::InvalidConfig(vec![field("", format!("not a JSON object: {e}"))])
    })?;
    let mut errors = Vec::new();
    let (command, args) = paddock_driver_sdk::process_task::command_and_args(&map, &mut errors);
    let private_pid = mode(&map, "pid_mode", &mut errors);
    let private_ipc = mode(&map, "ipc_mode", &mut errors);
    for key in ["cap_add", "cap_drop"] {
        match map.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(_) => errors.push(field(
                key,
                "not supported: tasks run as an unprivileged user with no capabilities, and this host does not grant any",
            )),
        }
    }
    for k in map.keys() {
        if !matches!(
            k.as_str(),
            "command" | "args" | "pid_mode" | "ipc_mode" | "cap_add" | "cap_drop"
        ) {
            errors.push(field(k, "unknown field"));
        }
    }
    if errors.is_empty() {
        Ok(TaskConfig {
            command,
            args,
            private_pid,
            private_ipc,
        })
    } else {
        Err(DriverError::InvalidConfig(errors))
    }
}

/// Parse the plugin's config: `enabled`, `default_user`.
pub fn plugin(json: &str) -> Result<PluginConfig, String> {
    let text = if json.trim().is_empty() { "{}" } else { json };
    let map: Map<String, Value> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut c = PluginConfig::default();
    for (k, v) in &map {
        match (k.as_str(), v) {
            ("enabled", Value::Bool(b)) => c.enabled = Some(*b),
            ("enabled", other) => return Err(format!("enabled: expected a boolean, got {other}")),
            ("default_user", Value::String(s)) if !s.is_empty() => c.default_user = s.clone(),
            ("default_user", other) => {
                return Err(format!("default_user: expected a user name, got {other}"));
            }
            ("chroot_env", _) => {
                return Err(
                    "chroot_env: moved to the grant, where the host enforces it: plugin \"exec\" { grant { chroot_env = [...] } }"
                        .into(),
                );
            }
            (other, _) => return Err(format!("{other}: unknown field")),
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_config() {
        let t = task(r#"{"command": "/bin/echo", "args": ["a"], "pid_mode": "host"}"#).unwrap();
        assert!(!t.private_pid && t.private_ipc);
        let DriverError::InvalidConfig(errs) =
            task(r#"{"args": ["a", 3], "ipc_mode": "shared", "cap_add": ["net_raw"], "x": 1}"#)
                .unwrap_err()
        else {
            panic!()
        };
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["command", "args[1]", "ipc_mode", "cap_add", "x"]);
    }

    #[test]
    fn plugin_config() {
        assert_eq!(plugin("").unwrap().default_user, "nobody");
        let c = plugin(r#"{"default_user": "daemon"}"#).unwrap();
        assert_eq!(c.default_user, "daemon");
        let e = plugin(r#"{"chroot_env": ["/usr"]}"#).unwrap_err();
        assert!(e.contains("moved to the grant"), "{e}");
    }
}
