//! Checks of Nomad-native services, run by the client as Nomad's does
//! (`client/serviceregistration/checks`, `client/allocrunner/checks_hook.go`): an `http`
//! or `tcp` probe of the service's address, the first half an interval after the service
//! is registered, then every interval, each bounded by its timeout.
//!
//! One scheduler task holds every check in a queue ordered by its next run (the timer
//! wheel's job: a thousand checks cost one task and a heap, not a thread or a timer each);
//! each probe runs as a future of its own, so a slow one delays no other. Results are kept
//! per allocation and answered at `/v1/client/allocation/{id}/checks` in Nomad's
//! `CheckQueryResult` shape; the status turns `success` after `success_before_passing`
//! passing results in a row and `failure` after `failures_before_critical` failing ones.
//! `check_restart` restarts the task, through its restart policy (the restart counts as a
//! failure), after `limit` failing statuses in a row once `grace` has passed since it
//! started. A check stops when its service is deregistered, and its results go with it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Client;
use crate::structs::service::{CheckKind, CheckSpec};

/// Output kept of a probe's answer (Nomad's limit).
const OUTPUT_LIMIT: usize = 3 * 1024;

/// One check of one registered service, as the client runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    /// Nomad's check id: a hash of the allocation, group, task and the check's fields.
    pub id: String,
    pub alloc_id: String,
    pub group: String,
    /// The task whose service it is (none for a group's service).
    pub task: Option<String>,
    pub service: String,
    pub spec: CheckSpec,
    pub address: String,
    pub port: u16,
    /// Why the check may not probe its target (it is not one of the allocation's own
    /// ports on this node): it is never run and fails with this.
    pub refused: Option<String>,
}

impl Watch {
    /// The id Nomad's `NomadCheckID` would give: the allocation, group, task and the
    /// check's defining fields, hashed.
    pub fn make_id(
        alloc_id: &str,
        group: &str,
        task: &str,
        service: &str,
        c: &CheckSpec,
    ) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for part in [
            alloc_id,
            group,
            task,
            service,
            &c.name,
            if c.kind == CheckKind::Http {
                "http"
            } else {
                "tcp"
            },
            &c.port_label,
            &c.on_update,
            &c.address_mode,
            &c.protocol,
            &c.path,
            &c.method,
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        h.update(c.interval.as_nanos().to_be_bytes());
        h.update(c.timeout.as_nanos().to_be_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The task `check_restart` restarts: the service's task, else the check's `task`.
    fn restart_task(&self) -> Option<&str> {
        self.task
            .as_deref()
            .or((!self.spec.task.is_empty()).then_some(self.spec.task.as_str()))
    }
}

/// Nomad's `CheckQueryResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct CheckResult {
    #[serde(rename = "ID")]
    pub id: String,
    /// `healthiness`, or `readiness` for a check with `on_update = "ignore"`.
    pub mode: &'static str,
    /// `success`, `failure` or `pending`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "is_zero")]
    pub status_code: u16,
    pub output: String,
    /// When, seconds since the Unix epoch.
    pub timestamp: i64,
    pub group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task: String,
    pub service: String,
    pub check: String,
}

fn is_zero(n: &u16) -> bool {
    *n == 0
}

/// A probe's outcome.
struct Outcome {
    ok: bool,
    code: u16,
    output: String,
}

/// A check and where it stands.
struct State {
    watch: Watch,
    result: CheckResult,
    /// Passing and failing probes in a row.
    passes: u32,
    fails: u32,
    /// Failing statuses in a row, for `check_restart`.
    unhealthy: u32,
    /// Since when the status is `success` (ns since the epoch).
    passing_since: Option<u64>,
    /// Which schedule of this check a queued run belongs to.
    generation: u64,
}

#[derive(Default)]
struct Inner {
    checks: HashMap<String, State>,
    by_alloc: HashMap<String, BTreeSet<String>>,
    /// (due, generation, check id), soonest first; entries of removed or replaced checks
    /// are dropped when they come up.
    queue: BinaryHeap<Reverse<(Instant, u64, String)>>,
    next_generation: u64,
}

/// Every check the client runs.
pub struct Checks {
    inner: Mutex<Inner>,
    /// Told when a check's status turns (the deployment health tracker).
    on_turn: Option<Arc<tokio::sync::Notify>>,
    /// Probes run since the agent started: passed, failed.
    probes: [std::sync::atomic::AtomicU64; 2],
    wake: tokio::sync::Notify,
    http: reqwest::Client,
    /// For https checks with `tls_skip_verify`: any certificate is accepted.
    http_unverified: reqwest::Client,
    /// Check components, for checks whose `type` names one.
    components: Option<Arc<crate::checkcomponents::CheckComponents>>,
}

impl Default for Checks {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            on_turn: None,
            probes: Default::default(),
            wake: tokio::sync::Notify::new(),
            http: http_client(false),
            http_unverified: http_client(true),
            components: None,
        }
    }
}

