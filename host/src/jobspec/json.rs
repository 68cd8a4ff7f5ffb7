//! Nomad API JSON (`{"Job": {...}}`) into the typed model. A small reader walks the JSON so
//! every error carries the exact path of the field; `null` counts as absent, as Nomad's
//! own tools send nulls for unset fields.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::*;

type R<T> = Result<T, JobspecError>;

/// Cluster-only or server-side fields accepted and ignored, per object kind.
const IGNORED_JOB: &[&str] = &[
    "Stop",
    "ParentID",
    "Dispatched",
    "DispatchIdempotencyToken",
    "Payload",
    "ConsulToken",
    "ConsulNamespace",
    "VaultToken",
    "VaultNamespace",
    "NomadTokenID",
    "Status",
    "StatusDescription",
    "Stable",
    "Version",
    "SubmitTime",
    "CreateIndex",
    "ModifyIndex",
    "JobModifyIndex",
    "AllAtOnce",
    "NodePool",
    "Constraints",
    "Affinities",
    "Spreads",
    "Update",
    "Multiregion",
    "Periodic",
    "ParameterizedJob",
    "Reschedule",
    "Migrate",
    "UI",
    "VersionTag",
];
const IGNORED_GROUP: &[&str] = &[
    "Constraints",
    "Affinities",
    "Spreads",
    "Update",
    "Migrate",
    "ReschedulePolicy",
    "Scaling",
    "Services",
    "Volumes",
    "Consul",
    "StopAfterClientDisconnect",
    "MaxClientDisconnect",
    "PreventRescheduleOnLost",
    "Disconnect",
    "MaxRunDuration",
];
const IGNORED_TASK: &[&str] = &[
    "Constraints",
    "Affinities",
    "Services",
    "Vault",
    "Consul",
    "Artifacts",
    "DispatchPayload",
    "VolumeMounts",
    "CSIPluginConfig",
    "Identity",
    "Identities",
    "Actions",
    "ScalingPolicies",
    "Kind",
    "Schedule",
    "Secrets",
];

struct Obj<'a> {
    path: String,
    map: &'a Map<String, Value>,
    seen: BTreeSet<&'static str>,
}

impl<'a> Obj<'a> {
    fn new(path: String, v: &'a Value) -> R<Self> {
        match v {
            Value::Object(map) => Ok(Self {
                path,
                map,
                seen: BTreeSet::new(),
            }),
            other => Err(JobspecError::new(
                path,
                format!("expected an object, found {}", kind(other)),
            )),
        }
    }

    fn field(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.seen.insert(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn string(&mut self, key: &'static str) -> R<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected a string, found {}", kind(o)),
            )),
        }
    }

    fn required_string(&mut self, key: &'static str) -> R<String> {
        match self.string(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(JobspecError::new(self.field(key), "must not be empty")),
            None => Err(JobspecError::new(self.field(key), self.missing(key))),
        }
    }

    /// "missing required field", with a hint when a key that looks like a typo of it is there.
    fn missing(&self, key: &str) -> String {
        let typo = self
            .map
            .keys()
            .find(|k| k.as_str() != key && close(&k.to_lowercase(), &key.to_lowercase()));
        match typo {
            Some(k) => format!("missing required field (found {k:?}: a typo?)"),
            None => "missing required field".into(),
        }
    }

    fn uint(&mut self, key: &'static str, max: u64) -> R<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v <= max => Ok(Some(v)),
                _ => Err(JobspecError::new(
                    self.field(key),
                    format!("expected an integer between 0 and {max}, found {n}"),
                )),
            },
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected an integer, found {}", kind(o)),
            )),
        }
    }

    fn u32(&mut self, key: &'static str) -> R<Option<u32>> {
        Ok(self.uint(key, u32::MAX as u64)?.map(|v| v as u32))
    }

    fn boolean(&mut self, key: &'static str) -> R<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected a boolean, found {}", kind(o)),
            )),
        }
    }

    fn string_map(&mut self, key: &'static str) -> R<BTreeMap<String, String>> {
        let Some(v) = self.get(key) else {
            return Ok(BTreeMap::new());
        };
        let Value::Object(m) = v else {
            return Err(JobspecError::new(
                self.field(key),
                format!("expected an object of strings, found {}", kind(v)),
            ));
        };
        m.iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                o => Err(JobspecError::new(
                    format!("{}.{k}", self.field(key)),
                    format!("expected a string, found {}", kind(o)),
                )),
            })
            .collect()
    }

    fn array(&mut self, key: &'static str) -> R<Vec<&'a Value>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a.iter().collect()),
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected an array, found {}", kind(o)),
            )),
        }
    }

    fn object(&mut self, key: &'static str) -> R<Option<Obj<'a>>> {
        let path = self.field(key);
        self.get(key).map(|v| Obj::new(path, v)).transpose()
    }

    /// Every key must have been read or be in `ignored`.
    fn finish(self, ignored: &[&str]) -> R<()> {
        for k in self.map.keys() {
            if !self.seen.contains(k.as_str()) && !ignored.contains(&k.as_str()) {
                return Err(JobspecError::new(
                    format!("{}.{k}", self.path),
                    "unknown field",
                ));
            }
        }
        Ok(())
    }
}

