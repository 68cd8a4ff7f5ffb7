//! The agent under soak: the real binary on a fixed port and data dir, started, killed
//! with SIGKILL, stopped with SIGTERM and sent SIGHUP; its HTTP API with every call timed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Latencies of API calls, in milliseconds, by the kind of call.
#[derive(Default)]
pub struct Latencies(pub BTreeMap<&'static str, Vec<f64>>);

/// The agent process and the client that talks to it.
pub struct SoakAgent {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub port: u16,
    pub config: PathBuf,
    pub hooks: PathBuf,
    child: Option<Child>,
    /// The running agent's pid, 0 while it is down (read by the RSS sampler).
    pub pid: Arc<AtomicU32>,
    pub http: reqwest::Client,
    pub latencies: Arc<Mutex<Latencies>>,
    /// How long each start took until `/v1/agent/health` answered, in seconds.
    pub start_times: Vec<f64>,
}

/// The agent's config: room for every task, the mock driver's calls bounded at 2 s (so a
/// misbehaving call is cut off quickly), the `versioned` hook on every task, and the
/// server's collection tuned for churn as an operator of a busy node would (ended
/// allocations and evaluations kept 3 minutes, three times the check period, instead of an
/// hour; dead jobs the default 4 hours, longer than any soak, so each stays checkable).
fn config_text() -> String {
    "client {\n  cpu_total_compute = 100000000\n  memory_total_mb = 100000000\n  disk_total_mb = 100000000\n}\n\
     server {\n  job_gc_interval = \"30s\"\n  eval_gc_threshold = \"3m\"\n  batch_eval_gc_threshold = \"3m\"\n}\n\
     plugin \"mock\" {\n  limits {\n    call_timeout = \"2s\"\n  }\n}\n\
     hook \"versioned\" {\n  all_tasks = true\n}\n"
        .to_string()
}

impl SoakAgent {
    pub fn new(bin: PathBuf, dir: &Path, first_hook: &[u8]) -> Self {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let hooks = dir.join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        put(&hooks, "versioned.wasm", first_hook);
        let config = dir.join("agent.hcl");
        std::fs::write(&config, config_text()).unwrap();
        Self {
            bin,
            dir: dir.to_path_buf(),
            port,
            config,
            hooks,
            child: None,
            pid: Arc::new(AtomicU32::new(0)),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            latencies: Default::default(),
            start_times: Vec::new(),
        }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("agent.log")
    }

    /// Start the agent; `faults` is `(one_in, seed)` for injected state DB commit failures.
    /// Waits (2 minutes at most) for its health endpoint.
    pub async fn start(&mut self, faults: Option<(u64, u64)>) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.args(["run", "--dev", "--data-dir"])
            .arg(self.data())
            .args(["--bind", &format!("127.0.0.1:{}", self.port)])
            .arg("--hooks")
            .arg(&self.hooks)
            .arg("--config")
            .arg(&self.config)
            .env_remove("PADDOCK_TEST_STATE_WRITE_FAULTS")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some((one_in, seed)) = faults {
            cmd.env("PADDOCK_TEST_STATE_WRITE_FAULTS", one_in.to_string())
                .env("PADDOCK_TEST_STATE_WRITE_FAULTS_SEED", seed.to_string());
        }
        let began = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawning the agent: {e}"))?;
        self.pid.store(child.id(), Ordering::SeqCst);
        self.child = Some(child);
        let deadline = began + Duration::from_secs(120);
        loop {
            if let Ok(r) = self.http.get(self.url("/v1/agent/health")).send().await
                && r.status().is_success()
            {
                self.start_times.push(began.elapsed().as_secs_f64());
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                self.pid.store(0, Ordering::SeqCst);
                return Err(format!("the agent exited at start: {status}"));
            }
            if Instant::now() > deadline {
                return Err("the agent did not answer /v1/agent/health in 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.pid.store(0, Ordering::SeqCst);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send `signal` (`TERM`, `HUP`) to the agent.
    pub fn signal(&self, signal: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([format!("-{signal}"), c.id().to_string()])
                .status();
        }
    }

    /// SIGTERM and wait (30 s at most) for the exit status; a kill after that.
    pub fn terminate(&mut self) -> Result<(), String> {
        self.signal("TERM");
        let Some(mut c) = self.child.take() else {
            return Ok(());
        };
        self.pid.store(0, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match c.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(s)) => return Err(format!("the agent exited {s} on SIGTERM")),
                _ if Instant::now() > deadline => {
                    let _ = c.kill();
                    let _ = c.wait();
                    return Err("the agent did not exit within 30 s of SIGTERM".into());
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// One API call, timed under `kind`: the status and the answer (JSON, or its text as
    /// a JSON string), or the transport error.
    pub async fn call(
        &self,
        kind: &'static str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let mut req = self.http.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let began = Instant::now();
        let r = req.send().await.map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        let text = r.text().await.map_err(|e| e.to_string())?;
        let ms = began.elapsed().as_secs_f64() * 1e3;
        self.latencies
            .lock()
            .unwrap()
            .0
            .entry(kind)
            .or_default()
            .push(ms);
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, v))
    }

    /// `GET path`, a 200 expected.
    pub async fn get(&self, kind: &'static str, path: &str) -> Result<Value, String> {
        match self.call(kind, reqwest::Method::GET, path, None).await? {
            (200, v) => Ok(v),
            (s, v) => Err(format!("GET {path}: {s} {v}")),
        }
    }

    /// Lines of the agent's log (all its lives) that contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// The last `n` lines of the agent's log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for SoakAgent {
    fn drop(&mut self) {
        self.kill9();
        reap_executor(&self.data());
    }
}

/// Put `bytes` in place as `dir/name` as a deploy does: a temp file, then a rename.
pub fn put(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.part"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Resident memory of `pid`'s wasm linear-memory slots in KiB: each anonymous read-write
/// mapping directly followed by an inaccessible one of 1 GiB or more (the guard region the
/// pooling allocator leaves after every memory). A slot keeps the pages a call touched
/// resident (up to the engine's keep-resident size) after the instance is gone, so this
/// part follows how many slots the guests ever filled, not what the agent holds.
pub fn wasm_slots_kib(pid: u32) -> Option<u64> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    Some(slots_in_smaps(&smaps))
}

fn slots_in_smaps(smaps: &str) -> u64 {
    // (end address, whether it is an anonymous rw mapping, its RSS) of the last mapping.
    let mut cur: Option<(u64, bool, u64)> = None;
    let mut total = 0;
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let head = f.next().unwrap_or_default();
        if let Some((a, b)) = head.split_once('-')
            && let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
        {
            let prev = cur;
            let perms = f.next().unwrap_or_default();
            let path = f.nth(3);
            let anon = path.is_none();
            if let Some((end, true, rss)) = prev
                && end == a
                && perms == "---p"
                && anon
                && b - a >= 1 << 30
            {
                total += rss;
            }
            cur = Some((b, perms == "rw-p" && anon, 0));
        } else if head == "Rss:"
            && let Some(c) = cur.as_mut()
        {
            c.2 = f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        }
    }
    total
}

pub use paddock_tests::procs::reap_executor;

/// `pid`'s parent, start time (clock ticks after boot) and command line, for reports.
pub fn describe(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default();
    format!(
        "pid {pid} ppid {} started at tick {}: {}",
        fields.get(1).unwrap_or(&"?"),
        fields.get(19).unwrap_or(&"?"),
        cmd.trim()
    )
}

/// Live (not zombie) processes whose environment holds `PADDOCK_SOAK=<token>`, as
/// `(pid, NOMAD_ALLOC_ID)`.
pub fn soak_processes(token: &str) -> Vec<(u32, String)> {
    let mark = format!("PADDOCK_SOAK={token}");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for pid in procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        if !vars.iter().any(|v| *v == mark.as_bytes()) {
            continue;
        }
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if zombie {
            continue;
        }
        let alloc = vars
            .iter()
            .find_map(|v| v.strip_prefix(b"NOMAD_ALLOC_ID="))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        out.push((pid, alloc));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_memories_before_a_large_guard_count_as_wasm_slots() {
        // Mappings as a real agent has them: a heap, a wasm slot (read-write, then its
        // 4 GiB guard), a thread stack (a small guard, read-write, another guard), code.
        const SMAPS: &str = "\
5600000000-5600100000 rw-p 00000000 00:00 0                  [heap]
Rss:                 900 kB
7b7170105000-7b7173f10000 rw-p 00000000 00:00 0
Size:              63540 kB
Rss:               15400 kB
7b7173f10000-7b7271f10000 ---p 00000000 00:00 0
Rss:                   0 kB
7f0000000000-7f0000001000 ---p 00000000 00:00 0
Rss:                   0 kB
7f0000001000-7f0000201000 rw-p 00000000 00:00 0
Rss:                  64 kB
7f0000201000-7f0000202000 ---p 00000000 00:00 0
Rss:                   0 kB
7f0000300000-7f0000400000 r-xp 00000000 fe:00 10010739                   /usr/bin/agent
Rss:                2000 kB
";
        assert_eq!(super::slots_in_smaps(SMAPS), 15400);
        assert_eq!(super::slots_in_smaps(""), 0);
    }
}
