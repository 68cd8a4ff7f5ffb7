//! The executor process (`agent executor --socket S --dir D`): synchronous, a few threads
//! per task, no async runtime and no wasm, so it stays small and starts fast.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::{Exit, Message, SpawnCommand, clone, exit_path, isolate};
use crate::logmon::{self, RotatingFile};
use crate::safefs::Beneath;

/// How long the executor lingers with no task and no agent before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Inner {
    /// Exits by id; `None` while running.
    procs: HashMap<u64, Option<Exit>>,
    /// Connected agents, to tell about exits.
    conns: Vec<UnixStream>,
    last_busy: Option<Instant>,
}

type Shared = Arc<Mutex<Inner>>;

/// Run the executor until it has been idle for [`IDLE_EXIT`].
pub fn serve(socket: &Path, dir: &Path) -> std::io::Result<()> {
    // Its own session: a signal to the agent's process group or terminal does not reach
    // the executor or its tasks.
    let _ = rustix::process::setsid();
    // Its tasks start with default signals, whatever the agent inherited (in its own
    // session, no terminal's signal reaches it).
    let reset = super::os::default_ignored_signals();
    if !reset.is_empty() {
        tracing::info!(signals = ?reset, "task executor: signals the agent ignored are back to their default action for tasks");
    }
    // It never gains privileges through an exec, nor do the tasks it starts: a raw_exec
    // task run as an unprivileged user cannot climb back through a setuid binary or a
    // file capability (isolated tasks set it again themselves).
    if let Err(e) = rustix::thread::set_no_new_privs(true) {
        tracing::warn!(error = %e, "setting no_new_privs on the task executor failed");
    }
    std::fs::create_dir_all(dir)?;
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    let shared: Shared = Arc::new(Mutex::new(Inner {
        last_busy: Some(Instant::now()),
        ..Default::default()
    }));
    {
        let (shared, socket) = (shared.clone(), socket.to_path_buf());
        std::thread::spawn(move || idle_watch(&shared, &socket));
    }
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (shared, dir) = (shared.clone(), dir.to_path_buf());
        std::thread::spawn(move || connection(conn, &shared, &dir));
    }
    Ok(())
}

fn idle_watch(shared: &Shared, socket: &Path) {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let mut s = shared.lock().unwrap();
        let running = s.procs.values().any(Option::is_none);
        if !running && !socket.exists() {
            // Its socket was removed with its data dir (a `--dev` agent's, when it
            // stopped): no agent can reach it again, and no task needs it.
            std::process::exit(0);
        }
        let busy = !s.conns.is_empty() || running;
        if busy {
            s.last_busy = Some(Instant::now());
        } else if s.last_busy.is_some_and(|t| t.elapsed() >= IDLE_EXIT) {
            let _ = std::fs::remove_file(socket);
            std::process::exit(0);
        }
    }
}

fn send(conn: &mut UnixStream, m: &Message) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m).expect("messages serialize");
    line.push(b'\n');
    conn.write_all(&line)
}

fn connection(conn: UnixStream, shared: &Shared, dir: &Path) {
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    if let Ok(w) = conn.try_clone() {
        shared.lock().unwrap().conns.push(w);
    }
    let reader = BufReader::new(conn);
    for line in reader.lines() {
        let Ok(line) = line else { break };
        let reply = match serde_json::from_str::<Message>(&line) {
            Ok(Message::Spawn { id, cmd }) => match spawn(id, &cmd, shared, dir) {
                Ok(pid) => Message::Spawned {
                    id,
                    pid,
                    guarded: true,
                },
                Err(e) => Message::Error {
                    id,
                    message: format!("spawning {}: {e}", cmd.path),
                },
            },
            Ok(Message::Watch { id }) => {
                let known = shared.lock().unwrap().procs.get(&id).copied();
                match known {
                    Some(Some(exit)) => Message::Exited { id, exit },
                    Some(None) => continue,
                    // Not one of ours (this executor was restarted): perhaps its record
                    // survived on disk.
                    None => match read_exit(dir, id) {
                        Some(exit) => Message::Exited { id, exit },
                        None => Message::Unknown { id },
                    },
                }
            }
            Ok(other) => Message::Error {
                id: 0,
                message: format!("unexpected message {other:?}"),
            },
            Err(e) => Message::Error {
                id: 0,
                message: format!("bad request: {e}"),
            },
        };
        if send(&mut writer, &reply).is_err() {
            break;
        }
    }
    // The agent went away: stop telling it about exits.
    let mut s = shared.lock().unwrap();
    let me = writer.as_raw_fd_key();
    s.conns.retain(|c| c.as_raw_fd_key() != me);
}

