//! raw_exec's task and plugin configs, checked field by field.

use paddock_driver_sdk::{DriverError, FieldError};
use serde_json::{Map, Value};

/// A task's `config` block.
#[derive(Debug, PartialEq)]
pub struct TaskConfig {
    /// Executable.
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
}

/// The plugin's `config` block.
#[derive(Debug, Default, PartialEq)]
pub struct PluginConfig {
    /// `false` disables the driver.
    pub enabled: Option<bool>,
    /// The user every task runs as (a name or a uid); empty: the agent's user, or the
    /// task's own `user`.
    pub user: String,
}

fn field(f: &str, m: impl Into<String>) -> FieldError {
    FieldError::new(f, m)
}

/// Parse and check a task's config; every bad field is reported.
pub fn task(json: &str) -> Result<TaskConfig, DriverError> {
    let map: Map<String, Value> = serde_json::from_str(json).map_err(|e| {
        DriverError::InvalidConfig(vec![field("", format!("not a JSON object: {e}"))])
    })?;
    let mut errors = Vec::new();
    let (command, args) = paddock_driver_sdk::process_task::command_and_args(&map, &mut errors);
    for k in map.keys() {
        if !matches!(k.as_str(), "command" | "args") {
            errors.push(field(k, "unknown field"));
        }
    }
    if errors.is_empty() {
        Ok(TaskConfig { command, args })
    } else {
        Err(DriverError::InvalidConfig(errors))
    }
}

/// Parse the plugin's config.
pub fn plugin(json: &str) -> Result<PluginConfig, String> {
    let text = if json.trim().is_empty() { "{}" } else { json };
    let map: Map<String, Value> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut c = PluginConfig::default();
    for (k, v) in &map {
        match (k.as_str(), v) {
            ("enabled", Value::Bool(b)) => c.enabled = Some(*b),
            ("enabled", other) => return Err(format!("enabled: expected a boolean, got {other}")),
            ("user", Value::String(u)) if !u.trim().is_empty() => c.user = u.trim().to_string(),
            ("user", other) => {
                return Err(format!("user: expected a user name or uid, got {other}"));
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
        assert_eq!(
            task(r#"{"command": "/bin/echo", "args": ["a", "b"]}"#).unwrap(),
            TaskConfig {
                command: "/bin/echo".into(),
                args: vec!["a".into(), "b".into()]
            }
        );
        let DriverError::InvalidConfig(errs) =
            task(r#"{"args": ["a", 3], "shell": true}"#).unwrap_err()
        else {
            panic!()
        };
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["command", "args[1]", "shell"]);
    }

    #[test]
    fn plugin_config() {
        assert_eq!(plugin("").unwrap(), PluginConfig::default());
        assert_eq!(
            plugin(r#"{"enabled": false}"#).unwrap().enabled,
            Some(false)
        );
        assert!(plugin(r#"{"enable": true}"#).is_err());
        assert_eq!(plugin(r#"{"user": "nobody"}"#).unwrap().user, "nobody");
        assert!(plugin(r#"{"user": ""}"#).is_err());
    }
}
