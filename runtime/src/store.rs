//! What each call's `Store` holds, and how it is built: a store with a memory cap that traps
//! on grow failure, hostcall fuel, an epoch-checked CPU deadline, a WASI context that grants
//! nothing, and the context of the component and task being served. [`arm`] resets the
//! per-call parts (deadline, fuel, task, failure flags) before every call, so a warm store
//! that is reused serves each call exactly as a fresh one would.
//!
//! [`add_to_linker`] is the one place that wires WASI and every host interface, each with a
//! function projecting its view out of [`HostState`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::v0_1;
use crate::context::{ComponentContext, TaskContext, needs_preopens};
use crate::host_api::{self, HostServices};

/// The agent's guest memory budget: linear memory of every live instance together (warm
/// ones included), so that many calls each within their own cap (60 concurrent
/// validations of 56 MiB) cannot take the node's memory. A growth that would pass it
/// fails the call as `busy`, which is the agent's load, not the component's fault.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: std::sync::atomic::AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: Default::default(),
        }
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The budget, bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|t| *t <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Memory cap that records whether it was hit, so the error can say "out of memory", and
/// holds the store's share of the agent's budget.
struct MemoryCap {
    max: usize,
    hit: Arc<AtomicBool>,
    /// The most linear memory the store's instance has asked for and got, bytes.
    peak: usize,
    budget: Arc<MemoryBudget>,
    /// Bytes of the budget this store holds (its instance's memory).
    held: usize,
    budget_hit: Arc<AtomicBool>,
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        self.budget.give_back(self.held);
    }
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
        let more = desired.saturating_sub(self.held);
        if more > 0 {
            if !self.budget.take(more) {
                self.budget_hit.store(true, Ordering::Relaxed);
                wasmtime::bail!(
                    "the agent's guest memory budget of {} MiB is in use",
                    self.budget.limit >> 20
                );
            }
            self.held += more;
        }
        self.peak = self.peak.max(desired);
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
    component: Arc<ComponentContext>,
    task: Option<Arc<TaskContext>>,
    services: Arc<HostServices>,
    deadline: Instant,
    /// Events the current call has emitted (`events` caps them per call).
    events_emitted: u32,
    /// Log lines the current call has written (`log` caps them per call).
    lines_logged: u32,
    /// Connects the `network` grant refused in this store's calls.
    network_denials: crate::network::Denials,
    /// `wasi:http`'s state and its outgoing requests under the `network` grant.
    http: wasmtime_wasi_http::WasiHttpCtx,
    http_hooks: crate::network::HttpHooks,
}

/// The `process` view of a store's current call (its component, its task, the host), for
/// what the host does after a guest answered: `alloc exec`'s plan is carried out through
/// it with the same checks as the guest's own `process` calls.
pub fn process_view(store: &Store<HostState>) -> host_api::process::Process<'_> {
    let s = store.data();
    host_api::process::Process::new(
        &s.component,
        s.task.as_deref(),
        s.services.processes.as_deref(),
    )
}

impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl HostState {
    /// The connects the `network` grant refused since the last time this was asked, each
    /// naming the component, the address and the grant.
    pub fn take_network_denials(&self) -> Vec<String> {
        self.network_denials.take()
    }

    /// The most linear memory this store's instance has held, bytes.
    pub(crate) fn peak_memory(&self) -> usize {
        self.limiter.peak
    }
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
    /// The agent's guest memory budget was in use.
    pub budget_hit: Arc<AtomicBool>,
}

