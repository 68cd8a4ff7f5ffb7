//! Lifecycle order of an allocation's tasks, as Nomad's task lifecycle coordinator runs it:
//!
//! 1. prestart tasks (ephemeral and sidecar) start first; main tasks wait until every
//!    ephemeral prestart task has exited successfully and every prestart sidecar runs;
//! 2. main tasks start; poststart tasks start once every main task is running;
//! 3. when every main task has died — or the leader has, which kills the rest with a
//!    "Leader Task Dead" event, or the allocation is stopped — the remaining tasks are
//!    killed in order: the leader alone first, then main tasks together, then sidecars;
//! 4. poststop tasks run last, even when the allocation was stopped.
//!
//! A failed ephemeral prestart task means main tasks never start.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::AllocRunner;
use crate::jobspec::Task;
use crate::structs::{Allocation, TaskEvent, event_type, task_state};
use crate::taskrunner::TaskRunner;

/// Where a task sits in the lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Prestart,
    PrestartSidecar,
    Main,
    Poststart,
    Poststop,
}

fn kind(t: &Task) -> Kind {
    match t.lifecycle.as_ref().map(|l| (l.hook.as_str(), l.sidecar)) {
        Some(("prestart", false)) => Kind::Prestart,
        Some(("prestart", true)) => Kind::PrestartSidecar,
        Some(("poststart", _)) => Kind::Poststart,
        Some(("poststop", _)) => Kind::Poststop,
        _ => Kind::Main,
    }
}

fn state<'a>(a: &'a Allocation, task: &str) -> Option<&'a crate::structs::TaskState> {
    a.task_states.get(task)
}

fn is_dead(a: &Allocation, task: &str) -> bool {
    state(a, task).is_some_and(|s| s.state == task_state::DEAD)
}

fn is_failed(a: &Allocation, task: &str) -> bool {
    state(a, task).is_some_and(|s| s.state == task_state::DEAD && s.failed)
}

fn is_running_or_dead(a: &Allocation, task: &str) -> bool {
    state(a, task).is_some_and(|s| s.state != task_state::PENDING)
}

/// What woke the coordinator.
enum Wake<T> {
    Ready(T),
    Stopped,
}

impl AllocRunner {
    fn names(&self, k: Kind) -> Vec<String> {
        self.tasks
            .iter()
            .filter(|t| kind(t.task()) == k)
            .map(|t| t.name().to_string())
            .collect()
    }

    fn runner(&self, name: &str) -> &Arc<TaskRunner> {
        self.tasks
            .iter()
            .find(|t| t.name() == name)
            .expect("runner of a task of this alloc")
    }

    /// Wait until `check` says something about the allocation, or it is stopped.
    async fn watch<T>(&self, mut check: impl FnMut(&Allocation) -> Option<T>) -> Wake<T> {
        let mut changes = self.shared.changes.subscribe();
        loop {
            if let Some(t) = self.shared.peek(&mut check) {
                return Wake::Ready(t);
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = self.kill.cancelled() => return Wake::Stopped,
            }
        }
    }

    fn start(&self, names: &[String], running: &mut BTreeMap<String, JoinHandle<()>>) {
        for n in names {
            if !running.contains_key(n) {
                running.insert(n.clone(), tokio::spawn(self.runner(n).clone().run()));
            }
        }
    }

    /// The allocation was stopped while `names` may still run: wait the group's
    /// `shutdown_delay` first, with an event on each live task.
    async fn group_shutdown_delay(&self, names: &[String]) {
        let delay = self
            .shared
            .peek(|a| a.group().and_then(|g| g.shutdown_delay))
            .unwrap_or(0);
        if delay == 0 || !self.kill.is_cancelled() {
            return;
        }
        let live: Vec<&String> = names
            .iter()
            .filter(|n| !self.shared.peek(|a| is_dead(a, n)))
            .collect();
        if live.is_empty() {
            return;
        }
        let delay = std::time::Duration::from_nanos(delay);
        for n in live {
            let mut ev = TaskEvent::new(
                event_type::WAITING_SHUTDOWN_DELAY,
                format!(
                    "Waiting for the group's shutdown_delay of {delay:?} before killing the task."
                ),
            );
            ev.details
                .insert("shutdown_delay".into(), format!("{delay:?}"));
            self.shared.event(n, ev);
        }
        tokio::time::sleep(delay).await;
    }

