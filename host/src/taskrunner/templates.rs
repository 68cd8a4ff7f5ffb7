//! Templates that stay live (Nomad's template manager, after the first render): when what a
//! running task's templates read changes, the hooks render them again through `update`, and
//! each template whose file changed has its `change_mode` applied — `restart` restarts the
//! task (once, whatever number of templates asked; not counted against its restart policy),
//! `signal` sends each distinct `change_signal`, `noop` does nothing, `script` runs the
//! template's `change_script` in the task through its driver's `alloc exec` path (within
//! its `timeout`, stdin closed; a failure is a `Task hook failed` event, and with
//! `fail_on_error` the task is killed and fails, as Nomad's template manager does). A
//! random wait below the
//! longest `splay` of the changed templates (Nomad's default 5 s) comes first, as Nomad's.
//! Templates with `once = true` are rendered at start only; a template's `wait { min }` lets
//! changes settle that long before it renders again.
//!
//! The host reads each destination before and after the render beneath the allocation dir,
//! never through a link (the task and the hook can write there), and gives each rendered
//! file its `perms` and, when the agent runs as root, its `uid` and `gid` (the hook cannot
//! through WASI): after every prestart and every render again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::Digest;

use super::TaskRunner;
use super::interfaces::TaskView;
use crate::jobspec::Template;
use crate::structs::{TaskEvent, TaskEventType, TaskRunState};
use crate::taskenv::TaskDirs;

/// Nomad's default `splay`.
const DEFAULT_SPLAY: Duration = Duration::from_secs(5);

/// What a render changed, and what the changed templates ask for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rerendered {
    /// Indexes (in the task's `template` list) of the templates whose file changed.
    pub changed: Vec<usize>,
    /// Whether the task was restarted.
    pub restarted: bool,
    /// Signals sent.
    pub signaled: Vec<String>,
    /// `change_script`s that ran and exited 0.
    pub scripts_ran: usize,
}

/// A template's `splay`: the kept `Splay` (ns), Nomad's default when absent.
fn splay(t: &Template) -> Duration {
    match t.kept.get("Splay").and_then(serde_json::Value::as_u64) {
        Some(ns) => Duration::from_nanos(ns),
        None => DEFAULT_SPLAY,
    }
}

/// Nomad's default `change_script { timeout }`.
const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_secs(5);

/// A template's `change_script` (Nomad's `ChangeScript`, kept as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeScript {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How long it may run.
    pub timeout: Duration,
    /// A failure kills the task, failed.
    pub fail_on_error: bool,
}

/// A template's `change_script`, from the kept fields; `None` without one (or without a
/// command).
pub fn change_script(t: &Template) -> Option<ChangeScript> {
    let c = t.kept.get("ChangeScript")?;
    let command = c.get("Command")?.as_str().filter(|s| !s.is_empty())?;
    Some(ChangeScript {
        command: command.to_string(),
        args: c
            .get("Args")
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        timeout: c
            .get("Timeout")
            .and_then(serde_json::Value::as_u64)
            .filter(|ns| *ns > 0)
            .map_or(DEFAULT_SCRIPT_TIMEOUT, Duration::from_nanos),
        fail_on_error: c
            .get("FailOnError")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
    })
}

/// A template's `wait { min }`: how long changes settle before it renders again (the
/// changes that come meanwhile are rendered together, so `max`, at least `min`, holds too).
fn settle(t: &Template) -> Duration {
    t.kept
        .get("Wait")
        .and_then(|w| w.get("Min"))
        .and_then(serde_json::Value::as_u64)
        .map(Duration::from_nanos)
        .unwrap_or_default()
}

