//! Namespaces as objects (Nomad's `Namespace` endpoint): created, read and deleted through
//! `/v1/namespace(s)`, kept in the state DB; `default` always exists. A job is registered
//! only into a namespace that exists, with the task drivers and network modes the
//! namespace allows; a namespace is deleted only once nothing lives in it.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::Server;
use crate::jobspec::Job;
use crate::state::StateError;
use crate::structs::{ClientStatus, DEFAULT_NAMESPACE, Namespace};

/// Why a namespace was not written or deleted, or a job not admitted into one.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// The namespace as written is invalid, or the request cannot be done as asked.
    #[error("{0}")]
    Invalid(String),
    /// The state DB failed; nothing changed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The agent's namespaces, by name; `default` from the start.
pub struct NamespaceBook {
    by_name: RwLock<BTreeMap<String, Namespace>>,
}

impl Default for NamespaceBook {
    fn default() -> Self {
        let d = Namespace::default_namespace();
        Self {
            by_name: RwLock::new(BTreeMap::from([(d.name.clone(), d)])),
        }
    }
}

impl NamespaceBook {
    fn get(&self, name: &str) -> Option<Namespace> {
        self.by_name.read().unwrap().get(name).cloned()
    }
}

/// The namespace a job or request names: empty is `default`.
pub fn namespace_or_default(ns: &str) -> &str {
    if ns.is_empty() { DEFAULT_NAMESPACE } else { ns }
}

impl Server {
    /// Namespaces as the state DB had them, with `default`; a namespace that a stored job
    /// or variable lives in but that was never written as an object (an agent from before
    /// namespaces were objects kept them) is created, so nothing stored becomes
    /// unreachable.
    pub fn restore_namespaces(&self) {
        let stored = self.db.namespaces().unwrap_or_else(|e| {
            tracing::error!(error = %e, "reading namespaces failed");
            Vec::new()
        });
        let mut book = self.namespaces.by_name.write().unwrap();
        book.extend(stored.into_iter().map(|n| (n.name.clone(), n)));
        let used: std::collections::BTreeSet<String> = self
            .jobs
            .read()
            .unwrap()
            .keys()
            .map(|(ns, _)| ns.clone())
            .chain(
                self.vars
                    .list(super::vars::Namespaces::All, "")
                    .into_iter()
                    .map(|v| v.namespace),
            )
            .collect();
        for name in used {
            if book.contains_key(&name) {
                continue;
            }
            let mut ns = Namespace {
                name: name.clone(),
                description: "created at start for the jobs and variables stored in it".into(),
                ..Default::default()
            };
            ns.create_index = self.changes.index();
            ns.modify_index = ns.create_index;
            ns.set_hash();
            if let Err(e) = self.db.put_namespace(&ns) {
                tracing::error!(namespace = %name, error = %e, "storing namespace failed");
            }
            tracing::info!(namespace = %name, "namespace created for what the state DB kept in it");
            book.insert(name, ns);
        }
    }

    /// Every namespace, by name.
    pub fn namespaces(&self) -> Vec<Namespace> {
        self.namespaces
            .by_name
            .read()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }

    /// The namespace `name`, if it exists.
    pub fn namespace(&self, name: &str) -> Option<Namespace> {
        self.namespaces.get(name)
    }

    /// Create or replace a namespace (Nomad's `Namespace.UpsertNamespaces`); returns the
    /// change's index. Fields kept but not acted on are logged, each named.
    pub fn upsert_namespace(&self, mut ns: Namespace) -> Result<u64, NamespaceError> {
        ns.validate().map_err(|e| {
            NamespaceError::Invalid(format!("Invalid namespace {:?}: {e}", ns.name))
        })?;
        let unacted = ns.unacted_fields();
        if !unacted.is_empty() {
            tracing::warn!(namespace = %ns.name, fields = ?unacted, "namespace fields kept but not acted on by this agent");
        }
        let mut book = self.namespaces.by_name.write().unwrap();
        let index = self.changes.bump();
        ns.create_index = book.get(&ns.name).map_or(index, |old| old.create_index);
        ns.modify_index = index;
        ns.set_hash();
        self.db.put_namespace(&ns)?;
        book.insert(ns.name.clone(), ns);
        Ok(index)
    }

