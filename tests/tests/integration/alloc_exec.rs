//! `alloc exec` over the websocket route, spoken here with tungstenite in Nomad's frames
//! (not through the agent's CLI): into an isolated `exec` task (its PID namespace, user and
//! terminal), a `raw_exec` task and the mock's echo shell.

use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::harness::TestAgent;

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What a session printed and how it ended.
#[derive(Debug, Default)]
pub struct Seen {
    pub stdout: String,
    pub stderr: String,
    pub exit: Option<i64>,
    pub close: Option<(u16, String)>,
}

/// The route's websocket URL on the agent at `base` (`http://host:port`).
pub fn ws_url(base: &str, alloc: &str, task: &str, cmd: &[&str], tty: bool) -> String {
    let command = serde_json::to_string(cmd).unwrap();
    let q: String = url_encode(&command);
    format!(
        "{}/v1/client/allocation/{alloc}/exec?task={task}&tty={tty}&command={q}",
        base.trim_end_matches('/')
    )
    .replacen("http://", "ws://", 1)
}

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn open(t: &TestAgent, alloc: &str, task: &str, cmd: &[&str], tty: bool) -> Socket {
    open_at(&t.url(""), alloc, task, cmd, tty).await
}

/// A session on the agent at `base`.
pub async fn open_at(base: &str, alloc: &str, task: &str, cmd: &[&str], tty: bool) -> Socket {
    let (ws, _) = tokio_tungstenite::connect_async(ws_url(base, alloc, task, cmd, tty))
        .await
        .unwrap();
    ws
}

fn stdin(data: &str) -> Message {
    let d = base64::engine::general_purpose::STANDARD.encode(data);
    Message::text(json!({ "stdin": { "data": d } }).to_string())
}

/// Read frames until the socket closes (or `until` holds of what was seen).
pub async fn read(ws: &mut Socket, until: impl Fn(&Seen) -> bool) -> Seen {
    let mut seen = Seen::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !until(&seen) {
        let m = tokio::time::timeout_at(deadline, ws.next())
            .await
            .unwrap_or_else(|_| panic!("no end of the session: {seen:?}"));
        let Some(Ok(m)) = m else { break };
        match m {
            Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                let data = |k: &str| {
                    v[k]["data"].as_str().map(|d| {
                        String::from_utf8(
                            base64::engine::general_purpose::STANDARD.decode(d).unwrap(),
                        )
                        .unwrap()
                    })
                };
                if let Some(d) = data("stdout") {
                    seen.stdout.push_str(&d);
                }
                if let Some(d) = data("stderr") {
                    seen.stderr.push_str(&d);
                }
                if v["exited"] == true {
                    seen.exit = v["result"]["exit_code"].as_i64();
                }
            }
            Message::Close(f) => {
                seen.close = f.map(|f| (u16::from(f.code), f.reason.to_string()));
                break;
            }
            _ => {}
        }
    }
    seen
}

