//! Components pulled from a plugin block's `source` ([`crate::remote`]): pulled at start,
//! on config reload, on `agent component pull` (`POST /v1/components/pull`) and, for a tag,
//! every `poll_interval`. What a pull verified goes through the same make-before-break
//! path as a file (prepare, then install: drivers' tasks handed over, auto-revert
//! watching); what it refused is a `ComponentRefused` event and a node event naming the
//! reference, and the running version keeps serving.
//!
//! A new version whose declared grants ([`crate::runtime::inspect::GRANTS_SECTION`]) go
//! beyond the running version's is held `pending-approval` (with the difference) until
//! `agent component approve` (`POST /v1/components/approve`), as the plugin block's
//! `auto_approve` says ("never" holds every new version; "always" none). The operator's
//! grants stay what it runs with.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use super::history::{Kind, Subject};
use super::{Applied, SwapEvent, Swapper};
use crate::remote::cache::Cache;
use crate::remote::{AutoApprove, PullError, Pulled, RemoteSpec};
use crate::runtime::{ComponentSource, LoadedComponent};

/// What the swapper holds of remote sources.
#[derive(Default)]
pub(super) struct Remotes {
    pub(super) cache: Option<Cache>,
    pub(super) specs: RwLock<BTreeMap<String, RemoteSpec>>,
    pub(super) state: Mutex<BTreeMap<String, RemoteState>>,
    pub(super) pending: Mutex<BTreeMap<String, Pending>>,
    pollers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// What became of a plugin block's source lately (`/v1/components`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RemoteState {
    /// The plugin block's `source`.
    pub source: String,
    /// What the running version was pulled as (`oci://…@sha256:…`).
    pub reference: String,
    /// Its manifest digest (or its bytes' for https and file sources).
    pub digest: String,
    /// Who signed it (`key <file> (sha256:…)`), empty when no key was asked for.
    pub signer: String,
    /// It came from the pull cache (the source could not be reached, its digest is fixed,
    /// or its manifest is the one cached).
    pub from_cache: bool,
    /// When it was pulled, ns.
    pub pulled_at: u64,
    /// Why the last pull was refused (empty once one is taken).
    pub refused: String,
    /// What the refused pull resolved to, when it got that far.
    pub refused_reference: String,
}

/// A version held for approval.
pub(super) struct Pending {
    pub(super) component: Arc<LoadedComponent>,
    pub(super) pulled: Pulled,
    /// What it declares beyond the running version.
    pub(super) diff: Vec<String>,
    pub(super) since: u64,
}

/// A pull's identity without its bytes.
#[derive(Debug, Clone)]
pub(super) struct PulledInfo {
    pub(super) reference: String,
    pub(super) digest: String,
    pub(super) signer: Option<String>,
    pub(super) from_cache: bool,
}

impl PulledInfo {
    fn of(p: &Pulled) -> Self {
        Self {
            reference: p.reference.clone(),
            digest: p.digest.clone(),
            signer: p.signer.clone(),
            from_cache: p.from_cache,
        }
    }
}

/// A version held for approval, as `/v1/components` and the CLI show it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct PendingView {
    pub name: String,
    pub reference: String,
    pub digest: String,
    pub signer: String,
    #[serde(rename = "SHA256")]
    pub sha256: String,
    pub plugin_version: String,
    /// What it declares beyond the running version, one line each.
    pub grants_diff: Vec<String>,
    pub declared_grants: Option<crate::runtime::Grants>,
    /// Since when it waits, ns.
    pub since: u64,
}

impl Remotes {
    pub(super) fn new(cache: Option<Cache>, specs: BTreeMap<String, RemoteSpec>) -> Self {
        Self {
            cache,
            specs: RwLock::new(specs),
            ..Default::default()
        }
    }
}

impl Swapper {
    /// The remote state of every plugin block with a source.
    pub fn remote_states(&self) -> BTreeMap<String, RemoteState> {
        self.remotes.state.lock().unwrap().clone()
    }

    /// The versions held for approval.
    pub fn pending(&self) -> Vec<PendingView> {
        self.remotes
            .pending
            .lock()
            .unwrap()
            .iter()
            .map(|(name, p)| PendingView {
                name: name.clone(),
                reference: p.pulled.reference.clone(),
                digest: p.pulled.digest.clone(),
                signer: p.pulled.signer.clone().unwrap_or_default(),
                sha256: p.component.sha256.clone(),
                plugin_version: p.component.plugin_version.clone(),
                grants_diff: p.diff.clone(),
                declared_grants: p.component.declared_grants.clone(),
                since: p.since,
            })
            .collect()
    }

