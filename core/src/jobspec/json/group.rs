//! A task group and its `restart` and `network` blocks.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::R;
use super::obj::Obj;
use super::task::{restart_from, task_from_value};
use crate::jobspec::*;

/// A group's cluster-only blocks, kept as given (see the job's).
const KEPT_GROUP: &[&str] = &[
    "Constraints",
    "Affinities",
    "Spreads",
    "Update",
    "Migrate",
    "Scaling",
    "Services",
    "Consul",
    "StopAfterClientDisconnect",
    "MaxClientDisconnect",
    "PreventRescheduleOnLost",
    "Disconnect",
    "MaxRunDuration",
];

pub(super) fn group_from_value(
    path: &str,
    v: &Value,
    job_type: JobType,
    job_kept: &Kept,
) -> R<TaskGroup> {
    let mut o = Obj::new(path.into(), v)?;
    let name = o.required_string("Name")?;
    names::group_name(&name).map_err(|m| JobspecError::new(format!("{path}.Name"), m))?;
    let count = o.u32("Count")?.unwrap_or(1);
    let restart_policy = restart_from(
        o.object("RestartPolicy")?,
        &RestartPolicy::default_for(job_type),
    )?;
    let reschedule_policy = reschedule_from(
        job_kept.get("Reschedule"),
        o.object("ReschedulePolicy")?,
        job_type,
    )?;
    // Only service jobs are deployed; other types keep their `update` as given.
    let update = if job_type == JobType::Service {
        update_from(job_kept.get("Update"), o.object("Update")?)?
    } else {
        None
    };
    let meta = o.string_map("Meta")?;
    let ephemeral_disk = ephemeral_disk_from(o.object("EphemeralDisk")?)?;
    let shutdown_delay = o.uint("ShutdownDelay", u64::MAX)?;
    let networks = networks_from(&mut o, path)?;
    let volumes = volumes_from(&mut o, path)?;
    let tasks_v = o.array("Tasks")?;
    if tasks_v.is_empty() {
        return Err(JobspecError::new(
            format!("{path}.Tasks"),
            "a group needs at least one task",
        ));
    }
    let mut kept = o.kept(KEPT_GROUP);
    if update.is_some() {
        kept.remove("Update");
    }
    if job_type == JobType::Service {
        let m = canonical_migrate(job_kept.get("Migrate"), kept.get("Migrate"));
        kept.insert("Migrate".into(), m);
    }
    o.finish(&[])?;
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
        for (j, m) in task.volume_mounts.iter().enumerate() {
            if !volumes.contains_key(&m.volume) {
                return Err(JobspecError::new(
                    format!("{path}.Tasks[{i}].VolumeMounts[{j}].Volume"),
                    format!(
                        "the group has no volume {:?} (its volumes: {:?})",
                        m.volume,
                        volumes.keys().collect::<Vec<_>>()
                    ),
                ));
            }
        }
        tasks.push(task);
    }
    // Services name ports of the group's network, in modes this agent can register.
    let ports: Vec<String> = networks
        .iter()
        .flat_map(|n| n.reserved_ports.iter().chain(&n.dynamic_ports))
        .map(|p| p.label.clone())
        .collect();
    let owners = std::iter::once((path.to_string(), &kept)).chain(
        tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("{path}.Tasks[{i}]"), &t.kept)),
    );
    for (owner, k) in owners {
        for (i, s) in crate::structs::ServiceSpec::list(k).iter().enumerate() {
            if let Some(m) = s.problems(&ports).into_iter().next() {
                return Err(JobspecError::new(format!("{owner}.Services[{i}]"), m));
            }
        }
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
        reschedule_policy,
        update,
        volumes,
        kept,
    })
}