/// Whether a template is rendered at start only.
fn once(t: &Template) -> bool {
    t.kept
        .get("Once")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// Where a template's destination lies, relative to the allocation dir: the task dir for a
/// relative path, else an absolute one under the allocation dir. `None` for one the hook
/// would refuse too (outside, or with `..`).
fn destination(dirs: &TaskDirs, interpolated: &str) -> Option<PathBuf> {
    let root = dirs.alloc_root();
    let full = if interpolated.starts_with('/') {
        PathBuf::from(interpolated)
    } else {
        Path::new(&dirs.task_dir).join(interpolated)
    };
    let rel = full.strip_prefix(&root).ok()?;
    rel.components()
        .all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
        .then(|| rel.to_path_buf())
}

/// The sha256 of the file `rel` beneath `root`, read without following a link; `None` when
/// it cannot be read (missing, a link, not a file).
fn digest(root: &crate::safefs::Beneath, rel: &Path) -> Option<[u8; 32]> {
    use std::io::Read;
    let mut f = root.open_file(rel, rustix::fs::OFlags::RDONLY, 0).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut h = sha2::Sha256::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(_) => return None,
        }
    }
    Some(h.finalize().into())
}

/// A template's `Uid` or `Gid` as given, when it asks for one (Nomad's unset is -1).
fn owner_id(t: &Template, key: &str) -> Option<u32> {
    t.kept
        .get(key)
        .and_then(serde_json::Value::as_i64)
        .and_then(|v| u32::try_from(v).ok())
}

impl TaskRunner {
    /// Give each rendered template file its `perms`, `uid` and `gid`, opened beneath the
    /// allocation dir without following a link; a missing file (no template hook ran) is
    /// left alone. Ownership asked of an agent that is not root is told in an event.
    pub(super) fn apply_template_modes(
        &self,
        templates: &[Template],
        inv: &super::interfaces::Invocation,
    ) {
        if templates.is_empty() {
            return;
        }
        let Ok(root) = crate::safefs::Beneath::open(&inv.dirs.alloc_root()) else {
            return;
        };
        let env = inv.env.build();
        let root_user = rustix::process::geteuid().is_root();
        for t in templates {
            let Some(rel) = destination(&inv.dirs, &env.interpolate(&t.dest_path)) else {
                continue;
            };
            let Ok(f) = root.open_file(&rel, rustix::fs::OFlags::RDONLY, 0) else {
                continue;
            };
            if !f.metadata().is_ok_and(|m| m.is_file()) {
                continue;
            }
            if let Ok(mode) = u32::from_str_radix(&t.perms, 8)
                && let Err(e) = crate::safefs::chmod(&f, mode)
            {
                tracing::warn!(task = %self.task.name, file = %rel.display(), error = %e, "template perms not applied");
            }
            let (uid, gid) = (owner_id(t, "Uid"), owner_id(t, "Gid"));
            if uid.is_none() && gid.is_none() {
                continue;
            }
            if !root_user {
                self.event(TaskEvent::new(
                    TaskEventType::HookMessage,
                    format!(
                        "Template {}: uid/gid not applied: the agent does not run as root",
                        t.dest_path
                    ),
                ));
                continue;
            }
            let ids = (
                uid.map(rustix::fs::Uid::from_raw),
                gid.map(rustix::fs::Gid::from_raw),
            );
            if let Err(e) = rustix::fs::fchown(&f, ids.0, ids.1) {
                tracing::warn!(task = %self.task.name, file = %rel.display(), error = %e, "template uid/gid not applied");
            }
        }
    }

