//! Nomad-shaped records the agent stores and serves: allocations, task states and task
//! events, variables. Field names on the wire are Nomad's (PascalCase, times in ns since the epoch).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::jobspec::Job;

mod capacity;
pub mod deployment;
pub mod namespace;
pub mod reschedule;
mod resources;
pub mod service;

pub use crate::jobspec::submission::{
    JobSubmission, MAX_SOURCE_SIZE, admit_submission, human_bytes,
};
pub use capacity::{Amounts, Capacity};
pub use deployment::{AllocDeploymentStatus, Deployment, DeploymentState};
pub use namespace::{DEFAULT_NAMESPACE, Namespace};
pub use reschedule::{DesiredTransition, Lineage, RescheduleEvent, RescheduleTracker};
pub use resources::*;
pub use service::{ServiceRegistration, ServiceSpec};

/// Defines an enum whose variants serialize as the strings Nomad uses, with `as_str`.
macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $wire:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $wire)] $variant,)*
        }

        impl $name {
            /// The name on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// Compares with the wire name, as the API's JSON shows it.
        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

wire_enum!(
    /// Task event types, as Nomad names them.
    TaskEventType {
        /// The task was received by the client.
        Received = "Received",
        /// The task's directories and environment are being set up.
        TaskSetup = "Task Setup",
        /// The driver started the task.
        Started = "Started",
        /// The task exited.
        Terminated = "Terminated",
        /// The task's driver config failed validation.
        FailedValidation = "Failed Validation",
        /// The driver failed (including a trapped or hung driver component).
        DriverFailure = "Driver Failure",
        /// A setup step (hook) failed.
        SetupFailure = "Setup Failure",
        /// The task was asked to stop.
        Killing = "Killing",
        /// The task was stopped.
        Killed = "Killed",
        /// The task will not be restarted.
        NotRestarting = "Not Restarting",
        /// The task will be restarted.
        Restarting = "Restarting",
        /// An event a driver emitted.
        Driver = "Driver",
        /// The group's leader task died, so this task is being killed.
        LeaderDead = "Leader Task Dead",
        /// The task will not run: the allocation stopped or a prestart task failed first.
        NotStarted = "Task Not Started",
        /// The task waits its shutdown delay before it is killed.
        WaitingShutdownDelay = "Waiting for shutdown delay",
        /// A user asked for the task to restart.
        RestartSignaled = "Restart Signaled",
        /// A user sent the task a signal.
        Signaling = "Signaling",
        /// A task that ran before an agent restart could not be taken back.
        FailedRestoring = "Failed Restoring Task",
        /// A hook failed outside prestart (the task goes on).
        HookFailed = "Task hook failed",
        /// A hook tells something about the task (Nomad's `TaskHookMessage`).
        HookMessage = "Task hook message",
        /// The artifact hook is fetching the task's artifacts.
        DownloadingArtifacts = "Downloading Artifacts",
        /// An artifact could not be fetched, checked or unpacked (recoverable: the restart
        /// policy applies).
        ArtifactDownloadFailed = "Failed Artifact Download",
    }
);

wire_enum!(
    /// Where a task is in its life (Nomad's `TaskState.State`).
    TaskRunState {
        /// Not started yet, or waiting to restart.
        Pending = "pending",
        Running = "running",
        /// Exited for good.
        Dead = "dead",
    }
);

wire_enum!(
    /// An allocation's status as the client reports it (Nomad's `ClientStatus`).
    ClientStatus {
        /// Not yet running.
        Pending = "pending",
        /// At least one task running.
        Running = "running",
        /// All tasks finished successfully.
        Complete = "complete",
        /// A task failed.
        Failed = "failed",
        /// The client lost track of it.
        Lost = "lost",
    }
);

wire_enum!(
    /// What the scheduler wants of an allocation (Nomad's `DesiredStatus`).
    DesiredStatus {
        /// Run it.
        Run = "run",
        /// Stop it.
        Stop = "stop",
        /// Evict it.
        Evict = "evict",
    }
);

/// One task event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskEvent {
    /// Event type.
    #[serde(rename = "Type")]
    pub event_type: TaskEventType,
    /// When, ns since the epoch.
    pub time: u64,
    /// Message for people.
    pub message: String,
    /// Same as `message` (Nomad's UI field).
    pub display_message: String,
    /// Structured details.
    pub details: BTreeMap<String, String>,
    /// Whether the event fails the task.
    pub fails_task: bool,
    /// Exit code (Terminated).
    pub exit_code: i32,
    /// Signal (Terminated).
    pub signal: i32,
    /// Driver error text.
    pub driver_error: String,
    /// Validation error text.
    pub validation_error: String,
    /// Setup error text.
    pub setup_error: String,
    /// Why an artifact could not be fetched (`Failed Artifact Download`).
    #[serde(default)]
    pub download_error: String,
    /// Kill reason.
    pub kill_reason: String,
    /// Restart delay, ns (Restarting).
    pub start_delay: u64,
    /// Message a driver gave (Driver).
    pub driver_message: String,
}

