//! A mock task's state, kept as JSON in its handle, and how it runs out over time.

use crate::config::{Misbehave, TaskConfig};
use paddock_driver_sdk::ExitResult;
use serde::{Deserialize, Serialize};

/// Signal number of SIGKILL, which ends a task still running when its stop timeout is over.
pub const SIGKILL: i32 = 9;

/// The signal number of a name such as "SIGTERM", "term" or "15"; an empty name is SIGTERM.
pub fn signal_number(name: &str) -> Option<i32> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    match bare {
        "" | "TERM" => Some(15),
        "HUP" => Some(1),
        "INT" => Some(2),
        "QUIT" => Some(3),
        "KILL" => Some(SIGKILL),
        "USR1" => Some(10),
        "USR2" => Some(12),
        number => number.parse().ok().filter(|n| (1..=64).contains(n)),
    }
}

/// Everything the mock knows about a task; times and durations in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandleState {
    /// When `start` returned the handle (host wall clock).
    pub started_at: u64,
    /// How long the task runs before it exits by itself.
    pub run_for: u64,
    /// Exit code when it exits by itself.
    pub exit_code: i32,
    /// Signal number when it exits by itself.
    pub exit_signal: i32,
    /// Driver error reported with that exit.
    pub exit_err: Option<String>,
    /// After a stop, the task runs this long before it exits.
    pub kill_after: u64,
    /// `signal` fails with this message.
    pub signal_error: Option<String>,
    /// A misbehaviour of a later op, from the task's config.
    pub misbehave: Option<Misbehave>,
    /// Set by the first `stop`.
    pub stopped: Option<Stopped>,
    /// Output the task writes to its stdout, and how much of it is written.
    #[serde(default)]
    pub stdout: Option<Stdout>,
    /// `handle_padding` bytes of nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub padding: String,
}

/// `stdout_string` written at start and `repeat` more times, one every `every` ns, while
/// the task runs (Nomad's mock driver does the same from a goroutine).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stdout {
    /// The text.
    pub text: String,
    /// Writes after the first.
    pub repeat: u32,
    /// Time between writes.
    pub every: u64,
    /// Writes done so far.
    pub written: u32,
}

/// A stop request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    /// When it was asked.
    pub at: u64,
    /// Number of the signal it asked for.
    pub signal: i32,
    /// How long after `at` the task gets SIGKILL if it still runs.
    pub timeout: u64,
    /// The task's `kill_after` when it was asked.
    pub kill_after: u64,
}

/// Where a task is at some time.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Still running; it ends in `remaining` nanoseconds unless stopped.
    Running {
        /// Nanoseconds until it exits.
        remaining: u64,
    },
    /// It has exited.
    Exited {
        /// When.
        at: u64,
        /// How.
        result: ExitResult,
    },
}

impl HandleState {
    /// The state of a task started at `now` with `config`.
    pub fn new(config: &TaskConfig, now: u64) -> Self {
        Self {
            started_at: now,
            run_for: config.run_for,
            exit_code: config.exit_code,
            exit_signal: config.exit_signal,
            exit_err: config.exit_err_msg.clone(),
            kill_after: config.kill_after,
            signal_error: config.signal_error.clone(),
            misbehave: config.misbehave,
            stopped: None,
            stdout: config.stdout_string.clone().map(|text| Stdout {
                text,
                repeat: config.stdout_repeat.max(0) as u32,
                every: config.stdout_repeat_duration,
                written: 0,
            }),
            padding: "0".repeat(config.handle_padding as usize),
        }
    }

    /// Writes of the stdout text due by `now` (none after the task ended).
    pub fn stdout_due(&self, now: u64) -> u32 {
        let Some(out) = &self.stdout else { return 0 };
        let until = now.min(self.end().0);
        let elapsed = until.saturating_sub(self.started_at);
        // With no interval every repeat is due at once.
        let repeats = elapsed
            .checked_div(out.every)
            .unwrap_or(u64::MAX)
            .min(out.repeat as u64);
        1 + repeats as u32
    }

    /// Nanoseconds from `now` until the next stdout write is due, if one is.
    pub fn next_stdout_in(&self, now: u64) -> Option<u64> {
        let out = self.stdout.as_ref()?;
        if out.written > out.repeat || out.every == 0 {
            return None;
        }
        let at = self
            .started_at
            .saturating_add(u64::from(out.written).saturating_mul(out.every));
        Some(at.saturating_sub(now).max(1))
    }

    /// When the task ends and how, given what is known so far.
    fn end(&self) -> (u64, ExitResult) {
        let natural_end = self.started_at.saturating_add(self.run_for);
        match &self.stopped {
            Some(stop) if stop.at < natural_end => {
                let (delay, signal) = if stop.kill_after <= stop.timeout {
                    (stop.kill_after, stop.signal)
                } else {
                    (stop.timeout, SIGKILL)
                };
                let at = stop.at.saturating_add(delay).min(natural_end);
                if at == natural_end {
                    (at, self.natural_exit())
                } else {
                    (
                        at,
                        ExitResult {
                            signal,
                            ..ExitResult::default()
                        },
                    )
                }
            }
            _ => (natural_end, self.natural_exit()),
        }
    }

