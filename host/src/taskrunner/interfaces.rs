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

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures::future::BoxFuture;

use crate::drivermanager::Driver;
use crate::jobspec::{Task, TaskGroup};
use crate::runtime::bindings::v0_1_0::types::ExitResult;
use crate::state::HookState;
use crate::structs::{Allocation, TaskEvent, event_type};
use crate::taskenv::{NodeInfo, TaskDirs, TaskEnv};

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

/// One start of the task, built up by the prestart hooks: the task dir hook sets `dirs`,
/// the validate hook `driver`, the env hook `env`, the devices hook `reservations`, the
/// logs hook `logs`.
#[derive(Default)]
pub struct Invocation {
    /// `<alloc>/<task>/<8 hex>`, new for every start.
    pub task_id: String,
    /// The first start of this task runner (not a restart).
    pub first: bool,
    /// The task's directories.
    pub dirs: Option<TaskDirs>,
    /// The task's driver.
    pub driver: Option<Driver>,
    /// The task's environment, rebuilt whenever a hook adds env.
    pub env: Option<TaskEnv>,
    /// Where the task's stdout and stderr go.
    pub logs: Option<LogPaths>,
    /// The task's device reservations, one per assigned device group.
    pub reservations: Vec<crate::runtime::host_api::devices::Reservation>,
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
    /// Env the persistent hooks have set so far, in their first-run order.
    pub hook_env: &'a [(String, String)],
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
    pub kind: &'static str,
}

impl HookFailure {
    /// A setup failure.
    pub fn setup(message: impl Into<String>, recoverable: bool) -> Self {
        Self {
            message: message.into(),
            recoverable,
            kind: event_type::SETUP_FAILURE,
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
