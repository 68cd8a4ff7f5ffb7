//! Shared test harness: runtimes and agents on temp dirs, HTTP on port 0, a compile cache
//! shared by all tests so each component is compiled once per test run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use paddock::agent::{Agent, AgentOptions};
use paddock::config::AgentConfig;
use paddock::drivermanager::{DriverManager, DriverServices};
use paddock::runtime::{ComponentSettings, ComponentSource, Grants, LoadedComponent, Runtime};
use serde_json::{Value, json};

mod cargo;
mod python;
mod report;
pub use cargo::{cargo, contract_dir, path_with_agent, repo_root, shared_build_dir};
pub use python::python_with;
pub use report::{alloc_summary, eval_summary};

/// One compile cache dir for the whole test binary.
pub fn shared_cache_dir() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .to_path_buf()
}

/// The agent binary the process tests run: `PADDOCK_AGENT_BIN` when set (a wrapper, as
/// `tests/stress/slow-fsync` uses), else the one cargo built.
pub fn agent_bin() -> PathBuf {
    std::env::var_os("PADDOCK_AGENT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_paddock-agent")))
}

/// Settings for a component with the given grants and a short deadline.
pub fn settings(grants: Grants, timeout: Duration, config: serde_json::Value) -> ComponentSettings {
    ComponentSettings {
        grants,
        memory_bytes: Some(32 << 20),
        call_timeout: Some(timeout),
        config,
        ..Default::default()
    }
}

/// A runtime and the driver services its host interfaces reach.
#[derive(Clone)]
pub struct TestRuntime {
    rt: Arc<Runtime>,
    pub services: Arc<DriverServices>,
}

impl std::ops::Deref for TestRuntime {
    type Target = Arc<Runtime>;
    fn deref(&self) -> &Arc<Runtime> {
        &self.rt
    }
}

impl TestRuntime {
    /// A driver manager over this runtime and its services.
    pub fn driver_manager(&self) -> Arc<DriverManager> {
        DriverManager::new(self.rt.clone(), self.services.clone())
    }
}

/// A runtime with settings by component name.
pub fn runtime(components: BTreeMap<String, ComponentSettings>) -> TestRuntime {
    let host = paddock::pluginhost::PluginHost::build(paddock::pluginhost::PluginHostOptions {
        cache_dir: Some(shared_cache_dir()),
        settings: components,
        ..Default::default()
    })
    .unwrap();
    TestRuntime {
        rt: host.runtime,
        services: host.services,
    }
}

/// Load an artifact into a runtime.
pub async fn load(rt: &Runtime, a: guest_artifacts::Artifact) -> Arc<LoadedComponent> {
    rt.load(
        ComponentSource::BuiltIn(a.file_name.into()),
        Arc::from(a.bytes),
    )
    .await
    .unwrap_or_else(|r| panic!("{r}"))
}