impl TaskEvent {
    /// A new event of `event_type` now, with `message`.
    pub fn new(event_type: TaskEventType, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            event_type,
            time: crate::util::now_nanos(),
            display_message: message.clone(),
            message,
            details: BTreeMap::new(),
            fails_task: false,
            exit_code: 0,
            signal: 0,
            driver_error: String::new(),
            validation_error: String::new(),
            setup_error: String::new(),
            download_error: String::new(),
            kill_reason: String::new(),
            start_delay: 0,
            driver_message: String::new(),
        }
    }

    /// Add a detail.
    pub fn detail(mut self, k: &str, v: impl Into<String>) -> Self {
        self.details.insert(k.to_string(), v.into());
        self
    }
}

/// Most events kept per task (Nomad keeps 10).
pub const MAX_EVENTS: usize = 10;

/// The state of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskState {
    /// pending | running | dead.
    pub state: TaskRunState,
    /// Whether the task failed.
    pub failed: bool,
    /// Restarts so far.
    pub restarts: u64,
    /// Time of the last restart, ns (0 if none); RFC 3339 on the wire (Go's `time.Time`).
    #[serde(with = "crate::util::go_time_serde")]
    pub last_restart: u64,
    /// Time of the last start, ns (0 if never); RFC 3339 on the wire.
    #[serde(with = "crate::util::go_time_serde")]
    pub started_at: u64,
    /// Time it finished, ns (0 while not dead); RFC 3339 on the wire.
    #[serde(with = "crate::util::go_time_serde")]
    pub finished_at: u64,
    /// The most recent events, oldest first.
    pub events: Vec<TaskEvent>,
}

impl Default for TaskState {
    fn default() -> Self {
        Self {
            state: TaskRunState::Pending,
            failed: false,
            restarts: 0,
            last_restart: 0,
            started_at: 0,
            finished_at: 0,
            events: Vec::new(),
        }
    }
}

impl TaskState {
    /// Append an event, keeping the newest [`MAX_EVENTS`]; a failing event marks the task failed.
    pub fn push_event(&mut self, ev: TaskEvent) {
        if ev.fails_task {
            self.failed = true;
        }
        self.events.push(ev);
        if self.events.len() > MAX_EVENTS {
            let extra = self.events.len() - MAX_EVENTS;
            self.events.drain(..extra);
        }
    }
}

/// Client status of an allocation from its task states, as Nomad derives it:
/// failed > running > pending > complete.
pub fn derive_client_status<'a>(states: impl IntoIterator<Item = &'a TaskState>) -> ClientStatus {
    let (mut failed, mut running, mut pending, mut any) = (false, false, false, false);
    for s in states {
        any = true;
        match s.state {
            TaskRunState::Pending => pending = true,
            TaskRunState::Running => running = true,
            TaskRunState::Dead if s.failed => failed = true,
            TaskRunState::Dead => {}
        }
    }
    if failed {
        ClientStatus::Failed
    } else if running {
        ClientStatus::Running
    } else if pending || !any {
        ClientStatus::Pending
    } else {
        ClientStatus::Complete
    }
}

