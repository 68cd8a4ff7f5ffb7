//! The task environment: the `NOMAD_*` variables, node attributes, meta and task env, and
//! `${...}` interpolation with Nomad's lookup order (node keys before env keys). The same
//! [`TaskEnv`] serves guests through the WIT `env` interface.

use std::collections::BTreeMap;

use crate::jobspec::{Job, Task, TaskGroup};

/// A task's environment plus the node keys `${...}` can name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskEnv {
    /// Environment variables.
    pub env: BTreeMap<String, String>,
    /// Node keys: `node.unique.id`, `node.datacenter`, `attr.<name>`, `meta.<name>`, ...
    pub node: BTreeMap<String, String>,
}

impl TaskEnv {
    /// One variable.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.env.get(key).map(String::as_str)
    }

    /// All variables, sorted by key.
    pub fn sorted_pairs(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Replace `${key}` (key of `[A-Za-z0-9_.-]`) by its value; node keys win over env
    /// keys, as in Nomad; unknown keys stay as written.
    pub fn interpolate(&self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}');
            let key_ok = |k: &str| {
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            };
            match end {
                Some(e) if key_ok(&after[..e]) => {
                    let key = &after[..e];
                    match self.node.get(key).or_else(|| self.env.get(key)) {
                        Some(v) => out.push_str(v),
                        None => out.push_str(&rest[start..start + 3 + e]),
                    }
                    rest = &after[e + 1..];
                }
                _ => {
                    out.push_str("${");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Interpolate every string inside a JSON value (a task's `config` block).
    pub fn interpolate_json(&self, v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(self.interpolate(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.interpolate_json(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.interpolate_json(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// What the builder needs to know about the node.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Node id.
    pub id: String,
    /// Node name.
    pub name: String,
    /// Datacenter.
    pub datacenter: String,
    /// Region.
    pub region: String,
    /// Node class.
    pub class: String,
    /// Node attributes (`kernel.name`, `driver.mock`, ...).
    pub attributes: BTreeMap<String, String>,
    /// Node meta.
    pub meta: BTreeMap<String, String>,
}

impl NodeInfo {
    /// Node keys for interpolation.
    pub fn keys(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("node.unique.id".into(), self.id.clone());
        m.insert("node.unique.name".into(), self.name.clone());
        m.insert("node.datacenter".into(), self.datacenter.clone());
        m.insert("node.region".into(), self.region.clone());
        m.insert("node.class".into(), self.class.clone());
        m.insert("node.pool".into(), "default".into());
        for (k, v) in &self.attributes {
            m.insert(format!("attr.{k}"), v.clone());
        }
        for (k, v) in &self.meta {
            m.insert(format!("meta.{k}"), v.clone());
        }
        m
    }
}

/// Where a task's directories are on the host.
#[derive(Debug, Clone)]
pub struct TaskDirs {
    /// Shared alloc dir (`<alloc>/alloc`).
    pub alloc_dir: String,
    /// Task dir (`<alloc>/<task>`).
    pub task_dir: String,
    /// `<task>/local`.
    pub local_dir: String,
    /// `<task>/secrets`.
    pub secrets_dir: String,
}

/// What the env builder needs to know about one task.
#[derive(Debug, Clone, Copy)]
pub struct EnvRequest<'a> {
    /// The job.
    pub job: &'a Job,
    /// The task's group.
    pub group: &'a TaskGroup,
    /// The task.
    pub task: &'a Task,
    /// Allocation id.
    pub alloc_id: &'a str,
    /// Allocation index within the group's count.
    pub alloc_index: u32,
    /// The task's directories.
    pub dirs: &'a TaskDirs,
    /// The node.
    pub node: &'a NodeInfo,
    /// Env set by hooks, in hook order (last writer wins).
    pub hook_env: &'a [(String, String)],
    /// The allocation's ports.
    pub ports: &'a [crate::structs::AllocatedPort],
}

/// Build a task's environment in Nomad's precedence: built-in `NOMAD_*`, then meta, then
/// the task's `env` block (interpolated against what came before), then hook env in order.
pub fn build(r: EnvRequest<'_>) -> TaskEnv {
    let EnvRequest {
        job,
        group,
        task,
        alloc_id,
        alloc_index,
        dirs,
        node,
        hook_env,
        ports,
    } = r;
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set("NOMAD_ALLOC_ID", alloc_id.to_string());
    set("NOMAD_SHORT_ALLOC_ID", alloc_id.chars().take(8).collect());
    set(
        "NOMAD_ALLOC_NAME",
        format!("{}.{}[{}]", job.id, group.name, alloc_index),
    );
    set("NOMAD_ALLOC_INDEX", alloc_index.to_string());
    set("NOMAD_GROUP_NAME", group.name.clone());
    set("NOMAD_TASK_NAME", task.name.clone());
    set("NOMAD_JOB_ID", job.id.clone());
    set("NOMAD_JOB_NAME", job.name.clone());
    set("NOMAD_JOB_PARENT_ID", String::new());
    set("NOMAD_NAMESPACE", job.namespace.clone());
    set("NOMAD_REGION", job.region.clone());
    set("NOMAD_DC", node.datacenter.clone());
    set("NOMAD_ALLOC_DIR", dirs.alloc_dir.clone());
    set("NOMAD_TASK_DIR", dirs.local_dir.clone());
    set("NOMAD_SECRETS_DIR", dirs.secrets_dir.clone());
    set("NOMAD_CPU_LIMIT", task.resources.cpu.to_string());
    set("NOMAD_MEMORY_LIMIT", task.resources.memory_mb.to_string());
    if task.resources.memory_max_mb > 0 {
        set(
            "NOMAD_MEMORY_MAX_LIMIT",
            task.resources.memory_max_mb.to_string(),
        );
    }
    // Group ports (host networking): NOMAD_PORT_<l> is the port inside the task (`to` when
    // set), the HOST_ variants and ADDR/IP are the host's side.
    for p in ports {
        let l = clean_key(&p.label);
        let inside = if p.to > 0 {
            p.to as u32
        } else {
            u32::from(p.value)
        };
        let addr = format!("{}:{}", p.host_ip, p.value);
        set(&format!("NOMAD_PORT_{l}"), inside.to_string());
        set(&format!("NOMAD_HOST_PORT_{l}"), p.value.to_string());
        set(&format!("NOMAD_ALLOC_PORT_{l}"), inside.to_string());
        set(&format!("NOMAD_IP_{l}"), p.host_ip.clone());
        set(&format!("NOMAD_HOST_IP_{l}"), p.host_ip.clone());
        set(&format!("NOMAD_ADDR_{l}"), addr.clone());
        set(&format!("NOMAD_HOST_ADDR_{l}"), addr);
    }
    let mut meta = job.meta.clone();
    meta.extend(group.meta.clone());
    meta.extend(task.meta.clone());
    let mut te = TaskEnv {
        env,
        node: node.keys(),
    };
    for (k, v) in &meta {
        let v = te.interpolate(v);
        te.env
            .insert(format!("NOMAD_META_{}", clean_key(k)), v.clone());
        te.env
            .insert(format!("NOMAD_META_{}", clean_key(&k.to_uppercase())), v);
    }
    // Nomad passes the host environment to tasks without image isolation; Paddock passes
    // only PATH, so commands resolve as they would in a shell without leaking secrets.
    if let Ok(path) = std::env::var("PATH") {
        te.env.entry("PATH".to_string()).or_insert(path);
    }
    for (k, v) in &task.env {
        let v = te.interpolate(v);
        te.env.insert(k.clone(), v);
    }
    for (k, v) in hook_env {
        let v = te.interpolate(v);
        te.env.insert(k.clone(), v);
    }
    te
}

/// Replace characters invalid in an env var name with `_`, as Nomad does for meta keys.
fn clean_key(k: &str) -> String {
    k.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> TaskEnv {
        let mut e = TaskEnv::default();
        e.env.insert("A".into(), "1".into());
        e.env.insert("attr.kernel.name".into(), "env-loses".into());
        e.node.insert("attr.kernel.name".into(), "linux".into());
        e
    }

    #[test]
    fn interpolation_rules() {
        let e = env();
        assert_eq!(e.interpolate("x${A}y"), "x1y");
        assert_eq!(
            e.interpolate("${attr.kernel.name}"),
            "linux",
            "node keys win"
        );
        assert_eq!(
            e.interpolate("${UNKNOWN}-${A}"),
            "${UNKNOWN}-1",
            "unknown kept"
        );
        assert_eq!(e.interpolate("${not closed"), "${not closed");
        assert_eq!(e.interpolate("${bad key}"), "${bad key}");
        assert_eq!(e.interpolate("$${A}"), "$1");
    }
}
