//! The client's side of Nomad-native service registration: after each change of an
//! allocation that has `service` blocks, the registrations it holds in its new state
//! ([`crate::structs::service::wanted`]: group services while a task of it runs and it is
//! not stopping, a task's while that task runs and is not being killed) go to the server
//! whenever they differ from what was last sent, as Nomad's client upserts and deletes
//! its registrations. Names, tags and addresses are interpolated with the task's
//! environment (a group's service with its first task's).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::Client;
use crate::structs::{Allocation, ServiceRegistration};
use crate::taskenv::{EnvBuilder, EnvRequest, NodeInfo};

/// An allocation's registrations as of its last change.
pub type ServiceUpdate = (String, Vec<ServiceRegistration>);

/// What was last sent and run for an allocation: its registrations and its checks' ids.
type Sent = (Vec<ServiceRegistration>, Vec<String>);

/// What the client sent, and the channel to the server.
pub struct ServiceSync {
    tx: UnboundedSender<ServiceUpdate>,
    rx: Mutex<Option<UnboundedReceiver<ServiceUpdate>>>,
    /// Per allocation, the registrations last sent and the checks last set.
    sent: Mutex<HashMap<String, Sent>>,
}

impl Default for ServiceSync {
    fn default() -> Self {
        let (tx, rx) = unbounded_channel();
        Self {
            tx,
            rx: Mutex::new(Some(rx)),
            sent: Mutex::default(),
        }
    }
}

/// Whether an allocation's group or a task of it has `service` blocks.
fn has_services(a: &Allocation) -> bool {
    let listed = |k: &crate::jobspec::Kept| {
        k.get("Services")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|l| !l.is_empty())
    };
    a.group()
        .is_some_and(|g| listed(&g.kept) || g.tasks.iter().any(|t| listed(&t.kept)))
}

/// The environments `text`s of one allocation are interpolated with, built once per task
/// for one change of the allocation (a group service's: its first task's).
struct Envs<'a> {
    a: &'a Allocation,
    node: &'a NodeInfo,
    alloc_root: &'a std::path::Path,
    built: std::cell::RefCell<HashMap<Option<String>, Option<crate::taskenv::TaskEnv>>>,
}

impl Envs<'_> {
    /// `text` with `task`'s environment.
    fn interpolate(&self, task: Option<&str>, text: &str) -> String {
        if !text.contains("${") {
            return text.to_string();
        }
        let mut built = self.built.borrow_mut();
        let env = built
            .entry(task.map(str::to_string))
            .or_insert_with(|| self.build(task));
        match env {
            Some(env) => env.interpolate(text),
            None => text.to_string(),
        }
    }

    fn build(&self, task: Option<&str>) -> Option<crate::taskenv::TaskEnv> {
        let a = self.a;
        let group = a.group()?;
        let t = match task {
            Some(name) => group.tasks.iter().find(|t| t.name == name),
            None => group.tasks.first(),
        }?;
        let dirs = crate::allocdir::AllocDir::new(self.alloc_root, &a.id).task_dirs(&t.name);
        Some(
            EnvBuilder::new(EnvRequest {
                job: &a.job,
                group,
                task: t,
                alloc_id: &a.id,
                alloc_index: a.index,
                dirs: &dirs,
                node: self.node,
                ports: &a.allocated_resources.shared.ports,
                cpu: a.allocated_resources.tasks.get(&t.name).map(|r| &r.cpu),
            })
            .build(),
        )
    }
}

/// The checks of an allocation's registered services (those it runs: http and tcp).
fn watches(
    a: &Allocation,
    wanted: &[crate::structs::service::Wanted],
    host_ip: &str,
    interpolate: &dyn Fn(Option<&str>, &str) -> String,
) -> Vec<super::checks::Watch> {
    let mut out = Vec::new();
    for w in wanted {
        for mut spec in w.spec.check_specs().into_iter().flatten() {
            // Its request with the task's environment, as Nomad interpolates a check.
            let task = w.task.as_deref();
            spec.path = interpolate(task, &spec.path);
            spec.body = interpolate(task, &spec.body);
            for values in spec.headers.values_mut() {
                for v in values.iter_mut() {
                    *v = interpolate(task, v);
                }
            }
            let (address, port) = crate::structs::service::check_target(a, w, &spec, host_ip);
            let refused = (!own_port(a, host_ip, &address, port)).then(|| {
                format!(
                    "{address}:{port} is not one of the allocation's ports on this node; a check probes only those"
                )
            });
            let task = w.task.clone().unwrap_or_default();
            let service = &w.registration.service_name;
            out.push(super::checks::Watch {
                id: super::checks::Watch::make_id(&a.id, &a.task_group, &task, service, &spec),
                alloc_id: a.id.clone(),
                group: a.task_group.clone(),
                task: w.task.clone(),
                service: service.clone(),
                spec,
                address,
                port,
                refused,
            });
        }
    }
    out
}

/// Whether `address:port` is one of the allocation's own reserved ports (its host port
/// on its address, or the port inside the task for `alloc` mode): a check probes nothing
/// else, so a job cannot make the agent reach other hosts or other listeners of this one.
fn own_port(a: &Allocation, host_ip: &str, address: &str, port: u16) -> bool {
    a.allocated_resources.shared.ports.iter().any(|p| {
        let ip = if p.host_ip.is_empty() {
            host_ip
        } else {
            &p.host_ip
        };
        ip == address && (p.value == port || (p.to > 0 && i64::from(port) == i64::from(p.to)))
    })
}

impl Client {
    /// The registrations the client sends, once (the server takes them).
    pub fn take_service_updates(&self) -> Option<UnboundedReceiver<ServiceUpdate>> {
        self.services.rx.lock().unwrap().take()
    }

    /// What each allocation change runs: its registrations, sent when they changed.
    pub(super) fn service_hook(&self) -> Arc<dyn Fn(&Allocation) + Send + Sync> {
        let sync = self.services.clone();
        let checks = self.checks.clone();
        let node = Arc::new(self.node());
        let host_ip = self.host_ip.clone();
        let alloc_root = self.alloc_root.clone();
        Arc::new(move |a: &Allocation| {
            if !has_services(a) {
                return;
            }
            let envs = Envs {
                a,
                node: &node,
                alloc_root: &alloc_root,
                built: Default::default(),
            };
            let wanted = crate::structs::service::wanted_with_specs(
                a,
                &host_ip,
                &node.datacenter,
                &|task, text| envs.interpolate(task, text),
            );
            let watches = watches(a, &wanted, &host_ip, &|task, text| {
                envs.interpolate(task, text)
            });
            let regs: Vec<ServiceRegistration> =
                wanted.into_iter().map(|w| w.registration).collect();
            let now: Sent = (regs, watches.iter().map(|w| w.id.clone()).collect());
            let mut sent = sync.sent.lock().unwrap();
            if sent.get(&a.id) == Some(&now) {
                return;
            }
            // Sent under the lock: an allocation's updates reach the server in order.
            let _ = sync.tx.send((a.id.clone(), now.0.clone()));
            checks.set(&a.id, watches);
            if now.0.is_empty() && a.is_terminal() {
                sent.remove(&a.id);
            } else {
                sent.insert(a.id.clone(), now);
            }
        })
    }
}
