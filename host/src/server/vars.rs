//! Nomad Variables: small key/value documents at a path in a namespace, kept in the state
//! DB and served by `/v1/var(s)` and, to tasks, by the runtime's `variables` interface.
//!
//! [`VarStore`] holds every variable in memory, loaded from the state DB at start; a write
//! goes to the DB first and then to memory, one writer at a time, so a check-and-set
//! (`?cas=`) sees the variable exactly as the last write left it. Every change takes a new
//! agent change index: a variable's `ModifyIndex` is the index of its last write, which is
//! what `?cas=N` compares with. At start the change index is raised past every stored
//! variable's, so an index is never handed out twice.
//!
//! What a task may read is Nomad's default workload-identity policy ([`may_read`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

mod rules;

pub use rules::{InvalidVariable, MAX_ITEMS_SIZE, may_read, validate_path};
use rules::{denied, validate_namespace};

use super::Server;
use crate::changes::Changes;
use crate::runtime::host_api::variables::VariableHost;
use crate::runtime::types::HostError;
use crate::runtime::{VariableMetadata as HostMetadata, WorkloadIdentity};
use crate::state::{StateDb, StateError};
use crate::structs::{Variable, VariableMetadata};

/// Why a write or delete of a variable did not happen.
#[derive(Debug, thiserror::Error)]
pub enum VarError {
    /// The request is invalid.
    #[error(transparent)]
    Invalid(#[from] InvalidVariable),
    /// `?cas=` did not match. `current` is the variable as it is, `None` when there is none
    /// (Nomad then answers with a variable that has only its namespace and path).
    #[error("cas conflict: expected ModifyIndex {expected}; found {}", current.as_ref().map_or(0, |v| v.meta.modify_index))]
    Conflict {
        /// The index the request expected.
        expected: u64,
        /// Namespace asked.
        namespace: String,
        /// Path asked.
        path: String,
        /// The variable now.
        current: Option<Box<Variable>>,
    },
    /// The state DB failed; nothing changed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// A write of a variable (`PUT /v1/var/{path}`).
#[derive(Debug, Clone, Default)]
pub struct VarWrite {
    pub namespace: String,
    pub path: String,
    /// The items; the whole set replaces the old one.
    pub items: BTreeMap<String, String>,
    /// Check-and-set: `Some(0)` writes only a new variable, `Some(n)` only over the one
    /// whose `ModifyIndex` is `n`.
    pub cas: Option<u64>,
}

/// Which namespaces a list covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespaces<'a> {
    /// One namespace.
    One(&'a str),
    /// Every namespace (`?namespace=*`).
    All,
}

/// The agent's variables: in memory, backed by the state DB.
pub struct VarStore {
    db: Arc<dyn StateDb>,
    changes: Arc<Changes>,
    vars: RwLock<BTreeMap<(String, String), Variable>>,
    /// Held across a write's check, DB write and memory update: one writer at a time.
    writer: Mutex<()>,
}

impl VarStore {
    /// The variables `db` holds; raises `changes` past their indexes.
    pub fn load(db: Arc<dyn StateDb>, changes: Arc<Changes>) -> Result<Arc<Self>, StateError> {
        let mut vars = BTreeMap::new();
        for v in db.variables()? {
            changes.raise_to(v.meta.modify_index);
            vars.insert((v.meta.namespace.clone(), v.meta.path.clone()), v);
        }
        Ok(Arc::new(Self {
            db,
            changes,
            vars: RwLock::new(vars),
            writer: Mutex::new(()),
        }))
    }

    /// One variable.
    pub fn get(&self, namespace: &str, path: &str) -> Option<Variable> {
        self.vars
            .read()
            .unwrap()
            .get(&(namespace.to_string(), path.to_string()))
            .cloned()
    }

    /// Metadata of the variables in `ns` whose path starts with `prefix`, ordered by
    /// namespace, then path.
    pub fn list(&self, ns: Namespaces<'_>, prefix: &str) -> Vec<VariableMetadata> {
        self.vars
            .read()
            .unwrap()
            .values()
            .filter(|v| ns == Namespaces::All || ns == Namespaces::One(&v.meta.namespace))
            .filter(|v| v.meta.path.starts_with(prefix))
            .map(|v| v.meta.clone())
            .collect()
    }

    /// Write a variable; returns it as stored.
    pub fn put(&self, w: VarWrite) -> Result<Variable, VarError> {
        validate_namespace(&w.namespace)?;
        validate_path(&w.path)?;
        if w.items.is_empty() {
            return Err(InvalidVariable::NoItems.into());
        }
        if w.items
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
            > MAX_ITEMS_SIZE
        {
            return Err(InvalidVariable::TooLarge.into());
        }
        let _writer = self.writer.lock().unwrap();
        let existing = self.get(&w.namespace, &w.path);
        if let Some(expected) = w.cas {
            let found = existing.as_ref().map(|v| v.meta.modify_index);
            // cas=0: create only; cas=n: only over the variable whose ModifyIndex is n.
            let ok = match found {
                None => expected == 0,
                Some(index) => expected != 0 && index == expected,
            };
            if !ok {
                return Err(VarError::Conflict {
                    expected,
                    namespace: w.namespace,
                    path: w.path,
                    current: existing.map(Box::new),
                });
            }
        }
        let index = self.changes.bump();
        let now = crate::util::now_nanos() as i64;
        let (create_index, create_time) = existing
            .as_ref()
            .map_or((index, now), |e| (e.meta.create_index, e.meta.create_time));
        let var = Variable {
            meta: VariableMetadata {
                namespace: w.namespace,
                path: w.path,
                create_index,
                create_time,
                modify_index: index,
                modify_time: now,
            },
            items: w.items,
        };
        self.db.put_variable(&var)?;
        self.vars.write().unwrap().insert(
            (var.meta.namespace.clone(), var.meta.path.clone()),
            var.clone(),
        );
        self.publish("VariableUpserted", index, &var.meta);
        tracing::debug!(namespace = %var.meta.namespace, path = %var.meta.path, index, "variable written");
        Ok(var)
    }

    /// Delete a variable, with Nomad's check-and-set: `Some(0)` succeeds only when there is
    /// none, `Some(n)` only when its `ModifyIndex` is `n`. Deleting a variable that does not
    /// exist (without `cas`) changes nothing and is not an error. Returns the change index.
    pub fn delete(&self, namespace: &str, path: &str, cas: Option<u64>) -> Result<u64, VarError> {
        validate_namespace(namespace)?;
        if path.is_empty() {
            return Err(InvalidVariable::NoPath.into());
        }
        let _writer = self.writer.lock().unwrap();
        let existing = self.get(namespace, path);
        if let Some(expected) = cas {
            let ok = match &existing {
                None => expected == 0,
                Some(v) => expected != 0 && v.meta.modify_index == expected,
            };
            if !ok {
                return Err(VarError::Conflict {
                    expected,
                    namespace: namespace.to_string(),
                    path: path.to_string(),
                    current: existing.map(Box::new),
                });
            }
        }
        let Some(old) = existing else {
            return Ok(self.changes.index());
        };
        self.db.delete_variable(namespace, path)?;
        let index = self.changes.bump();
        self.vars
            .write()
            .unwrap()
            .remove(&(namespace.to_string(), path.to_string()));
        let mut meta = old.meta;
        meta.modify_index = index;
        self.publish("VariableDeleted", index, &meta);
        tracing::debug!(namespace, path, index, "variable deleted");
        Ok(index)
    }

    /// A `Variables` event for the event stream (metadata only, as Nomad sends).
    fn publish(&self, event_type: &'static str, index: u64, meta: &VariableMetadata) {
        self.changes.events.publish(|| crate::events::Event {
            topic: "Variables",
            event_type,
            key: meta.path.clone(),
            namespace: meta.namespace.clone(),
            filter_keys: Vec::new(),
            index,
            payload: crate::events::Payload::Variable(Box::new(meta.clone())),
            line: Default::default(),
        });
    }
}

/// Tasks read variables through the runtime's `variables` interface.
impl VariableHost for VarStore {
    fn get(
        &self,
        who: &WorkloadIdentity,
        path: &str,
    ) -> Result<Option<Vec<(String, String)>>, HostError> {
        if !may_read(who, path) {
            return Err(denied(who, path));
        }
        Ok(VarStore::get(self, &who.namespace, path).map(|v| v.items.into_iter().collect()))
    }

    fn list(&self, who: &WorkloadIdentity, prefix: &str) -> Result<Vec<HostMetadata>, HostError> {
        Ok(
            VarStore::list(self, Namespaces::One(&who.namespace), prefix)
                .into_iter()
                .filter(|m| may_read(who, &m.path))
                .map(|m| HostMetadata {
                    namespace: m.namespace,
                    path: m.path,
                    create_index: m.create_index,
                    modify_index: m.modify_index,
                    create_time: m.create_time,
                    modify_time: m.modify_time,
                })
                .collect(),
        )
    }
}

/// The API's operations on variables.
impl Server {
    /// Metadata of the variables in `ns` whose path starts with `prefix`.
    pub fn variables(&self, ns: Namespaces<'_>, prefix: &str) -> Vec<VariableMetadata> {
        self.vars.list(ns, prefix)
    }

    /// One variable.
    pub fn variable(&self, namespace: &str, path: &str) -> Option<Variable> {
        self.vars.get(namespace, path)
    }

    /// Write a variable (see [`VarWrite`]); returns it as stored.
    pub fn put_variable(&self, w: VarWrite) -> Result<Variable, VarError> {
        self.vars.put(w)
    }

    /// Delete a variable (see [`VarStore::delete`]); returns the change index.
    pub fn delete_variable(
        &self,
        namespace: &str,
        path: &str,
        cas: Option<u64>,
    ) -> Result<u64, VarError> {
        self.vars.delete(namespace, path, cas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemState;

    fn store() -> Arc<VarStore> {
        VarStore::load(Arc::new(MemState::new()), Arc::default()).unwrap()
    }

    fn write(path: &str, cas: Option<u64>) -> VarWrite {
        VarWrite {
            namespace: "default".into(),
            path: path.into(),
            items: [("k".to_string(), "v".to_string())].into(),
            cas,
        }
    }

    #[test]
    fn cas_creates_only_new_variables_and_updates_only_the_index_given() {
        let s = store();
        let v1 = s.put(write("a", Some(0))).unwrap();
        assert_eq!(v1.meta.create_index, v1.meta.modify_index);
        let e = s.put(write("a", Some(0))).unwrap_err();
        assert!(
            matches!(&e, VarError::Conflict { current: Some(c), .. } if c.meta.modify_index == v1.meta.modify_index),
            "{e:?}"
        );
        let v2 = s.put(write("a", Some(v1.meta.modify_index))).unwrap();
        assert!(v2.meta.modify_index > v1.meta.modify_index);
        assert_eq!(v2.meta.create_index, v1.meta.create_index);
        assert!(matches!(
            s.put(write("a", Some(v1.meta.modify_index))),
            Err(VarError::Conflict { .. })
        ));
        // A cas index on a variable that does not exist is a conflict with none.
        assert!(matches!(
            s.put(write("b", Some(7))),
            Err(VarError::Conflict { current: None, .. })
        ));
        assert!(matches!(
            s.delete("default", "a", Some(v1.meta.modify_index)),
            Err(VarError::Conflict { .. })
        ));
        s.delete("default", "a", Some(v2.meta.modify_index))
            .unwrap();
        assert!(s.get("default", "a").is_none());
        // cas=0 deletes only what is not there; plain deletes of nothing succeed.
        s.delete("default", "a", Some(0)).unwrap();
        s.delete("default", "a", None).unwrap();
    }

    #[test]
    fn items_and_namespaces_are_checked() {
        let s = store();
        let mut w = write("a", None);
        w.items.clear();
        assert!(matches!(
            s.put(w),
            Err(VarError::Invalid(InvalidVariable::NoItems))
        ));
        let mut w = write("a", None);
        w.items.insert("big".into(), "x".repeat(MAX_ITEMS_SIZE));
        assert!(matches!(
            s.put(w),
            Err(VarError::Invalid(InvalidVariable::TooLarge))
        ));
        for ns in ["*", "a/b", ""] {
            let mut w = write("a", None);
            w.namespace = ns.into();
            assert!(matches!(s.put(w), Err(VarError::Invalid(_))), "{ns:?}");
        }
    }

    #[test]
    fn a_task_reads_its_job_group_and_task_paths_in_its_namespace_only() {
        let s = store();
        for p in [
            "nomad/jobs",
            "nomad/jobs/web",
            "nomad/jobs/web/g",
            "nomad/jobs/web/g/t",
            "nomad/jobs/web/g/t/x",
            "nomad/jobs/other",
            "shared",
        ] {
            s.put(write(p, None)).unwrap();
        }
        let mut other_ns = write("nomad/jobs/web", None);
        other_ns.namespace = "prod".into();
        s.put(other_ns).unwrap();
        let who = WorkloadIdentity {
            namespace: "default".into(),
            job_id: "web".into(),
            group: "g".into(),
            task: "t".into(),
        };
        let listed: Vec<String> = VariableHost::list(&*s, &who, "")
            .unwrap()
            .into_iter()
            .map(|m| format!("{}:{}", m.namespace, m.path))
            .collect();
        assert_eq!(
            listed,
            [
                "default:nomad/jobs",
                "default:nomad/jobs/web",
                "default:nomad/jobs/web/g",
                "default:nomad/jobs/web/g/t"
            ]
        );
        assert!(
            VariableHost::get(&*s, &who, "nomad/jobs/web/g")
                .unwrap()
                .is_some()
        );
        // Readable but absent: none, not an error.
        let sibling = WorkloadIdentity {
            task: "t2".into(),
            ..who.clone()
        };
        assert_eq!(
            VariableHost::get(&*s, &sibling, "nomad/jobs/web/g/t2").unwrap(),
            None
        );
        for p in ["nomad/jobs/other", "shared", "nomad/jobs/web/g/t/x"] {
            let e = VariableHost::get(&*s, &who, p).unwrap_err();
            assert!(
                matches!(&e, HostError::Denied(m) if m.contains(&format!("{p:?}"))),
                "{p}: {e:?}"
            );
        }
    }

    #[test]
    fn reloading_keeps_variables_and_raises_the_change_index() {
        let db: Arc<dyn StateDb> = Arc::new(MemState::new());
        let s = VarStore::load(db.clone(), Arc::default()).unwrap();
        for _ in 0..5 {
            s.put(write("a", None)).unwrap();
        }
        let last = s.get("default", "a").unwrap().meta.modify_index;
        let changes = Arc::new(Changes::default());
        let again = VarStore::load(db, changes.clone()).unwrap();
        assert_eq!(again.get("default", "a").unwrap().meta.modify_index, last);
        assert!(changes.bump() > last, "a new write must get a new index");
    }
}
