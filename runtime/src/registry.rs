//! The component registry: each `(world, name)` points at its current version through an
//! atomic pointer. A lookup is one atomic load; swapping in a new version never blocks
//! calls, and calls in flight keep the `Arc` of the version they started on.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use arc_swap::ArcSwap;

use crate::component::LoadedComponent;
use crate::inspect::World;

/// One name's pointer to its current version.
type Slot = Arc<ArcSwap<LoadedComponent>>;

/// Components by world and name.
#[derive(Default)]
pub struct Registry {
    slots: RwLock<BTreeMap<(World, String), Slot>>,
}

impl Registry {
    /// The current version of a component.
    pub fn get(&self, world: World, name: &str) -> Option<Arc<LoadedComponent>> {
        let slots = self.slots.read().unwrap();
        slots.get(&(world, name.to_string())).map(|s| s.load_full())
    }

    /// Install `component` as the current version of its name; returns the version it replaced.
    pub fn install(&self, component: Arc<LoadedComponent>) -> Option<Arc<LoadedComponent>> {
        let key = (component.world, component.name.clone());
        {
            let slots = self.slots.read().unwrap();
            if let Some(slot) = slots.get(&key) {
                return Some(slot.swap(component));
            }
        }
        let mut slots = self.slots.write().unwrap();
        match slots.get(&key) {
            Some(slot) => Some(slot.swap(component)),
            None => {
                slots.insert(key, Arc::new(ArcSwap::new(component)));
                None
            }
        }
    }

    /// Every current component, sorted by world and name.
    pub fn list(&self) -> Vec<Arc<LoadedComponent>> {
        self.slots
            .read()
            .unwrap()
            .values()
            .map(|s| s.load_full())
            .collect()
    }

    /// Current components of one world.
    pub fn of_world(&self, world: World) -> Vec<Arc<LoadedComponent>> {
        self.list()
            .into_iter()
            .filter(|c| c.world == world)
            .collect()
    }
}