/// Edit distance of at most 2 (insertions, deletions, substitutions).
fn close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()] <= 2
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parse a register request body: `{"Job": {...}}` (plus Nomad's optional `EnforceIndex`,
/// `JobModifyIndex`, `PolicyOverride`, `PreserveCounts`, `EvalPriority`, `Submission`).
pub fn parse_register_request(body: &[u8]) -> R<Job> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| JobspecError::new("body", format!("invalid JSON: {e}")))?;
    let mut top = Obj::new("body".into(), &v)?;
    let job = top
        .get("Job")
        .ok_or_else(|| JobspecError::new("Job", "missing required field"))?;
    top.finish(&[
        "EnforceIndex",
        "JobModifyIndex",
        "PolicyOverride",
        "PreserveCounts",
        "EvalPriority",
        "Submission",
        "Namespace",
        "Region",
    ])?;
    job_from_value(job)
}

/// Parse a job file in JSON: either `{"Job": {...}}` or the bare job object.
pub fn parse_job_json(body: &[u8]) -> R<Job> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| JobspecError::new("file", format!("invalid JSON: {e}")))?;
    match v.get("Job") {
        Some(j) => job_from_value(j),
        None => job_from_value(&v),
    }
}

pub(super) fn job_from_value(v: &Value) -> R<Job> {
    let mut o = Obj::new("Job".into(), v)?;
    let id = o.required_string("ID")?;
    let name = o.string("Name")?.unwrap_or_else(|| id.clone());
    let job_type = match o.string("Type")?.as_deref() {
        None | Some("service") => JobType::Service,
        Some("batch") => JobType::Batch,
        Some(other) => {
            return Err(JobspecError::new(
                "Job.Type",
                format!("unsupported job type {other:?} (expected \"service\" or \"batch\")"),
            ));
        }
    };
    let priority = o.uint("Priority", 100)?.unwrap_or(50) as i32;
    if priority < 1 {
        return Err(JobspecError::new(
            "Job.Priority",
            "must be between 1 and 100",
        ));
    }
    let namespace = o.string("Namespace")?.unwrap_or_else(|| "default".into());
    let region = o.string("Region")?.unwrap_or_else(|| "global".into());
    let datacenters = o
        .array("Datacenters")?
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            d.as_str().map(str::to_string).ok_or_else(|| {
                JobspecError::new(format!("Job.Datacenters[{i}]"), "expected a string")
            })
        })
        .collect::<R<Vec<_>>>()?;
    let meta = o.string_map("Meta")?;
    let groups_v = o.array("TaskGroups")?;
    if groups_v.is_empty() {
        return Err(JobspecError::new(
            "Job.TaskGroups",
            "a job needs at least one task group",
        ));
    }
    o.finish(IGNORED_JOB)?;
    let mut task_groups = Vec::new();
    let mut names = BTreeSet::new();
    for (i, g) in groups_v.into_iter().enumerate() {
        let group = group_from_value(&format!("Job.TaskGroups[{i}]"), g, job_type)?;
        if !names.insert(group.name.clone()) {
            return Err(JobspecError::new(
                format!("Job.TaskGroups[{i}].Name"),
                format!("duplicate group name {:?}", group.name),
            ));
        }
        task_groups.push(group);
    }
    Ok(Job {
        id,
        name,
        job_type,
        priority,
        namespace,
        region,
        datacenters,
        meta,
        task_groups,
    })
}

