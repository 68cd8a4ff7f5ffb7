//! The task executor: a small process, started by the agent from its own binary
//! (`agent executor`), that spawns task processes, pumps their output into rotated log
//! files, waits for them and records how they exited. It runs in its own session, so the
//! tasks it parents outlive the agent: after a crash (even `kill -9`) or a graceful stop the
//! agent reconnects to it on the same socket and learns every exit it missed. This is
//! Nomad's executor, one per node rather than one per task, so starting a task costs one
//! request on a local socket instead of an extra exec.
//!
//! Protocol: newline-delimited JSON over `<data_dir>/executor.sock`.
//!
//! | agent → executor | executor → agent |
//! | --- | --- |
//! | `{"op":"spawn","id":N,"cmd":{...}}` | `{"op":"spawned","id":N,"pid":P}` or `{"op":"error","id":N,"message":"..."}` |
//! | `{"op":"watch","id":N}` | `{"op":"exited",...}` now or when it exits, or `{"op":"unknown","id":N}` |
//! | | `{"op":"exited","id":N,"exit_code":C,"signal":S}` to every connection, on each exit |
//!
//! Each exit is also written to `<data_dir>/exits/<id>.json` before it is announced, so an
//! exit that happened while no agent was connected is still known.
//!
//! Files: `server.rs` (the executor process), `client.rs` (the agent's end of the socket),
//! `processes.rs` (the process table: what the runtime's `process` interface calls, with
//! the records that let processes outlive the agent), `children.rs` (processes as children
//! of this process, for a runtime without an executor), `os.rs` (signals, `/proc`),
//! `isolate.rs` (namespaces, chroot, user for `spawn-isolated`), `clone.rs` (starting an
//! isolated process without fork), `cgroup.rs` (a cgroup per
//! isolated process: limits, OOM, stats), `exec.rs` (`alloc exec`'s commands, run by
//! the agent itself inside a running task, with a terminal when asked).

pub mod cgroup;
mod children;
pub mod client;
mod clone;
mod exec;
pub mod isolate;
mod os;
pub mod processes;
pub mod server;

use serde::{Deserialize, Serialize};

/// What to run (the host `process.command`, resolved and checked by the agent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnCommand {
    /// Absolute executable path.
    pub path: String,
    pub args: Vec<String>,
    /// Complete environment.
    pub env: Vec<(String, String)>,
    /// Working directory; empty for the executor's.
    pub cwd: String,
    /// stdout base path; empty discards.
    pub stdout: String,
    /// stderr base path; empty discards.
    pub stderr: String,
    /// Rotation: (max files, max bytes per file); `None` appends to the paths as given.
    pub rotate: Option<(u32, u64)>,
    /// Confine the process (`process.spawn-isolated`); absent for a plain spawn, which is
    /// also what an executor from before isolation reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<crate::runtime::types::Isolation>,
    /// `argv[0]` when it is not `path` (a symlink the grant check resolved); absent: `path`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub argv0: String,
    /// The allocation dir `cwd`, `stdout` and `stderr` lie beneath: they are opened there
    /// without following a link. Empty: no output and no working dir of a task's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alloc_root: String,
    /// User of a plain (not isolated) process, a name or a uid; empty: the executor's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
}

/// How a process exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Exit code (0 when killed by a signal).
    pub exit_code: i32,
    /// Signal number, 0 if none.
    pub signal: i32,
    /// Its cgroup's OOM killer killed it or one of its processes.
    #[serde(default)]
    pub oom_killed: bool,
}

/// A message on the executor socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Message {
    /// Start a process under host id `id`.
    Spawn {
        /// Host id.
        id: u64,
        /// What to run.
        cmd: SpawnCommand,
    },
    /// Send its exit when it has one.
    Watch {
        /// Host id.
        id: u64,
    },
    /// A process started.
    Spawned {
        /// Host id.
        id: u64,
        /// Its pid.
        pid: u32,
        /// The executor opened the process's files beneath `alloc_root` without following
        /// links; one from before that answers without it, and the agent refuses its spawns.
        #[serde(default)]
        guarded: bool,
    },
    /// A request failed.
    Error {
        /// Host id of the request.
        id: u64,
        message: String,
    },
    /// A process exited.
    Exited {
        /// Host id.
        id: u64,
        #[serde(flatten)]
        exit: Exit,
    },
    /// The executor knows no process with this id (it was restarted, or never had it).
    Unknown {
        /// Host id.
        id: u64,
    },
}

/// Where an exit record for `id` is kept under the executor's dir.
pub fn exit_path(dir: &std::path::Path, id: u64) -> std::path::PathBuf {
    dir.join(format!("{id}.json"))
}