    fn natural_exit(&self) -> ExitResult {
        ExitResult {
            exit_code: self.exit_code,
            signal: self.exit_signal,
            oom_killed: false,
            err: self.exit_err.clone(),
        }
    }

    /// Where the task is at `now`.
    pub fn progress(&self, now: u64) -> Progress {
        let (at, result) = self.end();
        if now >= at {
            Progress::Exited { at, result }
        } else {
            Progress::Running {
                remaining: at - now,
            }
        }
    }

    /// Records a stop asked at `now` with `signal`, unless the task was already stopped or
    /// has exited. Returns whether the state changed.
    pub fn stop(&mut self, now: u64, signal: i32, timeout: u64) -> bool {
        if self.stopped.is_some() || matches!(self.progress(now), Progress::Exited { .. }) {
            return false;
        }
        self.stopped = Some(Stopped {
            at: now,
            signal,
            timeout,
            kill_after: self.kill_after,
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn state(run_for: u64, kill_after: u64) -> HandleState {
        let config = TaskConfig {
            run_for,
            kill_after,
            exit_code: 3,
            ..TaskConfig::default()
        };
        HandleState::new(&config, 100 * S)
    }

    fn exited(progress: Progress) -> (u64, i32, i32) {
        match progress {
            Progress::Exited { at, result } => (at, result.exit_code, result.signal),
            running => panic!("still running: {running:?}"),
        }
    }

    #[test]
    fn signal_names() {
        for (name, n) in [
            ("SIGTERM", 15),
            ("sigint", 2),
            ("KILL", 9),
            ("SIGHUP", 1),
            ("SIGUSR1", 10),
        ] {
            assert_eq!(signal_number(name), Some(n), "{name}");
        }
        assert_eq!(signal_number("SIGUSR2"), Some(12));
        assert_eq!(signal_number("SIGQUIT"), Some(3));
        assert_eq!(signal_number(""), Some(15));
        assert_eq!(signal_number("6"), Some(6));
        assert_eq!(signal_number("SIGWHAT"), None);
        assert_eq!(signal_number("0"), None);
    }

    #[test]
    fn exits_at_once_by_default() {
        assert_eq!(exited(state(0, 0).progress(100 * S)), (100 * S, 3, 0));
    }

    #[test]
    fn runs_for_its_time() {
        let task = state(10 * S, 0);
        assert_eq!(
            task.progress(104 * S),
            Progress::Running { remaining: 6 * S }
        );
        assert_eq!(exited(task.progress(110 * S)), (110 * S, 3, 0));
    }

    #[test]
    fn stop_ends_it_after_kill_after_with_the_stop_signal() {
        let mut task = state(3600 * S, 2 * S);
        assert!(task.stop(101 * S, 15, 5 * S));
        assert!(!task.stop(102 * S, 9, 0), "a second stop changes nothing");
        assert_eq!(task.progress(102 * S), Progress::Running { remaining: S });
        assert_eq!(exited(task.progress(103 * S)), (103 * S, 0, 15));
    }

    #[test]
    fn stop_timeout_escalates_to_sigkill() {
        let mut task = state(3600 * S, 10 * S);
        task.stop(101 * S, 2, 5 * S);
        assert_eq!(exited(task.progress(200 * S)), (106 * S, 0, SIGKILL));
    }

    #[test]
    fn natural_exit_wins_when_earlier() {
        let mut task = state(2 * S, 10 * S);
        task.stop(101 * S, 15, 30 * S);
        assert_eq!(exited(task.progress(200 * S)), (102 * S, 3, 0));
        let mut done = state(0, 0);
        assert!(!done.stop(101 * S, 15, 0), "an exited task is not stopped");
    }

    #[test]
    fn state_round_trips_as_json() {
        let mut task = state(S, 0);
        task.stop(100 * S, 15, S);
        let json = serde_json::to_vec(&task).unwrap();
        assert_eq!(serde_json::from_slice::<HandleState>(&json).unwrap(), task);
    }

    #[test]
    fn stdout_is_due_once_at_start_then_once_per_interval_until_the_end() {
        let config = TaskConfig {
            run_for: 10 * S,
            stdout_string: Some("hi\n".into()),
            stdout_repeat: 3,
            stdout_repeat_duration: 2 * S,
            ..TaskConfig::default()
        };
        let mut st = HandleState::new(&config, 100 * S);
        assert_eq!(st.stdout_due(100 * S), 1);
        assert_eq!(st.stdout_due(103 * S), 2);
        assert_eq!(st.stdout_due(150 * S), 4, "capped by repeat");
        st.stdout.as_mut().unwrap().written = 2;
        assert_eq!(st.next_stdout_in(103 * S), Some(S));
        // A task that ends early stops writing when it ends.
        let short = TaskConfig {
            run_for: 3 * S,
            ..config
        };
        assert_eq!(HandleState::new(&short, 100 * S).stdout_due(150 * S), 2);
    }
}