/// An agent serving HTTP on an ephemeral loopback port.
pub struct TestAgent {
    pub agent: Arc<Agent>,
    pub base: String,
    pub http: reqwest::Client,
    pub _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestAgent {
    /// Start with a config (HCL) and component folders.
    pub async fn start(config_hcl: &str, components: Vec<PathBuf>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // The config is a real file, so that a reload (SIGHUP, `POST /v1/agent/reload`)
        // reads it again.
        let config_file = dir.path().join("test.hcl");
        std::fs::write(&config_file, config_hcl).unwrap();
        let mut config = AgentConfig::parse(config_hcl, "test.hcl").unwrap();
        // The node offers the data dir's free space as disk (300 MB per group by default):
        // tests would otherwise depend on how full the machine's disk is.
        config.client.disk_total_mb.get_or_insert(NODE_DISK_MB);
        let agent = Agent::start(AgentOptions {
            data_dir: Some(dir.path().to_path_buf()),
            components,
            dev: true,
            config,
            config_file: config_file.display().to_string(),
            cache_dir: Some(shared_cache_dir()),
            executor_program: Some(agent_bin()),
            ..Default::default()
        })
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let a = agent.clone();
        tokio::spawn(async move {
            paddock::api::serve(a, listener, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Self {
            agent,
            base,
            http: reqwest::Client::new(),
            _dir: dir,
            _stop: tx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn post_job(&self, job: serde_json::Value) -> reqwest::Response {
        self.http
            .post(self.url("/v1/jobs"))
            .json(&serde_json::json!({ "Job": job }))
            .send()
            .await
            .unwrap()
    }

    /// Register `job` (200 expected) and read the evaluation it made.
    pub async fn register(&self, job: serde_json::Value) -> serde_json::Value {
        let r = self.post_job(job).await;
        assert_eq!(r.status(), 200);
        let body: serde_json::Value = r.json().await.unwrap();
        self.eval_done(body["EvalID"].as_str().unwrap()).await
    }

    /// The evaluation `id` once it is no longer `pending` (registration answers before
    /// it places), followed with blocking queries as Nomad's clients do.
    pub async fn eval_done(&self, id: &str) -> serde_json::Value {
        let mut index = 0u64;
        for _ in 0..100 {
            let r = self
                .http
                .get(self.url(&format!("/v1/evaluation/{id}?index={index}&wait=2s")))
                .send()
                .await
                .unwrap();
            index = r.headers()["X-Nomad-Index"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let eval: serde_json::Value = r.json().await.unwrap();
            if eval["Status"] != "pending" {
                return eval;
            }
        }
        panic!("evaluation {id} still pending")
    }

    /// `POST path` with a JSON body: the status and the answer (JSON, or the text as a
    /// JSON string when it is not JSON).
    pub async fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// A request with an optional JSON body: the status and the answer (JSON, or the
    /// text as a JSON string).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self.http.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        (status, v)
    }

    /// `GET path` as text (a page, Prometheus metrics).
    pub async fn text(&self, path: &str) -> String {
        reqwest::get(self.url(path))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> serde_json::Value {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// Poll a job's allocations until `done(allocs)` or the timeout.
    pub async fn wait_allocs(
        &self,
        job: &str,
        timeout: Duration,
        done: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let v = self.get(&format!("/v1/job/{job}/allocations")).await;
            let allocs = v.as_array().cloned().unwrap_or_default();
            if done(&allocs) {
                return allocs;
            }
            if tokio::time::Instant::now() >= deadline {
                let evals = self.get(&format!("/v1/job/{job}/evaluations")).await;
                panic!(
                    "timed out waiting on job {job}: {}\n{}\n{allocs:#?}",
                    eval_summary(&evals),
                    alloc_summary(&allocs)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl TestAgent {
    /// Allocation `id`, read in full once it is terminal and every task in it is dead
    /// (`alloc stop` places a replacement: the job's other allocations may run on).
    pub async fn alloc_done(&self, id: &str) -> serde_json::Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let a = self.get(&format!("/v1/allocation/{id}")).await;
            if all_terminal(std::slice::from_ref(&a)) {
                return a;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "allocation {id} did not end: {a}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The first allocation of `job`, read in full once every task in it is dead.
    pub async fn finished_alloc(&self, job: &str) -> serde_json::Value {
        let allocs = self
            .wait_allocs(job, Duration::from_secs(30), all_terminal)
            .await;
        self.get(&format!(
            "/v1/allocation/{}",
            allocs[0]["ID"].as_str().unwrap()
        ))
        .await
    }
}

/// Every allocation settled (complete or failed) and every task in it dead.
pub fn all_terminal(allocs: &[serde_json::Value]) -> bool {
    !allocs.is_empty()
        && allocs.iter().all(|a| {
            matches!(a["ClientStatus"].as_str(), Some("complete" | "failed"))
                && a["TaskStates"]
                    .as_object()
                    .is_some_and(|m| m.values().all(|s| s["State"] == "dead"))
        })
}

/// Event types of a task in an allocation, in order.
pub fn event_types(alloc: &serde_json::Value, task: &str) -> Vec<String> {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .map(|evs| {
            evs.iter()
                .map(|e| e["Type"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A one-task mock job.
pub fn mock_job(id: &str, config: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "ID": id,
        "Type": "batch",
        "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 }, "Tasks": [{ "Name": "t", "Driver": "mock", "Config": config }] }]
    })
}

/// A finished job's first allocation and the stdout of its task `t`.
pub async fn stdout_of(t: &TestAgent, job: &str) -> (serde_json::Value, String) {
    let allocs = t
        .wait_allocs(job, Duration::from_secs(20), all_terminal)
        .await;
    let id = allocs[0]["ID"].as_str().unwrap();
    let a = t.get(&format!("/v1/allocation/{id}")).await;
    let out = std::fs::read_to_string(t.agent.alloc_root().join(id).join("alloc/logs/t.stdout.0"))
        .unwrap_or_default();
    (a, out)
}

/// The last `Terminated` event of `task` in an allocation's JSON.
pub fn last_terminated(alloc: &serde_json::Value, task: &str) -> serde_json::Value {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["Type"] == "Terminated")
        .cloned()
        .unwrap_or_else(|| panic!("no Terminated event: {alloc:#}"))
}

/// A folder holding the `fixture-env` hook, as `fixture-env.wasm` (the file its
/// `plugin "fixture-env"` settings are bound to by its name).
pub fn fixture_env_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let a = guest_artifacts::FIXTURE_ENV_HOOK;
    std::fs::write(dir.path().join("fixture-env.wasm"), a.bytes).unwrap();
    dir
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// A client block that offers a node disk independent of the machine's free space.
pub const NODE_DISK: &str = "client {\n  disk_total_mb = 1000000\n}\n";
/// The same disk, for agents whose config is built in the test.
pub const NODE_DISK_MB: u64 = 1_000_000;

/// The pid a task wrote to `file`, once it is there.
pub async fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            return p;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The real agent binary on a fixed port and data dir (`<dir>/data`, its log in
/// `<dir>/agent.log`), restartable: for what must survive the process.
pub struct AgentProcess {
    pub dir: PathBuf,
    pub port: u16,
    /// Extra arguments of `agent run`.
    pub args: Vec<String>,
    /// Extra environment of the agent process.
    pub env: Vec<(String, String)>,
    child: Option<Child>,
    pub http: reqwest::Client,
}

impl AgentProcess {
    pub fn new(dir: &Path) -> Self {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self {
            dir: dir.to_path_buf(),
            port,
            args: Vec::new(),
            env: Vec::new(),
            child: None,
            http: reqwest::Client::new(),
        }
    }

    /// An agent started in `dir` with `config` as its config file (which replaces the
    /// harness's own: give the node's disk in it when placement needs one).
    pub async fn with_config(dir: &Path, config: &str) -> Self {
        let file = dir.join("agent-config.hcl");
        std::fs::write(&file, config).unwrap();
        let mut a = Self::new(dir);
        a.args = vec!["--config".into(), file.display().to_string()];
        a.start().await;
        a
    }

    pub async fn start(&mut self) {
        self.spawn();
        self.wait_up().await;
    }

    /// Start the agent process without waiting for its API.
    pub fn spawn(&mut self) {
        if !self.args.iter().any(|a| a == "--config") {
            // The node offers the data dir's free space as disk, 300 MB per group by
            // default: tests placing 20 tasks would depend on the machine's free disk.
            let config = self.dir.join("harness-agent.hcl");
            std::fs::write(&config, NODE_DISK).unwrap();
            self.args
                .extend(["--config".into(), config.display().to_string()]);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("agent.log"))
            .unwrap();
        let mut cmd = Command::new(agent_bin());
        cmd.args(["run", "--dev", "--data-dir"])
            .arg(self.dir.join("data"))
            .args(["--bind", &format!("127.0.0.1:{}", self.port)]);
        // Every agent of the run shares one compile cache: each built-in is compiled once
        // per run, not once per agent (a debug agent takes seconds for each). An agent
        // from before the flag (the attack suite's baseline) compiles its own.
        if std::env::var_os("PADDOCK_ATTACK_BASELINE").is_none() {
            cmd.arg("--cache-dir").arg(shared_cache_dir());
        }
        let child = cmd
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Wait for the agent's API to answer (two minutes at most).
    pub async fn wait_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = self.http.get(self.url("/v1/agent/health")).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the agent did not come up: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn kill9(&mut self) {
        let mut c = self.child.take().expect("running");
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
    }

    /// A graceful stop (SIGINT, as Ctrl-C or `systemctl stop` with KillMode=process).
    pub fn interrupt(&mut self) {
        self.stop_by("INT");
    }

    /// Sends `signal` (`INT`, `TERM`) and waits, 20 s at most, for the agent to exit.
    pub fn stop_by(&mut self, signal: &str) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        let pid = rustix_pid(c.id());
        let _ = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the agent did not stop on SIG{signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The agent's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub async fn get(&self, path: &str) -> Value {
        self.http
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn post_job(&self, job: Value) {
        let r = self
            .http
            .post(self.url("/v1/jobs"))
            .json(&json!({ "Job": job }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    /// Poll the job's allocations until `done`.
    pub async fn wait_allocs(&self, job: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.get(&format!("/v1/job/{job}/allocations")).await;
            let allocs = v.as_array().cloned().unwrap_or_default();
            if done(&allocs) {
                return allocs;
            }
            if Instant::now() >= deadline {
                let evals = self.get(&format!("/v1/job/{job}/evaluations")).await;
                panic!(
                    "timed out on {job}: {}\n{}\n{allocs:#?}",
                    eval_summary(&evals),
                    alloc_summary(&allocs)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn alloc(&self, id: &str) -> Value {
        self.get(&format!("/v1/allocation/{id}")).await
    }

    /// What a task of allocation `alloc` wrote to stdout.
    pub async fn stdout(&self, alloc: &str, task: &str) -> String {
        self.http
            .get(self.url(&format!(
                "/v1/client/fs/logs/{alloc}?task={task}&type=stdout&plain=true"
            )))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        reap_executor(&self.dir.join("data"));
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        reap_executor(self._dir.path());
    }
}

pub use paddock_tests::procs::reap_executor;

fn rustix_pid(pid: u32) -> String {
    pid.to_string()
}

/// The events of an event stream (`url`, with its query), read until `done` holds of them
/// (or fail after 30 s).
pub async fn stream_events(url: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut r = reqwest::Client::new().get(url).send().await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    let (mut buf, mut events) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(&events) {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, r.chunk())
            .await
            .unwrap_or_else(|_| panic!("only {events:#?}"))
            .unwrap()
            .unwrap();
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let v: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            events.extend(v["Events"].as_array().cloned().unwrap_or_default());
        }
    }
    events
}
