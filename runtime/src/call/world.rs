//! What a call needs of a world's bindings: its pre-linked form in a [`WorldPre`], how to
//! instantiate it, and how an instance is kept in a store between calls ([`Instance`]).

use futures::future::BoxFuture;
use wasmtime::Store;

use crate::bindings::v0_1;
use crate::component::WorldPre;
use crate::store::HostState;

/// A live instance of one of the worlds, kept with its store between calls.
pub(crate) enum Instance {
    Driver(DriverInstance),
    Hook(v0_1::hook::Hook),
    Device(v0_1::device::DevicePlugin),
    Check(v0_1::check::Check),
    Secret(v0_1::secret::SecretProvider),
}

/// The bindings of one world: how [`crate::Runtime`]'s generic call path reaches them.
pub(crate) trait WorldInstance: Sized + Send + Sync + 'static {
    /// The world's `InstancePre` wrapper.
    type Pre: Send + Sync;
    /// The pre-linked component, if it is of this world.
    fn pre(p: &WorldPre) -> Option<&Self::Pre>;
    /// Instantiate into `store`.
    fn instantiate<'a>(
        pre: &'a Self::Pre,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, wasmtime::Result<Self>>;
    /// Keep in a store.
    fn into_instance(self) -> Instance;
    /// Find in a store.
    fn of_instance(i: &Instance) -> Option<&Self>;
}

macro_rules! world_instance {
    ($ty:ty, $pre:ty, $variant:ident) => {
        impl WorldInstance for $ty {
            type Pre = $pre;
            fn pre(p: &WorldPre) -> Option<&Self::Pre> {
                match p {
                    WorldPre::$variant(pre) => Some(pre),
                    _ => None,
                }
            }
            fn instantiate<'a>(
                pre: &'a Self::Pre,
                store: &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<Self>> {
                Box::pin(pre.instantiate_async(store))
            }
            fn into_instance(self) -> Instance {
                Instance::$variant(self)
            }
            fn of_instance(i: &Instance) -> Option<&Self> {
                match i {
                    Instance::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

/// A driver's instance: its `driver` world, and its `task-exec` when it exports one.
pub struct DriverInstance {
    pub(crate) driver: v0_1::driver::Driver,
    pub(crate) exec: Option<v0_1::exec::exports::paddock::plugin::task_exec::Guest>,
}

impl DriverInstance {
    /// Its `task-exec`, when the driver exports one.
    pub fn exec(&self) -> Option<&v0_1::exec::exports::paddock::plugin::task_exec::Guest> {
        self.exec.as_ref()
    }
}

impl std::ops::Deref for DriverInstance {
    type Target = v0_1::driver::Driver;
    fn deref(&self) -> &Self::Target {
        &self.driver
    }
}

impl WorldInstance for DriverInstance {
    type Pre = crate::component::DriverLinked;
    fn pre(p: &WorldPre) -> Option<&Self::Pre> {
        match p {
            WorldPre::Driver(pre) => Some(pre),
            _ => None,
        }
    }
    fn instantiate<'a>(
        pre: &'a Self::Pre,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, wasmtime::Result<Self>> {
        Box::pin(async move {
            let instance = pre
                .pre
                .instance_pre()
                .instantiate_async(&mut *store)
                .await?;
            let driver = v0_1::driver::Driver::new(&mut *store, &instance)?;
            let exec = match &pre.exec {
                Some(indices) => Some(indices.load(&mut *store, &instance)?),
                None => None,
            };
            Ok(DriverInstance { driver, exec })
        })
    }
    fn into_instance(self) -> Instance {
        Instance::Driver(self)
    }
    fn of_instance(i: &Instance) -> Option<&Self> {
        match i {
            Instance::Driver(x) => Some(x),
            _ => None,
        }
    }
}
world_instance!(v0_1::hook::Hook, v0_1::hook::HookPre<HostState>, Hook);
world_instance!(
    v0_1::device::DevicePlugin,
    v0_1::device::DevicePluginPre<HostState>,
    Device
);
world_instance!(v0_1::check::Check, v0_1::check::CheckPre<HostState>, Check);
world_instance!(
    v0_1::secret::SecretProvider,
    v0_1::secret::SecretProviderPre<HostState>,
    Secret
);
