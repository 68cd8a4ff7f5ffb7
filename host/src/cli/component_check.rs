//! `agent component check FILE`: a conformance run for plugin authors. The component is
//! loaded in a throwaway runtime with the grants given on the command line and taken
//! through its whole contract; each line says `pass`, `warn` or `FAIL`, what was wrong and
//! what the contract says. The exit code is 1 when anything failed.
//!
//! - a driver: `info`, `capabilities`, `fingerprint`, `validate-config` with the given task
//!   config and with an unknown field added, `start`, `wait`, `inspect`, `stats`, `recover`
//!   with the handle it returned and with a damaged one, a second task at once, `destroy`
//!   of a running task without `force` (refused), `stop` until it exits, `destroy` after,
//!   `signal` (SIGHUP, to the second task) and its forced `destroy`, `exec-task` (`/bin/sh
//!   -c 'echo paddock-check'` in the running task, as capabilities say) and every call's time
//!   against its deadline;
//! - a hook: `info`, then `prestart`, `poststart`, `exited` and `stop` for one task;
//! - a device plugin: `info`, `fingerprint`, `reserve` of the first instance of each group,
//!   `stats`;
//! - a check: `probe` of a port where nothing listens (it must answer, not trap), of a
//!   listener the run opens on loopback (it must connect; the listener answers `+PONG` to
//!   what it reads, so a Redis ping passes), and of an address outside any grant
//!   (`192.0.2.1`, which the host must refuse, naming the grant). Give it `--network
//!   127.0.0.1:*` to let it reach the listener.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::drivermanager::types::{
    DriverCapabilities as Capabilities, DriverError, TaskConfig, TaskHandle, WaitStatus,
};
use crate::drivermanager::{Driver, DriverCallError};
use crate::runtime::{Grants, LoadedComponent, Runtime, World};

/// What `check` is given beyond the file.
pub struct CheckArgs {
    /// Grants for the component.
    pub grants: Grants,
    /// The component's `plugin { config }` block.
    pub plugin_config: Value,
    /// A task `config` the driver should accept and run for a while.
    pub task_config: Value,
}