impl CallWitness {
    /// Whether the call left nothing behind that would make the store unfit for another
    /// call: no cap or deadline hit and no guest output (the pipe is bounded and is the
    /// explanation of a later failure, so it must start empty).
    pub fn clean(&self) -> bool {
        !self.memory_hit.load(Ordering::Relaxed)
            && !self.deadline_hit.load(Ordering::Relaxed)
            && !self.budget_hit.load(Ordering::Relaxed)
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
    budget: Arc<MemoryBudget>,
) -> (Store<HostState>, CallWitness) {
    let output = MemoryOutputPipe::new(64 * 1024);
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(output.clone()).stderr(output.clone());
    if needs_preopens(&component, task.as_deref())
        && let Some(dirs) = task.as_ref().and_then(|t| t.files.as_ref())
    {
        for (host, guest) in [(&dirs.task_dir, "/task"), (&dirs.alloc_dir, "/alloc")] {
            if let Err(e) = wasi.preopened_dir(host, guest, FsPerms::ReadWrite) {
                // The call goes on without it: the guest's open fails and says so.
                tracing::warn!(component = %component.name, dir = %host, error = %e, "cannot preopen");
            }
        }
    }
    for path in &component.grants.read_paths {
        if let Err(e) = wasi.preopened_dir(path, path, FsPerms::ReadOnly) {
            tracing::warn!(component = %component.name, dir = %path, error = %e, "cannot preopen read-only");
        }
    }
    // Every socket the guest opens is checked against its `network` grant: outbound TCP
    // connects to what the grant lists, and the implicit bind to an ephemeral port a connect
    // makes; no listening, accepting or UDP.
    let network_denials = crate::network::Denials::default();
    let check = Arc::new(crate::network::ConnectCheck::new(
        &component.name,
        component.grants.network.as_ref(),
        network_denials.clone(),
    ));
    let http_hooks = crate::network::HttpHooks::new(
        check.clone(),
        component
            .grants
            .network
            .as_ref()
            .and_then(|n| n.max_response_bytes),
    );
    wasi.allow_udp(false)
        .allow_tcp(true)
        .allow_ip_name_lookup(component.grants.network.is_some())
        .socket_addr_check(move |addr, use_| {
            let check = check.clone();
            Box::pin(async move {
                use wasmtime_wasi::sockets::SocketAddrUse as U;
                match use_ {
                    U::TcpConnect => check.allows(addr, true).await,
                    U::TcpBind if addr.ip().is_unspecified() && addr.port() == 0 => true,
                    _ => check.allows(addr, false).await,
                }
            })
        });
    let wasi = wasi.build();
    let memory_hit = Arc::new(AtomicBool::new(false));
    let deadline_hit = Arc::new(AtomicBool::new(false));
    let budget_hit = Arc::new(AtomicBool::new(false));
    let limits = component.limits.clone();
    let deadline = Instant::now() + limits.call_timeout;
    let state = HostState {
        wasi,
        table: ResourceTable::new(),
        limiter: MemoryCap {
            max: limits.memory_bytes,
            hit: memory_hit.clone(),
            peak: 0,
            budget,
            held: 0,
            budget_hit: budget_hit.clone(),
        },
        deadline_hit: deadline_hit.clone(),
        component,
        task,
        services,
        deadline,
        events_emitted: 0,
        lines_logged: 0,
        network_denials,
        http: wasmtime_wasi_http::WasiHttpCtx::new(),
        http_hooks,
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
            budget_hit,
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
    data.limiter.budget_hit.store(false, Ordering::Relaxed);
    data.deadline_hit.store(false, Ordering::Relaxed);
    data.component = component;
    data.task = task;
    data.events_emitted = 0;
    data.lines_logged = 0;
}

/// The interfaces that only carry types: linked so that a component importing them finds
/// an instance, with nothing to serve.
struct NoFunctions;

impl v0_1::types::Host for NoFunctions {}
impl v0_1::info::Host for NoFunctions {}

struct HasNoFunctions;

impl HasData for HasNoFunctions {
    type Data<'a> = NoFunctions;
}

/// Add WASI p2 and every Paddock host interface to `linker`. One linker serves all worlds:
/// `device-plugin` imports a subset of what `driver` imports, `hook` a subset plus
/// `variables`, `services` and `artifacts`.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    // `wasi:http`'s outgoing handler and types, every request under the `network` grant.
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    v0_1::types::add_to_linker::<_, HasNoFunctions>(linker, |_| NoFunctions)?;
    v0_1::info::add_to_linker::<_, HasNoFunctions>(linker, |_| NoFunctions)?;
    host_api::log::add_to_linker(linker, |s| {
        host_api::log::Log::new(&s.component.name, &mut s.lines_logged)
    })?;
    host_api::config::add_to_linker(linker, |s| {
        host_api::config::Config::new(&s.component.plugin_config)
    })?;
    host_api::timer::add_to_linker(linker)?;
    host_api::env::add_to_linker(linker, |s| {
        host_api::env::Env::new(&s.component, s.task.as_deref())
    })?;
    host_api::devices::add_to_linker(linker, |s| {
        host_api::devices::Devices::new(&s.component, s.task.as_deref())
    })?;
    host_api::events::add_to_linker(linker, |s| {
        host_api::events::Events::new(
            &s.component,
            s.services.events.as_deref(),
            &mut s.events_emitted,
        )
    })?;
    host_api::process::add_to_linker(linker, |s| {
        host_api::process::Process::new(
            &s.component,
            s.task.as_deref(),
            s.services.processes.as_deref(),
        )
    })?;
    host_api::task_logs::add_to_linker(linker, |s| {
        host_api::task_logs::TaskLogs::new(&s.component, s.services.task_logs.as_deref())
    })?;
    host_api::variables::add_to_linker(linker, |s| {
        host_api::variables::Variables::new(
            &s.component,
            s.task.as_deref(),
            s.services.variables.as_deref(),
        )
    })?;
    host_api::services::add_to_linker(linker, |s| {
        host_api::services::Services::new(
            &s.component,
            s.task.as_deref(),
            s.services.services.as_deref(),
        )
    })?;
    host_api::artifacts::add_to_linker(linker, |s| {
        host_api::artifacts::Artifacts::new(&s.component, s.task.as_deref())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::{ComponentSettings, ComponentSource, Grants, Runtime, RuntimeOptions};

    /// What the `host-devices` plugin finds under a fake sysfs: its group names, or its error.
    async fn fingerprint(read_paths: Vec<String>, sysfs: &str) -> Result<Vec<String>, String> {
        let settings = ComponentSettings {
            grants: Grants {
                read_paths,
                ..Grants::default()
            },
            config: serde_json::json!({ "sysfs": sysfs, "devfs": "/nonexistent" }),
            ..Default::default()
        };
        let rt = Runtime::new(RuntimeOptions {
            components: BTreeMap::from([("host-devices".to_string(), settings)]),
            ..Default::default()
        })
        .unwrap();
        let a = guest_artifacts::HOST_DEVICES;
        let c = rt
            .load(
                ComponentSource::BuiltIn(a.file_name.into()),
                Arc::from(a.bytes),
            )
            .await
            .unwrap();
        rt.call_device(&c, "fingerprint", |d, s| {
            Box::pin(d.paddock_plugin_device().call_fingerprint(s))
        })
        .await
        .unwrap()
        .map(|groups| groups.into_iter().map(|g| g.name).collect())
        .map_err(|e| format!("{e:?}"))
    }

    #[tokio::test]
    async fn a_read_paths_grant_opens_that_folder_read_only_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let kvm = dir.path().join("sys/class/misc/kvm");
        std::fs::create_dir_all(&kvm).unwrap();
        std::fs::write(kvm.join("uevent"), "MAJOR=10\nDEVNAME=kvm\n").unwrap();
        let root = dir.path().display().to_string();
        let sysfs = format!("{root}/sys");
        assert_eq!(
            fingerprint(vec![root.clone()], &sysfs).await.unwrap(),
            ["kvm"]
        );
        // Without the grant, or with another folder granted, the tree is not there.
        for grant in [vec![], vec!["/tmp/paddock-no-such-dir".to_string()]] {
            let e = fingerprint(grant, &sysfs).await.unwrap_err();
            assert!(e.contains("cannot read sysfs"), "{e}");
        }
    }
}
