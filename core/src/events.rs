//! The event stream (Nomad's `/v1/event/stream`): jobs registered and deregistered,
//! allocations placed and changed, evaluations, node drain and eligibility, variables written and deleted, as they
//! happen. As Nomad's event buffer does, the broker keeps the newest events (Nomad's
//! `event_buffer_size`, 100 by default), so a subscriber that connects a moment after a
//! change, or names an `index` to resume from, still gets it. An event carries its object,
//! which the subscriber's connection serializes; with the buffer off (size 0) an event is
//! built only while a subscriber exists.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::structs::Allocation;

/// Events a slow subscriber may fall behind by before it misses some (it is then told).
const CAPACITY: usize = 4096;

/// Events kept for replay by default (Nomad's `event_buffer_size` default).
pub const DEFAULT_BUFFER_SIZE: usize = 100;

/// What an event carries.
#[derive(Debug, Clone)]
pub enum Payload {
    /// An allocation as of the event.
    Allocation(Box<Allocation>),
    /// A job (the agent's record of it).
    Job(Box<Value>),
    /// An evaluation.
    Evaluation(Box<crate::evals::Evaluation>),
    /// The node as the API shows it.
    Node(Box<Value>),
    /// A component version (`Name`, `World`, `SHA256`, `PreviousSHA256`, `Source`,
    /// `Reason`), or a refused file (`File`, `Reason`).
    Component(Box<Value>),
    /// A variable's metadata (never its items).
    Variable(Box<crate::structs::VariableMetadata>),
    /// A deployment as of the event.
    Deployment(Box<crate::structs::Deployment>),
    /// A service registration (as registered, or as it was when deregistered).
    Service(Box<crate::structs::ServiceRegistration>),
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
    /// The stream's line for this event, made once on first send and shared by every
    /// subscriber (a replay to a hundred subscribers serializes nothing again); leave it
    /// `Default::default()`.
    pub line: std::sync::OnceLock<String>,
}

impl Event {
    /// Nomad's JSON form of the event.
    pub fn to_json(&self) -> Value {
        let payload = match &self.payload {
            Payload::Allocation(a) => json!({ "Allocation": a }),
            Payload::Job(j) => json!({ "Job": j }),
            Payload::Evaluation(e) => json!({ "Evaluation": e }),
            Payload::Node(n) => json!({ "Node": n }),
            Payload::Component(c) => json!({ "Component": c }),
            Payload::Variable(v) => json!({ "Variable": v }),
            Payload::Deployment(d) => json!({ "Deployment": d }),
            Payload::Service(s) => json!({ "Service": s }),
        };
        json!({
            "Topic": self.topic, "Type": self.event_type, "Key": self.key,
            "Namespace": self.namespace, "FilterKeys": self.filter_keys,
            "Index": self.index, "Payload": payload,
        })
    }

    /// The event stream's line for it, `{"Index": N, "Events": [...]}` and a newline.
    pub fn stream_line(&self) -> &str {
        self.line.get_or_init(|| {
            format!(
                "{}\n",
                json!({ "Index": self.index, "Events": [self.to_json()] })
            )
        })
    }

    /// Whether a subscription's `topic` filters (`Topic:Key`, either part `*`) and
    /// namespace (`*` for all) take this event. Events of objects outside namespaces (the
    /// node) reach every namespace's subscribers.
    pub fn matches(&self, topics: &[(String, String)], namespace: &str) -> bool {
        (namespace == "*" || self.namespace.is_empty() || namespace == self.namespace)
            && topics.iter().any(|(t, k)| {
                (t == "*" || t == self.topic)
                    && (k == "*" || *k == self.key || self.filter_keys.contains(k))
            })
    }
}

/// The agent's event broadcaster, with the newest events kept for replay.
pub struct EventBroker {
    tx: broadcast::Sender<Arc<Event>>,
    /// The newest events, oldest first; a publish appends and sends under this lock, so a
    /// subscriber that copies it and subscribes under the same lock sees every event once.
    buffer: Mutex<VecDeque<Arc<Event>>>,
    buffer_size: usize,
}

impl Default for EventBroker {
    fn default() -> Self {
        Self::new(DEFAULT_BUFFER_SIZE)
    }
}

impl std::fmt::Debug for EventBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBroker")
            .field("subscribers", &self.tx.receiver_count())
            .field("buffer_size", &self.buffer_size)
            .finish()
    }
}

impl EventBroker {
    /// A broker keeping the newest `buffer_size` events for replay (0: none).
    pub fn new(buffer_size: usize) -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
            buffer: Mutex::new(VecDeque::with_capacity(buffer_size.min(1024))),
            buffer_size,
        }
    }

    /// Whether an event published now goes anywhere (a subscriber, or the replay buffer);
    /// publishers skip building events otherwise.
    pub fn wanted(&self) -> bool {
        self.buffer_size > 0 || self.tx.receiver_count() > 0
    }

    /// Publish the event `make` builds, if it goes anywhere.
    pub fn publish(&self, make: impl FnOnce() -> Event) {
        if !self.wanted() {
            return;
        }
        let ev = Arc::new(make());
        let mut buffer = self.buffer.lock().unwrap();
        if self.buffer_size > 0 {
            if buffer.len() == self.buffer_size {
                buffer.pop_front();
            }
            buffer.push_back(ev.clone());
        }
        let _ = self.tx.send(ev);
    }

    /// Listen from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Listen from `index`: the kept events at or after it (every kept event for 0), then
    /// each new one, none twice and none missed in between.
    pub fn subscribe_from(&self, index: u64) -> (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>) {
        let buffer = self.buffer.lock().unwrap();
        let rx = self.tx.subscribe();
        let backlog = buffer
            .iter()
            .filter(|e| e.index >= index)
            .cloned()
            .collect();
        (backlog, rx)
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
            line: Default::default(),
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
            line: Default::default(),
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
        let node = Event {
            topic: "Node",
            namespace: String::new(),
            ..ev()
        };
        assert!(
            node.matches(&t(&[("Node", "*")]), "prod"),
            "the node has no namespace"
        );
    }

    #[tokio::test]
    async fn without_a_buffer_nothing_is_built_without_a_subscriber() {
        let b = EventBroker::new(0);
        b.publish(|| panic!("built with nobody listening"));
        let mut rx = b.subscribe();
        b.publish(ev);
        assert_eq!(rx.recv().await.unwrap().key, "a1");
    }

    #[tokio::test]
    async fn a_late_subscriber_gets_the_kept_events_from_its_index_then_new_ones() {
        let b = EventBroker::new(3);
        for i in 1..=5 {
            b.publish(|| Event { index: i, ..ev() });
        }
        let (backlog, _) = b.subscribe_from(0);
        let kept: Vec<u64> = backlog.iter().map(|e| e.index).collect();
        assert_eq!(kept, [3, 4, 5], "the newest three, oldest first");
        let (backlog, mut rx) = b.subscribe_from(5);
        assert_eq!(backlog.len(), 1);
        b.publish(|| Event { index: 6, ..ev() });
        assert_eq!(
            rx.recv().await.unwrap().index,
            6,
            "then live, without a gap"
        );
        assert!(rx.try_recv().is_err(), "and nothing twice");
    }
}
