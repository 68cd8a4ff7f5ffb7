//! Jobspec: Nomad API JSON jobs into one typed model with Nomad's defaults.
//!
//! Field names on the wire are Nomad's (`ID`, `TaskGroups`, `MemoryMB`, durations in ns).
//! Errors name the path of the bad field (`Job.TaskGroups[0].Tasks[1].Resources.MemoryMB`).
//! Cluster-only blocks Nomad's tools send (constraints, update, services, ...) are kept as
//! given, unused, so a job reads back as it was registered; server-set fields are
//! ignored; any other unknown field is an error, so a typo never silently does nothing.

pub mod bounds;
mod device;
mod hcl;
mod json;
mod launch;
pub mod names;
mod reschedule;
pub mod submission;
mod unacted;
mod update;

pub use device::{AFFINITY_OPERATORS, CONSTRAINT_OPERATORS, DeviceAffinity, DeviceConstraint};

pub(crate) use hcl::depth as hcl_depth; // the agent config's HCL is held to it too
pub use hcl::{parse_job_hcl, parse_job_hcl_with_env, parse_job_hcl_with_vars, parse_var_file};
pub use json::{RegisterRequest, parse_job_json, parse_register_request};
pub use launch::{DispatchPayloadConfig, ParameterizedJobConfig, PeriodicConfig};
pub use reschedule::ReschedulePolicy;
use std::collections::BTreeMap;
pub use unacted::{Unacted, unacted, warnings_text};
pub use update::UpdateStrategy;

use serde::{Deserialize, Serialize};

/// A jobspec error, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct JobspecError {
    /// Path of the field, e.g. `Job.TaskGroups[0].Tasks[0].Driver`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl JobspecError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Job type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JobType {
    /// Long-running; restarted when it exits.
    #[default]
    Service,
    /// Runs to completion.
    Batch,
    /// Long-running, one allocation per group on every node: here, on this one (`count`
    /// is ignored, as Nomad ignores it).
    System,
    /// Runs to completion, one allocation per group on every node.
    Sysbatch,
}

impl JobType {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            JobType::Service => "service",
            JobType::Batch => "batch",
            JobType::System => "system",
            JobType::Sysbatch => "sysbatch",
        }
    }

    /// Runs to completion: a task that exits successfully is done, not restarted.
    pub fn runs_to_completion(self) -> bool {
        matches!(self, JobType::Batch | JobType::Sysbatch)
    }

    /// One allocation per group on each node, whatever the group's count.
    pub fn per_node(self) -> bool {
        matches!(self, JobType::System | JobType::Sysbatch)
    }
}

/// A job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Job id.
    #[serde(rename = "ID")]
    pub id: String,
    /// Name (defaults to the id).
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "Type")]
    pub job_type: JobType,
    /// Priority, 1..=100.
    #[serde(rename = "Priority")]
    pub priority: i32,
    #[serde(rename = "Namespace")]
    pub namespace: String,
    #[serde(rename = "Region")]
    pub region: String,
    /// Datacenters (accepted; a single node runs what it is given).
    #[serde(rename = "Datacenters")]
    pub datacenters: Vec<String>,
    #[serde(rename = "Meta")]
    pub meta: BTreeMap<String, String>,
    /// Task groups.
    #[serde(rename = "TaskGroups")]
    pub task_groups: Vec<TaskGroup>,
    /// Launch child jobs on a schedule instead of running this one.
    #[serde(rename = "Periodic", default)]
    pub periodic: Option<PeriodicConfig>,
    /// Run only when dispatched, each dispatch a child job with its own meta and payload.
    #[serde(rename = "ParameterizedJob", default)]
    pub parameterized_job: Option<ParameterizedJobConfig>,
    /// Stopped: its allocations are stopped and no new ones placed.
    #[serde(rename = "Stop", default)]
    pub stop: bool,
    /// The periodic or parameterized job this one was launched from.
    #[serde(rename = "ParentID", default)]
    pub parent_id: String,
    /// Launched by a dispatch of a parameterized job.
    #[serde(rename = "Dispatched", default)]
    pub dispatched: bool,
    /// The idempotency token of the dispatch that launched it.
    #[serde(rename = "DispatchIdempotencyToken", default)]
    pub dispatch_idempotency_token: String,
    /// The dispatch's payload (base64 on the wire).
    #[serde(rename = "Payload", default, with = "payload_base64")]
    pub payload: Vec<u8>,
    /// What the agent keeps about the job beside its spec.
    #[serde(flatten, default)]
    pub state: JobState,
    /// Nomad blocks nothing on one node acts on (constraints, update, ...), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

