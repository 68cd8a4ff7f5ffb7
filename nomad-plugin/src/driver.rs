//! Nomad's `Driver` service over one driver component. Each call becomes the component's
//! call through Paddock's driver manager (so the start queue, deadlines, health breaker and
//! hot swap apply as in the agent); the long waits Nomad expects (`WaitTask`, the stats,
//! events and fingerprint streams) are the host's, as the contract wants.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt as _};
use paddock_core::drivermanager::DriverCallError;
use paddock_core::drivermanager::types::{DriverError, ExitResult, FsIsolation, Health};
use paddock_core::execstream::{self, Ended, Event, Incoming};
use paddock_core::runtime::types::Attribute;
use paddock_core::runtime::{TaskContext, TaskPaths};
use tonic::{Request, Response, Status, Streaming};

use crate::base::Plugin;
use crate::proto::drivers as pb;
use crate::proto::drivers::driver_server::Driver as DriverApi;
use crate::proto::structs;
use crate::status::{call_error, start_error};
use crate::tasks::{StoredHandle, Task, task_config, task_env};

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// How often the fingerprint is sent again (Nomad's drivers use 30 s).
pub const FINGERPRINT_PERIOD: Duration = Duration::from_secs(30);
/// Time a stop waits for the exit beyond the task's kill timeout.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The `Driver` service over the shared state.
pub struct DriverService(pub Arc<Plugin>);

fn timestamp(t: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(t)
}

fn exit_result(r: &ExitResult) -> pb::ExitResult {
    pb::ExitResult {
        exit_code: r.exit_code,
        signal: r.signal,
        oom_killed: r.oom_killed,
    }
}

fn attribute(a: &Attribute) -> structs::Attribute {
    use structs::attribute::Value;
    structs::Attribute {
        value: Some(match a {
            Attribute::Str(s) => Value::StringVal(s.clone()),
            Attribute::Int(i) => Value::IntVal(*i),
            Attribute::Float(f) => Value::FloatVal(*f),
            Attribute::Boolean(b) => Value::BoolVal(*b),
        }),
        unit: String::new(),
    }
}

impl DriverService {
    /// Start `command` in running task `id` through its driver component (`task-exec`).
    async fn exec_start(
        &self,
        id: &str,
        command: Vec<String>,
        tty: bool,
    ) -> Result<(execstream::Started, Arc<Task>), Status> {
        if command.is_empty() || command[0].is_empty() {
            return Err(Status::invalid_argument("command: nothing to run"));
        }
        let task = self.task(id)?;
        if task.exited().is_some() {
            return Err(Status::failed_precondition(format!("task {id} has exited")));
        }
        let host = self.0.host().await?;
        let json = crate::cty::to_json(&task.config.msgpack_driver_config)
            .map_err(|e| Status::invalid_argument(format!("driver config: {e}")))?
            .to_string();
        let cfg = task_config(&task.config, json);
        let started = host
            .driver()
            .exec_started(task.handle(), &cfg, command, tty)
            .await
            .map_err(|e| call_error(&e))?;
        Ok((started, task))
    }

    fn task(&self, id: &str) -> Result<Arc<Task>, Status> {
        self.0
            .tasks
            .get(id)
            .ok_or_else(|| Status::not_found(format!("task not found for given id: {id}")))
    }

