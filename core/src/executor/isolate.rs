//! Confining a task process (the `exec` driver's isolation): namespaces, a chroot of the
//! task dir with read-only binds of the operator's `chroot_env`, a minimal `/dev`, another
//! user (never one the grant denies: root by default), no capabilities, no_new_privs and
//! a cgroup with `pids.max`, all set up in the child between its clone and its exec (see
//! `clone.rs`). What the host decided (`paddock_runtime::host_api::process::checks`) is what
//! arrives here: the chroot is the task's own dir, the binds the operator's.
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

use rustix::fs::{CWD, FileType, Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

use super::cgroup::{Cgroup, CgroupError};
use crate::runtime::types::Isolation;
use crate::safefs::{self, Beneath};

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

/// A place in the task dir the child mounts on: its path's parts below the task dir, each
/// opened in the child with `O_NOFOLLOW` (a link met is an error, never followed), and
/// whether it is a folder.
struct MountPoint {
    parts: Vec<CString>,
    dir: bool,
}

/// What the child does, prepared by the parent. The mount points are made in the task dir
/// here (without following a link, see [`crate::safefs`]); the child opens them again in
/// its own mount namespace (a mount must land on a place of the caller's namespace), one
/// component at a time without following a link, and mounts on the open fd
/// (`/proc/self/fd/N`). So nothing a task or a hook left in its dir can send a mount, a
/// chown or a file the host makes elsewhere.
pub struct Prepared {
    flags: UnshareFlags,
    /// The task dir: the child opens it, mounts beneath it, then enters it with `fchdir`
    /// and `chroot(".")`.
    root: CString,
    /// (host source, mount point, read-only).
    binds: Vec<(CString, MountPoint, bool)>,
    dev: MountPoint,
    /// Folders under `/dev` the reserved nodes go in, made after entering the chroot.
    dev_dirs: Vec<CString>,
    /// Paths inside the chroot, made after entering it.
    dev_nodes: Vec<(CString, u32, u32)>,
    dev_links: Vec<(CString, CString)>,
    proc_dir: Option<MountPoint>,
    cwd: CString,
    uid: u32,
    gid: u32,
    /// The highest capability number this kernel knows (all are dropped).
    last_cap: u32,
    cgroup_procs: Vec<OwnedFd>,
    /// The program as the child execs it (inside the chroot).
    pub program: PathBuf,
    /// The process's cgroup.
    pub cgroup: Option<Cgroup>,
}

/// The mount point `rel` (relative to the task dir) for the child to open again.
fn mount_point(rel: &Path, dir: bool) -> Result<MountPoint, IsolateError> {
    let parts = rel
        .components()
        .map(|c| match c {
            std::path::Component::Normal(n) => CString::new(n.as_bytes())
                .map_err(|_| IsolateError::Invalid(format!("{}: a NUL byte", rel.display()))),
            _ => Err(IsolateError::Invalid(format!(
                "{}: not a plain path inside the chroot",
                rel.display()
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MountPoint { parts, dir })
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

/// Refuse a user the grant denies, by its resolved uid and gid (so `0`, `root` and any
/// other name of uid 0 are the same user).
fn check_user(user: &str, uid: u32, gid: u32, iso: &Isolation) -> Result<(), IsolateError> {
    if iso.denied_uids.contains(uid) {
        return Err(IsolateError::Invalid(format!(
            "user: running as uid {uid} ({user:?}) is disallowed (grant denied_host_uids)"
        )));
    }
    if iso.denied_gids.contains(gid) {
        return Err(IsolateError::Invalid(format!(
            "user: running as gid {gid} ({user:?}) is disallowed (grant denied_host_gids)"
        )));
    }
    Ok(())
}

/// Prepare everything the child will do for process `id`: make the cgroup and the mount
/// points, resolve the user and the paths. `alloc_root` is the allocation dir the chroot
/// (the task dir) lies beneath.
pub fn prepare(
    id: u64,
    program: &str,
    cwd: &str,
    iso: &Isolation,
    alloc_root: &str,
) -> Result<Prepared, IsolateError> {
    let (uid, gid) = lookup_user(&iso.user)?;
    check_user(&iso.user, uid, gid, iso)?;
    if iso.chroot.is_empty() || alloc_root.is_empty() {
        return Err(IsolateError::Invalid(
            "chroot: an isolated process is rooted at its own task dir, and none was given".into(),
        ));
    }
    let mut flags = UnshareFlags::NEWNS;
    if iso.ipc_namespace {
        flags |= UnshareFlags::NEWIPC;
    }
    if iso.uts_namespace {
        flags |= UnshareFlags::NEWUTS;
    }
    if iso.pid_namespace {
        flags |= UnshareFlags::NEWPID;
    }
    let alloc = Beneath::open(Path::new(alloc_root)).map_err(step("opening the allocation dir"))?;
    let root_path = PathBuf::from(&iso.chroot);
    let task = Beneath::from_fd(
        alloc.dir(&root_path).map_err(step(format!(
            "opening the task dir {}",
            root_path.display()
        )))?,
        &root_path,
    );
    let mut binds_made = Vec::new();
    // Only what exists is bound (Nomad binds only the chroot_env paths that exist); a
    // program or working dir under a missing one is not looked for in the task dir.
    let mut binds: Vec<crate::runtime::types::Mount> = iso
        .binds
        .iter()
        .filter(|b| std::fs::symlink_metadata(&b.host_path).is_ok())
        .cloned()
        .collect();
    // Parents before children, so a nested bind lands on its parent's mount.
    binds.sort_by(|a, b| a.task_path.cmp(&b.task_path));
    let program_inside = inside(Path::new(program), &root_path, &binds).ok_or_else(|| {
        IsolateError::Invalid(format!(
            "command: {program} is neither in the chroot {} nor under one of its binds",
            root_path.display()
        ))
    })?;
    let cwd_inside = if cwd.is_empty() {
        c"/".to_owned()
    } else {
        cstr(&inside(Path::new(cwd), &root_path, &[]).unwrap_or_else(|| "/".into()))?
    };
    for b in &binds {
        let src = Path::new(&b.host_path);
        let rel = Path::new(b.task_path.trim_start_matches('/'));
        let Ok(meta) = std::fs::symlink_metadata(src) else {
            continue;
        };
        let made = |e: io::Error| IsolateError::Io {
            what: format!("making the mount point {} in the task dir", b.task_path),
            source: e,
        };
        let parent = task
            .make_dirs(rel.parent().unwrap_or(Path::new("")), 0o755)
            .map_err(made)?;
        let Some(name) = rel.file_name() else {
            continue; // the chroot's root itself is the task dir
        };
        if meta.file_type().is_symlink() {
            // /bin -> usr/bin on a merged-/usr host: the same link inside.
            let target =
                std::fs::read_link(src).map_err(step(format!("readlink {}", src.display())))?;
            match rustix::fs::symlinkat(&target, &parent, name) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(made(e.into())),
            }
            continue;
        }
        if meta.is_dir() {
            task.make_dirs(rel, 0o755).map_err(made)?;
        } else {
            // Non-blocking: a FIFO left under that name must not hang the executor.
            safefs::open_in(
                &parent,
                name,
                OFlags::RDONLY | OFlags::CREATE | OFlags::NONBLOCK,
                Mode::from_raw_mode(0o644),
            )
            .map_err(made)?;
        }
        binds_made.push((cstr(src)?, mount_point(rel, meta.is_dir())?, b.read_only));
    }
    task.make_dirs(Path::new("dev"), 0o755)
        .map_err(step("making /dev in the task dir"))?;
    let mut dev_nodes = Vec::new();
    for (name, major, minor) in DEV_NODES {
        dev_nodes.push((cstr(&Path::new("/dev").join(name))?, *major, *minor));
    }
    let dev_dirs = reserved_nodes(iso, &mut dev_nodes)?;
    let mut dev_links = Vec::new();
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        dev_links.push((
            cstr(Path::new(target))?,
            cstr(&Path::new("/dev").join(name))?,
        ));
    }
    let proc_dir = if iso.pid_namespace {
        task.make_dirs(Path::new("proc"), 0o555)
            .map_err(step("making /proc in the task dir"))?;
        Some(mount_point(Path::new("proc"), true)?)
    } else {
        None
    };
    give_dirs(&task, &alloc, &binds, uid, gid)?;
    let last_cap = last_cap();
    let mut p = Prepared {
        flags,
        root: cstr(&root_path)?,
        binds: binds_made,
        dev: mount_point(Path::new("dev"), true)?,
        dev_dirs,
        dev_nodes,
        dev_links,
        proc_dir,
        cwd: cwd_inside,
        uid,
        gid,
        last_cap,
        cgroup_procs: Vec::new(),
        program: program_inside,
        cgroup: None,
    };
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

/// The task's reserved device nodes (the host's, from its device reservations), added to
/// `nodes` by their numbers on the host: each a character device at a plain path under
/// `/dev`; the folders they need under `/dev`, parents first. A node already in the
/// minimal set is left as it is.
fn reserved_nodes(
    iso: &Isolation,
    nodes: &mut Vec<(CString, u32, u32)>,
) -> Result<Vec<CString>, IsolateError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut dirs = Vec::new();
    for d in &iso.device_nodes {
        let rel = d
            .task_path
            .strip_prefix("/dev/")
            .filter(|r| {
                !r.is_empty() && r.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
            })
            .ok_or_else(|| {
                IsolateError::Invalid(format!(
                    "device node {:?}: not a plain path under /dev",
                    d.task_path
                ))
            })?;
        let meta = std::fs::metadata(&d.host_path)
            .map_err(step(format!("the reserved device node {}", d.host_path)))?;
        if !meta.file_type().is_char_device() {
            return Err(IsolateError::Invalid(format!(
                "device node {:?}: not a character device",
                d.host_path
            )));
        }
        let path = cstr(Path::new(&d.task_path))?;
        if nodes.iter().any(|(p, _, _)| *p == path) {
            continue;
        }
        let mut parent = PathBuf::from("/dev");
        let parts: Vec<&str> = rel.split('/').collect();
        for p in &parts[..parts.len() - 1] {
            parent.push(p);
            let c = cstr(&parent)?;
            if !dirs.contains(&c) {
                dirs.push(c);
            }
        }
        let rdev = meta.rdev();
        nodes.push((path, rustix::fs::major(rdev), rustix::fs::minor(rdev)));
    }
    Ok(dirs)
}

/// The task's user owns what it writes to, as Nomad drops a chrooted task dir's
/// permissions: the dirs directly under the chroot (`local`, `secrets`, `tmp`, …, not the
/// binds, `dev` or `proc`) and the alloc dir with the dirs directly under it (`data`,
/// `tmp`, `logs`). Folders only, reached through the open task and allocation dirs and
/// changed without following a link: a link the task or a hook left there is skipped.
fn give_dirs(
    task: &Beneath,
    alloc: &Beneath,
    binds: &[crate::runtime::types::Mount],
    uid: u32,
    gid: u32,
) -> Result<(), IsolateError> {
    let chown = |what: String| move |e: io::Error| IsolateError::Io { what, source: e };
    let mounted: Vec<String> = binds
        .iter()
        .filter_map(|b| {
            Path::new(b.task_path.trim_start_matches('/'))
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
        })
        .collect();
    for name in safefs::subdirs(task.fd()).map_err(chown("listing the task dir".into()))? {
        let n = name.to_string_lossy();
        if n == "dev" || n == "proc" || mounted.iter().any(|m| *m == n) {
            continue;
        }
        safefs::chown_in(task.fd(), &name, uid, gid)
            .map_err(chown(format!("chown {}/{n}", task.path().display())))?;
    }
    // The alloc dir only: a writable host volume keeps its owner, as in Nomad.
    for b in binds
        .iter()
        .filter(|b| !b.read_only && b.task_path == "/alloc")
    {
        let dir = alloc
            .dir(Path::new(&b.host_path))
            .map_err(chown(format!("opening {}", b.host_path)))?;
        rustix::fs::fchown(
            &dir,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )
        .map_err(|e| chown(format!("chown {}", b.host_path))(e.into()))?;
        for name in safefs::subdirs(&dir).map_err(chown(format!("listing {}", b.host_path)))? {
            safefs::chown_in(&dir, &name, uid, gid).map_err(chown(format!(
                "chown {}/{}",
                b.host_path,
                name.to_string_lossy()
            )))?;
        }
    }
    Ok(())
}

impl Prepared {
    /// The namespaces to clone the child into.
    pub fn clone_flags(&self) -> i32 {
        self.flags.bits() as i32
    }

    /// In the child, born in its namespaces, before exec: join the cgroup, build the
    /// chroot, enter it, drop every capability and become the user. Syscalls on prepared
    /// data only; an error names the step.
    pub fn enter(&self) -> Result<(), (&'static str, rustix::io::Errno)> {
        let fail = |what: &'static str| move |e: rustix::io::Errno| (what, e);
        for fd in &self.cgroup_procs {
            rustix::io::write(fd, b"0").map_err(fail("joining the cgroup"))?;
        }
        // Nothing mounted here reaches the host, nor the host's later mounts here.
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )
        .map_err(fail("making / private"))?;
        // The task dir, opened in this mount namespace (its path is the host's: nothing a
        // task writes is above it).
        let root = rustix::fs::open(
            self.root.as_c_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(fail("opening the task dir"))?;
        for (src, at, ro) in &self.binds {
            let target = at.open(&root).map_err(fail("opening a mount point"))?;
            let dst = FdPath::of(&target);
            rustix::mount::mount_bind_recursive(src.as_c_str(), dst.as_c_str())
                .map_err(fail("bind-mounting chroot_env"))?;
            drop(target);
            if *ro {
                // Opened again, the place is the new mount (the fd held before it was made
                // is the folder underneath).
                let mounted = at.open(&root).map_err(fail("opening a bind"))?;
                rustix::mount::mount_remount(
                    FdPath::of(&mounted).as_c_str(),
                    MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID,
                    c"",
                )
                .map_err(fail("making a bind read-only"))?;
            }
        }
        let dev = self.dev.open(&root).map_err(fail("opening /dev"))?;
        rustix::mount::mount(
            c"tmpfs",
            FdPath::of(&dev).as_c_str(),
            c"tmpfs",
            MountFlags::NOSUID | MountFlags::NOEXEC,
            Some(c"mode=755,size=64k"),
        )
        .map_err(fail("mounting /dev"))?;
        drop(dev);
        if let Some(proc_dir) = &self.proc_dir {
            let at = proc_dir.open(&root).map_err(fail("opening /proc"))?;
            rustix::mount::mount(
                c"proc",
                FdPath::of(&at).as_c_str(),
                c"proc",
                MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                None,
            )
            .map_err(fail("mounting /proc"))?;
        }
        rustix::process::fchdir(&root).map_err(fail("entering the task dir"))?;
        rustix::process::chroot(c".").map_err(fail("chroot"))?;
        drop(root);
        // Inside the chroot and its own mounts from here: what these paths name is the
        // task's own.
        let old = rustix::process::umask(Mode::empty());
        for dir in &self.dev_dirs {
            match rustix::fs::mkdirat(CWD, dir.as_c_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(("creating /dev folders", e)),
            }
        }
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
        rustix::process::chdir(self.cwd.as_c_str()).map_err(fail("chdir"))?;
        drop_to(self.uid, self.gid, self.last_cap)
    }
}

/// Become `uid`:`gid` with no supplementary groups, no capability (none kept, none in the
/// bounding set up to `last_cap`, none ambient) and no_new_privs: the last step before a
/// confined process execs (an isolated task's, and an `alloc exec` into one). Syscalls
/// only; an error names the step.
pub(super) fn drop_to(
    uid: u32,
    gid: u32,
    last_cap: u32,
) -> Result<(), (&'static str, rustix::io::Errno)> {
    let fail = |what: &'static str| move |e: rustix::io::Errno| (what, e);
    // No capability can come back: not through exec, not to a uid 0 the operator
    // allowed (the bounding set is empty), not as an ambient one.
    for cap in 0..=last_cap {
        // SAFETY: prctl with integer arguments on this (child) process.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } < 0 {
            return Err((
                "dropping capabilities",
                rustix::io::Errno::from_raw_os_error(errno()),
            ));
        }
    }
    // SAFETY: as above.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    rustix::thread::set_thread_groups(&[]).map_err(fail("dropping groups"))?;
    rustix::thread::set_thread_res_gid(
        rustix::fs::Gid::from_raw(gid),
        rustix::fs::Gid::from_raw(gid),
        rustix::fs::Gid::from_raw(gid),
    )
    .map_err(fail("setgid"))?;
    // The child has one thread, so the thread's ids are the process's.
    rustix::thread::set_thread_res_uid(
        rustix::fs::Uid::from_raw(uid),
        rustix::fs::Uid::from_raw(uid),
        rustix::fs::Uid::from_raw(uid),
    )
    .map_err(fail("setuid"))?;
    // Whatever the uid, nothing is kept: effective, permitted and inheritable empty.
    let header = libc_cap_header();
    let data = [CapData::default(); 2];
    // SAFETY: capset with a valid header and two zeroed data records (version 3).
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } < 0 {
        return Err((
            "clearing capabilities",
            rustix::io::Errno::from_raw_os_error(errno()),
        ));
    }
    rustix::thread::set_no_new_privs(true).map_err(fail("no_new_privs"))?;
    Ok(())
}

/// The highest capability number the kernel knows.
pub(super) fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

impl MountPoint {
    /// Open it below `root`, one component at a time, never following a link (in the
    /// child: syscalls on prepared strings only).
    fn open(&self, root: &OwnedFd) -> Result<OwnedFd, rustix::io::Errno> {
        let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut cur = rustix::io::dup(root)?;
        for (i, part) in self.parts.iter().enumerate() {
            let last = i + 1 == self.parts.len();
            let flags = if last && !self.dir {
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC
            } else {
                dir_flags
            };
            cur = rustix::fs::openat(&cur, part.as_c_str(), flags, Mode::empty())?;
        }
        Ok(cur)
    }
}

/// `/proc/self/fd/N` for an open fd, in a buffer of its own (the child may not allocate).
struct FdPath([u8; 32]);

impl FdPath {
    fn of(fd: &OwnedFd) -> Self {
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 32];
        let prefix = b"/proc/self/fd/";
        buf[..prefix.len()].copy_from_slice(prefix);
        let mut digits = [0u8; 10];
        let mut n = fd.as_raw_fd() as u32;
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in 0..len {
            buf[prefix.len() + i] = digits[len - 1 - i];
        }
        Self(buf)
    }

    fn as_c_str(&self) -> &std::ffi::CStr {
        std::ffi::CStr::from_bytes_until_nul(&self.0).expect("NUL-terminated")
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn libc_cap_header() -> CapHeader {
    // _LINUX_CAPABILITY_VERSION_3, for this process.
    CapHeader {
        version: 0x2008_0522,
        pid: 0,
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
