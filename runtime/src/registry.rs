//! The component registry: each `(world, name)` points at its current version through an
//! atomic pointer. A lookup is one atomic load; swapping in a new version never blocks
//! calls, and calls in flight keep the `Arc` of the version they started on. A slot also
//! keeps the version it replaced while the host watches the new one (auto-revert), then
//! lets it go so its memory is returned.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwap;

use crate::component::{ComponentSource, LoadedComponent};
use crate::inspect::World;

/// One name's versions: the current one, and the one it replaced while it is kept.
struct Slot {
    current: ArcSwap<LoadedComponent>,
    previous: Mutex<Option<Arc<LoadedComponent>>>,
}

/// Components by world and name.
#[derive(Default)]
pub struct Registry {
    slots: RwLock<BTreeMap<(World, String), Arc<Slot>>>,
}

impl Registry {
    /// The current version of a component.
    pub fn get(&self, world: World, name: &str) -> Option<Arc<LoadedComponent>> {
        let slots = self.slots.read().unwrap();
        slots
            .get(&(world, name.to_string()))
            .map(|s| s.current.load_full())
    }

    /// Install `component` as the current version of its name; returns the version it
    /// replaced, which the slot keeps as its previous version (see
    /// [`Registry::forget_previous`]) and which is retired (its warm stores dropped).
    pub fn install(&self, component: Arc<LoadedComponent>) -> Option<Arc<LoadedComponent>> {
        let key = (component.world, component.name.clone());
        let slot = {
            let slots = self.slots.read().unwrap();
            slots.get(&key).cloned()
        };
        let slot = match slot {
            Some(s) => s,
            None => {
                let mut slots = self.slots.write().unwrap();
                match slots.get(&key) {
                    Some(s) => s.clone(),
                    None => {
                        slots.insert(
                            key,
                            Arc::new(Slot {
                                current: ArcSwap::new(component),
                                previous: Mutex::new(None),
                            }),
                        );
                        return None;
                    }
                }
            }
        };
        let old = slot.current.swap(component);
        old.retire();
        *slot.previous.lock().unwrap() = Some(old.clone());
        Some(old)
    }

    /// Make the slot's previous version current again (auto-revert), if it still keeps
    /// one and `bad` is still the current version. Returns the version restored.
    pub fn revert(&self, bad: &Arc<LoadedComponent>) -> Option<Arc<LoadedComponent>> {
        let slot = self.slot(bad.world, &bad.name)?;
        let mut previous = slot.previous.lock().unwrap();
        let current = slot.current.load_full();
        if !Arc::ptr_eq(&current, bad) {
            return None;
        }
        let good = previous.take()?;
        good.warm.reopen();
        slot.current.store(good.clone());
        bad.retire();
        Some(good)
    }

    /// Let the version a slot replaced go (its watch is over): once its last call ends
    /// and nothing else holds it, its memory is returned.
    pub fn forget_previous(&self, world: World, name: &str) {
        if let Some(slot) = self.slot(world, name) {
            slot.previous.lock().unwrap().take();
        }
    }

    /// The version a slot keeps from before its last swap.
    pub fn previous(&self, world: World, name: &str) -> Option<Arc<LoadedComponent>> {
        self.slot(world, name)
            .and_then(|s| s.previous.lock().unwrap().clone())
    }

    /// Remove a name (its file was deleted); returns its current version, retired. Calls
    /// in flight, and whatever holds the version, keep it until they end.
    pub fn remove(&self, world: World, name: &str) -> Option<Arc<LoadedComponent>> {
        let slot = self
            .slots
            .write()
            .unwrap()
            .remove(&(world, name.to_string()))?;
        let old = slot.current.load_full();
        old.retire();
        Some(old)
    }

    /// The current component loaded from file `path`, if any.
    pub fn by_file(&self, path: &Path) -> Option<Arc<LoadedComponent>> {
        self.list()
            .into_iter()
            .find(|c| matches!(&c.source, ComponentSource::File(p) if p == path))
    }

    /// Every current component, sorted by world and name.
    pub fn list(&self) -> Vec<Arc<LoadedComponent>> {
        self.slots
            .read()
            .unwrap()
            .values()
            .map(|s| s.current.load_full())
            .collect()
    }

    /// Current components of one world.
    pub fn of_world(&self, world: World) -> Vec<Arc<LoadedComponent>> {
        self.list()
            .into_iter()
            .filter(|c| c.world == world)
            .collect()
    }

    fn slot(&self, world: World, name: &str) -> Option<Arc<Slot>> {
        self.slots
            .read()
            .unwrap()
            .get(&(world, name.to_string()))
            .cloned()
    }
}
