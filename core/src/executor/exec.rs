//! `alloc exec`: a command run inside a running task for a caller who streams its stdio
//! (the runtime's [`ProcessHost::exec`](crate::runtime::host_api::process::ProcessHost::exec),
//! handed a driver's `task-exec` plan the runtime checked).
//!
//! The process is the agent's child, not the task executor's: it lives as long as the
//! caller's connection, so nothing of it has to outlive the agent.
//!
//! - A **joined** command (the `exec` driver's) enters the running task process's IPC, UTS,
//!   mount and PID namespaces, its root, its cgroup and its user, each read from the kernel
//!   (`/proc/<pid>`) and never from the driver, with no capability and no_new_privs (as
//!   [`super::isolate`] confines the task itself). Only a process the driver started with
//!   `spawn-isolated` can be joined. Since `setns` into a PID namespace places only the
//!   caller's later children in it, the child forks once more: the command runs in the
//!   grandchild, and the child in between waits for it, passes on its exit, and kills its
//!   whole process group when the agent tells it to stop (SIGTERM) — the kernel kills the
//!   grandchild too should the middle one die first (`PR_SET_PDEATHSIG`).
//! - A **spawned** command (the `raw_exec` driver's) is a plain process as the task's own
//!   are: its working dir opened beneath the allocation dir without following a link, the
//!   user the driver's grant allowed, no_new_privs.
//!
//! With a terminal, the command leads a new session whose controlling terminal is the
//! replica side of a pseudo-terminal; the caller writes to and reads from the primary side
//! (stderr is then part of stdout), and a resize is a `TIOCSWINSZ` on it, which the kernel
//! tells the foreground process group with SIGWINCH.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::processes::ProcessTable;
use crate::runtime::types::{ExecCommand, ExecControl, ExecProcess, ExitResult, HostError};
use crate::safefs::Beneath;

/// The namespaces a joined command enters, in this order (the mount namespace last but
/// one, the PID namespace last: it applies to the fork that follows).
const NAMESPACES: &[(&str, i32)] = &[
    ("ipc", libc::CLONE_NEWIPC),
    ("uts", libc::CLONE_NEWUTS),
    ("mnt", libc::CLONE_NEWNS),
    ("pid", libc::CLONE_NEWPID),
];

/// What a joined command's child needs, opened and read before the fork.
struct Join {
    namespaces: Vec<(OwnedFd, i32)>,
    /// The task process's root (`/proc/<pid>/root`).
    root: OwnedFd,
    /// Its cgroup's `cgroup.procs` (or v1 `tasks`) files.
    cgroup_procs: Vec<OwnedFd>,
    uid: u32,
    gid: u32,
    /// The working dir inside the root.
    cwd: CString,
    last_cap: u32,
}

/// The real uid and gid of `pid`, from `/proc/<pid>/status`.
fn ids_of(pid: u32) -> io::Result<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> io::Result<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::other(format!("/proc/{pid}/status has no {name}")))
    };
    Ok((field("Uid:")?, field("Gid:")?))
}

/// `path` (a host path the runtime checked: inside the task dir, or not under it at all)
/// as seen inside the task's root.
fn inside(path: &str, task_dir: &str) -> PathBuf {
    match Path::new(path).strip_prefix(task_dir) {
        Ok(rest) => Path::new("/").join(rest),
        Err(_) => PathBuf::from(path),
    }
}

fn cstring(p: &Path) -> Result<CString, HostError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| HostError::Invalid(format!("{} holds a NUL byte", p.display())))
}

