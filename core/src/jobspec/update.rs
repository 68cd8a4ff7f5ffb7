//! A group's `update` block (Nomad's `UpdateStrategy`): how a new version of a service
//! job replaces the allocations of the old one. The group's fields sit over the job's
//! `update` block, over Nomad's default (`api.DefaultUpdateStrategy`, which Nomad's HTTP
//! API merges into every service job it is given). `max_parallel = 0` turns deployments
//! off for the group: a new version then replaces every allocation at once.

use serde::{Deserialize, Serialize};

use super::JobspecError;

const SECOND: u64 = 1_000_000_000;

/// How allocation health is judged.
pub const HEALTH_CHECKS: &[&str] = &["checks", "task_states", "manual"];

/// An update strategy; durations in ns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UpdateStrategy {
    /// Kept for Nomad's tools (a deployment on one node staggers nothing by time).
    pub stagger: u64,
    /// Allocations replaced at once; 0: no deployment, all at once.
    pub max_parallel: u32,
    /// `checks`, `task_states` or `manual`.
    pub health_check: String,
    /// How long an allocation's tasks must run before it counts as healthy.
    pub min_healthy_time: u64,
    /// An allocation not healthy by then is unhealthy.
    pub healthy_deadline: u64,
    /// A deployment with no allocation turning healthy for this long fails (0: never).
    pub progress_deadline: u64,
    /// A failed deployment registers the job's last stable version again.
    pub auto_revert: bool,
    /// Canaries that are all healthy are promoted without an operator.
    pub auto_promote: bool,
    /// New allocations placed beside the old ones before any old one is replaced.
    pub canary: u32,
}

impl Default for UpdateStrategy {
    /// Nomad's `api.DefaultUpdateStrategy`.
    fn default() -> Self {
        Self {
            stagger: 30 * SECOND,
            max_parallel: 1,
            health_check: "checks".into(),
            min_healthy_time: 10 * SECOND,
            healthy_deadline: 300 * SECOND,
            progress_deadline: 600 * SECOND,
            auto_revert: false,
            auto_promote: false,
            canary: 0,
        }
    }
}

impl UpdateStrategy {
    /// Whether a new version of the group is rolled out as a deployment.
    pub fn deploys(&self) -> bool {
        self.max_parallel > 0
    }

    /// Health is set by an operator (`/v1/deployment/allocation-health`), not by the client.
    pub fn manual(&self) -> bool {
        self.health_check == "manual"
    }

    /// Nomad's checks (`UpdateStrategy.Validate`), the first that fails; `path` names the
    /// block.
    pub fn validate(&self, path: &str) -> Result<(), JobspecError> {
        let err = |field: &str, m: String| Err(JobspecError::new(format!("{path}.{field}"), m));
        if !HEALTH_CHECKS.contains(&self.health_check.as_str()) {
            return err(
                "HealthCheck",
                format!(
                    "Invalid health check given: {:?} (one of {HEALTH_CHECKS:?})",
                    self.health_check
                ),
            );
        }
        if self.canary == 0 && self.auto_promote {
            return err(
                "AutoPromote",
                "Auto Promote requires a Canary count greater than zero".into(),
            );
        }
        if self.healthy_deadline == 0 {
            return err(
                "HealthyDeadline",
                "Healthy deadline must be greater than zero".into(),
            );
        }
        if self.min_healthy_time >= self.healthy_deadline {
            return err(
                "MinHealthyTime",
                format!(
                    "Minimum healthy time must be less than healthy deadline: {} > {}",
                    secs(self.min_healthy_time),
                    secs(self.healthy_deadline)
                ),
            );
        }
        if self.progress_deadline != 0 && self.healthy_deadline >= self.progress_deadline {
            return err(
                "HealthyDeadline",
                format!(
                    "Healthy deadline must be less than progress deadline: {} > {}",
                    secs(self.healthy_deadline),
                    secs(self.progress_deadline)
                ),
            );
        }
        if self.stagger == 0 {
            return err("Stagger", "Stagger must be greater than zero".into());
        }
        Ok(())
    }
}

fn secs(ns: u64) -> String {
    format!("{:?}", std::time::Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nomads_default_is_valid_and_deploys() {
        let u = UpdateStrategy::default();
        u.validate("Job.Update").unwrap();
        assert!(u.deploys() && !u.manual());
        let wire = serde_json::to_value(&u).unwrap();
        assert_eq!(wire["MinHealthyTime"], 10_000_000_000u64);
        assert_eq!(wire["HealthCheck"], "checks");
    }

    #[test]
    fn nomads_checks_name_the_field() {
        let bad = |f: fn(&mut UpdateStrategy), field: &str| {
            let mut u = UpdateStrategy::default();
            f(&mut u);
            let e = u.validate("Job.TaskGroups[0].Update").unwrap_err();
            assert_eq!(e.path, format!("Job.TaskGroups[0].Update.{field}"), "{e}");
        };
        bad(|u| u.health_check = "tcp".into(), "HealthCheck");
        bad(|u| u.auto_promote = true, "AutoPromote");
        bad(
            |u| u.min_healthy_time = u.healthy_deadline,
            "MinHealthyTime",
        );
        bad(|u| u.progress_deadline = 60 * SECOND, "HealthyDeadline");
        bad(|u| u.stagger = 0, "Stagger");
        let mut ok = UpdateStrategy {
            progress_deadline: 0,
            ..Default::default()
        };
        ok.validate("u").unwrap();
        ok.max_parallel = 0;
        assert!(!ok.deploys());
    }
}
