//! Task log files with rotation (Nomad's logmon): a process's stdout or stderr is pumped
//! from a pipe into `<base>.0`, `<base>.1`, …; a file that reaches the size limit is closed
//! and the next index opened; only the newest `max_files` are kept. After an agent
//! restart, writing resumes in the newest existing file.
//!
//! [`TaskLogs`] is the same for drivers that write their tasks' output themselves, through
//! the runtime's `task-logs` interface.
//!
//! A base path that already exists as a FIFO or a device (Nomad's logmon hands its drivers
//! FIFOs it reads and rotates itself; `/dev/null` when logs are disabled) is written as it
//! is, never rotated.

pub mod task_logs;

pub use task_logs::TaskLogs;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::safefs::{self, Beneath};

/// A size-rotated set of log files, `<name>.0`, `<name>.1`, … in one folder. The folder is
/// held open and every file is opened in it without following a link: a task that owns
/// its logs folder (an `exec` task) can plant a link named like its next log file, and the
/// writer (root) must not append to where it leads.
#[derive(Debug)]
pub struct RotatingFile {
    dir: Arc<OwnedFd>,
    name: OsString,
    /// `<folder>/<name>`, for messages.
    base: PathBuf,
    max_files: u32,
    max_bytes: u64,
    index: u32,
    file: File,
    written: u64,
}

fn indexed(name: &OsStr, i: u32) -> OsString {
    let mut s = name.to_owned();
    s.push(format!(".{i}"));
    s
}

/// Open `<name>.<i>` in `dir` for appending, never through a link: a link planted under
/// that name (it is ours to write) is removed, once, and the file made anew.
fn append_in(dir: &OwnedFd, name: &OsStr, i: u32) -> std::io::Result<File> {
    let file = indexed(name, i);
    let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE;
    let mode = Mode::from_raw_mode(0o644);
    match safefs::open_in(dir, &file, flags, mode) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            tracing::warn!(file = ?file, "a link stood where a task log file goes: removed, not followed");
            rustix::fs::unlinkat(dir, file.as_os_str(), rustix::fs::AtFlags::empty())?;
            Ok(safefs::open_in(dir, &file, flags | OFlags::EXCL, mode)?.into())
        }
        other => Ok(other?.into()),
    }
}

impl RotatingFile {
    /// Open the newest existing file of `name` in the folder `dir` (or `<name>.0`) for
    /// appending; `base` names it in messages.
    pub fn open_in(
        dir: Arc<OwnedFd>,
        name: &OsStr,
        base: PathBuf,
        max_files: u32,
        max_bytes: u64,
    ) -> std::io::Result<Self> {
        let index = newest_index(&dir, name)?.unwrap_or(0);
        let file = append_in(&dir, name, index)?;
        let written = file.metadata()?.len();
        Ok(Self {
            dir,
            name: name.to_owned(),
            base,
            max_files: max_files.max(1),
            max_bytes: max_bytes.max(1),
            index,
            file,
            written,
        })
    }

    /// [`Self::open_in`] for `base` beneath `root` (an absolute path under it, or one
    /// relative to it).
    pub fn open_beneath(
        root: &Beneath,
        base: &Path,
        max_files: u32,
        max_bytes: u64,
    ) -> std::io::Result<Self> {
        let (dir, name) = root.parent(base)?;
        Self::open_in(
            Arc::new(dir),
            name,
            root.path().join(root.relative(base)?),
            max_files,
            max_bytes,
        )
    }

    /// Path of the file being written.
    pub fn current_path(&self) -> PathBuf {
        let mut p = self.base.clone().into_os_string();
        p.push(format!(".{}", self.index));
        PathBuf::from(p)
    }

    /// Write everything, rotating at the size limit (a write may span files).
    pub fn write_all(&mut self, mut buf: &[u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            if self.written >= self.max_bytes {
                self.rotate()?;
            }
            let room = (self.max_bytes - self.written) as usize;
            let n = room.min(buf.len());
            self.file.write_all(&buf[..n])?;
            self.written += n as u64;
            buf = &buf[n..];
        }
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        self.index += 1;
        self.file = append_in(&self.dir, &self.name, self.index)?;
        self.written = 0;
        if self.index >= self.max_files {
            // Remove every file older than the newest `max_files` (unlinking a link
            // removes the link, never what it names).
            let oldest_kept = self.index + 1 - self.max_files;
            for i in (0..oldest_kept).rev() {
                let old = indexed(&self.name, i);
                match rustix::fs::unlinkat(
                    &*self.dir,
                    old.as_os_str(),
                    rustix::fs::AtFlags::empty(),
                ) {
                    Ok(()) => {}
                    Err(rustix::io::Errno::NOENT) => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}

/// Where one of a task process's streams goes, opened by the host.
#[derive(Debug)]
pub enum Output {
    /// Nowhere (no path, or `/dev/null`).
    Discard,
    /// A FIFO, device or socket that already stood at the path (Nomad's logmon hands its
    /// drivers FIFOs it reads and rotates itself), written as it is.
    Stream(File),
    /// One file appended to (no rotation asked for).
    Plain(File),
    /// Rotated log files.
    Rotating(RotatingFile),
}

/// Open the stream `path` of a task process: beneath `root` (the allocation dir; an empty
/// path, or `/dev/null`, is no output), with rotation when `rotate` gives (max files, max
/// bytes per file). Nothing on the way is followed if it is a link.
pub fn open_output(root: &Path, path: &str, rotate: Option<(u32, u64)>) -> std::io::Result<Output> {
    if path.is_empty() || path == "/dev/null" {
        return Ok(Output::Discard);
    }
    if root.as_os_str().is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{path}: an output file outside any task's allocation dir"),
        ));
    }
    let root = Beneath::open(root)?;
    let (dir, name) = root.parent(Path::new(path))?;
    if let Ok(st) = rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        use rustix::fs::FileType;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Fifo | FileType::CharacterDevice | FileType::Socket => {
                return Ok(Output::Stream(open_stream_in(&dir, name)?));
            }
            _ => {}
        }
    }
    match rotate {
        Some((files, bytes)) => Ok(Output::Rotating(RotatingFile::open_in(
            Arc::new(dir),
            name,
            PathBuf::from(path),
            files,
            bytes,
        )?)),
        None => Ok(Output::Plain(
            safefs::open_in(
                &dir,
                name,
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
                Mode::from_raw_mode(0o644),
            )?
            .into(),
        )),
    }
}

