//! The agent under load and the harness's HTTP client: this build's release `agent`
//! binary with its redb state in a temp dir, driven only through the API on 127.0.0.1.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::STEP_LIMIT;

pub struct Agent {
    child: Child,
    pub base: String,
    port: u16,
    data: PathBuf,
    dir: tempfile::TempDir,
    /// `client { alloc_dir }` when LOAD_ALLOC_DIR set one; removed at the end.
    alloc_dir: Option<PathBuf>,
}

impl Agent {
    fn spawn(data: &std::path::Path, port: u16, config: &std::path::Path) -> Child {
        Command::new(env!("CARGO_BIN_EXE_agent"))
            .args(["run", "--dev", "--data-dir"])
            .arg(data)
            .args(["--bind", &format!("127.0.0.1:{port}"), "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the agent")
    }

    /// `kill -9` the agent and start it again on the same data dir and port.
    pub fn kill9_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Self::spawn(&self.data, self.port, &self.dir.path().join("load.hcl"));
    }

    pub fn start() -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Room for every mock task: the node's own totals would stop placement at a few
        // hundred tasks of the smallest size.
        // LOAD_ALLOC_DIR puts the allocation dirs under a folder of their own (a fresh one
        // per agent), apart from the state DB: `client { alloc_dir }`.
        let alloc_dir = std::env::var("LOAD_ALLOC_DIR")
            .ok()
            .map(|d| std::path::Path::new(&d).join(format!("load-{port}")));
        let alloc_line = alloc_dir
            .as_ref()
            .map(|d| format!("  alloc_dir = {:?}\n", d.display().to_string()))
            .unwrap_or_default();
        let config = dir.path().join("load.hcl");
        std::fs::write(
            &config,
            format!("client {{\n  cpu_total_compute = 100000000\n  memory_total_mb = 100000000\n  disk_total_mb = 100000000\n{alloc_line}}}\n"),
        )
        .unwrap();
        let data = dir.path().join("data");
        let child = Self::spawn(&data, port, &config);
        Agent {
            child,
            base: format!("http://127.0.0.1:{port}"),
            port,
            data,
            dir,
            alloc_dir,
        }
    }

    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn state_bytes(&self) -> u64 {
        std::fs::metadata(self.data.join("state.redb")).map_or(0, |m| m.len())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.alloc_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
}

impl Client {
    pub async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// Register a job; returns its evaluation's id.
    pub async fn register(&self, body: &Value) -> String {
        let r = self
            .http
            .post(format!("{}/v1/jobs", self.base))
            .json(body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "register: {}", r.status());
        let v: Value = r.json().await.unwrap();
        v["EvalID"].as_str().unwrap_or_default().to_string()
    }

    /// A counter of `/v1/metrics`, 0 when absent.
    pub async fn counter(&self, name: &str) -> f64 {
        let m = self.get("/v1/metrics").await;
        m["Counters"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["Name"] == name))
            .and_then(|c| c["Count"].as_f64())
            .unwrap_or(0.0)
    }

    /// Running tasks of job `id`, from its summary.
    pub async fn running(&self, id: &str) -> u64 {
        let s = self.get(&format!("/v1/job/{id}/summary")).await;
        s["Summary"]["g"]["Running"].as_u64().unwrap_or(0)
    }

    /// Allocations whose client status is `running`, of all there are.
    pub async fn running_allocs(&self) -> (usize, usize) {
        let v = self.get("/v1/allocations?task_states=false").await;
        let all = v.as_array().map_or(0, Vec::len);
        let running = v.as_array().map_or(0, |a| {
            a.iter().filter(|a| a["ClientStatus"] == "running").count()
        });
        (running, all)
    }

    /// After a restart: how long until `want` allocations run again.
    pub async fn reattach_time(&self, want: usize) -> Duration {
        let t = Instant::now();
        self.wait_ready().await;
        loop {
            if self.running_allocs().await.0 >= want {
                return t.elapsed();
            }
            assert!(
                t.elapsed() < STEP_LIMIT,
                "not all {want} allocations reattached"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn delete(&self, path: &str) {
        let _ = self
            .http
            .delete(format!("{}{path}", self.base))
            .send()
            .await;
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self
            .http
            .get(format!("{}/v1/agent/self", self.base))
            .send()
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the agent did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