/// A group's `Volumes`, keyed by name: `host` (a `Source` required) or `csi`.
fn volumes_from(o: &mut Obj<'_>, path: &str) -> R<BTreeMap<String, VolumeRequest>> {
    let mut out = BTreeMap::new();
    let vpath = format!("{path}.Volumes");
    let map = match o.get("Volumes") {
        None => return Ok(out),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(JobspecError::new(
                vpath,
                format!("expected an object, found {}", super::obj::kind(other)),
            ));
        }
    };
    for (key, v) in map {
        let at = format!("{vpath}[{key:?}]");
        let mut r = Obj::new(at.clone(), v)?;
        let name = r
            .string("Name")?
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| key.clone());
        let volume_type = r.string("Type")?.unwrap_or_default();
        if !matches!(volume_type.as_str(), "host" | "csi") {
            return Err(JobspecError::new(
                format!("{at}.Type"),
                format!("expected \"host\" or \"csi\", found {volume_type:?}"),
            ));
        }
        let source = r.string("Source")?.unwrap_or_default();
        if source.is_empty() {
            return Err(JobspecError::new(
                format!("{at}.Source"),
                "a volume needs a source: the name of the node's volume",
            ));
        }
        let read_only = r.boolean("ReadOnly")?.unwrap_or(false);
        let per_alloc = r.boolean("PerAlloc")?.unwrap_or(false);
        let kept = r.kept(&["AccessMode", "AttachmentMode", "MountOptions", "Sticky"]);
        r.finish(&[])?;
        out.insert(
            key.clone(),
            VolumeRequest {
                name,
                volume_type,
                source,
                read_only,
                per_alloc,
                kept,
            },
        );
    }
    Ok(out)
}

/// Nomad's default migrate strategy (`api.DefaultMigrateStrategy`): one at a time,
/// healthy by checks for 10 s within 5 min.
pub(crate) fn default_migrate() -> Value {
    serde_json::json!({"MaxParallel": 1, "HealthCheck": "checks",
        "MinHealthyTime": 10_000_000_000u64, "HealthyDeadline": 300_000_000_000u64})
}