fn restart_from(o: Option<Obj<'_>>, base: &RestartPolicy) -> R<RestartPolicy> {
    let Some(mut o) = o else {
        return Ok(base.clone());
    };
    let path = o.path.clone();
    let mut p = base.clone();
    if let Some(v) = o.u32("Attempts")? {
        p.attempts = v;
    }
    if let Some(v) = o.uint("Interval", u64::MAX)? {
        p.interval = v;
    }
    if let Some(v) = o.uint("Delay", u64::MAX)? {
        p.delay = v;
    }
    match o.string("Mode")?.as_deref() {
        None => {}
        Some("fail") => p.mode = RestartMode::Fail,
        Some("delay") => p.mode = RestartMode::Delay,
        Some(m) => {
            return Err(JobspecError::new(
                format!("{path}.Mode"),
                format!("expected \"fail\" or \"delay\", found {m:?}"),
            ));
        }
    }
    o.finish(&["RenderTemplates"])?;
    Ok(p)
}

fn group_from_value(path: &str, v: &Value, job_type: JobType) -> R<TaskGroup> {
    let mut o = Obj::new(path.into(), v)?;
    let name = o.required_string("Name")?;
    let count = o.u32("Count")?.unwrap_or(1);
    let restart_policy = restart_from(
        o.object("RestartPolicy")?,
        &RestartPolicy::default_for(job_type),
    )?;
    let meta = o.string_map("Meta")?;
    let ephemeral_disk = match o.object("EphemeralDisk")? {
        None => EphemeralDisk {
            size_mb: 300,
            sticky: false,
            migrate: false,
        },
        Some(mut d) => {
            let e = EphemeralDisk {
                size_mb: d.u32("SizeMB")?.unwrap_or(300),
                sticky: d.boolean("Sticky")?.unwrap_or(false),
                migrate: d.boolean("Migrate")?.unwrap_or(false),
            };
            d.finish(&[])?;
            e
        }
    };
    let shutdown_delay = o.uint("ShutdownDelay", u64::MAX)?;
    let networks = networks_from(&mut o, path)?;
    let tasks_v = o.array("Tasks")?;
    if tasks_v.is_empty() {
        return Err(JobspecError::new(
            format!("{path}.Tasks"),
            "a group needs at least one task",
        ));
    }
    o.finish(IGNORED_GROUP)?;
    let mut tasks = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in tasks_v.into_iter().enumerate() {
        let task = task_from_value(&format!("{path}.Tasks[{i}]"), t, &restart_policy)?;
        if !names.insert(task.name.clone()) {
            return Err(JobspecError::new(
                format!("{path}.Tasks[{i}].Name"),
                format!("duplicate task name {:?}", task.name),
            ));
        }
        tasks.push(task);
    }
    if tasks.iter().filter(|t| t.leader).count() > 1 {
        return Err(JobspecError::new(
            format!("{path}.Tasks"),
            "only one task may be the leader",
        ));
    }
    Ok(TaskGroup {
        name,
        count,
        tasks,
        restart_policy,
        meta,
        ephemeral_disk,
        shutdown_delay,
        networks,
    })
}

