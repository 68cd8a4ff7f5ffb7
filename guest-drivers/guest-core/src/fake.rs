//! A fake host for a guest's unit tests. Built for every target but `wasm32` (where the
//! real host answers), it stands behind every function of [`crate::host`]: a test sets up
//! what the host would hold (plugin config, the task's env, the clock, reservations,
//! variables), calls the guest's code natively with `cargo test`, and reads what the guest
//! did (log lines, events, task output, processes spawned, signalled, stopped).
//!
//! ```ignore
//! use paddock_driver_sdk::fake::{self, FakeHost};
//!
//! fake::install(FakeHost { now_ns: 1_000, ..FakeHost::default() });
//! let handle = MyDriver::start(config).unwrap();
//! fake::with(|h| h.now_ns += 5_000_000_000); // five seconds later
//! assert!(matches!(MyDriver::wait(handle).unwrap(), WaitStatus::Exited(_)));
//! ```
//!
//! The state is per thread (each test runs on its own), so tests do not see each other's.
//! Differences from the real host: `env::interpolate` replaces `${KEY}` and `${env.KEY}`
//! from `env` only; `timer::sleep` advances the clock instead of waiting; a spawned process
//! runs until the test ends it ([`FakeHost::exit`]) or the guest stops it (`stop` ends it at
//! once by the signal given); grants are not checked.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::__bindings::paddock::plugin::artifacts::Artifact;
use crate::__bindings::paddock::plugin::devices::Reservation;
use crate::__bindings::paddock::plugin::process::{Command, Isolation, ProcessStatus};
use crate::__bindings::paddock::plugin::services::{Choice, ServiceRegistration, ServiceStub};
use crate::__bindings::paddock::plugin::task_logs::LogStream;
use crate::__bindings::paddock::plugin::variables::VariableMetadata;
use crate::{ExitResult, HostError, LogLevel, StringMap};

/// A process the guest spawned.
#[derive(Debug, Clone)]
pub struct FakeProcess {
    /// What it was asked to run.
    pub command: Command,
    /// Whether `spawn-isolated` started it.
    pub isolated: bool,
    /// Its status as `process.status` answers it.
    pub status: ProcessStatus,
    /// Signals sent to it by name, `stop`'s included.
    pub signals: Vec<String>,
    /// Released by the guest.
    pub released: bool,
}

/// What the fake host holds and what it saw.
#[derive(Debug)]
pub struct FakeHost {
    /// The plugin config block as JSON (`config.get`).
    pub config: String,
    /// The task's environment (`env`).
    pub env: BTreeMap<String, String>,
    /// The wall clock, ns since the Unix epoch (`timer.now`; `timer.sleep` advances it).
    pub now_ns: u64,
    /// The task's device reservations (`devices.reserved`).
    pub reservations: Vec<Reservation>,
    /// Variables by path (`variables.get`, `variables.list`).
    pub variables: BTreeMap<String, StringMap>,
    /// Service registrations (`services.get`, `services.list`), in create order.
    pub services: Vec<ServiceRegistration>,
    /// The task's artifacts (`artifacts.list`).
    pub artifacts: Vec<Artifact>,
    /// Modes set (`artifacts.set-mode`): path as the guest gave it, mode.
    pub modes: Vec<(String, u32)>,
    /// What `process.isolation-support` answers.
    pub isolation: Result<(), HostError>,
    /// Processes by host id.
    pub processes: BTreeMap<u64, FakeProcess>,
    /// Log lines written (`log.write`).
    pub logs: Vec<(LogLevel, String)>,
    /// Events emitted: task id, message, details (`events.emit`).
    pub events: Vec<(String, String, StringMap)>,
    /// Task output appended: task id, stream, bytes (`task-logs.append`).
    pub task_output: Vec<(String, LogStream, Vec<u8>)>,
}

impl Default for FakeHost {
    fn default() -> Self {
        Self {
            config: "{}".into(),
            env: BTreeMap::new(),
            now_ns: 0,
            reservations: Vec::new(),
            variables: BTreeMap::new(),
            services: Vec::new(),
            artifacts: Vec::new(),
            modes: Vec::new(),
            isolation: Err(HostError::Failed("no isolation in the fake host".into())),
            processes: BTreeMap::new(),
            logs: Vec::new(),
            events: Vec::new(),
            task_output: Vec::new(),
        }
    }
}

impl FakeHost {
    /// Ends process `id` with `code`, as if it exited.
    pub fn exit(&mut self, id: u64, code: i32) {
        if let Some(p) = self.processes.get_mut(&id) {
            p.status = ProcessStatus::Exited(ExitResult {
                exit_code: code,
                ..ExitResult::default()
            });
        }
    }