    /// Kill `names` and wait for them: the leader alone first, then main tasks together,
    /// then sidecars.
    async fn kill_in_order(
        &self,
        names: &[String],
        running: &mut BTreeMap<String, JoinHandle<()>>,
    ) {
        let leader: Vec<String> = names
            .iter()
            .filter(|n| self.runner(n).task().leader)
            .cloned()
            .collect();
        let (sidecars, mains): (Vec<String>, Vec<String>) = names
            .iter()
            .filter(|n| !self.runner(n).task().leader)
            .cloned()
            .partition(|n| {
                matches!(
                    kind(self.runner(n).task()),
                    Kind::PrestartSidecar | Kind::Poststart
                )
            });
        for wave in [leader, mains, sidecars] {
            for n in &wave {
                self.runner(n).kill();
            }
            for n in &wave {
                if let Some(h) = running.remove(n) {
                    let _ = h.await;
                }
            }
        }
    }

    pub(super) async fn run_lifecycle(&self) {
        let prestart = self.names(Kind::Prestart);
        let sidecars = self.names(Kind::PrestartSidecar);
        let main = self.names(Kind::Main);
        let poststart = self.names(Kind::Poststart);
        let poststop = self.names(Kind::Poststop);
        let leader = self
            .tasks
            .iter()
            .find(|t| t.task().leader)
            .map(|t| t.name().to_string());
        let mut running: BTreeMap<String, JoinHandle<()>> = BTreeMap::new();

        // 1. Prestart.
        self.start(&prestart, &mut running);
        self.start(&sidecars, &mut running);
        let gate = self
            .watch(|a| {
                if prestart.iter().chain(&sidecars).any(|t| is_failed(a, t)) {
                    return Some(false);
                }
                let ephemeral_done = prestart.iter().all(|t| is_dead(a, t));
                let sidecars_up = sidecars.iter().all(|t| is_running_or_dead(a, t));
                (ephemeral_done && sidecars_up).then_some(true)
            })
            .await;

        // 2 and 3. Main and poststart, until the main tasks are done.
        if let Wake::Ready(true) = gate {
            self.start(&main, &mut running);
            let mut poststart_started = poststart.is_empty();
            loop {
                let event = self
                    .watch(|a| {
                        if let Some(l) = &leader
                            && is_dead(a, l)
                        {
                            return Some("leader");
                        }
                        if main.iter().all(|t| is_dead(a, t)) {
                            return Some("done");
                        }
                        if !poststart_started && main.iter().all(|t| is_running_or_dead(a, t)) {
                            return Some("running");
                        }
                        None
                    })
                    .await;
                match event {
                    Wake::Ready("running") => {
                        self.start(&poststart, &mut running);
                        poststart_started = true;
                    }
                    Wake::Ready("leader") => {
                        let others: Vec<String> = running
                            .keys()
                            .filter(|n| {
                                Some(*n) != leader.as_ref() && !self.shared.peek(|a| is_dead(a, n))
                            })
                            .cloned()
                            .collect();
                        for n in &others {
                            self.shared.event(
                                n,
                                TaskEvent::new(event_type::LEADER_DEAD, "Leader Task Dead"),
                            );
                        }
                        self.kill_in_order(&others, &mut running).await;
                        break;
                    }
                    _ => break,
                }
            }
        }

        // Everything still running but poststop tasks goes, in kill order; when the
        // allocation was stopped, after the group's shutdown_delay (Nomad's grace for
        // clients to drain, before any task is told to stop).
        let rest: Vec<String> = running.keys().cloned().collect();
        self.group_shutdown_delay(&rest).await;
        self.kill_in_order(&rest, &mut running).await;

        // Tasks that never started will not: say so.
        for t in &self.tasks {
            let name = t.name().to_string();
            if kind(t.task()) != Kind::Poststop
                && self.shared.peek(|a| !is_running_or_dead(a, &name))
            {
                let mut ev = TaskEvent::new(
                    event_type::NOT_STARTED,
                    "Task not started: the allocation stopped or a prestart task failed",
                );
                ev.fails_task = self
                    .shared
                    .peek(|a| prestart.iter().chain(&sidecars).any(|p| is_failed(a, p)));
                self.shared.event(&name, ev);
                self.shared.update_task(&name, |s| {
                    s.state = task_state::DEAD.into();
                    s.finished_at = crate::util::now_nanos();
                });
            }
        }

        // 4. Poststop.
        self.start(&poststop, &mut running);
        for (_, h) in std::mem::take(&mut running) {
            let _ = h.await;
        }
    }
}