    /// Pull every source (at start): fetched side by side, installed one at a time.
    pub(super) async fn pull_all(self: &Arc<Self>, why: &str) -> Vec<(String, Applied)> {
        let specs: Vec<RemoteSpec> = self
            .remotes
            .specs
            .read()
            .unwrap()
            .values()
            .cloned()
            .collect();
        let fetched = futures::future::join_all(specs.iter().map(|s| self.fetch(s))).await;
        let mut out = Vec::new();
        for (spec, result) in specs.iter().zip(fetched) {
            let applied = self.apply_pulled(spec, result, Instant::now(), why).await;
            out.push((spec.name.clone(), applied));
        }
        out
    }

    async fn fetch(&self, spec: &RemoteSpec) -> Result<Pulled, PullError> {
        match &self.remotes.cache {
            Some(cache) => crate::remote::fetch(spec, cache).await,
            None => Err(PullError::Other("the agent has no pull cache".into())),
        }
    }

    /// Pull the plugin block `name`'s source now (`agent component pull`); `Err` when no
    /// plugin block of that name names a source.
    pub async fn pull(self: &Arc<Self>, name: &str, why: &str) -> Result<Applied, String> {
        let spec = self.spec(name).ok_or_else(|| {
            format!("no plugin block named {name:?} has a source (plugin {name:?} {{ source = \"oci://…\" }})")
        })?;
        let seen = Instant::now();
        let result = self.fetch(&spec).await;
        Ok(self.apply_pulled(&spec, result, seen, why).await)
    }

    /// The plugin block `name`'s source, if it names one.
    fn spec(&self, name: &str) -> Option<RemoteSpec> {
        self.remotes.specs.read().unwrap().get(name).cloned()
    }

    /// The version now serving the plugin block `name`, when a pull brought it.
    fn current_remote(&self, name: &str) -> Option<Arc<LoadedComponent>> {
        self.runtime
            .registry
            .list()
            .into_iter()
            .find(|c| matches!(&c.source, ComponentSource::Remote { name: n, .. } if n == name))
    }

    /// Install what a pull brought, hold it for approval, or refuse it.
    async fn apply_pulled(
        self: &Arc<Self>,
        spec: &RemoteSpec,
        result: Result<Pulled, PullError>,
        seen: Instant,
        why: &str,
    ) -> Applied {
        let source = spec.source.to_string();
        let pulled = match result {
            Ok(p) => p,
            Err(e) => return self.refused_remote(spec, &source, &e.to_string()),
        };
        let _one_at_a_time = self.lock.lock().await;
        let sha = crate::runtime::cache::sha256_hex(&pulled.bytes);
        let current = self.current_remote(&spec.name);
        if current.as_ref().is_some_and(|c| c.sha256 == sha) {
            self.remember_pull(spec, &PulledInfo::of(&pulled));
            return Applied::Unchanged;
        }
        if self
            .remotes
            .pending
            .lock()
            .unwrap()
            .get(&spec.name)
            .is_some_and(|p| p.component.sha256 == sha)
        {
            return Applied::Pending(spec.name.clone());
        }
        let new = match self.prepare_pulled(spec, &pulled).await {
            Ok(c) => c,
            Err(reason) => return self.refused_remote(spec, &pulled.reference, &reason),
        };
        // What the new version is compared with: the running version, or at start the last
        // version let in (the cache's), so a restart approves nothing by itself.
        let last_approved = match (&current, &self.remotes.cache) {
            (None, Some(cache)) if !pulled.from_cache => {
                cache.load(spec).filter(|p| p.digest != pulled.digest)
            }
            _ => None,
        };
        // The running version's declaration and the host interfaces it imports.
        let baseline = match (&current, &last_approved) {
            (Some(c), _) => Some((
                c.declared_grants.clone().unwrap_or_default(),
                c.imports.clone(),
            )),
            (None, Some(p)) => crate::runtime::inspect::inspect(&p.bytes)
                .ok()
                .map(|i| (i.declared_grants.unwrap_or_default(), i.imports)),
            (None, None) => None,
        };
        if let Some((running, running_imports)) = baseline {
            let declared = new.declared_grants.clone().unwrap_or_default();
            let mut diff = declared.beyond(&running);
            // A host interface the running version did not import is a new power too,
            // declared or not (the operator's grants still decide whether it is usable).
            let before = crate::runtime::inspect::grants_used(&running_imports);
            for g in crate::runtime::inspect::grants_used(&new.imports) {
                if !before.contains(&g) {
                    diff.push(format!("+ imports what the {g} grant allows"));
                }
            }
            let hold = match spec.auto_approve {
                AutoApprove::Always => false,
                AutoApprove::SameGrants => !diff.is_empty(),
                AutoApprove::Never => true,
            };
            if hold {
                // At start, the last version let in serves meanwhile.
                if let Some(prev) = last_approved {
                    match self.prepare_pulled(spec, &prev).await {
                        Ok(c) => {
                            self.remember_pull(spec, &PulledInfo::of(&prev));
                            self.install(
                                c,
                                seen,
                                &format!(
                                    "the last approved version, from the cache: {}",
                                    prev.reference
                                ),
                            )
                            .await;
                        }
                        Err(reason) => {
                            self.refused_remote(spec, &prev.reference, &reason);
                        }
                    }
                }
                return self.hold(spec, new, pulled, diff);
            }
        }
        self.let_in(spec, new, pulled, seen, why).await
    }

