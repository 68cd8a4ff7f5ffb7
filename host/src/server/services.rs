//! Nomad's native service registry (`provider = "nomad"`): what the client registers for
//! its allocations' services, kept in the state DB and answered at `/v1/services`,
//! `/v1/service/{name}` and `/v1/allocation/{id}/services`. The client hands over each
//! allocation's registrations whole ([`Server::sync_alloc_services`]); the registry keeps
//! what changed, with Nomad's indexes, and publishes each change on the `Service` topic
//! (`ServiceRegistration`, `ServiceDeregistration`).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::Server;
use crate::runtime::host_api::services::ServiceHost;
use crate::runtime::types::{
    HostError, ServiceChoice, ServiceRegistration as HostRegistration, ServiceStub as HostStub,
};
use crate::structs::ServiceRegistration;

/// The registrations, by id. Ids begin with `_nomad-task-<alloc id>-`, so an
/// allocation's are one range.
#[derive(Default)]
pub struct ServiceBook {
    by_id: RwLock<BTreeMap<String, ServiceRegistration>>,
}

/// Nomad's `ServiceRegistrationListStub`: one namespace's service names with their tags.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ServiceListStub {
    pub namespace: String,
    pub services: Vec<ServiceStub>,
}

/// A service name and the union of its registrations' tags.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ServiceStub {
    pub service_name: String,
    pub tags: Vec<String>,
}

impl ServiceBook {
    /// The registrations of service `name` in `namespace`, by id.
    fn named(&self, namespace: &str, name: &str) -> Vec<ServiceRegistration> {
        self.by_id
            .read()
            .unwrap()
            .values()
            .filter(|s| s.namespace == namespace && s.service_name == name)
            .cloned()
            .collect()
    }
}

/// Tasks' templates read the registry through the runtime's `services` interface, within
/// their own namespace (the runtime's view decides which).
impl ServiceHost for ServiceBook {
    fn get(
        &self,
        namespace: &str,
        name: &str,
        tag: Option<&str>,
        choose: Option<&ServiceChoice>,
    ) -> Result<Vec<HostRegistration>, HostError> {
        let mut found = self.named(namespace, name);
        if let Some(tag) = tag {
            found.retain(|s| s.tags.iter().any(|t| t == tag));
        }
        if let Some(c) = choose {
            found = crate::structs::service::choose(found, &format!("{}|{}", c.count, c.key))
                .map_err(HostError::Invalid)?;
        }
        Ok(found
            .into_iter()
            .map(|s| HostRegistration {
                id: s.id,
                service_name: s.service_name,
                namespace: s.namespace,
                node_id: s.node_id,
                datacenter: s.datacenter,
                job_id: s.job_id,
                alloc_id: s.alloc_id,
                tags: s.tags,
                address: s.address,
                port: s.port,
            })
            .collect())
    }

    fn list(&self, namespace: &str) -> Result<Vec<HostStub>, HostError> {
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in self.by_id.read().unwrap().values() {
            if s.namespace == namespace {
                by_name
                    .entry(s.service_name.clone())
                    .or_default()
                    .extend(s.tags.iter().cloned());
            }
        }
        Ok(by_name
            .into_iter()
            .map(|(name, mut tags)| {
                tags.sort();
                tags.dedup();
                HostStub {
                    name,
                    namespace: namespace.to_string(),
                    tags,
                }
            })
            .collect())
    }
}

