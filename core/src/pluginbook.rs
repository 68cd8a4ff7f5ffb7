//! What a plugin manager knows of each of its plugins (a driver's health and attributes, a
//! device plugin's devices), in one book shared by the driver and device managers, as
//! Nomad's PutDriverPluginState and PutDevicePluginState keep it.
//!
//! A book holds one state per plugin name. A new state is compared with the last one: the
//! manager's comparison says which node events the change raises and whether it is worth
//! storing. Stored states are loaded when the book is opened, so a restarted agent starts
//! from what it last knew and a change that happened while it was down is an event at the
//! first fingerprint. A plugin that is no longer loaded is forgotten, its stored state too.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::node::NodeEvents;
use crate::state::StateDb;

/// What changed between a plugin's last state and its new one.
#[derive(Debug, Default, PartialEq)]
pub struct Change {
    /// Node event messages to raise, in order.
    pub events: Vec<String>,
    /// Whether the new state differs in anything worth storing.
    pub store: bool,
}

/// The plugin states of one manager.
pub struct PluginBook<S> {
    /// The state DB's manager name (`driver`, `device`) and the node events' subsystem.
    manager: &'static str,
    subsystem: &'static str,
    /// The node event detail naming the plugin (`driver`, `plugin`).
    detail_key: &'static str,
    states: RwLock<BTreeMap<String, S>>,
    events: Arc<NodeEvents>,
    db: Option<Arc<dyn StateDb>>,
}

impl<S: Clone + Serialize + DeserializeOwned> PluginBook<S> {
    /// A book for `manager`, raising events of `subsystem` into `events` (naming the plugin
    /// under `detail_key`), storing in `db` and seeded with what `db` holds from last run.
    pub fn open(
        manager: &'static str,
        subsystem: &'static str,
        detail_key: &'static str,
        events: Arc<NodeEvents>,
        db: Option<Arc<dyn StateDb>>,
    ) -> Self {
        let states = db
            .as_deref()
            .map(|db| crate::state::load_plugin_states(db, manager))
            .unwrap_or_default();
        Self {
            manager,
            subsystem,
            detail_key,
            states: RwLock::new(states),
            events,
            db,
        }
    }

    /// Record `fresh` for `name`. `compare(last, fresh)` says what changed; `last` is `None`
    /// for a plugin seen for the first time.
    pub fn record(&self, name: &str, fresh: S, compare: impl FnOnce(Option<&S>, &S) -> Change) {
        let mut states = self.states.write().unwrap_or_else(|e| e.into_inner());
        let change = compare(states.get(name), &fresh);
        for message in change.events {
            tracing::info!(plugin = %name, subsystem = self.subsystem, "{message}");
            self.events.push(
                self.subsystem,
                message,
                [(self.detail_key.to_string(), name.to_string())].into(),
            );
        }
        if change.store
            && let Some(db) = &self.db
        {
            let value = serde_json::to_value(&fresh).expect("plugin states serialize");
            if let Err(e) = db.put_plugin_state(self.manager, name, &value) {
                tracing::warn!(plugin = %name, manager = self.manager, error = %e, "storing plugin state failed");
            }
        }
        states.insert(name.to_string(), fresh);
    }

    /// Forget plugins that are no longer loaded, and their stored state.
    pub fn retain(&self, loaded: &[String]) {
        let mut states = self.states.write().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<String> = states
            .keys()
            .filter(|n| !loaded.contains(n))
            .cloned()
            .collect();
        for name in gone {
            states.remove(&name);
            tracing::info!(plugin = %name, manager = self.manager, "plugin no longer loaded; its state is forgotten");
            if let Some(db) = &self.db
                && let Err(e) = db.delete_plugin_state(self.manager, &name)
            {
                tracing::warn!(plugin = %name, manager = self.manager, error = %e, "deleting plugin state failed");
            }
        }
    }

    /// One plugin's state.
    pub fn get(&self, name: &str) -> Option<S> {
        self.read(|s| s.get(name).cloned())
    }

    /// Every plugin's state, by name.
    pub fn all(&self) -> BTreeMap<String, S> {
        self.read(Clone::clone)
    }

    /// Look at the states without copying them.
    pub fn read<R>(&self, f: impl FnOnce(&BTreeMap<String, S>) -> R) -> R {
        f(&self.states.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The node events this book raises into.
    pub fn events(&self) -> &Arc<NodeEvents> {
        &self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemState;

    fn book(db: &Arc<dyn StateDb>) -> PluginBook<u32> {
        PluginBook::open(
            "driver",
            "Driver",
            "driver",
            Arc::default(),
            Some(db.clone()),
        )
    }

    fn changed(last: Option<&u32>, fresh: &u32) -> Change {
        Change {
            events: match last {
                Some(l) if l != fresh => vec![format!("{l} -> {fresh}")],
                _ => Vec::new(),
            },
            store: last != Some(fresh),
        }
    }

    #[test]
    fn changes_raise_events_are_stored_and_survive_a_reopen() {
        let db: Arc<dyn StateDb> = Arc::new(MemState::new());
        let b = book(&db);
        b.record("mock", 1, changed);
        b.record("mock", 1, changed);
        b.record("mock", 2, changed);
        let events = b.events().list();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].message, "1 -> 2");
        assert_eq!(events[0].subsystem, "Driver");
        assert_eq!(events[0].details["driver"], "mock");

        let reopened = book(&db);
        assert_eq!(reopened.get("mock"), Some(2));
        reopened.retain(&[]);
        assert_eq!(reopened.get("mock"), None);
        assert!(
            book(&db).all().is_empty(),
            "the stored state went with the plugin"
        );
    }
}
