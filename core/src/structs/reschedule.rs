//! What an allocation carries about the allocations it replaced (Nomad's
//! `RescheduleTracker`), and when a failed one may be replaced: Nomad's `NextDelay`,
//! `NextRescheduleTime` and `RescheduleEligible`, as pure functions of the policy, the
//! tracker and the failure time.

use serde::{Deserialize, Serialize};

use crate::jobspec::ReschedulePolicy;

/// One reschedule: when, of which allocation, after what delay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RescheduleEvent {
    /// When the replacement was placed, ns since the epoch.
    pub reschedule_time: u64,
    /// The allocation it replaced.
    #[serde(rename = "PrevAllocID")]
    pub prev_alloc_id: String,
    /// The node that allocation ran on.
    #[serde(rename = "PrevNodeID")]
    pub prev_node_id: String,
    /// The delay the replacement waited, ns.
    pub delay: u64,
}

/// The reschedules that led to an allocation, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RescheduleTracker {
    pub events: Vec<RescheduleEvent>,
    /// `ok` once a replacement was placed.
    #[serde(default)]
    pub last_reschedule: String,
}

/// What the server asked of an allocation beside its desired status (Nomad's
/// `DesiredTransition`; `null` is "no").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DesiredTransition {
    /// Stop it and place a replacement (`alloc stop`, a drain).
    pub migrate: Option<bool>,
    /// Replace it as a reschedule.
    pub reschedule: Option<bool>,
    /// Replace it now, whatever its policy says.
    pub force_reschedule: Option<bool>,
    /// Stop it without its group's shutdown delay.
    pub no_shutdown_delay: Option<bool>,
}

/// An allocation's place in the chain of allocations that replaced one another, and
/// what the server asked of it: Nomad's allocation fields for rescheduling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Lineage {
    /// What the server asked of it beside its desired status.
    #[serde(default)]
    pub desired_transition: DesiredTransition,
    /// The allocation this one replaced.
    #[serde(default)]
    pub previous_allocation: String,
    /// The allocation that replaced this one.
    #[serde(default)]
    pub next_allocation: String,
    /// The reschedules that led to it.
    #[serde(default)]
    pub reschedule_tracker: Option<RescheduleTracker>,
    /// The evaluation that replaces it once its reschedule delay is over.
    #[serde(rename = "FollowupEvalID", default)]
    pub followup_eval_id: String,
    /// The deployment that placed it, or moved it to its job's version in place.
    #[serde(rename = "DeploymentID", default)]
    pub deployment_id: String,
    /// Its health in that deployment, and whether it is a canary.
    #[serde(default)]
    pub deployment_status: Option<super::deployment::AllocDeploymentStatus>,
    /// The index of the server's last change to it (placed, told to stop, its lineage
    /// changed), as against `ModifyIndex`, which the client's updates move too.
    #[serde(default)]
    pub alloc_modify_index: u64,
}

/// When a failed allocation may be replaced, or that it may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reschedule {
    /// At this time (ns since the epoch), after this delay (ns).
    At { time: u64, delay: u64 },
    /// Its attempts are used up (or the policy reschedules nothing).
    Never,
}

/// Reschedules counted against `attempts`: those within `interval` of `fail_time`.
pub fn attempted(
    policy: &ReschedulePolicy,
    tracker: Option<&RescheduleTracker>,
    fail_time: u64,
) -> u32 {
    if policy.attempts == 0 {
        return 0;
    }
    tracker.map_or(0, |t| {
        t.events
            .iter()
            .filter(|e| fail_time.saturating_sub(e.reschedule_time) < policy.interval)
            .count() as u32
    })
}

