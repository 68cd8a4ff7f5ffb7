//! Host-owned types: what the host interfaces and the embedder's plugin clients exchange,
//! independent of any contract version. Each contract version's bindings convert to and
//! from these ([`crate::bindings`]), so a second version changes the bindings module and
//! the plugin clients, never the code above them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why a host call failed, as the guest sees it (`host-error` in every contract version).
/// Never a trap: a guest gets it as a value and decides what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The component has no grant for this call (names the capability and what was asked).
    #[error("denied: {0}")]
    Denied(String),
    /// The object named in the call does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The arguments were invalid (names the argument).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The host tried and failed.
    #[error("failed: {0}")]
    Failed(String),
}

impl HostError {
    /// The `denied` answer of a call the component has no grant for.
    pub fn denied(component: &str, capability: &str, what: &str) -> Self {
        Self::Denied(format!(
            "component {component:?} has no `{capability}` grant ({what})"
        ))
    }

    /// The `failed` answer of a call whose embedder service this runtime was built without.
    pub fn unavailable(what: &str) -> Self {
        Self::Failed(format!("{what} is not available in this runtime"))
    }
}

/// A task's environment plus the node keys `${...}` can name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskEnv {
    /// Environment variables.
    pub env: BTreeMap<String, String>,
    /// Node keys: `node.unique.id`, `node.datacenter`, `attr.<name>`, `meta.<name>`, ...
    /// Shared: every copy of a task's env names the same node.
    pub node: std::sync::Arc<BTreeMap<String, String>>,
    /// The task's secrets as `${secret.NAME.KEY}` names them (`secret.NAME.KEY`): for
    /// interpolation only, never the environment itself, and never stored.
    pub secrets: std::sync::Arc<BTreeMap<String, String>>,
}

impl TaskEnv {
    /// One variable; `secret.NAME.KEY` is the task's secret (a template's `{{ env
    /// "secret.db.password" }}`), which is no variable of the environment.
    pub fn get(&self, key: &str) -> Option<&str> {
        match key.strip_prefix("secret.") {
            Some(_) => self.secrets.get(key).map(String::as_str),
            None => self.env.get(key).map(String::as_str),
        }
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
                    let found = match key.strip_prefix("secret.") {
                        Some(_) => self.secrets.get(key),
                        None => self.node.get(key).or_else(|| self.env.get(key)),
                    };
                    match found {
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

/// A typed attribute value, as Nomad's fingerprint attributes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Attribute {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Boolean(bool),
}

impl std::fmt::Display for Attribute {
    /// Nomad's string form of an attribute.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attribute::Str(s) => f.write_str(s),
            Attribute::Int(i) => write!(f, "{i}"),
            Attribute::Float(x) => write!(f, "{x}"),
            Attribute::Boolean(b) => write!(f, "{b}"),
        }
    }
}

/// A field of a configuration that failed validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// Dotted path of the field, e.g. `args[1]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Rotation of a task's log files (Nomad's `logs` block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogConfig {
    /// Files kept per stream.
    pub max_files: u32,
    /// Size at which a file is rotated, MiB.
    pub max_file_size_mb: u32,
}

impl Default for LogConfig {
    /// Nomad's defaults: ten files of 10 MiB per stream.
    fn default() -> Self {
        Self {
            max_files: 10,
            max_file_size_mb: 10,
        }
    }
}

impl LogConfig {
    /// Size at which a file is rotated, bytes (at least 1 MiB).
    pub fn max_bytes(&self) -> u64 {
        u64::from(self.max_file_size_mb.max(1)) << 20
    }
}

/// A host path mounted into a task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Mount {
    /// Path inside the task.
    pub task_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A device node exposed to a task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceNode {
    /// Path inside the task.
    pub task_path: String,
    /// Path on the host.
    pub host_path: String,
    /// cgroup permissions, e.g. "rwm".
    pub permissions: String,
}

/// One device reservation made for a task (what a device plugin's `reserve` returned).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    /// Environment variables.
    pub env: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    /// Device nodes.
    pub devices: Vec<DeviceNode>,
    /// Host paths of `mounts` and `devices` outside the plugin's `read_paths` grant: the
    /// host binds or makes none of them for an isolated task (they stay in the task
    /// config, for a driver's information).
    #[serde(default)]
    pub ungranted: Vec<String>,
}

impl Reservation {
    /// The mounts the host may bind: those inside the plugin's grant.
    pub fn granted_mounts(&self) -> impl Iterator<Item = &Mount> {
        self.mounts
            .iter()
            .filter(|m| !self.ungranted.contains(&m.host_path))
    }

    /// The device nodes the host may make: those inside the plugin's grant.
    pub fn granted_devices(&self) -> impl Iterator<Item = &DeviceNode> {
        self.devices
            .iter()
            .filter(|d| !self.ungranted.contains(&d.host_path))
    }
}

