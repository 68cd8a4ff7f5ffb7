//! Nomad's native service discovery (`provider = "nomad"`): a group's or a task's
//! `service` blocks as the job gives them (Nomad's API `Service`, kept in the job as
//! given), read into [`ServiceSpec`]; what the client registers for them
//! ([`ServiceRegistration`], Nomad's shape and ids); and [`wanted`], the registrations an
//! allocation holds in its present state, from which the client registers and
//! deregisters by difference.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Allocation, ClientStatus, DesiredStatus, TaskEventType, TaskRunState};

/// Nomad's registration id prefix for a task's or a group's services.
const ID_PREFIX: &str = "_nomad-task-";

/// One `service` block, as much of it as registration uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceSpec {
    /// `name`, before interpolation (Nomad's default: `<job>-<group>-<task>`).
    pub name: String,
    /// `port`: a port label of the group's network, a number, or empty.
    pub port_label: String,
    /// `address_mode`: `auto` (the default), `host`, `alloc` or `driver`.
    pub address_mode: String,
    /// `address`: an explicit address, instead of the port's.
    pub address: String,
    pub tags: Vec<String>,
    /// Tags while the allocation is a canary (when any).
    pub canary_tags: Vec<String>,
    pub meta: BTreeMap<String, String>,
    /// `provider`: `nomad`, or `consul` (Nomad's default).
    pub provider: String,
    /// `task`: the task a group service's script checks run in.
    pub task_name: String,
    /// The `check` blocks, as given.
    pub checks: Vec<Value>,
    /// The service's `check_restart`, for checks without their own.
    pub check_restart: Option<Value>,
}

/// Strings of a JSON list (non-strings skipped).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl ServiceSpec {
    /// A `Services` entry in Nomad's API JSON.
    pub fn from_json(v: &Value) -> Self {
        let meta = v
            .get("Meta")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, x)| x.as_str().map(|x| (k.clone(), x.to_string())))
            .collect();
        ServiceSpec {
            name: text(v, "Name"),
            port_label: match v.get("PortLabel") {
                Some(Value::Number(n)) => n.to_string(),
                _ => text(v, "PortLabel"),
            },
            address_mode: text(v, "AddressMode"),
            address: text(v, "Address"),
            tags: strings(&v["Tags"]),
            canary_tags: strings(&v["CanaryTags"]),
            meta,
            provider: text(v, "Provider"),
            task_name: text(v, "TaskName"),
            checks: v
                .get("Checks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            check_restart: v.get("CheckRestart").filter(|r| r.is_object()).cloned(),
        }
    }

    /// The services of a group's or a task's kept `Services`.
    pub fn list(kept: &crate::jobspec::Kept) -> Vec<ServiceSpec> {
        kept.get("Services")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(Self::from_json)
            .collect()
    }

    /// What is wrong with it, for a group with `ports` (its network's labels), as Nomad's
    /// job validation words it.
    pub fn problems(&self, ports: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        let name = if self.name.is_empty() {
            "(default name)"
        } else {
            &self.name
        };
        if !self.name.is_empty() && !self.name.contains("${") && !valid_name(&self.name) {
            out.push(format!(
                "service {name:?}: the name must be alphanumeric with dashes, 63 characters at most, and not start or end with a dash"
            ));
        }
        match self.address_mode.as_str() {
            "" | "auto" | "host" | "alloc" => {}
            "driver" => out.push(format!(
                "service {name:?}: address_mode \"driver\": this agent's drivers have no network of their own; use \"host\" or \"alloc\""
            )),
            m => out.push(format!(
                "service {name:?}: address_mode {m:?} is not one of auto, host, alloc, driver"
            )),
        }
        if !self.address.is_empty() && !matches!(self.address_mode.as_str(), "" | "auto") {
            out.push(format!(
                "service {name:?}: an address can only be set with address_mode \"auto\""
            ));
        }
        let label = &self.port_label;
        if !label.is_empty()
            && label.parse::<u16>().is_err()
            && !label.contains("${")
            && !ports.contains(label)
        {
            out.push(format!(
                "service {name:?}: port label {label:?} does not exist in the group's network"
            ));
        }
        for c in self.check_specs() {
            match c {
                Err(CheckError::Invalid(e)) => out.push(format!("service {name:?}: {e}")),
                Err(CheckError::NotRun(_)) => {}
                Ok(c) => {
                    let label = &c.port_label;
                    if !label.is_empty() && label.parse::<u16>().is_err() && !ports.contains(label)
                    {
                        out.push(format!(
                            "service {name:?}: check {:?}: port label {label:?} does not exist in the group's network",
                            c.name
                        ));
                    }
                }
            }
        }
        match self.provider.as_str() {
            "" | "nomad" | "consul" => {}
            p => out.push(format!(
                "service {name:?}: provider {p:?} is not \"nomad\" or \"consul\""
            )),
        }
        out
    }
}

