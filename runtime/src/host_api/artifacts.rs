//! `artifacts` (contract 0.1.2): the current task's `artifact` blocks for the hook that
//! fetches them, and `set-mode`, the one thing about the files it wrote that WASI cannot
//! say. Both need the component's `task_dir` grant and a call about a task with its dirs.
//!
//! `set-mode` is the host acting on a folder a guest (and, after a first start, the task)
//! can write: the path is the guest's (`/task/...` or `/alloc/...`), checked by its text (no
//! `..`, nothing outside those two), then opened beneath that dir one component at a time without
//! following a link ([`crate::safefs`]), and only a plain file or folder gets the bits,
//! which never include set-uid, set-gid or sticky.

use std::path::Path;

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::artifacts::{self as wit, Host};
use crate::bindings::v0_1::types::HostError as WitHostError;
use crate::context::{ComponentContext, TaskContext, TaskFiles};
use crate::types::HostError;

/// Where the task dir and the shared alloc dir appear to a guest with the `task_dir` grant.
const GUEST_TASK_DIR: &str = "/task";
const GUEST_ALLOC_DIR: &str = "/alloc";

/// The `artifacts` view: the calling component (for its grant) and the task.
pub struct Artifacts<'a> {
    component: &'a ComponentContext,
    task: Option<&'a TaskContext>,
}

impl<'a> Artifacts<'a> {
    /// Artifacts as `component` sees them in a call about `task`.
    pub fn new(component: &'a ComponentContext, task: Option<&'a TaskContext>) -> Self {
        Self { component, task }
    }

    /// The task, once the grant and the call are checked.
    fn checked(&self, what: &str) -> Result<(&'a TaskContext, &'a TaskFiles), HostError> {
        if !self.component.grants.task_dir {
            return Err(HostError::denied(&self.component.name, "task_dir", what));
        }
        let task = self
            .task
            .ok_or_else(|| HostError::Denied(format!("{what}: this call is about no task")))?;
        let files = task
            .files
            .as_ref()
            .ok_or_else(|| HostError::Denied(format!("{what}: the task has no directory yet")))?;
        Ok((task, files))
    }
}

/// `path` (the guest's, under `/task` or `/alloc`) as the host folder it is in and the path
/// relative to it, when its text stays inside.
fn relative<'p>(path: &'p str, files: &'p TaskFiles) -> Option<(&'p str, &'p str)> {
    let (dir, rest) = if let Some(r) = path.strip_prefix(GUEST_TASK_DIR) {
        (&files.task_dir, r)
    } else {
        (&files.alloc_dir, path.strip_prefix(GUEST_ALLOC_DIR)?)
    };
    let rest = rest.strip_prefix('/')?;
    let ok = !dir.is_empty()
        && !rest.is_empty()
        && rest
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..");
    ok.then_some((dir.as_str(), rest))
}

/// Set `mode` on `rel` beneath `task_dir`, never through a link, only on a file or folder.
pub fn set_mode_beneath(task_dir: &Path, rel: &str, mode: u32) -> std::io::Result<()> {
    use rustix::fs::OFlags;
    let root = crate::safefs::Beneath::open(task_dir)?;
    // NONBLOCK: a FIFO the task left under that name must not hold the host up.
    let f = root.open_file(
        Path::new(rel),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        0,
    )?;
    let kind = f.metadata()?.file_type();
    if !(kind.is_file() || kind.is_dir()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "neither a file nor a folder",
        ));
    }
    crate::safefs::chmod(&f, mode)
}