/// The report: one line per check.
#[derive(Default)]
struct Report {
    lines: Vec<(&'static str, String, String)>,
    slowest: Option<(String, Duration)>,
}

impl Report {
    fn pass(&mut self, check: impl Into<String>, detail: impl Into<String>) {
        self.lines.push(("pass", check.into(), detail.into()));
    }
    fn warn(&mut self, check: impl Into<String>, detail: impl Into<String>) {
        self.lines.push(("warn", check.into(), detail.into()));
    }
    fn fail(&mut self, check: impl Into<String>, detail: impl Into<String>) {
        self.lines.push(("FAIL", check.into(), detail.into()));
    }
    /// Times `call`, keeping the slowest.
    async fn timed<T>(&mut self, op: &str, call: impl std::future::Future<Output = T>) -> T {
        let t = Instant::now();
        let r = call.await;
        let took = t.elapsed();
        if self.slowest.as_ref().is_none_or(|(_, d)| took > *d) {
            self.slowest = Some((op.to_string(), took));
        }
        r
    }
    fn failed(&self) -> bool {
        self.lines.iter().any(|(o, _, _)| *o == "FAIL")
    }
    fn print(&self) {
        for (outcome, check, detail) in &self.lines {
            println!("{outcome:<4}  {check}: {detail}");
        }
        let failed = self.lines.iter().filter(|(o, _, _)| *o == "FAIL").count();
        let warned = self.lines.iter().filter(|(o, _, _)| *o == "warn").count();
        println!(
            "{} checks: {} passed, {warned} warnings, {failed} failed",
            self.lines.len(),
            self.lines.len() - failed - warned
        );
    }
}

/// Run the checks and print the report; 1 when any failed.
/// What loading `file` is called on the progress line: its name and size.
pub(crate) fn compiling(file: &std::path::Path) -> String {
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    format!(
        "Compiling {} ({})",
        file.display(),
        crate::structs::human_bytes(size)
    )
}

pub async fn run(file: &std::path::Path, args: CheckArgs) -> anyhow::Result<i32> {
    let dir = tempfile::tempdir()?;
    let mut report = Report::default();
    // Isolated processes are the task executor's children, as in the agent.
    let executor = args
        .grants
        .isolation
        .then_some(super::component_call::Executor { dir: dir.path() });
    let progress = super::Progress::start(compiling(file));
    let loaded = super::component_call::load_alone(
        file,
        executor,
        args.grants.clone(),
        args.plugin_config.clone(),
    )
    .await?;
    progress.done();
    let (host, c) = match loaded {
        Ok(loaded) => loaded,
        Err(refusal) => {
            report.fail("load", refusal);
            report.print();
            return Ok(1);
        }
    };
    report.pass(
        "load",
        format!(
            "{} component {:?}, contract {}, plugin version {}",
            c.world, c.name, c.contract_version, c.plugin_version
        ),
    );
    match host.runtime.info(&c).await {
        Ok(i) if !i.name.is_empty() && !i.version.is_empty() => {
            report.pass("info", format!("{} {}", i.name, i.version))
        }
        Ok(i) => report.fail(
            "info",
            format!(
                "name {:?}, version {:?}: both must be set",
                i.name, i.version
            ),
        ),
        Err(e) => report.fail("info", e.to_string()),
    }
    match c.world {
        World::Driver => {
            let d = host.drivers.driver(&c.name);
            check_driver(&mut report, &d, &args.task_config, &dir.path().join("task")).await;
        }
        World::Hook => check_hook(&mut report, &host.hooks, &c).await,
        World::DevicePlugin => check_device(&mut report, &host.runtime, &c.name).await,
        World::Check => check_check(&mut report, &host.checks, &c).await,
        World::SecretProvider => check_secret(&mut report, &host.secrets, &c).await,
    }
    if let Some((op, took)) = &report.slowest {
        let limit = c.limits().call_timeout;
        let detail = format!("slowest call {op} took {took:.1?} of its {limit:?} deadline");
        if *took * 2 > limit {
            report.warn("limits", format!("{detail}: under load it may miss it"));
        } else {
            report.pass("limits", detail);
        }
    }
    // Memory: the most an instance held over every call above, against the cap.
    let (peak, cap) = (c.stats.peak_memory_bytes(), c.limits().memory_bytes as u64);
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1 << 20));
    let detail = format!(
        "memory: an instance held at most {} of its {} cap",
        mib(peak),
        mib(cap)
    );
    if peak * 4 > cap * 3 {
        report.warn(
            "limits",
            format!("{detail}: near the cap (limits.memory_mb)"),
        );
    } else {
        report.pass("limits", detail);
    }
    report.print();
    Ok(i32::from(report.failed()))
}

