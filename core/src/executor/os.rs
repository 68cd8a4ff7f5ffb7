//! What the process table asks of the operating system: a process's start time (to tell
//! it from a later process with the same pid), signals to its group, its CPU and memory
//! from `/proc`.

use crate::runtime::types::{HostError, ResourceUsage};
use crate::util::signal_number;

/// A process's start time in clock ticks since boot, if it runs.
pub(super) fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // State is field 3 (index 0 here); a zombie has exited.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

pub(super) fn send_signal(pid: u32, signal: &str) -> Result<(), HostError> {
    let n = signal_number(signal)
        .ok_or_else(|| HostError::Invalid(format!("signal: unknown signal {signal:?}")))?;
    let sig = rustix::process::Signal::from_named_raw(n)
        .ok_or_else(|| HostError::Invalid(format!("signal: {signal:?} cannot be sent")))?;
    let pid = rustix::process::Pid::from_raw(pid as i32)
        .ok_or_else(|| HostError::Invalid("process has no pid".into()))?;
    // The process leads its own group: signal the group so its children get it too.
    rustix::process::kill_process_group(pid, sig)
        .or_else(|_| rustix::process::kill_process(pid, sig))
        .map_err(|e| HostError::Failed(format!("sending {signal}: {e}")))
}

pub(super) fn read_usage(pid: u32) -> Result<ResourceUsage, HostError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| HostError::NotFound(format!("process {pid}: {e}")))?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let tick_ns = 1_000_000_000 / 100;
    let rss_pages = fields
        .get(21)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Ok(ResourceUsage {
        rss_bytes: rss_pages * 4096,
        cpu_user_ns: ticks(11) * tick_ns,
        cpu_system_ns: ticks(12) * tick_ns,
        cpu_percent: 0.0,
        timestamp: crate::util::now_nanos(),
    })
}

/// Every signal this process ignores (but `SIGPIPE`, which Rust's runtime ignores and
/// resets for each child it starts) goes back to its default action, so the tasks this
/// process starts begin with default signals however the agent was started: `nohup`
/// ignores SIGHUP and a shell script's background job SIGINT and SIGQUIT, an ignored signal
/// stays ignored through fork and exec, and a task's `trap` on it would do nothing, nor
/// would Nomad's default kill signal, SIGINT. Returns the signals it reset.
pub(super) fn default_ignored_signals() -> Vec<i32> {
    let mut reset = Vec::new();
    for sig in 1..32 {
        if matches!(sig, libc::SIGKILL | libc::SIGSTOP | libc::SIGPIPE) {
            continue;
        }
        // SAFETY: reads and sets this process's disposition of one signal; no handler is
        // installed, only the default action.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                if libc::sigaction(sig, &dfl, std::ptr::null_mut()) == 0 {
                    reset.push(sig);
                }
            }
        }
    }
    reset
}