async fn running_alloc(t: &TestAgent, job: &str) -> String {
    let allocs = t
        .wait_allocs(job, Duration::from_secs(20), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    allocs
        .iter()
        .find(|a| a["ClientStatus"] == "running")
        .unwrap()["ID"]
        .as_str()
        .unwrap()
        .to_string()
}

fn service(id: &str, driver: &str, config: Value) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": driver, "KillTimeout": 200_000_000u64,
            "Resources": { "CPU": 100, "MemoryMB": 64 }, "Config": config }] }] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_into_an_isolated_task_runs_in_its_namespaces_as_its_user_with_a_terminal() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(service(
        "iso",
        "exec",
        json!({ "command": "/bin/sleep", "args": ["600"] }),
    ))
    .await;
    let alloc = running_alloc(&t, "iso").await;

    // Without a terminal: output, the exit code, the task's PID namespace and user.
    let mut ws = open(
        &t,
        &alloc,
        "t",
        &[
            "/bin/sh",
            "-c",
            "echo hi; echo pid=$$; echo uid=$(id -u); echo procs=$(ls /proc | grep -c '^[0-9]'); echo oops >&2; exit 3",
        ],
        false,
    )
    .await;
    let seen = read(&mut ws, |_| false).await;
    assert_eq!(seen.exit, Some(3), "{seen:?}");
    let lines: Vec<&str> = seen.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"hi"), "{seen:?}");
    // PID 1 is the task; the exec'd shell is another process of the same namespace.
    let pid: u32 = lines
        .iter()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(
        (2..50).contains(&pid),
        "not in the task's PID namespace: {seen:?}"
    );
    assert!(
        lines.contains(&"uid=65534"),
        "not the task's user: {seen:?}"
    );
    let procs: u32 = lines
        .iter()
        .find_map(|l| l.strip_prefix("procs="))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(procs <= 5, "/proc shows the host's processes: {seen:?}");
    assert_eq!(seen.stderr, "oops\n");
    assert_eq!(seen.close.as_ref().map(|c| c.0), Some(1000));

    // `ps` inside: the task's own processes only, PID 1 its `sleep`, all as its user.
    let mut ws = open(
        &t,
        &alloc,
        "t",
        &["/bin/ps", "-e", "-o", "pid=,user=,comm="],
        false,
    )
    .await;
    let seen = read(&mut ws, |_| false).await;
    assert_eq!(seen.exit, Some(0), "{seen:?}");
    let rows: Vec<Vec<&str>> = seen
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.contains(&vec!["1", "nobody", "sleep"]), "{seen:?}");
    assert!(rows.iter().any(|r| r.get(2) == Some(&"ps")), "{seen:?}");
    assert!(rows.len() <= 4, "more than the task's processes: {seen:?}");
    assert!(rows.iter().all(|r| r.get(1) == Some(&"nobody")), "{seen:?}");

    // With a terminal: a resize reaches the process, `stty size` reports it.
    let mut ws = open(&t, &alloc, "t", &["/bin/sh"], true).await;
    ws.send(Message::text(
        json!({ "tty_size": { "height": 33, "width": 111 } }).to_string(),
    ))
    .await
    .unwrap();
    ws.send(stdin("stty size; exit 7\n")).await.unwrap();
    let seen = read(&mut ws, |_| false).await;
    assert_eq!(seen.exit, Some(7), "{seen:?}");
    assert!(seen.stdout.contains("33 111"), "{seen:?}");
    assert!(
        seen.stderr.is_empty(),
        "a terminal has one output: {seen:?}"
    );

    // Closing the socket ends the command.
    let mut ws = open(
        &t,
        &alloc,
        "t",
        &["/bin/sh", "-c", "echo started; exec sleep 300"],
        false,
    )
    .await;
    let seen = read(&mut ws, |s| s.stdout.contains("started")).await;
    assert!(seen.stdout.contains("started"));
    drop(ws);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let ps = std::process::Command::new("pgrep")
            .args(["-f", "^sleep 300$"])
            .output()
            .unwrap();
        if ps.stdout.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the exec'd command outlived its socket: {}",
            String::from_utf8_lossy(&ps.stdout)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // `-job`: a running allocation of the job; no terminal (stdin is no terminal here).
    let out = tokio::process::Command::new(crate::harness::agent_bin())
        .args([
            "alloc",
            "exec",
            "-job",
            "iso",
            "/bin/sh",
            "-c",
            "echo by-job; exit 5",
        ])
        .env("NOMAD_ADDR", t.url(""))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(5), "by-job\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The same through the CLI, driven under a pseudo-terminal of the test's: a raw local
    // terminal, its size sent at the start and on SIGWINCH, the command's exit code.
    cli_under_a_pty(&t, &alloc).await;
    let _ = t.http.delete(t.url("/v1/job/iso")).send().await;
}