fn task(id: &str, config: &Value, dir: &std::path::Path) -> TaskConfig {
    let (task_dir, alloc_dir) = (dir.join(id), dir.join("alloc"));
    for d in [&task_dir, &alloc_dir] {
        let _ = std::fs::create_dir_all(d);
    }
    let logs = alloc_dir.display().to_string();
    TaskConfig {
        id: format!("check/{id}/00000000"),
        name: id.into(),
        alloc_id: "check".into(),
        job_id: "check".into(),
        job_name: "check".into(),
        group_name: "check".into(),
        namespace: "default".into(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        driver_config: config.to_string(),
        alloc_dir: logs.clone(),
        task_dir: task_dir.display().to_string(),
        stdout_path: format!("{logs}/{id}.stdout"),
        stderr_path: format!("{logs}/{id}.stderr"),
        kill_signal: "SIGINT".into(),
        kill_timeout_ns: 2_000_000_000,
        ..Default::default()
    }
}

/// A driver error is the driver answering; anything else is the component failing.
fn answered(e: &DriverCallError) -> bool {
    matches!(e, DriverCallError::Driver(_))
}

async fn check_driver(r: &mut Report, d: &Driver, config: &Value, dir: &std::path::Path) {
    let caps = check_plugin_calls(r, d, config).await;
    let Some((h, running)) = check_start(r, d, config, dir).await else {
        return;
    };
    check_handle(r, d, &h).await;
    if running {
        check_exec(r, d, caps.as_ref(), &h, &task("one", config, dir)).await;
    }
    let h2 = check_second_start(r, d, config, dir, &h).await;
    check_stop(r, d, h, running).await;
    check_signal_and_release(r, d, caps, h2).await;
}

/// `alloc exec` into the running task (contract 0.1.3): `/bin/sh -c 'echo paddock-check'`
/// with stdin closed, through the host as the agent serves it; refused as the
/// capabilities say (a refusal by the host, of a program the grants given do not allow,
/// is a warning).
async fn check_exec(
    r: &mut Report,
    d: &Driver,
    caps: Option<&Capabilities>,
    h: &TaskHandle,
    cfg: &TaskConfig,
) {
    use crate::execstream::{Collected, Ended, collect};
    let offered = caps.is_some_and(|c| c.exec);
    // An absolute program: a bare name would be looked up only among what the grant
    // allows, and a refusal of it says nothing more.
    let command = ["/bin/sh", "-c", "echo paddock-check"]
        .map(String::from)
        .to_vec();
    let started = match r
        .timed("exec-task", d.exec_started(h.clone(), cfg, command, false))
        .await
    {
        Err(DriverCallError::Driver(DriverError::NotSupported(_))) if !offered => {
            return r.pass("exec", "not supported, as capabilities say");
        }
        // The host refused the command under the grants this run gave: the driver made a
        // plan and the host checked it, which is the contract.
        Err(DriverCallError::Driver(DriverError::Denied(m))) if offered => {
            return r.warn(
                "exec",
                format!("the host refused `/bin/sh -c 'echo paddock-check'` under these grants ({m}); allow /bin/sh (--process) to see it run"),
            );
        }
        Err(e) if offered => return r.fail("exec", format!("capabilities say exec, but: {e}")),
        Err(e) if answered(&e) => {
            return r.warn("exec", format!("refused with {e}: say not-supported"));
        }
        Err(e) => return r.fail("exec", e.to_string()),
        Ok(s) => s,
    };
    match tokio::time::timeout(Duration::from_secs(10), collect(started)).await {
        Err(_) => r.fail(
            "exec",
            "`/bin/sh -c 'echo paddock-check'` did not end within 10 s",
        ),
        Ok(Collected {
            ended: Ended::Exited(code),
            stdout,
            stderr,
        }) => {
            let out = [stdout, stderr].concat();
            let echoed = String::from_utf8_lossy(&out).contains("paddock-check");
            let what = format!(
                "`/bin/sh -c 'echo paddock-check'` exited {code}, {} bytes of output{}",
                out.len(),
                if echoed { ", the echo among them" } else { "" }
            );
            if offered {
                r.pass("exec", what);
            } else {
                r.warn("exec", format!("{what}, but capabilities say no exec"));
            }
        }
        Ok(Collected {
            ended: Ended::Failed(e),
            ..
        }) => r.fail("exec", format!("a step failed: {e}")),
        Ok(Collected {
            ended: Ended::Gone, ..
        }) => r.fail("exec", "the session ended without an exit"),
    }
}

/// The calls about the plugin, not a task: capabilities, fingerprint, config validation
/// (the given config, and one with a field no driver knows).
async fn check_plugin_calls(r: &mut Report, d: &Driver, config: &Value) -> Option<Capabilities> {
    let caps = match r.timed("capabilities", d.capabilities()).await {
        Ok(c) => {
            r.pass("capabilities", format!("{c:?}"));
            Some(c)
        }
        Err(e) => {
            r.fail("capabilities", e.to_string());
            None
        }
    };
    match r.timed("fingerprint", d.fingerprint()).await {
        Ok(f) => r.pass(
            "fingerprint",
            format!("{:?} {:?}", f.health, f.health_description),
        ),
        Err(e) => r.fail("fingerprint", e.to_string()),
    }
    match r
        .timed("validate-config", d.validate_config(&config.to_string()))
        .await
    {
        Ok(()) => r.pass("validate-config (given)", config.to_string()),
        Err(e) => r.fail(
            "validate-config (given)",
            format!("{e}; give a config it accepts with --task-config"),
        ),
    }
    let mut broken = config.clone();
    if let Some(o) = broken.as_object_mut() {
        o.insert("paddock_check_unknown".into(), json!(1));
    }
    match r
        .timed("validate-config", d.validate_config(&broken.to_string()))
        .await
    {
        Err(DriverCallError::Driver(DriverError::InvalidConfig(fields)))
            if fields.iter().any(|f| f.field.contains("paddock_check_unknown")) =>
        {
            r.pass("validate-config (unknown field)", "refused, naming the field")
        }
        Err(DriverCallError::Driver(DriverError::InvalidConfig(fields))) => r.warn(
            "validate-config (unknown field)",
            format!("refused, but no field error names `paddock_check_unknown`: {fields:?}"),
        ),
        Ok(()) => r.warn(
            "validate-config (unknown field)",
            "accepted: a typo in a job's config would go unnoticed (Nomad refuses fields a driver does not know)",
        ),
        Err(e) => r.fail("validate-config (unknown field)", e.to_string()),
    }
    caps
}

/// The first task: started, and running (`true`) or already exited; `None` when nothing
/// more can be checked.
async fn check_start(
    r: &mut Report,
    d: &Driver,
    config: &Value,
    dir: &std::path::Path,
) -> Option<(TaskHandle, bool)> {
    let cfg = task("one", config, dir);
    let h = match r.timed("start", d.start(cfg.clone(), None)).await {
        Ok(h) if h.task_id == cfg.id => {
            r.pass("start", format!("handle format {}", h.version));
            h
        }
        Ok(h) => {
            r.fail(
                "start",
                format!("the handle names task {:?}, not {:?}", h.task_id, cfg.id),
            );
            return None;
        }
        Err(e) => {
            r.fail("start", format!("{e}; nothing more can be checked"));
            return None;
        }
    };
    let running = match r.timed("wait", d.wait(h.clone())).await {
        Ok(WaitStatus::Pending(_)) => {
            r.pass("wait", "running, with what to wake on");
            true
        }
        Ok(WaitStatus::Exited(e)) => {
            r.warn(
                "wait",
                format!("already exited ({e:?}): give a --task-config that runs for a while to check stop and signals"),
            );
            false
        }
        Err(e) => {
            r.fail("wait", e.to_string());
            false
        }
    };
    Some((h, running))
}

/// What a running task's handle answers: inspect, stats, recover, and a damaged handle
/// refused.
async fn check_handle(r: &mut Report, d: &Driver, h: &TaskHandle) {
    for (op, result) in [
        (
            "inspect",
            r.timed("inspect", d.inspect(h.clone())).await.map(drop),
        ),
        (
            "stats",
            r.timed("stats", d.stats(h.clone())).await.map(drop),
        ),
    ] {
        match result {
            Ok(()) => r.pass(op, "answered"),
            Err(DriverCallError::Driver(DriverError::NotSupported(m))) => {
                r.pass(op, format!("not supported: {m}"))
            }
            Err(e) => r.fail(op, e.to_string()),
        }
    }
    match r.timed("recover", d.recover(h.clone())).await {
        Ok(back) if back.task_id == h.task_id => {
            r.pass("recover", "the handle it returned is taken back")
        }
        Ok(back) => r.fail(
            "recover",
            format!("answered a handle of task {:?}", back.task_id),
        ),
        Err(e) => r.fail(
            "recover",
            format!("{e}: after an agent restart this task would be lost"),
        ),
    }
    let damaged = TaskHandle {
        driver_state: b"\x00not what this driver wrote".to_vec(),
        ..h.clone()
    };
    match r.timed("recover", d.recover(damaged)).await {
        Err(e) if answered(&e) => r.pass("recover (damaged handle)", format!("refused: {e}")),
        Ok(_) => r.fail(
            "recover (damaged handle)",
            "accepted a handle whose state it cannot have written (the contract: refuse with task-not-found or not-supported)",
        ),
        Err(e) => r.fail("recover (damaged handle)", format!("the component failed instead of refusing: {e}")),
    }
}

/// A second task while the first runs: its own handle.
async fn check_second_start(
    r: &mut Report,
    d: &Driver,
    config: &Value,
    dir: &std::path::Path,
    h: &TaskHandle,
) -> Option<TaskHandle> {
    let second = task("two", config, dir);
    match r.timed("start", d.start(second, None)).await {
        Ok(h2) if h2.driver_state != h.driver_state || h2.task_id != h.task_id => {
            r.pass("two tasks at once", "a second start while the first runs");
            Some(h2)
        }
        Ok(h2) => {
            r.fail(
                "two tasks at once",
                "the second task's handle is the first's",
            );
            Some(h2)
        }
        Err(e) => {
            r.fail("two tasks at once", e.to_string());
            None
        }
    }
}

/// The first task: not released while running, stopped, exited, released.
async fn check_stop(r: &mut Report, d: &Driver, h: TaskHandle, running: bool) {
    if running {
        match r.timed("destroy", d.destroy(h.clone(), false)).await {
            Err(e) if answered(&e) => r.pass(
                "destroy (running, not forced)",
                "refused, as the contract says",
            ),
            Ok(()) => r.fail(
                "destroy (running, not forced)",
                "released a running task; the contract refuses unless forced",
            ),
            Err(e) => r.fail("destroy (running, not forced)", e.to_string()),
        }
    }
    let h = match r
        .timed("stop", d.stop(h.clone(), 1_000_000_000, "SIGTERM".into()))
        .await
    {
        Ok(h) => h,
        Err(e) => {
            r.fail("stop", e.to_string());
            h
        }
    };
    match exited_within(r, d, h.clone(), Duration::from_secs(10)).await {
        Ok(code) => r.pass("stop", format!("exited after stop: {code}")),
        Err(m) => r.fail("stop", m),
    }
    match r.timed("destroy", d.destroy(h, false)).await {
        Ok(()) => r.pass("destroy (exited)", "released"),
        Err(e) => r.fail("destroy (exited)", e.to_string()),
    }
}

/// Signals go to the second task, which is then released with force.
async fn check_signal_and_release(
    r: &mut Report,
    d: &Driver,
    caps: Option<Capabilities>,
    h2: Option<TaskHandle>,
) {
    // Signals go to the second task, which is destroyed with force after: a signal may end it.
    let signals = caps.as_ref().is_some_and(|c| c.send_signals);
    if let Some(h2) = &h2 {
        match (
            signals,
            r.timed("signal", d.signal(h2.clone(), "SIGHUP".into()))
                .await,
        ) {
            (true, Ok(_)) => r.pass("signal", "SIGHUP delivered"),
            (false, Err(DriverCallError::Driver(DriverError::NotSupported(_)))) => {
                r.pass("signal", "not supported, as capabilities say")
            }
            (false, Ok(_)) => r.warn("signal", "accepted, but capabilities say no signals"),
            (true, Err(e)) if answered(&e) => r.warn(
                "signal",
                format!("capabilities say signals, but SIGHUP was refused: {e}"),
            ),
            (_, Err(e)) => r.fail("signal", e.to_string()),
        }
    }
    if let Some(h2) = h2 {
        match r.timed("destroy", d.destroy(h2, true)).await {
            Ok(()) => r.pass("destroy (forced)", "the second task released"),
            Err(e) => r.fail("destroy (forced)", e.to_string()),
        }
    }
}

/// Waits as the task runner does until the task exits.
async fn exited_within(
    r: &mut Report,
    d: &Driver,
    mut h: TaskHandle,
    limit: Duration,
) -> Result<String, String> {
    let deadline = Instant::now() + limit;
    loop {
        match r.timed("wait", d.wait(h.clone())).await {
            Ok(WaitStatus::Exited(e)) => return Ok(format!("{e:?}")),
            Ok(WaitStatus::Pending(w)) => {
                if let Some(next) = w.handle {
                    h = next;
                }
                if Instant::now() > deadline {
                    return Err(format!("still running {limit:?} after stop"));
                }
                let after = w
                    .after_ns
                    .map_or(Duration::from_millis(50), Duration::from_nanos);
                tokio::time::sleep(after.min(Duration::from_millis(200))).await;
            }
            Err(e) => return Err(format!("wait after stop: {e}")),
        }
    }
}

async fn check_hook(r: &mut Report, hooks: &crate::hookmanager::HookManager, c: &LoadedComponent) {
    let task = crate::hookmanager::HookTask {
        alloc_id: "check".into(),
        job_id: "check".into(),
        group_name: "check".into(),
        task_name: "one".into(),
        driver: "mock".into(),
        driver_config: "{}".into(),
        ..Default::default()
    };
    let state = match r
        .timed(
            "prestart",
            hooks.prestart(&c.name, &task, None, &BTreeMap::new()),
        )
        .await
    {
        Ok(p) => {
            r.pass(
                "prestart",
                format!("{} env vars, done: {}", p.env.len(), p.done),
            );
            p.state
        }
        Err(e @ crate::hookmanager::HookError::Component { .. }) => {
            r.fail("prestart", e.to_string());
            BTreeMap::new()
        }
        Err(e) => {
            r.warn(
                "prestart",
                format!("answered with an error for a plain task: {e}"),
            );
            BTreeMap::new()
        }
    };
    let outcome = crate::drivermanager::types::ExitResult::default();
    for (op, result) in [
        (
            "poststart",
            r.timed("poststart", hooks.poststart(&c.name, &task, None))
                .await,
        ),
        (
            "exited",
            r.timed("exited", hooks.exited(&c.name, &task, &outcome, None))
                .await,
        ),
        (
            "stop",
            r.timed("stop", hooks.stop(&c.name, &task, &state, None))
                .await,
        ),
        (
            "stop (again)",
            r.timed("stop", hooks.stop(&c.name, &task, &state, None))
                .await,
        ),
    ] {
        match result {
            Ok(()) => r.pass(op, "answered"),
            Err(e @ crate::hookmanager::HookError::Component { .. }) => r.fail(op, e.to_string()),
            Err(e) if op.starts_with("stop") => {
                r.fail(op, format!("{e}: stop must succeed and be idempotent"))
            }
            Err(e) => r.warn(op, e.to_string()),
        }
    }
}

async fn check_device(r: &mut Report, runtime: &Arc<Runtime>, name: &str) {
    let Some(p) = crate::devicemanager::DevicePlugin::get(runtime, name) else {
        r.fail("fingerprint", "the device plugin is not loaded");
        return;
    };
    let groups = match r.timed("fingerprint", p.fingerprint()).await {
        Ok(g) => {
            let n: usize = g.iter().map(|g| g.instances.len()).sum();
            r.pass("fingerprint", format!("{} groups, {n} instances", g.len()));
            g
        }
        Err(e) => {
            r.fail("fingerprint", e.to_string());
            return;
        }
    };
    for g in &groups {
        let Some(first) = g.instances.first() else {
            r.warn(format!("reserve {}", g.id()), "a group without instances");
            continue;
        };
        match r.timed("reserve", p.reserve(vec![first.id.clone()])).await {
            Ok(res) => r.pass(format!("reserve {}", g.id()), format!("{res:?}")),
            Err(e) => r.fail(format!("reserve {}", g.id()), e.to_string()),
        }
    }
    match r
        .timed(
            "reserve",
            p.reserve(vec!["paddock-check-no-such-device".into()]),
        )
        .await
    {
        Err(e) => r.pass("reserve (unknown id)", format!("refused: {e}")),
        Ok(_) => r.fail(
            "reserve (unknown id)",
            "reserved a device it never reported",
        ),
    }
    match r.timed("stats", p.stats()).await {
        Ok(s) => r.pass("stats", format!("{} groups", s.len())),
        Err(e) => r.fail("stats", e.to_string()),
    }
}

/// A listener on loopback that answers `+PONG` to whatever it reads, and how many
/// connections it took.
async fn pong_listener() -> std::io::Result<(u16, Arc<std::sync::atomic::AtomicUsize>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = l.local_addr()?.port();
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = taken.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await
                    && n > 0
                {
                    let _ = s.write_all(b"+PONG\r\n").await;
                }
            });
        }
    });
    Ok((port, taken))
}

