//! The agent config: an HCL file shaped like Nomad's agent config, plus the command-line
//! flags that override it.
//!
//! ```hcl
//! data_dir   = "/var/lib/paddock"
//! bind_addr  = "127.0.0.1"
//! ports { http = 4646 }
//! log_level  = "info"
//! log_json   = false
//! datacenter = "dc1"
//! client { meta = { rack = "r1" } }
//!
//! plugin "mock" {
//!   grant {                 # deny by default
//!     env    = true
//!     events = true
//!   }
//!   limits {
//!     memory_mb      = 64
//!     call_timeout   = "10s"
//!     instance_reuse = 1000 # calls per warm instance; 1 = a fresh store per call
//!   }
//!   config { }              # handed to the component as JSON
//! }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::runtime::{ComponentSettings, Grants};

pub mod artifact;
pub mod gc;
mod limits;
pub mod remote;

pub use limits::{AgentLimits, HttpLimits};

/// A config error naming the file and field.
#[derive(Debug, thiserror::Error)]
#[error("agent config {file}: {message}")]
pub struct ConfigError {
    pub file: String,
    /// What is wrong.
    pub message: String,
}

/// The agent config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Where state, compile cache and alloc dirs live.
    pub data_dir: Option<PathBuf>,
    /// Address the HTTP API binds to.
    pub bind_addr: Option<String>,
    pub ports: Ports,
    /// Log level (trace, debug, info, warn, error).
    pub log_level: Option<String>,
    /// JSON logs.
    pub log_json: Option<bool>,
    /// Node name (defaults to the hostname).
    pub name: Option<String>,
    pub datacenter: Option<String>,
    pub region: Option<String>,
    /// Client settings.
    pub client: ClientConfig,
    /// Folders of driver and device-plugin components.
    pub components: Vec<PathBuf>,
    /// Folder of hook components.
    pub hooks: Option<PathBuf>,
    /// Per-component settings, by component name.
    pub plugin: BTreeMap<String, PluginBlock>,
    /// Which tasks each hook component runs for, by hook name.
    pub hook: BTreeMap<String, HookAttach>,
    /// API access control.
    pub acl: AclConfig,
    /// What Nomad keeps in its `server` block and a single node serves itself.
    pub server: ServerConfig,
    /// Limits on what the API's clients and the components together may take.
    pub limits: AgentLimits,
    /// Nomad's `telemetry` block: how often resource use is sampled.
    pub telemetry: TelemetryConfig,
}

/// The `telemetry` block (the key of Nomad's this agent acts on).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// How often the node's and each live allocation's CPU and memory are sampled for the
    /// UI's charts (Nomad's default "1s").
    pub collection_interval: Option<String>,
}

impl TelemetryConfig {
    /// `collection_interval` checked: a duration of at least 100 ms, or an error naming it.
    pub fn collection_interval(&self, file: &str) -> Result<std::time::Duration, ConfigError> {
        match &self.collection_interval {
            None => Ok(std::time::Duration::from_secs(1)),
            Some(s) => crate::util::parse_duration(s)
                .filter(|d| d.as_millis() >= 100)
                .ok_or_else(|| ConfigError {
                    file: file.to_string(),
                    message: format!(
                        "telemetry.collection_interval: {s:?} is not a duration of at least 100ms, like \"1s\""
                    ),
                }),
        }
    }
}

/// The `server` block: the parts of Nomad's server a single node plays.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Events kept for `/v1/event/stream` replay (Nomad's default 100; 0 keeps none).
    pub event_buffer_size: Option<usize>,
    /// How often the garbage collection of ended allocations, evaluations and dead jobs
    /// runs (default "5m"; Nomad runs its evaluation collection every 5 m and its job
    /// collection every `job_gc_interval`, one pass here does both).
    pub job_gc_interval: Option<String>,
    /// How long a dead job is kept before it is collected (default "4h").
    pub job_gc_threshold: Option<String>,
    /// How long an ended allocation or a terminal evaluation is kept (default "1h").
    pub eval_gc_threshold: Option<String>,
    /// The same for a batch job's (default "24h").
    pub batch_eval_gc_threshold: Option<String>,
}