/// The checks' HTTP client: no redirects followed, Nomad's user agent, the web PKI's roots
/// for https (or any certificate, for `tls_skip_verify`).
fn http_client(skip_verify: bool) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "Nomad/1.9.0 (paddock ",
            env!("CARGO_PKG_VERSION"),
            ")"
        ))
        .danger_accept_invalid_certs(skip_verify)
        .build()
        .expect("an HTTP client")
}

fn now_secs() -> i64 {
    (crate::util::now_nanos() / 1_000_000_000) as i64
}

fn pending(w: &Watch) -> CheckResult {
    let status = match w.spec.initial_status.as_str() {
        "passing" => "success",
        "critical" => "failure",
        _ => "pending",
    };
    CheckResult {
        id: w.id.clone(),
        mode: if w.spec.on_update == "ignore" {
            "readiness"
        } else {
            "healthiness"
        },
        status,
        status_code: 0,
        output: "nomad: check has not run yet".into(),
        timestamp: now_secs(),
        group: w.group.clone(),
        task: w.task.clone().unwrap_or_default(),
        service: w.service.clone(),
        check: w.spec.name.clone(),
    }
}

impl Checks {
    /// Checks that tell `on_turn` each time a status turns.
    pub fn with_turns(on_turn: Arc<tokio::sync::Notify>) -> Self {
        Self {
            on_turn: Some(on_turn),
            ..Self::default()
        }
    }

    /// The check components loaded now, sorted.
    pub fn component_names(&self) -> Vec<String> {
        self.components
            .as_ref()
            .map(|c| c.names())
            .unwrap_or_default()
    }

    /// [`Checks::with_turns`], running custom checks with `components`.
    pub fn new(
        on_turn: Arc<tokio::sync::Notify>,
        components: Arc<crate::checkcomponents::CheckComponents>,
    ) -> Self {
        Self {
            components: Some(components),
            ..Self::with_turns(on_turn)
        }
    }

    /// What the allocation's checks say of its health (those of `on_update = "ignore"`
    /// do not count, as Nomad's readiness checks do not).
    pub fn health(&self, alloc_id: &str) -> crate::client::health::ChecksHealth {
        use crate::client::health::ChecksHealth;
        let inner = self.inner.lock().unwrap();
        let mut since = None;
        for id in inner.by_alloc.get(alloc_id).into_iter().flatten() {
            let Some(s) = inner.checks.get(id) else {
                continue;
            };
            if s.watch.spec.on_update == "ignore" {
                continue;
            }
            match s.passing_since {
                Some(t) if s.result.status == "success" => {
                    since = Some(since.map_or(t, |x: u64| x.max(t)))
                }
                _ => return ChecksHealth::NotPassing,
            }
        }
        since.map_or(ChecksHealth::None, ChecksHealth::PassingSince)
    }

    /// Run exactly `watches` for allocation `alloc_id`: new ones start (first run at half
    /// their interval), changed ones start again, missing ones stop and their results go.
    pub fn set(&self, alloc_id: &str, watches: Vec<Watch>) {
        let mut guard = self.inner.lock().unwrap();
        let inner = &mut *guard;
        let keep: BTreeSet<String> = watches.iter().map(|w| w.id.clone()).collect();
        let held = inner.by_alloc.remove(alloc_id).unwrap_or_default();
        for id in held.difference(&keep) {
            inner.checks.remove(id);
        }
        let now = Instant::now();
        let mut started = false;
        for w in watches {
            if inner.checks.get(&w.id).is_some_and(|s| s.watch == w) {
                continue;
            }
            inner.next_generation += 1;
            let generation = inner.next_generation;
            let mut result = pending(&w);
            match &w.refused {
                None => inner.queue.push(Reverse((
                    now + w.spec.interval / 2,
                    generation,
                    w.id.clone(),
                ))),
                Some(why) => {
                    tracing::warn!(alloc_id = %alloc_id, check = %w.spec.name, reason = %why, "check refused");
                    result.status = "failure";
                    result.output = format!("nomad: check refused: {why}");
                }
            }
            inner.checks.insert(
                w.id.clone(),
                State {
                    result,
                    watch: w,
                    passes: 0,
                    fails: 0,
                    unhealthy: 0,
                    passing_since: None,
                    generation,
                },
            );
            started = true;
        }
        if !keep.is_empty() {
            inner.by_alloc.insert(alloc_id.to_string(), keep);
        }
        drop(guard);
        if started {
            self.wake.notify_one();
        }
    }