    /// Prepare what a pull brought (compile, link, `info()`), named as its plugin block.
    async fn prepare_pulled(
        &self,
        spec: &RemoteSpec,
        pulled: &Pulled,
    ) -> Result<Arc<LoadedComponent>, String> {
        let source = ComponentSource::Remote {
            name: spec.name.clone(),
            reference: pulled.reference.clone(),
        };
        let new = self
            .runtime
            .prepare(source, Arc::from(pulled.bytes.as_slice()))
            .await
            .map_err(|r| r.error.to_string())?;
        if new.name != spec.name {
            return Err(format!(
                "it reports the name {:?}, but it was pulled for plugin {:?}: the plugin block's name is the component's",
                new.name, spec.name
            ));
        }
        Ok(new)
    }

    /// Make `new` the running version: kept in the cache as the version let in, then
    /// installed.
    async fn let_in(
        self: &Arc<Self>,
        spec: &RemoteSpec,
        new: Arc<LoadedComponent>,
        pulled: Pulled,
        seen: Instant,
        why: &str,
    ) -> Applied {
        self.remotes.pending.lock().unwrap().remove(&spec.name);
        if let Some(cache) = &self.remotes.cache
            && let Err(e) = cache.store(spec, &pulled)
        {
            tracing::warn!(component = %spec.name, error = %e, "the pulled component could not be cached; the next start needs the source again");
        }
        self.remember_pull(spec, &PulledInfo::of(&pulled));
        self.install(new, seen, &format!("{why}: {}", pulled.reference))
            .await
    }

    /// Keep `new` for `agent component approve`, and say so.
    fn hold(
        &self,
        spec: &RemoteSpec,
        new: Arc<LoadedComponent>,
        pulled: Pulled,
        diff: Vec<String>,
    ) -> Applied {
        let what = if diff.is_empty() {
            "a new version (auto_approve = \"never\")".to_string()
        } else {
            format!("a new version declaring more grants: {}", diff.join(", "))
        };
        tracing::warn!(component = %spec.name, reference = %pulled.reference, diff = ?diff, "component held for approval: {what}; run `agent component approve {}`", spec.name);
        let details = BTreeMap::from([
            ("component".to_string(), spec.name.clone()),
            ("reference".to_string(), pulled.reference.clone()),
            ("grants_diff".to_string(), diff.join("; ")),
        ]);
        self.node_events.push(
            "Component",
            format!(
                "Component {} pending approval: {} is {what}",
                spec.name, pulled.reference
            ),
            details,
        );
        let payload = json!({
            "Name": spec.name, "Source": pulled.reference, "Digest": pulled.digest,
            "GrantsDiff": diff, "Reason": what,
        });
        self.publish(
            "ComponentPendingApproval",
            spec.name.clone(),
            vec![new.world.as_str().to_string()],
            payload,
        );
        self.history.record(
            Subject::Component(new.world, new.name.clone()),
            SwapEvent {
                time: crate::util::now_nanos(),
                kind: Kind::Pending,
                sha256: new.sha256.clone(),
                previous_sha256: String::new(),
                reason: what,
                source: pulled.reference.clone(),
            },
        );
        self.remotes.pending.lock().unwrap().insert(
            spec.name.clone(),
            Pending {
                component: new,
                pulled,
                diff,
                since: crate::util::now_nanos(),
            },
        );
        Applied::Pending(spec.name.clone())
    }

