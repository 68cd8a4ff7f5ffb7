//! The `mock` task driver: Nomad's mock driver as a Paddock component. Its tasks run no
//! process: they "run" for a configured time and then exit as configured, which lets tests
//! drive the agent's task lifecycle without real workloads.
//!
//! # Task config (`config { ... }` of a task with `driver = "mock"`)
//!
//! | field | type | meaning |
//! | --- | --- | --- |
//! | `run_for` | duration | how long the task runs; default 0: it exits at once |
//! | `exit_code` | int | exit code when it exits by itself |
//! | `exit_signal` | int | signal number when it exits by itself |
//! | `exit_err_msg` | string | driver error reported with that exit (`exit-result.err`) |
//! | `start_error` | string | `start` fails with this message |
//! | `start_error_recoverable` | bool | whether that failure is recoverable |
//! | `start_block_for` | duration | `start` sleeps this long (host `timer.sleep`) first |
//! | `kill_after` | duration | after a stop, the task runs this long before it exits |
//! | `signal_error` | string | `signal` fails with this message |
//! | `driver_event` | string | `start` emits this task event (type "Driver"); Paddock's own |
//! | `stdout_string` | string | written to the task's stdout at start (host `task-logs`) |
//! | `stdout_repeat`, `stdout_repeat_duration` | int, duration | written that many more times, one per duration, while the task runs |
//! | `stdout_interpolate` | bool | `stdout_string` goes through the task's environment first (host `env.interpolate`: `${NOMAD_TASK_NAME}`, `${attr.…}`); needs the `env` grant |
//! | `stdout_devices` | bool | the task's device reservations (host `devices`) follow `stdout_string`, a line each: `env KEY=VALUE`, `mount TASK<-HOST`, `device TASK<-HOST`; needs the `devices` grant |
//! | `driver_event_repeat` | int | how many times `start` emits `driver_event` (a driver that floods), at most 10,000,000 |
//! | `handle_padding` | int | bytes of padding kept in the task's handle (a driver that keeps too much), at most 32 MiB |
//! | `misbehave` | object | see below |
//!
//! A duration is a Go duration string (`"10s"`, `"250ms"`, `"1m30s"`) or an integer of
//! nanoseconds. Fields set to `null` count as absent; any other unknown field or wrong type
//! is an `invalid-config` error naming the field, from `validate-config` and `start` alike.
//!
//! A stopped task exits `kill_after` after the stop with the stop signal's number as its
//! signal and exit code 0, or with SIGKILL (9) when the stop's timeout comes first; a task
//! whose own `run_for` ends first exits as configured.
//!
//! # Misbehaviours
//!
//! For testing how the agent copes with a broken driver, `"misbehave": {"op": OP, "kind":
//! KIND}` makes one operation misbehave instead of answering:
//!
//! - `kind`: `loop` spins forever in pure wasm, `trap` panics (a wasm trap), `oom` allocates
//!   and touches memory without bound, `hang` sleeps in the host (`timer.sleep(u64::MAX)`).
//! - In a task's config, `op` is one of `start`, `wait`, `stop`, `inspect`, `signal`, `stats`,
//!   `recover`, `destroy`; it is kept in the task's handle, so later calls misbehave too.
//! - In the plugin config (`plugin "mock" { config { misbehave { ... } } }`), `op` may also be
//!   `info`, `capabilities`, `validate_config` or `fingerprint`, and applies to every call of
//!   that op, for every task.

mod config;
mod misbehave;
mod shell;
mod task;

use config::{Op, parse_plugin_config, parse_task_config};
use misbehave::{check, check_plugin};
use paddock_driver_sdk::host::{config as plugin_config, devices, env, events, task_logs, timer};
use paddock_driver_sdk::{
    Capabilities, Driver, DriverError, ExecInput, ExecOutput, ExecPlan, ExecRequest, Fingerprint,
    PluginInfo, ResourceUsage, TaskConfig, TaskHandle, TaskState, TaskStatus, WaitStatus,
};
use task::{Progress, signal_number};

/// The mock driver.
pub struct Mock;

