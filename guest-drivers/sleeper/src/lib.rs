//! `sleeper`: sleeps for `seconds` (at most a day), then exits 0; a stop ends it by its
//! signal. A whole driver written with the SDK, and `agent component check` passes it.
use paddock_driver_sdk::host::timer::now;
use paddock_driver_sdk::{Driver, DriverError, PluginInfo, config};
use paddock_driver_sdk::{ResourceUsage, TaskConfig, TaskHandle, WaitStatus, signal};
use serde::{Deserialize, Serialize};

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    seconds: u64,
}

/// What the handle remembers: when the sleep ends (ns), and a signal that ended it early.
#[derive(Serialize, Deserialize)]
struct Sleep {
    end: u64,
    signal: Option<i32>,
}

fn parse(json: &str) -> Result<Config, DriverError> {
    config::parse_checked(json, |c: &Config, k| {
        k.field("seconds", c.seconds <= 86_400, "must be <= 86400");
    })
}

struct Sleeper;

impl Driver for Sleeper {
    fn info() -> PluginInfo {
        PluginInfo::new("sleeper", env!("CARGO_PKG_VERSION"))
    }
    fn validate_config(json: &str) -> Result<(), DriverError> {
        parse(json).map(drop)
    }
    fn start(task: TaskConfig) -> Result<TaskHandle, DriverError> {
        let end = now() + parse(&task.driver_config)?.seconds * 1_000_000_000;
        TaskHandle::new(task.id, &Sleep { end, signal: None })
    }
    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        handle.state::<Sleep>().map(|_| handle)
    }
    fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError> {
        let sleep: Sleep = handle.state()?;
        Ok(match (sleep.signal, sleep.end.saturating_sub(now())) {
            (Some(signal), _) => WaitStatus::killed(signal),
            (None, 0) => WaitStatus::exited(0),
            (None, left) => WaitStatus::after(left),
        })
    }
    fn stop(handle: TaskHandle, _: u64, signal: &str) -> Result<TaskHandle, DriverError> {
        let number = signal::number(signal).ok_or(DriverError::failed("not a signal"))?;
        handle.update(|s: &mut Sleep| s.signal = Some(number))
    }
    fn stats(handle: TaskHandle) -> Result<ResourceUsage, DriverError> {
        handle.state::<Sleep>().map(|_| ResourceUsage::default())
    }
}

paddock_driver_sdk::export_driver!(Sleeper);
