//! Bounds on what one job may ask of this node, checked before any work is done: a job
//! past one is a 400 naming the field and the bound, not a plan of two billion
//! allocations. README's "Bounds" table lists them.

use crate::jobspec::{Job, JobspecError};

/// Allocations one task group may ask for (`Count`).
pub const MAX_COUNT: u32 = 10_000;
/// Task groups in one job.
pub const MAX_GROUPS: usize = 1_000;
/// Tasks in one task group.
pub const MAX_TASKS: usize = 1_000;
/// Allocations one job may have on the node: its groups' counts together.
pub const MAX_JOB_ALLOCS: u64 = 20_000;

/// Live allocations on the node, all jobs together (`client { max_live_allocs }`).
pub const MAX_NODE_LIVE_ALLOCS: usize = 20_000;

/// Whether `job`, with every allocation it asks for live, keeps the node within `limit`
/// live allocations, the other jobs' `others_live` included. A stopped job asks for none.
pub fn check_node(job: &Job, others_live: usize, limit: usize) -> Result<(), JobspecError> {
    if job.stop || job.is_parent() {
        return Ok(());
    }
    let wanted: u64 = job.task_groups.iter().map(|g| u64::from(g.count)).sum();
    let total = others_live as u64 + wanted;
    if total > limit as u64 {
        return Err(JobspecError::new(
            "Job.TaskGroups",
            format!(
                "its {wanted} allocations with the {others_live} live on the node make {total}, over the limit of {limit} live allocations per node (client {{ max_live_allocs }})"
            ),
        ));
    }
    Ok(())
}

/// The first bound `job` is past, as the error a registration answers with.
pub fn check(job: &Job) -> Result<(), JobspecError> {
    let over = |path: String, what: String| Err(JobspecError::new(path, what));
    if job.task_groups.len() > MAX_GROUPS {
        let n = job.task_groups.len();
        return over(
            "Job.TaskGroups".into(),
            format!("{n} task groups is over the limit of {MAX_GROUPS}"),
        );
    }
    let mut total = 0u64;
    for (i, g) in job.task_groups.iter().enumerate() {
        if g.count > MAX_COUNT {
            return over(
                format!("Job.TaskGroups[{i}].Count"),
                format!(
                    "{} is over the limit of {MAX_COUNT} allocations per group",
                    g.count
                ),
            );
        }
        if g.tasks.len() > MAX_TASKS {
            return over(
                format!("Job.TaskGroups[{i}].Tasks"),
                format!(
                    "{} tasks is over the limit of {MAX_TASKS} per group",
                    g.tasks.len()
                ),
            );
        }
        total += u64::from(g.count);
    }
    if total > MAX_JOB_ALLOCS {
        return over(
            "Job.TaskGroups".into(),
            format!("{total} allocations in all is over the limit of {MAX_JOB_ALLOCS} per job"),
        );
    }
    Ok(())
}
