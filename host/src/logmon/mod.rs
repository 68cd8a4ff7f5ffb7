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

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncReadExt};

/// A size-rotated set of log files.
#[derive(Debug)]
pub struct RotatingFile {
    base: PathBuf,
    max_files: u32,
    max_bytes: u64,
    index: u32,
    file: File,
    written: u64,
    /// Writing to a FIFO or device at `base` itself: no rotation.
    stream: bool,
}

fn indexed(base: &Path, i: u32) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

impl RotatingFile {
    /// Open the newest existing file of `base` (or `<base>.0`) for appending.
    pub fn open(base: &Path, max_files: u32, max_bytes: u64) -> std::io::Result<Self> {
        if is_stream(base) {
            return Ok(Self {
                base: base.to_path_buf(),
                max_files: 1,
                max_bytes: u64::MAX,
                index: 0,
                file: open_append(base)?,
                written: 0,
                stream: true,
            });
        }
        let max_files = max_files.max(1);
        let max_bytes = max_bytes.max(1);
        let index = newest_index(base)?.unwrap_or(0);
        let path = indexed(base, index);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            base: base.to_path_buf(),
            max_files,
            max_bytes,
            index,
            file,
            written,
            stream: false,
        })
    }

    /// Path of the file being written.
    pub fn current_path(&self) -> PathBuf {
        if self.stream {
            return self.base.clone();
        }
        indexed(&self.base, self.index)
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
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(indexed(&self.base, self.index))?;
        self.written = 0;
        if self.index >= self.max_files {
            // Remove every file older than the newest `max_files`.
            let oldest_kept = self.index + 1 - self.max_files;
            for i in (0..oldest_kept).rev() {
                match std::fs::remove_file(indexed(&self.base, i)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// Whether `path` exists as something other than a regular file or a folder: a FIFO, a
/// device or a socket, written as it is.
pub fn is_stream(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Open `path` for appending, creating a regular file. A FIFO is opened without waiting
/// for a reader (no reader is an error, "No such device or address", rather than a write
/// end that blocks its opener for ever), then switched back to blocking writes.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(file)
}

/// The highest `N` such that `<base>.N` exists.
fn newest_index(base: &Path) -> std::io::Result<Option<u32>> {
    let Some(dir) = base.parent() else {
        return Ok(None);
    };
    let Some(name) = base.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let prefix = format!("{name}.");
    let mut newest = None;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        if let Some(i) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|s| s.parse::<u32>().ok())
        {
            newest = newest.max(Some(i));
        }
    }
    Ok(newest)
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
        let base = dir.path().join("web.stdout");
        let mut f = RotatingFile::open(&base, 3, 10).unwrap();
        f.write_all(b"0123456789abcdefghij0123456789ABCDE").unwrap();
        // 35 bytes in 10-byte files: indexes 0..=3, only 1..=3 kept.
        assert!(!indexed(&base, 0).exists());
        assert_eq!(std::fs::read(indexed(&base, 1)).unwrap(), b"abcdefghij");
        assert_eq!(std::fs::read(indexed(&base, 2)).unwrap(), b"0123456789");
        assert_eq!(std::fs::read(indexed(&base, 3)).unwrap(), b"ABCDE");
        drop(f);
        // Reopening resumes in the newest file.
        let mut f = RotatingFile::open(&base, 3, 10).unwrap();
        f.write_all(b"FGHIJK").unwrap();
        assert_eq!(std::fs::read(indexed(&base, 3)).unwrap(), b"ABCDEFGHIJ");
        assert_eq!(std::fs::read(indexed(&base, 4)).unwrap(), b"K");
        assert!(!indexed(&base, 1).exists());
    }
}
