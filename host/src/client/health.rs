//! Allocation health in a deployment, judged by the client as Nomad's
//! `client/allochealth` tracker judges it from task states: an allocation is healthy once
//! every task has run for the group's `min_healthy_time` (counted from the latest start),
//! unhealthy when a task fails or ends (a prestart task may end), when the allocation
//! fails, or when `healthy_deadline` passes first. `health_check = "manual"` leaves it to
//! an operator; with `checks` (the default) the allocation's service checks must also
//! all pass, and have passed for `min_healthy_time` (counted from the latest of the tasks'
//! start and the last check's turn to passing); `task_states` judges by tasks alone.
//!
//! Only allocations the server placed in (or moved in place into) a deployment are
//! tracked ([`Client::track_health`]); one task watches them all, woken by any change of
//! state and by the earliest time a verdict can change. Each verdict is written on the
//! allocation (`DeploymentStatus.Healthy`) and its id handed to the server
//! ([`Client::take_health`]), whose deployment watcher moves the deployment on.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::Client;
use crate::structs::{
    AllocDeploymentStatus, Allocation, ClientStatus, DesiredStatus, TaskRunState,
};

/// What the tracker makes of an allocation now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    Unhealthy,
    /// Not yet: look again by this time (ns since the epoch).
    Wait(u64),
    /// Not the tracker's: judged already, stopped, manual, or in no deployment.
    Untracked,
}

/// What an allocation's service checks say of its health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksHealth {
    /// It has no check that counts (none, or only `on_update = "ignore"` ones).
    None,
    /// Every check passes, the last since this time (ns since the epoch).
    PassingSince(u64),
    /// Some check does not pass (yet).
    NotPassing,
}

/// The verdict on `a` at `now`, by its tasks alone.
pub fn judge(a: &Allocation, now: u64) -> Verdict {
    judge_with(a, now, ChecksHealth::None)
}

/// The verdict on `a` at `now`, with what its checks say.
pub fn judge_with(a: &Allocation, now: u64, checks: ChecksHealth) -> Verdict {
    let Some(status) = a.lineage.deployment_status.as_ref() else {
        return Verdict::Untracked;
    };
    let update = a.job.group(&a.task_group).and_then(|g| g.update.as_ref());
    let Some(u) = update.filter(|u| !u.manual()) else {
        return Verdict::Untracked;
    };
    if status.healthy.is_some() || a.lineage.deployment_id.is_empty() {
        return Verdict::Untracked;
    }
    if a.desired_status != DesiredStatus::Run {
        return Verdict::Untracked;
    }
    if a.client_status == ClientStatus::Failed {
        return Verdict::Unhealthy;
    }
    let deadline = status.timestamp.saturating_add(u.healthy_deadline);
    let group = a.job.group(&a.task_group);
    let hook = |task: &str| {
        group
            .and_then(|g| g.tasks.iter().find(|t| t.name == task))
            .and_then(|t| t.lifecycle.as_ref())
            .map(|l| l.hook.as_str())
    };
    let mut latest = 0u64;
    let mut started = !a.task_states.is_empty();
    for (name, s) in &a.task_states {
        let hook = hook(name);
        if hook == Some("poststop") || (hook == Some("poststart") && s.finished_at > 0 && !s.failed)
        {
            continue;
        }
        if s.failed || (s.finished_at > 0 && hook != Some("prestart")) {
            return Verdict::Unhealthy;
        }
        if hook == Some("prestart") && s.finished_at > 0 {
            continue;
        }
        if s.state != TaskRunState::Running || s.started_at == 0 {
            started = false;
        }
        latest = latest.max(s.started_at);
    }
    if now >= deadline {
        return Verdict::Unhealthy;
    }
    if !started {
        return Verdict::Wait(deadline);
    }
    if u.health_check == "checks" {
        match checks {
            ChecksHealth::None => {}
            ChecksHealth::NotPassing => return Verdict::Wait(deadline),
            ChecksHealth::PassingSince(t) => latest = latest.max(t),
        }
    }
    let healthy_at = latest.saturating_add(u.min_healthy_time);
    if now >= healthy_at {
        Verdict::Healthy
    } else {
        Verdict::Wait(healthy_at.min(deadline))
    }
}