    /// Let the version held for `name` in (`agent component approve`).
    pub async fn approve(self: &Arc<Self>, name: &str) -> Result<Applied, String> {
        let _one_at_a_time = self.lock.lock().await;
        let p = self
            .remotes
            .pending
            .lock()
            .unwrap()
            .remove(name)
            .ok_or_else(|| format!("no version of {name:?} is pending approval"))?;
        let spec = self
            .spec(name)
            .ok_or_else(|| format!("plugin {name:?} no longer names a source"))?;
        // Its settings may have changed while it waited.
        let new = self.runtime.reconfigured(&p.component);
        Ok(self
            .let_in(&spec, new, p.pulled, Instant::now(), "approved")
            .await)
    }

    /// A pull that was taken: what the view shows of the source.
    fn remember_pull(&self, spec: &RemoteSpec, p: &PulledInfo) {
        self.remotes.state.lock().unwrap().insert(
            spec.name.clone(),
            RemoteState {
                source: spec.source.to_string(),
                reference: p.reference.clone(),
                digest: p.digest.clone(),
                signer: p.signer.clone().unwrap_or_default(),
                from_cache: p.from_cache,
                pulled_at: crate::util::now_nanos(),
                refused: String::new(),
                refused_reference: String::new(),
            },
        );
    }

    /// Record and tell a refused pull; the running version (if any) stays.
    fn refused_remote(&self, spec: &RemoteSpec, reference: &str, reason: &str) -> Applied {
        self.metrics.refusals.fetch_add(1, Ordering::Relaxed);
        {
            let mut state = self.remotes.state.lock().unwrap();
            let s = state
                .entry(spec.name.clone())
                .or_insert_with(|| RemoteState {
                    source: spec.source.to_string(),
                    ..Default::default()
                });
            s.refused = reason.to_string();
            s.refused_reference = reference.to_string();
        }
        let e = SwapEvent {
            time: crate::util::now_nanos(),
            kind: Kind::Refused,
            sha256: String::new(),
            previous_sha256: String::new(),
            reason: reason.to_string(),
            source: reference.to_string(),
        };
        if let Some(cur) = self.current_remote(&spec.name) {
            self.history
                .record(Subject::Component(cur.world, cur.name.clone()), e.clone());
        }
        self.history.record(Subject::Source(spec.name.clone()), e);
        tracing::error!(component = %spec.name, reference, reason, "component refused; the running version (if any) stays");
        let details = BTreeMap::from([
            ("component".to_string(), spec.name.clone()),
            ("reference".to_string(), reference.to_string()),
        ]);
        self.node_events.push(
            "Component",
            format!("Component {reference} refused: {reason}"),
            details,
        );
        let payload = json!({ "Name": spec.name, "Source": reference, "Reason": reason });
        self.publish(
            "ComponentRefused",
            reference.to_string(),
            Vec::new(),
            payload,
        );
        Applied::Refused(reason.to_string())
    }

    /// Take the reloaded config's sources: pull each (tags are resolved again), unload
    /// the components of sources that are gone, restart the pollers.
    pub(super) async fn reload_remotes(
        self: &Arc<Self>,
        specs: BTreeMap<String, RemoteSpec>,
    ) -> Vec<(String, Applied)> {
        let gone: Vec<String> = {
            let mut cur = self.remotes.specs.write().unwrap();
            let gone = cur
                .keys()
                .filter(|k| !specs.contains_key(*k))
                .cloned()
                .collect();
            *cur = specs;
            gone
        };
        let mut out = Vec::new();
        for name in gone {
            self.remotes.pending.lock().unwrap().remove(&name);
            self.remotes.state.lock().unwrap().remove(&name);
            let _one_at_a_time = self.lock.lock().await;
            if let Some(cur) = self.current_remote(&name) {
                out.push((
                    name.clone(),
                    self.unload(&cur, "its source was removed from the config")
                        .await,
                ));
            }
        }
        out.extend(self.pull_all("config reloaded").await);
        self.start_pollers();
        out
    }

    /// Resolve each polled tag again every `poll_interval` (replacing the pollers there
    /// were).
    pub(super) fn start_pollers(self: &Arc<Self>) {
        let mut pollers = self.remotes.pollers.lock().unwrap();
        for p in pollers.drain(..) {
            p.abort();
        }
        for spec in self.remotes.specs.read().unwrap().values() {
            let Some(every) = spec.poll_interval else {
                continue;
            };
            if spec.fixed_digest().is_some()
                || !matches!(spec.source, crate::remote::Source::Oci(_))
            {
                continue;
            }
            let weak = Arc::downgrade(self);
            let name = spec.name.clone();
            pollers.push(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(s) = weak.upgrade() else { return };
                    let _ = s.pull(&name, "tag polled").await;
                }
            }));
        }
    }
}
