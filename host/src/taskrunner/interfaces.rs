//! The task runner's hook phases, after Nomad's `interfaces/task_lifecycle.go`: every hook,
//! built-in or WASM, implements [`TaskHook`]; each phase has a request (what the hook is
//! told) and, where the hook answers with data, a response. A phase a hook does not use is
//! a no-op by default.
//!
//! | phase | when | a failure |
//! | --- | --- | --- |
//! | prestart | before every start of the task, in order | stops this start ("Setup Failure") |
//! | poststart | after the driver started the task | is logged |
//! | exited | after the task exited, before any restart | is logged |
//! | stop | once, when the task is done for good | is logged |
//! | update | when the allocation is updated in place | is logged |
//! | killing | before the task is sent its kill signal | is logged |
//!
//! The task runner talks to its allocation only through [`TaskStateHandler`] (Nomad's
//! `TaskStateHandler`), and gets everything else it needs in its [`TaskRunnerConfig`], so it
//! never knows the alloc runner.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::allocdir::AllocDir;
use crate::devicemanager::DeviceManager;
use crate::drivermanager::types::ExitResult;
use crate::drivermanager::{Driver, DriverManager};
use crate::hookmanager::HookManager;
use crate::jobspec::{Task, TaskGroup};
use crate::runtime::types::Reservation;
use crate::state::{HookState, StateDb};
use crate::structs::{Allocation, TaskEvent, TaskEventType, TaskState};
use crate::taskenv::{EnvBuilder, NodeInfo, TaskDirs};

/// What a task runner needs of the allocation it belongs to. Implemented by the alloc
/// runner, which owns the allocation record: it re-derives the allocation's status,
/// persists and publishes every change. Calls are quick and never wait on the task.
pub trait TaskStateHandler: Send + Sync {
    /// A snapshot of the allocation.
    fn allocation(&self) -> Allocation;

    /// A snapshot of the allocation without its task states, as hooks see it (an
    /// invocation holds it for the task's life; task states grow with every event).
    fn allocation_for_hooks(&self) -> Allocation {
        let mut a = self.allocation();
        a.task_states.clear();
        a
    }

    /// The type of the allocation's job.
    fn job_type(&self) -> crate::jobspec::JobType {
        self.allocation().job.job_type
    }

    /// The current state of one of its tasks.
    fn task_state(&self, task: &str) -> Option<TaskState>;

    /// Change a task's state.
    fn update_task(&self, task: &str, change: &mut dyn FnMut(&mut TaskState));

    /// Append an event to a task.
    fn event(&self, task: &str, ev: TaskEvent) {
        tracing::info!(task, event = %ev.event_type, message = %ev.message, "task event");
        let mut ev = Some(ev);
        self.update_task(task, &mut |s| {
            if let Some(ev) = ev.take() {
                s.push_event(ev);
            }
        });
    }
}

/// The plugin managers a task runner calls.
#[derive(Clone)]
pub struct Plugins {
    pub drivers: Arc<DriverManager>,
    /// Device plugins.
    pub devices: Arc<DeviceManager>,
    /// WASM hooks and the tasks they attach to.
    pub hooks: Arc<HookManager>,
    /// Secret provider components, for tasks' `secret` blocks.
    pub secrets: Arc<crate::secretproviders::SecretProviders>,
}

/// Everything a task runner is given (Nomad's task runner `Config`).
pub struct TaskRunnerConfig {
    /// The allocation's id.
    pub alloc_id: String,
    /// The task.
    pub task: Task,
    /// Where the task's state changes go.
    pub handler: Arc<dyn TaskStateHandler>,
    /// The state DB, for the task's local state (driver handle, hook state).
    pub db: Arc<dyn StateDb>,
    /// The allocation's directory tree.
    pub alloc_dir: AllocDir,
    /// The node, for the env builder (shared with the allocation's other tasks).
    pub node: Arc<NodeInfo>,
    /// Plugin managers.
    pub plugins: Plugins,
    /// Cancelled to kill the task.
    pub kill: CancellationToken,
}

/// What every phase knows about the task.
#[derive(Clone, Copy)]
pub struct TaskView<'a> {
    /// The allocation, as of this phase.
    pub alloc: &'a Allocation,
    /// The task's group.
    pub group: &'a TaskGroup,
    /// The task.
    pub task: &'a Task,
    /// The node.
    pub node: &'a NodeInfo,
}