/// Identity of a stream for removing it from the connection list.
trait FdKey {
    fn as_raw_fd_key(&self) -> (u64, u64);
}

impl FdKey for UnixStream {
    fn as_raw_fd_key(&self) -> (u64, u64) {
        use std::os::fd::AsFd;
        rustix::fs::fstat(self.as_fd())
            .map(|st| (st.st_dev, st.st_ino))
            .unwrap_or((0, 0))
    }
}

fn read_exit(dir: &Path, id: u64) -> Option<Exit> {
    serde_json::from_slice(&std::fs::read(exit_path(dir, id)).ok()?).ok()
}

/// Where a task's stream goes: the fd the child gets, and for rotated logs the pipe's
/// read end with the file it is pumped into.
type Output = (OwnedFd, Option<(std::fs::File, RotatingFile)>);

/// Open a task's stream `path` beneath the allocation dir `root`, never through a link.
fn output(root: &Path, path: &str, rotate: Option<(u32, u64)>) -> std::io::Result<Output> {
    Ok(match logmon::open_output(root, path, rotate)? {
        logmon::Output::Discard => (
            std::fs::File::options()
                .write(true)
                .open("/dev/null")?
                .into(),
            None,
        ),
        logmon::Output::Stream(f) | logmon::Output::Plain(f) => (f.into(), None),
        logmon::Output::Rotating(log) => {
            let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
            (w, Some((r.into(), log)))
        }
    })
}

/// The working dir of a plain process, opened beneath `root` without following a link
/// (a task can make its own folders links); the child enters it through the open folder.
fn working_dir(root: &Path, cwd: &str) -> std::io::Result<Option<OwnedFd>> {
    if cwd.is_empty() {
        return Ok(None);
    }
    let root = Beneath::open(root)?;
    root.dir(Path::new(cwd)).map(Some)
}