/// What kind of probe a check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// An HTTP request; 2xx and 3xx pass (Nomad's rule).
    Http,
    /// A TCP connect.
    Tcp,
    /// A check component's probe: the check's `type` names the component
    /// ([`CheckSpec::component`]).
    Component,
}

/// `check_restart`: restart the task after `limit` unhealthy results in a row, once
/// `grace` has passed since it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRestart {
    pub limit: u32,
    pub grace: std::time::Duration,
    pub ignore_warnings: bool,
}

/// One `check` block of a service, as the client runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSpec {
    pub name: String,
    pub kind: CheckKind,
    /// For [`CheckKind::Component`]: the check component's name (the check's `type`).
    pub component: String,
    /// The check block as given (Nomad's API JSON): what a check component is handed.
    pub config: String,
    /// HTTP: path (with its query), method, `http` or `https`, headers, body.
    pub path: String,
    pub method: String,
    pub protocol: String,
    /// `tls_skip_verify`: an https check accepts any certificate.
    pub tls_skip_verify: bool,
    pub headers: BTreeMap<String, Vec<String>>,
    pub body: String,
    /// The port probed: the check's own label, else the service's.
    pub port_label: String,
    pub address_mode: String,
    pub interval: std::time::Duration,
    pub timeout: std::time::Duration,
    /// `passing`, `warning`, `critical` or empty (pending) until the first result.
    pub initial_status: String,
    /// Results in a row before the status turns passing (at least 1).
    pub success_before_passing: u32,
    /// Results in a row before the status turns critical (at least 1).
    pub failures_before_critical: u32,
    /// `require_healthy` (the default), `ignore_warnings`, `ignore`: Nomad's
    /// healthiness against readiness.
    pub on_update: String,
    pub restart: Option<CheckRestart>,
    /// The task a group service's check belongs to (`task`).
    pub task: String,
}

/// Why a check block is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// It is wrong, as Nomad's validation says.
    Invalid(String),
    /// A kind of check this agent does not run (its type).
    NotRun(String),
}

/// Nomad's smallest check interval and timeout.
const MIN_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

fn ns(v: &Value, key: &str) -> Option<std::time::Duration> {
    v.get(key)
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .map(std::time::Duration::from_nanos)
}