    /// An allocation's check results by check id.
    pub fn results(&self, alloc_id: &str) -> BTreeMap<String, CheckResult> {
        let inner = self.inner.lock().unwrap();
        inner
            .by_alloc
            .get(alloc_id)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.checks.get(id))
            .map(|s| (s.watch.id.clone(), s.result.clone()))
            .collect()
    }

    /// Checks by status (`success`, `failure`, `pending`, each present), and the probes
    /// run since the agent started: (passed, failed).
    pub fn counts(&self) -> ([(&'static str, usize); 3], u64, u64) {
        let inner = self.inner.lock().unwrap();
        let count = |st: &str| {
            inner
                .checks
                .values()
                .filter(|s| s.result.status == st)
                .count()
        };
        let by = [
            ("success", count("success")),
            ("failure", count("failure")),
            ("pending", count("pending")),
        ];
        let get = |i: usize| self.probes[i].load(std::sync::atomic::Ordering::Relaxed);
        (by, get(0), get(1))
    }

    /// How many checks run.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().checks.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The checks due now (each taken out of the queue), and how long until the next.
    fn due(&self) -> (Vec<(u64, Watch)>, Option<Duration>) {
        let mut inner = self.inner.lock().unwrap();
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(Reverse((at, generation, id))) = inner.queue.peek().cloned() {
            let current = inner
                .checks
                .get(&id)
                .filter(|s| s.generation == generation)
                .map(|s| s.watch.clone());
            let Some(watch) = current else {
                inner.queue.pop();
                continue;
            };
            if at > now {
                return (due, Some(at - now));
            }
            inner.queue.pop();
            due.push((generation, watch));
        }
        (due, None)
    }

    /// Record a probe's outcome and queue the check's next run; what `check_restart` asks
    /// for, if anything: (allocation, task or none for all, reason).
    fn record(
        &self,
        id: &str,
        generation: u64,
        o: Outcome,
    ) -> Option<(String, Option<String>, String)> {
        self.probes[usize::from(!o.ok)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut inner = self.inner.lock().unwrap();
        let state = inner
            .checks
            .get_mut(id)
            .filter(|s| s.generation == generation)?;
        let spec = &state.watch.spec;
        let before = state.result.status;
        if o.ok {
            state.passes += 1;
            state.fails = 0;
            if state.passes >= spec.success_before_passing {
                state.result.status = "success";
            }
        } else {
            state.fails += 1;
            state.passes = 0;
            if state.fails >= spec.failures_before_critical {
                state.result.status = "failure";
            }
        }
        let turned = state.result.status != before;
        if turned {
            state.passing_since = (state.result.status == "success").then(crate::util::now_nanos);
        }
        state.result.status_code = o.code;
        state.result.output = o.output;
        state.result.timestamp = now_secs();
        let mut restart = None;
        if let Some(r) = &spec.restart {
            if state.result.status == "failure" {
                state.unhealthy += 1;
            } else {
                state.unhealthy = 0;
            }
            if state.unhealthy >= r.limit {
                state.unhealthy = 0;
                restart = Some((
                    state.watch.alloc_id.clone(),
                    state.watch.restart_task().map(str::to_string),
                    format!("healthcheck: check {:?} unhealthy", spec.name),
                ));
            }
        }
        let next = Instant::now() + spec.interval;
        inner
            .queue
            .push(Reverse((next, generation, id.to_string())));
        drop(inner);
        // The scheduler may be asleep until a later run, or with nothing queued.
        self.wake.notify_one();
        if turned && let Some(n) = &self.on_turn {
            n.notify_one();
        }
        restart
    }

    /// Forget the failing statuses a restart answered.
    fn restarted(&self, alloc_id: &str) {
        let mut inner = self.inner.lock().unwrap();
        let ids: Vec<String> = inner
            .by_alloc
            .get(alloc_id)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for id in ids {
            if let Some(s) = inner.checks.get_mut(&id) {
                s.unhealthy = 0;
            }
        }
    }

    /// One probe.
    async fn probe(&self, w: &Watch) -> Outcome {
        let host = if w.address.contains(':') {
            format!("[{}]", w.address)
        } else {
            w.address.clone()
        };
        let spec = &w.spec;
        let fail = |output: String| Outcome {
            ok: false,
            code: 0,
            output,
        };
        match spec.kind {
            CheckKind::Component => {
                use crate::checkcomponents::{CheckStatus, CheckTarget};
                let Some(components) = &self.components else {
                    return fail(format!(
                        "check component {:?}: this agent runs no check components",
                        spec.component
                    ));
                };
                let target = CheckTarget {
                    address: w.address.clone(),
                    port: w.port,
                    service_name: w.service.clone(),
                    check_name: spec.name.clone(),
                    alloc_id: w.alloc_id.clone(),
                    task_name: w.task.clone().unwrap_or_default(),
                };
                match components
                    .probe(&spec.component, &target, &spec.config, spec.timeout)
                    .await
                {
                    Ok(a) => Outcome {
                        // Nomad's native checks know success and failure only: a warning
                        // passes, and its output says it was one.
                        ok: a.status != CheckStatus::Critical,
                        code: 0,
                        output: match a.status {
                            CheckStatus::Warning => format!("warning: {}", a.output),
                            _ => a.output,
                        },
                    },
                    Err(e) => fail(e.to_string()),
                }
            }
            CheckKind::Tcp => {
                let connect = tokio::net::TcpStream::connect((w.address.as_str(), w.port));
                match tokio::time::timeout(spec.timeout, connect).await {
                    Ok(Ok(_)) => Outcome {
                        ok: true,
                        code: 0,
                        output: "nomad: tcp ok".into(),
                    },
                    Ok(Err(e)) => fail(format!("dial tcp {host}:{}: {e}", w.port)),
                    Err(_) => fail(format!("dial tcp {host}:{}: i/o timeout", w.port)),
                }
            }
            CheckKind::Http => {
                let url = format!("{}://{host}:{}{}", spec.protocol, w.port, spec.path);
                let method = reqwest::Method::from_bytes(spec.method.as_bytes())
                    .unwrap_or(reqwest::Method::GET);
                let client = if spec.tls_skip_verify {
                    &self.http_unverified
                } else {
                    &self.http
                };
                let mut req = client.request(method, &url).timeout(spec.timeout);
                for (k, values) in &spec.headers {
                    for v in values {
                        req = req.header(k.as_str(), v.as_str());
                    }
                }
                if !spec.body.is_empty() {
                    req = req.body(spec.body.clone());
                }
                match req.send().await {
                    Err(e) if e.is_timeout() => fail(format!("nomad: Get {url:?}: timeout")),
                    Err(e) => {
                        // reqwest's message leaves out why (a certificate, a refused connect).
                        let mut text = format!("nomad: {e}");
                        let mut cause = std::error::Error::source(&e);
                        while let Some(c) = cause {
                            text.push_str(&format!(": {c}"));
                            cause = c.source();
                        }
                        fail(text)
                    }
                    Ok(r) => {
                        let code = r.status().as_u16();
                        let body = r.bytes().await.unwrap_or_default();
                        let mut output =
                            String::from_utf8_lossy(&body[..body.len().min(OUTPUT_LIMIT)])
                                .into_owned();
                        if code == 200 {
                            output = "nomad: http ok".into();
                        }
                        Outcome {
                            ok: code < 400,
                            code,
                            output,
                        }
                    }
                }
            }
        }
    }
}

impl Client {
    /// Run the checks, for as long as the client lives.
    pub fn spawn_checks(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let checks = self.checks.clone();
        self.work.spawn(async move {
            loop {
                let (due, wait) = checks.due();
                for (generation, w) in due {
                    let (checks, weak) = (checks.clone(), weak.clone());
                    tokio::spawn(async move {
                        let o = checks.probe(&w).await;
                        if let Some(restart) = checks.record(&w.id, generation, o) {
                            restart_for_check(&weak, &checks, &w, restart);
                        }
                    });
                }
                if weak.strong_count() == 0 {
                    return;
                }
                let wait = wait.unwrap_or(Duration::from_secs(3600));
                let _ = tokio::time::timeout(wait, checks.wake.notified()).await;
            }
        });
    }

    /// The check components loaded now (what a check's `type` may name besides Nomad's).
    pub fn check_component_names(&self) -> Vec<String> {
        self.checks.component_names()
    }

    /// An allocation's check results.
    pub fn check_results(&self, alloc_id: &str) -> BTreeMap<String, CheckResult> {
        self.checks.results(alloc_id)
    }

    /// The checks the client runs.
    pub fn checks(&self) -> &Arc<Checks> {
        &self.checks
    }
}

/// `check_restart`: restart the task (every running task for a group's check without
/// one), unless it started less than `grace` ago.
fn restart_for_check(
    weak: &Weak<Client>,
    checks: &Checks,
    w: &Watch,
    (alloc_id, task, reason): (String, Option<String>, String),
) {
    let Some(client) = weak.upgrade() else { return };
    let Some(runner) = client.runner(&alloc_id) else {
        return;
    };
    let grace = w.spec.restart.as_ref().map(|r| r.grace).unwrap_or_default();
    let now = crate::util::now_nanos();
    let mut restarted = false;
    for t in runner.tasks() {
        if task.as_deref().is_some_and(|n| n != t.name()) {
            continue;
        }
        let started = runner.shared().peek(|a| {
            a.task_states
                .get(t.name())
                .map(|s| s.started_at)
                .unwrap_or(0)
        });
        if now.saturating_sub(started) < grace.as_nanos() as u64 {
            tracing::debug!(alloc_id = %alloc_id, task = t.name(), "check unhealthy within its grace: not restarted");
            continue;
        }
        match t.restart_failed(&reason) {
            Ok(()) => {
                tracing::info!(alloc_id = %alloc_id, task = t.name(), check = %w.spec.name, "restarting the task: its check is unhealthy");
                restarted = true;
            }
            Err(e) => {
                tracing::debug!(alloc_id = %alloc_id, error = %e, "check_restart found the task not running")
            }
        }
    }
    if restarted {
        checks.restarted(&alloc_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structs::service::{CheckRestart, CheckSpec};

    fn watch(id: &str, passes: u32, fails: u32, limit: u32) -> Watch {
        let v = serde_json::json!({ "Name": id, "Type": "tcp", "Interval": 1_000_000_000u64,
            "Timeout": 1_000_000_000u64, "SuccessBeforePassing": passes, "FailuresBeforeCritical": fails });
        let mut spec = CheckSpec::from_json(&v, "svc", None).unwrap();
        if limit > 0 {
            spec.restart = Some(CheckRestart {
                limit,
                grace: Duration::ZERO,
                ignore_warnings: false,
            });
        }
        Watch {
            id: id.into(),
            alloc_id: "a".into(),
            group: "g".into(),
            task: Some("t".into()),
            service: "svc".into(),
            spec,
            address: "127.0.0.1".into(),
            port: 1,
            refused: None,
        }
    }

    fn generation(c: &Checks, id: &str) -> u64 {
        c.inner.lock().unwrap().checks[id].generation
    }

    fn outcome(ok: bool) -> Outcome {
        Outcome {
            ok,
            code: 0,
            output: String::new(),
        }
    }

    #[test]
    fn the_status_follows_its_thresholds_and_check_restart_its_limit() {
        let c = Checks::default();
        c.set("a", vec![watch("x", 2, 3, 4)]);
        let status = || c.results("a")["x"].status;
        assert_eq!(status(), "pending");
        let g = generation(&c, "x");
        c.record("x", g, outcome(true));
        assert_eq!(status(), "pending", "one pass of the two it needs");
        c.record("x", g, outcome(true));
        assert_eq!(status(), "success");
        c.record("x", g, outcome(false));
        c.record("x", g, outcome(false));
        assert_eq!(status(), "success", "two failures of the three it needs");
        assert!(c.record("x", g, outcome(false)).is_none());
        assert_eq!(status(), "failure");
        // Failing statuses in a row: the first counted above, three more reach the limit.
        assert!(c.record("x", g, outcome(false)).is_none());
        assert!(c.record("x", g, outcome(false)).is_none());
        let (alloc, task, why) = c.record("x", g, outcome(false)).expect("a restart");
        assert_eq!((alloc.as_str(), task.as_deref()), ("a", Some("t")));
        assert_eq!(why, "healthcheck: check \"x\" unhealthy");
        // A run queued for a replaced check is not recorded.
        c.set("a", vec![watch("x", 1, 1, 0)]);
        assert!(c.record("x", g, outcome(true)).is_none());
        assert_eq!(status(), "pending");
    }

    #[test]
    fn a_removed_check_takes_its_results_and_a_refused_one_never_runs() {
        let c = Checks::default();
        let mut refused = watch("r", 1, 1, 0);
        refused.refused = Some("not ours".into());
        c.set("a", vec![watch("x", 1, 1, 0), refused]);
        assert_eq!(c.results("a").len(), 2);
        assert_eq!(c.results("a")["r"].status, "failure");
        assert!(
            c.results("a")["r"]
                .output
                .contains("check refused: not ours")
        );
        // Only the allowed check is queued.
        let queued: Vec<String> = c
            .inner
            .lock()
            .unwrap()
            .queue
            .iter()
            .map(|Reverse((_, _, id))| id.clone())
            .collect();
        assert_eq!(queued, ["x"]);
        c.set("a", vec![]);
        assert!(c.results("a").is_empty());
        assert!(c.is_empty());
    }
}
