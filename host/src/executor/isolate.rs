//! Confining a task process (the `exec` driver's isolation): namespaces, a chroot of the
//! task dir with read-only binds of the host's `chroot_env`, a minimal `/dev`, another
//! user, no_new_privs and a cgroup, all set up in the child between its clone and its
//! exec (see `clone.rs`).
//!
//! Everything that allocates or can fail with a useful message (users, paths, mount
//! points, the cgroup) is done before the clone, in [`prepare`]; the child ([`Prepared::
//! enter`]) only makes syscalls on what was prepared. They go through `rustix`, which is
//! already the executor's OS layer: raw syscalls on `&CStr`s, so nothing in the child
//! allocates or takes a libc lock (libc's `setuid` and friends would broadcast to the
//! executor's other threads, whose memory the child shares).
//!
//! The namespaces are clone flags ([`Prepared::clone_flags`]): the task is born in them,
//! PID 1 of its own PID namespace, which the kernel tears down when it exits. As every PID
//! 1, the task ignores signals it has no handler for, except SIGKILL: a stop escalates to
//! SIGKILL after the kill timeout.

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, FileType, Mode};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

use super::cgroup::{Cgroup, CgroupError};
use crate::runtime::types::Isolation;

/// Why a process could not be isolated as asked.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// The request cannot be carried out (names the field).
    #[error("{0}")]
    Invalid(String),
    /// A host step failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// The cgroup.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}

fn cstr(p: &Path) -> Result<CString, IsolateError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| IsolateError::Invalid(format!("path {} holds a NUL byte", p.display())))
}

fn step(what: impl Into<String>) -> impl FnOnce(io::Error) -> IsolateError {
    let what = what.into();
    move |source| IsolateError::Io { what, source }
}

/// `/dev` nodes of the chroot: name, major, minor (Nomad's minimal set).
const DEV_NODES: &[(&str, u32, u32)] = &[
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

/// What the child does, prepared by the parent.
pub struct Prepared {
    flags: UnshareFlags,
    root: Option<CString>,
    /// (host source, mount point under the root, read-only).
    binds: Vec<(CString, CString, bool)>,
    dev: Option<CString>,
    dev_nodes: Vec<(CString, u32, u32)>,
    dev_links: Vec<(CString, CString)>,
    proc_dir: Option<CString>,
    cwd: CString,
    uid: u32,
    gid: u32,
    no_new_privs: bool,
    cgroup_procs: Vec<OwnedFd>,
    /// The program as the child execs it (inside the chroot).
    pub program: PathBuf,
    /// The process's cgroup.
    pub cgroup: Option<Cgroup>,
}

/// `(uid, gid)` of `user` (a name or a number) from `/etc/passwd`; empty is `nobody`.
pub fn lookup_user(user: &str) -> Result<(u32, u32), IsolateError> {
    let user = if user.is_empty() { "nobody" } else { user };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    for line in passwd.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 4 && (f[0] == user || f[2] == user) {
            let uid = f[2].parse().ok();
            let gid = f[3].parse().ok();
            if let (Some(u), Some(g)) = (uid, gid) {
                return Ok((u, g));
            }
        }
    }
    match user.parse::<u32>() {
        Ok(n) => Ok((n, n)),
        Err(_) => Err(IsolateError::Invalid(format!(
            "user: {user:?} is not in /etc/passwd"
        ))),
    }
}

/// `path` as seen inside the chroot at `root` with `binds`: under the root, relative to it;
/// under a bind, at its task path.
fn inside(path: &Path, root: &Path, binds: &[crate::runtime::types::Mount]) -> Option<PathBuf> {
    if let Ok(rest) = path.strip_prefix(root) {
        return Some(Path::new("/").join(rest));
    }
    binds.iter().find_map(|b| {
        let rest = path.strip_prefix(&b.host_path).ok()?;
        Some(Path::new(&b.task_path).join(rest))
    })
}