    /// One fingerprint, as Nomad reads it: `driver.<name>` = true when healthy, the
    /// component's attributes under `driver.<name>.`, and which component serves it.
    async fn fingerprint_once(&self) -> pb::FingerprintResponse {
        let name = &self.0.name;
        let host = match self.0.host().await {
            Ok(h) => h,
            Err(e) => {
                return pb::FingerprintResponse {
                    health: pb::fingerprint_response::HealthState::Undetected as i32,
                    health_description: e.message().to_string(),
                    ..Default::default()
                };
            }
        };
        let driver = host.driver();
        let mut out = pb::FingerprintResponse::default();
        match driver.fingerprint().await {
            Ok(fp) => {
                use pb::fingerprint_response::HealthState as H;
                out.health = match fp.health {
                    Health::Undetected => H::Undetected,
                    Health::Unhealthy => H::Unhealthy,
                    Health::Healthy => H::Healthy,
                } as i32;
                out.health_description = fp.health_description;
                for (k, v) in &fp.attributes {
                    out.attributes
                        .insert(format!("driver.{name}.{k}"), attribute(v));
                }
                if fp.health == Health::Healthy {
                    out.attributes.insert(
                        format!("driver.{name}"),
                        attribute(&Attribute::Boolean(true)),
                    );
                }
            }
            Err(e) => {
                out.health = pb::fingerprint_response::HealthState::Unhealthy as i32;
                out.health_description = format!("fingerprint failed: {e}");
            }
        }
        out.attributes.insert(
            format!("driver.{name}.component"),
            attribute(&Attribute::Str(host.config.driver().into())),
        );
        if let Some(sha) = driver.current_sha256() {
            out.attributes.insert(
                format!("driver.{name}.component_sha256"),
                attribute(&Attribute::Str(sha)),
            );
        }
        out
    }

    /// Register where a task's driver events and written logs go.
    fn route_task(&self, host: &crate::host::Host, t: &pb::TaskConfig) {
        let events = self.0.events.clone();
        let (alloc_id, task_name) = (t.alloc_id.clone(), t.name.clone());
        host.drivers.register_event_handler(
            &t.alloc_id,
            &t.name,
            host.config.driver(),
            Arc::new(move |e| {
                let _ = events.send(pb::DriverTaskEvent {
                    task_id: e.task_id,
                    alloc_id: alloc_id.clone(),
                    task_name: task_name.clone(),
                    timestamp: Some(timestamp(SystemTime::now())),
                    message: e.message,
                    annotations: e.details.into_iter().collect(),
                });
            }),
        );
        host.drivers.register_task_logs(
            &t.id,
            host.config.driver(),
            t.alloc_dir.clone().into(),
            (t.stdout_path.clone().into(), t.stderr_path.clone().into()),
            &Default::default(),
        );
    }

    fn forget_task(&self, host: &crate::host::Host, t: &pb::TaskConfig) {
        host.drivers.unregister_event_handler(&t.alloc_id, &t.name);
        host.drivers.unregister_task_logs(&t.id);
    }

    fn pb_handle(&self, task: &Task, driver: &str) -> pb::TaskHandle {
        pb::TaskHandle {
            version: 1,
            config: Some(task.config.clone()),
            state: if task.exited().is_some() {
                pb::TaskState::Exited
            } else {
                pb::TaskState::Running
            } as i32,
            driver_state: StoredHandle::of(driver, &task.handle()).encode(),
        }
    }
}

#[tonic::async_trait]
impl DriverApi for DriverService {
    async fn init(
        &self,
        _: Request<pb::InitRequest>,
    ) -> Result<Response<pb::InitResponse>, Status> {
        Ok(Response::new(pb::InitResponse {}))
    }

    async fn task_config_schema(
        &self,
        _: Request<pb::TaskConfigSchemaRequest>,
    ) -> Result<Response<pb::TaskConfigSchemaResponse>, Status> {
        let host = self.0.host().await?;
        Ok(Response::new(pb::TaskConfigSchemaResponse {
            spec: Some(crate::spec::task_config(&host.config.task_fields())),
        }))
    }

    async fn capabilities(
        &self,
        _: Request<pb::CapabilitiesRequest>,
    ) -> Result<Response<pb::CapabilitiesResponse>, Status> {
        let host = self.0.host().await?;
        let caps = host
            .driver()
            .capabilities()
            .await
            .map_err(|e| call_error(&e))?;
        use pb::driver_capabilities::{FsIsolation as F, MountConfigs};
        Ok(Response::new(pb::CapabilitiesResponse {
            capabilities: Some(pb::DriverCapabilities {
                send_signals: caps.send_signals,
                exec: caps.exec,
                fs_isolation: match caps.fs_isolation {
                    FsIsolation::None => F::None,
                    FsIsolation::Chroot => F::Chroot,
                    FsIsolation::Image => F::Image,
                } as i32,
                network_isolation_modes: vec![
                    pb::network_isolation_spec::NetworkIsolationMode::Host as i32,
                ],
                must_create_network: false,
                mount_configs: MountConfigs::NoMounts as i32,
                disable_log_collection: false,
                dynamic_workload_users: false,
            }),
        }))
    }