/// How a task or process ended (Nomad's ExitResult).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExitResult {
    /// Exit code.
    pub exit_code: i32,
    /// Signal that ended it; 0 if none.
    pub signal: i32,
    /// Killed for exceeding its memory.
    pub oom_killed: bool,
    /// An error, when the exit could not be observed normally.
    pub err: Option<String>,
}

impl ExitResult {
    /// Exited with code 0, no signal and no error.
    pub fn successful(&self) -> bool {
        self.exit_code == 0 && self.signal == 0 && self.err.is_none()
    }
}

/// Resource usage of a task or process.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// CPU time in user mode, ns.
    pub cpu_user_ns: u64,
    /// CPU time in system mode, ns.
    pub cpu_system_ns: u64,
    /// CPU use since the previous sample, percent of one core.
    pub cpu_percent: f64,
    /// Sample time, ns since the Unix epoch.
    pub timestamp: u64,
}

/// Which of a task's logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogStream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
}

/// A process to start for a driver (`process.spawn`), its path already resolved and
/// checked against the component's grant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    /// Absolute executable path.
    pub path: String,
    /// Arguments, without the executable.
    pub args: Vec<String>,
    /// Complete environment.
    pub env: Vec<(String, String)>,
    /// Working directory; empty for the host's.
    pub cwd: String,
    /// Where stdout goes (see the contract); empty discards it.
    pub stdout_path: String,
    /// Where stderr goes; empty discards it.
    pub stderr_path: String,
    /// Rotation of the output files; `None` appends to the paths as given.
    pub logs: Option<LogConfig>,
    /// User to run as; empty for the agent's.
    pub user: String,
    /// The name the process is given as `argv[0]` when `path` is where a symlink led (the
    /// name the component asked for, so multi-call programs still see it); empty: `path`.
    pub argv0: String,
    /// Set by the host, never by a guest: the allocation dir that `cwd`, `stdout_path` and
    /// `stderr_path` lie beneath (checked), where they are opened without following a
    /// link. Empty: a spawn outside any task, with no output and no working directory.
    pub alloc_root: String,
}

/// How an isolated process is confined (`process.spawn-isolated`); the fields are the
/// contract's `isolation` record. Serializable because the agent hands it to the task
/// executor, which carries it out.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Isolation {
    /// A new PID namespace.
    pub pid_namespace: bool,
    /// A new IPC namespace.
    pub ipc_namespace: bool,
    /// A new UTS namespace.
    pub uts_namespace: bool,
    /// The new root; empty for none.
    pub chroot: String,
    /// Host paths bound read-only (unless `read_only` is false) into the chroot.
    pub binds: Vec<Mount>,
    /// User to run as; empty for `nobody`.
    pub user: String,
    /// Set no_new_privs.
    pub no_new_privs: bool,
    /// Memory limit, bytes; 0 for none.
    pub memory_bytes: u64,
    /// Memory ceiling, bytes; above `memory_bytes` it is the hard limit.
    pub memory_max_bytes: u64,
    /// cgroup v1 CPU shares; 0 for the default.
    pub cpu_shares: u64,
    /// cpuset list; empty for any CPU.
    pub cpuset_cpus: String,
    /// Set by the host from the operator's grant, never by a guest: uids the process may
    /// not run as (checked on the resolved user, whatever name the task gave).
    pub denied_uids: crate::grants::IdRanges,
    /// Set by the host: gids the process may not run as.
    pub denied_gids: crate::grants::IdRanges,
    /// Set by the host: the cgroup's `pids.max`; 0 for none.
    pub pids_max: u64,
    /// Set by the host from the task's reservations: device nodes made in the chroot's
    /// `/dev` (a task path under `/dev`, the host node's type and numbers).
    pub device_nodes: Vec<DeviceNode>,
}

/// A process's state as the host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessStatus {
    /// Still running.
    Running,
    /// Exited, this way.
    Exited(ExitResult),
}

/// A task event a driver emitted (`events.emit`).
#[derive(Debug, Clone, PartialEq)]
pub struct DriverEvent {
    /// Component that emitted it.
    pub component: String,
    /// Task invocation id (`<alloc>/<task>/<uuid8>`).
    pub task_id: String,
    pub message: String,
    /// Details (Nomad's annotations).
    pub details: Vec<(String, String)>,
}

/// Who a task is, as Nomad's workload identity names it: what `variables` checks a path
/// against. The embedder fills it in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadIdentity {
    /// The job's namespace.
    pub namespace: String,
    /// The job id the identity carries: a periodic or dispatched child's parent job.
    pub job_id: String,
    /// Task group name.
    pub group: String,
    /// Task name.
    pub task: String,
}

/// A Nomad Variable without its items (`variables.list`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VariableMetadata {
    /// Namespace.
    pub namespace: String,
    /// Path.
    pub path: String,
    /// Change index of its creation.
    pub create_index: u64,
    /// Change index of its last write.
    pub modify_index: u64,
    /// Creation time, ns since the Unix epoch.
    pub create_time: i64,
    /// Last write, ns since the Unix epoch.
    pub modify_time: i64,
}