/// Open the FIFO (or device) `name` in `dir` for writing without waiting for a reader (no
/// reader is an error, "No such device or address", rather than a write end that blocks
/// its opener for ever), then switch back to blocking writes.
fn open_stream_in(dir: &OwnedFd, name: &OsStr) -> std::io::Result<File> {
    let fd = safefs::open_in(
        dir,
        name,
        OFlags::WRONLY | OFlags::APPEND | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK)?;
    Ok(fd.into())
}

/// The highest `N` such that `<name>.N` is a file in `dir` (a link of that name is no
/// file of ours).
fn newest_index(dir: &OwnedFd, name: &OsStr) -> std::io::Result<Option<u32>> {
    let Some(name) = name.to_str() else {
        return Ok(None);
    };
    let prefix = format!("{name}.");
    Ok(safefs::files(dir)?
        .into_iter()
        .filter_map(|(f, _)| f.to_str()?.strip_prefix(&prefix)?.parse::<u32>().ok())
        .max())
}

/// Copy `reader` into `out` until EOF (when every writer of the pipe has closed it).
pub async fn pump(mut reader: impl AsyncRead + Unpin, mut out: RotatingFile) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                if let Err(e) = out.write_all(&buf[..n]) {
                    tracing::warn!(path = %out.current_path().display(), error = %e, "writing task log failed; output dropped");
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "task log pipe closed");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = Beneath::open(dir.path()).unwrap();
        let base = dir.path().join("web.stdout");
        let indexed = |_: &Path, i: u32| dir.path().join(format!("web.stdout.{i}"));
        let mut f = RotatingFile::open_beneath(&root, &base, 3, 10).unwrap();
        f.write_all(b"0123456789abcdefghij0123456789ABCDE").unwrap();
        // 35 bytes in 10-byte files: indexes 0..=3, only 1..=3 kept.
        assert!(!indexed(&base, 0).exists());
        assert_eq!(std::fs::read(indexed(&base, 1)).unwrap(), b"abcdefghij");
        assert_eq!(std::fs::read(indexed(&base, 2)).unwrap(), b"0123456789");
        assert_eq!(std::fs::read(indexed(&base, 3)).unwrap(), b"ABCDE");
        drop(f);
        // Reopening resumes in the newest file.
        let mut f = RotatingFile::open_beneath(&root, &base, 3, 10).unwrap();
        f.write_all(b"FGHIJK").unwrap();
        assert_eq!(std::fs::read(indexed(&base, 3)).unwrap(), b"ABCDEFGHIJ");
        assert_eq!(std::fs::read(indexed(&base, 4)).unwrap(), b"K");
        assert!(!indexed(&base, 1).exists());
    }

    #[test]
    fn a_planted_link_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let alloc = dir.path().join("a1");
        let logs = alloc.join("alloc/logs");
        std::fs::create_dir_all(&logs).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        // The newest index and the next one are links to a file outside.
        std::os::unix::fs::symlink(&victim, logs.join("t.stderr.99")).unwrap();
        std::os::unix::fs::symlink(&victim, logs.join("t.stderr.0")).unwrap();
        let base = logs.join("t.stderr");
        let Output::Rotating(mut f) =
            open_output(&alloc, &base.display().to_string(), Some((2, 4))).unwrap()
        else {
            panic!("rotating")
        };
        f.write_all(b"0123456789").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        // The link at index 0 was replaced by a file of ours, since rotated away; the newest
        // files are ours, and the link at 99 was never taken for the newest file.
        for i in [1, 2] {
            let m = std::fs::symlink_metadata(logs.join(format!("t.stderr.{i}"))).unwrap();
            assert!(m.is_file(), "t.stderr.{i}");
        }
        assert!(
            std::fs::symlink_metadata(logs.join("t.stderr.99"))
                .unwrap()
                .is_symlink()
        );
        // A link as the logs folder itself, and a path outside the root.
        std::fs::rename(&logs, alloc.join("alloc/real")).unwrap();
        std::os::unix::fs::symlink(dir.path(), &logs).unwrap();
        assert!(open_output(&alloc, &base.display().to_string(), Some((2, 4))).is_err());
        assert!(open_output(&alloc, &victim.display().to_string(), None).is_err());
        assert!(matches!(
            open_output(&alloc, "/dev/null", None).unwrap(),
            Output::Discard
        ));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    }
}