impl Host for Artifacts<'_> {
    async fn list(&mut self) -> Result<Vec<wit::Artifact>, WitHostError> {
        let (task, _) = self.checked("artifacts.list()")?;
        Ok(task
            .artifacts
            .iter()
            .map(|a| wit::Artifact {
                source: a.source.clone(),
                destination: a.destination.clone(),
                mode: a.mode.clone(),
                options: a.options.clone(),
                headers: a.headers.clone(),
            })
            .collect())
    }

    async fn set_mode(&mut self, path: String, mode: u32) -> Result<(), WitHostError> {
        let what = format!("artifacts.set-mode({path:?}, {mode:#o})");
        let (_, files) = self.checked(&what)?;
        if mode > 0o777 {
            return Err(HostError::Denied(format!(
                "{what}: only the permission bits (0o777 at most) may be set"
            ))
            .into());
        }
        let (dir, rel) = relative(&path, files).ok_or_else(|| {
            HostError::Denied(format!(
                "{what}: not a path under {GUEST_TASK_DIR} or {GUEST_ALLOC_DIR} without \"..\""
            ))
        })?;
        set_mode_beneath(Path::new(dir), rel, mode).map_err(|e| {
            tracing::warn!(component = %self.component.name, path = %path, error = %e, "set-mode refused");
            HostError::Denied(format!("{what}: {e}"))
        })?;
        Ok(())
    }
}

struct HasArtifacts;

impl HasData for HasArtifacts {
    type Data<'a> = Artifacts<'a>;
}

/// Add `artifacts` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Artifacts<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasArtifacts>(linker, view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn component(task_dir: bool) -> ComponentContext {
        ComponentContext {
            name: "artifact".into(),
            grants: crate::Grants {
                task_dir,
                ..Default::default()
            },
            plugin_config: "{}".into(),
            limits: Default::default(),
        }
    }

    fn task(dir: &Path) -> TaskContext {
        TaskContext {
            files: Some(TaskFiles {
                task_dir: dir.display().to_string(),
                alloc_dir: String::new(),
            }),
            artifacts: vec![crate::types::Artifact {
                source: "https://example.com/a.tgz".into(),
                destination: "local/".into(),
                mode: "any".into(),
                options: vec![("checksum".into(), "sha256:00".into())],
                headers: Vec::new(),
            }],
            ..Default::default()
        }
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[tokio::test]
    async fn modes_are_set_beneath_the_task_dir_only_and_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("task");
        std::fs::create_dir_all(dir.join("local/bin")).unwrap();
        std::fs::write(dir.join("local/bin/app"), "#!/bin/sh\n").unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "x").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
        symlink(&outside, dir.join("local/link")).unwrap();
        symlink(tmp.path(), dir.join("local/up")).unwrap();
        let (c, t) = (component(true), task(&dir));
        let mut a = Artifacts::new(&c, Some(&t));

        a.set_mode("/task/local/bin/app".into(), 0o755)
            .await
            .unwrap();
        assert_eq!(mode_of(&dir.join("local/bin/app")), 0o755);
        a.set_mode("/task/local/bin".into(), 0o700).await.unwrap();
        assert_eq!(mode_of(&dir.join("local/bin")), 0o700);

        for (path, mode) in [
            ("/task/local/link", 0o777),
            ("/task/local/up/outside", 0o777),
            ("/task/../outside", 0o777),
            ("/allocx/x", 0o644),
            ("/alloc/x", 0o644),
            ("local/bin/app", 0o644),
            ("/task/local/bin/app", 0o4755),
        ] {
            let e = a.set_mode(path.into(), mode).await.unwrap_err();
            assert!(
                matches!(&e, WitHostError::Denied(m) if m.contains(path)),
                "{path}: {e:?}"
            );
        }
        assert_eq!(mode_of(&outside), 0o600, "nothing outside was touched");
        assert_eq!(mode_of(&dir.join("local/bin/app")), 0o755);
    }

    #[tokio::test]
    async fn without_the_task_dir_grant_or_a_task_both_calls_are_denied() {
        let tmp = tempfile::tempdir().unwrap();
        let t = task(tmp.path());
        let c = component(false);
        let mut a = Artifacts::new(&c, Some(&t));
        let e = a.list().await.unwrap_err();
        assert!(
            matches!(&e, WitHostError::Denied(m) if m.contains("`task_dir` grant")),
            "{e:?}"
        );
        let c = component(true);
        let mut a = Artifacts::new(&c, None);
        assert!(matches!(a.list().await, Err(WitHostError::Denied(_))));
        let mut a = Artifacts::new(&c, Some(&t));
        let list = a.list().await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(
            list[0].options,
            [("checksum".to_string(), "sha256:00".to_string())]
        );
    }
}
