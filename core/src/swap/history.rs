//! What happened to each component, kept in memory for `/v1/components` and the UI's
//! components page: versions loaded, swapped in, refused (with the reason), reverted (with
//! the reason), removed, and drained versions let go. Newest first, at most [`KEEP`] per
//! component or file, and at most [`MAX_SUBJECTS`] components and files in all (the one
//! whose newest event is oldest is forgotten first). Not kept over a restart: the node
//! events and the event stream say the same as it happens.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use crate::runtime::World;

/// Events kept per component or file.
pub const KEEP: usize = 20;
/// Components and files with a history, at most.
pub const MAX_SUBJECTS: usize = 256;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A component new to the agent was loaded.
    Loaded,
    /// A new version replaced the one serving.
    Swapped,
    /// A file (or new settings) was refused; what served before still serves.
    Refused,
    /// A new version failed its first calls and the one it replaced serves again.
    Reverted,
    /// Its file was deleted: the component was unloaded (or a built-in took over).
    Removed,
    /// A driver version kept for its running tasks was let go once the last one ended.
    Drained,
    /// A pulled version declaring more grants waits for `agent component approve`.
    #[serde(rename = "pending-approval")]
    Pending,
}

impl Kind {
    /// The `Component` event stream's type for it.
    pub fn event_type(self) -> &'static str {
        match self {
            Kind::Loaded => "ComponentLoaded",
            Kind::Swapped => "ComponentReplaced",
            Kind::Refused => "ComponentRefused",
            Kind::Reverted => "ComponentReverted",
            Kind::Removed | Kind::Drained => "ComponentUnloaded",
            Kind::Pending => "ComponentPendingApproval",
        }
    }

    /// The verb node events use.
    pub fn verb(self) -> &'static str {
        match self {
            Kind::Loaded => "loaded",
            Kind::Swapped => "replaced",
            Kind::Refused => "refused",
            Kind::Reverted => "reverted",
            Kind::Removed | Kind::Drained => "unloaded",
            Kind::Pending => "pending approval",
        }
    }
}

/// One event of a component's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SwapEvent {
    /// When, ns since the epoch.
    pub time: u64,
    pub kind: Kind,
    /// The version the event is about: the one loaded, swapped in, refused, serving again
    /// after a revert, removed or drained.
    #[serde(rename = "SHA256")]
    pub sha256: String,
    /// The other version: the one a swap replaced, or the one a revert rolled back.
    #[serde(rename = "PreviousSHA256")]
    pub previous_sha256: String,
    /// Why (a refusal's or a revert's reason, `file changed`, `file deleted`).
    pub reason: String,
    /// The file, or `built-in <file>`.
    pub source: String,
}

/// Whose history: a component by world and name, or a file that has no component (yet).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Subject {
    Component(World, String),
    File(PathBuf),
    /// A plugin block's remote source, by the block's name.
    Source(String),
}

/// The history of every component and refused file.
#[derive(Default)]
pub struct History {
    by: Mutex<BTreeMap<Subject, VecDeque<SwapEvent>>>,
}

impl History {
    /// Add `e` as the newest event of `who`.
    pub fn record(&self, who: Subject, e: SwapEvent) {
        let mut by = self.by.lock().unwrap();
        let list = by.entry(who).or_default();
        list.push_front(e);
        list.truncate(KEEP);
        if by.len() > MAX_SUBJECTS {
            let oldest = by
                .iter()
                .min_by_key(|(_, l)| l.front().map_or(0, |e| e.time))
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                by.remove(&k);
            }
        }
    }

    /// A file's events become its component's once the file loads: a file refused before
    /// its first good version keeps that refusal in view.
    pub fn adopt(&self, path: &Path, world: World, name: &str) {
        let mut by = self.by.lock().unwrap();
        let Some(file) = by.remove(&Subject::File(path.to_path_buf())) else {
            return;
        };
        let list = by
            .entry(Subject::Component(world, name.to_string()))
            .or_default();
        for e in file {
            if !list.contains(&e) {
                list.push_back(e);
            }
        }
        list.make_contiguous()
            .sort_by_key(|e| std::cmp::Reverse(e.time));
        list.truncate(KEEP);
    }

    /// Forget a file's own history (its file is gone).
    pub fn forget_file(&self, path: &Path) {
        self.by
            .lock()
            .unwrap()
            .remove(&Subject::File(path.to_path_buf()));
    }

    /// Everything kept, newest event first within each subject.
    pub fn snapshot(&self) -> BTreeMap<Subject, Vec<SwapEvent>> {
        self.by
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(time: u64, kind: Kind) -> SwapEvent {
        SwapEvent {
            time,
            kind,
            sha256: format!("{time:064}"),
            previous_sha256: String::new(),
            reason: String::new(),
            source: "f.wasm".into(),
        }
    }

    #[test]
    fn keeps_the_newest_twenty_newest_first() {
        let h = History::default();
        let who = Subject::Component(World::Hook, "h".into());
        for t in 1..=30 {
            h.record(who.clone(), ev(t, Kind::Swapped));
        }
        let s = h.snapshot();
        let list = &s[&who];
        assert_eq!(list.len(), KEEP);
        assert_eq!(list[0].time, 30);
        assert_eq!(list[KEEP - 1].time, 11);
    }

    #[test]
    fn a_file_refused_before_it_loads_keeps_its_refusal_under_the_component() {
        let h = History::default();
        let path = PathBuf::from("/c/h.wasm");
        h.record(Subject::File(path.clone()), ev(1, Kind::Refused));
        let who = Subject::Component(World::Hook, "h".into());
        h.record(who.clone(), ev(2, Kind::Loaded));
        h.adopt(&path, World::Hook, "h");
        let s = h.snapshot();
        let kinds: Vec<Kind> = s[&who].iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [Kind::Loaded, Kind::Refused]);
        assert!(!s.contains_key(&Subject::File(path)));
    }

    #[test]
    fn subjects_are_bounded_forgetting_the_stalest() {
        let h = History::default();
        for i in 0..=MAX_SUBJECTS as u64 {
            h.record(
                Subject::File(PathBuf::from(format!("/c/{i}.wasm"))),
                ev(i + 1, Kind::Refused),
            );
        }
        let s = h.snapshot();
        assert_eq!(s.len(), MAX_SUBJECTS);
        assert!(!s.contains_key(&Subject::File(PathBuf::from("/c/0.wasm"))));
    }
}