    /// Render the templates again soon, on a task of its own: one render at a time per task
    /// (a render waiting out its `splay` holds up no other task's), and a render asked for
    /// while one runs is made once after it.
    pub fn rerender_soon(self: &std::sync::Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        self.render_again.store(true, SeqCst);
        if self.render_busy.swap(true, SeqCst) {
            return;
        }
        let me = self.clone();
        let wait = self
            .task
            .templates
            .iter()
            .filter(|t| !once(t))
            .map(settle)
            .max()
            .unwrap_or_default();
        tokio::spawn(async move {
            loop {
                while me.render_again.load(SeqCst) {
                    // `wait { min }`: what changes meanwhile is rendered with it.
                    if !wait.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = me.kill.cancelled() => {}
                        }
                    }
                    me.render_again.store(false, SeqCst);
                    me.rerender_templates().await;
                }
                me.render_busy.store(false, SeqCst);
                // A request between the last swap and the store above would wait for the
                // next change: take it now, unless another render took over.
                if !me.render_again.load(SeqCst) || me.render_busy.swap(true, SeqCst) {
                    break;
                }
            }
        });
    }

    /// Whether the task runs with templates that are rendered again (`once` ones are not).
    pub fn has_live_templates(&self) -> bool {
        self.task.templates.iter().any(|t| !once(t))
    }

    /// Render the running task's templates again and apply the `change_mode` of those whose
    /// file changed. Nothing happens when the task does not run.
    pub async fn rerender_templates(&self) -> Rerendered {
        let mut out = Rerendered::default();
        let Some(inv) = self.last.lock().unwrap().clone() else {
            return out;
        };
        if self.state() != Some(TaskRunState::Running) || self.kill.is_cancelled() {
            return out;
        }
        let live: Vec<(usize, &Template)> = self
            .task
            .templates
            .iter()
            .enumerate()
            .filter(|(_, t)| !once(t))
            .collect();
        if live.is_empty() {
            return out;
        }
        let root = match crate::safefs::Beneath::open(&inv.dirs.alloc_root()) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(task = %self.task.name, error = %e, "templates: the allocation dir cannot be opened");
                return out;
            }
        };
        let env = inv.env.build();
        let dests: Vec<Option<PathBuf>> = live
            .iter()
            .map(|(_, t)| destination(&inv.dirs, &env.interpolate(&t.dest_path)))
            .collect();
        let read = |dests: &[Option<PathBuf>]| -> Vec<Option<[u8; 32]>> {
            dests
                .iter()
                .map(|d| d.as_deref().and_then(|d| digest(&root, d)))
                .collect()
        };
        let before = read(&dests);
        // The hooks see the task with its live templates only.
        let a = self.handler.allocation();
        let Some(group) = a.group() else { return out };
        let mut task = self.task.clone();
        task.templates = live.iter().map(|(_, t)| (*t).clone()).collect();
        self.update_phase(TaskView {
            alloc: &a,
            group,
            task: &task,
            node: &self.node,
        })
        .await;
        self.apply_template_modes(&task.templates, &inv);
        let after = read(&dests);
        let changed: Vec<(usize, &Template)> = live
            .iter()
            .zip(before.iter().zip(&after))
            .filter(|(_, (b, a))| b != a)
            .map(|(t, _)| *t)
            .collect();
        out.changed = changed.iter().map(|(i, _)| *i).collect();
        if changed.is_empty() {
            return out;
        }
        tracing::info!(task = %self.task.name, templates = ?out.changed, "templates re-rendered");
        let acting: Vec<&Template> = changed
            .iter()
            .map(|(_, t)| *t)
            .filter(|t| t.change_mode != "noop")
            .collect();
        if acting.is_empty() {
            return out;
        }
        let wait = acting.iter().map(|t| splay(t)).max().unwrap_or_default();
        if !wait.is_zero() {
            let offset = (uuid::Uuid::new_v4().as_u128() % wait.as_nanos()) as u64;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_nanos(offset)) => {}
                _ = self.kill.cancelled() => return out,
            }
        }
        if acting.iter().any(|t| t.change_mode == "restart") {
            match self.restart("Template with change_mode restart re-rendered") {
                Ok(()) => out.restarted = true,
                Err(e) => {
                    tracing::info!(task = %self.task.name, error = %e, "templates: no restart")
                }
            }
            return out;
        }
        let mut signals: Vec<&str> = acting
            .iter()
            .filter(|t| t.change_mode == "signal")
            .map(|t| t.change_signal.as_str())
            .collect();
        signals.sort();
        signals.dedup();
        for s in signals {
            match self.signal_as(s, "Template re-rendered").await {
                Ok(()) => out.signaled.push(s.to_string()),
                Err(e) => self.event(TaskEvent::new(
                    TaskEventType::HookMessage,
                    format!("Template failed to send signal {s}: {e}"),
                )),
            }
        }
        let mut scripts: Vec<ChangeScript> = Vec::new();
        for t in acting.iter().filter(|t| t.change_mode == "script") {
            match change_script(t) {
                Some(cs) if !scripts.contains(&cs) => scripts.push(cs),
                Some(_) => {}
                None => self.event(TaskEvent::new(
                    TaskEventType::HookFailed,
                    "Template re-rendered with change_mode \"script\" but no change_script command",
                )),
            }
        }
        for cs in scripts {
            if self.run_change_script(&cs).await {
                out.scripts_ran += 1;
            }
        }
        out
    }

    /// Run `cs` in the task (Nomad's `processScript`): its events, and with
    /// `fail_on_error` a failure kills the task, failed. Whether it ran and exited 0.
    async fn run_change_script(&self, cs: &ChangeScript) -> bool {
        use crate::execstream::{Ended, collect};
        let mut argv = vec![cs.command.clone()];
        argv.extend(cs.args.iter().cloned());
        let run = async {
            let started = self.exec(argv, false).await.map_err(|e| e.to_string())?;
            let ended = collect(started.into_started()).await.ended;
            match ended {
                Ended::Exited(code) => Ok(code),
                Ended::Failed(e) => Err(e),
                Ended::Gone => Err("the script's session ended without an exit".into()),
            }
        };
        let failure = match tokio::time::timeout(cs.timeout, run).await {
            Ok(Ok(0)) => {
                self.event(TaskEvent::new(
                    TaskEventType::HookMessage,
                    format!(
                        "Template successfully ran script {} with arguments: {:?}. Exit code: 0",
                        cs.command, cs.args
                    ),
                ));
                return true;
            }
            Ok(Ok(code)) => format!(
                "Template ran script {} with arguments {:?} on change but it exited with code: {code}",
                cs.command, cs.args
            ),
            Ok(Err(e)) => format!(
                "Template failed to run script {} with arguments {:?} on change: {e}. Exit code: 0",
                cs.command, cs.args
            ),
            Err(_) => format!(
                "Template failed to run script {} with arguments {:?} on change: it ran past its timeout of {:?}. Exit code: 0",
                cs.command, cs.args, cs.timeout
            ),
        };
        self.event(TaskEvent::new(TaskEventType::HookFailed, failure));
        if cs.fail_on_error {
            let mut ev = TaskEvent::new(
                TaskEventType::Killing,
                "Template script failed, task is being killed",
            );
            ev.fails_task = true;
            self.event(ev);
            self.kill();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_stay_in_the_allocation_dir() {
        let dirs = TaskDirs {
            alloc_dir: "/a/1/alloc".into(),
            task_dir: "/a/1/web".into(),
            local_dir: "/a/1/web/local".into(),
            secrets_dir: "/a/1/web/secrets".into(),
        };
        assert_eq!(
            destination(&dirs, "local/app.conf"),
            Some(PathBuf::from("web/local/app.conf"))
        );
        assert_eq!(
            destination(&dirs, "/a/1/alloc/shared.conf"),
            Some(PathBuf::from("alloc/shared.conf"))
        );
        assert_eq!(destination(&dirs, "/etc/passwd"), None);
        assert_eq!(destination(&dirs, "../../etc/passwd"), None);
        assert_eq!(destination(&dirs, "/a/1/web/../../x"), None);
    }

    #[test]
    fn splay_and_once_come_from_the_kept_fields() {
        let mut t: Template = serde_json::from_value(serde_json::json!({
            "SourcePath": "", "DestPath": "x", "EmbeddedTmpl": "y", "ChangeMode": "restart",
            "ChangeSignal": "", "Perms": "0644", "LeftDelim": "{{", "RightDelim": "}}",
            "Envvars": false, "ErrMissingKey": false
        }))
        .unwrap();
        assert_eq!(splay(&t), DEFAULT_SPLAY);
        assert!(!once(&t));
        assert_eq!(settle(&t), Duration::ZERO);
        t.kept.insert(
            "Wait".into(),
            serde_json::json!({ "Min": 2_000_000_000u64, "Max": 60_000_000_000u64 }),
        );
        assert_eq!(settle(&t), Duration::from_secs(2));
        t.kept.insert("Splay".into(), 0.into());
        t.kept.insert("Once".into(), true.into());
        assert_eq!(splay(&t), Duration::ZERO);
        assert!(once(&t));
    }
}