/// The delay before the next reschedule: the policy's, grown by its function from the
/// last reschedule's, capped at `max_delay` (and back to `delay` once the allocation ran
/// longer than the cap since that reschedule).
pub fn next_delay(
    policy: &ReschedulePolicy,
    tracker: Option<&RescheduleTracker>,
    fail_time: u64,
) -> u64 {
    let events = tracker.map(|t| t.events.as_slice()).unwrap_or_default();
    let Some(last) = events.last() else {
        return policy.delay;
    };
    let grown = match policy.delay_function.as_str() {
        "exponential" => last.delay.saturating_mul(2),
        "fibonacci" => match events {
            [.., before, last]
                if before.delay == policy.max_delay && last.delay == policy.delay =>
            {
                last.delay
            }
            [.., before, last] => before.delay.saturating_add(last.delay),
            _ => policy.delay,
        },
        _ => return policy.delay,
    };
    if policy.max_delay > 0 && grown > policy.max_delay {
        // It ran longer than the ceiling since it was placed: start the series again.
        if fail_time.saturating_sub(last.reschedule_time) > policy.max_delay {
            return policy.delay;
        }
        return policy.max_delay;
    }
    grown
}

/// When the allocation that failed at `fail_time` may be replaced.
pub fn next(
    policy: Option<&ReschedulePolicy>,
    tracker: Option<&RescheduleTracker>,
    fail_time: u64,
) -> Reschedule {
    let Some(policy) = policy.filter(|p| p.enabled()) else {
        return Reschedule::Never;
    };
    let delay = next_delay(policy, tracker, fail_time);
    let eligible = policy.unlimited
        || (attempted(policy, tracker, fail_time) < policy.attempts
            && (tracker.is_none_or(|t| t.events.is_empty()) || delay < policy.interval));
    if !eligible {
        return Reschedule::Never;
    }
    Reschedule::At {
        time: fail_time.saturating_add(delay),
        delay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobspec::JobType;

    const S: u64 = 1_000_000_000;

    fn tracker(delays: &[u64], times: &[u64]) -> RescheduleTracker {
        RescheduleTracker {
            events: delays
                .iter()
                .zip(times)
                .map(|(&delay, &t)| RescheduleEvent {
                    reschedule_time: t,
                    prev_alloc_id: "a".into(),
                    prev_node_id: "n".into(),
                    delay,
                })
                .collect(),
            last_reschedule: "ok".into(),
        }
    }

    #[test]
    fn a_service_doubles_its_delay_up_to_an_hour_then_starts_again_after_a_long_run() {
        let p = ReschedulePolicy::default_for(JobType::Service).unwrap();
        assert_eq!(
            next(Some(&p), None, 100 * S),
            Reschedule::At {
                time: 130 * S,
                delay: 30 * S
            }
        );
        let t = tracker(&[30 * S], &[130 * S]);
        assert_eq!(next_delay(&p, Some(&t), 140 * S), 60 * S);
        let t = tracker(&[30 * S, 60 * S, 1920 * S], &[0, 100 * S, 200 * S]);
        assert_eq!(
            next_delay(&p, Some(&t), 300 * S),
            3600 * S,
            "capped at max_delay"
        );
        assert_eq!(
            next_delay(&p, Some(&t), 200 * S + 3601 * S),
            30 * S,
            "ran longer than the cap since its last reschedule"
        );
    }

    #[test]
    fn a_batch_job_reschedules_once_a_day() {
        let p = ReschedulePolicy::default_for(JobType::Batch).unwrap();
        assert_eq!(
            next(Some(&p), None, 10 * S),
            Reschedule::At {
                time: 15 * S,
                delay: 5 * S
            }
        );
        let t = tracker(&[5 * S], &[15 * S]);
        assert_eq!(next(Some(&p), Some(&t), 20 * S), Reschedule::Never);
        // A day later the earlier attempt no longer counts.
        let later = 15 * S + 24 * 3600 * S + S;
        assert!(matches!(
            next(Some(&p), Some(&t), later),
            Reschedule::At { .. }
        ));
    }

    #[test]
    fn fibonacci_adds_the_last_two_delays_and_system_jobs_never_reschedule() {
        let mut p = ReschedulePolicy::default_for(JobType::Service).unwrap();
        p.delay_function = "fibonacci".into();
        let t = tracker(&[30 * S, 30 * S], &[0, 10 * S]);
        assert_eq!(next_delay(&p, Some(&t), 20 * S), 60 * S);
        assert_eq!(
            next(
                ReschedulePolicy::default_for(JobType::System).as_ref(),
                None,
                0
            ),
            Reschedule::Never
        );
    }
}
