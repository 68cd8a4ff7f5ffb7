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

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

    /// Create the shared part.
    pub fn build(&self) -> std::io::Result<()> {
        for d in ["data", "logs", "tmp"] {
            std::fs::create_dir_all(self.shared().join(d))?;
        }
        Ok(())
    }

    /// Create a task's dirs and return their paths.
    pub fn build_task(&self, task: &str) -> std::io::Result<TaskDirs> {
        let task_dir = self.root.join(task);
        for d in ["local", "secrets", "tmp"] {
            std::fs::create_dir_all(task_dir.join(d))?;
        }
        std::fs::set_permissions(
            task_dir.join("secrets"),
            std::fs::Permissions::from_mode(0o700),
        )?;
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