impl CheckSpec {
    /// A `Checks` entry of a service in Nomad's API JSON, with the service's name and
    /// its `check_restart` (a check's own wins); `Err` says what is wrong, as job
    /// validation words it, or that the check is one this agent does not run.
    pub fn from_json(
        v: &Value,
        service: &str,
        service_restart: Option<&Value>,
    ) -> Result<Self, CheckError> {
        let bad = CheckError::Invalid;
        let kind = match text(v, "Type").as_str() {
            "http" => CheckKind::Http,
            "tcp" => CheckKind::Tcp,
            "" => return Err(bad("a check needs a type (http or tcp)".into())),
            t @ ("script" | "grpc") => return Err(CheckError::NotRun(t.to_string())),
            t if component_name(t) => CheckKind::Component,
            t => {
                return Err(bad(format!(
                    "check type {t:?} is not one of http, tcp, script, grpc, nor the name of a check component"
                )));
            }
        };
        let name = match text(v, "Name") {
            n if n.is_empty() => format!("service: {service:?} check"),
            n => n,
        };
        let interval = ns(v, "Interval").unwrap_or_default();
        if interval < MIN_CHECK {
            return Err(bad(format!("check {name:?}: interval must be at least 1s")));
        }
        let timeout = ns(v, "Timeout").unwrap_or_default();
        if timeout < MIN_CHECK {
            return Err(bad(format!("check {name:?}: timeout must be at least 1s")));
        }
        let path = text(v, "Path");
        if kind == CheckKind::Http && !path.starts_with('/') {
            return Err(bad(format!(
                "check {name:?}: an http check needs a path starting with /"
            )));
        }
        let protocol = match text(v, "Protocol").as_str() {
            "" | "http" => "http".to_string(),
            "https" => "https".to_string(),
            p => {
                return Err(bad(format!(
                    "check {name:?}: protocol {p:?} is not http or https"
                )));
            }
        };
        let initial_status = text(v, "InitialStatus");
        if !matches!(
            initial_status.as_str(),
            "" | "passing" | "warning" | "critical"
        ) {
            return Err(bad(format!(
                "check {name:?}: initial_status {initial_status:?} is not passing, warning or critical"
            )));
        }
        let on_update = match text(v, "OnUpdate").as_str() {
            "" => "require_healthy".to_string(),
            u @ ("require_healthy" | "ignore_warnings" | "ignore") => u.to_string(),
            u => {
                return Err(bad(format!(
                    "check {name:?}: on_update {u:?} is not require_healthy, ignore_warnings or ignore"
                )));
            }
        };
        let headers = v
            .get("Header")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, x)| (k.clone(), strings(x)))
            .collect();
        let restart = v
            .get("CheckRestart")
            .filter(|r| r.is_object())
            .or(service_restart.filter(|r| r.is_object()))
            .map(|r| CheckRestart {
                limit: r.get("Limit").and_then(Value::as_u64).unwrap_or(0) as u32,
                grace: ns(r, "Grace").unwrap_or(std::time::Duration::from_secs(1)),
                ignore_warnings: r
                    .get("IgnoreWarnings")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
            .filter(|r| r.limit > 0);
        let count = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0).max(1) as u32;
        Ok(CheckSpec {
            component: if kind == CheckKind::Component {
                text(v, "Type")
            } else {
                String::new()
            },
            config: v.to_string(),
            name,
            kind,
            path,
            method: match text(v, "Method") {
                m if m.is_empty() => "GET".into(),
                m => m.to_uppercase(),
            },
            protocol,
            tls_skip_verify: v
                .get("TLSSkipVerify")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            headers,
            body: text(v, "Body"),
            port_label: text(v, "PortLabel"),
            address_mode: text(v, "AddressMode"),
            interval,
            timeout,
            initial_status,
            success_before_passing: count("SuccessBeforePassing"),
            failures_before_critical: count("FailuresBeforeCritical"),
            on_update,
            restart,
            task: text(v, "TaskName"),
        })
    }
}

impl ServiceSpec {
    /// Its checks, each with the service's `check_restart` unless it has its own.
    pub fn check_specs(&self) -> Vec<Result<CheckSpec, CheckError>> {
        self.checks
            .iter()
            .map(|c| CheckSpec::from_json(c, &self.name, self.check_restart.as_ref()))
            .collect()
    }
}

/// Whether a check `type` can name a check component: lowercase letters, digits, `-` and
/// `_`, 64 at most, starting with a letter.
fn component_name(t: &str) -> bool {
    t.len() <= 64
        && t.starts_with(|c: char| c.is_ascii_lowercase())
        && t.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Nomad's service name rule (RFC 1123 label).
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && !n.starts_with('-')
        && !n.ends_with('-')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Nomad's `ServiceRegistration`: one service of one allocation, as the registry keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ServiceRegistration {
    #[serde(rename = "ID")]
    pub id: String,
    pub service_name: String,
    pub namespace: String,
    #[serde(rename = "NodeID")]
    pub node_id: String,
    pub datacenter: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    #[serde(rename = "AllocID")]
    pub alloc_id: String,
    pub tags: Vec<String>,
    pub address: String,
    pub port: u16,
    pub create_index: u64,
    pub modify_index: u64,
}

