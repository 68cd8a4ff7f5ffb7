//! The `policy` hook: refuses, before it starts, a task outside the operator's policy. Its
//! plugin config (all keys optional):
//!
//! ```json
//! {"allowed_commands": ["/usr/bin/*", "/bin/echo"], "max_memory_mb": 512, "allowed_drivers": ["raw_exec", "mock"]}
//! ```
//!
//! - `allowed_commands`: the `command` of a task's config must match one pattern (`*`
//!   matches any run of characters); tasks without a `command` are not checked;
//! - `max_memory_mb`: the task's `memory` (and `memory_max`) must not exceed it;
//! - `allowed_drivers`: the task's driver must be one of these.
//!
//! A refusal says which rule and which value; the task fails with a "Setup Failure" event.

use paddock_hook_sdk::host::config;
use paddock_hook_sdk::{
    FieldError, Hook, HookError, PluginInfo, PrestartRequest, PrestartResponse, TaskInfo,
};
use serde_json::{Map, Value};

/// The policy.
#[derive(Debug, Default, PartialEq)]
struct Policy {
    allowed_commands: Option<Vec<String>>,
    max_memory_mb: Option<u64>,
    allowed_drivers: Option<Vec<String>>,
}

fn field(f: &str, m: impl Into<String>) -> FieldError {
    FieldError {
        field: f.to_string(),
        message: m.into(),
    }
}

fn strings(v: &Value, name: &str) -> Result<Vec<String>, FieldError> {
    v.as_array()
        .ok_or_else(|| field(name, "expected a list of strings"))?
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| field(&format!("{name}[{i}]"), "expected a string"))
        })
        .collect()
}

fn parse(json: &str) -> Result<Policy, FieldError> {
    let map: Map<String, Value> =
        config::parse(json).map_err(|e| field("", format!("invalid plugin config: {e}")))?;
    let mut p = Policy::default();
    for (k, v) in &map {
        match k.as_str() {
            "allowed_commands" => p.allowed_commands = Some(strings(v, k)?),
            "allowed_drivers" => p.allowed_drivers = Some(strings(v, k)?),
            "max_memory_mb" => {
                p.max_memory_mb = Some(
                    v.as_u64()
                        .ok_or_else(|| field(k, "expected a whole number"))?,
                )
            }
            other => return Err(field(other, "unknown field")),
        }
    }
    Ok(p)
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || !s.ends_with(last) || s.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Why `task` breaks `policy`, if it does.
fn violation(policy: &Policy, task: &TaskInfo) -> Option<String> {
    if let Some(drivers) = &policy.allowed_drivers
        && !drivers.contains(&task.driver)
    {
        return Some(format!(
            "driver {:?} is not allowed (allowed: {})",
            task.driver,
            drivers.join(", ")
        ));
    }
    if let Some(max) = policy.max_memory_mb {
        let asked = u64::from(task.resources.memory_mb.max(task.resources.memory_max_mb));
        if asked > max {
            return Some(format!("memory {asked} MB is above the limit of {max} MB"));
        }
    }
    if let Some(allowed) = &policy.allowed_commands {
        let config: Value = serde_json::from_str(&task.driver_config).unwrap_or(Value::Null);
        if let Some(command) = config.get("command").and_then(Value::as_str)
            && !allowed.iter().any(|p| glob(p, command))
        {
            return Some(format!(
                "command {command:?} is not allowed (allowed: {})",
                allowed.join(", ")
            ));
        }
    }
    None
}

/// The policy hook.
pub struct PolicyHook;

impl Hook for PolicyHook {
    fn info() -> PluginInfo {
        PluginInfo::new("policy", env!("CARGO_PKG_VERSION"))
    }

    fn prestart(req: PrestartRequest) -> Result<PrestartResponse, HookError> {
        let policy = parse(&config::raw()).map_err(|e| HookError::InvalidConfig(vec![e]))?;
        match violation(&policy, &req.task) {
            Some(why) => Err(HookError::Refused(why)),
            None => Ok(PrestartResponse::default()),
        }
    }
}

paddock_hook_sdk::export_hook!(PolicyHook);

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_hook_sdk::TaskResources;

    fn task(driver: &str, config: &str, memory: u32) -> TaskInfo {
        TaskInfo {
            alloc_id: "a".into(),
            job_id: "j".into(),
            group_name: "g".into(),
            task_name: "t".into(),
            driver: driver.into(),
            driver_config: config.into(),
            meta: vec![],
            task_dir: "/tmp".into(),
            resources: TaskResources {
                cpu_mhz: 100,
                memory_mb: memory,
                memory_max_mb: 0,
            },
            templates: vec![],
        }
    }

    #[test]
    fn globs() {
        assert!(glob("/usr/bin/*", "/usr/bin/env"));
        assert!(!glob("/usr/bin/*", "/bin/sh"));
        assert!(glob("*", "anything"));
        assert!(glob("/bin/echo", "/bin/echo"));
        assert!(glob("/opt/*/bin/*", "/opt/x/bin/y"));
    }

    #[test]
    fn rules() {
        let p = parse(r#"{"allowed_commands": ["/bin/echo"], "max_memory_mb": 256, "allowed_drivers": ["raw_exec", "mock"]}"#).unwrap();
        assert_eq!(
            violation(&p, &task("raw_exec", r#"{"command": "/bin/echo"}"#, 128)),
            None
        );
        assert!(
            violation(&p, &task("raw_exec", r#"{"command": "/bin/sh"}"#, 128))
                .unwrap()
                .contains("\"/bin/sh\" is not allowed")
        );
        assert!(
            violation(&p, &task("mock", "{}", 512))
                .unwrap()
                .contains("memory 512 MB is above the limit of 256 MB")
        );
        assert!(
            violation(&p, &task("docker", "{}", 1))
                .unwrap()
                .contains("driver \"docker\"")
        );
        assert_eq!(
            parse(r#"{"max_memory": 1}"#).unwrap_err().field,
            "max_memory"
        );
    }
}