impl Server {
    /// Every `secret` block names a loaded secret provider component, or the job is
    /// refused naming the field and what is loaded (a task would fail at every start).
    fn secret_providers_known(
        &self,
        job: &crate::jobspec::Job,
    ) -> Result<(), crate::jobspec::JobspecError> {
        let mut loaded: Option<Vec<String>> = None;
        for (gi, g) in job.task_groups.iter().enumerate() {
            for (ti, t) in g.tasks.iter().enumerate() {
                for (si, s) in t.secrets.iter().enumerate() {
                    let names = loaded.get_or_insert_with(|| self.client.plugins().secrets.names());
                    if !names.contains(&s.provider) {
                        return Err(crate::jobspec::JobspecError::new(
                            format!("Job.TaskGroups[{gi}].Tasks[{ti}].Secrets[{si}].Provider"),
                            format!(
                                "no secret provider {:?} is loaded (loaded: {})",
                                s.provider,
                                if names.is_empty() {
                                    "none".to_string()
                                } else {
                                    names.join(", ")
                                }
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every check of `job` whose `type` names a check component names one that is loaded:
    /// else the error names the check's `Type` field and what is loaded.
    pub(super) fn check_components_known(
        &self,
        job: &crate::jobspec::Job,
    ) -> Result<(), crate::jobspec::JobspecError> {
        self.secret_providers_known(job)?;
        use crate::structs::service::{CheckKind, ServiceSpec};
        let mut loaded: Option<Vec<String>> = None;
        for (gi, g) in job.task_groups.iter().enumerate() {
            let gp = format!("Job.TaskGroups[{gi}]");
            let owners = std::iter::once((gp.clone(), &g.kept)).chain(
                g.tasks
                    .iter()
                    .enumerate()
                    .map(|(ti, t)| (format!("{gp}.Tasks[{ti}]"), &t.kept)),
            );
            for (path, kept) in owners {
                for (si, s) in ServiceSpec::list(kept).iter().enumerate() {
                    for (ci, c) in s.check_specs().into_iter().enumerate() {
                        let Ok(c) = c else { continue };
                        if c.kind != CheckKind::Component {
                            continue;
                        }
                        let names =
                            loaded.get_or_insert_with(|| self.client.check_component_names());
                        if !names.contains(&c.component) {
                            let have = if names.is_empty() {
                                "none".to_string()
                            } else {
                                names.join(", ")
                            };
                            return Err(crate::jobspec::JobspecError::new(
                                format!("{path}.Services[{si}].Checks[{ci}].Type"),
                                format!(
                                    "check type {:?} is not http, tcp, script or grpc, and no check component of that name is loaded (loaded: {have})",
                                    c.component
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The registrations the state DB kept, less those of allocations that are no longer
    /// live on this node (they ended while the agent was down): those are removed.
    pub fn restore_services(&self) {
        let stored = self.db.services().unwrap_or_else(|e| {
            tracing::error!(error = %e, "reading service registrations failed");
            Vec::new()
        });
        let (live, stale): (Vec<_>, Vec<_>) = stored.into_iter().partition(|s| {
            self.client
                .peek_allocation(&s.alloc_id, |a| !a.is_terminal())
                .unwrap_or(false)
        });
        if !stale.is_empty() {
            let ids: Vec<String> = stale.iter().map(|s| s.id.clone()).collect();
            tracing::info!(
                count = ids.len(),
                "removing the service registrations of allocations that ended"
            );
            if let Err(e) = self.db.write_services(&[], &ids) {
                crate::state::log_write_failed(&e, "service registrations", "stale");
            }
        }
        let mut book = self.services.by_id.write().unwrap();
        book.extend(live.into_iter().map(|s| (s.id.clone(), s)));
    }

    /// Apply the client's registrations for `alloc_id`: new and changed ones are written
    /// (a changed one keeps its create index), the allocation's others removed.
    pub fn sync_alloc_services(&self, alloc_id: &str, wanted: Vec<ServiceRegistration>) {
        let (put, gone, index) = {
            let mut book = self.services.by_id.write().unwrap();
            let prefix = ServiceRegistration::alloc_prefix(alloc_id);
            let held: Vec<String> = book
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .filter(|(_, s)| s.alloc_id == alloc_id)
                .map(|(k, _)| k.clone())
                .collect();
            let wanted_ids: std::collections::HashSet<String> =
                wanted.iter().map(|w| w.id.clone()).collect();
            let mut put = Vec::new();
            for mut w in wanted {
                match book.get(&w.id) {
                    Some(old) if old.same(&w) => continue,
                    Some(old) => w.create_index = old.create_index,
                    None => w.create_index = 0,
                }
                put.push(w);
            }
            let gone: Vec<ServiceRegistration> = held
                .iter()
                .filter(|id| !wanted_ids.contains(*id))
                .filter_map(|id| book.remove(id))
                .collect();
            if put.is_empty() && gone.is_empty() {
                return;
            }
            // Taken under the book's lock: a blocking query it wakes reads the book after
            // the change is in it.
            let index = self.changes.bump();
            for p in &mut put {
                if p.create_index == 0 {
                    p.create_index = index;
                }
                p.modify_index = index;
                book.insert(p.id.clone(), p.clone());
            }
            (put, gone, index)
        };
        let ids: Vec<String> = gone.iter().map(|g| g.id.clone()).collect();
        if let Err(e) = self.db.write_services(&put, &ids) {
            crate::state::log_write_failed(&e, "service registrations", alloc_id);
        }
        tracing::info!(alloc_id = %alloc_id, registered = put.len(), deregistered = gone.len(), "services of the allocation");
        for (s, kind) in put
            .into_iter()
            .map(|s| (s, "ServiceRegistration"))
            .chain(gone.into_iter().map(|s| (s, "ServiceDeregistration")))
        {
            tracing::debug!(service = %s.service_name, id = %s.id, alloc_id = %s.alloc_id, address = %s.address, port = s.port, event = kind, "service registry");
            self.publish_service(kind, index, s);
        }
    }

    fn publish_service(&self, kind: &'static str, index: u64, s: ServiceRegistration) {
        self.changes.events.publish(|| crate::events::Event {
            topic: "Service",
            event_type: kind,
            key: s.id.clone(),
            namespace: s.namespace.clone(),
            filter_keys: vec![s.job_id.clone(), s.service_name.clone()],
            index,
            payload: crate::events::Payload::Service(Box::new(s)),
            line: Default::default(),
        });
    }

    /// Every registration of `namespaces` (each namespace `keep` accepts), by id.
    pub fn service_registrations(&self, keep: impl Fn(&str) -> bool) -> Vec<ServiceRegistration> {
        self.services
            .by_id
            .read()
            .unwrap()
            .values()
            .filter(|s| keep(&s.namespace))
            .cloned()
            .collect()
    }

    /// Nomad's `/v1/services`: per namespace `keep` accepts, each service name with the
    /// union of its tags, names sorted.
    pub fn service_list(&self, keep: impl Fn(&str) -> bool) -> Vec<ServiceListStub> {
        let mut by_ns: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for s in self.service_registrations(keep) {
            let tags = by_ns
                .entry(s.namespace)
                .or_default()
                .entry(s.service_name)
                .or_default();
            for t in s.tags {
                if !tags.contains(&t) {
                    tags.push(t);
                }
            }
        }
        by_ns
            .into_iter()
            .map(|(namespace, names)| ServiceListStub {
                namespace,
                services: names
                    .into_iter()
                    .map(|(service_name, tags)| ServiceStub { service_name, tags })
                    .collect(),
            })
            .collect()
    }

    /// The registrations of service `name` in `namespace`, in Nomad's order (by id).
    pub fn service(&self, namespace: &str, name: &str) -> Vec<ServiceRegistration> {
        self.services.named(namespace, name)
    }

    /// An allocation's registrations.
    pub fn alloc_services(&self, alloc_id: &str) -> Vec<ServiceRegistration> {
        let book = self.services.by_id.read().unwrap();
        let prefix = ServiceRegistration::alloc_prefix(alloc_id);
        book.range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, s)| s.alloc_id == alloc_id)
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Nomad's `DELETE /v1/service/{name}/{id}`: remove one registration of `namespace`.
    /// `None` when there is none by that id there; else the change's index.
    pub fn delete_service(&self, namespace: &str, id: &str) -> Option<u64> {
        let (gone, index) = {
            let mut book = self.services.by_id.write().unwrap();
            if book.get(id).is_none_or(|s| s.namespace != namespace) {
                return None;
            }
            let gone = book.remove(id)?;
            (gone, self.changes.bump())
        };
        if let Err(e) = self.db.write_services(&[], std::slice::from_ref(&gone.id)) {
            crate::state::log_write_failed(&e, "service registrations", id);
        }
        self.publish_service("ServiceDeregistration", index, gone);
        Some(index)
    }

    /// Take the client's registrations as its allocations change, for as long as the
    /// server lives.
    pub fn spawn_service_sync(self: &Arc<Self>) {
        let Some(mut rx) = self.client.take_service_updates() else {
            return;
        };
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some((alloc_id, wanted)) = rx.recv().await {
                let Some(server) = weak.upgrade() else { return };
                server.sync_alloc_services(&alloc_id, wanted);
            }
        });
    }
}
