//! `alloc exec`: one keystroke's round trip to its echo, through this build's release agent
//! (`agent run --dev`) on 127.0.0.1, over the websocket route as `nomad alloc exec -t` and
//! the web UI speak it: a `stdin` frame holding one byte out, the `stdout` frame holding its
//! echo back. Side by side in one run:
//! - `raw_exec`: a shell with a terminal, a host process (the terminal echoes);
//! - `exec`: the same joined into an isolated task (its namespaces, chroot and cgroup);
//! - `mock`: the mock driver's echo shell, one `exec-step` call into the component per key;
//! - `pty`: the baseline, a pseudo-terminal in this process, no agent (the kernel's echo).
//!
//! Run: `cargo bench -p paddock --bench exec` (as root, for `exec`); prints the median and
//! p99 of each, in µs. `EXEC_BENCH_ROUNDS` sets the keystrokes per row (default 500).

#![allow(clippy::print_stdout)] // a benchmark prints its figures

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

struct Agent {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Agent {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(["run", "--dev", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the agent");
    Agent {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

async fn running_alloc(http: &reqwest::Client, base: &str, job: Value) -> String {
    let id = job["ID"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if http
            .post(format!("{base}/v1/jobs"))
            .json(&json!({ "Job": job }))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        assert!(Instant::now() < deadline, "the agent did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        let allocs: Value = http
            .get(format!("{base}/v1/job/{id}/allocations"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(a) = allocs
            .as_array()
            .and_then(|a| a.iter().find(|a| a["ClientStatus"] == "running"))
        {
            return a["ID"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "{id} did not run: {allocs}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn job(id: &str, driver: &str, config: Value) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": driver, "Config": config,
            "Resources": { "CPU": 100, "MemoryMB": 64 } }] }] })
}

fn median_p99(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(v[v.len() / 2]), us(v[v.len() * 99 / 100]))
}

/// Keystrokes over one session: each byte out, its echo back.
async fn keystrokes(base: &str, alloc: &str, rounds: usize) -> Vec<Duration> {
    let command = serde_json::to_string(&["/bin/sh"]).unwrap();
    let enc: String = command
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let url = format!("{base}/v1/client/allocation/{alloc}/exec?task=t&tty=true&command={enc}")
        .replacen("http://", "ws://", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    // The prompt first.
    let mut prompt = false;
    while !prompt {
        if let Some(Ok(Message::Text(t))) = ws.next().await {
            prompt = t.contains("stdout");
        }
    }
    let mut took = Vec::with_capacity(rounds);
    for i in 0..rounds + 20 {
        let key = [b'a' + (i % 26) as u8];
        let frame = json!({ "stdin": { "data": b64.encode(key) } }).to_string();
        let sent = Instant::now();
        ws.send(Message::text(frame)).await.unwrap();
        loop {
            let Some(Ok(Message::Text(t))) = ws.next().await else {
                panic!("the session ended");
            };
            let v: Value = serde_json::from_str(&t).unwrap();
            let echoed = v["stdout"]["data"]
                .as_str()
                .and_then(|d| b64.decode(d).ok())
                .is_some_and(|d| d.contains(&key[0]));
            if echoed {
                break;
            }
        }
        if i >= 20 {
            took.push(sent.elapsed());
        }
    }
    let _ = ws.close(None).await;
    took
}

/// The baseline: one byte into a pseudo-terminal's primary side, its echo back.
fn pty_baseline(rounds: usize) -> Vec<Duration> {
    let (mut p, mut r) = (0, 0);
    // SAFETY: openpty into fds we then own.
    let rc = unsafe {
        libc::openpty(
            &mut p,
            &mut r,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0);
    // SAFETY: fresh fds of ours.
    let (mut primary, _replica) =
        unsafe { (std::fs::File::from_raw_fd(p), std::fs::File::from_raw_fd(r)) };
    let mut took = Vec::with_capacity(rounds);
    let mut buf = [0u8; 16];
    for i in 0..rounds + 20 {
        let key = [b'a' + (i % 26) as u8];
        let sent = Instant::now();
        primary.write_all(&key).unwrap();
        let n = primary.read(&mut buf).unwrap();
        assert!(buf[..n].contains(&key[0]));
        if i >= 20 {
            took.push(sent.elapsed());
        }
    }
    took
}

fn main() {
    let rounds: usize = std::env::var("EXEC_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let agent = start();
    let http = reqwest::Client::new();
    let rows = rt.block_on(async {
        let sleep = json!({ "command": "/bin/sleep", "args": ["3600"] });
        let raw = running_alloc(&http, &agent.base, job("raw", "raw_exec", sleep.clone())).await;
        let mut rows = vec![("raw_exec", keystrokes(&agent.base, &raw, rounds).await)];
        let root = rustix::process::geteuid().is_root();
        if root {
            let iso = running_alloc(&http, &agent.base, job("iso", "exec", sleep)).await;
            rows.push(("exec", keystrokes(&agent.base, &iso, rounds).await));
        }
        let mock = running_alloc(
            &http,
            &agent.base,
            job("mock", "mock", json!({ "run_for": "1h" })),
        )
        .await;
        rows.push(("mock", keystrokes(&agent.base, &mock, rounds).await));
        rows
    });
    drop(agent);
    println!("alloc exec, one keystroke to its echo ({rounds} keys each, after 20 warm-up):");
    println!("| path | median µs | p99 µs |");
    println!("|---|---|---|");
    for (name, took) in rows
        .into_iter()
        .chain([("pty (no agent)", pty_baseline(rounds))])
    {
        let (m, p) = median_p99(took);
        println!("| {name} | {m:.0} | {p:.0} |");
    }
}