/// The `acl` block. `enabled = true` turns on Nomad's ACL system (bootstrap, tokens,
/// policies; see [`crate::acl`]). `token` is one shared management token: alone, every API
/// request must carry it in `X-Nomad-Token` (as `nomad` and python-nomad send
/// `NOMAD_TOKEN`) or as `Authorization: Bearer`; with `enabled`, it is a management token
/// beside the ACL system's own.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AclConfig {
    /// Nomad's ACL system on (`agent run --acl-enabled` also turns it on).
    pub enabled: bool,
    /// The token; none means the API is open (it binds to loopback by default).
    pub token: Option<String>,
}

/// A `hook "<name>"` block: which tasks a hook component runs for. A job can also ask for
/// hooks by name in its meta: `paddock.hooks = "env-inject,policy"`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HookAttach {
    /// Run order among hooks: lower first, ties by name. Built-in hooks always run first.
    pub order: i32,
    /// Run for every task.
    pub all_tasks: bool,
    /// Run for tasks using these drivers.
    pub drivers: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ports {
    /// HTTP API port.
    pub http: Option<u16>,
}

/// The `client` block.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Node meta.
    pub meta: BTreeMap<String, String>,
    /// Node class.
    pub node_class: Option<String>,
    /// CPU the node offers, MHz, instead of the fingerprint's (Nomad's override for
    /// machines whose fingerprint is wrong).
    pub cpu_total_compute: Option<u64>,
    /// Memory the node offers, MB, instead of the fingerprint's.
    pub memory_total_mb: Option<u64>,
    /// Disk the node offers, MB, instead of the allocation dir's free space.
    pub disk_total_mb: Option<u64>,
    /// Where allocation directories are built, an absolute path (Nomad's `alloc_dir`;
    /// default `<data_dir>/alloc`). The node's disk is this filesystem's, so allocation
    /// files can live on a volume of their own, apart from the state DB.
    pub alloc_dir: Option<std::path::PathBuf>,
    /// What is kept back for the host and the agent.
    pub reserved: Reserved,
    /// Task starts in a driver at once; the others wait their turn in the start queue
    /// (default 64).
    pub max_parallel_starts: Option<usize>,
    /// Starts that may wait in the start queue before placement holds back more (the
    /// allocations stay stored and pending meanwhile; default 4096).
    pub start_queue_max: Option<usize>,
    /// Live (not terminal) allocations the node may hold, all jobs together; a job that
    /// would pass it is a 400 (default 20,000).
    pub max_live_allocs: Option<usize>,
    /// Memory redb may keep of the state file (its page cache and write buffer), MiB
    /// (default 32; redb's own default is 1 GiB).
    pub state_cache_mb: Option<u64>,
    /// Nomad's client garbage collection of ended allocations (their runner, directory
    /// and local state; the record stays until the server's collection): how often it
    /// runs (default "1m"; it also runs when an allocation ends or is placed).
    pub gc_interval: Option<String>,
    /// Disk use of the allocation dir's filesystem, percent, above which ended
    /// allocations are collected, oldest first (default 80).
    pub gc_disk_usage_threshold: Option<f64>,
    /// Inode use, percent, above which ended allocations are collected (default 70).
    pub gc_inode_usage_threshold: Option<f64>,
    /// Allocations the client keeps (running or ended and not yet collected) before it
    /// collects ended ones, oldest first; it never limits running ones (default 50).
    pub gc_max_allocs: Option<usize>,
    /// Allocations collected at once (default 2).
    pub gc_parallel_destroys: Option<usize>,
    /// What a job asking for a block or field the agent does not act on gets: `warn`
    /// (registered, each one named in the answer's `Warnings`; the default) or `error`
    /// (refused with a 400 naming them).
    pub unsupported_job_features: UnsupportedJobFeatures,
    /// Nomad's artifact download options, handed to the `artifact` hook.
    pub artifact: Option<artifact::ArtifactConfig>,
    /// Host volumes by name (`host_volume "data" { path, read_only }`), which a group's
    /// `volume { type = "host", source = "data" }` asks for; re-read on reload.
    pub host_volume: BTreeMap<String, HostVolumeConfig>,
}

/// A `client { host_volume "NAME" { … } }` block (Nomad's ClientHostVolumeConfig).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostVolumeConfig {
    /// The host folder, an absolute path that must exist.
    pub path: String,
    /// Mounted read-only into every task, whatever the job asks.
    pub read_only: bool,
}