/// The longest the tracker sleeps without a change (a clock step is noticed by then).
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// How long the tracker lets changes gather before it judges again.
const COALESCE: Duration = Duration::from_millis(50);

impl Client {
    /// Track the health of allocations that joined a deployment.
    pub fn track_health(&self, ids: impl IntoIterator<Item = String>) {
        self.health_tracked.lock().unwrap().extend(ids);
        self.health_wake.notify_one();
    }

    /// The ids of allocations whose health was judged (by the tracker or an operator),
    /// from now on (for one reader: `None` after the first call).
    pub fn take_health(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.health_rx.lock().unwrap().take()
    }

    /// Write allocation `id`'s health in its deployment and tell the server. Returns
    /// whether the allocation is known.
    pub fn set_deployment_health(&self, id: &str, healthy: bool) -> bool {
        let now = crate::util::now_nanos();
        let index = self.changes.index() + 1;
        let known = self.update_lineage(id, |l| {
            let canary = l.deployment_status.as_ref().is_some_and(|s| s.canary);
            l.deployment_status = Some(AllocDeploymentStatus {
                healthy: Some(healthy),
                timestamp: now,
                canary,
                modify_index: index,
            });
        });
        self.health_tracked.lock().unwrap().remove(id);
        if known {
            tracing::info!(alloc = %id, healthy, "allocation health set");
            let _ = self.health_tx.send(id.to_string());
        }
        known
    }

    /// Start the tracker; allocations restored in a deployment and not yet judged are
    /// tracked again.
    pub fn spawn_health_tracker(self: &Arc<Self>) {
        let restored = self.visit_allocations(|a| {
            (judge(a, crate::util::now_nanos()) != Verdict::Untracked).then(|| a.id.clone())
        });
        self.health_tracked.lock().unwrap().extend(restored);
        let weak = Arc::downgrade(self);
        let mut changed = self.changes.subscribe();
        let tracked_more = self.health_wake.clone();
        self.work.spawn(async move {
            loop {
                let Some(client) = weak.upgrade() else { return };
                let wake = client.judge_tracked();
                let idle = client.health_tracked.lock().unwrap().is_empty();
                drop(client);
                if idle {
                    // Nothing to judge: the node's other changes do not wake the tracker
                    // (it looks now and then whether the client is gone).
                    tokio::select! {
                        _ = tracked_more.notified() => {}
                        _ = tokio::time::sleep(MAX_SLEEP) => {}
                    }
                    changed.borrow_and_update();
                    continue;
                }
                let sleep = wake
                    .map(|t| Duration::from_nanos(t.saturating_sub(crate::util::now_nanos())))
                    .unwrap_or(MAX_SLEEP)
                    .min(MAX_SLEEP);
                tokio::select! {
                    // A check's status turned (or allocations were added to track).
                    _ = tracked_more.notified() => {}
                    r = changed.changed() => {
                        if r.is_err() {
                            return;
                        }
                        // Changes come in bursts (a placement of thousands): judged
                        // once per burst, not once per change.
                        tokio::time::sleep(COALESCE).await;
                    }
                    _ = tokio::time::sleep(sleep) => {}
                }
            }
        });
    }

