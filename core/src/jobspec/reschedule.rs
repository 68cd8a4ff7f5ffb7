//! A group's `reschedule` block (Nomad's `ReschedulePolicy`): when a failed allocation is
//! replaced, after its local restarts are used up. The group's fields sit over the job's
//! `reschedule` block, over Nomad's default for the job's type; system and sysbatch jobs
//! are never rescheduled, as in Nomad.

use serde::{Deserialize, Serialize};

use super::{JobType, JobspecError};

const SECOND: u64 = 1_000_000_000;
/// Nomad's floor for `delay` and `max_delay`.
pub const MIN_DELAY: u64 = 5 * SECOND;
/// Nomad's floor for `interval` when attempts are limited.
pub const MIN_INTERVAL: u64 = 15 * SECOND;

/// How the delay grows from one reschedule to the next.
pub const DELAY_FUNCTIONS: &[&str] = &["constant", "exponential", "fibonacci"];

/// A reschedule policy; durations in ns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReschedulePolicy {
    /// Reschedules allowed within `interval` (unless `unlimited`).
    pub attempts: u32,
    /// The window `attempts` counts in.
    pub interval: u64,
    /// The delay before the first reschedule.
    pub delay: u64,
    /// `constant`, `exponential` or `fibonacci`.
    pub delay_function: String,
    /// The ceiling of a growing delay.
    pub max_delay: u64,
    /// Reschedule without a limit.
    pub unlimited: bool,
}

impl ReschedulePolicy {
    /// Nomad's default for a job type (`None`: that type is never rescheduled).
    pub fn default_for(t: JobType) -> Option<Self> {
        match t {
            JobType::Service => Some(Self {
                attempts: 0,
                interval: 0,
                delay: 30 * SECOND,
                delay_function: "exponential".into(),
                max_delay: 3600 * SECOND,
                unlimited: true,
            }),
            JobType::Batch => Some(Self {
                attempts: 1,
                interval: 24 * 3600 * SECOND,
                delay: 5 * SECOND,
                delay_function: "constant".into(),
                max_delay: 0,
                unlimited: false,
            }),
            JobType::System | JobType::Sysbatch => None,
        }
    }

    /// Whether it reschedules at all.
    pub fn enabled(&self) -> bool {
        self.unlimited || self.attempts > 0
    }

    /// Nomad's checks (`ReschedulePolicy.Validate`); `path` names the block.
    pub fn validate(&self, path: &str) -> Result<(), JobspecError> {
        if !self.enabled() {
            return Ok(());
        }
        let err = |field: &str, m: String| Err(JobspecError::new(format!("{path}.{field}"), m));
        if self.attempts > 0 && self.unlimited {
            return err(
                "Unlimited",
                format!(
                    "ambiguous: Attempts is {} and Unlimited is true; if Attempts > 0, Unlimited cannot also be true",
                    self.attempts
                ),
            );
        }
        if self.delay < MIN_DELAY {
            return err(
                "Delay",
                format!("cannot be less than 5s (got {})", secs(self.delay)),
            );
        }
        if !DELAY_FUNCTIONS.contains(&self.delay_function.as_str()) {
            return err(
                "DelayFunction",
                format!(
                    "invalid delay function {:?}, must be one of {DELAY_FUNCTIONS:?}",
                    self.delay_function
                ),
            );
        }
        if self.delay_function != "constant" && self.max_delay < self.delay.max(MIN_DELAY) {
            return err(
                "MaxDelay",
                format!(
                    "cannot be less than Delay ({}) nor 5s (got {})",
                    secs(self.delay),
                    secs(self.max_delay)
                ),
            );
        }
        if !self.unlimited && self.interval < MIN_INTERVAL {
            return err(
                "Interval",
                format!("cannot be less than 15s (got {})", secs(self.interval)),
            );
        }
        Ok(())
    }
}

fn secs(ns: u64) -> String {
    format!("{:?}", std::time::Duration::from_nanos(ns))
}