impl ClientConfig {
    /// The node's host volumes, checked: a name Nomad would take, an absolute path to a
    /// folder that exists (Nomad's client refuses to start without it).
    pub fn host_volumes(
        &self,
        file: &str,
    ) -> Result<BTreeMap<String, crate::taskenv::HostVolume>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, v) in &self.host_volume {
            let err = |message: String| ConfigError {
                file: file.to_string(),
                message: format!("client.host_volume {name:?}: {message}"),
            };
            if name.is_empty() || name.contains(|c: char| c.is_control() || c == '/' || c == '[') {
                return Err(err(
                    "a name without \"/\", \"[\" or control characters".into()
                ));
            }
            let path = std::path::Path::new(&v.path);
            if !path.is_absolute() {
                return Err(err(format!("path {:?} must be an absolute path", v.path)));
            }
            if !path.is_dir() {
                return Err(err(format!(
                    "path {:?} is not a folder that exists",
                    v.path
                )));
            }
            out.insert(
                name.clone(),
                crate::taskenv::HostVolume {
                    path: v.path.clone(),
                    read_only: v.read_only,
                },
            );
        }
        Ok(out)
    }
}

/// `client { unsupported_job_features }`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnsupportedJobFeatures {
    /// Register the job; name each field in the answer's `Warnings`.
    #[default]
    Warn,
    /// Refuse the job, naming each field.
    Error,
}

impl<'de> Deserialize<'de> for UnsupportedJobFeatures {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match String::deserialize(d)?.as_str() {
            "warn" => Ok(Self::Warn),
            "error" => Ok(Self::Error),
            other => Err(serde::de::Error::custom(format!(
                "client.unsupported_job_features: expected \"warn\" or \"error\", got {other:?}"
            ))),
        }
    }
}

impl ClientConfig {
    /// The start queue's limits this config asks for.
    pub fn start_limits(&self) -> crate::drivermanager::StartLimits {
        let d = crate::drivermanager::StartLimits::default();
        crate::drivermanager::StartLimits {
            parallel: self.max_parallel_starts.unwrap_or(d.parallel),
            bound: self.start_queue_max.unwrap_or(d.bound),
        }
    }

    /// Where allocation dirs are built: `alloc_dir`, which must be absolute, or
    /// `<data_dir>/alloc`.
    pub fn alloc_root(
        &self,
        data_dir: &std::path::Path,
        file: &str,
    ) -> Result<std::path::PathBuf, ConfigError> {
        match &self.alloc_dir {
            Some(dir) if !dir.is_absolute() => Err(ConfigError {
                file: file.to_string(),
                message: format!(
                    "client.alloc_dir: must be an absolute path, got {}",
                    dir.display()
                ),
            }),
            Some(dir) => Ok(dir.clone()),
            None => Ok(data_dir.join("alloc")),
        }
    }

    /// The state DB's cache, bytes.
    pub fn state_cache_bytes(&self) -> usize {
        self.state_cache_mb
            .map(|mb| (mb as usize).saturating_mul(1 << 20))
            .unwrap_or(crate::state::RedbBackend::DEFAULT_CACHE)
    }
}

/// The `client { reserved { ... } }` block: resources no allocation may use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reserved {
    /// CPU, MHz.
    pub cpu: Option<u64>,
    /// Memory, MB.
    pub memory: Option<u64>,
    /// Disk, MB.
    pub disk: Option<u64>,
}

/// A `plugin "<name>"` block. Its settings and grants go to the component of that name
/// from the file they are bound to (`file`, `sha256`; without either, `<name>.wasm`) or
/// built in: never to another file that reports the name.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginBlock {
    /// The component's file: a file name in a components folder, or an absolute path.
    pub file: Option<String>,
    /// The sha256 the component's bytes must have.
    pub sha256: Option<String>,
    /// Capabilities granted to the component.
    pub grant: Grants,
    pub limits: Limits,
    /// Free-form config handed to the component.
    pub config: Option<hcl::Value>,
    /// When a new version of the component is rolled back to the one it replaced.
    pub auto_revert: AutoRevertBlock,
    /// Where the component is pulled from instead of a components folder:
    /// `oci://REGISTRY/REPO:TAG`, `oci://REGISTRY/REPO@sha256:…`, `https://…/x.wasm`,
    /// `file:///…` (then `sha256` pins the manifest digest, or the bytes' for https and
    /// file). See [`remote`].
    pub source: Option<String>,
    /// The key its signature must verify under.
    pub verify: Option<remote::VerifyBlock>,
    /// Plain HTTP to a registry off the loopback.
    pub insecure: Option<bool>,
    /// More CA certificates (PEM) for the source.
    pub ca_file: Option<String>,
    /// Largest component pulled (default "128MiB").
    pub max_size: Option<artifact::Size>,
    /// How often a tag is resolved again (off by default).
    pub poll_interval: Option<String>,
    /// "never", "same-grants" (default) or "always": when a version declaring more grants
    /// than the running one goes in without `agent component approve`.
    pub auto_approve: Option<String>,
}

