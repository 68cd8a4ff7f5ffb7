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
use crate::structs::{Allocation, TaskEvent, TaskEventType, TaskRunState};
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

/// An allocation's tasks by lifecycle kind, in their group's order, and its leader.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    prestart: Vec<String>,
    sidecars: Vec<String>,
    main: Vec<String>,
    poststart: Vec<String>,
    poststop: Vec<String>,
    leader: Option<String>,
}

impl Plan {
    fn of<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Self {
        let mut p = Plan::default();
        for t in tasks {
            let name = t.name.clone();
            if t.leader && p.leader.is_none() {
                p.leader = Some(name.clone());
            }
            match kind(t) {
                Kind::Prestart => p.prestart.push(name),
                Kind::PrestartSidecar => p.sidecars.push(name),
                Kind::Main => p.main.push(name),
                Kind::Poststart => p.poststart.push(name),
                Kind::Poststop => p.poststop.push(name),
            }
        }
        p
    }
}

/// The waves in which running `tasks` are killed: the leader alone first, then main tasks
/// together, then sidecars (prestart sidecars and poststart tasks).
fn kill_waves<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> [Vec<String>; 3] {
    let mut waves: [Vec<String>; 3] = Default::default();
    for t in tasks {
        let wave = if t.leader {
            0
        } else if matches!(kind(t), Kind::PrestartSidecar | Kind::Poststart) {
            2
        } else {
            1
        };
        waves[wave].push(t.name.clone());
    }
    waves
}

fn state<'a>(a: &'a Allocation, task: &str) -> Option<&'a crate::structs::TaskState> {
    a.task_states.get(task)
}

fn is_dead(a: &Allocation, task: &str) -> bool {
    state(a, task).is_some_and(|s| s.state == TaskRunState::Dead)
}

fn is_failed(a: &Allocation, task: &str) -> bool {
    state(a, task).is_some_and(|s| s.state == TaskRunState::Dead && s.failed)
}

fn is_running_or_dead(a: &Allocation, task: &str) -> bool {
    state(a, task).is_some_and(|s| s.state != TaskRunState::Pending)
}

/// What woke the coordinator.
enum Wake<T> {
    Ready(T),
    Stopped,
}

impl AllocRunner {
    fn runner(&self, name: &str) -> &Arc<TaskRunner> {
        self.tasks
            .iter()
            .find(|t| t.name() == name)
            .expect("runner of a task of this alloc")
    }

    /// Wait until `check` says something about the allocation, or it is stopped.
    async fn watch<T>(&self, mut check: impl FnMut(&Allocation) -> Option<T>) -> Wake<T> {
        let mut changes = self.shared.watch();
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
                TaskEventType::WaitingShutdownDelay,
                format!(
                    "Waiting for the group's shutdown_delay of {} before killing the task.",
                    crate::util::go_duration(delay)
                ),
            );
            ev.details
                .insert("shutdown_delay".into(), crate::util::go_duration(delay));
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
        let waves = kill_waves(names.iter().map(|n| self.runner(n).task()));
        for wave in waves {
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
        let Plan {
            prestart,
            sidecars,
            main,
            poststart,
            poststop,
            leader,
        } = Plan::of(self.tasks.iter().map(|t| t.task()));
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
                                TaskEvent::new(TaskEventType::LeaderDead, "Leader Task Dead"),
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
                    TaskEventType::NotStarted,
                    "Task not started: the allocation stopped or a prestart task failed",
                );
                ev.fails_task = self
                    .shared
                    .peek(|a| prestart.iter().chain(&sidecars).any(|p| is_failed(a, p)));
                self.shared.event(&name, ev);
                self.shared.update_task(&name, |s| {
                    s.state = TaskRunState::Dead;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A task: its name, its lifecycle (hook, sidecar) if any, whether it leads.
    type Spec<'a> = (&'a str, Option<(&'a str, bool)>, bool);

    fn tasks(spec: &[Spec<'_>]) -> Vec<Task> {
        let tasks: Vec<serde_json::Value> = spec
            .iter()
            .map(|(name, lifecycle, leader)| {
                serde_json::json!({
                    "Name": name,
                    "Driver": "mock",
                    "Leader": leader,
                    "Lifecycle": lifecycle.map(|(hook, sidecar)| serde_json::json!({"Hook": hook, "Sidecar": sidecar})),
                })
            })
            .collect();
        let job = serde_json::json!({"ID": "j", "TaskGroups": [{"Name": "g", "Tasks": tasks}]});
        crate::jobspec::parse_job_json(job.to_string().as_bytes())
            .unwrap()
            .task_groups[0]
            .tasks
            .clone()
    }

    #[test]
    fn tasks_are_planned_by_kind_in_group_order() {
        let t = tasks(&[
            ("init", Some(("prestart", false)), false),
            ("proxy", Some(("prestart", true)), false),
            ("web", None, true),
            ("worker", None, false),
            ("announce", Some(("poststart", false)), false),
            ("cleanup", Some(("poststop", false)), false),
        ]);
        let p = Plan::of(&t);
        assert_eq!(p.prestart, ["init"]);
        assert_eq!(p.sidecars, ["proxy"]);
        assert_eq!(p.main, ["web", "worker"]);
        assert_eq!(p.poststart, ["announce"]);
        assert_eq!(p.poststop, ["cleanup"]);
        assert_eq!(p.leader.as_deref(), Some("web"));
    }

    #[test]
    fn the_leader_dies_first_then_main_tasks_then_sidecars() {
        let t = tasks(&[
            ("proxy", Some(("prestart", true)), false),
            ("web", None, false),
            ("announce", Some(("poststart", false)), false),
            ("lead", None, true),
            ("worker", None, false),
        ]);
        let [leader, main, sidecars] = kill_waves(&t);
        assert_eq!(leader, ["lead"]);
        assert_eq!(main, ["web", "worker"]);
        assert_eq!(sidecars, ["proxy", "announce"]);
        let [leader, main, _] = kill_waves(&t[..2]);
        assert!(leader.is_empty(), "no leader among these");
        assert_eq!(main, ["web"]);
    }
}
