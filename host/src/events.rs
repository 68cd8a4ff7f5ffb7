//! The event stream (Nomad's `/v1/event/stream`): jobs registered and deregistered,
//! allocations placed and changed, evaluations, variables written and deleted, as they
//! happen. Publishing costs nothing
//! while nobody listens: an event is built only when a subscriber exists, and it carries
//! its object, which the subscriber's connection serializes.

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::structs::Allocation;

/// Events a slow subscriber may fall behind by before it misses some (it is then told).
const CAPACITY: usize = 4096;

/// What an event carries.
#[derive(Debug, Clone)]
pub enum Payload {
    /// An allocation as of the event.
    Allocation(Box<Allocation>),
    /// A job (the agent's record of it).
    Job(Box<Value>),
    /// An evaluation.
    Evaluation(Box<crate::evals::Evaluation>),
    /// A variable's metadata (never its items).
    Variable(Box<crate::structs::VariableMetadata>),
}

/// One event.
#[derive(Debug, Clone)]
pub struct Event {
    /// `Job`, `Allocation`, `Evaluation` or `Variables`.
    pub topic: &'static str,
    /// e.g. `JobRegistered`, `AllocationUpdated`.
    pub event_type: &'static str,
    /// The object's id.
    pub key: String,
    /// Its namespace.
    pub namespace: String,
    /// Other keys a subscriber may filter on (an allocation's and evaluation's job).
    pub filter_keys: Vec<String>,
    /// The change index.
    pub index: u64,
    /// The object.
    pub payload: Payload,
}

impl Event {
    /// Nomad's JSON form of the event.
    pub fn to_json(&self) -> Value {
        let payload = match &self.payload {
            Payload::Allocation(a) => json!({ "Allocation": a }),
            Payload::Job(j) => json!({ "Job": j }),
            Payload::Evaluation(e) => json!({ "Evaluation": e }),
            Payload::Variable(v) => json!({ "Variable": v }),
        };
        json!({
            "Topic": self.topic, "Type": self.event_type, "Key": self.key,
            "Namespace": self.namespace, "FilterKeys": self.filter_keys,
            "Index": self.index, "Payload": payload,
        })
    }

    /// Whether a subscription's `topic` filters (`Topic:Key`, either part `*`) and
    /// namespace (`*` for all) take this event.
    pub fn matches(&self, topics: &[(String, String)], namespace: &str) -> bool {
        (namespace == "*" || namespace == self.namespace)
            && topics.iter().any(|(t, k)| {
                (t == "*" || t == self.topic)
                    && (k == "*" || *k == self.key || self.filter_keys.contains(k))
            })
    }
}

/// The agent's event broadcaster.
pub struct EventBroker {
    tx: broadcast::Sender<std::sync::Arc<Event>>,
}

impl Default for EventBroker {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl std::fmt::Debug for EventBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBroker")
            .field("subscribers", &self.tx.receiver_count())
            .finish()
    }
}

impl EventBroker {
    /// Whether anyone listens (publishers skip building events otherwise).
    pub fn wanted(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Publish the event `make` builds, if anyone listens.
    pub fn publish(&self, make: impl FnOnce() -> Event) {
        if self.wanted() {
            let _ = self.tx.send(std::sync::Arc::new(make()));
        }
    }

    /// Listen from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<std::sync::Arc<Event>> {
        self.tx.subscribe()
    }

    /// Publish an allocation event.
    pub fn allocation(&self, event_type: &'static str, index: u64, a: &Allocation) {
        self.publish(|| Event {
            topic: "Allocation",
            event_type,
            key: a.id.clone(),
            namespace: a.namespace.clone(),
            filter_keys: vec![a.job_id.clone(), a.eval_id.clone()],
            index,
            payload: Payload::Allocation(Box::new(a.clone())),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev() -> Event {
        Event {
            topic: "Allocation",
            event_type: "AllocationUpdated",
            key: "a1".into(),
            namespace: "default".into(),
            filter_keys: vec!["web".into()],
            index: 3,
            payload: Payload::Job(Box::new(json!({}))),
        }
    }

    #[test]
    fn topic_and_key_filters() {
        let t = |s: &[(&str, &str)]| -> Vec<(String, String)> {
            s.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let e = ev();
        assert!(e.matches(&t(&[("*", "*")]), "default"));
        assert!(e.matches(&t(&[("Allocation", "*")]), "default"));
        assert!(e.matches(&t(&[("Allocation", "a1")]), "*"));
        assert!(e.matches(&t(&[("Allocation", "web")]), "default"), "by job");
        assert!(!e.matches(&t(&[("Job", "*")]), "default"));
        assert!(!e.matches(&t(&[("Allocation", "other")]), "default"));
        assert!(!e.matches(&t(&[("*", "*")]), "prod"));
    }

    #[tokio::test]
    async fn nothing_is_built_without_a_subscriber() {
        let b = EventBroker::default();
        b.publish(|| panic!("built with nobody listening"));
        let mut rx = b.subscribe();
        b.publish(ev);
        assert_eq!(rx.recv().await.unwrap().key, "a1");
    }
}