    /// Everything the task `task_id` wrote to `stream`, as text.
    pub fn output(&self, task_id: &str, stream: LogStream) -> String {
        self.task_output
            .iter()
            .filter(|(t, s, _)| t == task_id && *s == stream)
            .map(|(_, _, d)| String::from_utf8_lossy(d).into_owned())
            .collect()
    }
}

thread_local! {
    static HOST: RefCell<FakeHost> = RefCell::new(FakeHost::default());
}

/// Makes `host` the one this thread's host calls reach.
pub fn install(host: FakeHost) {
    HOST.with(|h| *h.borrow_mut() = host);
}

/// Reads or changes this thread's fake host.
pub fn with<R>(f: impl FnOnce(&mut FakeHost) -> R) -> R {
    HOST.with(|h| f(&mut h.borrow_mut()))
}

fn not_found(id: u64) -> HostError {
    HostError::NotFound(format!("no process {id}"))
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod log {
    pub fn write(level: crate::LogLevel, message: &str) {
        super::with(|h| h.logs.push((level, message.to_string())));
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod config {
    pub fn get() -> String {
        super::with(|h| h.config.clone())
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod env {
    use crate::{HostError, StringMap};

    pub fn all() -> Result<StringMap, HostError> {
        Ok(super::with(|h| h.env.clone().into_iter().collect()))
    }
    pub fn get(key: &str) -> Result<Option<String>, HostError> {
        Ok(super::with(|h| h.env.get(key).cloned()))
    }
    pub fn interpolate(template: &str) -> Result<String, HostError> {
        Ok(super::with(|h| {
            let mut out = template.to_string();
            for (k, v) in &h.env {
                out = out
                    .replace(&format!("${{{k}}}"), v)
                    .replace(&format!("${{env.{k}}}"), v);
            }
            out
        }))
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod devices {
    pub fn reserved() -> Result<Vec<super::Reservation>, crate::HostError> {
        Ok(super::with(|h| h.reservations.clone()))
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod timer {
    pub fn now() -> u64 {
        super::with(|h| h.now_ns)
    }
    pub fn sleep(duration_ns: u64) {
        super::with(|h| h.now_ns = h.now_ns.saturating_add(duration_ns));
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod events {
    pub fn emit(task_id: &str, message: &str, details: &[(String, String)]) {
        super::with(|h| {
            h.events
                .push((task_id.into(), message.into(), details.to_vec()))
        });
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod task_logs {
    pub fn append(
        task_id: &str,
        output: super::LogStream,
        data: &[u8],
    ) -> Result<(), crate::HostError> {
        super::with(|h| h.task_output.push((task_id.into(), output, data.to_vec())));
        Ok(())
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod variables {
    use crate::{HostError, StringMap};

    pub fn get(path: &str) -> Result<Option<StringMap>, HostError> {
        Ok(super::with(|h| h.variables.get(path).cloned()))
    }
    pub fn list(prefix: &str) -> Result<Vec<super::VariableMetadata>, HostError> {
        Ok(super::with(|h| {
            h.variables
                .keys()
                .filter(|p| p.starts_with(prefix))
                .map(|p| super::VariableMetadata {
                    namespace: "default".into(),
                    path: p.clone(),
                    create_index: 1,
                    modify_index: 1,
                    create_time: 0,
                    modify_time: 0,
                })
                .collect()
        }))
    }
}

// The same signatures as the bindings' (documented in the WIT). `choose` keeps the first
// `count`: the fake host does not hash.
#[allow(missing_docs)]
pub(crate) mod services {
    use super::{Choice, ServiceRegistration, ServiceStub};
    use crate::HostError;

    pub fn get(
        name: &str,
        tag: Option<&str>,
        choose: Option<&Choice>,
    ) -> Result<Vec<ServiceRegistration>, HostError> {
        Ok(super::with(|h| {
            let mut found: Vec<ServiceRegistration> = h
                .services
                .iter()
                .filter(|r| r.service_name == name)
                .filter(|r| tag.is_none_or(|t| r.tags.iter().any(|x| x == t)))
                .cloned()
                .collect();
            if let Some(c) = choose {
                found.truncate(c.count as usize);
            }
            found
        }))
    }
    pub fn list() -> Result<Vec<ServiceStub>, HostError> {
        Ok(super::with(|h| {
            let mut by_name: std::collections::BTreeMap<&str, ServiceStub> = Default::default();
            for r in &h.services {
                let stub = by_name
                    .entry(&r.service_name)
                    .or_insert_with(|| ServiceStub {
                        name: r.service_name.clone(),
                        namespace: r.namespace.clone(),
                        tags: Vec::new(),
                    });
                stub.tags.extend(r.tags.iter().cloned());
            }
            by_name
                .into_values()
                .map(|mut s| {
                    s.tags.sort();
                    s.tags.dedup();
                    s
                })
                .collect()
        }))
    }
}

// The same signatures as the bindings' (documented in the WIT). `set-mode` records what
// it was asked (the fake host touches no file), refusing what the host refuses by its text.
#[allow(missing_docs)]
pub(crate) mod artifacts {
    use super::Artifact;
    use crate::HostError;

    pub fn list() -> Result<Vec<Artifact>, HostError> {
        Ok(super::with(|h| h.artifacts.clone()))
    }
    pub fn set_mode(path: &str, mode: u32) -> Result<(), HostError> {
        if mode > 0o777
            || !(path.starts_with("/task/") || path.starts_with("/alloc/"))
            || path.split('/').any(|p| p == "..")
        {
            return Err(HostError::Denied(format!("set-mode {path:?} {mode:o}")));
        }
        super::with(|h| h.modes.push((path.to_string(), mode)));
        Ok(())
    }
}

// The same signatures as the bindings' (documented in the WIT).
#[allow(missing_docs)]
pub(crate) mod process {
    use super::{Command, FakeProcess, Isolation, ProcessStatus, not_found, with};
    use crate::{ExitResult, HostError, ResourceUsage};

    fn start(cmd: &Command, isolated: bool) -> Result<u64, HostError> {
        Ok(with(|h| {
            let id = h.processes.keys().next_back().map_or(1, |k| k + 1);
            h.processes.insert(
                id,
                FakeProcess {
                    command: cmd.clone(),
                    isolated,
                    status: ProcessStatus::Running,
                    signals: Vec::new(),
                    released: false,
                },
            );
            id
        }))
    }

    fn on<R>(id: u64, f: impl FnOnce(&mut FakeProcess) -> R) -> Result<R, HostError> {
        with(|h| h.processes.get_mut(&id).map(f).ok_or_else(|| not_found(id)))
    }

    pub fn spawn(cmd: &Command) -> Result<u64, HostError> {
        start(cmd, false)
    }
    pub fn spawn_isolated(cmd: &Command, _iso: &Isolation) -> Result<u64, HostError> {
        with(|h| h.isolation.clone())?;
        start(cmd, true)
    }
    pub fn isolation_support() -> Result<(), HostError> {
        with(|h| h.isolation.clone())
    }
    pub fn signal(id: u64, signal: &str) -> Result<(), HostError> {
        on(id, |p| p.signals.push(signal.to_string()))
    }
    pub fn stop(id: u64, signal: &str, _timeout_ns: u64) -> Result<(), HostError> {
        on(id, |p| {
            p.signals.push(signal.to_string());
            if matches!(p.status, ProcessStatus::Running) {
                p.status = ProcessStatus::Exited(ExitResult {
                    signal: crate::signal::number(signal).unwrap_or(9),
                    ..ExitResult::default()
                });
            }
        })
    }
    pub fn status(id: u64) -> Result<ProcessStatus, HostError> {
        on(id, |p| p.status.clone())
    }
    pub fn stats(id: u64) -> Result<ResourceUsage, HostError> {
        on(id, |_| ResourceUsage::default())
    }
    pub fn release(id: u64) -> Result<(), HostError> {
        on(id, |p| p.released = true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host;

    #[test]
    fn host_calls_reach_the_fake_and_it_records_them() {
        install(FakeHost {
            config: r#"{"a": 1}"#.into(),
            env: [("NOMAD_TASK_NAME".to_string(), "web".to_string())].into(),
            now_ns: 5,
            ..FakeHost::default()
        });
        assert_eq!(host::config::raw(), r#"{"a": 1}"#);
        assert_eq!(
            host::env::get("NOMAD_TASK_NAME").unwrap().as_deref(),
            Some("web")
        );
        assert_eq!(
            host::env::interpolate("hi ${NOMAD_TASK_NAME}").unwrap(),
            "hi web"
        );
        host::timer::sleep(10);
        assert_eq!(host::timer::now(), 15);
        host::log::info("started");
        host::events::message("t1", "hello");
        host::task_logs::stdout("t1", "line\n").unwrap();
        let cmd = Command {
            path: "/bin/true".into(),
            args: vec![],
            env: vec![],
            cwd: "/".into(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            logs: None,
            user: String::new(),
        };
        let id = host::process::spawn(&cmd).unwrap();
        assert!(matches!(
            host::process::status(id).unwrap(),
            ProcessStatus::Running
        ));
        host::process::stop(id, "SIGTERM", 0).unwrap();
        match host::process::status(id).unwrap() {
            ProcessStatus::Exited(e) => assert_eq!(e.signal, 15),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            host::process::status(99),
            Err(HostError::NotFound(_))
        ));
        with(|h| {
            assert_eq!(h.logs.len(), 1);
            assert_eq!(h.events[0].1, "hello");
            assert_eq!(h.output("t1", LogStream::Stdout), "line\n");
            assert_eq!(h.processes[&id].signals, ["SIGTERM"]);
        });
    }
}