impl Join {
    fn prepare(
        pid: u32,
        procs: Vec<std::fs::File>,
        cwd: &str,
        task_dir: &str,
    ) -> Result<Self, HostError> {
        let failed = |what: String| move |e: io::Error| HostError::Failed(format!("{what}: {e}"));
        let mut namespaces = Vec::new();
        for (name, kind) in NAMESPACES {
            let path = format!("/proc/{pid}/ns/{name}");
            let f = std::fs::File::open(&path).map_err(failed(format!("opening {path}")))?;
            namespaces.push((OwnedFd::from(f), *kind));
        }
        let root_path = format!("/proc/{pid}/root");
        let root = rustix::fs::open(
            root_path.as_str(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| HostError::Failed(format!("opening {root_path}: {e}")))?;
        let (uid, gid) =
            ids_of(pid).map_err(failed(format!("reading the user of process {pid}")))?;
        let cwd = if cwd.is_empty() {
            PathBuf::from("/")
        } else {
            inside(cwd, task_dir)
        };
        Ok(Join {
            namespaces,
            root,
            cgroup_procs: procs.into_iter().map(OwnedFd::from).collect(),
            uid,
            gid,
            cwd: cstring(&cwd)?,
            last_cap: super::isolate::last_cap(),
        })
    }

    /// In the child after the fork: join, fork again, and in the grandchild enter the
    /// root and become the task's user; the child in between never returns. Syscalls on
    /// prepared data only, nothing that allocates (the agent's other threads may hold the
    /// allocator's lock across the fork): an error is its errno, which is all `std` passes
    /// back from here anyway.
    fn enter(&self, tty: bool) -> io::Result<()> {
        for (fd, kind) in &self.namespaces {
            // SAFETY: setns on an fd we hold, in the single-threaded child.
            if unsafe { libc::setns(fd.as_raw_fd(), *kind) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        for fd in &self.cgroup_procs {
            rustix::io::write(fd, b"0")?;
        }
        // SAFETY: fork in the single-threaded child; both sides only make syscalls.
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(io::Error::last_os_error());
        }
        if child > 0 {
            middle(child);
        }
        // The grandchild, in the task's namespaces.
        // SAFETY: setsid and ioctl on our own stdin, syscalls only.
        unsafe {
            libc::setsid();
            if tty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        rustix::process::fchdir(&self.root)?;
        rustix::process::chroot(c".")?;
        rustix::process::chdir(self.cwd.as_c_str())?;
        super::isolate::drop_to(self.uid, self.gid, self.last_cap)
            .map_err(|(_, e)| io::Error::from(e))?;
        // Set after the ids changed (a change of ids clears it).
        // SAFETY: prctl with integer arguments.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        Ok(())
    }
}

/// The grandchild's pid, for the middle process's signal handler.
static GRANDCHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn kill_grandchild(_: libc::c_int) {
    let g = GRANDCHILD.load(Ordering::Relaxed);
    // SAFETY: kill and _exit are async-signal-safe.
    unsafe {
        libc::kill(-g, libc::SIGKILL);
        libc::kill(g, libc::SIGKILL);
        libc::_exit(128 + libc::SIGKILL);
    }
}

/// The process between the agent and a joined command: it holds no file (the caller's
/// stdio ends with the command's), waits for the command and exits as it did; told to stop
/// (SIGTERM, SIGHUP, SIGINT), it kills the command's process group first.
fn middle(grandchild: libc::pid_t) -> ! {
    GRANDCHILD.store(grandchild, Ordering::Relaxed);
    // SAFETY: syscalls only, in the single-threaded child; the handler only kills and exits.
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
            libc::signal(sig, kill_grandchild as *const () as libc::sighandler_t);
        }
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        let mut status = 0;
        loop {
            let r = libc::waitpid(grandchild, &mut status, 0);
            if r == grandchild {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
}

/// A pseudo-terminal: the primary side (the caller's) and the replica (the command's).
fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: posix_openpt returns a new fd we own or -1.
    let primary = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if primary < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd of ours.
    let primary = unsafe { OwnedFd::from_raw_fd(primary) };
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: grantpt, unlockpt and ptsname_r on our primary fd, into a buffer we own.
    unsafe {
        if libc::grantpt(primary.as_raw_fd()) != 0
            || libc::unlockpt(primary.as_raw_fd()) != 0
            || libc::ptsname_r(primary.as_raw_fd(), name.as_mut_ptr(), name.len()) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: ptsname_r wrote a NUL-terminated path.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    let replica = rustix::fs::open(
        path,
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    set_size(&primary, 24, 80)?;
    Ok((primary, replica))
}

fn set_size(fd: &impl AsFd, rows: u16, cols: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ with a valid winsize on a terminal fd.
    if unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), libc::TIOCSWINSZ, &ws) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One side of the primary end of a pseudo-terminal, non-blocking on tokio's reactor.
struct Pty(AsyncFd<OwnedFd>);

impl Pty {
    fn new(fd: OwnedFd) -> io::Result<Self> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        // SAFETY: we own `fd`, which lives as long as the registration (it is the
        // AsyncFd's inner value, closed when it is dropped).
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)?;
        Ok(Pty(fd))
    }
}

impl AsyncRead for Pty {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = match self.0.poll_read_ready(cx) {
                Poll::Ready(g) => g?,
                Poll::Pending => return Poll::Pending,
            };
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| {
                rustix::io::read(fd.get_ref(), &mut *unfilled).map_err(io::Error::from)
            }) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Every replica closed: the command and all it left running are gone.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Poll::Ready(Ok(())),
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Pty {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = match self.0.poll_write_ready(cx) {
                Poll::Ready(g) => g?,
                Poll::Pending => return Poll::Pending,
            };
            match guard.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(r) => return Poll::Ready(r),
                Err(_would_block) => continue,
            }
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

type Reader = Pin<Box<dyn AsyncRead + Send>>;
type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// Resize, kill and wait for an exec'd process.
struct Control {
    pid: u32,
    joined: bool,
    pty: Option<Arc<OwnedFd>>,
    child: tokio::sync::Mutex<tokio::process::Child>,
    exit: tokio::sync::OnceCell<ExitResult>,
}

impl ExecControl for Control {
    fn resize(&self, rows: u16, cols: u16) -> Result<(), HostError> {
        let Some(pty) = &self.pty else {
            return Err(HostError::Invalid(
                "tty_size: the command has no terminal (ask for one with tty=true)".into(),
            ));
        };
        set_size(&**pty, rows, cols)
            .map_err(|e| HostError::Failed(format!("resizing the terminal: {e}")))
    }

    fn kill(&self) {
        // SAFETY: kill with integer arguments.
        unsafe {
            if self.joined {
                // The middle process kills the command's group and exits.
                libc::kill(self.pid as i32, libc::SIGTERM);
            } else {
                libc::kill(-(self.pid as i32), libc::SIGKILL);
                libc::kill(self.pid as i32, libc::SIGKILL);
            }
        }
    }

    fn wait(&self) -> BoxFuture<'_, ExitResult> {
        Box::pin(async move {
            self.exit
                .get_or_init(|| async {
                    let status = self.child.lock().await.wait().await;
                    exit_of(status)
                })
                .await
                .clone()
        })
    }
}

fn exit_of(status: io::Result<std::process::ExitStatus>) -> ExitResult {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => ExitResult {
            exit_code: s.code().unwrap_or(0),
            signal: s.signal().unwrap_or(0),
            ..Default::default()
        },
        Err(e) => ExitResult {
            exit_code: 1,
            err: Some(format!("waiting for the command: {e}")),
            ..Default::default()
        },
    }
}

