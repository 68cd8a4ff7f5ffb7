//! One call into a component: the failure kinds a caller sees, and how a finished call's
//! outcome is turned into them (trap, memory cap, deadline), naming the component.

use std::time::Duration;

use serde::Serialize;
use wasmtime::Store;

use super::LoadedComponent;
use super::bindings::v0_1_0;

/// Context put on instantiation errors, so a failure there is told apart from the call's.
pub(super) const INSTANTIATING: &str = "instantiating the component";
use super::store::{CallWitness, HostState};

/// How a call into a component failed. Distinct from a WIT error the guest returned, which
/// is a successful call carrying an `Err` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CallFailure {
    /// The guest trapped (panic, unreachable, stack overflow, ...).
    Trap,
    /// The guest hit its memory cap.
    OutOfMemory,
    /// The guest did not answer before its deadline.
    Deadline,
    /// The component is of another world than the call.
    WrongWorld,
    /// The agent is shutting down.
    Closed,
    /// The component's exports do not have the types of this agent's contract.
    ContractMismatch,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CallFailure::Trap => "trapped",
            CallFailure::OutOfMemory => "exceeded its memory cap",
            CallFailure::Deadline => "missed its deadline",
            CallFailure::WrongWorld => "wrong world",
            CallFailure::Closed => "runtime closed",
            CallFailure::ContractMismatch => "does not match the contract",
        })
    }
}

/// A failed call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("component {component:?} {kind} in {op}: {detail}")]
pub struct CallError {
    /// Component name.
    pub component: String,
    /// Operation, e.g. "start".
    pub op: &'static str,
    /// What kind of failure.
    pub kind: CallFailure,
    /// Details: the trap and what the guest printed.
    pub detail: String,
}

/// A live instance of one of the worlds, kept with its store between calls.
pub(super) enum Instance {
    Driver(v0_1_0::driver::Driver),
    Hook(v0_1_0::hook::Hook),
    Device(v0_1_0::device::DevicePlugin),
}

/// What [`Runtime::call_world`](super::Runtime) needs of a world's bindings: its
/// pre-linked form in a [`WorldPre`](super::WorldPre), how to instantiate it, and how it is
/// kept in a store's [`Instance`] slot between calls.
pub(super) trait WorldInstance: Sized + Send + Sync + 'static {
    /// The world's `InstancePre` wrapper.
    type Pre: Send + Sync;
    /// The pre-linked component, if it is of this world.
    fn pre(p: &super::WorldPre) -> Option<&Self::Pre>;
    /// Instantiate into `store`.
    fn instantiate<'a>(
        pre: &'a Self::Pre,
        store: &'a mut Store<HostState>,
    ) -> futures::future::BoxFuture<'a, wasmtime::Result<Self>>;
    /// Keep in a store.
    fn into_instance(self) -> Instance;
    /// Find in a store.
    fn of_instance(i: &Instance) -> Option<&Self>;
}