/// Nomad fields Paddock accepts and does not act on, by name, as the job gave them: kept
/// so that a job reads back as it was registered (and a change to them is a new version).
pub type Kept = BTreeMap<String, serde_json::Value>;

/// The fields of a job the agent sets, not the job file (Nomad's server-set job fields).
/// They are left out when two versions of a job are compared ([`Job::spec_eq`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobState {
    /// pending | running | dead.
    #[serde(rename = "Status", default)]
    pub status: String,
    /// Why, when it helps.
    #[serde(rename = "StatusDescription", default)]
    pub status_description: String,
    /// Marked stable (`/v1/job/{id}/stable`).
    #[serde(rename = "Stable", default)]
    pub stable: bool,
    /// Version: 0 at the first registration, bumped by every change of spec.
    #[serde(rename = "Version", default)]
    pub version: u64,
    /// Submission time of this version, ns.
    #[serde(rename = "SubmitTime", default)]
    pub submit_time: i64,
    /// Change index when the job (as opposed to this version) was created; a job purged
    /// and registered again is a new job with a new create index.
    #[serde(rename = "CreateIndex", default)]
    pub create_index: u64,
    /// Index of the last change of any kind.
    #[serde(rename = "ModifyIndex", default)]
    pub modify_index: u64,
    /// Index of the last change of spec.
    #[serde(rename = "JobModifyIndex", default)]
    pub job_modify_index: u64,
}

/// Bytes as base64 in JSON, as Go encodes a `[]byte`; `null` is empty.
mod payload_base64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        if b.is_empty() {
            return s.serialize_none();
        }
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        match s {
            None => Ok(Vec::new()),
            Some(s) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A task group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskGroup {
    #[serde(rename = "Name")]
    pub name: String,
    /// Number of allocations.
    #[serde(rename = "Count")]
    pub count: u32,
    #[serde(rename = "Tasks")]
    pub tasks: Vec<Task>,
    /// Restart policy (tasks inherit it unless they set their own).
    #[serde(rename = "RestartPolicy")]
    pub restart_policy: RestartPolicy,
    #[serde(rename = "Meta")]
    pub meta: BTreeMap<String, String>,
    /// Ephemeral disk size, MB.
    #[serde(rename = "EphemeralDisk")]
    pub ephemeral_disk: EphemeralDisk,
    /// Delay between deregistration and kill, ns.
    #[serde(rename = "ShutdownDelay")]
    pub shutdown_delay: Option<u64>,
    /// The group's `network` block (host mode): the ports to reserve.
    #[serde(rename = "Networks", default)]
    pub networks: Vec<Network>,
    /// When a failed allocation is replaced: Nomad's `ReschedulePolicy`, defaults merged
    /// (`None` for system and sysbatch jobs, which are never rescheduled).
    #[serde(rename = "ReschedulePolicy", default)]
    pub reschedule_policy: Option<ReschedulePolicy>,
    /// How a new version replaces its allocations: Nomad's `Update`, defaults merged
    /// (service jobs only; `None` for the other types, and for groups stored before).
    #[serde(rename = "Update", default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateStrategy>,
    /// Its blocks nothing here acts on (services, volumes, ...), as given.
    /// Volumes the group's tasks may mount, by the name they mount them with.
    #[serde(rename = "Volumes", default)]
    pub volumes: BTreeMap<String, VolumeRequest>,
    #[serde(flatten, default)]
    pub kept: Kept,
}

/// A group's `network` block. Paddock runs tasks in the host's network namespace (Nomad's
/// `mode = "host"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// `host`.
    #[serde(rename = "Mode")]
    pub mode: String,
    /// `port` blocks with `static`.
    #[serde(rename = "ReservedPorts")]
    pub reserved_ports: Vec<Port>,
    /// `port` blocks without `static`: the client picks a free port.
    #[serde(rename = "DynamicPorts")]
    pub dynamic_ports: Vec<Port>,
}

/// A `port` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Port {
    /// Label (`port "http"`).
    #[serde(rename = "Label")]
    pub label: String,
    /// Static port; 0 for dynamic.
    #[serde(rename = "Value")]
    pub value: u16,
    /// Port the task listens on, when it differs (`NOMAD_PORT_<label>`); 0 = same.
    #[serde(rename = "To")]
    pub to: i32,
}

