//! What each call's `Store` holds, and how it is built: a store with a memory cap that traps
//! on grow failure, hostcall fuel, an epoch-checked CPU deadline, a WASI context that grants
//! nothing, and the context of the component and task being served. [`arm`] resets the
//! per-call parts (deadline, fuel, task, failure flags) before every call, so a warm store
//! that is reused serves each call exactly as a fresh one would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::grants::Grants;
use super::host_api::HostServices;
use crate::taskenv::TaskEnv;

/// Limits applied to every call of one component.
#[derive(Debug, Clone, PartialEq)]
pub struct CallLimits {
    /// Linear memory cap, bytes.
    pub memory_bytes: usize,
    /// Wall-clock deadline of one call (CPU and host waits alike).
    pub call_timeout: std::time::Duration,
    /// Bytes a guest may pass to one host call.
    pub hostcall_fuel: usize,
    /// Calls one instance may serve before it is retired; 1 gives every call a fresh store.
    pub instance_reuse: u32,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            call_timeout: std::time::Duration::from_secs(10),
            hostcall_fuel: 16 << 20,
            instance_reuse: 1000,
        }
    }
}

/// Who is being called: the component's identity, grants and config.
#[derive(Debug)]
pub struct ComponentContext {
    /// Component name.
    pub name: String,
    /// Operator grants.
    pub grants: Grants,
    /// The `config` block, as JSON.
    pub plugin_config: String,
    /// Limits.
    pub limits: CallLimits,
}

/// The task a call is about, when there is one.
#[derive(Debug, Clone, Default)]
pub struct TaskContext {
    /// The task's environment and the node attributes interpolation sees.
    pub env: TaskEnv,
    /// Device reservations of the task.
    pub reservations: Vec<crate::runtime::host_api::devices::Reservation>,
    /// The task's directories, once built (preopened for a `task_dir` grant).
    pub dirs: Option<crate::taskenv::TaskDirs>,
}

/// Whether a call needs its own WASI context with the task's dirs preopened. Such a store
/// is never reused: a guest's libc caches its preopens, so a reused store could reach
/// another task's files.
pub fn needs_preopens(component: &ComponentContext, task: Option<&TaskContext>) -> bool {
    component.grants.task_dir && task.is_some_and(|t| t.dirs.is_some())
}

/// Memory cap that records whether it was hit, so the error can say "out of memory".
struct MemoryCap {
    max: usize,
    hit: Arc<AtomicBool>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.hit.store(true, Ordering::Relaxed);
            wasmtime::bail!(
                "memory cap of {} bytes exceeded (asked for {desired})",
                self.max
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The data of one call's store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryCap,
    deadline_hit: Arc<AtomicBool>,
    pub(crate) component: Arc<ComponentContext>,
    pub(crate) task: Option<Arc<TaskContext>>,
    pub(crate) services: Arc<HostServices>,
    deadline: Instant,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// What the caller keeps to explain a failed call after the store is gone.
pub struct CallWitness {
    /// Guest stdout+stderr (a Rust guest's panic message lands here).
    pub output: MemoryOutputPipe,
    /// The memory cap was hit.
    pub memory_hit: Arc<AtomicBool>,
    /// The CPU deadline was hit.
    pub deadline_hit: Arc<AtomicBool>,
}

impl CallWitness {
    /// Whether the call left nothing behind that would make the store unfit for another
    /// call: no cap or deadline hit and no guest output (the pipe is bounded and is the
    /// explanation of a later failure, so it must start empty).
    pub fn clean(&self) -> bool {
        !self.memory_hit.load(Ordering::Relaxed)
            && !self.deadline_hit.load(Ordering::Relaxed)
            && self.output.contents().is_empty()
    }

    /// Guest output as text, trimmed.
    pub fn output_text(&self) -> String {
        String::from_utf8_lossy(&self.output.contents())
            .trim()
            .to_string()
    }
}

/// Build a fresh store, armed for one call.
pub fn new_store(
    engine: &Engine,
    component: Arc<ComponentContext>,
    task: Option<Arc<TaskContext>>,
    services: Arc<HostServices>,
) -> (Store<HostState>, CallWitness) {
    let output = MemoryOutputPipe::new(64 * 1024);
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(output.clone()).stderr(output.clone());
    if needs_preopens(&component, task.as_deref())
        && let Some(dirs) = task.as_ref().and_then(|t| t.dirs.as_ref())
    {
        for (host, guest) in [(&dirs.task_dir, "/task"), (&dirs.alloc_dir, "/alloc")] {
            if let Err(e) = wasi.preopened_dir(host, guest, FsPerms::ReadWrite) {
                // The call goes on without it: the guest's open fails and says so.
                tracing::warn!(component = %component.name, dir = %host, error = %e, "cannot preopen");
            }
        }
    }
    let wasi = wasi.build();
    let memory_hit = Arc::new(AtomicBool::new(false));
    let deadline_hit = Arc::new(AtomicBool::new(false));
    let limits = component.limits.clone();
    let deadline = Instant::now() + limits.call_timeout;
    let state = HostState {
        wasi,
        table: ResourceTable::new(),
        limiter: MemoryCap {
            max: limits.memory_bytes,
            hit: memory_hit.clone(),
        },
        deadline_hit: deadline_hit.clone(),
        component,
        task,
        services,
        deadline,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_hostcall_fuel(limits.hostcall_fuel);
    // A new store's deadline is 0: set it before instantiating, or the start function traps.
    store.set_epoch_deadline(1);
    let hit = deadline_hit.clone();
    store.epoch_deadline_callback(move |ctx| {
        if Instant::now() >= ctx.data().deadline {
            hit.store(true, Ordering::Relaxed);
            wasmtime::bail!("CPU deadline exceeded");
        }
        // Yield every tick so a spinning guest never holds a tokio worker.
        Ok(UpdateDeadline::Yield(1))
    });
    (
        store,
        CallWitness {
            output,
            memory_hit,
            deadline_hit,
        },
    )
}

/// Arm a warm store for its next call: the component's current context and limits, the
/// task, a new wall-clock deadline, fresh hostcall fuel and epoch deadline.
pub fn arm(
    store: &mut Store<HostState>,
    component: Arc<ComponentContext>,
    task: Option<Arc<TaskContext>>,
) {
    let limits = &component.limits;
    store.set_hostcall_fuel(limits.hostcall_fuel);
    store.set_epoch_deadline(1);
    let data = store.data_mut();
    data.deadline = Instant::now() + limits.call_timeout;
    data.limiter.max = limits.memory_bytes;
    data.limiter.hit.store(false, Ordering::Relaxed);
    data.deadline_hit.store(false, Ordering::Relaxed);
    data.component = component;
    data.task = task;
}