/// Prepare everything the child will do for process `id`: make the cgroup and the mount
/// points, resolve the user and the paths.
pub fn prepare(
    id: u64,
    program: &str,
    cwd: &str,
    iso: &Isolation,
) -> Result<Prepared, IsolateError> {
    let (uid, gid) = lookup_user(&iso.user)?;
    let mut flags = UnshareFlags::empty();
    if iso.ipc_namespace {
        flags |= UnshareFlags::NEWIPC;
    }
    if iso.uts_namespace {
        flags |= UnshareFlags::NEWUTS;
    }
    if iso.pid_namespace {
        flags |= UnshareFlags::NEWPID;
    }
    let mut p = Prepared {
        flags,
        root: None,
        binds: Vec::new(),
        dev: None,
        dev_nodes: Vec::new(),
        dev_links: Vec::new(),
        proc_dir: None,
        cwd: c"/".into(),
        uid,
        gid,
        no_new_privs: iso.no_new_privs,
        cgroup_procs: Vec::new(),
        program: PathBuf::from(program),
        cgroup: None,
    };
    if !iso.chroot.is_empty() {
        let root = PathBuf::from(&iso.chroot);
        if !root.is_dir() {
            return Err(IsolateError::Invalid(format!(
                "chroot: {} is not a directory",
                root.display()
            )));
        }
        p.flags |= UnshareFlags::NEWNS;
        p.program = inside(Path::new(program), &root, &iso.binds).ok_or_else(|| {
            IsolateError::Invalid(format!(
                "command: {program} is neither in the chroot {} nor under one of its binds",
                root.display()
            ))
        })?;
        if !cwd.is_empty() {
            p.cwd = cstr(&inside(Path::new(cwd), &root, &[]).unwrap_or_else(|| "/".into()))?;
        }
        let mut binds = iso.binds.clone();
        // Parents before children, so a nested bind lands on its parent's mount.
        binds.sort_by(|a, b| a.task_path.cmp(&b.task_path));
        for b in &binds {
            let src = Path::new(&b.host_path);
            let dst = root.join(b.task_path.trim_start_matches('/'));
            let Ok(meta) = std::fs::symlink_metadata(src) else {
                continue; // Nomad's chroot_env binds only what exists
            };
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(step(format!("mkdir {}", parent.display())))?;
            }
            if meta.file_type().is_symlink() {
                // /bin -> usr/bin on a merged-/usr host: the same link inside.
                let target =
                    std::fs::read_link(src).map_err(step(format!("readlink {}", src.display())))?;
                if std::fs::symlink_metadata(&dst).is_err() {
                    std::os::unix::fs::symlink(&target, &dst)
                        .map_err(step(format!("symlink {}", dst.display())))?;
                }
                continue;
            }
            if meta.is_dir() {
                std::fs::create_dir_all(&dst).map_err(step(format!("mkdir {}", dst.display())))?;
            } else if std::fs::symlink_metadata(&dst).is_err() {
                std::fs::File::create(&dst).map_err(step(format!("create {}", dst.display())))?;
            }
            p.binds.push((cstr(src)?, cstr(&dst)?, b.read_only));
        }
        let dev = root.join("dev");
        std::fs::create_dir_all(&dev).map_err(step(format!("mkdir {}", dev.display())))?;
        for (name, major, minor) in DEV_NODES {
            p.dev_nodes.push((cstr(&dev.join(name))?, *major, *minor));
        }
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            p.dev_links
                .push((cstr(Path::new(target))?, cstr(&dev.join(name))?));
        }
        p.dev = Some(cstr(&dev)?);
        if iso.pid_namespace {
            let proc_dir = root.join("proc");
            std::fs::create_dir_all(&proc_dir)
                .map_err(step(format!("mkdir {}", proc_dir.display())))?;
            p.proc_dir = Some(cstr(&proc_dir)?);
        }
        give_dirs(&root, &binds, uid, gid)?;
        p.root = Some(cstr(&root)?);
    } else if !cwd.is_empty() {
        p.cwd = cstr(Path::new(cwd))?;
    }
    let cg = Cgroup::create(id, iso)?;
    match cg.procs_files() {
        Ok(files) => p.cgroup_procs = files.into_iter().map(OwnedFd::from).collect(),
        Err(e) => {
            cg.remove();
            return Err(e.into());
        }
    }
    p.cgroup = Some(cg);
    Ok(p)
}