/// Ephemeral disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EphemeralDisk {
    /// Size, MB.
    #[serde(rename = "SizeMB")]
    pub size_mb: u32,
    #[serde(rename = "Sticky")]
    pub sticky: bool,
    #[serde(rename = "Migrate")]
    pub migrate: bool,
}

/// A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    #[serde(rename = "Name")]
    pub name: String,
    /// Driver name.
    #[serde(rename = "Driver")]
    pub driver: String,
    /// User to run as.
    #[serde(rename = "User")]
    pub user: String,
    /// Driver config block.
    #[serde(rename = "Config")]
    pub config: serde_json::Map<String, serde_json::Value>,
    #[serde(rename = "Env")]
    pub env: BTreeMap<String, String>,
    #[serde(rename = "Meta")]
    pub meta: BTreeMap<String, String>,
    #[serde(rename = "Resources")]
    pub resources: Resources,
    /// Restart policy (merged over the group's).
    #[serde(rename = "RestartPolicy")]
    pub restart_policy: RestartPolicy,
    /// Time between kill signal and SIGKILL, ns.
    #[serde(rename = "KillTimeout")]
    pub kill_timeout: u64,
    /// Kill signal.
    #[serde(rename = "KillSignal")]
    pub kill_signal: String,
    /// Log rotation.
    #[serde(rename = "LogConfig")]
    pub log_config: LogConfig,
    /// Lifecycle hook, if any.
    #[serde(rename = "Lifecycle")]
    pub lifecycle: Option<Lifecycle>,
    /// Leader task.
    #[serde(rename = "Leader")]
    pub leader: bool,
    /// Delay before kill, ns.
    #[serde(rename = "ShutdownDelay")]
    pub shutdown_delay: u64,
    /// Templates, rendered by the `template` hook.
    #[serde(rename = "Templates", default)]
    pub templates: Vec<Template>,
    /// Artifacts, fetched by the `artifact` hook before the task starts.
    #[serde(rename = "Artifacts", default)]
    pub artifacts: Vec<TaskArtifact>,
    /// The group's volumes this task mounts, and where.
    #[serde(rename = "VolumeMounts", default)]
    pub volume_mounts: Vec<VolumeMount>,
    /// Secrets fetched by provider components before the task starts.
    #[serde(rename = "Secrets", default)]
    pub secrets: Vec<TaskSecret>,
    /// Where a dispatched job's payload is written.
    #[serde(rename = "DispatchPayload", default)]
    pub dispatch_payload: Option<DispatchPayloadConfig>,
    /// Its blocks nothing here acts on (services, vault, artifacts, ...), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

/// Task resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU, MHz.
    #[serde(rename = "CPU")]
    pub cpu: u32,
    /// Memory, MB.
    #[serde(rename = "MemoryMB")]
    pub memory_mb: u32,
    /// Memory ceiling, MB (0 = none).
    #[serde(rename = "MemoryMaxMB")]
    pub memory_max_mb: u32,
    /// Nomad's task-level disk, MB: deprecated (a group's disk is its `EphemeralDisk`),
    /// kept as given (0 when not) because Nomad sends it back.
    #[serde(rename = "DiskMB", default)]
    pub disk_mb: u32,
    /// Whole CPU cores reserved for the task alone (Nomad's `cores`), instead of `cpu`:
    /// placement picks free cores, the task gets them as `NOMAD_CPU_CORES` and, under the
    /// `exec` driver, as its cpuset. 0 = none.
    #[serde(rename = "Cores", default)]
    pub cores: u32,
    /// Requested devices.
    #[serde(rename = "Devices")]
    pub devices: Vec<DeviceRequest>,
    /// Nomad fields nothing here acts on (`IOPS`, `NUMA`, ...), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

/// A device request (`device "nvidia/gpu" { count = 1 }`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRequest {
    /// `<vendor>/<type>/<name>`, `<vendor>/<type>` or `<type>`.
    #[serde(rename = "Name")]
    pub name: String,
    /// How many instances.
    #[serde(rename = "Count")]
    pub count: u32,
    /// Rules a device group must meet to be used.
    #[serde(rename = "Constraints", default, with = "device::nil_slice")]
    pub constraints: Vec<DeviceConstraint>,
    /// Preferences that rank the groups that meet the constraints.
    #[serde(rename = "Affinities", default, with = "device::nil_slice")]
    pub affinities: Vec<DeviceAffinity>,
}