/// The text a task writes at start: `stdout_string`, through the task's environment with
/// `stdout_interpolate`, then its device reservations with `stdout_devices`.
fn start_output(config: &config::TaskConfig) -> Result<Option<String>, DriverError> {
    let mut text = config.stdout_string.clone();
    if let (true, Some(t)) = (config.stdout_interpolate, &text) {
        text = Some(env::interpolate(t)?);
    }
    if config.stdout_devices {
        let mut out = text.unwrap_or_default();
        for r in devices::reserved()? {
            for (k, v) in &r.env {
                out.push_str(&format!("env {k}={v}\n"));
            }
            for m in &r.mounts {
                out.push_str(&format!("mount {}<-{}\n", m.task_path, m.host_path));
            }
            for d in &r.devices {
                out.push_str(&format!("device {}<-{}\n", d.task_path, d.host_path));
            }
        }
        text = Some(out);
    }
    Ok(text)
}

/// Decodes a handle's state, then misbehaves if the task's config or the plugin config
/// names `op`.
fn load(handle: &TaskHandle, op: Op) -> Result<task::HandleState, DriverError> {
    check_plugin(op);
    let state: task::HandleState = handle.state()?;
    check(state.misbehave, op);
    Ok(state)
}

/// Write the stdout text as often as is due by `now`; returns whether anything was written.
/// Output to a task the host has no logs for (a call outside a task run) is dropped.
fn write_stdout(task_id: &str, state: &mut task::HandleState, now: u64) -> bool {
    let due = state.stdout_due(now);
    let Some(out) = state.stdout.as_mut() else {
        return false;
    };
    let mut wrote = false;
    while out.written < due {
        if let Err(e) = task_logs::stdout(task_id, &out.text) {
            paddock_driver_sdk::host::log::debug(&format!("stdout of {task_id} dropped: {e:?}"));
        }
        out.written += 1;
        wrote = true;
    }
    wrote
}

impl Driver for Mock {
    fn info() -> PluginInfo {
        check_plugin(Op::Info);
        PluginInfo::new("mock", env!("CARGO_PKG_VERSION"))
    }

    fn capabilities() -> Capabilities {
        check_plugin(Op::Capabilities);
        Capabilities {
            send_signals: true,
            exec: true,
            ..Capabilities::default()
        }
    }

    fn validate_config(config: &str) -> Result<(), DriverError> {
        check_plugin(Op::ValidateConfig);
        parse_task_config(config)
            .map(drop)
            .map_err(DriverError::InvalidConfig)
    }

    fn fingerprint() -> Fingerprint {
        check_plugin(Op::Fingerprint);
        match parse_plugin_config(&plugin_config::raw()) {
            Ok(_) => Fingerprint::healthy().with_attribute("version", env!("CARGO_PKG_VERSION")),
            Err(errors) => {
                let details: Vec<String> = errors
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect();
                Fingerprint::unhealthy(format!("invalid plugin config: {}", details.join("; ")))
            }
        }
    }

