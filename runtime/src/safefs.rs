//! Files in folders a task or a component can write, as the host (often root) touches them:
//! always beneath a root the host made, one path component at a time, never through a
//! symbolic link (`O_NOFOLLOW` on every step, `AT_SYMLINK_NOFOLLOW` for ownership).
//!
//! A task's dir, the alloc dir and its logs are written by the task (an `exec` task owns
//! them) and by hook components (`task_dir` grant). Whatever they leave there — a link to
//! `/etc/shadow` named like a log file, a folder swapped for a link to `/` — the agent and
//! the task executor reach only what lies beneath the allocation dir: a link met on the way
//! is an error (`ELOOP`, "Too many levels of symbolic links"), never followed.
//!
//! [`Beneath`] is a root opened once; its methods take paths relative to it, or absolute
//! paths that must lie under it by their text (no `..`).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

/// A folder the host made, opened, that paths are resolved beneath.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
    path: PathBuf,
}

/// `path`'s parts, when it is relative and has no `..` (`.` parts are dropped).
fn parts(path: &Path) -> io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{}: not a plain relative path", path.display()),
                ));
            }
        }
    }
    Ok(out)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Open `name` (one path component) in `dir` without following a link.
pub fn open_in(dir: impl AsFd, name: &OsStr, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?}: not one path component"),
        ));
    }
    Ok(rustix::fs::openat(
        dir,
        name,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )?)
}

