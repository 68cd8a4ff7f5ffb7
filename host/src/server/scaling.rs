//! Scaling events (Nomad's `JobScalingEvents`): every `/v1/job/{id}/scale` request is
//! recorded for its task group — with a count (which changes the job) or without (an
//! autoscaler's note, or an error it reports) — the newest first, the last
//! [`TRACKED`] per group, as `nomad job scale` and `/v1/job/{id}/scale` show them. Kept in
//! the state DB; forgotten with the job.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::Server;
use crate::state::StateError;

/// Events kept per task group (Nomad's `JobTrackedScalingEvents`).
pub const TRACKED: usize = 20;

/// The state DB "manager" the events are kept under, one record per job.
const RECORDS: &str = "scaling-events";

/// Nomad's `ScalingEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ScalingEvent {
    /// ns since the epoch.
    pub time: i64,
    pub count: Option<i64>,
    pub previous_count: i64,
    pub message: String,
    pub error: bool,
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "EvalID")]
    pub eval_id: Option<String>,
    pub create_index: u64,
}

/// A job's events, by task group, newest first.
pub type JobEvents = BTreeMap<String, Vec<ScalingEvent>>;

/// Every job's scaling events.
#[derive(Default)]
pub struct ScalingBook {
    /// By (namespace, job); loaded from the state DB on first use.
    by_job: Mutex<Option<BTreeMap<(String, String), JobEvents>>>,
}

fn record_name(namespace: &str, job: &str) -> String {
    format!("{namespace}/{job}")
}

impl Server {
    fn with_scaling<T>(
        &self,
        f: impl FnOnce(&mut BTreeMap<(String, String), JobEvents>) -> T,
    ) -> T {
        let mut g = self
            .scaling
            .by_job
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let book = g.get_or_insert_with(|| {
            let stored: BTreeMap<String, JobEvents> =
                crate::state::load_plugin_states(&*self.db, RECORDS);
            stored
                .into_iter()
                .filter_map(|(k, v)| {
                    let (ns, job) = k.split_once('/')?;
                    Some(((ns.to_string(), job.to_string()), v))
                })
                .collect()
        });
        f(book)
    }

    /// Record a scaling event of `group` in job `id`; returns the change's index.
    pub fn record_scaling_event(
        &self,
        namespace: &str,
        id: &str,
        group: &str,
        mut event: ScalingEvent,
    ) -> Result<u64, StateError> {
        let index = self.changes.bump();
        event.create_index = index;
        self.with_scaling(|book| {
            let key = (namespace.to_string(), id.to_string());
            let mut events = book.get(&key).cloned().unwrap_or_default();
            let list = events.entry(group.to_string()).or_default();
            list.insert(0, event);
            list.truncate(TRACKED);
            let value = serde_json::to_value(&events).expect("scaling events serialize");
            self.db
                .put_plugin_state(RECORDS, &record_name(namespace, id), &value)?;
            book.insert(key, events);
            Ok(index)
        })
    }

    /// Job `id`'s scaling events by group, newest first.
    pub fn scaling_events(&self, namespace: &str, id: &str) -> JobEvents {
        self.with_scaling(|book| {
            book.get(&(namespace.to_string(), id.to_string()))
                .cloned()
                .unwrap_or_default()
        })
    }

    /// Forget a purged job's events.
    pub(super) fn forget_scaling_events(&self, namespace: &str, id: &str) {
        self.with_scaling(|book| {
            if book.remove(&(namespace.to_string(), id.to_string())).is_some()
                && let Err(e) = self
                    .db
                    .delete_plugin_state(RECORDS, &record_name(namespace, id))
            {
                tracing::warn!(job = %id, namespace = %namespace, error = %e, "forgetting scaling events failed");
            }
        });
    }
}