    /// Judge every tracked allocation; returns the earliest time one must be judged again.
    fn judge_tracked(&self) -> Option<u64> {
        let ids: BTreeSet<String> = self.health_tracked.lock().unwrap().clone();
        let now = crate::util::now_nanos();
        let mut wake: Option<u64> = None;
        for id in ids {
            let checks = self.checks.health(&id);
            let verdict = self.peek_allocation(&id, |a| judge_with(a, now, checks));
            match verdict {
                Some(Verdict::Healthy) => {
                    self.set_deployment_health(&id, true);
                }
                Some(Verdict::Unhealthy) => {
                    self.set_deployment_health(&id, false);
                }
                Some(Verdict::Wait(t)) => wake = Some(wake.map_or(t, |w| w.min(t))),
                Some(Verdict::Untracked) | None => {
                    self.health_tracked.lock().unwrap().remove(&id);
                }
            }
        }
        wake
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structs::TaskState;

    const S: u64 = 1_000_000_000;

    fn alloc(min_healthy: u64) -> Allocation {
        let mut a = crate::taskrunner::tests::allocation(
            serde_json::json!({"Name": "t", "Driver": "mock"}),
        );
        let mut job = (*a.job).clone();
        job.task_groups[0].update = Some(crate::jobspec::UpdateStrategy {
            min_healthy_time: min_healthy,
            healthy_deadline: 100 * S,
            ..Default::default()
        });
        a.job = Arc::new(job);
        a.lineage.deployment_id = "d".into();
        a.lineage.deployment_status = Some(AllocDeploymentStatus {
            timestamp: 10 * S,
            ..Default::default()
        });
        a
    }

    fn running(a: &mut Allocation, started: u64) {
        let s = TaskState {
            state: TaskRunState::Running,
            started_at: started,
            ..TaskState::default()
        };
        a.task_states.insert("t".into(), s);
    }

    #[test]
    fn healthy_after_min_healthy_time_from_the_latest_start() {
        let mut a = alloc(5 * S);
        assert_eq!(judge(&a, 11 * S), Verdict::Wait(110 * S), "not started");
        running(&mut a, 12 * S);
        assert_eq!(judge(&a, 13 * S), Verdict::Wait(17 * S));
        assert_eq!(judge(&a, 17 * S), Verdict::Healthy);
    }

    #[test]
    fn a_failed_or_finished_task_or_the_deadline_is_unhealthy() {
        let mut a = alloc(5 * S);
        running(&mut a, 12 * S);
        a.task_states.get_mut("t").unwrap().failed = true;
        assert_eq!(judge(&a, 13 * S), Verdict::Unhealthy);
        let mut b = alloc(5 * S);
        running(&mut b, 12 * S);
        b.task_states.get_mut("t").unwrap().finished_at = 13 * S;
        assert_eq!(judge(&b, 14 * S), Verdict::Unhealthy);
        let c = alloc(5 * S);
        assert_eq!(judge(&c, 110 * S), Verdict::Unhealthy, "healthy deadline");
    }

    #[test]
    fn with_checks_every_check_must_have_passed_for_min_healthy_time() {
        let mut a = alloc(5 * S);
        a.job = {
            let mut job = (*a.job).clone();
            job.task_groups[0].update.as_mut().unwrap().health_check = "checks".into();
            Arc::new(job)
        };
        running(&mut a, 12 * S);
        assert_eq!(
            judge_with(&a, 20 * S, ChecksHealth::NotPassing),
            Verdict::Wait(110 * S),
            "running long enough, a check not passing"
        );
        assert_eq!(
            judge_with(&a, 20 * S, ChecksHealth::PassingSince(18 * S)),
            Verdict::Wait(23 * S),
            "counted from the checks' turn to passing"
        );
        assert_eq!(
            judge_with(&a, 23 * S, ChecksHealth::PassingSince(18 * S)),
            Verdict::Healthy
        );
        assert_eq!(
            judge_with(&a, 110 * S, ChecksHealth::NotPassing),
            Verdict::Unhealthy,
            "never passing by the healthy deadline"
        );
        // `task_states` looks at the tasks alone.
        let mut job = (*a.job).clone();
        job.task_groups[0].update.as_mut().unwrap().health_check = "task_states".into();
        a.job = Arc::new(job);
        assert_eq!(
            judge_with(&a, 20 * S, ChecksHealth::NotPassing),
            Verdict::Healthy
        );
    }

    #[test]
    fn judged_stopped_or_manual_allocations_are_not_tracked() {
        let mut a = alloc(S);
        a.lineage.deployment_status.as_mut().unwrap().healthy = Some(true);
        assert_eq!(judge(&a, 0), Verdict::Untracked);
        let mut b = alloc(S);
        b.desired_status = DesiredStatus::Stop;
        assert_eq!(judge(&b, 0), Verdict::Untracked);
        let mut c = alloc(S);
        let mut job = (*c.job).clone();
        job.task_groups[0].update.as_mut().unwrap().health_check = "manual".into();
        c.job = Arc::new(job);
        assert_eq!(judge(&c, 0), Verdict::Untracked);
    }
}