/// A plugin's `auto_revert` block (Nomad's deployment `auto_revert`, for component
/// versions): a new version whose first calls fail (trap, run out of memory or miss their
/// deadline) more than `max_failures` times within its first `calls` calls, before
/// `window` has passed, is rolled back to the version it replaced.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoRevertBlock {
    /// Watch new versions at all (default true).
    pub enabled: Option<bool>,
    /// How many of a new version's first calls are watched (default 20).
    pub calls: Option<u64>,
    /// Failures among them that are tolerated (default 3; one more rolls back).
    pub max_failures: Option<u64>,
    /// How long a new version is watched at most (default "10m").
    pub window: Option<String>,
}

/// [`AutoRevertBlock`] with its defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoRevert {
    pub enabled: bool,
    pub calls: u64,
    pub max_failures: u64,
    pub window: std::time::Duration,
}

impl Default for AutoRevert {
    fn default() -> Self {
        Self {
            enabled: true,
            calls: 20,
            max_failures: 3,
            window: std::time::Duration::from_secs(600),
        }
    }
}

/// A plugin's `limits` block.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Linear memory cap, MiB.
    pub memory_mb: Option<u64>,
    /// Deadline of one call, e.g. "10s".
    pub call_timeout: Option<String>,
    /// Calls one warm instance may serve before it is retired; 1 = a fresh store per call.
    pub instance_reuse: Option<u32>,
    /// Calls of the component in flight at once (default 16); more wait their turn.
    pub max_concurrent_calls: Option<u32>,
}

impl Limits {
    /// A component's settings: these limits with its grants and config (JSON). The error
    /// names the bad field relative to the plugin block (`limits.call_timeout: …`).
    pub fn settings(
        &self,
        grants: Grants,
        config: serde_json::Value,
    ) -> Result<ComponentSettings, String> {
        let call_timeout = match &self.call_timeout {
            None => None,
            Some(s) => Some(
                crate::util::parse_duration(s)
                    .ok_or_else(|| format!("limits.call_timeout: invalid duration {s:?}"))?,
            ),
        };
        let memory_bytes = match self.memory_mb {
            None => None,
            Some(mb) => Some(
                usize::try_from(mb)
                    .ok()
                    .and_then(|m| m.checked_mul(1 << 20))
                    .ok_or_else(|| {
                        format!("limits.memory_mb: {mb} MiB is more than a component can address")
                    })?,
            ),
        };
        if self.max_concurrent_calls == Some(0) {
            return Err("limits.max_concurrent_calls: must be at least 1".into());
        }
        Ok(ComponentSettings {
            grants,
            memory_bytes,
            call_timeout,
            instance_reuse: self.instance_reuse,
            max_concurrent_calls: self.max_concurrent_calls,
            config,
            file: None,
            sha256: None,
            source: None,
        })
    }
}