/// One registration of a Nomad-native service (`services.get`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRegistration {
    /// Registration id.
    pub id: String,
    /// The service's name.
    pub service_name: String,
    /// Namespace.
    pub namespace: String,
    /// Node the allocation runs on.
    pub node_id: String,
    /// Datacenter of that node.
    pub datacenter: String,
    /// Job id.
    pub job_id: String,
    /// Allocation id.
    pub alloc_id: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Address.
    pub address: String,
    /// Port.
    pub port: u16,
}

/// A task's `artifact` block as the `artifacts` interface hands it to a hook: its strings
/// already interpolated in the task's environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Artifact {
    /// Where to fetch from.
    pub source: String,
    /// Where it goes, relative to the task dir.
    pub destination: String,
    /// `any`, `file` or `dir`.
    pub mode: String,
    /// Getter options, sorted by key.
    pub options: Vec<(String, String)>,
    /// Request headers, sorted by name.
    pub headers: Vec<(String, String)>,
}

/// A service name with the union of its registrations' tags (`services.list`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceStub {
    /// The service's name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Tags, sorted, once each.
    pub tags: Vec<String>,
}

/// `services.get`'s `choose`: at most `count` registrations picked for `key`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceChoice {
    /// How many at most.
    pub count: u32,
    /// The key.
    pub key: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> TaskEnv {
        let mut e = TaskEnv::default();
        e.env.insert("A".into(), "1".into());
        e.env.insert("attr.kernel.name".into(), "env-loses".into());
        std::sync::Arc::make_mut(&mut e.node).insert("attr.kernel.name".into(), "linux".into());
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

/// What `alloc exec` asks of a task (the `task-exec` contract's `exec-request`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecRequest {
    /// The command and its arguments, never empty.
    pub command: Vec<String>,
    /// A pseudo-terminal was asked for.
    pub tty: bool,
    /// The task's environment, as its start was given it.
    pub env: Vec<(String, String)>,
    /// The task's directory on the host.
    pub task_dir: String,
    /// The user the task runs as, as its start was given it.
    pub user: String,
}

/// A command to run for `alloc exec`, checked by the host against the driver's grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCommand {
    /// What to run (its path resolved; output paths and logs cleared: the session gets
    /// the output).
    pub cmd: Command,
    /// Run inside this running isolated process of the driver's (its namespaces, root,
    /// cgroup and user, read from the process itself); `None` for a plain host process.
    pub join: Option<u64>,
    /// Give it a pseudo-terminal.
    pub tty: bool,
    /// The task's dir (the host's path; a joined command's root): a joined command's
    /// `path` and `cwd` inside it are taken relative to it.
    pub task_dir: String,
}

/// What a driver-answered exec session says back (the contract's `exec-output`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// Bytes for the caller's stdout.
    pub stdout: Vec<u8>,
    /// Bytes for the caller's stderr.
    pub stderr: Vec<u8>,
    /// What the driver keeps between inputs.
    pub state: Vec<u8>,
    /// The session ended with this exit code.
    pub exited: Option<i32>,
}

/// An input to an exec session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecInput {
    /// Bytes for its stdin.
    Stdin(Vec<u8>),
    /// The caller closed its stdin.
    StdinClosed,
    /// The caller's terminal changed size.
    Resize {
        /// Rows.
        rows: u16,
        /// Columns.
        cols: u16,
    },
}

/// What the host does with a process run for `alloc exec` besides its stdio.
pub trait ExecControl: Send + Sync {
    /// The terminal's new size (a session without a terminal refuses).
    fn resize(&self, rows: u16, cols: u16) -> Result<(), HostError>;
    /// End it (SIGKILL), as when the caller goes away.
    fn kill(&self);
    /// How it exited, once it has.
    fn wait(&self) -> futures::future::BoxFuture<'_, ExitResult>;
}

/// A process run for `alloc exec`: its stdio and its control.
pub struct ExecProcess {
    /// Its stdin (the terminal's input side, with a tty).
    pub stdin: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    /// Its stdout (the terminal's output, with a tty: stderr included).
    pub stdout: std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>,
    /// Its stderr; `None` with a tty.
    pub stderr: Option<std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>>,
    /// Resize, kill, wait.
    pub control: Box<dyn ExecControl>,
}

impl std::fmt::Debug for ExecProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecProcess")
            .field("stderr", &self.stderr.is_some())
            .finish_non_exhaustive()
    }
}

/// How an exec started: a host process, or a session the driver answers itself.
#[derive(Debug)]
pub enum ExecStarted {
    /// A host process whose stdio the caller streams.
    Process(ExecProcess),
    /// The driver's first output; the next come from `exec-step`.
    Session(ExecOutput),
}