/// A service group's `Migrate` as Nomad's API canonicalizes it: the group's fields over
/// the job's over [`default_migrate`] (Nomad always sends it for service groups).
pub(crate) fn canonical_migrate(job: Option<&Value>, group: Option<&Value>) -> Value {
    let mut m = default_migrate();
    for layer in [job, group].into_iter().flatten() {
        if let (Some(out), Some(given)) = (m.as_object_mut(), layer.as_object()) {
            for (k, v) in given.iter().filter(|(_, v)| !v.is_null()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    m
}

/// A group's `EphemeralDisk`, Nomad's 300 MB when absent.
fn ephemeral_disk_from(o: Option<Obj<'_>>) -> R<EphemeralDisk> {
    let Some(mut d) = o else {
        return Ok(EphemeralDisk {
            size_mb: 300,
            sticky: false,
            migrate: false,
        });
    };
    let e = EphemeralDisk {
        size_mb: d.u32("SizeMB")?.unwrap_or(300),
        sticky: d.boolean("Sticky")?.unwrap_or(false),
        migrate: d.boolean("Migrate")?.unwrap_or(false),
    };
    d.finish(&[])?;
    Ok(e)
}

/// The update strategy a service group without an `Update` of its own has: the job's
/// `update` over Nomad's default (`None` when the job's is not valid).
pub(crate) fn inherited_update(job: Option<&Value>) -> Option<UpdateStrategy> {
    update_from(job, None).ok().flatten()
}

/// A service group's update strategy: its `Update` over the job's over Nomad's default,
/// checked as Nomad checks it.
fn update_from(job: Option<&Value>, group: Option<Obj<'_>>) -> R<Option<UpdateStrategy>> {
    let mut u = UpdateStrategy::default();
    let job = match job.filter(|v| !v.is_null()) {
        Some(v) => Some(Obj::new("Job.Update".into(), v)?),
        None => None,
    };
    let mut checked = "Job.Update".to_string();
    for mut o in [job, group].into_iter().flatten() {
        checked = o.path.clone();
        if let Some(v) = o.uint("Stagger", u64::MAX)? {
            u.stagger = v;
        }
        if let Some(v) = o.u32("MaxParallel")? {
            u.max_parallel = v;
        }
        if let Some(v) = o.string("HealthCheck")?.filter(|v| !v.is_empty()) {
            u.health_check = v;
        }
        if let Some(v) = o.uint("MinHealthyTime", u64::MAX)? {
            u.min_healthy_time = v;
        }
        if let Some(v) = o.uint("HealthyDeadline", u64::MAX)? {
            u.healthy_deadline = v;
        }
        if let Some(v) = o.uint("ProgressDeadline", u64::MAX)? {
            u.progress_deadline = v;
        }
        if let Some(v) = o.boolean("AutoRevert")? {
            u.auto_revert = v;
        }
        if let Some(v) = o.boolean("AutoPromote")? {
            u.auto_promote = v;
        }
        if let Some(v) = o.u32("Canary")? {
            u.canary = v;
        }
        o.finish(&[])?;
    }
    if u.deploys() {
        u.validate(&checked)?;
    }
    Ok(Some(u))
}

/// A group's reschedule policy: its `ReschedulePolicy` over the job's `Reschedule` over
/// Nomad's default for the job type, checked as Nomad checks it. System and sysbatch jobs
/// have none, whatever they say.
fn reschedule_from(
    job: Option<&Value>,
    group: Option<Obj<'_>>,
    job_type: JobType,
) -> R<Option<ReschedulePolicy>> {
    let Some(mut p) = ReschedulePolicy::default_for(job_type) else {
        return Ok(None);
    };
    let job = match job.filter(|v| !v.is_null()) {
        Some(v) => Some(Obj::new("Job.Reschedule".into(), v)?),
        None => None,
    };
    let mut checked = "Job.Reschedule".to_string();
    for mut o in [job, group].into_iter().flatten() {
        checked = o.path.clone();
        if let Some(v) = o.u32("Attempts")? {
            p.attempts = v;
            // Attempts without `Unlimited` mean a limit (Nomad would call the service
            // default's `Unlimited = true` beside them ambiguous and refuse the job).
            p.unlimited = false;
        }
        if let Some(v) = o.uint("Interval", u64::MAX)? {
            p.interval = v;
        }
        if let Some(v) = o.uint("Delay", u64::MAX)? {
            p.delay = v;
        }
        if let Some(v) = o.string("DelayFunction")?.filter(|f| !f.is_empty()) {
            p.delay_function = v;
        }
        if let Some(v) = o.uint("MaxDelay", u64::MAX)? {
            p.max_delay = v;
        }
        if let Some(v) = o.boolean("Unlimited")? {
            p.unlimited = v;
        }
        o.finish(&[])?;
    }
    p.validate(&checked)?;
    Ok(Some(p))
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
        let reserved_ports = ports_from(&mut n, &npath, "ReservedPorts", false, &mut labels)?;
        let dynamic_ports = ports_from(&mut n, &npath, "DynamicPorts", true, &mut labels)?;
        n.finish(&["DNS", "CIDR", "IP", "MBits", "Device", "Hostname"])?;
        out.push(Network {
            mode: "host".into(),
            reserved_ports,
            dynamic_ports,
        });
    }
    Ok(out)
}

/// A network's `key` ports (`ReservedPorts`, or with `dynamic` `DynamicPorts`) under
/// `npath`; each label valid and not in `labels` already.
fn ports_from(
    n: &mut Obj<'_>,
    npath: &str,
    key: &'static str,
    dynamic: bool,
    labels: &mut BTreeSet<String>,
) -> R<Vec<Port>> {
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
            Some(Value::Number(x)) if x.as_i64().is_some_and(|t| (-1..=65535).contains(&t)) => {
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
}