macro_rules! world_instance {
    ($ty:ty, $pre:ty, $variant:ident) => {
        impl WorldInstance for $ty {
            type Pre = $pre;
            fn pre(p: &super::WorldPre) -> Option<&Self::Pre> {
                match p {
                    super::WorldPre::$variant(pre) => Some(pre),
                    _ => None,
                }
            }
            fn instantiate<'a>(
                pre: &'a Self::Pre,
                store: &'a mut Store<HostState>,
            ) -> futures::future::BoxFuture<'a, wasmtime::Result<Self>> {
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

world_instance!(
    v0_1_0::driver::Driver,
    v0_1_0::driver::DriverPre<HostState>,
    Driver
);
world_instance!(v0_1_0::hook::Hook, v0_1_0::hook::HookPre<HostState>, Hook);
world_instance!(
    v0_1_0::device::DevicePlugin,
    v0_1_0::device::DevicePluginPre<HostState>,
    Device
);

/// One call in progress: its store (fresh, or warm from an earlier clean call), the instance
/// when the store already has one, what explains a failure, and its pool permit.
pub(super) struct Call {
    pub(super) store: Store<HostState>,
    pub(super) witness: CallWitness,
    pub(super) timeout: Duration,
    pub(super) instance: Option<Instance>,
    /// Calls this store has served.
    pub(super) served: u32,
    /// Whether the store may serve another call (not when it has a task's preopens).
    pub(super) reusable: bool,
    /// When this call began (after waiting for a permit).
    pub(super) started: std::time::Instant,
    /// Where this call is counted.
    pub(super) metrics: std::sync::Arc<super::metrics::OpMetrics>,
    /// The store came warm from an earlier call.
    pub(super) warm: bool,
    pub(super) _permit: tokio::sync::OwnedSemaphorePermit,
}

/// Idle warm stores of one component version, at most [`WarmPool::MAX_IDLE`]. Each holds a
/// pool slot and a permit, so the cap keeps a quiet component cheap.
#[derive(Default)]
pub(super) struct WarmPool {
    idle: std::sync::Mutex<Vec<Call>>,
}

impl WarmPool {
    const MAX_IDLE: usize = 4;

    pub(super) fn take(&self) -> Option<Call> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    pub(super) fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn put(&self, call: Call) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < Self::MAX_IDLE {
            idle.push(call);
        }
    }
}

impl Call {
    pub(super) fn finish<R>(
        self,
        comp: &LoadedComponent,
        op: &'static str,
        result: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Result<R, CallError> {
        let elapsed = self.started.elapsed();
        let metrics = self.metrics.clone();
        let warm = self.warm;
        let r = self.outcome(comp, op, result);
        metrics.record(elapsed, warm, r.as_ref().err().map(|e| e.kind));
        r
    }

    fn outcome<R>(
        mut self,
        comp: &LoadedComponent,
        op: &'static str,
        result: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Result<R, CallError> {
        match result {
            Ok(Ok(r)) => {
                // A clean call may hand its store to the next one, until the store has
                // served its quota; anything unusual retires it.
                self.served += 1;
                if self.reusable
                    && self.instance.is_some()
                    && self.served < comp.ctx.limits.instance_reuse
                    && self.witness.clean()
                {
                    comp.warm.put(self);
                }
                Ok(r)
            }
            // A trapped or interrupted instance cannot be entered again: the store is
            // dropped here, and the next call gets a fresh one.
            Ok(Err(e)) => {
                let Call {
                    store,
                    witness,
                    timeout,
                    ..
                } = self;
                drop(store);
                Err(classify(comp, op, e, &witness, timeout))
            }
            Err(_) => Err(CallError {
                component: comp.ctx.name.clone(),
                op,
                kind: CallFailure::Deadline,
                detail: format!("no answer within {:?}", self.timeout),
            }),
        }
    }
}

pub(super) fn wrong_world(comp: &LoadedComponent, op: &'static str) -> CallError {
    CallError {
        component: comp.ctx.name.clone(),
        op,
        kind: CallFailure::WrongWorld,
        detail: format!("it is a {} component", comp.world),
    }
}

fn classify(
    comp: &LoadedComponent,
    op: &'static str,
    e: wasmtime::Error,
    w: &CallWitness,
    timeout: Duration,
) -> CallError {
    let (kind, mut detail) = if w.memory_hit.load(std::sync::atomic::Ordering::Relaxed) {
        (
            CallFailure::OutOfMemory,
            format!(
                "memory cap of {} MiB reached",
                comp.ctx.limits.memory_bytes >> 20
            ),
        )
    } else if w.deadline_hit.load(std::sync::atomic::Ordering::Relaxed) {
        (
            CallFailure::Deadline,
            format!("still running after {timeout:?}"),
        )
    } else if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        (CallFailure::Trap, trap.to_string())
    } else if e.to_string() == INSTANTIATING {
        // Instantiation failed without a trap: the exports' types differ from this agent's
        // contract (bindgen typechecks exports when instantiating, not when linking).
        (CallFailure::ContractMismatch, e.root_cause().to_string())
    } else {
        (CallFailure::Trap, e.root_cause().to_string())
    };
    let out = w.output_text();
    if !out.is_empty() {
        let tail: String = out
            .lines()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        detail.push_str(&format!("; guest output: {}", truncate(&tail, 600)));
    }
    CallError {
        component: comp.ctx.name.clone(),
        op,
        kind,
        detail,
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut cut = n;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}