    /// Delete namespaces (Nomad's `Namespace.DeleteNamespaces`): refused for `default`,
    /// and for one that still has jobs that are not dead, allocations that have not ended,
    /// or variables, each reason named. Deleting one that does not exist is no error.
    pub fn delete_namespace(&self, name: &str) -> Result<u64, NamespaceError> {
        if name == DEFAULT_NAMESPACE {
            return Err(NamespaceError::Invalid(
                "can not delete default namespace".into(),
            ));
        }
        let mut book = self.namespaces.by_name.write().unwrap();
        if !book.contains_key(name) {
            return Ok(self.changes.index());
        }
        let problems = self.what_lives_in(name);
        if !problems.is_empty() {
            return Err(NamespaceError::Invalid(problems.join("; ")));
        }
        self.db.delete_namespace(name)?;
        book.remove(name);
        Ok(self.changes.bump())
    }

    /// What keeps namespace `name` from being deleted, in Nomad's words.
    fn what_lives_in(&self, name: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let jobs: Vec<Job> = self
            .jobs()
            .into_iter()
            .filter(|j| j.namespace == name)
            .collect();
        if jobs.iter().any(|j| j.state.status != "dead") {
            problems.push(format!(
                "namespace {name:?} has non-terminal jobs in regions: [global]"
            ));
        }
        let live = jobs.iter().any(|j| {
            self.visit_job_allocations(&j.namespace, &j.id, false, |a| {
                (!matches!(
                    a.client_status,
                    ClientStatus::Complete | ClientStatus::Failed | ClientStatus::Lost
                ))
                .then_some(())
            })
            .into_iter()
            .next()
            .is_some()
        });
        if live {
            problems.push(format!(
                "namespace {name:?} has non-terminal allocations in regions: [global]"
            ));
        }
        if !self
            .vars
            .list(super::vars::Namespaces::One(name), "")
            .is_empty()
        {
            problems.push(format!(
                "namespace {name:?} has variables associated with it in regions: [global]"
            ));
        }
        problems
    }

    /// Admit `job` into its namespace, as Nomad's registration does: an empty namespace is
    /// `default`; the namespace must exist; its drivers, network modes and node pools must
    /// be allowed there; the pool must exist (`default` or `all`, Nomad's built-in ones). A
    /// job that names no pool (`default`) gets the namespace's.
    pub fn admit_into_namespace(&self, job: &mut Job) -> Result<(), NamespaceError> {
        if job.namespace.is_empty() {
            job.namespace = DEFAULT_NAMESPACE.into();
        }
        let Some(ns) = self.namespaces.get(&job.namespace) else {
            return Err(NamespaceError::Invalid(format!(
                "job {:?} is in nonexistent namespace {:?}",
                job.id, job.namespace
            )));
        };
        let drivers = not_allowed(
            job.task_groups
                .iter()
                .flat_map(|g| &g.tasks)
                .map(|t| t.driver.as_str()),
            |d| ns.allows_driver(d),
        );
        if let Some(list) = drivers {
            return Err(NamespaceError::Invalid(refusal(
                "task driver",
                &list,
                &ns.name,
            )));
        }
        let modes = not_allowed(
            job.task_groups.iter().flat_map(|g| &g.networks).map(|n| {
                if n.mode.is_empty() {
                    "host"
                } else {
                    n.mode.as_str()
                }
            }),
            |m| ns.allows_network_mode(m),
        );
        if let Some(list) = modes {
            return Err(NamespaceError::Invalid(refusal(
                "group network mode",
                &list,
                &ns.name,
            )));
        }
        let pool = job
            .kept
            .get("NodePool")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        if pool.is_empty() || pool == "default" {
            let default = ns.default_node_pool().to_string();
            job.kept.insert("NodePool".into(), default.into());
        }
        let pool = job
            .kept
            .get("NodePool")
            .and_then(|v| v.as_str())
            .unwrap_or("default");
        // Nomad's two built-in pools are the only ones here: the node is in `default`, and
        // `all` takes every node.
        if !matches!(pool, "default" | "all") {
            return Err(NamespaceError::Invalid(format!(
                "job {:?} is in nonexistent node pool {pool:?}",
                job.id
            )));
        }
        if !ns.allows_node_pool(pool) {
            return Err(NamespaceError::Invalid(format!(
                "namespace {:?} does not allow jobs to use node pool {pool:?}",
                ns.name
            )));
        }
        Ok(())
    }
}

/// The names `allowed` refuses, each once, or `None` when it refuses none.
fn not_allowed<'a>(
    names: impl Iterator<Item = &'a str>,
    allowed: impl Fn(&str) -> bool,
) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !allowed(n) && !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Nomad's refusal of a driver or network mode: `used task driver "x" is not allowed in
/// namespace "y"`, or the plural with a list.
fn refusal(what: &str, list: &[String], ns: &str) -> String {
    if let [one] = list {
        format!("used {what} {one:?} is not allowed in namespace {ns:?}")
    } else {
        let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
        format!(
            "used {what}s [{}] are not allowed in namespace {ns:?}",
            quoted.join(" ")
        )
    }
}