/// Restart mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RestartMode {
    /// Fail the task when attempts are used up.
    Fail,
    /// Wait until the interval ends, then try again.
    Delay,
}

/// Restart policy; all durations ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartPolicy {
    /// Restarts allowed per interval.
    #[serde(rename = "Attempts")]
    pub attempts: u32,
    /// Interval, ns.
    #[serde(rename = "Interval")]
    pub interval: u64,
    /// Delay before a restart, ns.
    #[serde(rename = "Delay")]
    pub delay: u64,
    #[serde(rename = "Mode")]
    pub mode: RestartMode,
    /// Nomad fields nothing here acts on (`RenderTemplates`), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

impl RestartPolicy {
    /// Nomad's default for a job type.
    pub fn default_for(t: JobType) -> Self {
        const MIN: u64 = 60_000_000_000;
        match t {
            JobType::Service | JobType::System => Self {
                attempts: 2,
                interval: 30 * MIN,
                delay: 15_000_000_000,
                mode: RestartMode::Fail,
                kept: Kept::new(),
            },
            JobType::Batch | JobType::Sysbatch => Self {
                attempts: 3,
                interval: 24 * 60 * MIN,
                delay: 15_000_000_000,
                mode: RestartMode::Fail,
                kept: Kept::new(),
            },
        }
    }
}

/// Log rotation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogConfig {
    /// Files kept per stream.
    #[serde(rename = "MaxFiles")]
    pub max_files: u32,
    /// Size of one file, MB.
    #[serde(rename = "MaxFileSizeMB")]
    pub max_file_size_mb: u32,
    /// Nomad fields nothing here acts on (`Disabled`), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            max_files: 10,
            max_file_size_mb: 10,
            kept: Kept::new(),
        }
    }
}

/// A task's `template` block, rendered into the task dir by the `template` hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    /// Template file relative to the task dir (instead of `EmbeddedTmpl`).
    #[serde(rename = "SourcePath")]
    pub source_path: String,
    /// Destination, relative to the task dir (or under `${NOMAD_ALLOC_DIR}`).
    #[serde(rename = "DestPath")]
    pub dest_path: String,
    /// Template text.
    #[serde(rename = "EmbeddedTmpl")]
    pub embedded_tmpl: String,
    /// restart, signal, noop or script.
    #[serde(rename = "ChangeMode")]
    pub change_mode: String,
    /// Signal for `signal`.
    #[serde(rename = "ChangeSignal")]
    pub change_signal: String,
    /// File mode, octal.
    #[serde(rename = "Perms")]
    pub perms: String,
    /// Left delimiter.
    #[serde(rename = "LeftDelim")]
    pub left_delim: String,
    /// Right delimiter.
    #[serde(rename = "RightDelim")]
    pub right_delim: String,
    /// The rendered file is env vars for the task.
    #[serde(rename = "Envvars")]
    pub envvars: bool,
    /// A missing key is an error.
    #[serde(rename = "ErrMissingKey")]
    pub err_missing_key: bool,
    /// Nomad fields nothing here acts on (`Wait`, `Uid`, ...), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

/// A task's `artifact` block (Nomad's TaskArtifact): what the `artifact` hook fetches into
/// the task dir before the task starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskArtifact {
    /// Where from (`source`): an `http://` or `https://` URL; others are a third-party
    /// hook's (the built-in one names them).
    #[serde(rename = "GetterSource")]
    pub getter_source: String,
    /// Getter options (`checksum = "sha256:…"`, `archive = "false"`).
    #[serde(rename = "GetterOptions", default)]
    pub getter_options: BTreeMap<String, String>,
    /// Request headers.
    #[serde(rename = "GetterHeaders", default)]
    pub getter_headers: BTreeMap<String, String>,
    /// `any` (Nomad's default), `file` or `dir`.
    #[serde(rename = "GetterMode")]
    pub getter_mode: String,
    /// Where it goes, relative to the task dir (`local/` by default).
    #[serde(rename = "RelativeDest")]
    pub relative_dest: String,
    /// Nomad fields nothing here acts on (`GetterInsecure`, `Chown`), as given.
    #[serde(flatten, default)]
    pub kept: Kept,
}

