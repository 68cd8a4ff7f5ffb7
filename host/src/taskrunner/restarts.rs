//! The restart tracker: Nomad's `restart` block, exactly — attempts per interval, a delay
//! with jitter in `[delay, 1.25·delay)`, and mode `fail` (give up) or `delay` (wait for the
//! interval to end, then try again). It always returns the real delay: Nomad once returned
//! 0 here and restarted tasks at once, ignoring the policy.
//!
//! The tracker is pure: the caller passes the time in, and the jitter comes from a seeded
//! generator, so every branch is tested on a controlled clock.

use std::time::{Duration, Instant};

use crate::jobspec::{JobType, RestartMode, RestartPolicy};

/// What the task runner should do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Start again after `delay`.
    Restart {
        /// How long to wait.
        delay: Duration,
        /// Why (for the "Restarting" event).
        reason: String,
    },
    /// Stop for good, as a failure.
    NotRestarting {
        /// Why (for the "Not Restarting" event).
        reason: String,
    },
    /// Stop for good: the task finished successfully and need not run again.
    Terminated { reason: String },
    /// Stop for good: the task was killed.
    Killed,
}

/// What happened to the last run.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    None,
    Exited { success: bool },
    StartError { recoverable: bool },
}

/// Tracks restarts of one task against its policy.
#[derive(Debug, Clone)]
pub struct RestartTracker {
    policy: RestartPolicy,
    restart_on_success: bool,
    interval_start: Instant,
    count: u32,
    outcome: Outcome,
    killed: bool,
    triggered: bool,
    rng: u64,
}

/// Reason used when a restart is within the policy.
pub const REASON_WITHIN_POLICY: &str = "Restart within policy";
/// Reason used when mode is delay and attempts are used up.
pub const REASON_DELAY: &str = "Exceeded allowed attempts, applying a delay";
/// Reason for an unrecoverable start error.
pub const REASON_UNRECOVERABLE: &str = "Error was unrecoverable";
/// Reason when the policy allows no restarts.
pub const REASON_NO_RESTARTS: &str = "Policy allows no restarts";

impl RestartTracker {
    /// A tracker for a task of `job_type`. Batch tasks, and prestart tasks that are not
    /// sidecars, are not restarted after a successful exit.
    pub fn new(
        policy: RestartPolicy,
        job_type: JobType,
        ephemeral: bool,
        now: Instant,
        seed: u64,
    ) -> Self {
        Self {
            policy,
            restart_on_success: !job_type.runs_to_completion() && !ephemeral,
            interval_start: now,
            count: 0,
            outcome: Outcome::None,
            killed: false,
            triggered: false,
            rng: seed | 1,
        }
    }

    /// The task exited.
    pub fn set_exit(&mut self, success: bool) {
        self.outcome = Outcome::Exited { success };
    }

    /// The task failed to start.
    pub fn set_start_error(&mut self, recoverable: bool) {
        self.outcome = Outcome::StartError { recoverable };
    }

    /// The task was killed: it must not restart.
    pub fn set_killed(&mut self) {
        self.killed = true;
    }

    /// A user or hook asked for a restart: restart at once, without counting an attempt.
    pub fn set_restart_triggered(&mut self) {
        self.triggered = true;
    }

    /// Restarts counted in the current interval.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Decide what follows the last outcome, at time `now`.
    pub fn decide(&mut self, now: Instant) -> Decision {
        let outcome = std::mem::replace(&mut self.outcome, Outcome::None);
        if self.killed {
            return Decision::Killed;
        }
        if std::mem::take(&mut self.triggered) {
            return Decision::Restart {
                delay: Duration::ZERO,
                reason: "Restart triggered".into(),
            };
        }
        if self.policy.attempts == 0 {
            if matches!(outcome, Outcome::Exited { success: true }) && !self.restart_on_success {
                return Decision::Terminated {
                    reason: "Restart unnecessary as task terminated successfully".into(),
                };
            }
            return Decision::NotRestarting {
                reason: REASON_NO_RESTARTS.into(),
            };
        }
        let interval = Duration::from_nanos(self.policy.interval);
        if now >= self.interval_start + interval {
            self.count = 0;
            self.interval_start = now;
        }
        self.count += 1;
        match outcome {
            Outcome::StartError { recoverable: false } => Decision::NotRestarting {
                reason: REASON_UNRECOVERABLE.into(),
            },
            Outcome::Exited { success: true } if !self.restart_on_success => Decision::Terminated {
                reason: "Restart unnecessary as task terminated successfully".into(),
            },
            Outcome::None => Decision::NotRestarting {
                reason: "No outcome to restart from".into(),
            },
            _ if self.count > self.policy.attempts => match self.policy.mode {
                RestartMode::Fail => Decision::NotRestarting {
                    reason: format!(
                        "Exceeded allowed attempts {} in interval {:?} and mode is \"fail\"",
                        self.policy.attempts, interval
                    ),
                },
                RestartMode::Delay => {
                    let end = self.interval_start + interval;
                    Decision::Restart {
                        delay: end.saturating_duration_since(now),
                        reason: REASON_DELAY.into(),
                    }
                }
            },
            _ => Decision::Restart {
                delay: self.jitter(),
                reason: REASON_WITHIN_POLICY.into(),
            },
        }
    }

