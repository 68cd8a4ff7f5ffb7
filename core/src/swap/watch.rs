//! Watching the components folders (the `notify` crate: inotify on Linux). A file is acted
//! on only once it is complete: when it is renamed into place, or when a write to it was
//! closed and the file was then left alone for the debounce period. A half-written file is
//! therefore never loaded (and if one were, the loader would refuse it and the running
//! version would stay). A deleted or renamed-away file is unloaded after the same quiet
//! period, unless it came back meanwhile.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};

use super::Swapper;

/// How long a closed file must be left alone before it is loaded.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// How long after a rename into place the file is loaded: a rename is complete at once, so
/// this only gathers the events of one burst (a deploy tool's rename and its neighbours).
pub const RENAME_SETTLE: Duration = Duration::from_millis(5);

/// What was seen of one file since it was last acted on.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// When the change was first seen (the swap latency counts from here).
    first_seen: Instant,
    /// Act at this time, unless more changes come.
    due: Option<Instant>,
}

/// The running watch; dropping it stops it.
pub struct FolderWatch {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FolderWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watch the swapper's folders and apply each complete change, one at a time.
pub fn start(swapper: &Arc<Swapper>) -> notify::Result<FolderWatch> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<notify::Event>();
    let mut watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(ev) => {
                let _ = tx.send(ev);
            }
            Err(e) => tracing::warn!(error = %e, "components folder watch error"),
        })?;
    for dir in swapper.dirs() {
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        tracing::info!(dir = %dir.display(), "watching components folder");
    }
    let weak = Arc::downgrade(swapper);
    let task = tokio::spawn(async move {
        let mut pending: HashMap<PathBuf, Pending> = HashMap::new();
        loop {
            let next_due = pending.values().filter_map(|p| p.due).min();
            let event = match next_due {
                Some(due) => {
                    tokio::select! {
                        e = rx.recv() => e,
                        _ = tokio::time::sleep_until(due.into()) => None,
                    }
                }
                None => match rx.recv().await {
                    Some(e) => Some(e),
                    None => return,
                },
            };
            let now = Instant::now();
            if let Some(ev) = event {
                note(&mut pending, &ev, now);
            }
            let due: Vec<(PathBuf, Pending)> = pending
                .iter()
                .filter(|(_, p)| p.due.is_some_and(|d| d <= now))
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            for (path, p) in due {
                pending.remove(&path);
                let Some(s) = weak.upgrade() else { return };
                let applied = s.apply_file(&path, p.first_seen).await;
                tracing::debug!(file = %path.display(), ?applied, "component file applied");
            }
        }
    });
    Ok(FolderWatch {
        _watcher: watcher,
        task,
    })
}

/// Fold one file-system event into what is pending.
fn note(pending: &mut HashMap<PathBuf, Pending>, ev: &notify::Event, now: Instant) {
    let wasm = |p: &PathBuf| p.extension().is_some_and(|x| x == "wasm");
    let mut touch = |path: &PathBuf, due: Option<Instant>| {
        let p = pending.entry(path.clone()).or_insert_with(|| {
            // Said at once: a large component can take a while to settle and compile.
            tracing::info!(file = %path.display(), "component file seen; applied once it settles");
            Pending {
                first_seen: now,
                due: None,
            }
        });
        p.due = due;
    };
    match ev.kind {
        // Renamed into place: complete now.
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
            for p in ev.paths.iter().filter(|p| wasm(p)) {
                touch(p, Some(now + RENAME_SETTLE));
            }
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            if let [from, to] = ev.paths.as_slice() {
                if wasm(from) {
                    touch(from, Some(now + DEBOUNCE));
                }
                if wasm(to) {
                    touch(to, Some(now + RENAME_SETTLE));
                }
            }
        }
        // A write closed: complete once it is left alone for the debounce period.
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
            for p in ev.paths.iter().filter(|p| wasm(p)) {
                touch(p, Some(now + DEBOUNCE));
            }
        }
        // Being written (or just created, still open): not complete until closed.
        EventKind::Modify(ModifyKind::Data(_)) | EventKind::Create(_) => {
            for p in ev.paths.iter().filter(|p| wasm(p)) {
                touch(p, None);
            }
        }
        // Gone (deleted, or renamed away): unload after the quiet period.
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
            for p in ev.paths.iter().filter(|p| wasm(p)) {
                touch(p, Some(now + DEBOUNCE));
            }
        }
        _ => {}
    }
}
