//! The task environment (Nomad's `taskenv`): the `NOMAD_*` variables, node attributes,
//! meta and task env, then device and hook env, each value `${...}`-interpolated with
//! Nomad's lookup order (node keys before env keys). One [`EnvBuilder`] per task
//! invocation carries what the prestart hooks add; [`EnvBuilder::build`] gives the
//! [`TaskEnv`] that drivers get in their task config and guests read through the runtime's
//! `env` interface.

use std::collections::BTreeMap;

use crate::jobspec::{Job, Task, TaskGroup};
pub use crate::runtime::TaskEnv;

/// What the builder needs to know about the node.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Node id.
    pub id: String,
    /// Node name.
    pub name: String,
    pub datacenter: String,
    pub region: String,
    /// Node class.
    pub class: String,
    /// Node attributes (`kernel.name`, `driver.mock`, ...).
    pub attributes: BTreeMap<String, String>,
    /// Node meta.
    pub meta: BTreeMap<String, String>,
    /// Host volumes by name (`client { host_volume }`).
    pub host_volumes: BTreeMap<String, HostVolume>,
}

/// A host volume the node offers (Nomad's ClientHostVolumeConfig).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostVolume {
    /// The host folder.
    pub path: String,
    /// Whether every mount of it is read-only.
    pub read_only: bool,
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

impl TaskDirs {
    /// The allocation dir both lie in (`<alloc>`): what a task's paths are opened beneath.
    pub fn alloc_root(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.alloc_dir)
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default()
    }
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
    /// The allocation's ports.
    pub ports: &'a [crate::structs::AllocatedPort],
    /// The CPU placement gave the task, when placed (its reserved cores).
    pub cpu: Option<&'a crate::structs::AllocatedCpuResources>,
}

/// A task invocation's environment as the prestart hooks build it up: the base from the
/// task (fixed when the invocation starts), then the env of its device reservations, then
/// hook env in the hooks' first-run order, the last writer winning.
#[derive(Debug, Clone)]
pub struct EnvBuilder {
    base: TaskEnv,
    device_env: Vec<(String, String)>,
    hook_env: Vec<(String, String)>,
    /// The task's `env` entries that name a secret, as written: interpolated again once
    /// the secrets are known.
    secret_env: Vec<(String, String)>,
}

impl EnvBuilder {
    /// A builder for the task `r` describes.
    pub fn new(r: EnvRequest<'_>) -> Self {
        Self {
            base: base(r),
            device_env: Vec::new(),
            hook_env: Vec::new(),
            secret_env: r
                .task
                .env
                .iter()
                .filter(|(_, v)| v.contains("${secret."))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The task's secrets (the `secrets` hook's), by `secret.NAME.KEY`.
    pub fn set_secrets(&mut self, secrets: BTreeMap<String, String>) {
        self.base.secrets = std::sync::Arc::new(secrets);
    }

    /// The values of the task's secrets, longest first: what events must not show.
    pub fn secret_values(&self) -> Vec<String> {
        let mut v: Vec<String> = self.base.secrets.values().cloned().collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
        v.dedup();
        v
    }

    /// The env of the task's device reservations (the `devices` hook's).
    pub fn set_device_env(&mut self, env: Vec<(String, String)>) {
        self.device_env = env;
    }

    /// The env persistent hooks have set so far, in their first-run order.
    pub fn set_hook_env(&mut self, env: Vec<(String, String)>) {
        self.hook_env = env;
    }

    /// The environment: base, then device env, then hook env, each value interpolated
    /// against what came before it.
    pub fn build(&self) -> TaskEnv {
        let mut te = self.base.clone();
        for (k, v) in &self.secret_env {
            let v = te.interpolate(v);
            te.env.insert(k.clone(), v);
        }
        for (k, v) in self.device_env.iter().chain(&self.hook_env) {
            let v = te.interpolate(v);
            te.env.insert(k.clone(), v);
        }
        te
    }
}

/// Core ids in cpuset list notation, as Nomad writes `NOMAD_CPU_CORES`: `0-2,5`.
pub fn cpuset_list(cores: &[u16]) -> String {
    let mut ids = cores.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// A task's environment before device and hook env, in Nomad's precedence: built-in
/// `NOMAD_*`, then meta, then the task's `env` block (interpolated against what came
/// before).
fn base(r: EnvRequest<'_>) -> TaskEnv {
    let EnvRequest {
        job,
        group,
        task,
        alloc_id,
        alloc_index,
        dirs,
        node,
        ports,
        cpu,
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
    match cpu {
        Some(c) => {
            set("NOMAD_CPU_LIMIT", c.cpu_shares.to_string());
            if !c.reserved_cores.is_empty() {
                set("NOMAD_CPU_CORES", cpuset_list(&c.reserved_cores));
            }
        }
        None => set("NOMAD_CPU_LIMIT", task.resources.cpu.to_string()),
    }
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
        node: std::sync::Arc::new(node.keys()),
        secrets: Default::default(),
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

    #[test]
    fn builder_applies_device_env_then_hook_env_over_the_task_env() {
        let job = crate::jobspec::parse_job_json(
            br#"{"ID": "web", "Meta": {"team": "a-b"}, "TaskGroups": [{"Name": "g", "Tasks": [
                {"Name": "t", "Driver": "mock", "Env": {"WHO": "${NOMAD_TASK_NAME}@${attr.kernel.name}", "LEVEL": "task"}}
            ]}]}"#,
        )
        .unwrap();
        let group = &job.task_groups[0];
        let node = NodeInfo {
            attributes: [("kernel.name".to_string(), "linux".to_string())].into(),
            ..Default::default()
        };
        let dirs = TaskDirs {
            alloc_dir: "/a/alloc".into(),
            task_dir: "/a/t".into(),
            local_dir: "/a/t/local".into(),
            secrets_dir: "/a/t/secrets".into(),
        };
        let mut b = EnvBuilder::new(EnvRequest {
            job: &job,
            group,
            task: &group.tasks[0],
            alloc_id: "0123456789",
            alloc_index: 2,
            dirs: &dirs,
            node: &node,
            ports: &[],
            cpu: None,
        });
        let env = b.build();
        assert_eq!(env.get("WHO"), Some("t@linux"));
        assert_eq!(env.get("NOMAD_ALLOC_NAME"), Some("web.g[2]"));
        assert_eq!(env.get("NOMAD_SHORT_ALLOC_ID"), Some("01234567"));
        assert_eq!(env.get("NOMAD_META_team"), Some("a-b"));
        assert_eq!(env.get("NOMAD_TASK_DIR"), Some("/a/t/local"));

        b.set_device_env(vec![
            ("LEVEL".into(), "device".into()),
            ("GPU".into(), "0".into()),
        ]);
        b.set_hook_env(vec![
            ("LEVEL".into(), "hook-1".into()),
            ("SEEN".into(), "${GPU}/${LEVEL}".into()),
            ("LEVEL".into(), "hook-2".into()),
        ]);
        let env = b.build();
        assert_eq!(env.get("LEVEL"), Some("hook-2"), "the last writer wins");
        assert_eq!(
            env.get("SEEN"),
            Some("0/hook-1"),
            "each value sees what came before"
        );
        assert_eq!(env.get("GPU"), Some("0"));
    }
}
