//! The allocation directory, laid out as Nomad's:
//!
//! ```text
//! <data_dir>/alloc/<alloc-id>/
//!   alloc/            shared by the alloc's tasks (NOMAD_ALLOC_DIR)
//!     data/ logs/ tmp/
//!   <task>/           one per task
//!     local/          NOMAD_TASK_DIR
//!     secrets/        NOMAD_SECRETS_DIR (mode 0700)
//!     tmp/
//! ```
//!
//! Tasks and hook components write in these folders (an `exec` task owns them; a hook with
//! the `task_dir` grant sees them), so a second start finds whatever they left: every
//! folder is made and its mode set beneath the allocation dir without following a link
//! ([`crate::safefs`]), and a task's name must be a plain folder name.

use std::path::{Path, PathBuf};

use crate::safefs::{self, Beneath};
use crate::taskenv::TaskDirs;

/// An allocation's directory tree.
#[derive(Debug, Clone)]
pub struct AllocDir {
    root: PathBuf,
}

impl AllocDir {
    /// The tree for `alloc_id` under `alloc_root`.
    pub fn new(alloc_root: &Path, alloc_id: &str) -> Self {
        Self {
            root: alloc_root.join(alloc_id),
        }
    }

    /// The allocation's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The shared dir.
    pub fn shared(&self) -> PathBuf {
        self.root.join("alloc")
    }

    /// Where task logs go.
    pub fn logs(&self) -> PathBuf {
        self.shared().join("logs")
    }

    /// The allocation dir, made if missing and opened: what everything below is made in.
    fn open(&self) -> std::io::Result<Beneath> {
        std::fs::create_dir_all(&self.root)?;
        Beneath::open(&self.root)
    }

    /// Create the shared part.
    pub fn build(&self) -> std::io::Result<()> {
        let root = self.open()?;
        for d in ["data", "logs", "tmp"] {
            root.make_dirs(&Path::new("alloc").join(d), 0o755)?;
        }
        Ok(())
    }

    /// Create a task's dirs and return their paths.
    pub fn build_task(&self, task: &str) -> std::io::Result<TaskDirs> {
        crate::jobspec::names::task_name(task)
            .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidInput, m))?;
        let root = self.open()?;
        for d in ["local", "tmp"] {
            root.make_dirs(&Path::new(task).join(d), 0o755)?;
        }
        let secrets = root.make_dirs(&Path::new(task).join("secrets"), 0o700)?;
        safefs::chmod(&secrets, 0o700)?;
        Ok(self.task_dirs(task))
    }

    /// A task's dir paths (whether or not they exist yet).
    pub fn task_dirs(&self, task: &str) -> TaskDirs {
        let task_dir = self.root.join(task);
        TaskDirs {
            alloc_dir: self.shared().display().to_string(),
            task_dir: task_dir.display().to_string(),
            local_dir: task_dir.join("local").display().to_string(),
            secrets_dir: task_dir.join("secrets").display().to_string(),
        }
    }

    /// Remove the whole tree.
    pub fn destroy(&self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_left_in_the_tree_are_not_followed_on_the_next_build() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let a = AllocDir::new(&dir.path().join("alloc"), "a1");
        a.build().unwrap();
        a.build_task("web").unwrap();
        // What a hook with the task dir could leave: `secrets` a link to a folder outside,
        // relative like the guest would write it.
        let secrets = a.root().join("web/secrets");
        std::fs::remove_dir(&secrets).unwrap();
        std::os::unix::fs::symlink("../../../outside", &secrets).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = a.build_task("web").unwrap_err();
        assert!(e.to_string().contains("not followed"), "{e}");
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "the folder outside was not chmod'ed");
        for bad in ["..", ".", "alloc", "a/b"] {
            assert!(a.build_task(bad).is_err(), "{bad}");
        }
    }
}
