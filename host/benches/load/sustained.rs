//! Load held for a while: registrations as fast as the agent takes them for a window of
//! time (task starts per second sustained), or at a fixed rate (submit → running latency),
//! with the API probed meanwhile as a user's dashboard or CLI would.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::agent::Client;
use crate::{STEP_LIMIT, job, ms, percentile};

/// Requests sent at once by the registering side.
const SENDERS: usize = 4;

/// What one sustained run measured.
pub struct Sustained {
    /// Tasks registered and running.
    pub tasks: u64,
    /// From the first registration until the last of them ran.
    pub secs: f64,
    pub probe: Probe,
    /// The state DB's write path over the run, per second.
    pub commits_per_s: f64,
    pub writes_per_s: f64,
    pub deduplicated_per_s: f64,
}

impl Sustained {
    pub fn starts_per_s(&self) -> f64 {
        self.tasks as f64 / self.secs
    }
}

/// API latencies seen while the load ran.
#[derive(Default)]
pub struct Probe {
    pub one_alloc: Vec<Duration>,
    pub page: Vec<Duration>,
    pub agent_self: Vec<Duration>,
}

impl Probe {
    pub fn line(&mut self) -> String {
        let part = |name: &str, v: &mut Vec<Duration>| {
            if v.is_empty() {
                return format!("{name}: none");
            }
            format!(
                "{name} p50 {:.2} ms p99 {:.2} ms (n={})",
                ms(percentile(v, 0.5)),
                ms(percentile(v, 0.99)),
                v.len()
            )
        };
        format!(
            "{}; {}; {}",
            part("GET /v1/allocation/{id}", &mut self.one_alloc),
            part("GET /v1/allocations?per_page=50", &mut self.page),
            part("GET /v1/agent/self", &mut self.agent_self)
        )
    }
}

/// Ask the API every 20 ms until `done`: one allocation, a page of the list, agent/self.
async fn probe(c: &Client, done: &AtomicBool) -> Probe {
    let mut p = Probe::default();
    let mut id = None::<String>;
    while !done.load(Ordering::Relaxed) {
        let t = Instant::now();
        let page = c.get("/v1/allocations?per_page=50").await;
        p.page.push(t.elapsed());
        if id.is_none() {
            id = page[0]["ID"].as_str().map(String::from);
        }
        if let Some(id) = &id {
            let t = Instant::now();
            c.get(&format!("/v1/allocation/{id}")).await;
            p.one_alloc.push(t.elapsed());
        }
        let t = Instant::now();
        c.get("/v1/agent/self").await;
        p.agent_self.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p
}

async fn state_counters(c: &Client) -> [f64; 3] {
    [
        c.counter("paddock.state.commits").await,
        c.counter("paddock.state.writes").await,
        c.counter("paddock.state.writes_deduplicated").await,
    ]
}

/// Register jobs of `size` mock tasks as fast as they are taken for `window`, keeping at
/// most `outstanding` tasks registered and not yet running, then wait until all run.
pub async fn sustained(c: &Client, prefix: &str, size: u32, window: Duration) -> Sustained {
    let before = state_counters(c).await;
    let outstanding = (u64::from(size.max(1)) * 20).max(500);
    let waiting: Mutex<VecDeque<String>> = Mutex::default();
    let (sent, running) = (AtomicU64::new(0), AtomicU64::new(0));
    let (sending_done, all_done) = (AtomicBool::new(false), AtomicBool::new(false));
    let next = AtomicU64::new(0);
    let t0 = Instant::now();
    let senders = (0..SENDERS).map(|_| async {
        while t0.elapsed() < window {
            let in_flight = sent.load(Ordering::Relaxed) - running.load(Ordering::Relaxed);
            if in_flight >= outstanding {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
            let id = format!("{prefix}-{}", next.fetch_add(1, Ordering::Relaxed));
            sent.fetch_add(u64::from(size), Ordering::Relaxed);
            c.register(&job(&id, size)).await;
            waiting.lock().unwrap().push_back(id);
        }
    });
    let sending = async {
        futures::future::join_all(senders).await;
        sending_done.store(true, Ordering::Relaxed);
    };
    // Jobs start about in the order they were registered: wait on the oldest.
    let confirm = async {
        loop {
            let front = waiting.lock().unwrap().pop_front();
            let Some(id) = front else {
                if sending_done.load(Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            };
            while c.running(&id).await < u64::from(size) {
                assert!(t0.elapsed() < window + STEP_LIMIT, "{id} never ran");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            running.fetch_add(u64::from(size), Ordering::Relaxed);
        }
        all_done.store(true, Ordering::Relaxed);
    };
    let (_, _, probe) = tokio::join!(sending, confirm, probe(c, &all_done));
    let secs = t0.elapsed().as_secs_f64();
    let after = state_counters(c).await;
    let per_s = |i: usize| (after[i] - before[i]) / secs;
    Sustained {
        tasks: running.load(Ordering::Relaxed),
        secs,
        probe,
        commits_per_s: per_s(0),
        writes_per_s: per_s(1),
        deduplicated_per_s: per_s(2),
    }
}

/// One-task jobs sent at `rate` per second for `window`; returns each one's submit →
/// running latency, from the harness's clock at the send to the `Started` event's time
/// (the same host clock), and the rate achieved.
pub async fn paced(c: &Client, prefix: &str, rate: f64, window: Duration) -> (Vec<Duration>, f64) {
    let total = (rate * window.as_secs_f64()) as u64;
    let next = AtomicU64::new(0);
    let sent: Mutex<Vec<(String, u64)>> = Mutex::default();
    let t0 = Instant::now();
    let senders = (0..SENDERS * 4).map(|_| async {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= total {
                break;
            }
            let at = t0 + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(at.into()).await;
            let id = format!("{prefix}-{i}");
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            c.register(&job(&id, 1)).await;
            sent.lock().unwrap().push((id, now));
        }
    });
    futures::future::join_all(senders).await;
    let achieved = total as f64 / t0.elapsed().as_secs_f64();
    let sent = sent.into_inner().unwrap();
    let mut out = Vec::with_capacity(sent.len());
    for (id, at) in sent {
        let started = loop {
            let allocs: Value = c.get(&format!("/v1/job/{id}/allocations")).await;
            let time = allocs[0]["TaskStates"]["t"]["Events"]
                .as_array()
                .and_then(|e| e.iter().find(|e| e["Type"] == "Started"))
                .and_then(|e| e["Time"].as_u64());
            if let Some(t) = time {
                break t;
            }
            assert!(t0.elapsed() < window + STEP_LIMIT, "{id} never ran");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        out.push(Duration::from_nanos(started.saturating_sub(at)));
    }
    (out, achieved)
}