impl Beneath {
    /// Open the root `path` (a folder the host made; links above it are the operator's).
    pub fn open(path: &Path) -> io::Result<Self> {
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("{}: {e}", path.display()),
            )
        })?;
        Ok(Self {
            root,
            path: path.to_path_buf(),
        })
    }

    /// A root already open (`fd`, a folder reached safely), known by `path` in messages.
    pub fn from_fd(fd: OwnedFd, path: &Path) -> Self {
        Self {
            root: fd,
            path: path.to_path_buf(),
        }
    }

    /// The root folder, open.
    pub fn fd(&self) -> &OwnedFd {
        &self.root
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path` relative to the root: a relative path as it is, an absolute one only if it
    /// lies under the root by its text. Neither may hold `..`.
    pub fn relative<'p>(&self, path: &'p Path) -> io::Result<&'p Path> {
        let rel = if path.is_absolute() {
            path.strip_prefix(&self.path).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} is not under {}", path.display(), self.path.display()),
                )
            })?
        } else {
            path
        };
        parts(rel)?;
        Ok(rel)
    }

    /// The folder `path` (see [`Self::relative`]), every step without following a link.
    pub fn dir(&self, path: &Path) -> io::Result<OwnedFd> {
        let rel = self.relative(path)?;
        let mut cur = rustix::io::dup(&self.root)?;
        for part in parts(rel)? {
            cur = rustix::fs::openat(&cur, part, dir_flags(), Mode::empty())
                .map_err(|e| step_error(e, &self.path, rel))?;
        }
        Ok(cur)
    }

    /// The folder `path`, made where missing with `mode` (each step made or opened
    /// without following a link).
    pub fn make_dirs(&self, path: &Path, mode: u32) -> io::Result<OwnedFd> {
        let rel = self.relative(path)?;
        let mut cur = rustix::io::dup(&self.root)?;
        for part in parts(rel)? {
            match rustix::fs::mkdirat(&cur, part, Mode::from_raw_mode(mode)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(step_error(e, &self.path, rel)),
            }
            cur = rustix::fs::openat(&cur, part, dir_flags(), Mode::empty())
                .map_err(|e| step_error(e, &self.path, rel))?;
        }
        Ok(cur)
    }

    /// The folder holding `path` and `path`'s last component.
    pub fn parent<'p>(&self, path: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
        let rel = self.relative(path)?;
        let name = rel.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: names no file", path.display()),
            )
        })?;
        let dir = self.dir(rel.parent().unwrap_or(Path::new("")))?;
        Ok((dir, name))
    }

    /// Open the file `path` with `flags` (and `mode` when it is made), never through a link
    /// (a link as the file itself is `ELOOP`).
    pub fn open_file(&self, path: &Path, flags: OFlags, mode: u32) -> io::Result<std::fs::File> {
        let (dir, name) = self.parent(path)?;
        let fd = open_in(&dir, name, flags, Mode::from_raw_mode(mode))?;
        Ok(std::fs::File::from(fd))
    }
}

fn step_error(e: rustix::io::Errno, root: &Path, rel: &Path) -> io::Error {
    let what = if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
        " (a link or a file where a folder should be: not followed)"
    } else {
        ""
    };
    io::Error::new(
        io::Error::from(e).kind(),
        format!("{}: {e}{what}", root.join(rel).display()),
    )
}

/// Set `mode` on the folder or file `fd` (opened without following a link).
pub fn chmod(fd: impl AsFd, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::fchmod(fd, Mode::from_raw_mode(mode))?)
}

/// Give `name` in `dir` to `uid`/`gid`, not following it if it is a link.
pub fn chown_in(dir: impl AsFd, name: &OsStr, uid: u32, gid: u32) -> io::Result<()> {
    Ok(rustix::fs::chownat(
        dir,
        name,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
        AtFlags::SYMLINK_NOFOLLOW,
    )?)
}

/// The entries of the folder `dir` that are themselves folders (links are not), by name.
pub fn subdirs(dir: impl AsFd) -> io::Result<Vec<std::ffi::OsString>> {
    let mut out = Vec::new();
    let fd = rustix::io::dup(dir)?;
    for e in rustix::fs::Dir::read_from(&fd)? {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let st = rustix::fs::statat(&fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            out.push(name);
        }
    }
    Ok(out)
}

/// The entries of `dir` that are regular files (links are not), with their sizes.
pub fn files(dir: impl AsFd) -> io::Result<Vec<(std::ffi::OsString, u64)>> {
    let mut out = Vec::new();
    let fd = rustix::io::dup(dir)?;
    for e in rustix::fs::Dir::read_from(&fd)? {
        let e = e?;
        let name = OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
        let Ok(st) = rustix::fs::statat(&fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile {
            out.push((name, st.st_size as u64));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_on_the_way_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("alloc1");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("alloc/logs")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        symlink(&outside, root.join("alloc/escape")).unwrap();
        symlink(outside.join("secret"), root.join("alloc/logs/t.stdout.0")).unwrap();
        symlink("../../../outside", root.join("rel")).unwrap();
        let b = Beneath::open(&root).unwrap();

        // A link as a folder on the way, as the file itself, relative or absolute: refused.
        let e = b.dir(Path::new("alloc/escape")).unwrap_err();
        assert!(e.to_string().contains("not followed"), "{e}");
        assert!(b.dir(Path::new("rel")).is_err());
        assert!(b.make_dirs(Path::new("rel/x"), 0o755).is_err());
        assert!(!outside.join("x").exists());
        let e = b
            .open_file(
                Path::new("alloc/logs/t.stdout.0"),
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
                0o644,
            )
            .unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error()),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "s"
        );

        // `..` and paths outside the root by their text are refused before any open.
        for bad in ["alloc/../../outside", "/etc", "../outside"] {
            assert!(b.dir(Path::new(bad)).is_err(), "{bad}");
        }
        // What lies beneath, as it should.
        let logs = b.make_dirs(&root.join("alloc/logs/sub"), 0o755).unwrap();
        drop(logs);
        let f = b
            .open_file(
                &root.join("alloc/logs/t.stdout.1"),
                OFlags::WRONLY | OFlags::CREATE,
                0o644,
            )
            .unwrap();
        drop(f);
        let logs = b.dir(Path::new("alloc/logs")).unwrap();
        let names: Vec<_> = files(&logs).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["t.stdout.1"], "the planted link is no file of ours");
        assert_eq!(subdirs(&logs).unwrap(), ["sub"]);
    }
}