/// A secret provider asked for a path nothing holds, on behalf of a task: any answer but
/// a failing component passes (a provider may need config this check cannot know).
async fn check_secret(
    r: &mut Report,
    secrets: &crate::secretproviders::SecretProviders,
    c: &LoadedComponent,
) {
    use crate::secretproviders::SecretError;
    let ctx = std::sync::Arc::new(crate::runtime::TaskContext {
        workload: Some(crate::runtime::WorkloadIdentity {
            namespace: "default".into(),
            job_id: "check".into(),
            group: "g".into(),
            task: "one".into(),
        }),
        ..Default::default()
    });
    let config = Default::default();
    let fetch = secrets.fetch(
        &c.name,
        "check",
        "nomad/jobs/check/nothing-here",
        &config,
        ctx,
    );
    match r.timed("fetch", fetch).await {
        Ok(items) => r.pass(
            "fetch (nothing there)",
            format!("answered {} items", items.len()),
        ),
        Err(e @ SecretError::Component { .. }) => r.fail("fetch (nothing there)", e.to_string()),
        Err(e) => r.pass("fetch (nothing there)", format!("answered: {e}")),
    }
}

async fn check_check(
    r: &mut Report,
    checks: &crate::checkcomponents::CheckComponents,
    c: &LoadedComponent,
) {
    use crate::checkcomponents::{CheckCallError, CheckTarget};
    let target = |address: &str, port: u16| CheckTarget {
        address: address.into(),
        port,
        service_name: "check".into(),
        check_name: "check".into(),
        alloc_id: "check".into(),
        task_name: "one".into(),
    };
    let config = json!({ "Name": "check", "Type": c.name }).to_string();
    let timeout = Duration::from_secs(5);
    // A port nothing listens on: bound and closed again.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(9);
    match r
        .timed(
            "probe",
            checks.probe(&c.name, &target("127.0.0.1", closed), &config, timeout),
        )
        .await
    {
        Err(e @ (CheckCallError::Component { .. } | CheckCallError::Timeout { .. })) => {
            r.fail("probe (nothing listening)", e.to_string())
        }
        Ok(a) => r.pass(
            "probe (nothing listening)",
            format!("answered {:?}: {}", a.status, a.output),
        ),
        Err(e) => r.pass("probe (nothing listening)", format!("answered: {e}")),
    }
    match pong_listener().await {
        Err(e) => r.warn("probe (listening)", format!("no loopback listener: {e}")),
        Ok((port, taken)) => {
            let answer = r
                .timed(
                    "probe",
                    checks.probe(&c.name, &target("127.0.0.1", port), &config, timeout),
                )
                .await;
            // The listener counts a connection on its own task: give it a moment to.
            let mut connected = false;
            for _ in 0..100 {
                connected = taken.load(std::sync::atomic::Ordering::SeqCst) > 0;
                if connected || answer.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            match answer {
                Err(e @ CheckCallError::Denied { .. }) => r.warn(
                    "probe (listening)",
                    format!("{e} (give --network 127.0.0.1:* to let it reach the test listener)"),
                ),
                Err(e @ (CheckCallError::Component { .. } | CheckCallError::Timeout { .. })) => {
                    r.fail("probe (listening)", e.to_string())
                }
                Ok(a) if connected => r.pass(
                    "probe (listening)",
                    format!("connected, answered {:?}: {}", a.status, a.output),
                ),
                Ok(a) => r.warn(
                    "probe (listening)",
                    format!("answered {:?} without connecting to the target", a.status),
                ),
                Err(e) => r.warn("probe (listening)", format!("connected: {connected}; {e}")),
            }
        }
    }
    // TEST-NET-1: never in a grant a check run gives, so the host must refuse it.
    match r
        .timed(
            "probe",
            checks.probe(&c.name, &target("192.0.2.1", 6379), &config, timeout),
        )
        .await
    {
        Err(CheckCallError::Denied { message, .. }) => r.pass(
            "network",
            format!("a connect outside the grant is refused: {message}"),
        ),
        Err(e @ (CheckCallError::Component { .. } | CheckCallError::Timeout { .. })) => {
            r.fail("network", e.to_string())
        }
        other => r.warn(
            "network",
            format!(
                "probing an address outside the grant made no connect the host refused: {other:?}"
            ),
        ),
    }
}