/// A pseudo-terminal of `rows` x `cols`: (primary, replica).
fn pty(rows: u16, cols: u16) -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let (mut p, mut r) = (0, 0);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty into fds we then own.
    let rc = unsafe { libc::openpty(&mut p, &mut r, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: fresh fds of ours.
    unsafe { (std::fs::File::from_raw_fd(p), std::fs::File::from_raw_fd(r)) }
}

async fn cli_under_a_pty(t: &TestAgent, alloc: &str) {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let (mut primary, replica) = pty(20, 70);
    let mut cmd = std::process::Command::new(crate::harness::agent_bin());
    cmd.args([
        "alloc",
        "exec",
        "-i",
        "-t",
        "-task",
        "t",
        &alloc[..8],
        "/bin/sh",
    ])
    .env("NOMAD_ADDR", t.url(""))
    .stdin(replica.try_clone().unwrap())
    .stdout(replica.try_clone().unwrap())
    .stderr(replica.try_clone().unwrap());
    // SAFETY: setsid and TIOCSCTTY in the child: the replica becomes its terminal.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::setsid();
            if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // Only the CLI holds the replica now: the primary reads EOF once it exits.
    drop(cmd);
    drop(replica);
    // Everything the CLI writes, read on a thread (the primary blocks).
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let mut p = primary.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = p.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let wait_for = |what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !seen.lock().unwrap().contains(what) {
            assert!(
                std::time::Instant::now() < deadline,
                "no {what:?} from the CLI: {}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    primary.write_all(b"stty size\r").unwrap();
    tokio::task::block_in_place(|| wait_for("20 70"));
    // A resize of the local terminal reaches the command.
    let ws = libc::winsize {
        ws_row: 41,
        ws_col: 123,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ on our primary: the kernel signals the CLI (SIGWINCH).
    assert_eq!(
        unsafe { libc::ioctl(primary.as_raw_fd(), libc::TIOCSWINSZ, &ws) },
        0
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        primary.write_all(b"stty size\r").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        if seen.lock().unwrap().contains("41 123") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            seen.lock().unwrap()
        );
    }
    primary.write_all(b"echo pid=$$; exit 6\r").unwrap();
    let status = tokio::task::block_in_place(|| child.wait()).unwrap();
    assert_eq!(status.code(), Some(6), "{}", seen.lock().unwrap());
    drop(primary);
    let _ = reader.join();
    let out = seen.lock().unwrap().clone();
    assert!(out.contains("pid="), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_into_raw_exec_and_the_mock_and_what_is_refused_before_the_upgrade() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(service(
        "raw",
        "raw_exec",
        json!({ "command": "/bin/sleep", "args": ["600"] }),
    ))
    .await;
    t.post_job(service("mock", "mock", json!({ "run_for": "10m" })))
        .await;
    let raw = running_alloc(&t, "raw").await;
    let mock = running_alloc(&t, "mock").await;

    // raw_exec: a host process in the task dir with the task's env.
    let mut ws = open(
        &t,
        &raw,
        "t",
        &["/bin/sh", "-c", "echo dir=$NOMAD_TASK_DIR; pwd; exit 5"],
        false,
    )
    .await;
    let seen = read(&mut ws, |_| false).await;
    assert_eq!(seen.exit, Some(5), "{seen:?}");
    assert!(seen.stdout.contains(&format!("/{raw}/t")), "{seen:?}");

    // The mock's echo shell: a script, then an interactive line with stdin closed.
    let mut ws = open(&t, &mock, "t", &["sh", "-c", "echo hi; exit 3"], false).await;
    let seen = read(&mut ws, |_| false).await;
    assert_eq!(
        (seen.stdout.as_str(), seen.exit),
        ("hi\n", Some(3)),
        "{seen:?}"
    );
    let mut ws = open(&t, &mock, "t", &["sh"], false).await;
    ws.send(stdin("echo one\n")).await.unwrap();
    ws.send(Message::text(
        json!({ "stdin": { "close": true } }).to_string(),
    ))
    .await
    .unwrap();
    let seen = read(&mut ws, |_| false).await;
    assert_eq!(
        (seen.stdout.as_str(), seen.exit),
        ("one\n", Some(0)),
        "{seen:?}"
    );

    // Refused before the upgrade, naming what is wrong.
    let get = |q: String| {
        let url = t.url(&q);
        let http = t.http.clone();
        async move {
            let r = http
                .get(url)
                .header("Connection", "Upgrade")
                .header("Upgrade", "websocket")
                .header("Sec-WebSocket-Version", "13")
                .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let cmd = url_encode("[\"/bin/true\"]");
    let (s, m) = get(format!("/v1/client/allocation/{mock}/exec?command={cmd}")).await;
    assert_eq!((s, m.contains("task")), (400, true), "{m}");
    let (s, m) = get(format!(
        "/v1/client/allocation/{mock}/exec?task=t&command=%5B%5D"
    ))
    .await;
    assert_eq!((s, m.contains("command")), (400, true), "{m}");
    let (s, m) = get(format!(
        "/v1/client/allocation/{mock}/exec?task=nope&command={cmd}"
    ))
    .await;
    assert_eq!((s, m.contains("nope")), (404, true), "{m}");
    let (s, _) = get(format!(
        "/v1/client/allocation/no-such/exec?task=t&command={cmd}"
    ))
    .await;
    assert_eq!(s, 404);
    let _ = t.http.delete(t.url("/v1/job/raw")).send().await;
    let _ = t.http.delete(t.url("/v1/job/mock")).send().await;
}
