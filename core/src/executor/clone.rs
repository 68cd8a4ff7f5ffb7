//! Starting an isolated task without `fork`: `clone(CLONE_VM | CLONE_VFORK)` with the
//! task's namespaces as clone flags, the way `posix_spawn` starts a plain process.
//!
//! `std::process::Command` forks as soon as a `pre_exec` step is set: the executor's page
//! tables are copied and then thrown away by the exec, and a PID namespace needs a thread
//! that unshared it first. Here the child shares the executor's memory while it runs
//! [`Prepared::enter`] on a stack of its own, and the calling thread sleeps until the
//! child has exec'd or failed (`CLONE_VFORK`). Measured on the `isolation/*` benchmark:
//! the isolated spawn went from about 1.1 ms to a third of that.
//!
//! What the child may do while it shares the executor's memory: syscalls on data prepared
//! before the clone, nothing that allocates, locks or unwinds. Signals are blocked around
//! the clone so that no handler of the executor runs in the child; the child resets the
//! handlers to their defaults and unblocks everything just before it execs, as
//! `posix_spawn` and `std` do.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use rustix::io::Errno;

use super::isolate::Prepared;

/// A child started by [`spawn`].
pub struct Child {
    pub pid: u32,
}

impl Child {
    /// Wait for the child to end: (exit code, signal).
    pub fn wait(&self) -> io::Result<(i32, i32)> {
        let pid = rustix::process::Pid::from_raw(self.pid as i32)
            .ok_or_else(|| io::Error::other("no pid"))?;
        loop {
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
                Ok(Some((_, st))) => {
                    if let Some(code) = st.exit_status() {
                        return Ok((code, 0));
                    }
                    if let Some(sig) = st.terminating_signal() {
                        return Ok((0, sig));
                    }
                }
                Ok(None) => {}
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Everything the child reads, prepared before the clone.
struct Args<'a> {
    prepared: &'a Prepared,
    stdio: [RawFd; 3],
    program: &'a CStr,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    /// The child writes `errno` (4 bytes) and the failed step here; close-on-exec, so an
    /// exec that succeeded leaves it empty.
    report: RawFd,
}

/// Stack for the child: `enter` makes a few dozen syscalls and no deep calls.
const STACK: usize = 256 * 1024;

/// Start `program` with `args` and `env`, stdin/stdout/stderr on `stdio`, confined as
/// `prepared` says. Returns once the program runs; a step that failed in the child is the
/// error, naming the step.
pub fn spawn(
    prepared: &Prepared,
    program: &CStr,
    args: &[String],
    env: &[(String, String)],
    stdio: [&OwnedFd; 3],
) -> io::Result<Child> {
    let nul =
        |s: String| CString::new(s).map_err(|_| io::Error::other("a NUL byte in the command"));
    let mut argv_c = vec![program.to_owned()];
    for a in args {
        argv_c.push(nul(a.clone())?);
    }
    let env_c = env
        .iter()
        .map(|(k, v)| nul(format!("{k}={v}")))
        .collect::<io::Result<Vec<_>>>()?;
    let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
        v.iter()
            .map(|c| c.as_ptr())
            .chain([std::ptr::null()])
            .collect()
    };
    let (argv, envp) = (ptrs(&argv_c), ptrs(&env_c));
    let (report_read, report) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let args = Args {
        prepared,
        stdio: stdio.map(|f| f.as_raw_fd()),
        program,
        argv: &argv,
        envp: &envp,
        report: report.as_raw_fd(),
    };
    let mut stack = vec![0u8; STACK];
    // SAFETY: the top of a live buffer, 16-byte aligned; the parent sleeps until the
    // child has exec'd or exited (CLONE_VFORK), so the buffer and `args` outlive its use.
    let top = unsafe { stack.as_mut_ptr().add(STACK) };
    let top = (top as usize & !15) as *mut libc::c_void;
    let flags = prepared.clone_flags() | libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let pid = {
        let _blocked = BlockSignals::new();
        // SAFETY: see the module docs: the child runs `child` only, on its own stack, and
        // it only makes syscalls on `args`.
        unsafe { libc::clone(child, top, flags, &args as *const Args as *mut libc::c_void) }
    };
    drop(stack);
    drop(report);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let child = Child { pid: pid as u32 };
    let mut buf = [0u8; 132];
    let n = rustix::io::read(report_read.as_fd(), &mut buf).unwrap_or(0);
    if n >= 4 {
        let _ = child.wait();
        let errno = i32::from_ne_bytes(buf[..4].try_into().unwrap());
        let step = String::from_utf8_lossy(&buf[4..n]).into_owned();
        let e = io::Error::from_raw_os_error(errno);
        return Err(io::Error::new(
            e.kind(),
            format!("isolating it, {step}: {e}"),
        ));
    }
    Ok(child)
}

/// All signals blocked on this thread while it lives.
struct BlockSignals(libc::sigset_t);

impl BlockSignals {
    fn new() -> Self {
        // SAFETY: plain sigset manipulation on locals.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            Self(old)
        }
    }
}

impl Drop for BlockSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

/// The child: syscalls only. Never returns on success (exec); on failure it reports and
/// exits 127.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Args` the parent keeps alive until this child execs or exits.
    let a = unsafe { &*(arg as *const Args) };
    let (step, errno) = match run(a) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let mut msg = [0u8; 132];
    msg[..4].copy_from_slice(&errno.raw_os_error().to_ne_bytes());
    let n = step.len().min(128);
    msg[4..4 + n].copy_from_slice(&step.as_bytes()[..n]);
    // SAFETY: writes from a local buffer, then leaves without running anything else.
    unsafe {
        libc::write(a.report, msg.as_ptr().cast(), 4 + n);
        libc::_exit(127)
    }
}

enum Never {}

fn run(a: &Args) -> Result<Never, (&'static str, Errno)> {
    // SAFETY: signal dispositions and fds of this (child) process only.
    unsafe {
        for sig in 1..libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && (old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
                    || sig == libc::SIGPIPE)
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        for (to, from) in a.stdio.iter().enumerate() {
            if libc::dup2(*from, to as RawFd) < 0 {
                return Err(("redirecting stdio", Errno::from_raw_os_error(errno())));
            }
        }
        // The task leads its own group: a stop signal reaches its children too.
        if libc::setpgid(0, 0) < 0 {
            return Err(("setpgid", Errno::from_raw_os_error(errno())));
        }
    }
    a.prepared.enter()?;
    // SAFETY: as above; argv and envp are NULL-terminated arrays of live C strings.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(a.program.as_ptr(), a.argv.as_ptr(), a.envp.as_ptr());
    }
    Err(("exec", Errno::from_raw_os_error(errno())))
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