    fn start(task: TaskConfig) -> Result<TaskHandle, DriverError> {
        check_plugin(Op::Start);
        let config = parse_task_config(&task.driver_config).map_err(DriverError::InvalidConfig)?;
        check(config.misbehave, Op::Start);
        if config.start_block_for > 0 {
            timer::sleep(config.start_block_for);
        }
        if let Some(message) = config.start_error {
            return Err(if config.start_error_recoverable {
                DriverError::recoverable(message)
            } else {
                DriverError::failed(message)
            });
        }
        if let Some(message) = &config.driver_event {
            for _ in 0..config.driver_event_repeat.max(1) {
                events::emit(
                    &task.id,
                    message,
                    &[("source".to_string(), "mock".to_string())],
                );
            }
        }
        let mut config = config;
        config.stdout_string = start_output(&config)?;
        let mut state = task::HandleState::new(&config, timer::now());
        write_stdout(&task.id, &mut state, timer::now());
        TaskHandle::new(task.id, &state)
    }

    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        load(&handle, Op::Recover)?;
        Ok(handle)
    }

    fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError> {
        let mut state = load(&handle, Op::Wait)?;
        let now = timer::now();
        let wrote = write_stdout(&handle.task_id, &mut state, now);
        Ok(match state.progress(now) {
            Progress::Exited { result, .. } => WaitStatus::Exited(result),
            Progress::Running { remaining } => {
                let wake = state
                    .next_stdout_in(now)
                    .map_or(remaining, |n| n.min(remaining));
                let status = WaitStatus::after(wake);
                if wrote {
                    status.with_handle(TaskHandle::new(handle.task_id.clone(), &state)?)
                } else {
                    status
                }
            }
        })
    }

    fn stop(
        mut handle: TaskHandle,
        timeout_ns: u64,
        signal: &str,
    ) -> Result<TaskHandle, DriverError> {
        let mut state = load(&handle, Op::Stop)?;
        let number = signal_number(signal)
            .ok_or_else(|| DriverError::failed(format!("unknown signal {signal:?}")))?;
        if state.stop(timer::now(), number, timeout_ns) {
            handle.set_state(&state)?;
        }
        Ok(handle)
    }

    fn destroy(handle: TaskHandle, force: bool) -> Result<(), DriverError> {
        let state = load(&handle, Op::Destroy)?;
        match state.progress(timer::now()) {
            Progress::Running { .. } if !force => Err(DriverError::failed(format!(
                "task {} is still running: stop it first or destroy with force",
                handle.task_id
            ))),
            _ => Ok(()),
        }
    }

    fn inspect(handle: TaskHandle) -> Result<TaskStatus, DriverError> {
        let state = load(&handle, Op::Inspect)?;
        let (task_state, completed_at, exit_result) = match state.progress(timer::now()) {
            Progress::Running { .. } => (TaskState::Running, 0, None),
            Progress::Exited { at, result } => (TaskState::Exited, at, Some(result)),
        };
        Ok(TaskStatus {
            id: handle.task_id,
            state: task_state,
            started_at: state.started_at,
            completed_at,
            exit_result,
            attributes: Vec::new(),
        })
    }

    fn signal(handle: TaskHandle, signal: &str) -> Result<TaskHandle, DriverError> {
        let state = load(&handle, Op::Signal)?;
        if let Some(message) = state.signal_error {
            return Err(DriverError::failed(message));
        }
        signal_number(signal)
            .ok_or_else(|| DriverError::failed(format!("unknown signal {signal:?}")))?;
        match state.progress(timer::now()) {
            Progress::Running { .. } => Ok(handle),
            Progress::Exited { .. } => Err(DriverError::failed(format!(
                "task {} has exited",
                handle.task_id
            ))),
        }
    }

    fn stats(handle: TaskHandle) -> Result<ResourceUsage, DriverError> {
        load(&handle, Op::Stats)?;
        Ok(ResourceUsage {
            timestamp: timer::now(),
            ..ResourceUsage::default()
        })
    }

    /// An echo shell the driver answers itself (see `shell.rs`), in a running task only.
    fn exec_task(handle: TaskHandle, req: ExecRequest) -> Result<ExecPlan, DriverError> {
        let state = load(&handle, Op::Inspect)?;
        if let Progress::Exited { .. } = state.progress(timer::now()) {
            return Err(DriverError::TaskNotFound(format!(
                "task {} has exited",
                handle.task_id
            )));
        }
        shell::start(&req).map(ExecPlan::Session)
    }

    fn exec_step(
        _handle: TaskHandle,
        state: Vec<u8>,
        input: ExecInput,
    ) -> Result<ExecOutput, DriverError> {
        shell::step(&state, input)
    }
}

paddock_driver_sdk::export_driver!(Mock);

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_driver_sdk::fake::{self, FakeHost};
    use paddock_driver_sdk::{DeviceNode, Mount};

    #[test]
    fn the_start_output_reads_the_env_and_the_reservations_only_when_asked() {
        fake::install(FakeHost {
            env: [("NOMAD_TASK_NAME".to_string(), "web".to_string())].into(),
            reservations: vec![devices::Reservation {
                env: vec![("MOCK_DEVICE_IDS".into(), "mock-0".into())],
                mounts: vec![Mount {
                    task_path: "/m".into(),
                    host_path: "/srv/m".into(),
                    read_only: true,
                }],
                devices: vec![DeviceNode {
                    task_path: "/dev/m0".into(),
                    host_path: "/dev/null".into(),
                    permissions: "r".into(),
                }],
            }],
            ..FakeHost::default()
        });
        let config = |json: &str| parse_task_config(json).unwrap();
        assert_eq!(
            start_output(&config(r#"{"stdout_string": "${NOMAD_TASK_NAME}\n"}"#)).unwrap(),
            Some("${NOMAD_TASK_NAME}\n".into())
        );
        assert_eq!(
            start_output(&config(
                r#"{"stdout_string": "${NOMAD_TASK_NAME}\n", "stdout_interpolate": true,
                    "stdout_devices": true}"#
            ))
            .unwrap(),
            Some(
                "web\nenv MOCK_DEVICE_IDS=mock-0\nmount /m<-/srv/m\ndevice /dev/m0<-/dev/null\n"
                    .into()
            )
        );
        assert_eq!(start_output(&config("{}")).unwrap(), None);
    }
}
