//! What a job asks for that this agent accepts and does not act on. Each is named with
//! its path in the register, plan and validate answers' `Warnings` (Nomad's field), or,
//! with `client { unsupported_job_features = "error" }`, refused.
//!
//! The job keeps such fields as given (its `kept` maps), so it reads back as it was
//! registered; this module says which of them change nothing, and why. As later work acts
//! on a block, its entry leaves the tables below.

use std::fmt;

use serde_json::Value;

use super::{Job, Kept};

/// One field the agent does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unacted {
    /// Its path: `Job.TaskGroups[0].Tasks[0].Artifacts`.
    pub path: String,
    /// What the agent does instead.
    pub why: &'static str,
}

impl fmt::Display for Unacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.why)
    }
}

const NOT_YET: &str = "not supported by this agent yet; ignored";
const ONE_NODE: &str = "no effect on a single node; ignored";

/// Job-level fields, by key.
const JOB: &[(&str, &str)] = &[
    (
        "AllAtOnce",
        "no effect: this agent places a job's allocations in one plan already",
    ),
    ("Affinities", ONE_NODE),
    ("Spreads", ONE_NODE),
    (
        "Update",
        "no effect: only service jobs are deployed; a new version replaces the allocations at once",
    ),
    (
        "Multiregion",
        "no effect: this agent is one region; ignored",
    ),
    ("Migrate", ONE_NODE),
    ("UI", "kept; this agent's web UI does not show it"),
];

/// Group-level fields, by key.
const GROUP: &[(&str, &str)] = &[
    ("Affinities", ONE_NODE),
    ("Spreads", ONE_NODE),
    (
        "Update",
        "no effect: only service jobs are deployed; a new version replaces the allocations at once",
    ),
    ("Migrate", ONE_NODE),
    (
        "Scaling",
        "kept; no autoscaler acts on it (job scale does not need it)",
    ),
    ("Consul", "no Consul here; ignored"),
    (
        "StopAfterClientDisconnect",
        "no effect: the client runs in the agent and never loses its server",
    ),
    (
        "MaxClientDisconnect",
        "no effect: the client runs in the agent and never loses its server",
    ),
    (
        "PreventRescheduleOnLost",
        "no effect: the client runs in the agent and never loses its server",
    ),
    (
        "Disconnect",
        "no effect: the client runs in the agent and never loses its server",
    ),
    (
        "MaxRunDuration",
        "not supported by this agent yet: the allocation runs until it ends",
    ),
];

/// Task-level fields, by key.
const TASK: &[(&str, &str)] = &[
    ("Affinities", ONE_NODE),
    ("Vault", "no Vault here: the task gets no Vault token"),
    ("Consul", "no Consul here; ignored"),
    ("CSIPluginConfig", "no CSI here; ignored"),
    (
        "Identity",
        "not supported by this agent yet: no identity token is written for the task",
    ),
    (
        "Identities",
        "not supported by this agent yet: no identity token is written for the task",
    ),
    ("Actions", NOT_YET),
    ("ScalingPolicies", "kept; no autoscaler acts on it"),
    ("Kind", "no effect: a field of Consul Connect's; ignored"),
    (
        "Schedule",
        "not supported by this agent yet: the task runs whatever the schedule",
    ),
];

/// Fields of a task's smaller blocks, kept there as given, by block and key.
const TASK_PARTS: &[(&str, &str, &str)] = &[
    (
        "Resources",
        "IOPS",
        "no effect: this agent does not limit IOPS",
    ),
    (
        "Resources",
        "Networks",
        "not supported: ports are reserved in the group's network block",
    ),
    (
        "Resources",
        "NUMA",
        "no effect: this agent does not place by NUMA node",
    ),
    (
        "Resources",
        "SecretsMB",
        "not supported by this agent yet: there is no secrets dir of that size",
    ),
    (
        "LogConfig",
        "Disabled",
        "not supported: this agent always keeps the task's logs",
    ),
];

/// Fields of a `service` block, by key: registered with this agent's own (Nomad-native)
/// service discovery, the rest of the block is not acted on yet.
const SERVICE: &[(&str, &str)] = &[
    (
        "Connect",
        "no Consul Connect here: the service is registered without a sidecar",
    ),
    (
        "Identity",
        "no Consul here: no service identity token is made",
    ),
    ("TaggedAddresses", "no Consul here; ignored"),
    ("EnableTagOverride", "no Consul here; ignored"),
    (
        "CanaryMeta",
        "no effect: Nomad-native registrations carry no meta",
    ),
    (
        "Meta",
        "no effect: Nomad-native registrations carry no meta",
    ),
    ("Weights", "no Consul here; ignored"),
];

