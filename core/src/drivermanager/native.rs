//! A driver written in the host's own Rust, served through the same [`Driver`](super::Driver)
//! path as a component (the start queue, its turn, health accounting, the host types), with
//! the sandbox taken out. The agent registers none: every driver it runs is a component.
//! It is there to measure what the sandbox adds to a task (`cargo bench -p paddock --bench
//! drivers -- mock/`) with everything else the same, and for tests that need a driver with
//! no component behind it.

use futures::future::BoxFuture;

use super::types::{
    DriverCapabilities, DriverError, DriverFingerprint, ResourceUsage, TaskConfig, TaskHandle,
    TaskStatus, WaitStatus,
};

fn unsupported<T>(op: &str) -> Result<T, DriverError> {
    Err(DriverError::NotSupported(format!(
        "{op} is not implemented by this native driver"
    )))
}

/// The driver contract in host types, as a native driver implements it. Each op has the
/// meaning the WIT contract gives it; an op left out answers `not-supported`.
pub trait NativeDriver: Send + Sync {
    fn capabilities(&self) -> BoxFuture<'_, Result<DriverCapabilities, DriverError>> {
        Box::pin(async { unsupported("capabilities") })
    }
    fn fingerprint(&self) -> BoxFuture<'_, Result<DriverFingerprint, DriverError>> {
        Box::pin(async { unsupported("fingerprint") })
    }
    fn validate_config<'a>(&'a self, _config: &'a str) -> BoxFuture<'a, Result<(), DriverError>> {
        Box::pin(async { Ok(()) })
    }
    fn start(&self, cfg: TaskConfig) -> BoxFuture<'_, Result<TaskHandle, DriverError>>;
    fn recover(&self, handle: TaskHandle) -> BoxFuture<'_, Result<TaskHandle, DriverError>> {
        Box::pin(async { Ok(handle) })
    }
    fn wait(&self, handle: TaskHandle) -> BoxFuture<'_, Result<WaitStatus, DriverError>>;
    fn stop(
        &self,
        _handle: TaskHandle,
        _timeout_ns: u64,
        _signal: String,
    ) -> BoxFuture<'_, Result<TaskHandle, DriverError>> {
        Box::pin(async { unsupported("stop") })
    }
    fn destroy(&self, handle: TaskHandle, force: bool) -> BoxFuture<'_, Result<(), DriverError>>;
    fn inspect(&self, _handle: TaskHandle) -> BoxFuture<'_, Result<TaskStatus, DriverError>> {
        Box::pin(async { unsupported("inspect") })
    }
    fn signal(
        &self,
        _handle: TaskHandle,
        _signal: String,
    ) -> BoxFuture<'_, Result<TaskHandle, DriverError>> {
        Box::pin(async { unsupported("signal") })
    }
    fn stats(&self, _handle: TaskHandle) -> BoxFuture<'_, Result<ResourceUsage, DriverError>> {
        Box::pin(async { unsupported("stats") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivermanager::types::ExitResult;
    use crate::drivermanager::{DriverCallError, DriverManager, DriverServices};
    use std::sync::Arc;

    /// Exits at once with the code in its config.
    struct Exits;

    impl NativeDriver for Exits {
        fn start(&self, cfg: TaskConfig) -> BoxFuture<'_, Result<TaskHandle, DriverError>> {
            Box::pin(async move {
                Ok(TaskHandle {
                    version: 1,
                    task_id: cfg.id,
                    driver_state: cfg.driver_config.into_bytes(),
                })
            })
        }
        fn wait(&self, h: TaskHandle) -> BoxFuture<'_, Result<WaitStatus, DriverError>> {
            Box::pin(async move {
                let code = String::from_utf8_lossy(&h.driver_state)
                    .parse()
                    .unwrap_or(-1);
                Ok(WaitStatus::Exited(ExitResult {
                    exit_code: code,
                    signal: 0,
                    oom_killed: false,
                    err: None,
                }))
            })
        }
        fn destroy(&self, _h: TaskHandle, _force: bool) -> BoxFuture<'_, Result<(), DriverError>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn config(driver_config: &str) -> TaskConfig {
        TaskConfig {
            id: "a/t/1".into(),
            driver_config: driver_config.into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_native_driver_is_served_through_the_start_queue_and_says_what_it_lacks() {
        let services = DriverServices::new();
        let rt = crate::runtime::Runtime::new(Default::default()).unwrap();
        let dm = DriverManager::new(rt, services);
        let d = dm.native_driver("exits", Arc::new(Exits));
        assert!(
            d.is_loaded(),
            "a native driver has no component and is there"
        );
        assert!(
            dm.dispense("exits").is_none(),
            "it is not a loaded component"
        );
        let h = d.start(config("7"), None).await.unwrap();
        assert_eq!(dm.start_queue().stats().started, 1, "the start took a turn");
        match d.wait(h.clone()).await.unwrap() {
            WaitStatus::Exited(r) => assert_eq!(r.exit_code, 7),
            other => panic!("{other:?}"),
        }
        match d.signal(h.clone(), "SIGHUP".into()).await {
            Err(DriverCallError::Driver(DriverError::NotSupported(m))) => {
                assert!(m.contains("signal"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        d.destroy(h, false).await.unwrap();
    }
}