    /// The policy's delay plus up to 25 % jitter: a value in `[delay, 1.25·delay)`.
    fn jitter(&mut self) -> Duration {
        let d = self.policy.delay.max(1);
        // xorshift64*: deterministic per seed, good enough for spreading restarts.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let extra = (r % d) as f64 * 0.25;
        Duration::from_nanos(d + extra as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn policy(attempts: u32, mode: RestartMode) -> RestartPolicy {
        RestartPolicy {
            attempts,
            interval: 60 * S,
            delay: 10 * S,
            mode,
            kept: Default::default(),
        }
    }

    fn is_jittered(d: &Decision) -> bool {
        matches!(d, Decision::Restart { delay, reason } if *delay >= Duration::from_secs(10) && *delay < Duration::from_millis(12_500) && reason == REASON_WITHIN_POLICY)
    }

    #[test]
    fn decision_table() {
        let t0 = Instant::now();
        struct Case {
            name: &'static str,
            policy: RestartPolicy,
            job: JobType,
            ephemeral: bool,
            prior_restarts: u32,
            at: Duration,
            outcome: fn(&mut RestartTracker),
            check: fn(&Decision) -> bool,
        }
        let cases = [
            Case {
                name: "failure within policy: jittered delay",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(false),
                check: is_jittered,
            },
            Case {
                name: "recoverable start error within policy",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 1,
                at: Duration::ZERO,
                outcome: |t| t.set_start_error(true),
                check: is_jittered,
            },
            Case {
                name: "unrecoverable start error never restarts",
                policy: policy(5, RestartMode::Delay),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_start_error(false),
                check: |d| matches!(d, Decision::NotRestarting { reason } if reason == REASON_UNRECOVERABLE),
            },
            Case {
                name: "attempts used up, mode fail",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 2,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(false),
                check: |d| matches!(d, Decision::NotRestarting { reason } if reason.contains("Exceeded allowed attempts 2")),
            },
            Case {
                name: "attempts used up, mode delay: wait for the interval's end",
                policy: policy(2, RestartMode::Delay),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 2,
                at: Duration::from_secs(20),
                outcome: |t| t.set_exit(false),
                check: |d| {
                    *d == Decision::Restart {
                        delay: Duration::from_secs(40),
                        reason: REASON_DELAY.into(),
                    }
                },
            },
            Case {
                name: "a new interval resets the count",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 2,
                at: Duration::from_secs(61),
                outcome: |t| t.set_exit(false),
                check: is_jittered,
            },
            Case {
                name: "batch success terminates",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Batch,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(true),
                check: |d| matches!(d, Decision::Terminated { .. }),
            },
            Case {
                name: "service success restarts",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(true),
                check: is_jittered,
            },
            Case {
                name: "ephemeral prestart success terminates",
                policy: policy(2, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: true,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(true),
                check: |d| matches!(d, Decision::Terminated { .. }),
            },
            Case {
                name: "zero attempts: failure does not restart",
                policy: policy(0, RestartMode::Delay),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(false),
                check: |d| matches!(d, Decision::NotRestarting { reason } if reason == REASON_NO_RESTARTS),
            },
            Case {
                name: "zero attempts: batch success terminates",
                policy: policy(0, RestartMode::Fail),
                job: JobType::Batch,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| t.set_exit(true),
                check: |d| matches!(d, Decision::Terminated { .. }),
            },
            Case {
                name: "killed never restarts",
                policy: policy(2, RestartMode::Delay),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 0,
                at: Duration::ZERO,
                outcome: |t| {
                    t.set_exit(false);
                    t.set_killed()
                },
                check: |d| *d == Decision::Killed,
            },
            Case {
                name: "a triggered restart is immediate and uncounted",
                policy: policy(1, RestartMode::Fail),
                job: JobType::Service,
                ephemeral: false,
                prior_restarts: 1,
                at: Duration::ZERO,
                outcome: |t| {
                    t.set_exit(false);
                    t.set_restart_triggered()
                },
                check: |d| matches!(d, Decision::Restart { delay, .. } if delay.is_zero()),
            },
        ];
        for c in cases {
            let mut t = RestartTracker::new(c.policy.clone(), c.job, c.ephemeral, t0, 42);
            for _ in 0..c.prior_restarts {
                t.set_exit(false);
                assert!(
                    matches!(t.decide(t0), Decision::Restart { .. }),
                    "{}: setup",
                    c.name
                );
            }
            (c.outcome)(&mut t);
            let d = t.decide(t0 + c.at);
            assert!((c.check)(&d), "{}: got {d:?}", c.name);
        }
    }

    #[test]
    fn jitter_stays_in_range_and_is_never_zero() {
        let mut t = RestartTracker::new(
            RestartPolicy {
                attempts: u32::MAX,
                interval: u64::MAX / 4,
                delay: 4 * S,
                mode: RestartMode::Fail,
                kept: Default::default(),
            },
            JobType::Service,
            false,
            Instant::now(),
            7,
        );
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            t.set_exit(false);
            let Decision::Restart { delay, .. } = t.decide(Instant::now()) else {
                panic!()
            };
            assert!(
                delay >= Duration::from_secs(4) && delay < Duration::from_secs(5),
                "{delay:?}"
            );
            seen.insert(delay.as_millis());
        }
        assert!(seen.len() > 100, "jitter should spread restarts");
    }
}