impl AgentConfig {
    /// Parse HCL text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, ConfigError> {
        crate::jobspec::hcl_depth::check(text).map_err(|(line, _)| ConfigError {
            file: file.to_string(),
            message: format!(
                "line {line}: brackets nest more than {} deep",
                crate::jobspec::hcl_depth::MAX_DEPTH
            ),
        })?;
        let err = |message: String| ConfigError {
            file: file.to_string(),
            message,
        };
        let body: hcl::Body = hcl::from_str(text).map_err(|e| err(e.to_string()))?;
        // A second `client` block would otherwise be dropped without a word (as Nomad's
        // own parser, this takes one of each).
        for name in ["client", "server", "acl", "ports", "limits"] {
            let n = body.blocks().filter(|b| b.identifier() == name).count();
            if n > 1 {
                return Err(err(format!(
                    "{name}: only one {name:?} block is allowed, found {n}"
                )));
            }
        }
        hcl::from_body(body).map_err(|e| err(e.to_string()))
    }

    /// Read and parse a file.
    pub fn load(path: &std::path::Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Self::parse(&text, &file)
    }

    /// Each plugin's auto-revert policy (defaults for plugins without a block).
    pub fn auto_revert(&self, file: &str) -> Result<BTreeMap<String, AutoRevert>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, block) in &self.plugin {
            let b = &block.auto_revert;
            let d = AutoRevert::default();
            let window = match &b.window {
                None => d.window,
                Some(s) => crate::util::parse_duration(s).ok_or_else(|| ConfigError {
                    file: file.to_string(),
                    message: format!(
                        "plugin \"{name}\".auto_revert.window: invalid duration {s:?}"
                    ),
                })?,
            };
            out.insert(
                name.clone(),
                AutoRevert {
                    enabled: b.enabled.unwrap_or(d.enabled),
                    calls: b.calls.unwrap_or(d.calls).max(1),
                    max_failures: b.max_failures.unwrap_or(d.max_failures),
                    window,
                },
            );
        }
        Ok(out)
    }

    /// Component settings for the runtime.
    pub fn component_settings(
        &self,
        file: &str,
    ) -> Result<BTreeMap<String, ComponentSettings>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, block) in &self.plugin {
            let err = |message: String| ConfigError {
                file: file.to_string(),
                message: format!("plugin \"{name}\".{message}"),
            };
            let config = match &block.config {
                None => serde_json::json!({}),
                Some(v) => serde_json::to_value(v).map_err(|e| err(format!("config: {e}")))?,
            };
            if let Some(p) = block.grant.read_paths.iter().find(|p| !p.starts_with('/')) {
                return Err(err(format!(
                    "grant.read_paths: {p:?} must be an absolute path"
                )));
            }
            block.grant.validate().map_err(err)?;
            if let Some(f) = &block.file
                && (f.is_empty() || (f.contains('/') && !f.starts_with('/')))
            {
                return Err(err(format!(
                    "file: {f:?} must be a file name in a components folder or an absolute path"
                )));
            }
            if let Some(h) = &block.sha256
                && block.source.is_none()
                && (h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()))
            {
                return Err(err(format!("sha256: {h:?} is not 64 hex digits")));
            }
            let mut settings = block
                .limits
                .settings(block.grant.clone(), config)
                .map_err(err)?;
            settings.file = block.file.clone();
            // With a source, `sha256` pins what is pulled (the manifest digest): the
            // settings go to what that source brings, never to a file.
            if block.source.is_some() {
                settings.source = block.source.clone();
            } else {
                settings.sha256 = block.sha256.clone();
            }
            out.insert(name.clone(), settings);
        }
        self.artifact_settings(file, &mut out)?;
        Ok(out)
    }

    /// `client { artifact { … } }` into the `artifact` hook's settings: its config keys
    /// (one also set in the plugin's own `config` block is an error naming both), and a
    /// call deadline fit for downloads unless the plugin block sets one. Without the
    /// client block, a plugin "artifact" block still gets that deadline.
    fn artifact_settings(
        &self,
        file: &str,
        out: &mut BTreeMap<String, ComponentSettings>,
    ) -> Result<(), ConfigError> {
        let err = |message: String| ConfigError {
            file: file.to_string(),
            message,
        };
        let given = self.client.artifact.clone();
        if given.is_none() && !out.contains_key(artifact::HOOK) {
            return Ok(());
        }
        let (json, deadline) = given
            .unwrap_or_default()
            .plugin_config()
            .map_err(|m| err(format!("client.artifact.{m}")))?;
        let settings = out
            .entry(artifact::HOOK.to_string())
            .or_insert_with(|| ComponentSettings {
                config: serde_json::json!({}),
                ..Default::default()
            });
        if settings.call_timeout.is_none() {
            settings.call_timeout = Some(deadline);
        }
        if !settings.config.is_object() {
            settings.config = serde_json::json!({});
        }
        let config = settings
            .config
            .as_object_mut()
            .expect("made an object above");
        for (k, v) in json {
            if config.contains_key(&k) {
                return Err(err(format!(
                    "client.artifact sets {k:?}, and so does plugin \"artifact\".config: set it in one place"
                )));
            }
            config.insert(k, v);
        }
        Ok(())
    }

    /// What the config sets that the agent does not act on, each named with why.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self
            .client
            .artifact
            .as_ref()
            .map(|a| a.warnings())
            .unwrap_or_default();
        for (name, block) in &self.plugin {
            out.extend(remote::warnings(name, block));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_collection_interval_is_checked() {
        let c = AgentConfig::parse("telemetry {\n  collection_interval = \"5s\"\n}\n", "a.hcl")
            .unwrap();
        assert_eq!(
            c.telemetry.collection_interval("a.hcl").unwrap(),
            std::time::Duration::from_secs(5)
        );
        let d = AgentConfig::parse("", "a.hcl").unwrap();
        assert_eq!(
            d.telemetry.collection_interval("a.hcl").unwrap(),
            std::time::Duration::from_secs(1)
        );
        for bad in ["\"10ms\"", "\"soon\""] {
            let c = AgentConfig::parse(
                &format!("telemetry {{\n  collection_interval = {bad}\n}}\n"),
                "a.hcl",
            )
            .unwrap();
            let e = c.telemetry.collection_interval("a.hcl").unwrap_err();
            assert!(
                e.message.starts_with("telemetry.collection_interval: "),
                "{e:?}"
            );
        }
    }

    #[test]
    fn parses_plugin_blocks() {
        let c = AgentConfig::parse(
            r#"
            data_dir = "/tmp/x"
            ports { http = 5000 }
            plugin "mock" {
              grant {
                env     = true
                process = ["/bin/*"]
              }
              limits {
                memory_mb      = 32
                call_timeout   = "250ms"
                instance_reuse = 1
              }
              config {
                misbehave = { op = "fingerprint", kind = "trap" }
              }
            }
            "#,
            "t.hcl",
        )
        .unwrap();
        assert_eq!(c.ports.http, Some(5000));
        let s = c.component_settings("t.hcl").unwrap();
        let m = &s["mock"];
        assert!(m.grants.env && !m.grants.events);
        assert_eq!(m.memory_bytes, Some(32 << 20));
        assert_eq!(m.call_timeout, Some(std::time::Duration::from_millis(250)));
        assert_eq!(m.instance_reuse, Some(1));
        assert_eq!(m.config["misbehave"]["kind"], "trap");
    }

    #[test]
    fn the_example_config_parses() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agent.hcl");
        let c = AgentConfig::load(&path).unwrap();
        let s = c.component_settings("agent.hcl").unwrap();
        assert!(s["env-inject"].grants.env);
        assert!(s["template"].grants.variables && s["template"].grants.task_dir);
        assert_eq!(
            s["env-inject"].config["env"]["GREETING"],
            "hello from ${NOMAD_TASK_NAME} on ${attr.kernel.name}"
        );
    }

    #[test]
    fn the_state_cache_is_32_mib_unless_set() {
        let c = AgentConfig::parse("", "t.hcl").unwrap();
        assert_eq!(c.client.state_cache_bytes(), 32 << 20);
        let c = AgentConfig::parse("client {\n  state_cache_mb = 4\n}\n", "t.hcl").unwrap();
        assert_eq!(c.client.state_cache_bytes(), 4 << 20);
    }

    /// Found by fuzzing (`fuzz/corpus/agent_config/memory-mb-overflow`): the MiB were
    /// shifted into bytes and wrapped, so 2^54 MiB became a limit of 0 bytes.
    #[test]
    fn a_memory_limit_past_the_address_space_is_an_error_naming_it() {
        let text = "plugin \"mock\" {\n  limits {\n    memory_mb = 18014398509481984\n  }\n}\n";
        let c = AgentConfig::parse(text, "t.hcl").unwrap();
        let e = c.component_settings("t.hcl").unwrap_err();
        assert!(e.to_string().contains("limits.memory_mb"), "{e}");
    }

    #[test]
    fn a_second_client_block_is_an_error_not_dropped() {
        let e = AgentConfig::parse(
            "client {\n  gc_max_allocs = 3\n}\nclient {\n  node_class = \"x\"\n}\n",
            "two.hcl",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("two.hcl") && e.contains("only one \"client\" block"),
            "{e}"
        );
        let one = AgentConfig::parse("client {\n  gc_max_allocs = 3\n}\n", "one.hcl").unwrap();
        assert_eq!(one.client.gc_max_allocs, Some(3));
    }

    #[test]
    fn unknown_keys_are_errors() {
        let e = AgentConfig::parse("bogus = 1", "t.hcl").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }
}
