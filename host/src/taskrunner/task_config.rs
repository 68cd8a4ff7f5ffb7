//! The driver's task config for one invocation (Nomad's `TaskConfig`): who and where the
//! task is, its environment, resources, directories, log files, kill settings, and the
//! device nodes and mounts its reservations bring.

use super::TaskRunner;
use super::interfaces::{Invocation, TaskView};
use crate::drivermanager::types::{LogConfig, TaskConfig, TaskResources};
use crate::taskenv::TaskEnv;

impl TaskRunner {
    /// The task config of `inv`, with its built `env` and its interpolated driver `config`.
    pub(super) fn task_config(
        &self,
        view: TaskView<'_>,
        inv: &Invocation,
        env: &TaskEnv,
        config: String,
    ) -> TaskConfig {
        let task = view.task;
        let reservations = &inv.reservations;
        TaskConfig {
            id: inv.task_id.clone(),
            name: task.name.clone(),
            alloc_id: view.alloc.id.clone(),
            job_id: view.alloc.job.id.clone(),
            job_name: view.alloc.job.name.clone(),
            group_name: view.group.name.clone(),
            namespace: view.alloc.job.namespace.clone(),
            node_id: view.node.id.clone(),
            node_name: view.node.name.clone(),
            env: env.sorted_pairs(),
            device_env: reservations
                .iter()
                .flat_map(|r| r.env.iter().cloned())
                .collect(),
            user: task.user.clone(),
            resources: TaskResources {
                // What placement gave: a task's reserved cores count as their MHz.
                cpu_mhz: view
                    .alloc
                    .allocated_resources
                    .tasks
                    .get(&task.name)
                    .map_or(task.resources.cpu, |t| {
                        u32::try_from(t.cpu.cpu_shares).unwrap_or(u32::MAX)
                    }),
                memory_mb: task.resources.memory_mb,
                memory_max_mb: task.resources.memory_max_mb,
            },
            driver_config: config,
            alloc_dir: inv.dirs.alloc_dir.clone(),
            task_dir: inv.dirs.task_dir.clone(),
            stdout_path: inv.logs.stdout.display().to_string(),
            stderr_path: inv.logs.stderr.display().to_string(),
            logs: LogConfig {
                max_files: task.log_config.max_files,
                max_file_size_mb: task.log_config.max_file_size_mb,
            },
            kill_signal: self.kill_signal(),
            kill_timeout_ns: task.kill_timeout,
            mounts: reservations
                .iter()
                .flat_map(|r| r.mounts.iter().cloned())
                .collect(),
            devices: reservations
                .iter()
                .flat_map(|r| r.devices.iter().cloned())
                .collect(),
        }
    }
}
