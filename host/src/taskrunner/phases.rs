//! Running the hook phases over the task's hooks in order (Nomad's
//! `task_runner_hooks.go`). Prestart failures stop the start; failures in the other phases
//! are an event naming the hook, and the task goes on.

use super::interfaces::{
    ExitedRequest, HookFailure, Invocation, KillRequest, PoststartRequest, PrestartRequest,
    StopRequest, TaskView, UpdateRequest,
};
use super::{RunEnd, TaskRunner};
use crate::drivermanager::types::ExitResult;
use crate::state::HookState;
use crate::structs::{TaskEvent, TaskEventType};

impl TaskRunner {
    /// Prestart hooks in order. A persistent (WASM) hook that said it is done is skipped,
    /// but its stored env still applies; its answer is stored only when it changed, and the
    /// invocation's env builder takes the hooks' env after each one, so each sees what the
    /// ones before it set.
    pub(super) async fn prestart(
        &self,
        view: TaskView<'_>,
        inv: &mut Invocation,
    ) -> Result<(), RunEnd> {
        let emit = |ev: TaskEvent| self.event(ev);
        for hook in &self.hooks {
            let name = hook.name();
            let previous = if hook.persistent() {
                self.hook_state(name).unwrap_or_default()
            } else {
                HookState::default()
            };
            if previous.prestart_done {
                continue;
            }
            let req = PrestartRequest {
                view,
                previous: &previous,
                emit: &emit,
            };
            let resp = hook.prestart(&req, inv).await.map_err(|f| {
                RunEnd::Failed(Box::new(Self::failure(f.kind, f.message)), f.recoverable)
            })?;
            // What the secrets hook fetched: from here on, events do not show it.
            *self.secret_values.write().unwrap() = inv.env.secret_values();
            if hook.persistent() {
                self.set_hook_state(
                    name,
                    HookState {
                        prestart_done: resp.done,
                        data: resp.state,
                        env: resp.env,
                    },
                );
                inv.env.set_hook_env(self.hook_env());
            }
        }
        // The files the template hook wrote get their `perms`, `uid` and `gid` here: the
        // hook cannot set them through WASI.
        self.apply_template_modes(&view.task.templates, inv);
        Ok(())
    }

    /// Poststart hooks, after the driver started the task.
    pub(super) async fn poststart(&self, view: TaskView<'_>, inv: &Invocation) {
        for hook in &self.hooks {
            let req = PoststartRequest {
                view,
                invocation: inv,
            };
            if let Err(f) = hook.poststart(&req).await {
                self.hook_failed(hook.name(), "poststart", f);
            }
        }
    }

    /// Exited hooks, after the task exited and before any restart.
    pub(super) async fn exited(&self, view: TaskView<'_>, inv: &Invocation, exit: &ExitResult) {
        for hook in &self.hooks {
            let req = ExitedRequest {
                view,
                invocation: inv,
                exit,
            };
            if let Err(f) = hook.exited(&req).await {
                self.hook_failed(hook.name(), "exited", f);
            }
        }
    }

    /// Stop hooks, once, when the task is done for good.
    pub(super) async fn stop_phase(&self, view: TaskView<'_>) {
        let last = self.last.lock().unwrap().clone();
        for hook in &self.hooks {
            let state = self.hook_state(hook.name()).unwrap_or_default();
            let req = StopRequest {
                view,
                invocation: last.as_deref(),
                state: &state,
            };
            if let Err(f) = hook.stop(&req).await {
                self.hook_failed(hook.name(), "stop", f);
            }
        }
    }

    /// Update hooks, when the allocation was updated in place.
    pub(super) async fn update_phase(&self, view: TaskView<'_>) {
        let last = self.last.lock().unwrap().clone();
        for hook in &self.hooks {
            let req = UpdateRequest {
                view,
                invocation: last.as_deref(),
            };
            if let Err(f) = hook.update(&req).await {
                self.hook_failed(hook.name(), "update", f);
            }
        }
    }

    /// Kill hooks, before the kill signal.
    pub(super) async fn killing(&self, view: TaskView<'_>) {
        let emit = |ev: TaskEvent| self.event(ev);
        for hook in &self.hooks {
            let req = KillRequest {
                view,
                reason: "the task is being killed",
                emit: &emit,
            };
            if let Err(f) = hook.killing(&req).await {
                self.hook_failed(hook.name(), "killing", f);
            }
        }
    }

    /// A hook failed in a phase where the task goes on: an event names it.
    fn hook_failed(&self, hook: &str, phase: &str, f: HookFailure) {
        tracing::warn!(task = %self.task.name, hook, phase, error = %f.message, "task hook failed");
        self.event(TaskEvent::new(
            TaskEventType::HookFailed,
            format!("{phase} hook {hook:?} failed: {}", f.message),
        ));
    }
}