/// A task's `secret "NAME"` block (Nomad 1.11's Secret): the items a provider component
/// fetches from `path` are `${secret.NAME.KEY}` in the task's interpolation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskSecret {
    /// The name interpolation uses.
    #[serde(rename = "Name")]
    pub name: String,
    /// The secret provider component's name (`nomad`: the built-in one, Nomad Variables).
    #[serde(rename = "Provider")]
    pub provider: String,
    /// Where the provider finds it (a variable's path for `nomad`).
    #[serde(rename = "Path")]
    pub path: String,
    /// The provider's options, as given.
    #[serde(rename = "Config")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// Nomad fields nothing here acts on (`Env`, for Nomad's external plugins), as given.
    #[serde(flatten)]
    pub kept: Kept,
}

impl TaskSecret {
    /// The config as a provider gets it: text values as they are, others as JSON.
    pub fn config_text(&self) -> BTreeMap<String, String> {
        self.config
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect()
    }
}

/// A group's `volume` block (Nomad's VolumeRequest): a host volume of the node by its
/// `source` name (`type = "host"`), or a CSI volume, which this agent does not have.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VolumeRequest {
    /// The name tasks mount it by.
    #[serde(rename = "Name")]
    pub name: String,
    /// `host` or `csi`.
    #[serde(rename = "Type")]
    pub volume_type: String,
    /// The node's volume: a `client { host_volume "<source>" }` name.
    #[serde(rename = "Source")]
    pub source: String,
    /// Every mount of it is read-only.
    #[serde(rename = "ReadOnly")]
    pub read_only: bool,
    /// Each allocation gets the volume `<source>[<index>]`.
    #[serde(rename = "PerAlloc")]
    pub per_alloc: bool,
    /// Nomad fields nothing here acts on (`AccessMode`, `AttachmentMode`, `Sticky`,
    /// `MountOptions`), as given.
    #[serde(flatten)]
    pub kept: Kept,
}

/// A task's `volume_mount` block (Nomad's VolumeMount).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VolumeMount {
    /// The group volume's name.
    #[serde(rename = "Volume")]
    pub volume: String,
    /// Where the task sees it.
    #[serde(rename = "Destination")]
    pub destination: String,
    /// This mount is read-only.
    #[serde(rename = "ReadOnly")]
    pub read_only: bool,
    /// `private` (the only one made here), `host-to-task` or `bidirectional`.
    #[serde(rename = "PropagationMode")]
    pub propagation_mode: String,
    /// Nomad fields nothing here acts on (`SELinuxLabel`), as given.
    #[serde(flatten)]
    pub kept: Kept,
}

/// Lifecycle hook of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// `prestart`, `poststart` or `poststop`.
    #[serde(rename = "Hook")]
    pub hook: String,
    /// Keep running beside the main tasks.
    #[serde(rename = "Sidecar")]
    pub sidecar: bool,
}

impl Job {
    /// The job id its tasks' workload identity carries (Nomad's `GetIDforWorkloadIdentity`):
    /// a periodic or dispatched child acts as its parent job.
    pub fn id_for_workload_identity(&self) -> &str {
        if self.parent_id.is_empty() {
            &self.id
        } else {
            &self.parent_id
        }
    }

    /// How many allocations of `group` this node runs: its `count`, or one for a system or
    /// sysbatch job, whose `count` Nomad ignores.
    pub fn placed_count(&self, group: &TaskGroup) -> u32 {
        if self.job_type.per_node() {
            1
        } else {
            group.count
        }
    }

    /// Look up a group by name.
    pub fn group(&self, name: &str) -> Option<&TaskGroup> {
        self.task_groups.iter().find(|g| g.name == name)
    }

    /// Whether two jobs have the same spec, whatever the agent recorded about them.
    pub fn spec_eq(&self, other: &Job) -> bool {
        let strip = |j: &Job| {
            let mut j = j.clone();
            j.state = JobState::default();
            j
        };
        strip(self) == strip(other)
    }

    /// Launches children on a schedule instead of running.
    pub fn is_periodic(&self) -> bool {
        self.periodic.is_some()
    }

    /// Runs only when dispatched (a dispatched child is not itself parameterized).
    pub fn is_parameterized(&self) -> bool {
        self.parameterized_job.is_some() && !self.dispatched
    }

    /// A job that places no allocations of its own: its children do.
    pub fn is_parent(&self) -> bool {
        self.is_periodic() || self.is_parameterized()
    }
}