fn spawn(id: u64, cmd: &SpawnCommand, shared: &Shared, dir: &Path) -> std::io::Result<u32> {
    let root = Path::new(&cmd.alloc_root);
    let (out, out_log) = output(root, &cmd.stdout, cmd.rotate)?;
    let (err, err_log) = output(root, &cmd.stderr, cmd.rotate)?;
    let (child, cgroup) = match &cmd.isolation {
        None => {
            let mut c = std::process::Command::new(&cmd.path);
            c.args(&cmd.args)
                .env_clear()
                .envs(cmd.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                // The task leads its own group: a stop signal reaches its children too.
                .process_group(0);
            // Held until the spawn: the child enters the folder through the open fd.
            let cwd = working_dir(root, &cmd.cwd)?;
            if let Some(fd) = &cwd {
                use std::os::fd::AsRawFd;
                c.current_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            }
            if !cmd.user.is_empty() {
                // Supplementary groups are dropped with the uid (std does so as root).
                let (uid, gid) = isolate::lookup_user(&cmd.user).map_err(std::io::Error::other)?;
                c.uid(uid).gid(gid);
            }
            if !cmd.argv0.is_empty() {
                std::os::unix::process::CommandExt::arg0(&mut c, &cmd.argv0);
            }
            // Dropping `c` closes the parent's copies of the write ends.
            let child = c.spawn()?;
            drop(cwd);
            (Child::Std(child), None)
        }
        Some(iso) => {
            let p = isolate::prepare(id, &cmd.path, &cmd.cwd, iso, &cmd.alloc_root)
                .map_err(std::io::Error::other)?;
            let stdin: OwnedFd = std::fs::File::open("/dev/null")?.into();
            let program = std::ffi::CString::new(p.program.as_os_str().as_encoded_bytes())
                .map_err(|_| std::io::Error::other("a NUL byte in the command"))?;
            let spawned = clone::spawn(&p, &program, &cmd.args, &cmd.env, [&stdin, &out, &err]);
            drop((out, err));
            match spawned {
                Ok(child) => (Child::Cloned(child), p.cgroup),
                Err(e) => {
                    if let Some(cg) = &p.cgroup {
                        cg.remove();
                    }
                    return Err(e);
                }
            }
        }
    };
    if let Some(cg) = &cgroup
        && let Err(e) = cg.save(dir, id)
    {
        tracing::warn!(id, error = %e, "recording a task cgroup failed");
    }
    let pid = child.id();
    shared.lock().unwrap().procs.insert(id, None);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut pumps = 0;
    for (pipe, log) in [out_log, err_log].into_iter().flatten() {
        pumps += 1;
        pump(pipe, log, done_tx.clone());
    }
    drop(done_tx);
    let (shared, dir) = (shared.clone(), dir.to_path_buf());
    std::thread::spawn(move || {
        let exit = match child.wait() {
            Ok((exit_code, signal)) => Exit {
                exit_code,
                signal,
                oom_killed: cgroup.as_ref().is_some_and(|cg| cg.oom_killed()),
            },
            Err(_) => Exit {
                exit_code: -1,
                signal: 0,
                oom_killed: false,
            },
        };
        // Let the logs drain, but never wait on a grandchild that keeps a pipe open.
        let deadline = Instant::now() + Duration::from_secs(2);
        for _ in 0..pumps {
            let left = deadline.saturating_duration_since(Instant::now());
            if done_rx.recv_timeout(left).is_err() {
                break;
            }
        }
        record_exit(&shared, &dir, id, exit);
    });
    Ok(pid)
}

/// A task process: plain ones come from `std`, isolated ones from [`clone::spawn`].
enum Child {
    Std(std::process::Child),
    Cloned(clone::Child),
}

impl Child {
    fn id(&self) -> u32 {
        match self {
            Child::Std(c) => c.id(),
            Child::Cloned(c) => c.pid,
        }
    }

    /// (exit code, signal).
    fn wait(self) -> std::io::Result<(i32, i32)> {
        match self {
            Child::Std(mut c) => {
                let st = c.wait()?;
                Ok((st.code().unwrap_or(0), st.signal().unwrap_or(0)))
            }
            Child::Cloned(c) => c.wait(),
        }
    }
}

fn pump(mut pipe: impl Read + Send + 'static, mut log: RotatingFile, done: mpsc::Sender<()>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if log.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = done.send(());
    });
}

/// Write the exit where a restarted agent finds it, then announce it.
fn record_exit(shared: &Shared, dir: &Path, id: u64, exit: Exit) {
    let path: PathBuf = exit_path(dir, id);
    let tmp = path.with_extension("tmp");
    // Renamed into place, not synced: it must survive the agent, which it does; after a
    // power loss the task is gone too and its exit is reported as lost.
    let written = std::fs::write(&tmp, serde_json::to_vec(&exit).expect("exits serialize"))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        tracing::error!(id, error = %e, "recording a process exit failed");
    }
    let mut s = shared.lock().unwrap();
    s.procs.insert(id, Some(exit));
    let m = Message::Exited { id, exit };
    s.conns.retain_mut(|c| send(c, &m).is_ok());
}
