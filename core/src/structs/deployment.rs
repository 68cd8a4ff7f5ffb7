//! Deployments (Nomad's `Deployment`, `DeploymentState` and an allocation's
//! `DeploymentStatus`): how a new version of a service job replaces the old one's
//! allocations, group by group, and how far it got. The decisions are the server's
//! (`server/deployments.rs`, the planner); these are the records, as Nomad's API shows
//! them and the state DB keeps them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const RUNNING: &str = "running";
pub const PAUSED: &str = "paused";
pub const FAILED: &str = "failed";
pub const SUCCESSFUL: &str = "successful";
pub const CANCELLED: &str = "cancelled";

/// Nomad's status descriptions, word for word (tools match on them).
pub mod desc {
    pub const RUNNING: &str = "Deployment is running";
    pub const NEEDS_PROMOTION: &str = "Deployment is running but requires manual promotion";
    pub const AUTO_PROMOTION: &str = "Deployment is running pending automatic promotion";
    pub const PAUSED: &str = "Deployment is paused";
    pub const SUCCESSFUL: &str = "Deployment completed successfully";
    pub const STOPPED_JOB: &str = "Cancelled because job is stopped";
    pub const NEWER_JOB: &str = "Cancelled due to newer version of job";
    pub const FAILED_ALLOCATIONS: &str = "Failed due to unhealthy allocations";
    pub const PROGRESS_DEADLINE: &str = "Failed due to progress deadline";
    pub const FAILED_BY_USER: &str = "Deployment marked as failed";

    /// A failed deployment that registers an older version again.
    pub fn rollback(base: &str, version: u64) -> String {
        format!("{base} - rolling back to job version {version}")
    }

    /// A failed deployment whose stable version is the same spec: nothing to register.
    pub fn rollback_noop(base: &str, version: u64) -> String {
        format!(
            "{base} - not rolling back to stable job version {version} as current job has same specification"
        )
    }

    /// A failed deployment with `auto_revert` and no stable version.
    pub fn no_rollback_target(base: &str) -> String {
        format!("{base} - no stable job version to auto revert to")
    }
}

/// One group's progress in a deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeploymentState {
    pub auto_revert: bool,
    pub auto_promote: bool,
    /// ns.
    pub progress_deadline: u64,
    /// An allocation must turn healthy by then, or the deployment fails (0: no deadline).
    #[serde(with = "crate::util::go_time_serde")]
    pub require_progress_by: u64,
    /// The canaries were promoted.
    pub promoted: bool,
    /// The canaries placed, by allocation id.
    #[serde(deserialize_with = "null_as_empty")]
    pub placed_canaries: Vec<String>,
    pub desired_canaries: u32,
    /// Allocations the group should end with.
    pub desired_total: u32,
    pub placed_allocs: u32,
    pub healthy_allocs: u32,
    pub unhealthy_allocs: u32,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// A deployment of one version of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Deployment {
    #[serde(rename = "ID")]
    pub id: String,
    pub namespace: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    pub job_version: u64,
    pub job_modify_index: u64,
    pub job_spec_modify_index: u64,
    pub job_create_index: u64,
    pub is_multiregion: bool,
    pub task_groups: BTreeMap<String, DeploymentState>,
    pub status: String,
    pub status_description: String,
    pub eval_priority: i32,
    pub create_index: u64,
    pub modify_index: u64,
    /// ns since the epoch.
    pub create_time: u64,
    pub modify_time: u64,
}

impl Deployment {
    /// Each group's canaries are placed and healthy, or Nomad's words for the first that is
    /// not.
    pub fn canaries_healthy(&self) -> Result<(), String> {
        for (name, g) in &self.task_groups {
            if g.desired_canaries == 0 || g.promoted {
                continue;
            }
            let healthy = g.healthy_allocs.min(g.placed_canaries.len() as u32);
            if healthy < g.desired_canaries {
                return Err(format!(
                    "Task group {name:?} has {healthy}/{} healthy allocations",
                    g.desired_canaries
                ));
            }
        }
        Ok(())
    }

    /// Still rolling (running or paused).
    pub fn active(&self) -> bool {
        matches!(self.status.as_str(), RUNNING | PAUSED)
    }

    /// Canaries are placed and wait for a promotion.
    pub fn requires_promotion(&self) -> bool {
        self.status == RUNNING
            && self
                .task_groups
                .values()
                .any(|g| g.desired_canaries > 0 && !g.promoted)
    }

    /// Every group that has canaries promotes them itself.
    pub fn auto_promotes(&self) -> bool {
        self.task_groups
            .values()
            .all(|g| g.desired_canaries == 0 || g.auto_promote)
    }

    /// Every group reached its total with healthy allocations, its canaries promoted.
    pub fn complete(&self) -> bool {
        self.task_groups.values().all(|g| {
            g.healthy_allocs >= g.desired_total.max(g.desired_canaries)
                && (g.desired_canaries == 0 || g.promoted)
        })
    }

    /// Any group reverts the job when the deployment fails.
    pub fn auto_reverts(&self) -> bool {
        self.task_groups.values().any(|g| g.auto_revert)
    }

    /// The description of a running deployment: waiting for a promotion or not.
    pub fn running_description(&self) -> &'static str {
        if !self.requires_promotion() {
            desc::RUNNING
        } else if self.auto_promotes() {
            desc::AUTO_PROMOTION
        } else {
            desc::NEEDS_PROMOTION
        }
    }
}

/// An allocation's health in its deployment (Nomad's `AllocDeploymentStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocDeploymentStatus {
    /// `None` until it is judged.
    pub healthy: Option<bool>,
    /// When it was judged.
    #[serde(with = "crate::util::go_time_serde")]
    pub timestamp: u64,
    /// Placed as a canary.
    pub canary: bool,
    pub modify_index: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(total: u32, canaries: u32, healthy: u32, promoted: bool) -> DeploymentState {
        DeploymentState {
            desired_total: total,
            desired_canaries: canaries,
            healthy_allocs: healthy,
            promoted,
            ..Default::default()
        }
    }

    #[test]
    fn complete_needs_every_group_healthy_and_its_canaries_promoted() {
        let mut d = Deployment {
            status: RUNNING.into(),
            ..Default::default()
        };
        d.task_groups.insert("a".into(), group(3, 0, 3, false));
        assert!(d.complete() && !d.requires_promotion());
        d.task_groups.insert("b".into(), group(2, 1, 1, false));
        assert!(!d.complete() && d.requires_promotion());
        assert_eq!(d.running_description(), desc::NEEDS_PROMOTION);
        d.task_groups.get_mut("b").unwrap().promoted = true;
        assert!(!d.complete(), "promoted but only 1 of 2 healthy");
        d.task_groups.get_mut("b").unwrap().healthy_allocs = 2;
        assert!(d.complete());
    }

    #[test]
    fn wire_shape_is_nomads() {
        let d = Deployment {
            id: "d".into(),
            status: RUNNING.into(),
            task_groups: [("web".into(), group(1, 0, 0, false))].into(),
            ..Default::default()
        };
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["JobID"], "d".replace('d', ""));
        assert_eq!(v["TaskGroups"]["web"]["DesiredTotal"], 1);
        assert_eq!(
            v["TaskGroups"]["web"]["RequireProgressBy"],
            "0001-01-01T00:00:00Z"
        );
        let back: Deployment = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }
}