impl ProcessTable {
    /// Start `cmd` for `owner` (see the module docs).
    pub(super) async fn exec_process(
        &self,
        owner: &str,
        cmd: ExecCommand,
    ) -> Result<ExecProcess, HostError> {
        let ExecCommand {
            cmd,
            join,
            tty,
            task_dir,
        } = cmd;
        let join = match join {
            None => None,
            Some(id) => {
                let (pid, exit) = self.lookup(id, owner)?;
                if exit.borrow().is_some() {
                    return Err(HostError::NotFound(format!("process {id} has exited")));
                }
                let cgroup = self.cgroup(id).ok_or_else(|| {
                    HostError::Invalid(format!(
                        "process {id} is not isolated: only a process started with spawn-isolated can be joined"
                    ))
                })?;
                let procs = cgroup
                    .procs_files()
                    .map_err(|e| HostError::Failed(format!("the task's cgroup: {e}")))?;
                Some(Join::prepare(pid, procs, &cmd.cwd, &task_dir)?)
            }
        };
        let program = match &join {
            Some(_) => inside(&cmd.path, &task_dir),
            None => PathBuf::from(&cmd.path),
        };
        let mut c = tokio::process::Command::new(&program);
        c.args(&cmd.args)
            .env_clear()
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .kill_on_drop(true);
        if !cmd.argv0.is_empty() && join.is_none() {
            c.arg0(&cmd.argv0);
        }
        // A plain command's working dir, opened beneath the allocation dir (never through
        // a link), entered through the open fd.
        let cwd = match (&join, cmd.cwd.is_empty()) {
            (None, false) => Some(
                Beneath::open(Path::new(&cmd.alloc_root))
                    .and_then(|b| b.dir(Path::new(&cmd.cwd)))
                    .map_err(|e| HostError::Failed(format!("working dir {}: {e}", cmd.cwd)))?,
            ),
            _ => None,
        };
        if let Some(fd) = &cwd {
            c.current_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        }
        if join.is_none() && !cmd.user.is_empty() {
            let (uid, gid) = super::isolate::lookup_user(&cmd.user)
                .map_err(|e| HostError::Invalid(e.to_string()))?;
            c.uid(uid).gid(gid);
        }
        let failed = |what: &str| {
            let what = what.to_string();
            move |e: io::Error| HostError::Failed(format!("{what}: {e}"))
        };
        let mut pty = None;
        if tty {
            let (primary, replica) = open_pty().map_err(failed("opening a terminal"))?;
            let dup = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
            c.stdin(dup(&replica).map_err(failed("terminal"))?)
                .stdout(dup(&replica).map_err(failed("terminal"))?)
                .stderr(Stdio::from(replica));
            pty = Some(primary);
        } else {
            c.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
        let joined = join.is_some();
        // SAFETY: the closures make syscalls only (no allocation, no lock) in the child.
        unsafe {
            match join {
                Some(j) => {
                    c.pre_exec(move || j.enter(tty));
                }
                None => {
                    c.pre_exec(move || {
                        if tty {
                            libc::setsid();
                            if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                                return Err(io::Error::last_os_error());
                            }
                        } else {
                            libc::setpgid(0, 0);
                        }
                        rustix::thread::set_no_new_privs(true)?;
                        Ok(())
                    });
                }
            }
        }
        let mut child = c
            .spawn()
            .map_err(|e| HostError::Failed(format!("starting {}: {e}", program.display())))?;
        drop(cwd);
        drop(c);
        let pid = child.id().unwrap_or(0);
        let (stdin, stdout, stderr, pty): (Writer, Reader, Option<Reader>, Option<Arc<OwnedFd>>) =
            match pty {
                Some(primary) => {
                    let writer = primary.try_clone().map_err(failed("terminal"))?;
                    let control = primary.try_clone().map_err(failed("terminal"))?;
                    (
                        Box::pin(Pty::new(writer).map_err(failed("terminal"))?),
                        Box::pin(Pty::new(primary).map_err(failed("terminal"))?),
                        None,
                        Some(Arc::new(control)),
                    )
                }
                None => (
                    Box::pin(child.stdin.take().expect("piped")),
                    Box::pin(child.stdout.take().expect("piped")),
                    Some(Box::pin(child.stderr.take().expect("piped"))),
                    None,
                ),
            };
        Ok(ExecProcess {
            stdin,
            stdout,
            stderr,
            control: Box::new(Control {
                pid,
                joined,
                pty,
                child: tokio::sync::Mutex::new(child),
                exit: tokio::sync::OnceCell::new(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::host_api::process::ProcessHost;
    use crate::runtime::types::Command;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn exec_of(path: &str, args: &[&str], join: Option<u64>, tty: bool) -> ExecCommand {
        ExecCommand {
            cmd: Command {
                path: path.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                ..Default::default()
            },
            join,
            tty,
            task_dir: "/nonexistent-task-dir".into(),
        }
    }

    #[tokio::test]
    async fn only_the_owners_own_isolated_process_can_be_joined() {
        let table = ProcessTable::default();
        let sleep = Command {
            path: "/bin/sleep".into(),
            args: vec!["30".into()],
            ..Default::default()
        };
        let id = table.spawn("a", sleep).await.unwrap();
        match table
            .exec("b", exec_of("/bin/true", &[], Some(id), false))
            .await
        {
            Err(HostError::NotFound(m)) => assert!(m.contains(&id.to_string()), "{m}"),
            other => panic!("another component's process was joined: {other:?}"),
        }
        match table
            .exec("a", exec_of("/bin/true", &[], Some(id), false))
            .await
        {
            Err(HostError::Invalid(m)) => assert!(m.contains("not isolated"), "{m}"),
            other => panic!("a plain process was joined: {other:?}"),
        }
        table.release("a", id).unwrap();
    }

    #[tokio::test]
    async fn a_terminal_takes_its_size_and_the_exit_code_comes_back() {
        let table = ProcessTable::default();
        let mut p = table
            .exec("a", exec_of("/bin/sh", &[], None, true))
            .await
            .unwrap();
        assert!(p.stderr.is_none(), "a terminal has one output");
        p.control.resize(30, 100).unwrap();
        p.stdin.write_all(b"stty size; exit 4\n").await.unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n =
                tokio::time::timeout(std::time::Duration::from_secs(10), p.stdout.read(&mut buf))
                    .await
                    .expect("the terminal's output ends")
                    .unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("30 100"), "{text}");
        assert_eq!(p.control.wait().await.exit_code, 4);

        // Without one: stdout and stderr apart; closing stdin ends `cat`.
        let mut p = table
            .exec(
                "a",
                exec_of("/bin/sh", &["-c", "cat; echo gone >&2"], None, false),
            )
            .await
            .unwrap();
        p.stdin.write_all(b"typed\n").await.unwrap();
        p.stdin.shutdown().await.unwrap();
        drop(p.stdin);
        let mut out = String::new();
        p.stdout.read_to_string(&mut out).await.unwrap();
        let mut err = String::new();
        p.stderr
            .as_mut()
            .unwrap()
            .read_to_string(&mut err)
            .await
            .unwrap();
        assert_eq!((out.as_str(), err.as_str()), ("typed\n", "gone\n"));
        assert_eq!(p.control.wait().await.exit_code, 0);
    }
}