/// Fields of a `check` block, by key.
const CHECK: &[(&str, &str)] = &[
    ("Expose", "no Consul Connect here; ignored"),
    (
        "FailuresBeforeWarning",
        "no effect: a check here is passing or critical, never warning",
    ),
    ("TLSServerName", NOT_YET),
    ("GRPCService", "grpc checks are not run by this agent yet"),
    ("GRPCUseTLS", "grpc checks are not run by this agent yet"),
];

/// A `service` block's parts the agent does not act on; `Provider = "consul"` (Nomad's
/// default) is registered with the agent's own service discovery, and said so.
fn services(kept: &Kept, path: &str, out: &mut Vec<Unacted>) {
    let Some(list) = kept.get("Services").and_then(Value::as_array) else {
        return;
    };
    for (i, s) in list.iter().enumerate() {
        let sp = format!("{path}.Services[{i}]");
        if let Some(o) = s.as_object() {
            let fields: Kept = o.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            from(SERVICE, &fields, &sp, out);
        }
        for (j, c) in s
            .get("Checks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let cp = format!("{sp}.Checks[{j}]");
            if let Some(o) = c.as_object() {
                let fields: Kept = o.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                from(CHECK, &fields, &cp, out);
            }
            if matches!(
                c.get("Type").and_then(Value::as_str),
                Some("script" | "grpc")
            ) {
                out.push(Unacted {
                    path: format!("{cp}.Type"),
                    why: "not run by this agent yet (http, tcp and check components are): the service is registered and this check never runs",
                });
            }
        }
        let provider = s.get("Provider").and_then(Value::as_str).unwrap_or("");
        if provider != "nomad" {
            out.push(Unacted {
                path: format!("{sp}.Provider"),
                why: "no Consul here: registered with this agent's own service discovery (provider \"nomad\") instead",
            });
        }
    }
}

/// Fields of a task's templates, kept there as given, by key.
// `Splay`, `Once`, `Wait`, `Uid` and `Gid` are acted on (`host/src/taskrunner/templates.rs`); a restart renders
// templates again whatever `RenderTemplates` says.
const TEMPLATE: &[(&str, &str)] = &[("VaultGrace", "no Vault here; ignored")];

/// Fields of a template's `change_script` the agent does not act on (`Command`, `Args`,
/// `Timeout` and `FailOnError` it does).
const CHANGE_SCRIPT: &[(&str, &str)] = &[(
    "RunOnFirstRender",
    "not supported by this agent yet: the script runs when a render changes the file, not after the first render",
)];

/// Fields of a task's artifacts, kept there as given, by key.
const ARTIFACT: &[(&str, &str)] = &[
    (
        "GetterInsecure",
        "not supported: the artifact hook always verifies TLS certificates",
    ),
    (
        "Chown",
        "not supported by this agent yet: the files belong to the agent's user",
    ),
];

/// Fields of a task's secrets, kept there as given, by key.
const SECRET: &[(&str, &str)] = &[(
    "Env",
    "not acted on: a provider component is given its config, not an environment",
)];

/// Fields of a group's volumes, kept there as given, by key.
const VOLUME: &[(&str, &str)] = &[
    (
        "AccessMode",
        "no effect: a static host volume is mounted as the volume and the mount say",
    ),
    (
        "AttachmentMode",
        "no effect: a static host volume is mounted as the volume and the mount say",
    ),
    ("MountOptions", "no CSI here; ignored"),
    (
        "Sticky",
        "not supported: only dynamic host volumes are sticky, and this agent has none",
    ),
];

/// Fields of a task's volume mounts, kept there as given, by key.
const VOLUME_MOUNT: &[(&str, &str)] = &[("SELinuxLabel", "no SELinux relabelling here; ignored")];

/// A group's volumes and its tasks' mounts the agent does not act on: a CSI volume (no CSI
/// here: the mount is not made), fields of [`VOLUME`] and [`VOLUME_MOUNT`], a propagation
/// other than `private`.
fn volumes(group: &super::TaskGroup, gp: &str, out: &mut Vec<Unacted>) {
    for (name, v) in &group.volumes {
        let vp = format!("{gp}.Volumes[{name:?}]");
        if v.volume_type == "csi" {
            out.push(Unacted {
                path: format!("{vp}.Type"),
                why: "no CSI here: the group's tasks run without this volume",
            });
        }
        from(VOLUME, &v.kept, &vp, out);
    }
    for (t, task) in group.tasks.iter().enumerate() {
        for (i, m) in task.volume_mounts.iter().enumerate() {
            let mp = format!("{gp}.Tasks[{t}].VolumeMounts[{i}]");
            from(VOLUME_MOUNT, &m.kept, &mp, out);
            if m.propagation_mode != "private" {
                out.push(Unacted {
                    path: format!("{mp}.PropagationMode"),
                    why: "not supported by this agent yet: the mount is private",
                });
            }
        }
    }
}