/// An allocation: one instance of a task group on this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Allocation {
    /// Allocation id (uuid).
    #[serde(rename = "ID")]
    pub id: String,
    pub namespace: String,
    /// Evaluation that created it.
    #[serde(rename = "EvalID")]
    pub eval_id: String,
    /// `<job>.<group>[<index>]`.
    pub name: String,
    /// Node id.
    #[serde(rename = "NodeID")]
    pub node_id: String,
    /// Node name.
    pub node_name: String,
    /// Job id.
    #[serde(rename = "JobID")]
    pub job_id: String,
    /// The job as registered, shared by the allocations placed from one registration
    /// (one copy of the job per registration, not per allocation).
    pub job: std::sync::Arc<Job>,
    /// Task group name.
    pub task_group: String,
    /// Index within the group's count.
    #[serde(skip)]
    pub index: u32,
    /// run | stop.
    pub desired_status: DesiredStatus,
    /// Why it is desired so.
    pub desired_description: String,
    /// pending | running | complete | failed.
    pub client_status: ClientStatus,
    pub client_description: String,
    /// Task states by task name.
    pub task_states: BTreeMap<String, TaskState>,
    /// What it holds: every task's CPU, memory and devices, the group's disk and ports.
    #[serde(default)]
    pub allocated_resources: AllocatedResources,
    /// The same, in Nomad's older view: the total ...
    #[serde(default)]
    pub resources: LegacyResources,
    /// ... and each task's.
    #[serde(default)]
    pub task_resources: BTreeMap<String, LegacyResources>,
    /// How it was placed.
    #[serde(default)]
    pub metrics: AllocMetric,
    /// Raft-like index of creation.
    pub create_index: u64,
    /// Index of the last change.
    pub modify_index: u64,
    /// Creation time, ns.
    pub create_time: u64,
    /// Last change, ns.
    pub modify_time: u64,
    /// The allocations it replaced and was replaced by, and what the server asked of it.
    #[serde(flatten, default)]
    pub lineage: Lineage,
}

impl Allocation {
    /// The allocation's group.
    pub fn group(&self) -> Option<&crate::jobspec::TaskGroup> {
        self.job.group(&self.task_group)
    }

    /// Whether the client is done with it.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.client_status,
            ClientStatus::Complete | ClientStatus::Failed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: &str, failed: bool) -> TaskState {
        TaskState {
            state: serde_json::from_value(serde_json::json!(state)).unwrap(),
            failed,
            ..Default::default()
        }
    }

    #[test]
    fn client_status_precedence() {
        assert_eq!(
            derive_client_status(&[st("dead", true), st("running", false)]),
            "failed"
        );
        assert_eq!(
            derive_client_status(&[st("running", false), st("pending", false)]),
            "running"
        );
        assert_eq!(
            derive_client_status(&[st("pending", false), st("dead", false)]),
            "pending"
        );
        assert_eq!(
            derive_client_status(&[st("dead", false), st("dead", false)]),
            "complete"
        );
    }

    #[test]
    fn events_are_capped() {
        let mut s = TaskState::default();
        for i in 0..15 {
            s.push_event(TaskEvent::new(TaskEventType::Driver, format!("{i}")));
        }
        assert_eq!(s.events.len(), MAX_EVENTS);
        assert_eq!(s.events[0].message, "5");
    }
}

/// A Nomad Variable without its items (Nomad's `VariableMetadata`): what a list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct VariableMetadata {
    pub namespace: String,
    /// Path, e.g. `nomad/jobs/web` (the rules: [`crate::agent::validate_path`]).
    pub path: String,
    /// Change index of its creation.
    pub create_index: u64,
    /// Creation time, ns since the epoch.
    pub create_time: i64,
    /// Change index of its last write (what `?cas=` compares with).
    pub modify_index: u64,
    /// Last write, ns since the epoch.
    pub modify_time: i64,
}

/// A Nomad Variable: metadata and items (Nomad's decrypted `Variable`), as the state DB
/// keeps it and the API serves it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Variable {
    #[serde(flatten)]
    pub meta: VariableMetadata,
    /// Key/value pairs, never empty.
    pub items: BTreeMap<String, String>,
}