/// A group's `Networks`: host mode only, labels unique, static ports in range.
fn networks_from(o: &mut Obj<'_>, path: &str) -> R<Vec<Network>> {
    let mut out = Vec::new();
    let mut labels = BTreeSet::new();
    let nets = o.array("Networks")?;
    if nets.len() > 1 {
        return Err(JobspecError::new(
            format!("{path}.Networks"),
            "only one network block per group",
        ));
    }
    for (i, v) in nets.into_iter().enumerate() {
        let npath = format!("{path}.Networks[{i}]");
        let mut n = Obj::new(npath.clone(), v)?;
        let mode = n.string("Mode")?.unwrap_or_else(|| "host".into());
        if !matches!(mode.as_str(), "host" | "") {
            return Err(JobspecError::new(
                format!("{npath}.Mode"),
                format!("only \"host\" networking is supported, found {mode:?}"),
            ));
        }
        let mut ports = |key: &'static str, dynamic: bool| -> R<Vec<Port>> {
            let mut list = Vec::new();
            for (j, pv) in n.array(key)?.into_iter().enumerate() {
                let ppath = format!("{npath}.{key}[{j}]");
                let mut p = Obj::new(ppath.clone(), pv)?;
                let label = p.required_string("Label")?;
                if label.is_empty()
                    || !label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    return Err(JobspecError::new(
                        format!("{ppath}.Label"),
                        format!("invalid port label {label:?} (use letters, digits, '_' and '-')"),
                    ));
                }
                if !labels.insert(label.clone()) {
                    return Err(JobspecError::new(
                        format!("{ppath}.Label"),
                        format!("duplicate port label {label:?}"),
                    ));
                }
                let value = p.uint("Value", 65535)?.unwrap_or(0) as u16;
                if !dynamic && value == 0 {
                    return Err(JobspecError::new(
                        format!("{ppath}.Value"),
                        "a reserved port needs a static value between 1 and 65535",
                    ));
                }
                let to = match p.get("To") {
                    Some(Value::Number(x))
                        if x.as_i64().is_some_and(|t| (-1..=65535).contains(&t)) =>
                    {
                        x.as_i64().unwrap_or(0) as i32
                    }
                    None | Some(Value::Null) => 0,
                    Some(other) => {
                        return Err(JobspecError::new(
                            format!("{ppath}.To"),
                            format!("expected a port between -1 and 65535, found {other}"),
                        ));
                    }
                };
                p.finish(&["HostNetwork", "IgnoreCollision"])?;
                list.push(Port {
                    label,
                    value: if dynamic { 0 } else { value },
                    to,
                });
            }
            Ok(list)
        };
        let reserved_ports = ports("ReservedPorts", false)?;
        let dynamic_ports = ports("DynamicPorts", true)?;
        n.finish(&["DNS", "CIDR", "IP", "MBits", "Device", "Hostname"])?;
        out.push(Network {
            mode: "host".into(),
            reserved_ports,
            dynamic_ports,
        });
    }
    Ok(out)
}