    type FingerprintStream = BoxStream<pb::FingerprintResponse>;

    async fn fingerprint(
        &self,
        _: Request<pb::FingerprintRequest>,
    ) -> Result<Response<Self::FingerprintStream>, Status> {
        let me = DriverService(self.0.clone());
        let shutdown = self.0.shutdown.clone();
        // The first message at once (Nomad waits for it), then one every period, for as
        // long as Nomad listens: a stream that ended would be reopened at once.
        let stream = futures::stream::unfold((me, true), move |(me, first)| {
            let shutdown = shutdown.clone();
            async move {
                if !first {
                    tokio::select! {
                        _ = tokio::time::sleep(FINGERPRINT_PERIOD) => {}
                        _ = shutdown.cancelled() => return None,
                    }
                }
                let fp = me.fingerprint_once().await;
                Some((Ok(fp), (me, false)))
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn recover_task(
        &self,
        req: Request<pb::RecoverTaskRequest>,
    ) -> Result<Response<pb::RecoverTaskResponse>, Status> {
        let req = req.into_inner();
        if self.0.tasks.get(&req.task_id).is_some() {
            return Ok(Response::new(pb::RecoverTaskResponse {}));
        }
        let handle = req
            .handle
            .ok_or_else(|| Status::invalid_argument("handle: missing"))?;
        let (stored, h) =
            StoredHandle::decode(&handle.driver_state).map_err(Status::invalid_argument)?;
        let host = self.0.host().await?;
        if stored.driver != host.config.driver() {
            return Err(Status::failed_precondition(format!(
                "the task was started by driver component {:?}; this plugin runs {:?}",
                stored.driver,
                host.config.driver()
            )));
        }
        host.processes()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let driver = host.driver();
        let h = driver.recover(h).await.map_err(|e| call_error(&e))?;
        let mut config = handle.config.unwrap_or_default();
        if config.id.is_empty() {
            config.id = req.task_id.clone();
        }
        self.route_task(&host, &config);
        let task = Task::new(config, h);
        task.spawn_waiter(driver, host.drivers.clone());
        self.0.tasks.insert(task);
        tracing::info!(task_id = %req.task_id, "task recovered");
        Ok(Response::new(pb::RecoverTaskResponse {}))
    }

    async fn start_task(
        &self,
        req: Request<pb::StartTaskRequest>,
    ) -> Result<Response<pb::StartTaskResponse>, Status> {
        let t = req
            .into_inner()
            .task
            .ok_or_else(|| Status::invalid_argument("task: missing"))?;
        if self.0.tasks.get(&t.id).is_some() {
            return Err(Status::already_exists(format!(
                "task {} is already started",
                t.id
            )));
        }
        let host = self.0.host().await?;
        let json = crate::cty::to_json(&t.msgpack_driver_config)
            .map_err(|e| Status::invalid_argument(format!("driver config: {e}")))?
            .to_string();
        let driver = host.driver();
        driver
            .validate_config(&json)
            .await
            .map_err(|e| start_error(&e))?;
        host.processes().await.map_err(|e| {
            crate::status::with_recoverable(tonic::Code::FailedPrecondition, e.to_string(), true)
        })?;
        let cfg = task_config(&t, json);
        let ctx = Arc::new(TaskContext {
            env: task_env(&t),
            reservations: Vec::new(),
            files: None,
            workload: None,
            paths: Some(TaskPaths {
                alloc_root: t.alloc_dir.clone(),
                task_dir: cfg.task_dir.clone(),
                alloc_dir: cfg.alloc_dir.clone(),
                stdout: t.stdout_path.clone(),
                stderr: t.stderr_path.clone(),
                // Nomad's client made these of its own volumes and devices.
                mounts: cfg.mounts.clone(),
                devices: cfg.devices.clone(),
            }),
            // Nomad's own artifact hook fetches a task's artifacts before the driver runs.
            artifacts: Vec::new(),
        });
        self.route_task(&host, &t);
        let handle = match driver.start(cfg, Some(ctx)).await {
            Ok(h) => h,
            Err(e) => {
                self.forget_task(&host, &t);
                tracing::warn!(task_id = %t.id, error = %e, "start failed");
                return Err(start_error(&e));
            }
        };
        let task = Task::new(t, handle);
        task.spawn_waiter(driver, host.drivers.clone());
        self.0.tasks.insert(task.clone());
        tracing::info!(task_id = %task.config.id, driver = host.config.driver(), "task started");
        Ok(Response::new(pb::StartTaskResponse {
            result: pb::start_task_response::Result::Success as i32,
            driver_error_msg: String::new(),
            handle: Some(self.pb_handle(&task, host.config.driver())),
            network_override: None,
        }))
    }

    async fn wait_task(
        &self,
        req: Request<pb::WaitTaskRequest>,
    ) -> Result<Response<pb::WaitTaskResponse>, Status> {
        let task = self.task(&req.into_inner().task_id)?;
        let r = task.wait().await;
        Ok(Response::new(pb::WaitTaskResponse {
            // Always set: Nomad's client reads it without a nil check.
            result: Some(exit_result(&r)),
            err: r.err.unwrap_or_default(),
        }))
    }

    async fn stop_task(
        &self,
        req: Request<pb::StopTaskRequest>,
    ) -> Result<Response<pb::StopTaskResponse>, Status> {
        let req = req.into_inner();
        // A task that is gone or over is stopped: Nomad cannot tell "not found" apart.
        let Some(task) = self.0.tasks.get(&req.task_id) else {
            return Ok(Response::new(pb::StopTaskResponse {}));
        };
        if task.exited().is_some() {
            return Ok(Response::new(pb::StopTaskResponse {}));
        }
        let timeout = req
            .timeout
            .and_then(|d| Duration::try_from(d).ok())
            .unwrap_or(Duration::from_secs(5));
        let signal = if req.signal.is_empty() {
            "SIGTERM".to_string()
        } else {
            req.signal
        };
        let host = self.0.host().await?;
        match host
            .driver()
            .stop(task.handle(), timeout.as_nanos() as u64, signal)
            .await
        {
            Ok(h) => task.update(h),
            Err(DriverCallError::Driver(DriverError::TaskNotFound(_))) => {}
            Err(e) => return Err(call_error(&e)),
        }
        let _ = tokio::time::timeout(timeout + STOP_GRACE, task.wait()).await;
        Ok(Response::new(pb::StopTaskResponse {}))
    }

    async fn destroy_task(
        &self,
        req: Request<pb::DestroyTaskRequest>,
    ) -> Result<Response<pb::DestroyTaskResponse>, Status> {
        let req = req.into_inner();
        let Some(task) = self.0.tasks.get(&req.task_id) else {
            return Ok(Response::new(pb::DestroyTaskResponse {}));
        };
        let running = task.exited().is_none();
        if running && !req.force {
            return Err(Status::failed_precondition(
                "cannot destroy running task (stop it first, or destroy with force)",
            ));
        }
        let host = self.0.host().await?;
        let driver = host.driver();
        if running {
            if let Ok(h) = driver.stop(task.handle(), 0, "SIGKILL".into()).await {
                task.update(h);
            }
            let _ = tokio::time::timeout(STOP_GRACE, task.wait()).await;
        }
        match driver.destroy(task.handle(), req.force).await {
            Ok(()) | Err(DriverCallError::Driver(DriverError::TaskNotFound(_))) => {}
            Err(e) => return Err(call_error(&e)),
        }
        task.abort_waiter();
        self.forget_task(&host, &task.config);
        self.0.tasks.remove(&req.task_id);
        Ok(Response::new(pb::DestroyTaskResponse {}))
    }

    async fn inspect_task(
        &self,
        req: Request<pb::InspectTaskRequest>,
    ) -> Result<Response<pb::InspectTaskResponse>, Status> {
        let task = self.task(&req.into_inner().task_id)?;
        let exit = task.exited();
        // Every timestamp and the result set: Nomad's client reads them without nil checks;
        // "not completed" is the zero time, as Go drivers send it.
        let zero = prost_types::Timestamp {
            seconds: -62_135_596_800,
            nanos: 0,
        };
        let completed = task.completed_at.lock().unwrap().map(timestamp);
        Ok(Response::new(pb::InspectTaskResponse {
            task: Some(pb::TaskStatus {
                id: task.config.id.clone(),
                name: task.config.name.clone(),
                state: if exit.is_some() {
                    pb::TaskState::Exited
                } else {
                    pb::TaskState::Running
                } as i32,
                started_at: Some(timestamp(task.started_at)),
                completed_at: Some(completed.unwrap_or(zero)),
                result: Some(exit.as_ref().map(exit_result).unwrap_or_default()),
            }),
            driver: Some(pb::TaskDriverStatus::default()),
            network_override: None,
        }))
    }

    type TaskStatsStream = BoxStream<pb::TaskStatsResponse>;

    async fn task_stats(
        &self,
        req: Request<pb::TaskStatsRequest>,
    ) -> Result<Response<Self::TaskStatsStream>, Status> {
        let req = req.into_inner();
        let task = self.task(&req.task_id)?;
        let host = self.0.host().await?;
        let every = req
            .collection_interval
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_secs(1));
        let stream =
            futures::stream::unfold((task, host, true), move |(task, host, first)| async move {
                if !first {
                    tokio::time::sleep(every).await;
                }
                if task.exited().is_some() {
                    return None;
                }
                let r = match host.driver().stats(task.handle()).await {
                    Ok(u) => Ok(crate::stats::response(&task.config.id, &u)),
                    Err(e) => Err(call_error(&e)),
                };
                let end = r.is_err();
                Some((r, (task, host, end)))
            })
            .take_while(|r| futures::future::ready(r.is_ok()));
        Ok(Response::new(Box::pin(stream)))
    }

    type TaskEventsStream = BoxStream<pb::DriverTaskEvent>;

    async fn task_events(
        &self,
        _: Request<pb::TaskEventsRequest>,
    ) -> Result<Response<Self::TaskEventsStream>, Status> {
        let rx = self.0.events.subscribe();
        let stream = tokio_stream::wrappers::BroadcastStream::new(rx)
            .filter_map(|e| futures::future::ready(e.ok().map(Ok)))
            .take_until(self.0.shutdown.clone().cancelled_owned());
        Ok(Response::new(Box::pin(stream)))
    }

    async fn signal_task(
        &self,
        req: Request<pb::SignalTaskRequest>,
    ) -> Result<Response<pb::SignalTaskResponse>, Status> {
        let req = req.into_inner();
        let task = self.task(&req.task_id)?;
        if task.exited().is_some() {
            return Err(Status::failed_precondition(format!(
                "task {} has exited",
                req.task_id
            )));
        }
        let host = self.0.host().await?;
        let h = host
            .driver()
            .signal(task.handle(), req.signal)
            .await
            .map_err(|e| call_error(&e))?;
        task.update(h);
        Ok(Response::new(pb::SignalTaskResponse {}))
    }

    async fn exec_task(
        &self,
        req: Request<pb::ExecTaskRequest>,
    ) -> Result<Response<pb::ExecTaskResponse>, Status> {
        let req = req.into_inner();
        let timeout = req
            .timeout
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_secs(3600));
        let (started, _task) = self.exec_start(&req.task_id, req.command, false).await?;
        // Nomad's ExecTask has no stdin: closed at once.
        let done = tokio::time::timeout(timeout, execstream::collect(started))
            .await
            .map_err(|_| {
                Status::deadline_exceeded(format!("exec did not end within {timeout:?}"))
            })?;
        let code = match done.ended {
            Ended::Exited(code) => code,
            Ended::Failed(e) => return Err(Status::internal(e)),
            Ended::Gone => -1,
        };
        Ok(Response::new(pb::ExecTaskResponse {
            stdout: done.stdout,
            stderr: done.stderr,
            result: Some(pb::ExitResult {
                exit_code: code,
                signal: 0,
                oom_killed: false,
            }),
        }))
    }

    type ExecTaskStreamingStream = BoxStream<pb::ExecTaskStreamingResponse>;

    async fn exec_task_streaming(
        &self,
        req: Request<Streaming<pb::ExecTaskStreamingRequest>>,
    ) -> Result<Response<Self::ExecTaskStreamingStream>, Status> {
        let mut inbound = req.into_inner();
        let setup = inbound
            .message()
            .await?
            .and_then(|m| m.setup)
            .ok_or_else(|| {
                Status::invalid_argument("setup: the first message must say what to run")
            })?;
        let (started, _task) = self
            .exec_start(&setup.task_id, setup.command, setup.tty)
            .await?;
        let (in_tx, in_rx) = tokio::sync::mpsc::channel(16);
        // The caller's frames, as inputs; its stream's end is the caller going away.
        tokio::spawn(async move {
            use paddock_core::runtime::types::ExecInput;
            loop {
                let m = match inbound.message().await {
                    Ok(Some(m)) => m,
                    Ok(None) | Err(_) => {
                        let _ = in_tx.send(Incoming::Gone).await;
                        return;
                    }
                };
                let mut inputs = Vec::new();
                if let Some(s) = m.tty_size {
                    let dim = |v: i32| u16::try_from(v.max(0)).unwrap_or(u16::MAX);
                    inputs.push(ExecInput::Resize {
                        rows: dim(s.height),
                        cols: dim(s.width),
                    });
                }
                if let Some(io) = m.stdin {
                    if !io.data.is_empty() {
                        inputs.push(ExecInput::Stdin(io.data));
                    }
                    if io.close {
                        inputs.push(ExecInput::StdinClosed);
                    }
                }
                for i in inputs {
                    if in_tx.send(Incoming::Input(i)).await.is_err() {
                        return;
                    }
                }
            }
        });
        let (out_tx, mut out_rx) = tokio::sync::mpsc::channel(64);
        let (resp_tx, resp_rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            let serve = tokio::spawn(execstream::serve(started, in_rx, out_tx));
            let io =
                |data: Vec<u8>, close: bool| Some(pb::ExecTaskStreamingIoOperation { data, close });
            while let Some(e) = out_rx.recv().await {
                let mut r = pb::ExecTaskStreamingResponse::default();
                match e {
                    Event::Stdout(b) => r.stdout = io(b, false),
                    Event::Stderr(b) => r.stderr = io(b, false),
                    Event::StdoutClosed => r.stdout = io(Vec::new(), true),
                    Event::StderrClosed => r.stderr = io(Vec::new(), true),
                    Event::Exited(code) => {
                        r.exited = true;
                        r.result = Some(pb::ExitResult {
                            exit_code: code,
                            signal: 0,
                            oom_killed: false,
                        });
                    }
                }
                if resp_tx.send(Ok(r)).await.is_err() {
                    break;
                }
            }
            if let Ok(Ended::Failed(e)) = serve.await {
                let _ = resp_tx.send(Err(Status::internal(e))).await;
            }
            // Dropping the sender ends the stream: the caller's end of the session.
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(resp_rx),
        )))
    }

    async fn create_network(
        &self,
        _: Request<pb::CreateNetworkRequest>,
    ) -> Result<Response<pb::CreateNetworkResponse>, Status> {
        Err(Status::unimplemented(
            "networks are not created by paddock-nomad-driver",
        ))
    }

    async fn destroy_network(
        &self,
        _: Request<pb::DestroyNetworkRequest>,
    ) -> Result<Response<pb::DestroyNetworkResponse>, Status> {
        Err(Status::unimplemented(
            "networks are not created by paddock-nomad-driver",
        ))
    }

    async fn shutdown(
        &self,
        _: Request<pb::ShutdownRequest>,
    ) -> Result<Response<pb::ShutdownResponse>, Status> {
        Ok(Response::new(pb::ShutdownResponse {}))
    }
}