/// One start of the task. Everything about it is known when it begins; the prestart hooks
/// act on it: `validate` checks that its driver is loaded, `task_dir` creates its
/// directories, `devices` reserves its devices and adds their env, `logs` opens its log
/// files to its driver, and persistent hooks add env.
pub struct Invocation {
    /// `<alloc>/<task>/<8 hex>`, new for every start.
    pub task_id: String,
    /// The first start of this task runner (not a restart).
    pub first: bool,
    /// The task's driver, by name (loaded or not).
    pub driver: Driver,
    /// The task's directories.
    pub dirs: TaskDirs,
    /// Where the task's stdout and stderr go.
    pub logs: LogPaths,
    /// The task's environment as the hooks build it up.
    pub env: EnvBuilder,
    /// The task's device reservations, one per assigned device group.
    pub reservations: Vec<Reservation>,
}

/// A task's log files (the driver's `stdout-path`/`stderr-path`; rotation adds `.N`).
#[derive(Debug, Clone)]
pub struct LogPaths {
    /// stdout base path.
    pub stdout: PathBuf,
    /// stderr base path.
    pub stderr: PathBuf,
}

/// Emits a task event on the task.
pub type Emit<'a> = &'a (dyn Fn(TaskEvent) + Send + Sync);

/// A prestart call.
pub struct PrestartRequest<'a> {
    /// The task.
    pub view: TaskView<'a>,
    /// What this hook stored after its last prestart (empty the first time).
    pub previous: &'a HookState,
    /// Emits a task event.
    pub emit: Emit<'a>,
}

/// A prestart hook's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrestartResponse {
    /// Env the hook sets; merged in the hooks' first-run order, the last writer wins.
    pub env: BTreeMap<String, String>,
    /// State the hook wants back on its next prestart and on stop.
    pub state: BTreeMap<String, String>,
    /// Prestart need not run again for this task (its env still applies).
    pub done: bool,
}

/// A poststart call.
pub struct PoststartRequest<'a> {
    /// The task.
    pub view: TaskView<'a>,
    /// The start that just happened.
    pub invocation: &'a Invocation,
}

/// An exited call.
pub struct ExitedRequest<'a> {
    /// The task.
    pub view: TaskView<'a>,
    /// The start that ended.
    pub invocation: &'a Invocation,
    /// How it ended.
    pub exit: &'a ExitResult,
}

/// A stop call: the task will not run again.
pub struct StopRequest<'a> {
    /// The task.
    pub view: TaskView<'a>,
    /// The last start, if the task ever got that far.
    pub invocation: Option<&'a Invocation>,
    /// What this hook stored.
    pub state: &'a HookState,
}

/// An update call: the allocation changed in place.
pub struct UpdateRequest<'a> {
    /// The task, with the updated allocation.
    pub view: TaskView<'a>,
    /// The running start, if any.
    pub invocation: Option<&'a Invocation>,
}

/// A killing call: the task is about to be sent its kill signal.
pub struct KillRequest<'a> {
    /// The task.
    pub view: TaskView<'a>,
    /// Why it is being killed.
    pub reason: &'a str,
    /// Emits a task event (e.g. "Waiting for shutdown delay").
    pub emit: Emit<'a>,
}

/// Why a hook stopped the task.
#[derive(Debug, Clone, PartialEq)]
pub struct HookFailure {
    /// Message for the event; names the hook.
    pub message: String,
    /// Whether trying again may help.
    pub recoverable: bool,
    /// The event type: "Setup Failure" unless the hook says otherwise.
    pub kind: TaskEventType,
}

impl HookFailure {
    /// A setup failure.
    pub fn setup(message: impl Into<String>, recoverable: bool) -> Self {
        Self {
            message: message.into(),
            recoverable,
            kind: TaskEventType::SetupFailure,
        }
    }
}

/// Result of a phase.
pub type HookResult<T = ()> = Result<T, HookFailure>;

/// A task-runner hook. Phases default to doing nothing.
pub trait TaskHook: Send + Sync {
    /// Name, for events and for the hook's stored state.
    fn name(&self) -> &str;

    /// Whether the runner stores this hook's prestart answer (done flag, env, state) and
    /// restores it after an agent restart.
    fn persistent(&self) -> bool {
        false
    }

    /// Before each start. May fill in the invocation.
    fn prestart<'a>(
        &'a self,
        _req: &'a PrestartRequest<'a>,
        _inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async { Ok(PrestartResponse::default()) })
    }

    /// After the driver started the task.
    fn poststart<'a>(&'a self, _req: &'a PoststartRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async { Ok(()) })
    }

    /// After the task exited.
    fn exited<'a>(&'a self, _req: &'a ExitedRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async { Ok(()) })
    }

    /// Once, when the task is done for good.
    fn stop<'a>(&'a self, _req: &'a StopRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async { Ok(()) })
    }

    /// When the allocation is updated in place.
    fn update<'a>(&'a self, _req: &'a UpdateRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async { Ok(()) })
    }

    /// Before the task is sent its kill signal.
    fn killing<'a>(&'a self, _req: &'a KillRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async { Ok(()) })
    }
}