/// The task's user owns what it writes to, as Nomad drops a chrooted task dir's
/// permissions: the dirs directly under the chroot (`local`, `secrets`, `tmp`, …, not the
/// binds, `dev` or `proc`) and directly under each writable bind (the alloc dir's `data`,
/// `tmp`, `logs`). Without it an unprivileged task could not write a file of its own.
fn give_dirs(
    root: &Path,
    binds: &[crate::runtime::types::Mount],
    uid: u32,
    gid: u32,
) -> Result<(), IsolateError> {
    let mut dirs = Vec::new();
    let mounted: Vec<PathBuf> = binds
        .iter()
        .map(|b| root.join(b.task_path.trim_start_matches('/')))
        .collect();
    let children = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    for d in children(root) {
        let reserved = d.ends_with("dev") || d.ends_with("proc");
        if !reserved && !mounted.iter().any(|m| m.starts_with(&d)) {
            dirs.push(d);
        }
    }
    for b in binds.iter().filter(|b| !b.read_only) {
        dirs.push(PathBuf::from(&b.host_path));
        dirs.extend(children(Path::new(&b.host_path)));
    }
    for d in dirs {
        std::os::unix::fs::chown(&d, Some(uid), Some(gid))
            .map_err(step(format!("chown {}", d.display())))?;
    }
    Ok(())
}

impl Prepared {
    /// The namespaces to clone the child into.
    pub fn clone_flags(&self) -> i32 {
        self.flags.bits() as i32
    }

    /// In the child, born in its namespaces, before exec: join the cgroup, build the
    /// chroot, enter it, drop to the user. Syscalls on prepared data only; an error names
    /// the step.
    pub fn enter(&self) -> Result<(), (&'static str, rustix::io::Errno)> {
        let fail = |what: &'static str| move |e: rustix::io::Errno| (what, e);
        for fd in &self.cgroup_procs {
            rustix::io::write(fd, b"0").map_err(fail("joining the cgroup"))?;
        }
        if let Some(root) = &self.root {
            // Nothing mounted here reaches the host, nor the host's later mounts here.
            rustix::mount::mount_change(
                c"/",
                MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
            )
            .map_err(fail("making / private"))?;
            for (src, dst, ro) in &self.binds {
                rustix::mount::mount_bind_recursive(src.as_c_str(), dst.as_c_str())
                    .map_err(fail("bind-mounting chroot_env"))?;
                if *ro {
                    rustix::mount::mount_remount(
                        dst.as_c_str(),
                        MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID,
                        c"",
                    )
                    .map_err(fail("making a bind read-only"))?;
                }
            }
            if let Some(dev) = &self.dev {
                rustix::mount::mount(
                    c"tmpfs",
                    dev.as_c_str(),
                    c"tmpfs",
                    MountFlags::NOSUID | MountFlags::NOEXEC,
                    Some(c"mode=755,size=64k"),
                )
                .map_err(fail("mounting /dev"))?;
                let old = rustix::process::umask(Mode::empty());
                for (path, major, minor) in &self.dev_nodes {
                    rustix::fs::mknodat(
                        CWD,
                        path.as_c_str(),
                        FileType::CharacterDevice,
                        Mode::from_raw_mode(0o666),
                        rustix::fs::makedev(*major, *minor),
                    )
                    .map_err(fail("creating /dev nodes"))?;
                }
                rustix::process::umask(old);
                for (target, link) in &self.dev_links {
                    rustix::fs::symlinkat(target.as_c_str(), CWD, link.as_c_str())
                        .map_err(fail("linking /dev/fd"))?;
                }
            }
            if let Some(proc_dir) = &self.proc_dir {
                rustix::mount::mount(
                    c"proc",
                    proc_dir.as_c_str(),
                    c"proc",
                    MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                    None,
                )
                .map_err(fail("mounting /proc"))?;
            }
            rustix::process::chroot(root.as_c_str()).map_err(fail("chroot"))?;
        }
        rustix::process::chdir(self.cwd.as_c_str()).map_err(fail("chdir"))?;
        rustix::thread::set_thread_groups(&[]).map_err(fail("dropping groups"))?;
        rustix::thread::set_thread_res_gid(
            rustix::fs::Gid::from_raw(self.gid),
            rustix::fs::Gid::from_raw(self.gid),
            rustix::fs::Gid::from_raw(self.gid),
        )
        .map_err(fail("setgid"))?;
        // The child has one thread, so the thread's ids are the process's.
        rustix::thread::set_thread_res_uid(
            rustix::fs::Uid::from_raw(self.uid),
            rustix::fs::Uid::from_raw(self.uid),
            rustix::fs::Uid::from_raw(self.uid),
        )
        .map_err(fail("setuid"))?;
        if self.no_new_privs {
            rustix::thread::set_no_new_privs(true).map_err(fail("no_new_privs"))?;
        }
        Ok(())
    }
}
