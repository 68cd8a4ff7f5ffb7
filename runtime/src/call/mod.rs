//! Calling into a component: one generic path for every world ([`Runtime::call_world`]):
//! a warm store or a fresh one (after an instance permit), the caller's closure under the
//! call's deadline, then the outcome ([`outcome`]).
//!
//! What the limits count: a call first waits for its component's turn (at most
//! `max_concurrent_calls` in flight) and an instance permit; the deadline (`call_timeout`)
//! starts once the call has its store, so those waits are not charged to the component; it then
//! covers instantiation, guest CPU and host waits alike. Guest CPU is also checked on every
//! epoch tick, so a spinning guest is stopped even when its future is not polled.

pub(crate) mod outcome;
pub(crate) mod warm;
pub(crate) mod world;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use wasmtime::Store;

use outcome::wrong_world;
pub use outcome::{CallError, CallFailure};
pub use world::DriverInstance;
use world::Instance;
use world::WorldInstance;

use crate::Runtime;
use crate::bindings::v0_1;
use crate::component::{LoadedComponent, WorldPre};
use crate::context::{TaskContext, needs_preopens};
use crate::store::{self, CallWitness, HostState};

/// Context put on instantiation errors, so a failure there is told apart from the call's.
pub(crate) const INSTANTIATING: &str = "instantiating the component";

/// One call in progress: its store (fresh, or warm from an earlier clean call), the instance
/// when the store already has one, what explains a failure, and its pool permit.
pub(crate) struct Call {
    pub(crate) store: Store<HostState>,
    pub(crate) witness: CallWitness,
    pub(crate) timeout: Duration,
    pub(crate) instance: Option<Instance>,
    /// Calls this store has served.
    pub(crate) served: u32,
    /// Whether the store may serve another call (not when it has a task's preopens).
    pub(crate) reusable: bool,
    /// When this call began (after waiting for a permit).
    pub(crate) started: std::time::Instant,
    /// Where this call is counted.
    pub(crate) metrics: Arc<crate::metrics::OpMetrics>,
    /// The store came warm from an earlier call.
    pub(crate) warm: bool,
    pub(crate) _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Runtime {
    /// Ask a component for its `info()`, whatever its world.
    pub async fn info(&self, comp: &LoadedComponent) -> Result<v0_1::info::PluginInfo, CallError> {
        match &comp.pre {
            WorldPre::Driver(_) => {
                self.call_driver(comp, None, "info", |d, s| {
                    Box::pin(d.paddock_plugin_task_driver().call_info(s))
                })
                .await
            }
            WorldPre::Hook(_) => {
                self.call_hook(comp, None, "info", |h, s| {
                    Box::pin(h.paddock_plugin_task_hook().call_info(s))
                })
                .await
            }
            WorldPre::Device(_) => {
                self.call_device(comp, "info", |d, s| {
                    Box::pin(d.paddock_plugin_device().call_info(s))
                })
                .await
            }
            WorldPre::Check(_) => {
                self.call_check(comp, "info", |c, s| {
                    Box::pin(c.paddock_plugin_service_check().call_info(s))
                })
                .await
            }
            WorldPre::Secret(_) => {
                self.call_secret(comp, None, "info", |c, s| {
                    Box::pin(c.paddock_plugin_secret_source().call_info(s))
                })
                .await
            }
        }
    }

    /// Call a driver: a warm store or a fresh one and instance, then `f`, bounded by the
    /// component's limits.
    pub async fn call_driver<R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a DriverInstance,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, task, op, f).await
    }

    /// Call a hook (see [`Runtime::call_driver`]).
    pub async fn call_hook<R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1::hook::Hook,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, task, op, f).await
    }

    /// Call a device plugin (see [`Runtime::call_driver`]).
    pub async fn call_device<R, F>(
        &self,
        comp: &LoadedComponent,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1::device::DevicePlugin,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, None, op, f).await
    }

    /// Call a check component (see [`Runtime::call_driver`]).
    pub async fn call_check<R, F>(
        &self,
        comp: &LoadedComponent,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1::check::Check,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, None, op, f).await
    }

    /// Call a secret provider about `task` (see [`Runtime::call_driver`]).
    pub async fn call_secret<R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a v0_1::secret::SecretProvider,
                &'a mut Store<HostState>,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        self.call_world(comp, task, op, f).await
    }

    /// One call into a component of world `W`: its store (warm, or fresh and instantiated
    /// here), `f` under the call's deadline, then the outcome (see [`Call::finish`]).
    async fn call_world<W: WorldInstance, R, F>(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
        f: F,
    ) -> Result<R, CallError>
    where
        R: Send,
        F: for<'a> FnOnce(&'a W, &'a mut Store<HostState>) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        let Some(pre) = W::pre(&comp.pre) else {
            return Err(wrong_world(comp, op));
        };
        // The component's turn first (not charged to the deadline), held for the call only.
        let _turn = comp
            .turns
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError {
                component: comp.ctx.name.clone(),
                op,
                kind: CallFailure::Closed,
                detail: "the component is unloaded".into(),
            })?;
        let mut call = self.begin(comp, task, op).await?;
        let Call {
            store,
            instance,
            timeout,
            ..
        } = &mut call;
        let result = tokio::time::timeout(*timeout, async {
            if instance.is_none() {
                let inst = W::instantiate(pre, &mut *store)
                    .await
                    .map_err(|e| e.context(INSTANTIATING))?;
                *instance = Some(inst.into_instance());
            }
            let inst = instance
                .as_ref()
                .and_then(W::of_instance)
                .expect("a component's store holds an instance of its world");
            f(inst, store).await
        })
        .await;
        call.finish(comp, op, result)
    }

    async fn begin(
        &self,
        comp: &LoadedComponent,
        task: Option<Arc<TaskContext>>,
        op: &'static str,
    ) -> Result<Call, CallError> {
        let reusable = !needs_preopens(&comp.ctx, task.as_deref());
        let metrics = self.metrics.op(&comp.ctx.name, comp.world.as_str(), op);
        if reusable && let Some(mut call) = comp.warm.take() {
            store::arm(&mut call.store, comp.ctx.clone(), task);
            call.timeout = comp.ctx.limits.call_timeout;
            call.started = std::time::Instant::now();
            call.metrics = metrics;
            call.warm = true;
            return Ok(call);
        }
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError {
                component: comp.ctx.name.clone(),
                op,
                kind: CallFailure::Closed,
                detail: "the runtime is shutting down".into(),
            })?;
        let (store, witness) = store::new_store(
            &self.engine,
            comp.ctx.clone(),
            task,
            self.services.clone(),
            self.budget.clone(),
        );
        Ok(Call {
            store,
            witness,
            timeout: comp.ctx.limits.call_timeout,
            instance: None,
            served: 0,
            reusable,
            started: std::time::Instant::now(),
            metrics,
            warm: false,
            _permit: permit,
        })
    }
}
