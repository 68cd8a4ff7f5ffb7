//! What Nomad always sends about a job, filled in where the job left it out: on a job as
//! it is registered, and on one read back from the state DB that an older agent stored
//! (so the same job registered again is the same spec).

use serde_json::Value;

use super::group::inherited_update;
use crate::jobspec::{Job, JobType, Kept};

/// The job-level keys Nomad always sends, filled in where the job left them out: its
/// node pool (`default`) and its `Update` (Nomad's `structs.Job.Update` is a value, not a
/// pointer): a service job's canonical strategy (the given fields over Nomad's default,
/// as Nomad's API canonicalizes it), another type's zero strategy unless one was given.
pub(crate) fn always_sent(job_type: JobType, kept: &mut Kept) {
    kept.entry("NodePool".to_string())
        .or_insert_with(|| Value::from("default"));
    if job_type == JobType::Service {
        if let Some(u) = inherited_update(kept.get("Update")) {
            kept.insert("Update".into(), serde_json::to_value(u).unwrap_or_default());
        }
    } else {
        kept.entry("Update".to_string()).or_insert_with(|| {
            serde_json::json!({"Stagger": 0, "MaxParallel": 0, "HealthCheck": "",
                "MinHealthyTime": 0, "HealthyDeadline": 0, "ProgressDeadline": 0,
                "AutoRevert": false, "AutoPromote": false, "Canary": 0})
        });
    }
}

impl Job {
    /// A job stored before groups carried their update strategy gets the one its
    /// registration would give it now, so that the same job registered again is the same
    /// spec (no new version, no allocation replaced by an agent upgrade).
    pub fn fill_stored_defaults(&mut self) {
        always_sent(self.job_type, &mut self.kept);
        if self.job_type != JobType::Service {
            return;
        }
        let job_migrate = self.kept.get("Migrate").cloned();
        for g in &mut self.task_groups {
            if !g.kept.contains_key("Migrate") {
                g.kept.insert(
                    "Migrate".into(),
                    super::group::canonical_migrate(job_migrate.as_ref(), None),
                );
            }
        }
        let missing = self.task_groups.iter().any(|g| g.update.is_none());
        if !missing {
            return;
        }
        let inherited = inherited_update(self.kept.get("Update"));
        for g in &mut self.task_groups {
            if g.update.is_none() {
                g.update = inherited.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_job_stored_before_groups_had_their_strategy_is_the_same_spec_once_read() {
        let src = serde_json::json!({"ID": "web", "Type": "service",
            "Update": {"Canary": 1, "MinHealthyTime": 2_000_000_000u64},
            "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]});
        let now = crate::jobspec::parse_job_json(src.to_string().as_bytes()).unwrap();
        assert_eq!(now.task_groups[0].update.as_ref().unwrap().canary, 1);
        // As an agent before this one stored it: no Update on the group.
        let mut stored = serde_json::to_value(&now).unwrap();
        stored["TaskGroups"][0]
            .as_object_mut()
            .unwrap()
            .remove("Update");
        let mut old: crate::jobspec::Job = serde_json::from_value(stored).unwrap();
        assert!(old.task_groups[0].update.is_none());
        assert!(
            !old.spec_eq(&now),
            "read as stored, it would be a new version"
        );
        old.fill_stored_defaults();
        assert!(
            old.spec_eq(&now),
            "filled in, the same job is the same spec"
        );
    }
}