fn task_from_value(path: &str, v: &Value, group_restart: &RestartPolicy) -> R<Task> {
    let mut o = Obj::new(path.into(), v)?;
    let name = o.required_string("Name")?;
    if name.contains('/') {
        return Err(JobspecError::new(
            format!("{path}.Name"),
            "must not contain '/'",
        ));
    }
    let driver = o.required_string("Driver")?;
    let user = o.string("User")?.unwrap_or_default();
    let config = match o.get("Config") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(JobspecError::new(
                format!("{path}.Config"),
                format!("expected an object, found {}", kind(other)),
            ));
        }
    };
    let env = o.string_map("Env")?;
    let meta = o.string_map("Meta")?;
    let resources = match o.object("Resources")? {
        None => Resources {
            cpu: 100,
            memory_mb: 300,
            memory_max_mb: 0,
            devices: Vec::new(),
        },
        Some(mut r) => {
            let rpath = r.path.clone();
            let cpu = r.u32("CPU")?.unwrap_or(100);
            let memory_mb = r.u32("MemoryMB")?.unwrap_or(300);
            let memory_max_mb = r.u32("MemoryMaxMB")?.unwrap_or(0);
            if memory_max_mb != 0 && memory_max_mb < memory_mb {
                return Err(JobspecError::new(
                    format!("{rpath}.MemoryMaxMB"),
                    "must not be below MemoryMB",
                ));
            }
            let mut devices = Vec::new();
            for (i, d) in r.array("Devices")?.into_iter().enumerate() {
                let mut d = Obj::new(format!("{rpath}.Devices[{i}]"), d)?;
                devices.push(DeviceRequest {
                    name: d.required_string("Name")?,
                    count: d.u32("Count")?.unwrap_or(1),
                });
                d.finish(&["Constraints", "Affinities"])?;
            }
            r.finish(&["Cores", "DiskMB", "IOPS", "Networks", "NUMA", "SecretsMB"])?;
            Resources {
                cpu,
                memory_mb,
                memory_max_mb,
                devices,
            }
        }
    };
    let restart_policy = restart_from(o.object("RestartPolicy")?, group_restart)?;
    let kill_timeout = o.uint("KillTimeout", u64::MAX)?.unwrap_or(5_000_000_000);
    let kill_signal = o.string("KillSignal")?.unwrap_or_default();
    if !kill_signal.is_empty() && crate::util::signal_number(&kill_signal).is_none() {
        return Err(JobspecError::new(
            format!("{path}.KillSignal"),
            format!("unknown signal {kill_signal:?}"),
        ));
    }
    let log_config = match o.object("LogConfig")? {
        None => LogConfig::default(),
        Some(mut l) => {
            let c = LogConfig {
                max_files: l.u32("MaxFiles")?.unwrap_or(10).max(1),
                max_file_size_mb: l.u32("MaxFileSizeMB")?.unwrap_or(10).max(1),
            };
            l.finish(&["Disabled", "Enabled"])?;
            c
        }
    };
    let lifecycle = match o.object("Lifecycle")? {
        None => None,
        Some(mut l) => {
            let lpath = l.path.clone();
            let hook = l.required_string("Hook")?;
            if !matches!(hook.as_str(), "prestart" | "poststart" | "poststop") {
                return Err(JobspecError::new(
                    format!("{lpath}.Hook"),
                    format!("expected prestart, poststart or poststop, found {hook:?}"),
                ));
            }
            let sidecar = l.boolean("Sidecar")?.unwrap_or(false);
            l.finish(&[])?;
            Some(Lifecycle { hook, sidecar })
        }
    };
    let leader = o.boolean("Leader")?.unwrap_or(false);
    let shutdown_delay = o.uint("ShutdownDelay", u64::MAX)?.unwrap_or(0);
    let templates = templates_from(&mut o, path)?;
    o.finish(IGNORED_TASK)?;
    Ok(Task {
        name,
        driver,
        user,
        config,
        env,
        meta,
        resources,
        restart_policy,
        kill_timeout,
        kill_signal,
        log_config,
        lifecycle,
        leader,
        shutdown_delay,
        templates,
    })
}