impl ServiceRegistration {
    /// Nomad's id: `_nomad-task-<alloc>-<task>-<service>-<port label>`, the task being
    /// `group-<group>` for a group's service.
    pub fn id_for(alloc_id: &str, owner: &str, service: &str, port_label: &str) -> String {
        format!("{ID_PREFIX}{alloc_id}-{owner}-{service}-{port_label}")
    }

    /// The start of every id of an allocation's registrations.
    pub fn alloc_prefix(alloc_id: &str) -> String {
        format!("{ID_PREFIX}{alloc_id}-")
    }

    /// Whether two registrations say the same (indexes aside).
    pub fn same(&self, other: &ServiceRegistration) -> bool {
        self.id == other.id
            && self.service_name == other.service_name
            && self.tags == other.tags
            && self.address == other.address
            && self.port == other.port
    }

    /// Nomad's rendezvous hash of the registration with `key` (`?choose=N|key`).
    pub fn hash_with(&self, key: &str) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(u64::from(self.port).to_be_bytes());
        for part in [
            &self.alloc_id,
            &self.id,
            &self.namespace,
            &self.address,
            &self.service_name,
        ] {
            h.update(part.as_bytes());
        }
        for t in &self.tags {
            h.update(t.as_bytes());
        }
        h.update(key.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Nomad's `?choose=N|key`: the `N` registrations whose hash with `key` sorts first, a
/// stable choice per key (a caller's allocation id, usually). `Err` with Nomad's message
/// when the parameter is not `<number>|<key>`.
pub fn choose(
    services: Vec<ServiceRegistration>,
    parameter: &str,
) -> Result<Vec<ServiceRegistration>, String> {
    let bad = || "Parameter for choose must be in form '<number>|<key>'".to_string();
    let (n, key) = parameter.split_once('|').ok_or_else(bad)?;
    let n: usize = n.parse().map_err(|_| bad())?;
    if key.is_empty() {
        return Err(bad());
    }
    let mut ranked: Vec<(String, ServiceRegistration)> = services
        .into_iter()
        .map(|s| (s.hash_with(key), s))
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(ranked.into_iter().take(n).map(|(_, s)| s).collect())
}

/// Whether a task's services are up: it runs and is not being stopped.
fn task_up(alloc: &Allocation, task: &str) -> bool {
    alloc.task_states.get(task).is_some_and(|s| {
        s.state == TaskRunState::Running
            && !s.events.last().is_some_and(|e| {
                matches!(
                    e.event_type,
                    TaskEventType::Killing
                        | TaskEventType::Killed
                        | TaskEventType::WaitingShutdownDelay
                )
            })
    })
}

/// Whether the allocation's group services are up: it is to run, it is not over, and a
/// task of it runs. A stop takes them down at once, before any shutdown delay, as Nomad
/// deregisters before it kills.
fn group_up(alloc: &Allocation) -> bool {
    alloc.desired_status == DesiredStatus::Run
        && matches!(
            alloc.client_status,
            ClientStatus::Pending | ClientStatus::Running
        )
        && alloc.task_states.keys().any(|t| task_up(alloc, t))
}

/// The registrations `alloc` holds in its present state, each with the address and port
/// its `address_mode` gives, the canary tags while it is a canary; names and tags are
/// passed through `interpolate(task, text)` (a group's service with no task). Services of
/// another provider than Nomad's and Consul's are not registered (job validation refuses
/// them). `host_ip` is the node's address for a service with no port, `datacenter` the
/// node's.
pub fn wanted(
    alloc: &Allocation,
    host_ip: &str,
    datacenter: &str,
    interpolate: &dyn Fn(Option<&str>, &str) -> String,
) -> Vec<ServiceRegistration> {
    wanted_with_specs(alloc, host_ip, datacenter, interpolate)
        .into_iter()
        .map(|w| w.registration)
        .collect()
}

/// A registration with the block it came from and the task that owns it (none for a
/// group's service).
#[derive(Debug, Clone)]
pub struct Wanted {
    pub registration: ServiceRegistration,
    pub spec: ServiceSpec,
    pub task: Option<String>,
}

/// [`wanted`], each with its `service` block and owning task (for its checks).
pub fn wanted_with_specs(
    alloc: &Allocation,
    host_ip: &str,
    datacenter: &str,
    interpolate: &dyn Fn(Option<&str>, &str) -> String,
) -> Vec<Wanted> {
    let Some(group) = alloc.group() else {
        return Vec::new();
    };
    let mut owners: Vec<(Option<&str>, Vec<ServiceSpec>)> = Vec::new();
    if group_up(alloc) {
        owners.push((None, ServiceSpec::list(&group.kept)));
    }
    for t in &group.tasks {
        if task_up(alloc, &t.name) && alloc.desired_status == DesiredStatus::Run {
            owners.push((Some(&t.name), ServiceSpec::list(&t.kept)));
        }
    }
    let canary = alloc
        .lineage
        .deployment_status
        .as_ref()
        .is_some_and(|d| d.canary);
    let mut out = Vec::new();
    for (task, specs) in owners {
        for s in specs {
            if !matches!(s.provider.as_str(), "" | "nomad" | "consul") {
                continue;
            }
            let owner = match task {
                Some(t) => t.to_string(),
                None => format!("group-{}", alloc.task_group),
            };
            let raw_name = if s.name.is_empty() {
                format!(
                    "{}-{}{}",
                    alloc.job_id,
                    alloc.task_group,
                    task.map(|t| format!("-{t}")).unwrap_or_default()
                )
            } else {
                s.name.clone()
            };
            let name = interpolate(task, &raw_name);
            let tags = if canary && !s.canary_tags.is_empty() {
                &s.canary_tags
            } else {
                &s.tags
            };
            let label = interpolate(task, &s.port_label);
            let (address, port) = address_of(alloc, &s, &label, host_ip);
            let address = if s.address.is_empty() {
                address
            } else {
                interpolate(task, &s.address)
            };
            let registration = ServiceRegistration {
                id: ServiceRegistration::id_for(&alloc.id, &owner, &name, &label),
                service_name: name,
                namespace: alloc.namespace.clone(),
                node_id: alloc.node_id.clone(),
                datacenter: datacenter.to_string(),
                job_id: alloc.job_id.clone(),
                alloc_id: alloc.id.clone(),
                tags: tags.iter().map(|t| interpolate(task, t)).collect(),
                address,
                port,
                create_index: 0,
                modify_index: 0,
            };
            out.push(Wanted {
                registration,
                spec: s,
                task: task.map(str::to_string),
            });
        }
    }
    out
}

/// The address and port a check probes: its own port label's (in its own address mode,
/// else its service's), or the service's registration's.
pub fn check_target(
    alloc: &Allocation,
    w: &Wanted,
    check: &CheckSpec,
    host_ip: &str,
) -> (String, u16) {
    if check.port_label.is_empty() {
        return (w.registration.address.clone(), w.registration.port);
    }
    let mut s = w.spec.clone();
    if !check.address_mode.is_empty() {
        s.address_mode = check.address_mode.clone();
    }
    address_of(alloc, &s, &check.port_label, host_ip)
}

/// The address and port a service's `address_mode` gives for its port `label`: the host
/// port on the host's IP (`auto`, `host`), the port inside the task (`to`) for `alloc`; a
/// number is itself; no label is port 0 on the node's address.
fn address_of(alloc: &Allocation, s: &ServiceSpec, label: &str, host_ip: &str) -> (String, u16) {
    if let Ok(n) = label.parse::<u16>() {
        return (host_ip.to_string(), n);
    }
    match alloc
        .allocated_resources
        .shared
        .ports
        .iter()
        .find(|p| p.label == label)
    {
        Some(p) => {
            let port = if s.address_mode == "alloc" && p.to > 0 {
                u16::try_from(p.to).unwrap_or(p.value)
            } else {
                p.value
            };
            let ip = if p.host_ip.is_empty() {
                host_ip
            } else {
                &p.host_ip
            };
            (ip.to_string(), port)
        }
        None => (host_ip.to_string(), 0),
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