/// Nomad's defaults a client may send back unchanged, by key.
const DEFAULTS: &[(&str, u64)] = &[("Splay", 5_000_000_000)];
/// The same for text values: the node pool every job is in unless it says otherwise.
const TEXT_DEFAULTS: &[(&str, &str)] = &[("NodePool", "default")];

fn from(level: &[(&str, &'static str)], kept: &Kept, path: &str, out: &mut Vec<Unacted>) {
    for (key, v) in kept {
        // A key not in the table is one the agent acts on (`Constraints`); a value that
        // asks for nothing (`false`, `[]`, Nomad's default) changes nothing either.
        // A service group's `Migrate` is always sent, Nomad's default unless asked.
        let migrate = (key == "Migrate" && path.contains("TaskGroups"))
            .then(super::json::group::default_migrate);
        let default = migrate.or_else(|| {
            DEFAULTS
                .iter()
                .find(|(k, _)| k == key)
                .map(|&(_, d)| Value::from(d))
                .or_else(|| {
                    TEXT_DEFAULTS
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|&(_, d)| Value::from(d))
                })
        });
        if !asks(v, default.as_ref()) {
            continue;
        }
        if let Some((_, why)) = level.iter().find(|(k, _)| k == key) {
            out.push(Unacted {
                path: format!("{path}.{key}"),
                why,
            });
        }
    }
}

/// Every field of `job` the agent does not act on, in the order of the job.
pub fn unacted(job: &Job) -> Vec<Unacted> {
    let mut out = Vec::new();
    // A service job's `Update` is its groups' deployment strategy.
    let mut job_kept = job.kept.clone();
    if job.job_type == super::JobType::Service {
        job_kept.remove("Update");
    }
    from(JOB, &job_kept, "Job", &mut out);
    for (g, group) in job.task_groups.iter().enumerate() {
        let gp = format!("Job.TaskGroups[{g}]");
        from(GROUP, &group.kept, &gp, &mut out);
        services(&group.kept, &gp, &mut out);
        volumes(group, &gp, &mut out);
        for (t, task) in group.tasks.iter().enumerate() {
            let tp = format!("{gp}.Tasks[{t}]");
            from(TASK, &task.kept, &tp, &mut out);
            services(&task.kept, &tp, &mut out);
            for (part, kept) in [
                ("Resources", &task.resources.kept),
                ("LogConfig", &task.log_config.kept),
                ("RestartPolicy", &task.restart_policy.kept),
            ] {
                let table: Vec<(&str, &'static str)> = TASK_PARTS
                    .iter()
                    .filter(|(p, _, _)| *p == part)
                    .map(|&(_, k, why)| (k, why))
                    .collect();
                from(&table, kept, &format!("{tp}.{part}"), &mut out);
            }
            for (i, s) in task.secrets.iter().enumerate() {
                from(SECRET, &s.kept, &format!("{tp}.Secrets[{i}]"), &mut out);
            }
            for (i, a) in task.artifacts.iter().enumerate() {
                from(ARTIFACT, &a.kept, &format!("{tp}.Artifacts[{i}]"), &mut out);
            }
            for (i, tmpl) in task.templates.iter().enumerate() {
                from(
                    TEMPLATE,
                    &tmpl.kept,
                    &format!("{tp}.Templates[{i}]"),
                    &mut out,
                );
                if let Some(Value::Object(cs)) = tmpl.kept.get("ChangeScript") {
                    let cs: std::collections::BTreeMap<String, Value> =
                        cs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    from(
                        CHANGE_SCRIPT,
                        &cs,
                        &format!("{tp}.Templates[{i}].ChangeScript"),
                        &mut out,
                    );
                }
            }
        }
    }
    out
}

/// Whether a kept value asks for anything: not null, false, zero, empty, nor `default`.
pub(crate) fn asks(v: &Value, default: Option<&Value>) -> bool {
    let blank = match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        // An object asks for something when one of its fields does.
        Value::Object(o) => o.values().all(|x| !asks(x, None)),
    };
    !blank && default != Some(v)
}

/// Nomad's text for a list of warnings (`helper.MergeMultierrorWarnings`): empty when there
/// are none, else `1 warning:` or `N warnings:` and one `* ` line each.
pub fn warnings_text<T: fmt::Display>(list: &[T]) -> String {
    let mut s = match list.len() {
        0 => return String::new(),
        1 => "1 warning:\n".to_string(),
        n => format!("{n} warnings:\n"),
    };
    for w in list {
        s.push_str(&format!("\n* {w}"));
    }
    s
}