/// A task's `Templates`, with Nomad's defaults and checks.
fn templates_from(o: &mut Obj<'_>, path: &str) -> R<Vec<Template>> {
    let mut out = Vec::new();
    for (i, v) in o.array("Templates")?.into_iter().enumerate() {
        let tpath = format!("{path}.Templates[{i}]");
        let mut t = Obj::new(tpath.clone(), v)?;
        let source_path = t.string("SourcePath")?.unwrap_or_default();
        let embedded_tmpl = t.string("EmbeddedTmpl")?.unwrap_or_default();
        let dest_path = t.required_string("DestPath")?;
        if source_path.is_empty() == embedded_tmpl.is_empty() {
            return Err(JobspecError::new(
                format!("{tpath}.EmbeddedTmpl"),
                "a template needs exactly one of `data` (EmbeddedTmpl) and `source` (SourcePath)",
            ));
        }
        let change_mode = t.string("ChangeMode")?.unwrap_or_else(|| "restart".into());
        if !matches!(
            change_mode.as_str(),
            "restart" | "signal" | "noop" | "script"
        ) {
            return Err(JobspecError::new(
                format!("{tpath}.ChangeMode"),
                format!("expected restart, signal, noop or script, found {change_mode:?}"),
            ));
        }
        let change_signal = t.string("ChangeSignal")?.unwrap_or_default();
        if change_mode == "signal" && crate::util::signal_number(&change_signal).is_none() {
            return Err(JobspecError::new(
                format!("{tpath}.ChangeSignal"),
                format!("change_mode \"signal\" needs a known signal, found {change_signal:?}"),
            ));
        }
        let perms = t.string("Perms")?.unwrap_or_else(|| "0644".into());
        if u32::from_str_radix(&perms, 8).map_or(true, |m| m > 0o7777) {
            return Err(JobspecError::new(
                format!("{tpath}.Perms"),
                format!("expected an octal file mode such as \"0644\", found {perms:?}"),
            ));
        }
        let left_delim = t
            .string("LeftDelim")?
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "{{".into());
        let right_delim = t
            .string("RightDelim")?
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "}}".into());
        let envvars = t.boolean("Envvars")?.unwrap_or(false);
        let err_missing_key = t.boolean("ErrMissingKey")?.unwrap_or(false);
        t.finish(&[
            "Splay",
            "Wait",
            "Uid",
            "Gid",
            "Once",
            "VaultGrace",
            "ChangeScript",
        ])?;
        out.push(Template {
            source_path,
            dest_path,
            embedded_tmpl,
            change_mode,
            change_signal,
            perms,
            left_delim,
            right_delim,
            envvars,
            err_missing_key,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> R<Job> {
        parse_register_request(serde_json::to_vec(&v).unwrap().as_slice())
    }

    #[test]
    fn defaults_applied() {
        let j = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}})).unwrap();
        assert_eq!(j.name, "a");
        assert_eq!(j.namespace, "default");
        assert_eq!(j.priority, 50);
        let g = &j.task_groups[0];
        assert_eq!(g.count, 1);
        assert_eq!(
            g.restart_policy,
            RestartPolicy::default_for(JobType::Service)
        );
        assert_eq!(g.tasks[0].kill_timeout, 5_000_000_000);
        assert_eq!(g.tasks[0].resources.memory_mb, 300);
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t"}]}]}})).unwrap_err();
        assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].Driver");
        let e = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "Resources": {"MemoryMB": "lots"}}]}]}})).unwrap_err();
        assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].Resources.MemoryMB");
        assert!(e.message.contains("integer"), "{e}");
        let e = parse(serde_json::json!({"Job": {"ID": "a", "Bogus": 1, "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}})).unwrap_err();
        assert_eq!(e.path, "Job.Bogus");
        let e = parse(serde_json::json!({"Job": {"TaskGroups": []}})).unwrap_err();
        assert_eq!(e.path, "Job.ID");
        let e = parse(serde_json::json!({"Job": {"ID": "a", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Drivr": "mock"}]}]}})).unwrap_err();
        assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].Driver");
        assert!(e.message.contains("\"Drivr\": a typo?"), "{e}");
    }

    #[test]
    fn nulls_and_ignored_fields_are_accepted() {
        let j = parse(serde_json::json!({"Job": {"ID": "a", "Name": null, "Update": {"Stagger": 1}, "TaskGroups": [{"Name": "g", "Constraints": null, "Tasks": [{"Name": "t", "Driver": "mock", "Services": null}]}]}})).unwrap();
        assert_eq!(j.name, "a");
    }

    #[test]
    fn task_restart_policy_merges_over_group() {
        let j = parse(serde_json::json!({"Job": {"ID": "a", "Type": "batch", "TaskGroups": [{"Name": "g", "RestartPolicy": {"Attempts": 7}, "Tasks": [{"Name": "t", "Driver": "mock", "RestartPolicy": {"Mode": "delay"}}]}]}})).unwrap();
        let p = &j.task_groups[0].tasks[0].restart_policy;
        assert_eq!(p.attempts, 7);
        assert_eq!(p.mode, RestartMode::Delay);
        assert_eq!(
            p.interval,
            RestartPolicy::default_for(JobType::Batch).interval
        );
    }
}
